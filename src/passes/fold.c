/* src/passes/fold.c: constant folding (TorchScript's ConstantPropagation,
 * without tensor constants): builtins on constants, type-decided queries
 * (size, dim, ...), If with a constant condition, loops that never run.
 * The number semantics are in src/passes/const.c (Note [Folding
 * semantics]). */
#include <string.h>

#include "passes.h"

typedef struct fold {
  ir_graph *g;
  bool lists_mutable;
} fold;

/* Replaces n's only output by constant c (inserted before n) and removes
 * n. Returns 1, 0 when c's type does not fit where n's output goes, < 0. */
static int replace_by_const(fold *f, ir_node *n, const pass_const *c) {
  const ir_type *t = pass_const_type(f->g, c);
  if (!t) return core_error(KILN_ERR_NOMEM, "pass_constant_fold: out of memory");
  if (n->n_outputs != 1 || !ir_type_accepts(n->outputs[0]->type, t)) return 0;
  ir_value *k = pass_const_insert(f->g, c, n);
  if (!k) return KILN_ERR_NOMEM;
  int rc = ir_value_replace_all_uses(n->outputs[0], k);
  if (rc == 0) rc = ir_node_remove(n);
  if (rc < 0) {
    ir_node_remove(k->node);
    return rc;
  }
  return 1;
}

/* ---- queries a tensor type answers ------------------------------------------------ */

static const ir_type *tensor_type(const ir_value *v) {
  return v->type->kind == IR_TYPE_TENSOR ? v->type : NULL;
}

static bool sizes_known(const ir_type *t) {
  if (t->ndim < 0) return false;
  for (int i = 0; i < t->ndim; i++)
    if (t->sizes[i] < 0) return false;
  return true;
}

/* Can a value of type t be None at run time? Tensors can (an undefined
 * gradient is None), and so can anything not known to be a plain value. */
static bool never_none(const ir_type *t) {
  switch (t->kind) {
  case IR_TYPE_INT:
  case IR_TYPE_FLOAT:
  case IR_TYPE_BOOL:
  case IR_TYPE_STR:
  case IR_TYPE_DEVICE:
  case IR_TYPE_NUMBER:
  case IR_TYPE_LIST:
  case IR_TYPE_TUPLE:
    return true;
  default:
    return false;
  }
}

/* A constant the node's input types give (without constant inputs).
 * Returns 1 with *c set, 0 if not decided. */
static int type_query(fold *f, const ir_node *n, pass_const *c) {
  const ir_type *t = n->n_inputs ? tensor_type(n->inputs[0]) : NULL;
  memset(c, 0, sizeof *c);
  switch (n->prim) {
  case IR_PRIM_SIZE:
    if (!t) return 0;
    if (n->n_inputs == 1) {
      if (!sizes_known(t)) return 0;
      int64_t *v = ir_graph_alloc(f->g, (size_t)(t->ndim ? t->ndim : 1) * sizeof *v);
      if (!v) return core_error(KILN_ERR_NOMEM, "pass_constant_fold: out of memory");
      for (int i = 0; i < t->ndim; i++) v[i] = t->sizes[i];
      *c = (pass_const){.tag = PASS_C_INTS, .ints = v, .n = t->ndim};
      return 1;
    } else {
      pass_const d;
      if (t->ndim < 0 || !pass_const_of(n->inputs[1], &d) || d.tag != PASS_C_INT) return 0;
      int64_t nd = t->ndim ? t->ndim : 1; /* core_wrap_dim: a 0-d tensor takes dim 0 or -1 */
      if (d.i < -nd || d.i >= nd) return 0;   /* IndexError at run time */
      int64_t k = d.i < 0 ? d.i + nd : d.i;
      int64_t s = t->ndim ? t->sizes[k] : 1;
      if (s < 0) return 0;
      *c = (pass_const){.tag = PASS_C_INT, .i = s};
      return 1;
    }
  case IR_PRIM_DIM:
    if (!t || t->ndim < 0) return 0;
    *c = (pass_const){.tag = PASS_C_INT, .i = t->ndim};
    return 1;
  case IR_PRIM_NUMEL: {
    if (!t || !sizes_known(t)) return 0;
    int64_t k = 1;
    for (int i = 0; i < t->ndim; i++)
      if (__builtin_mul_overflow(k, t->sizes[i], &k)) return 0; /* no such tensor: not folded */
    *c = (pass_const){.tag = PASS_C_INT, .i = k};
    return 1;
  }
  case IR_PRIM_LEN:
    if (!t || t->ndim < 1 || t->sizes[0] < 0) return 0; /* len of a 0-d tensor raises */
    *c = (pass_const){.tag = PASS_C_INT, .i = t->sizes[0]};
    return 1;
  case IR_PRIM_IS_FLOATING_POINT:
    if (!t || t->dtype < 0) return 0;
    *c = (pass_const){.tag = PASS_C_BOOL, .b = core_dtype_is_floating((kiln_dtype)t->dtype)};
    return 1;
  case IR_PRIM_DTYPE:
    if (!t || t->dtype < 0) return 0;
    *c = (pass_const){.tag = PASS_C_INT, .i = op_dtype_code((kiln_dtype)t->dtype)};
    return 1;
  case IR_PRIM_IS_CUDA:
    *c = (pass_const){.tag = PASS_C_BOOL, .b = false};
    return 1;
  case IR_PRIM_IS:
  case IR_PRIM_ISNOT: {
    const ir_type *a = n->inputs[0]->type, *b = n->inputs[1]->type;
    bool a_none = a->kind == IR_TYPE_NONE, b_none = b->kind == IR_TYPE_NONE;
    if (!((a_none && never_none(b)) || (b_none && never_none(a)))) return 0;
    *c = (pass_const){.tag = PASS_C_BOOL, .b = n->prim == IR_PRIM_ISNOT};
    return 1;
  }
  default:
    return 0;
  }
}

/* ---- nodes ------------------------------------------------------------------------- */

#define MAX_FOLD_INPUTS 8

/* Folds a builtin (not If/Loop/ListConstruct) if it can. 1, 0 or < 0. */
static int fold_builtin(fold *f, ir_node *n) {
  pass_const in[MAX_FOLD_INPUTS], out;
  int rc = type_query(f, n, &out);
  if (rc < 0) return rc;
  if (rc == 0) {
    if (n->n_inputs == 0 || n->n_inputs > MAX_FOLD_INPUTS || n->n_outputs != 1) return 0;
    for (int i = 0; i < n->n_inputs; i++)
      if (!pass_const_of(n->inputs[i], &in[i])) return 0;
    if ((rc = pass_const_eval(f->g, n->prim, in, n->n_inputs, &out)) <= 0) return rc;
  }
  return replace_by_const(f, n, &out);
}

/* prim::ListConstruct of int (or float) constants -> a list constant. */
static int fold_list(fold *f, ir_node *n) {
  const ir_type *t = n->outputs[0]->type;
  if (f->lists_mutable || t->kind != IR_TYPE_LIST) return 0; /* Note [List mutation] */
  int ek = t->elems[0]->kind;
  if (ek != IR_TYPE_INT && ek != IR_TYPE_FLOAT) return 0;
  for (int i = 0; i < n->n_inputs; i++) {
    pass_const c;
    if (!pass_const_of(n->inputs[i], &c) ||
        c.tag != (ek == IR_TYPE_INT ? PASS_C_INT : PASS_C_FLOAT))
      return 0;
  }
  int64_t *iv = ir_graph_alloc(f->g, (size_t)(n->n_inputs ? n->n_inputs : 1) * sizeof *iv);
  double *fv = ir_graph_alloc(f->g, (size_t)(n->n_inputs ? n->n_inputs : 1) * sizeof *fv);
  if (!iv || !fv) return core_error(KILN_ERR_NOMEM, "pass_constant_fold: out of memory");
  for (int i = 0; i < n->n_inputs; i++) {
    pass_const c;
    pass_const_of(n->inputs[i], &c);
    iv[i] = c.i;
    fv[i] = c.f;
  }
  pass_const c = ek == IR_TYPE_INT ? (pass_const){.tag = PASS_C_INTS, .ints = iv, .n = n->n_inputs}
                                   : (pass_const){.tag = PASS_C_FLOATS, .floats = fv, .n = n->n_inputs};
  return replace_by_const(f, n, &c);
}

/* An If with a constant condition: the taken block's nodes move before the
 * If, whose outputs become that block's returns. Sets *resume to the first
 * moved node (NULL if none). 1, 0 or < 0. */
static int fold_if(ir_node *n, ir_node **resume) {
  pass_const c;
  *resume = NULL;
  if (!pass_const_of(n->inputs[0], &c) || c.tag != PASS_C_BOOL) return 0;
  ir_block *taken = n->blocks[c.b ? 0 : 1];
  *resume = taken->first;
  for (ir_node *m = taken->first, *next; m; m = next) {
    next = m->next;
    ir_node_move_before(m, n);
  }
  for (int i = 0; i < n->n_outputs; i++) {
    int rc = ir_value_replace_all_uses(n->outputs[i], ir_block_return(taken, i));
    if (rc < 0) return rc;
  }
  int rc = ir_node_remove(n);
  return rc < 0 ? rc : 1;
}

/* A Loop that runs no iteration: outputs = carried inputs. 1, 0 or < 0. */
static int fold_loop(ir_node *n) {
  pass_const trips, cond;
  bool never = (pass_const_of(n->inputs[1], &cond) && cond.tag == PASS_C_BOOL && !cond.b) ||
               (pass_const_of(n->inputs[0], &trips) && trips.tag == PASS_C_INT && trips.i <= 0);
  if (!never) return 0;
  for (int i = 0; i < n->n_outputs; i++) {
    int rc = ir_value_replace_all_uses(n->outputs[i], n->inputs[i + 2]);
    if (rc < 0) return rc;
  }
  int rc = ir_node_remove(n);
  return rc < 0 ? rc : 1;
}

static int fold_block(fold *f, ir_block *b) {
  int changes = 0, rc;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    if (n->op >= 0) continue; /* tensor ops: never (no tensor constants) */
    switch (n->prim) {
    case IR_PRIM_IF: {
      ir_node *resume;
      if ((rc = fold_if(n, &resume)) < 0) return rc;
      if (rc > 0) {
        changes++;
        if (resume) next = resume; /* fold what moved out, too */
        continue;
      }
      break;
    }
    case IR_PRIM_LOOP:
      if ((rc = fold_loop(n)) < 0) return rc;
      if (rc > 0) {
        changes++;
        continue;
      }
      break;
    case IR_PRIM_LIST_CONSTRUCT:
      if ((rc = fold_list(f, n)) < 0) return rc;
      changes += rc;
      continue;
    case IR_PRIM_CONSTANT:
      continue;
    default:
      if (ir_prim_table[n->prim].flags & (IR_PF_SIDE_EFFECT | IR_PF_BLOCKS | IR_PF_SUBGRAPH))
        break;
      if ((rc = fold_builtin(f, n)) < 0) return rc;
      changes += rc;
      continue;
    }
    for (int k = 0; k < n->n_blocks; k++) {
      if ((rc = fold_block(f, n->blocks[k])) < 0) return rc;
      changes += rc;
    }
  }
  return changes;
}

static int fold_graph(ir_graph *g) {
  fold f = {g, pass_graph_mutates_lists(g)};
  int rc = fold_block(&f, ir_graph_top(g));
  if (rc < 0) return rc;
  int sub = pass_for_each_subgraph(g, fold_graph);
  return sub < 0 ? sub : rc + sub;
}

int pass_constant_fold(ir_graph *g) {
  return fold_graph(g);
}
