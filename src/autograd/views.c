/* src/autograd/views.c: regenerating a view's history after its base's
 * changed (Note [View regeneration]).
 *
 * Note [View regeneration]: as PyTorch. A view made by a view op under
 * autograd records its root base (Note [CopySlices] in src/ops/inplace.c)
 * and its storage's ag_rebases count, which every rebase of a history
 * onto that memory bumps (an in-place op recorded on the base, or on
 * another view of it through CopySlices). When such a view is used in a
 * differentiable op (or as a backward root: ag_gradient_edge) after the
 * count moved, its grad_fn no longer sees the write: `v1 = b.t(); v2 =
 * b[1]; v2.mul_(3); v1 * v1` would backpropagate as if row 1 were not
 * multiplied. Its grad_fn is then made again on the base's current
 * history, as PyTorch's AsStridedBackward: view(index_select(
 * clone(base).flatten(), 0, pos), shape), pos being each view element's
 * position in the base (from the shared storage's offsets; the clone keeps
 * the saved input apart from the base's memory, which may be written
 * again). Writes without autograd (no_grad, an optimizer step) rebase
 * nothing, and a view of a leaf needs nothing then. A view that a backward
 * node saved has dropped its base (a reference cycle otherwise, node.c):
 * using it after its base's history moved is an error that says so. */
#include "autograd.h"

void ag_note_view(kiln_tensor *t) {
  if (!t->ag) return;
  t->ag->is_view = true;
  t->ag->view_rebases = t->storage ? t->storage->ag_rebases : 0;
}

int ag_refresh_view(kiln_tensor *t) {
  char d[160];
  ag_meta *m = t->ag;
  kiln_tensor *base = m->base;
  if (!base)
    return core_error(KILN_ERR_UNSUPPORTED,
                      "%s is a view whose base was modified by an in-place operation recorded "
                      "by autograd after a backward formula saved the view, so kiln cannot "
                      "regenerate its history (Note [View regeneration]); make the view again "
                      "from its base after the write",
                      core_tensor_desc(t, d, sizeof d));
  int rc = -1;
  int64_t flat = -1;
  kiln_scope_begin();
  bool prev = kiln_set_grad_enabled(true);
  kiln_tensor *p = op_view_positions(t, base, "view regeneration");
  kiln_tensor *c = p ? kiln_clone(base) : NULL, *f = c ? kiln_reshape(c, 1, &flat) : NULL;
  kiln_tensor *s = f ? kiln_index_select(f, 0, p) : NULL;
  kiln_tensor *v = s ? kiln_view(s, t->ndim, t->shape) : NULL;
  kiln_set_grad_enabled(prev);
  if (v && v->ag && v->ag->grad_fn) {
    ag_node_retain(v->ag->grad_fn);
    if (m->grad_fn) ag_node_release(m->grad_fn);
    m->grad_fn = v->ag->grad_fn;
    m->output_nr = v->ag->output_nr;
    m->view_rebases = t->storage->ag_rebases;
    rc = 0;
  } else if (v) {
    rc = core_error(KILN_ERR_STATE, "view regeneration: the base of %s has no history",
                    core_tensor_desc(t, d, sizeof d));
  }
  kiln_scope_end();
  return rc;
}
