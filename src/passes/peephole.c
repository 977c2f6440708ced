/* src/passes/peephole.c: local rewrites that make a node's result one of
 * its inputs (TorchScript's PeepholeOptimize): arithmetic identities with
 * a constant number, transpose of a transpose, unpacking what was just
 * packed, no-op conversions and expansions.
 *
 * Note [Identity dtypes]: `x * 1 -> x` is only right when the result has
 * x's dtype and shape. A Python number never changes the shape (it
 * broadcasts as a 0-d operand), but it can change the dtype (PyTorch's
 * type promotion, op_result_type): an int number promotes a Bool tensor
 * to Long, a float number promotes Bool and Long tensors to Float, and
 * aten::div computes integers in float. So the rewrite needs x's dtype
 * known: not Bool for an int constant, floating for a float constant or
 * a division. With an unknown dtype nothing fires. */
#include <math.h>
#include <string.h>

#include "passes.h"

typedef struct peep {
  ir_graph *g;
  bool lists_mutable;
  pass_alias *alias; /* Note [Alias analysis] */
} peep;

/* ---- helpers ------------------------------------------------------------------------ */

/* An int (or bool) or float constant: its value and whether it is float. */
static bool num_const(const ir_value *v, double *val, bool *is_float) {
  pass_const c;
  if (!pass_const_of(v, &c)) return false;
  switch (c.tag) {
  case PASS_C_INT: *val = (double)c.i; *is_float = false; return true;
  case PASS_C_BOOL: *val = c.b; *is_float = false; return true;
  case PASS_C_FLOAT: *val = c.f; *is_float = true; return true;
  default: return false;
  }
}

static bool int_const(const ir_value *v, int64_t *out) {
  pass_const c;
  if (!pass_const_of(v, &c) || c.tag != PASS_C_INT) return false;
  *out = c.i;
  return true;
}

static const ir_node *producer(const ir_value *v, int prim) {
  return v->node && v->node->prim == prim ? v->node : NULL;
}

/* Replaces output i of n by with[i] for every i, then removes n. Fires
 * only if every replacement's type fits where the output goes. 1, 0, < 0. */
static int rewrite(ir_node *n, ir_value *const *with) {
  for (int i = 0; i < n->n_outputs; i++)
    if (!ir_type_accepts(n->outputs[i]->type, with[i]->type)) return 0;
  for (int i = 0; i < n->n_outputs; i++) {
    int rc = ir_value_replace_all_uses(n->outputs[i], with[i]);
    if (rc < 0) return rc;
  }
  int rc = ir_node_remove(n);
  return rc < 0 ? rc : 1;
}

static int rewrite1(ir_node *n, ir_value *with) { return rewrite(n, &with); }

/* Note [Identity dtypes]: may `n(x, constant)` become x? */
static bool identity_keeps_type(const ir_node *n, const ir_value *x, bool const_float,
                                bool need_float) {
  const ir_type *t = x->type, *o = n->outputs[0]->type;
  if (t->kind != IR_TYPE_TENSOR || t->dtype < 0) return false;
  if (const_float || need_float) {
    if (!core_dtype_is_floating((kiln_dtype)t->dtype)) return false;
  } else if (t->dtype == KILN_DTYPE_BOOL) {
    return false;
  }
  /* the output's own annotation, if any, must agree */
  if (o->kind == IR_TYPE_TENSOR) {
    if (o->dtype >= 0 && o->dtype != t->dtype) return false;
    if (o->ndim >= 0 && t->ndim >= 0) {
      if (o->ndim != t->ndim) return false;
      for (int i = 0; i < o->ndim; i++)
        if (o->sizes[i] >= 0 && t->sizes[i] >= 0 && o->sizes[i] != t->sizes[i]) return false;
    }
  }
  return true;
}

/* ---- arithmetic identities ------------------------------------------------------------- */

/* x * 1, 1 * x, x / 1 */
static int peep_mul_div(ir_node *n) {
  double v;
  bool is_float;
  bool div = n->op == KILN_OP_DIV;
  for (int side = 0; side < (div ? 1 : 2); side++) {
    ir_value *x = n->inputs[side], *k = n->inputs[1 - side];
    if (x->type->kind != IR_TYPE_TENSOR || !num_const(k, &v, &is_float) || v != 1) continue;
    if (!identity_keeps_type(n, x, is_float, div)) continue;
    return rewrite1(n, x);
  }
  return 0;
}

/* Is alpha * 0 == 0 for this alpha (any int, a finite float constant)? */
static bool alpha_times_zero_is_zero(const ir_value *alpha, bool *is_float) {
  double v;
  *is_float = false;
  if (alpha->type->kind == IR_TYPE_INT || alpha->type->kind == IR_TYPE_BOOL) return true;
  if (!num_const(alpha, &v, is_float)) return false;
  return isfinite(v);
}

/* x + 0, x - 0 (alpha any int or finite float), 0 + x (alpha 1) */
static int peep_add_sub(ir_node *n) {
  double v, a;
  bool is_float, alpha_float;
  ir_value *x = n->inputs[0], *k = n->inputs[1], *alpha = n->inputs[2];
  if (x->type->kind == IR_TYPE_TENSOR && num_const(k, &v, &is_float) && v == 0 &&
      alpha_times_zero_is_zero(alpha, &alpha_float) &&
      identity_keeps_type(n, x, is_float, alpha_float))
    return rewrite1(n, x);
  if (n->op == KILN_OP_ADD && k->type->kind == IR_TYPE_TENSOR && num_const(x, &v, &is_float) &&
      v == 0 && num_const(alpha, &a, &alpha_float) && a == 1 &&
      identity_keeps_type(n, k, is_float, alpha_float))
    return rewrite1(n, k);
  return 0;
}

/* ---- views and conversions ---------------------------------------------------------------- */

/* aten::t(aten::mm(a, b)) -> aten::mm(aten::t(b), aten::t(a)) when the
 * product has no other use: the same numbers, but contiguous rather than
 * a transposed view (a traced backward's weight gradient, t(x^T @ g), then
 * reaches the optimizer in the weight's own layout). */
static int peep_t_mm(ir_node *n) {
  ir_node *mm = n->inputs[0]->node;
  if (!mm || mm->op != KILN_OP_MM || n->inputs[0]->n_uses != 1) return 0;
  ir_graph *g = n->graph;
  ir_node *ta = ir_node_new_op(g, KILN_OP_T), *tb = ir_node_new_op(g, KILN_OP_T),
          *m2 = ir_node_new_op(g, KILN_OP_MM);
  if (!ta || !tb || !m2 || ir_node_add_input(tb, mm->inputs[1]) < 0 ||
      ir_node_add_input(ta, mm->inputs[0]) < 0)
    return KILN_ERR_NOMEM;
  ir_value *vb = ir_node_add_output(tb, ir_type_tensor()), *va = ir_node_add_output(ta, ir_type_tensor());
  if (!va || !vb || ir_node_add_input(m2, vb) < 0 || ir_node_add_input(m2, va) < 0)
    return KILN_ERR_NOMEM;
  ir_value *r = ir_node_add_output(m2, n->outputs[0]->type);
  if (!r) return KILN_ERR_NOMEM;
  ir_node_insert_before(tb, n);
  ir_node_insert_before(ta, n);
  ir_node_insert_before(m2, n);
  int rc = rewrite1(n, r);
  if (rc == 1 && (rc = ir_node_remove(mm)) == 0) rc = 1;
  return rc;
}

/* aten::t(aten::t(x)) -> x */
static int peep_t(ir_node *n) {
  const ir_node *inner = n->inputs[0]->node;
  if (inner && inner->op == KILN_OP_MM) return peep_t_mm(n);
  if (!inner || inner->op != KILN_OP_T) return 0;
  ir_value *x = inner->inputs[0];
  if (x->type->kind == IR_TYPE_TENSOR && x->type->ndim > 2) return 0; /* t() raises there */
  return rewrite1(n, x);
}

/* aten::to(x, dtype, non_blocking, copy=False, memory_format) to x's dtype */
static int peep_to(ir_node *n) {
  int64_t code;
  pass_const copy;
  const ir_type *t = n->inputs[0]->type;
  if (t->kind != IR_TYPE_TENSOR || t->dtype < 0 || !int_const(n->inputs[1], &code)) return 0;
  if (!pass_const_of(n->inputs[3], &copy) || copy.tag != PASS_C_BOOL || copy.b) return 0;
  if (code != op_dtype_code((kiln_dtype)t->dtype)) return 0;
  return rewrite1(n, n->inputs[0]);
}

/* aten::expand(x, size) where size is x's own shape (-1 keeps a dim) */
static int peep_expand(ir_node *n) {
  const ir_type *t = n->inputs[0]->type;
  const ir_value *size = n->inputs[1];
  if (t->kind != IR_TYPE_TENSOR || t->ndim < 0) return 0;
  int64_t want[KILN_MAX_DIMS];
  int nd;
  pass_const c;
  const ir_node *lc;
  if (pass_const_of(size, &c) && c.tag == PASS_C_INTS) {
    if (c.n > KILN_MAX_DIMS) return 0;
    nd = c.n;
    for (int i = 0; i < nd; i++) want[i] = c.ints[i];
  } else if ((lc = producer(size, IR_PRIM_LIST_CONSTRUCT)) && lc->n_inputs <= KILN_MAX_DIMS) {
    nd = lc->n_inputs;
    for (int i = 0; i < nd; i++)
      if (!int_const(lc->inputs[i], &want[i])) return 0;
  } else {
    return 0;
  }
  if (nd != t->ndim) return 0;
  for (int i = 0; i < nd; i++)
    if (want[i] != -1 && (t->sizes[i] < 0 || want[i] != t->sizes[i])) return 0;
  return rewrite1(n, n->inputs[0]);
}

/* ---- tuples and lists --------------------------------------------------------------------- */

static int peep_unpack(peep *p, ir_node *n) {
  bool list = n->prim == IR_PRIM_LIST_UNPACK;
  if (list && p->lists_mutable) return 0; /* Note [List mutation] */
  const ir_node *src =
      producer(n->inputs[0], list ? IR_PRIM_LIST_CONSTRUCT : IR_PRIM_TUPLE_CONSTRUCT);
  if (!src || src->n_inputs != n->n_outputs) return 0; /* a length mismatch raises */
  return rewrite(n, src->inputs);
}

/* TupleIndex / __getitem__ with a constant index; len of a ListConstruct */
static int peep_index(peep *p, ir_node *n) {
  bool tuple = n->prim == IR_PRIM_TUPLE_INDEX;
  if (!tuple && p->lists_mutable) return 0;
  const ir_node *src =
      producer(n->inputs[0], tuple ? IR_PRIM_TUPLE_CONSTRUCT : IR_PRIM_LIST_CONSTRUCT);
  if (!src) return 0;
  if (n->prim == IR_PRIM_LEN) {
    pass_const len = {.tag = PASS_C_INT, .i = src->n_inputs};
    if (!ir_type_accepts(n->outputs[0]->type, ir_type_int())) return 0;
    ir_value *k = pass_const_insert(p->g, &len, n);
    if (!k) return KILN_ERR_NOMEM;
    int rc = rewrite1(n, k);
    if (rc <= 0) ir_node_remove(k->node);
    return rc;
  }
  int64_t i;
  if (n->n_inputs != 2 || !int_const(n->inputs[1], &i)) return 0;
  if (i < 0) i += src->n_inputs;
  if (i < 0 || i >= src->n_inputs) return 0; /* IndexError at run time */
  return rewrite1(n, src->inputs[i]);
}

/* ---- the pass ------------------------------------------------------------------------------- */

static int peep_node(peep *p, ir_node *n) {
  if (n->op >= 0) {
    /* x * 1 -> x and the like turn a fresh value into x itself: never
     * when either is written (Note [Alias analysis]) */
    if (pass_alias_has_writers(p->alias, n)) return 0;
    switch (n->op) {
    case KILN_OP_MUL:
    case KILN_OP_DIV: return peep_mul_div(n);
    case KILN_OP_ADD:
    case KILN_OP_SUB: return peep_add_sub(n);
    case KILN_OP_T: return peep_t(n);
    case KILN_OP_TO: return peep_to(n);
    case KILN_OP_EXPAND: return peep_expand(n);
    default: return 0;
    }
  }
  switch (n->prim) {
  case IR_PRIM_TUPLE_UNPACK:
  case IR_PRIM_LIST_UNPACK: return peep_unpack(p, n);
  case IR_PRIM_TUPLE_INDEX:
  case IR_PRIM_GETITEM:
  case IR_PRIM_LEN: return peep_index(p, n);
  default: return 0;
  }
}

static int peep_block(peep *p, ir_block *b) {
  int changes = 0, rc;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int k = 0; k < n->n_blocks; k++) {
      if ((rc = peep_block(p, n->blocks[k])) < 0) return rc;
      changes += rc;
    }
    if ((rc = peep_node(p, n)) < 0) return rc;
    changes += rc;
  }
  return changes;
}

static int peep_graph(ir_graph *g) {
  peep p = {g, pass_graph_mutates_lists(g), pass_alias_new(g)};
  int rc = p.alias ? peep_block(&p, ir_graph_top(g)) : KILN_ERR_NOMEM;
  pass_alias_free(p.alias);
  if (rc < 0) return rc;
  int sub = pass_for_each_subgraph(g, peep_graph);
  return sub < 0 ? sub : rc + sub;
}

int pass_peephole(ir_graph *g) {
  return peep_graph(g);
}
