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

/* Note [Views without history]: as PyTorch's view metadata, every view a
 * view op makes of a CPU tensor (a floating one: only those take
 * gradients) records its root base, with or without autograd recording:
 * `b = x * 2` under no_grad (or of inputs that need no grad), `v = b[1]`,
 * then `v.add_(w)` with w requiring grad is PyTorch's CopySlices on b (b
 * takes its history, v its part of it). Outputs of the other ops that may
 * hand back their input's memory (contiguous, to with the same dtype,
 * reshape as a view) record it too, as they are self in PyTorch. A view
 * keeps its base alive as PyTorch's does; detach's output is no view
 * (PyTorch's non-differentiable view), nor is any other tensor sharing
 * memory without a recorded base: writing one rebases its own history
 * only. A view made under no_grad is refused an in-place write recorded
 * by autograd (PyTorch's rule, src/ops/inplace.c). A view made with grad
 * mode on whose base came to require grad through a recorded write made
 * after the view requires grad from then on (PyTorch's view
 * requires_grad), its history regenerated (Note [View regeneration]). */

kiln_tensor *ag_view_root(kiln_tensor *in, bool *known) {
  *known = true;
  if (in->ag && in->ag->is_view) {
    *known = in->ag->base != NULL;
    return in->ag->base;
  }
  return in;
}

int ag_record_view_base(kiln_tensor *in, kiln_tensor **outs, int n_outs) {
  bool known;
  kiln_tensor *root = ag_view_root(in, &known);
  for (int i = 0; i < n_outs; i++) {
    kiln_tensor *o = outs[i];
    if (!o || o == in || o == root || !o->storage || o->storage != in->storage ||
        !core_dtype_is_floating(o->dtype) || (o->ag && (o->ag->is_view || o->ag->grad_fn)))
      continue;
    ag_meta *m = ag_meta_get(o);
    if (!m) return core_error(KILN_ERR_NOMEM, "view: out of memory");
    m->base = known ? kiln_retain(root) : NULL;
    /* (a view of a view made under no_grad inherits that, as PyTorch's) */
    m->view_no_grad = !op_grad_enabled || (in->ag && in->ag->is_view && in->ag->view_no_grad);
    ag_note_view(o);
  }
  return 0;
}

bool ag_view_grad_pending(const kiln_tensor *t) {
  const ag_meta *m = t->ag;
  /* (a view that dropped its base may have come to: its regeneration then
   * fails saying so, Note [View regeneration], rather than treating the
   * write as a constant) */
  return !t->requires_grad && m && m->is_view && !m->view_no_grad && t->storage &&
         m->view_rebases != t->storage->ag_rebases && (!m->base || m->base->requires_grad);
}

bool ag_view_adopt_grad(kiln_tensor *t) {
  if (t->requires_grad) return true;
  if (!ag_view_grad_pending(t)) return false;
  t->requires_grad = true; /* stale now: its next use regenerates its history */
  return true;
}

static bool view_grad_hook(kiln_tensor *t) { return ag_view_adopt_grad(t); }

static int view_base_hook(kiln_tensor *in, kiln_tensor **outs, int n_outs) {
  return ag_record_view_base(in, outs, n_outs);
}

__attribute__((constructor)) static void views_ctor(void) {
  op_view_base_hook = view_base_hook;
  op_view_grad_hook = view_grad_hook;
}

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
