/* src/ir/clone.c: copying IR: value maps, copying a node (with its blocks)
 * into another graph, and exact graph clones. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "irimpl.h"

/* ---- value maps ------------------------------------------------------------------- */

struct ir_value_map {
  const ir_value **keys;
  ir_value **vals;
  int cap, count;
};

ir_value_map *ir_value_map_new(void) { return core_calloc(1, sizeof(ir_value_map)); }

void ir_value_map_free(ir_value_map *m) {
  if (!m) return;
  core_free(m->keys);
  core_free(m->vals);
  core_free(m);
}

static uint32_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

ir_value *ir_value_map_get(const ir_value_map *m, const ir_value *from) {
  if (!m->cap) return NULL;
  uint32_t mask = (uint32_t)m->cap - 1;
  for (uint32_t i = hash_ptr(from) & mask;; i = (i + 1) & mask) {
    if (!m->keys[i]) return NULL;
    if (m->keys[i] == from) return m->vals[i];
  }
}

int ir_value_map_set(ir_value_map *m, const ir_value *from, ir_value *to) {
  if ((m->count + 1) * 10 > m->cap * 7) {
    int cap = m->cap ? m->cap * 2 : 64;
    const ir_value **k = core_calloc((size_t)cap, sizeof *k);
    ir_value **v = core_calloc((size_t)cap, sizeof *v);
    if (!k || !v) {
      core_free(k);
      core_free(v);
      return KILN_ERR_NOMEM;
    }
    for (int i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      uint32_t j = hash_ptr(m->keys[i]) & (uint32_t)(cap - 1);
      while (k[j]) j = (j + 1) & (uint32_t)(cap - 1);
      k[j] = m->keys[i];
      v[j] = m->vals[i];
    }
    core_free(m->keys);
    core_free(m->vals);
    m->keys = k;
    m->vals = v;
    m->cap = cap;
  }
  uint32_t mask = (uint32_t)m->cap - 1, i = hash_ptr(from) & mask;
  while (m->keys[i] && m->keys[i] != from) i = (i + 1) & mask;
  if (!m->keys[i]) m->count++;
  m->keys[i] = from;
  m->vals[i] = to;
  return 0;
}

/* ---- copying ------------------------------------------------------------------------- */

/* How copied values are created: exact clones keep ids and names; copies
 * into another graph get fresh ids and uniquified names. */
typedef struct copier {
  ir_graph *dst;
  bool exact;
  ir_value_map *map;
} copier;

static ir_value *copy_value(copier *c, ir_node *owner, const ir_value *v) {
  const ir_type *t = ir_type_copy(c->dst, v->type);
  if (!t) return NULL;
  ir_value *nv = ir_value_new_raw(c->dst, t, c->exact ? v->id : c->dst->next_value_id);
  if (!nv || ir_node_push_output(owner, nv) < 0) return NULL;
  /* (a numeric name is an id: ir_value_set_name leaves the copy unnamed) */
  if (v->name) {
    int rc = c->exact ? ir_value_name_raw(nv, v->name, strlen(v->name))
                      : ir_value_set_name(nv, v->name);
    if (rc < 0) return NULL;
  }
  if (ir_value_map_set(c->map, v, nv) < 0) return NULL;
  return nv;
}

static ir_graph *clone_graph(const ir_graph *g);

static int copy_attr(ir_node *n, const ir_attr *a) {
  switch (a->kind) {
  case IR_ATTR_INT: return ir_node_set_i(n, a->name, a->i);
  case IR_ATTR_FLOAT: return ir_node_set_f(n, a->name, a->f);
  case IR_ATTR_STR: return ir_node_set_s(n, a->name, a->s);
  case IR_ATTR_INTS: return ir_node_set_is(n, a->name, a->ints.v, a->ints.n);
  case IR_ATTR_FLOATS: return ir_node_set_fs(n, a->name, a->floats.v, a->floats.n);
  case IR_ATTR_TYPE: return ir_node_set_ty(n, a->name, a->ty);
  case IR_ATTR_TYPES: return ir_node_set_tys(n, a->name, a->types.v, a->types.n);
  case IR_ATTR_IVALUE: return ir_node_set_iv(n, a->name, a->iv);
  case IR_ATTR_GRAPH: {
    ir_graph *sub = clone_graph(a->g);
    return sub ? ir_node_set_g(n, a->name, sub) : KILN_ERR_NOMEM;
  }
  }
  return KILN_ERR_INVALID;
}

static int copy_block(copier *c, const ir_block *src, ir_block *dst);

/* On failure the partial copy is unhooked from the values it used. */
static ir_node *copy_node(copier *c, const ir_node *n) {
  ir_node *m = ir_node_new_kind(c->dst, n->op, n->prim);
  if (!m) return NULL;
  m->line = n->line;
  m->col = n->col;
  if (n->overload && !(m->overload = ir_graph_strdup(c->dst, n->overload, strlen(n->overload))))
    goto fail;
  if (n->src && !(m->src = ir_graph_strdup(c->dst, n->src, strlen(n->src)))) goto fail;
  for (int i = 0; i < n->n_inputs; i++) {
    ir_value *v = ir_value_map_get(c->map, n->inputs[i]);
    if (!v) {
      char lb[64];
      if (n->inputs[i]->name) snprintf(lb, sizeof lb, "%%%s", n->inputs[i]->name);
      else snprintf(lb, sizeof lb, "%%%d", n->inputs[i]->id);
      core_error(KILN_ERR_INVALID, "ir_node_copy_into: input %d (%s) of %s is not mapped", i,
                 lb, ir_node_kind(n));
      goto fail;
    }
    if (ir_node_add_input(m, v) < 0) goto fail;
  }
  for (int i = 0; i < n->n_attrs; i++)
    if (copy_attr(m, &n->attrs[i]) < 0) goto fail;
  for (int b = 0; b < n->n_blocks; b++) {
    ir_block *nb = ir_node_add_block(m);
    if (!nb || copy_block(c, n->blocks[b], nb) < 0) goto fail;
  }
  for (int i = 0; i < n->n_outputs; i++)
    if (!copy_value(c, m, n->outputs[i])) goto fail;
  return m;
fail:
  ir_node_remove(m);
  return NULL;
}

static int copy_block(copier *c, const ir_block *src, ir_block *dst) {
  for (int i = 0; i < ir_block_n_params(src); i++)
    if (!copy_value(c, dst->param, ir_block_param(src, i))) return KILN_ERR_NOMEM;
  for (const ir_node *n = src->first; n; n = n->next) {
    ir_node *m = copy_node(c, n);
    if (!m) return KILN_ERR_NOMEM;
    ir_node_append(dst, m);
  }
  for (int i = 0; i < ir_block_n_returns(src); i++) {
    ir_value *v = ir_value_map_get(c->map, ir_block_return(src, i));
    if (!v) return core_error(KILN_ERR_INVALID, "ir_graph_clone: block return %d is not mapped", i);
    if (ir_block_add_return(dst, v) < 0) return KILN_ERR_NOMEM;
  }
  return 0;
}

ir_node *ir_node_copy_into(ir_graph *dst, const ir_node *n, ir_value_map *map) {
  copier c = {dst, false, map};
  return copy_node(&c, n);
}

static ir_graph *clone_graph(const ir_graph *g) {
  copier c = {ir_graph_new(), true, ir_value_map_new()};
  if (!c.dst || !c.map || copy_block(&c, g->top, c.dst->top) < 0) {
    ir_graph_free(c.dst);
    ir_value_map_free(c.map);
    return NULL;
  }
  if (c.dst->next_value_id < g->next_value_id) c.dst->next_value_id = g->next_value_id;
  ir_value_map_free(c.map);
  return c.dst;
}

ir_graph *ir_graph_clone(const ir_graph *g) { return clone_graph(g); }
