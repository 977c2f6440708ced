/* src/ir/graph.c: graphs, blocks, nodes and values: the arena, creation,
 * linking, use lists (Note [Use lists]), names, attributes and removal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "irimpl.h"

/* ---- arena ----------------------------------------------------------------- */

struct ir_chunk {
  ir_chunk *next;
  size_t used, cap;
};

#define CHUNK_HDR ((sizeof(ir_chunk) + 15) & ~(size_t)15)
#define CHUNK_MIN ((size_t)16384)

void *ir_graph_alloc(ir_graph *g, size_t n) {
  n = n ? (n + 15) & ~(size_t)15 : 16;
  ir_chunk *c = g->chunks;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
    ir_chunk *nc = core_alloc(CHUNK_HDR + cap);
    if (!nc) return NULL;
    nc->used = 0;
    nc->cap = cap;
    if (c && n > CHUNK_MIN / 2) {
      /* A big block gets a chunk of its own behind the current one, so the
       * current chunk's free space is not abandoned. */
      nc->next = c->next;
      c->next = nc;
    } else {
      nc->next = c;
      g->chunks = nc;
    }
    c = nc;
  }
  void *p = (char *)c + CHUNK_HDR + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

const char *ir_graph_strdup(ir_graph *g, const char *s, size_t n) {
  char *p = ir_graph_alloc(g, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

int ir_grow(ir_graph *g, void *arrp, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int nc = *cap ? *cap * 2 : 4;
  while (nc < need) nc *= 2;
  void *p = ir_graph_alloc(g, (size_t)nc * elem), *old;
  if (!p) return KILN_ERR_NOMEM;
  memcpy(&old, arrp, sizeof old);
  if (*cap) memcpy(p, old, (size_t)*cap * elem);
  memcpy(arrp, &p, sizeof p);
  *cap = nc;
  return 0;
}

/* ---- graphs and blocks ------------------------------------------------------ */

ir_node *ir_node_new_kind(ir_graph *g, int op, int prim) {
  ir_node *n = ir_graph_alloc(g, sizeof *n);
  if (!n) return NULL;
  n->id = g->next_node_id++;
  n->op = op;
  n->prim = prim;
  n->graph = g;
  return n;
}

static ir_block *block_new(ir_graph *g, ir_node *owner) {
  ir_block *b = ir_graph_alloc(g, sizeof *b);
  if (!b) return NULL;
  b->graph = g;
  b->owner = owner;
  b->param = ir_node_new_kind(g, -1, IR_PRIM_PARAM);
  b->ret = ir_node_new_kind(g, -1, IR_PRIM_RETURN);
  if (!b->param || !b->ret) return NULL;
  b->param->owner = b->ret->owner = b;
  b->param->linked = b->ret->linked = true;
  return b;
}

ir_graph *ir_graph_new(void) {
  ir_graph *g = core_calloc(1, sizeof *g);
  if (!g) return NULL;
  g->top = block_new(g, NULL);
  if (!g->top) {
    ir_graph_free(g);
    return NULL;
  }
  return g;
}

void ir_graph_free(ir_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_subgraphs; i++) ir_graph_free(g->subgraphs[i]);
  core_free(g->subgraphs);
  core_free(g->names);
  for (ir_chunk *c = g->chunks, *next; c; c = next) {
    next = c->next;
    core_free(c);
  }
  core_free(g);
}

ir_block *ir_graph_top(const ir_graph *g) { return g->top; }
int ir_graph_value_count(const ir_graph *g) { return g->next_value_id; }
int ir_graph_node_count(const ir_graph *g) { return g->next_node_id; }

int ir_graph_adopt(ir_graph *g, ir_graph *sub) {
  if (g->n_subgraphs == g->cap_subgraphs) {
    int cap = g->cap_subgraphs ? g->cap_subgraphs * 2 : 4;
    ir_graph **p = core_realloc(g->subgraphs, (size_t)cap * sizeof *p);
    if (!p) return KILN_ERR_NOMEM;
    g->subgraphs = p;
    g->cap_subgraphs = cap;
  }
  g->subgraphs[g->n_subgraphs++] = sub;
  sub->is_subgraph = true;
  return 0;
}

/* ---- names (Note [Value names]) ---------------------------------------------- */

static uint32_t hash_name(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

static bool name_is(const ir_value *v, const char *s, size_t n) {
  return v->name && strncmp(v->name, s, n) == 0 && v->name[n] == 0;
}

/* Slots hold the value that took the name; a slot whose value was renamed
 * since is stale and simply never matches. */
ir_value *ir_graph_find_value_n(const ir_graph *g, const char *s, size_t n) {
  if (!g->names_cap) return NULL;
  uint32_t mask = (uint32_t)g->names_cap - 1;
  for (uint32_t i = hash_name(s, n) & mask;; i = (i + 1) & mask) {
    ir_value *v = g->names[i];
    if (!v) return NULL;
    if (name_is(v, s, n)) return v;
  }
}

ir_value *ir_graph_find_value(const ir_graph *g, const char *name) {
  return ir_graph_find_value_n(g, name, strlen(name));
}

static int names_insert(ir_graph *g, ir_value *v) {
  if ((g->names_count + 1) * 10 > g->names_cap * 7) {
    int cap = g->names_cap ? g->names_cap * 2 : 64;
    ir_value **t = core_calloc((size_t)cap, sizeof *t);
    if (!t) return KILN_ERR_NOMEM;
    int count = 0;
    for (int i = 0; i < g->names_cap; i++) {
      ir_value *w = g->names[i];
      if (!w || !w->name) continue;
      /* drop stale slots: keep w only where its current name hashes */
      if (ir_graph_find_value(g, w->name) != w) continue;
      uint32_t j = hash_name(w->name, strlen(w->name)) & (uint32_t)(cap - 1);
      while (t[j]) j = (j + 1) & (uint32_t)(cap - 1);
      t[j] = w;
      count++;
    }
    core_free(g->names);
    g->names = t;
    g->names_cap = cap;
    g->names_count = count;
  }
  uint32_t mask = (uint32_t)g->names_cap - 1;
  uint32_t j = hash_name(v->name, strlen(v->name)) & mask;
  while (g->names[j]) j = (j + 1) & mask;
  g->names[j] = v;
  g->names_count++;
  return 0;
}

bool ir_name_is_numeric(const char *s, size_t len) {
  if (!len) return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

int ir_value_name_raw(ir_value *v, const char *name, size_t len) {
  ir_graph *g = v->node->graph;
  const char *copy = ir_graph_strdup(g, name, len);
  if (!copy) return KILN_ERR_NOMEM;
  const char *old = v->name;
  v->name = copy;
  int rc = names_insert(g, v);
  if (rc < 0) v->name = old;
  return rc;
}

int ir_value_set_name(ir_value *v, const char *name) {
  ir_graph *g = v->node->graph;
  if (!name) {
    v->name = NULL;
    return 0;
  }
  size_t len = strlen(name);
  if (!len || ir_name_is_numeric(name, len)) {
    /* an id, not a name (Note [Value names]): v prints with its own id */
    v->name = NULL;
    return 0;
  }
  ir_value *owner = ir_graph_find_value_n(g, name, len);
  if (!owner || owner == v) return owner ? 0 : ir_value_name_raw(v, name, len);
  /* Split "x.3" into base "x" and suffix 3, then try x.4, x.5, ... */
  size_t base = len;
  long suffix = 1;
  const char *dot = strrchr(name, '.');
  if (dot && dot[1] && ir_name_is_numeric(dot + 1, strlen(dot + 1)) && strlen(dot + 1) < 9) {
    base = (size_t)(dot - name);
    suffix = strtol(dot + 1, NULL, 10) + 1;
  }
  char buf[256];
  if (base > sizeof buf - 16) base = sizeof buf - 16;
  for (;; suffix++) {
    int n = snprintf(buf, sizeof buf, "%.*s.%ld", (int)base, name, suffix);
    if (!ir_graph_find_value_n(g, buf, (size_t)n)) return ir_value_name_raw(v, buf, (size_t)n);
  }
}

/* ---- values, uses ---------------------------------------------------------------- */

ir_value *ir_value_new_raw(ir_graph *g, const ir_type *t, int id) {
  ir_value *v = ir_graph_alloc(g, sizeof *v);
  if (!v) return NULL;
  v->id = id;
  v->type = t;
  if (id >= g->next_value_id) g->next_value_id = id + 1;
  return v;
}

static int use_reserve(ir_value *v, int extra) {
  return ir_grow(v->node->graph, &v->uses, &v->cap_uses, v->n_uses + extra, sizeof *v->uses);
}

/* Requires capacity (use_reserve). */
static void use_push(ir_value *v, ir_node *user, int index) {
  KILN_ASSERT(v->n_uses < v->cap_uses);
  v->uses[v->n_uses++] = (ir_use){user, index};
}

static void use_remove(ir_value *v, const ir_node *user, int index) {
  for (int i = 0; i < v->n_uses; i++)
    if (v->uses[i].user == user && v->uses[i].index == index) {
      memmove(v->uses + i, v->uses + i + 1, (size_t)(v->n_uses - i - 1) * sizeof *v->uses);
      v->n_uses--;
      return;
    }
  KILN_ASSERT(!"use list out of sync");
}

static void use_renumber(ir_value *v, const ir_node *user, int from, int to) {
  for (int i = 0; i < v->n_uses; i++)
    if (v->uses[i].user == user && v->uses[i].index == from) {
      v->uses[i].index = to;
      return;
    }
  KILN_ASSERT(!"use list out of sync");
}

/* ---- nodes ------------------------------------------------------------------------ */

ir_node *ir_node_new_op(ir_graph *g, int op) {
  KILN_ASSERT(op >= 0 && op < KILN_OP_COUNT);
  return ir_node_new_kind(g, op, -1);
}

ir_node *ir_node_new_prim(ir_graph *g, int prim) {
  KILN_ASSERT(prim >= 0 && prim < IR_PRIM_COUNT);
  return ir_node_new_kind(g, -1, prim);
}

const char *ir_node_kind(const ir_node *n) {
  return n->op >= 0 ? op_table[n->op].name : ir_prim_table[n->prim].name;
}

int ir_node_add_input(ir_node *n, ir_value *v) {
  KILN_ASSERT(v->node->graph == n->graph);
  if (ir_grow(n->graph, &n->inputs, &n->cap_inputs, n->n_inputs + 1, sizeof *n->inputs) < 0 ||
      use_reserve(v, 1) < 0)
    return KILN_ERR_NOMEM;
  use_push(v, n, n->n_inputs);
  n->inputs[n->n_inputs++] = v;
  return 0;
}

ir_value *ir_node_set_input(ir_node *n, int i, ir_value *v) {
  KILN_ASSERT(i >= 0 && i < n->n_inputs && v->node->graph == n->graph);
  ir_value *old = n->inputs[i];
  if (old == v) return old;
  if (use_reserve(v, 1) < 0) return NULL;
  use_remove(old, n, i);
  use_push(v, n, i);
  n->inputs[i] = v;
  return old;
}

void ir_node_remove_input(ir_node *n, int i) {
  KILN_ASSERT(i >= 0 && i < n->n_inputs);
  use_remove(n->inputs[i], n, i);
  for (int j = i + 1; j < n->n_inputs; j++) {
    use_renumber(n->inputs[j], n, j, j - 1);
    n->inputs[j - 1] = n->inputs[j];
  }
  n->n_inputs--;
}

int ir_node_push_output(ir_node *n, ir_value *v) {
  if (ir_grow(n->graph, &n->outputs, &n->cap_outputs, n->n_outputs + 1, sizeof *n->outputs) < 0)
    return KILN_ERR_NOMEM;
  v->node = n;
  v->index = n->n_outputs;
  n->outputs[n->n_outputs++] = v;
  return 0;
}

ir_value *ir_node_add_output(ir_node *n, const ir_type *t) {
  ir_value *v = ir_value_new_raw(n->graph, t, n->graph->next_value_id);
  if (!v || ir_node_push_output(n, v) < 0) return NULL;
  return v;
}

static const char *value_label(const ir_value *v, char *buf, size_t n) {
  if (v->name) snprintf(buf, n, "%%%s", v->name);
  else snprintf(buf, n, "%%%d", v->id);
  return buf;
}

int ir_node_remove_output(ir_node *n, int i) {
  KILN_ASSERT(i >= 0 && i < n->n_outputs);
  char lb[64];
  if (n->outputs[i]->n_uses)
    return core_error(KILN_ERR_STATE, "ir_node_remove_output: %s still has %d uses",
                      value_label(n->outputs[i], lb, sizeof lb), n->outputs[i]->n_uses);
  for (int j = i + 1; j < n->n_outputs; j++) {
    n->outputs[j - 1] = n->outputs[j];
    n->outputs[j - 1]->index = j - 1;
  }
  n->n_outputs--;
  return 0;
}

ir_block *ir_node_add_block(ir_node *n) {
  if (ir_grow(n->graph, &n->blocks, &n->cap_blocks, n->n_blocks + 1, sizeof *n->blocks) < 0)
    return NULL;
  ir_block *b = block_new(n->graph, n);
  if (b) n->blocks[n->n_blocks++] = b;
  return b;
}

ir_value *ir_block_add_param(ir_block *b, const ir_type *t, const char *name) {
  ir_value *v = ir_node_add_output(b->param, t);
  if (v && name && ir_value_set_name(v, name) < 0) {
    b->param->n_outputs--;
    return NULL;
  }
  return v;
}

int ir_block_add_return(ir_block *b, ir_value *v) { return ir_node_add_input(b->ret, v); }
void ir_block_remove_return(ir_block *b, int i) { ir_node_remove_input(b->ret, i); }
int ir_block_remove_param(ir_block *b, int i) { return ir_node_remove_output(b->param, i); }

/* ---- linking ------------------------------------------------------------------------ */

static void link_between(ir_block *b, ir_node *prev, ir_node *next, ir_node *n) {
  KILN_ASSERT(!n->linked && n->graph == b->graph);
  n->owner = b;
  n->prev = prev;
  n->next = next;
  if (prev) prev->next = n;
  else b->first = n;
  if (next) next->prev = n;
  else b->last = n;
  n->linked = true;
}

static void unlink_node(ir_node *n) {
  KILN_ASSERT(n->linked && n->prim != IR_PRIM_PARAM && n->prim != IR_PRIM_RETURN);
  ir_block *b = n->owner;
  if (n->prev) n->prev->next = n->next;
  else b->first = n->next;
  if (n->next) n->next->prev = n->prev;
  else b->last = n->prev;
  n->prev = n->next = NULL;
  n->owner = NULL;
  n->linked = false;
}

void ir_node_append(ir_block *b, ir_node *n) { link_between(b, b->last, NULL, n); }
void ir_node_prepend(ir_block *b, ir_node *n) { link_between(b, NULL, b->first, n); }

/* pos may be a block's Return node (= append) / Param node (= prepend). */
void ir_node_insert_before(ir_node *n, ir_node *pos) {
  if (pos->prim == IR_PRIM_RETURN) ir_node_append(pos->owner, n);
  else link_between(pos->owner, pos->prev, pos, n);
}

void ir_node_insert_after(ir_node *n, ir_node *pos) {
  if (pos->prim == IR_PRIM_PARAM) ir_node_prepend(pos->owner, n);
  else link_between(pos->owner, pos, pos->next, n);
}

void ir_node_move_before(ir_node *n, ir_node *pos) {
  KILN_ASSERT(n != pos);
  unlink_node(n);
  ir_node_insert_before(n, pos);
}

void ir_node_move_after(ir_node *n, ir_node *pos) {
  KILN_ASSERT(n != pos);
  unlink_node(n);
  ir_node_insert_after(n, pos);
}

/* ---- replacing uses ------------------------------------------------------------------ */

int ir_value_replace_all_uses(ir_value *v, ir_value *with) {
  if (v == with) return 0;
  KILN_ASSERT(v->node->graph == with->node->graph);
  if (use_reserve(with, v->n_uses) < 0) return KILN_ERR_NOMEM;
  for (int i = 0; i < v->n_uses; i++) {
    ir_use u = v->uses[i];
    u.user->inputs[u.index] = with;
    use_push(with, u.user, u.index);
  }
  v->n_uses = 0;
  return 0;
}

/* Is u after a in program order (u's ancestor in a's block follows a)? A
 * node inside a's own blocks is not after a. */
static bool node_is_after(const ir_node *u, const ir_node *a) {
  const ir_node *x = u;
  while (x && x->owner != a->owner) x = x->owner ? x->owner->owner : NULL;
  if (!x || x == a || x->prim == IR_PRIM_PARAM) return false;
  if (x->prim == IR_PRIM_RETURN) return true;
  for (const ir_node *y = a->next; y; y = y->next)
    if (y == x) return true;
  return false;
}

bool ir_node_is_after(const ir_node *u, const ir_node *a) { return node_is_after(u, a); }

int ir_value_replace_uses_after(ir_value *v, ir_value *with, const ir_node *after) {
  if (v == with) return 0;
  if (use_reserve(with, v->n_uses) < 0) return KILN_ERR_NOMEM;
  int k = 0;
  for (int i = 0; i < v->n_uses; i++) {
    ir_use u = v->uses[i];
    if (node_is_after(u.user, after)) {
      u.user->inputs[u.index] = with;
      use_push(with, u.user, u.index);
    } else {
      v->uses[k++] = u;
    }
  }
  v->n_uses = k;
  return 0;
}

/* ---- removal -------------------------------------------------------------------------- */

static bool is_within(const ir_node *u, const ir_node *n) {
  for (const ir_node *x = u; x; x = x->owner ? x->owner->owner : NULL)
    if (x == n) return true;
  return false;
}

/* Finds an output of n or of a node nested in n used outside n. */
static const ir_value *escaping_output(const ir_node *n, const ir_node *root) {
  for (int i = 0; i < n->n_outputs; i++)
    for (int k = 0; k < n->outputs[i]->n_uses; k++)
      if (!is_within(n->outputs[i]->uses[k].user, root)) return n->outputs[i];
  for (int b = 0; b < n->n_blocks; b++) {
    const ir_value *v = escaping_output(n->blocks[b]->param, root);
    if (v) return v;
    for (const ir_node *m = n->blocks[b]->first; m; m = m->next)
      if ((v = escaping_output(m, root))) return v;
  }
  return NULL;
}

static void drop_input_uses(ir_node *n) {
  for (int i = n->n_inputs - 1; i >= 0; i--) use_remove(n->inputs[i], n, i);
  n->n_inputs = 0;
  for (int b = 0; b < n->n_blocks; b++) {
    for (ir_node *m = n->blocks[b]->first; m; m = m->next) drop_input_uses(m);
    drop_input_uses(n->blocks[b]->ret);
  }
}

int ir_node_remove(ir_node *n) {
  KILN_ASSERT(n->prim != IR_PRIM_PARAM && n->prim != IR_PRIM_RETURN);
  const ir_value *v = escaping_output(n, n);
  char lb[64];
  if (v)
    return core_error(KILN_ERR_STATE, "ir_node_remove: %s (%s) is still used",
                      value_label(v, lb, sizeof lb), ir_node_kind(v->node));
  drop_input_uses(n);
  if (n->linked) unlink_node(n);
  return 0;
}

/* ---- attributes ------------------------------------------------------------------------ */

const ir_attr *ir_node_attr(const ir_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

static ir_attr *attr_slot(ir_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  const char *copy = ir_graph_strdup(n->graph, name, strlen(name));
  if (!copy || ir_grow(n->graph, &n->attrs, &n->cap_attrs, n->n_attrs + 1, sizeof *n->attrs) < 0)
    return NULL;
  ir_attr *a = &n->attrs[n->n_attrs++];
  memset(a, 0, sizeof *a);
  a->name = copy;
  return a;
}

int ir_node_set_i(ir_node *n, const char *name, int64_t v) {
  ir_attr *a = attr_slot(n, name);
  if (!a) return KILN_ERR_NOMEM;
  a->kind = IR_ATTR_INT;
  a->i = v;
  return 0;
}

int ir_node_set_f(ir_node *n, const char *name, double v) {
  ir_attr *a = attr_slot(n, name);
  if (!a) return KILN_ERR_NOMEM;
  a->kind = IR_ATTR_FLOAT;
  a->f = v;
  return 0;
}

int ir_node_set_s(ir_node *n, const char *name, const char *v) {
  const char *copy = ir_graph_strdup(n->graph, v, strlen(v));
  ir_attr *a = copy ? attr_slot(n, name) : NULL;
  if (!a) return KILN_ERR_NOMEM;
  a->kind = IR_ATTR_STR;
  a->s = copy;
  return 0;
}

int ir_node_set_is(ir_node *n, const char *name, const int64_t *v, int count) {
  int64_t *copy = ir_graph_alloc(n->graph, (size_t)count * sizeof *copy);
  ir_attr *a = copy ? attr_slot(n, name) : NULL;
  if (!a) return KILN_ERR_NOMEM;
  if (count) memcpy(copy, v, (size_t)count * sizeof *copy);
  a->kind = IR_ATTR_INTS;
  a->ints.v = copy;
  a->ints.n = count;
  return 0;
}

int ir_node_set_fs(ir_node *n, const char *name, const double *v, int count) {
  double *copy = ir_graph_alloc(n->graph, (size_t)count * sizeof *copy);
  ir_attr *a = copy ? attr_slot(n, name) : NULL;
  if (!a) return KILN_ERR_NOMEM;
  if (count) memcpy(copy, v, (size_t)count * sizeof *copy);
  a->kind = IR_ATTR_FLOATS;
  a->floats.v = copy;
  a->floats.n = count;
  return 0;
}

int ir_node_set_ty(ir_node *n, const char *name, const ir_type *t) {
  const ir_type *copy = ir_type_copy(n->graph, t);
  ir_attr *a = copy ? attr_slot(n, name) : NULL;
  if (!a) return KILN_ERR_NOMEM;
  a->kind = IR_ATTR_TYPE;
  a->ty = copy;
  return 0;
}

int ir_node_set_tys(ir_node *n, const char *name, const ir_type *const *t, int count) {
  const ir_type **copy = ir_graph_alloc(n->graph, (size_t)count * sizeof *copy);
  if (!copy) return KILN_ERR_NOMEM;
  for (int i = 0; i < count; i++)
    if (!(copy[i] = ir_type_copy(n->graph, t[i]))) return KILN_ERR_NOMEM;
  ir_attr *a = attr_slot(n, name);
  if (!a) return KILN_ERR_NOMEM;
  a->kind = IR_ATTR_TYPES;
  a->types.v = copy;
  a->types.n = count;
  return 0;
}

const ir_ivalue *ir_ivalue_copy(ir_graph *g, const ir_ivalue *v) {
  ir_ivalue *c = ir_graph_alloc(g, sizeof *c);
  if (!c) return NULL;
  *c = *v;
  if (v->tag == IR_IV_STR) {
    if (!(c->s = ir_graph_strdup(g, v->s, strlen(v->s)))) return NULL;
  } else if (v->tag == IR_IV_LIST || v->tag == IR_IV_TUPLE) {
    c->items.v = ir_graph_alloc(g, (size_t)v->items.n * sizeof *c->items.v);
    if (!c->items.v) return NULL;
    for (int i = 0; i < v->items.n; i++) {
      const ir_ivalue *e = ir_ivalue_copy(g, &v->items.v[i]);
      if (!e) return NULL;
      c->items.v[i] = *e;
    }
  }
  return c;
}

int ir_node_set_iv(ir_node *n, const char *name, const ir_ivalue *v) {
  const ir_ivalue *copy = ir_ivalue_copy(n->graph, v);
  ir_attr *a = copy ? attr_slot(n, name) : NULL;
  if (!a) return KILN_ERR_NOMEM;
  a->kind = IR_ATTR_IVALUE;
  a->iv = copy;
  return 0;
}

int ir_node_set_g(ir_node *n, const char *name, ir_graph *sub) {
  KILN_ASSERT(sub != n->graph && !sub->is_subgraph);
  ir_attr *a = attr_slot(n, name);
  if (!a || ir_graph_adopt(n->graph, sub) < 0) {
    ir_graph_free(sub);
    return KILN_ERR_NOMEM;
  }
  a->kind = IR_ATTR_GRAPH;
  a->g = sub;
  return 0;
}

void ir_node_remove_attr(ir_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) {
      memmove(n->attrs + i, n->attrs + i + 1, (size_t)(n->n_attrs - i - 1) * sizeof *n->attrs);
      n->n_attrs--;
      return;
    }
}
