/* src/passes/functionalize.c: TorchScript's RemoveMutation for in-place
 * ops: rewrites an in-place op whose self nothing else aliases into its
 * functional form, so that autodiff grouping and fusion see ordinary
 * dataflow (nn.ReLU(inplace=True) inside a DifferentiableGraph).
 *   before: %t : Float(3) = aten::mul(%x, %y)
 *           %u : Float(3) = aten::relu_(%t)
 *           %z : Float(3) = aten::exp(%t)
 *           return (%u, %z)
 *   after:  %t : Float(3) = aten::mul(%x, %y)
 *           %1 : Float(3) = aten::relu(%t)
 *           %z : Float(3) = aten::exp(%1)
 *           return (%1, %z)
 *
 * Note [Functionalization]: `%u = f_(%t, ...)` becomes `%1 = f(%t, ...)`,
 * with every use of %u and every later use of %t (in the same block and
 * blocks nested in later nodes) reading %1, when
 *   - %t is fresh memory made in the same block by an op-table node (not
 *     a graph input, block parameter, view, or a prim's output), and its
 *     alias set holds nothing but %t and the outputs of in-place ops
 *     (Note [Alias analysis]): no view of it, no list holding it, and
 *     no such output made before the op read after it;
 *   - the functional op gives self's shape and dtype: its profiled tensor
 *     arguments have self's dtype and complete sizes that broadcast into
 *     self's complete sizes (elementwise ops), and no float number goes
 *     into an integer self, and the op's own result dtype (float for
 *     exp, bool for eq) is self's. Otherwise the in-place op could differ from
 *     the functional one (promotion, broadcasting self up), so it stays.
 * What cannot be made functional stays in place, in order; the alias
 * analysis then keeps it (and what touches its memory) out of groups. */
#include "passes.h"

static bool complete(const ir_type *t) {
  if (t->kind != IR_TYPE_TENSOR || t->dtype < 0 || t->ndim < 0 || (t->ndim && !t->sizes)) return false;
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] < 0) return false;
  return true;
}

/* Does the functional op give self's shape and dtype? */
static bool same_result(const ir_node *n) {
  const ir_type *self = n->inputs[0]->type;
  int f = op_functional(n->op);
  if (!complete(self)) return false;
  if (!(op_table[f].flags & OPF_ELEMENTWISE)) return true; /* self's shape and dtype */
  /* a float result (exp_ of an int64 self) or a bool one (eq_ of a float
   * self) is not self's dtype: the in-place op casts or refuses */
  if ((op_table[f].flags & OPF_FLOAT_ONLY) && !core_dtype_is_floating((kiln_dtype)self->dtype)) return false;
  if ((op_table[f].flags & OPF_BOOL_OUT) && self->dtype != KILN_DTYPE_BOOL) return false;
  for (int i = 1; i < n->n_inputs; i++) {
    const ir_type *t = n->inputs[i]->type;
    if (t->kind == IR_TYPE_FLOAT && !core_dtype_is_floating((kiln_dtype)self->dtype)) return false;
    if (t->kind == IR_TYPE_NUMBER || t->kind == IR_TYPE_ANY) return false;
    if (t->kind != IR_TYPE_TENSOR) continue;
    if (!complete(t) || t->dtype != self->dtype || t->ndim > self->ndim) return false;
    for (int d = 0; d < t->ndim; d++) {
      int64_t s = t->sizes[d], want = self->sizes[self->ndim - t->ndim + d];
      if (s != 1 && s != want) return false;
    }
  }
  return true;
}

typedef struct only_ctx {
  const pass_alias *a;
  int set;
  const ir_value *self;
  const ir_node *n; /* the in-place op to make functional */
  bool ok;
} only_ctx;

static bool used_after(const ir_value *v, const ir_node *n) {
  for (int i = 0; i < v->n_uses; i++)
    if (ir_node_is_after(v->uses[i].user, n)) return true;
  return false;
}

/* Is every value of self's set self or an in-place op's output, and none
 * made before n read after it? (u = t.add_(b); t.relu_(); u.sigmoid_():
 * u is t's memory, which a functional relu no longer writes, and t's
 * later readers would miss sigmoid_'s write through u.) */
static void check_block(only_ctx *c, const ir_block *b) {
  for (int i = 0; i < ir_block_n_params(b) && c->ok; i++)
    if (pass_alias_set(c->a, ir_block_param(b, i)) == c->set) c->ok = false;
  for (const ir_node *m = b->first; m && c->ok; m = m->next) {
    for (int j = 0; j < m->n_outputs && c->ok; j++) {
      const ir_value *v = m->outputs[j];
      if (v == c->self || pass_alias_set(c->a, v) != c->set) continue;
      if (!(m->op >= 0 && op_is_inplace(m->op) && j == 0)) c->ok = false;
      else if (m != c->n && !ir_node_is_after(m, c->n) && used_after(v, c->n)) c->ok = false;
    }
    for (int k = 0; k < m->n_blocks && c->ok; k++) check_block(c, m->blocks[k]);
  }
}

static bool functionalizable(const pass_alias *a, const ir_graph *g, const ir_node *n) {
  if (n->op < 0 || !op_is_inplace(n->op) || n->n_inputs < 1 || n->n_outputs != 1) return false;
  const ir_value *self = n->inputs[0];
  const ir_node *def = self->node;
  if (!def || def->op < 0 || def->owner != n->owner) return false;
  if (!op_is_inplace(def->op) && op_output_alias(def->op, self->index) >= 0) return false;
  if (pass_alias_is_external(a, self)) return false;
  for (int i = 1; i < n->n_inputs; i++)
    if (pass_alias_may_alias(a, n->inputs[i], self)) return false; /* x.add_(x) */
  if (!same_result(n)) return false;
  only_ctx c = {a, pass_alias_set(a, self), self, n, true};
  if (c.set < 0) return false;
  check_block(&c, ir_graph_top(g));
  return c.ok;
}

static ir_node *find_next(const pass_alias *a, const ir_graph *g, ir_block *b) {
  for (ir_node *n = b->first; n; n = n->next) {
    if (functionalizable(a, g, n)) return n;
    for (int k = 0; k < n->n_blocks; k++) {
      ir_node *m = find_next(a, g, n->blocks[k]);
      if (m) return m;
    }
  }
  return NULL;
}

static int rewrite(ir_graph *g, ir_node *n) {
  ir_node *f = ir_node_new_op(g, op_functional(n->op));
  if (!f) return KILN_ERR_NOMEM;
  for (int i = 0; i < n->n_inputs; i++)
    if (ir_node_add_input(f, n->inputs[i]) < 0) return KILN_ERR_NOMEM;
  /* the result has self's shape and dtype (same_result): its profiled type */
  ir_value *out = ir_node_add_output(f, n->inputs[0]->type);
  if (!out) return KILN_ERR_NOMEM;
  ir_node_insert_before(f, n);
  ir_value *self = n->inputs[0];
  if (ir_value_replace_all_uses(n->outputs[0], out) < 0) return KILN_ERR_NOMEM;
  if (ir_value_replace_uses_after(self, out, n) < 0) return KILN_ERR_NOMEM;
  return ir_node_remove(n);
}

int pass_functionalize(ir_graph *g) {
  int changes = 0, rc = 0;
  for (;;) {
    pass_alias *a = pass_alias_new(g);
    if (!a) return KILN_ERR_NOMEM;
    ir_node *n = find_next(a, g, ir_graph_top(g));
    pass_alias_free(a);
    if (!n) break;
    if ((rc = rewrite(g, n)) < 0) return rc;
    changes++;
  }
  pass_log(g, "functionalize");
  return changes;
}
