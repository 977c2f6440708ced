/* src/passes/alias.c: alias analysis over a graph, in the spirit of
 * TorchScript's AliasDb (torch/csrc/jit/ir/alias_analysis.h): which values
 * may share memory, which nodes write it, and whether a node may move.
 *
 * Note [Alias analysis]: values that may hold a tensor (tensors, optional
 * tensors, lists and tuples that may contain one, Any) are partitioned
 * into alias sets (a union-find over value ids):
 *   - an op's output joins the set of the argument its schema says it
 *     aliases (Note [Alias annotations] in src/ops/alias.c: views, and
 *     self returned by an in-place op); other outputs are fresh;
 *   - a container joins the sets of what goes in or comes out of it, and
 *     so does every other prim with tensor inputs and outputs (profile,
 *     tuples, lists, DifferentiableGraph, ...): conservative;
 *   - If outputs join their blocks' returns, Loop-carried values join
 *     their input, block parameter, block return and output;
 *   - the graph's inputs form one set, marked external (the caller's
 *     memory: they may be each other, and what is written there must
 *     happen), as do values of prims that could hand out anything
 *     (CallFunction).
 * A node writes the sets of the arguments its schema marks `(a!)` (an
 * in-place op's self, batch_norm's running statistics), and a node whose
 * subgraph or blocks hold writers writes what those write; CallFunction
 * is assumed to write its tensor inputs. */
#include <string.h>

#include "passes.h"

struct pass_alias {
  const ir_graph *g;
  int n_values;
  int *parent;       /* union-find over value ids; -1 = not a tensor value */
  uint8_t *external; /* by root */
  uint8_t *written;  /* by root */
};

static bool may_hold_tensor(const ir_type *t) {
  switch (t->kind) {
  case IR_TYPE_TENSOR:
  case IR_TYPE_ANY:
    return true;
  case IR_TYPE_LIST:
  case IR_TYPE_TUPLE:
  case IR_TYPE_OPTIONAL:
    for (int i = 0; i < t->n_elems; i++)
      if (may_hold_tensor(t->elems[i])) return true;
    return false;
  default:
    return false;
  }
}

static int find(const pass_alias *a, int x) {
  while (a->parent[x] != x) {
    a->parent[x] = a->parent[a->parent[x]];
    x = a->parent[x];
  }
  return x;
}

static void unite(pass_alias *a, const ir_value *x, const ir_value *y) {
  if (a->parent[x->id] < 0 || a->parent[y->id] < 0) return;
  int rx = find(a, x->id), ry = find(a, y->id);
  if (rx == ry) return;
  a->parent[rx] = ry;
  a->external[ry] |= a->external[rx];
  a->written[ry] |= a->written[rx];
}

static void add_values(pass_alias *a, const ir_node *n) {
  for (int i = 0; i < n->n_outputs; i++)
    if (may_hold_tensor(n->outputs[i]->type)) a->parent[n->outputs[i]->id] = n->outputs[i]->id;
}

static void add_block_values(pass_alias *a, const ir_block *b) {
  add_values(a, b->param);
  for (const ir_node *n = b->first; n; n = n->next) {
    add_values(a, n);
    for (int k = 0; k < n->n_blocks; k++) add_block_values(a, n->blocks[k]);
  }
}

static bool graph_has_writers(const ir_graph *g);

static bool block_has_writers(const ir_block *b) {
  for (const ir_node *n = b->first; n; n = n->next) {
    if (n->op >= 0 && op_written_args(n->op)) return true;
    if (n->prim == IR_PRIM_CALL_FUNCTION) return true;
    for (int i = 0; i < n->n_attrs; i++)
      if (n->attrs[i].kind == IR_ATTR_GRAPH && graph_has_writers(n->attrs[i].g)) return true;
    for (int k = 0; k < n->n_blocks; k++)
      if (block_has_writers(n->blocks[k])) return true;
  }
  return false;
}

static bool graph_has_writers(const ir_graph *g) { return block_has_writers(ir_graph_top(g)); }

/* Is v a constant false? */
static bool constant_false(const ir_value *v) {
  pass_const c;
  return pass_const_of(v, &c) && ((c.tag == PASS_C_BOOL && !c.b) || (c.tag == PASS_C_INT && !c.i));
}

bool pass_alias_input_written(const ir_node *n, int i) {
  if (i < 0 || i >= n->n_inputs || !may_hold_tensor(n->inputs[i]->type)) return false;
  if (n->op >= 0) {
    if (!op_writes_arg(n->op, i)) return false;
    /* batch_norm in eval mode only reads its running statistics */
    if (n->op == KILN_OP_BATCH_NORM && n->n_inputs > 5 && constant_false(n->inputs[5])) return false;
    return true;
  }
  if (n->prim == IR_PRIM_CALL_FUNCTION) return true;
  for (int k = 0; k < n->n_attrs; k++)
    if (n->attrs[k].kind == IR_ATTR_GRAPH && graph_has_writers(n->attrs[k].g)) return true;
  return false;
}

static void analyse_block(pass_alias *a, const ir_block *b) {
  for (const ir_node *n = b->first; n; n = n->next) {
    for (int k = 0; k < n->n_blocks; k++) analyse_block(a, n->blocks[k]);
    if (n->op >= 0) {
      for (int j = 0; j < n->n_outputs; j++) {
        int i = op_output_alias(n->op, j);
        if (i >= 0 && i < n->n_inputs) unite(a, n->outputs[j], n->inputs[i]);
      }
    } else if (n->prim == IR_PRIM_IF) {
      for (int j = 0; j < n->n_outputs; j++)
        for (int k = 0; k < n->n_blocks; k++) unite(a, n->outputs[j], ir_block_return(n->blocks[k], j));
    } else if (n->prim == IR_PRIM_LOOP) {
      const ir_block *body = n->blocks[0];
      for (int j = 0; j < n->n_outputs; j++) {
        unite(a, n->outputs[j], n->inputs[j + 2]);
        unite(a, n->outputs[j], ir_block_param(body, j + 1));
        unite(a, n->outputs[j], ir_block_return(body, j + 1));
      }
    } else {
      for (int j = 0; j < n->n_outputs; j++)
        for (int i = 0; i < n->n_inputs; i++) unite(a, n->outputs[j], n->inputs[i]);
      if (n->prim == IR_PRIM_CALL_FUNCTION)
        for (int j = 0; j < n->n_outputs; j++)
          if (a->parent[n->outputs[j]->id] >= 0) a->external[find(a, n->outputs[j]->id)] = 1;
    }
  }
}

static void mark_writes(pass_alias *a, const ir_block *b) {
  for (const ir_node *n = b->first; n; n = n->next) {
    for (int k = 0; k < n->n_blocks; k++) mark_writes(a, n->blocks[k]);
    for (int i = 0; i < n->n_inputs; i++)
      if (pass_alias_input_written(n, i)) a->written[find(a, n->inputs[i]->id)] = 1;
  }
}

pass_alias *pass_alias_new(const ir_graph *g) {
  pass_alias *a = core_calloc(1, sizeof *a);
  int n = ir_graph_value_count(g);
  if (!a) goto oom;
  a->g = g;
  a->n_values = n;
  a->parent = core_alloc((size_t)(n ? n : 1) * sizeof *a->parent);
  a->external = core_calloc((size_t)(n ? n : 1), 1);
  a->written = core_calloc((size_t)(n ? n : 1), 1);
  if (!a->parent || !a->external || !a->written) goto oom;
  for (int i = 0; i < n; i++) a->parent[i] = -1;
  const ir_block *top = ir_graph_top(g);
  add_block_values(a, top);
  const ir_value *first = NULL;
  for (int i = 0; i < ir_block_n_params(top); i++) {
    const ir_value *p = ir_block_param(top, i);
    if (a->parent[p->id] < 0) continue;
    a->external[p->id] = 1;
    if (first) unite(a, first, p);
    else first = p;
  }
  analyse_block(a, top);
  mark_writes(a, top);
  return a;
oom:
  pass_alias_free(a);
  core_error(KILN_ERR_NOMEM, "alias analysis: out of memory");
  return NULL;
}

void pass_alias_free(pass_alias *a) {
  if (!a) return;
  core_free(a->parent);
  core_free(a->external);
  core_free(a->written);
  core_free(a);
}

int pass_alias_set(const pass_alias *a, const ir_value *v) {
  if (v->id >= a->n_values || a->parent[v->id] < 0) return -1;
  return find(a, v->id);
}

bool pass_alias_may_alias(const pass_alias *a, const ir_value *x, const ir_value *y) {
  int sx = pass_alias_set(a, x), sy = pass_alias_set(a, y);
  return sx >= 0 && sx == sy;
}

bool pass_alias_is_written(const pass_alias *a, const ir_value *v) {
  int s = pass_alias_set(a, v);
  return s >= 0 && a->written[s];
}

bool pass_alias_is_external(const pass_alias *a, const ir_value *v) {
  int s = pass_alias_set(a, v);
  return s >= 0 && a->external[s];
}

bool pass_alias_writes(const ir_node *n) {
  for (int i = 0; i < n->n_inputs; i++)
    if (pass_alias_input_written(n, i)) return true;
  for (int k = 0; k < n->n_blocks; k++)
    if (block_has_writers(n->blocks[k])) return true;
  return false;
}

bool pass_alias_has_writers(const pass_alias *a, const ir_node *n) {
  for (int i = 0; i < n->n_inputs; i++)
    if (pass_alias_is_written(a, n->inputs[i])) return true;
  for (int i = 0; i < n->n_outputs; i++)
    if (pass_alias_is_written(a, n->outputs[i])) return true;
  return false;
}

/* ---- moving nodes ------------------------------------------------------------ */

/* Calls fn(a, v, write, ctx) for every tensor value n (and its nested
 * nodes) reads or writes; stops when fn returns true. */
static bool touches(const pass_alias *a, const ir_node *n,
                    bool (*fn)(const pass_alias *, const ir_value *, bool, const void *),
                    const void *ctx) {
  for (int i = 0; i < n->n_inputs; i++)
    if (pass_alias_set(a, n->inputs[i]) >= 0 && fn(a, n->inputs[i], pass_alias_input_written(n, i), ctx))
      return true;
  for (int k = 0; k < n->n_blocks; k++) {
    const ir_block *b = n->blocks[k];
    for (const ir_node *m = b->first; m; m = m->next)
      if (touches(a, m, fn, ctx)) return true;
    for (int i = 0; i < ir_block_n_returns(b); i++)
      if (pass_alias_set(a, ir_block_return(b, i)) >= 0 && fn(a, ir_block_return(b, i), false, ctx))
        return true;
  }
  return false;
}

typedef struct conflict_ctx {
  const ir_node *other;
  const ir_value *v;
  bool write;
} conflict_ctx;

static bool inner(const pass_alias *a, const ir_value *w, bool write, const void *ctx) {
  const conflict_ctx *c = ctx;
  return (write || c->write) && pass_alias_may_alias(a, w, c->v);
}

static bool outer(const pass_alias *a, const ir_value *v, bool write, const void *ctx) {
  conflict_ctx c = {.other = ctx, .v = v, .write = write};
  return touches(a, c.other, inner, &c);
}

bool pass_alias_conflict(const pass_alias *a, const ir_node *x, const ir_node *y) {
  return touches(a, x, outer, y);
}

bool pass_alias_could_move_before(const pass_alias *a, const ir_node *n, const ir_node *pos) {
  if (n == pos) return true;
  if (n->owner != pos->owner) return false;
  const ir_node *m = pos;
  for (; m && m != n; m = m->next) {
    for (int j = 0; j < m->n_outputs; j++)
      for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] == m->outputs[j]) return false;
    if (pass_alias_conflict(a, n, m)) return false;
  }
  return m == n; /* pos must come before n */
}
