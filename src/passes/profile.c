/* src/passes/profile.c: profiling instrumentation and type specialization
 * for the profiling executor.
 *
 * pass_insert_profiles puts a prim::profile before every tensor input of
 * every op-table node (and on tensor graph outputs):
 *   before: %4 : Tensor = aten::mm(%x, %w)
 *   after:  %5 : Tensor = prim::profile[profiled_type=Tensor, seen_none=0](%x)
 *           %6 : Tensor = prim::profile[profiled_type=Tensor, seen_none=0](%w)
 *           %4 : Tensor = aten::mm(%5, %6)
 * The executor records what each profile sees into its profiled_type;
 * pass_specialize_from_profiles then gives each profiled value the merge of
 * every profile on it (all its uses, all runs, all loop iterations) and
 * removes the profiles. */
#include <string.h>

#include "autodiff.h"

static int profile_before(ir_graph *g, ir_node *user, int index) {
  ir_value *v = user->inputs[index];
  ir_node *p = ir_node_new_prim(g, IR_PRIM_PROFILE);
  if (!p) return KILN_ERR_NOMEM;
  if (ir_node_add_input(p, v) < 0 || ir_node_set_ty(p, "profiled_type", ir_type_tensor()) < 0 ||
      ir_node_set_i(p, "seen_none", 0) < 0)
    return KILN_ERR_NOMEM;
  ir_value *o = ir_node_add_output(p, v->type);
  if (!o) return KILN_ERR_NOMEM;
  ir_node_insert_before(p, user);
  return ir_node_set_input(user, index, o) ? 1 : KILN_ERR_NOMEM;
}

static int profile_block(ir_graph *g, ir_block *b) {
  int changed = 0, rc;
  for (ir_node *n = b->first; n; n = n->next) {
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = profile_block(g, n->blocks[i])) < 0) return rc;
      changed += rc;
    }
    if (n->op < 0) continue;
    for (int i = 0; i < n->n_inputs; i++) {
      const ir_type *t = n->inputs[i]->type;
      if (t->kind != IR_TYPE_TENSOR &&
          !(t->kind == IR_TYPE_OPTIONAL && t->elems[0]->kind == IR_TYPE_TENSOR))
        continue;
      if ((rc = profile_before(g, n, i)) < 0) return rc;
      changed += rc;
    }
  }
  return changed;
}

int pass_insert_profiles(ir_graph *g) { return profile_block(g, ir_graph_top(g)); }

/* ---- merging (TensorType::merge) ------------------------------------------ */

/* The merge of two profiled types: equal fields stay, differing fields
 * become unknown; an unseen type merges as the identity. */
const ir_type *pass_merge_types(ir_graph *g, const ir_type *a, const ir_type *b) {
  if (!a || !a->seen) return b;
  if (!b || !b->seen) return a;
  int dtype = a->dtype == b->dtype ? a->dtype : -1;
  int rg = a->requires_grad == b->requires_grad ? a->requires_grad : -1;
  int ndim = a->ndim == b->ndim ? a->ndim : -1;
  int64_t sizes[KILN_MAX_DIMS];
  for (int i = 0; i < ndim && i < KILN_MAX_DIMS; i++)
    sizes[i] = a->sizes && b->sizes && a->sizes[i] == b->sizes[i] ? a->sizes[i] : -1;
  return ir_type_tensor_new(g, dtype, ndim, ndim > 0 ? sizes : NULL, NULL, rg, "cpu");
}

/* ---- specialization ---------------------------------------------------------- */

typedef struct merged {
  const ir_value *v;
  const ir_type *t;
} merged;

static int collect(ir_graph *g, ir_block *b, merged **m, int *n, int *cap) {
  for (ir_node *x = b->first; x; x = x->next) {
    for (int i = 0; i < x->n_blocks; i++) {
      int rc = collect(g, x->blocks[i], m, n, cap);
      if (rc < 0) return rc;
    }
    if (x->prim != IR_PRIM_PROFILE || x->n_inputs != 1) continue;
    const ir_attr *a = ir_node_attr(x, "profiled_type");
    const ir_type *t = a && a->kind == IR_ATTR_TYPE ? a->ty : ir_type_tensor();
    int k = 0;
    while (k < *n && (*m)[k].v != x->inputs[0]) k++;
    if (k == *n) {
      if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        merged *m2 = core_realloc(*m, (size_t)*cap * sizeof *m2);
        if (!m2) return KILN_ERR_NOMEM;
        *m = m2;
      }
      (*m)[(*n)++] = (merged){x->inputs[0], t};
    } else {
      (*m)[k].t = pass_merge_types(g, (*m)[k].t, t);
      if (!(*m)[k].t) return KILN_ERR_NOMEM;
    }
  }
  return 0;
}

static int strip(ir_block *b) {
  int removed = 0;
  for (ir_node *x = b->first, *next; x; x = next) {
    next = x->next;
    for (int i = 0; i < x->n_blocks; i++) removed += strip(x->blocks[i]);
    if (x->prim != IR_PRIM_PROFILE) continue;
    if (x->n_inputs == 1 && x->n_outputs == 1 &&
        ir_value_replace_all_uses(x->outputs[0], x->inputs[0]) < 0)
      return KILN_ERR_NOMEM;
    if (ir_node_remove(x) == 0) removed++;
  }
  return removed;
}

int pass_specialize_from_profiles(ir_graph *g) {
  merged *m = NULL;
  int n = 0, cap = 0, rc = collect(g, ir_graph_top(g), &m, &n, &cap);
  if (rc < 0) {
    core_free(m);
    return rc;
  }
  for (int i = 0; i < n; i++) {
    if (!m[i].t->seen) continue;
    ir_value *v = (ir_value *)m[i].v;
    /* a Tensor? output of a prim::If keeps its optionality: a block that
     * did not run while profiling may return it a Tensor? (nn.Transformer-
     * EncoderLayer's merged mask), and Tensor does not accept Tensor? */
    if (v->type->kind == IR_TYPE_OPTIONAL && v->node && v->node->prim == IR_PRIM_IF) {
      const ir_type *o = ir_type_optional(g, m[i].t);
      if (!o) {
        core_free(m);
        return KILN_ERR_NOMEM;
      }
      v->type = o;
    } else {
      v->type = m[i].t;
    }
  }
  core_free(m);
  return strip(ir_graph_top(g));
}

bool pass_graph_needs_gradient(const ir_graph *g) {
  /* any value whose (merged) type says it may require grad */
  const ir_block *top = ir_graph_top(g);
  const ir_block *stack[64];
  int sp = 0;
  stack[sp++] = top;
  while (sp) {
    const ir_block *b = stack[--sp];
    for (int i = 0; i < ir_block_n_params(b); i++) {
      const ir_type *t = ir_block_param(b, i)->type;
      if (t->kind == IR_TYPE_TENSOR && t->seen && t->requires_grad != 0) return true;
    }
    for (const ir_node *x = b->first; x; x = x->next) {
      for (int i = 0; i < x->n_outputs; i++) {
        const ir_type *t = x->outputs[i]->type;
        if (t->kind == IR_TYPE_TENSOR && t->seen && t->requires_grad != 0) return true;
      }
      for (int i = 0; i < x->n_inputs; i++) {
        const ir_type *t = x->inputs[i]->type;
        if (t->kind == IR_TYPE_TENSOR && t->seen && t->requires_grad != 0) return true;
      }
      for (int i = 0; i < x->n_blocks && sp < 64; i++) stack[sp++] = x->blocks[i];
    }
  }
  return false;
}
