/* src/autograd/inplace.c: autograd's side of in-place ops (Note [In-place
 * autograd] in src/ops/inplace.c): rebasing a written tensor's history
 * onto the in-place op's backward node, and telling views apart. */
#include "autograd.h"

/* Node n, about to become self's grad_fn, must not hold self itself (an
 * in-place op with self as another operand, y.mul_(y), saved y): n -> self
 * -> n would be a reference cycle, never freed. Such entries become one
 * data alias of self (no autograd meta), keeping the version they saw, so
 * a backward still reports self's modification. */
static int unsave_self(ag_node *n, kiln_tensor *self) {
  bool found = false;
  for (int i = 0; i < n->n_saved && !found; i++) found = n->saved[i].t == self;
  if (!found) return 0;
  kiln_tensor *alias = core_alias(self, true);
  if (!alias) return core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
  for (int i = 0; i < n->n_args; i++) {
    op_val *a = &n->args[i];
    if (a->tag == OP_VAL_TENSOR && a->t == self) a->t = alias;
    if (a->tag == OP_VAL_TENSORS)
      for (int k = 0; k < a->ts.n; k++)
        if (a->ts.v[k] == self) ((kiln_tensor **)a->ts.v)[k] = alias;
  }
  for (int i = 0; i < n->n_saved; i++)
    if (n->saved[i].t == self) {
      n->saved[i].t = kiln_retain(alias);
      kiln_release(self);
    }
  kiln_release(alias);
  return 0;
}

/* self takes result's grad_fn and output number (PyTorch's rebase_history). */
static int rebase_history(kiln_tensor *self, kiln_tensor *result) {
  ag_meta *from = ag_meta_get(result), *to = ag_meta_get(self);
  if (!from || !to) return core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
  if (!from->grad_fn) return 0;
  int rc = unsave_self(from->grad_fn, self);
  if (rc < 0) return rc;
  ag_node_retain(from->grad_fn);
  if (to->grad_fn) ag_node_release(to->grad_fn);
  to->grad_fn = from->grad_fn;
  to->output_nr = from->output_nr;
  self->requires_grad = true;
  return 0;
}

/* A view: made by a view op (its grad_fn's op is OPF_VIEW; *base is the
 * root base it recorded, or NULL), or, when it has no history, sharing
 * its storage with another tensor header (*base NULL: unknown). */
static bool view_of(const kiln_tensor *t, kiln_tensor **base) {
  *base = NULL;
  if (t->ag && t->ag->grad_fn) {
    int op = t->ag->grad_fn->op;
    if (!(op >= 0 && (op_table[op].flags & OPF_VIEW))) return false;
    *base = t->ag->base;
    return true;
  }
  return t->storage && t->storage->refcount > 1;
}

__attribute__((constructor)) static void inplace_ctor(void) {
  op_rebase_history_hook = rebase_history;
  op_view_of_hook = view_of;
}
