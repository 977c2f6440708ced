/* src/autograd/inplace.c: autograd's side of in-place ops (Note [In-place
 * autograd] in src/ops/inplace.c): rebasing a written tensor's history
 * onto the in-place op's backward node, and telling views apart. */
#include "autograd.h"

/* Replaces node n's references to self by alias (args and saved). */
static void swap_saved(ag_node *n, kiln_tensor *self, kiln_tensor *alias) {
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
}

static bool saves(const ag_node *n, const kiln_tensor *self) {
  for (int i = 0; i < n->n_saved; i++)
    if (n->saved[i].t == self) return true;
  return false;
}

/* Node n, about to become self's grad_fn, must not reach a node that holds
 * self itself: y.mul_(y) saved y in n, and y.mul_(cos(clamp(y))) saved y
 * in clamp's node, which n reaches through cos's; n -> ... -> self -> n
 * would be a reference cycle, never freed (fuzz_exec under LeakSanitizer).
 * Such entries become one data alias of self (no autograd meta) keeping
 * the version they saw: that version is older than self's now, so their
 * backward reports self's modification either way, as PyTorch does. Only
 * nodes made after the node that made self can have saved self, which
 * bounds the walk (op nodes; a custom node's state is its own). Not self's
 * current grad_fn: after a rebase it is newer than nodes that saved self
 * (c = clamp(y); y.add_(x); y.mul_(cos(c)) leaked so: fuzz_exec). made_seq
 * is that node's seq + 1, 0 when self was made without history. */
static int unsave_self(ag_node *n, kiln_tensor *self, uint64_t made_seq) {
  ag_node **stack = NULL, **seen = NULL;
  int n_stack = 0, n_seen = 0, cap_stack = 0, cap_seen = 0, rc = 0;
  kiln_tensor *alias = NULL;
  for (ag_node *cur = n; cur; cur = n_stack ? stack[--n_stack] : NULL) {
    bool dup = false;
    for (int i = 0; i < n_seen && !dup; i++) dup = seen[i] == cur;
    if (dup || cur->op < 0 || cur->seq < made_seq) continue;
    if (n_seen == cap_seen || n_stack + cur->n_next > cap_stack) {
      int ws = 2 * (n_seen + 1), wk = 2 * (n_stack + cur->n_next + 1);
      ag_node **v2 = core_realloc(seen, (size_t)ws * sizeof *seen);
      if (v2) seen = v2, cap_seen = ws;
      ag_node **s2 = v2 ? core_realloc(stack, (size_t)wk * sizeof *stack) : NULL;
      if (!s2) {
        rc = core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
        goto done;
      }
      stack = s2;
      cap_stack = wk;
    }
    seen[n_seen++] = cur;
    if (saves(cur, self)) {
      if (!alias && !(alias = core_alias(self, true))) {
        rc = core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
        goto done;
      }
      swap_saved(cur, self, alias);
    }
    for (int i = 0; i < cur->n_next; i++)
      if (cur->next[i].node) stack[n_stack++] = cur->next[i].node;
  }
done:
  kiln_release(alias);
  core_free(stack);
  core_free(seen);
  return rc;
}

/* self takes result's grad_fn and output number (PyTorch's rebase_history). */
static int rebase_history(kiln_tensor *self, kiln_tensor *result) {
  ag_meta *from = ag_meta_get(result), *to = ag_meta_get(self);
  if (!from || !to) return core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
  if (!from->grad_fn) return 0;
  int rc = unsave_self(from->grad_fn, self, to->made_seq);
  if (rc < 0) return rc;
  ag_node_retain(from->grad_fn);
  if (to->grad_fn) ag_node_release(to->grad_fn);
  to->grad_fn = from->grad_fn;
  to->output_nr = from->output_nr;
  self->requires_grad = true;
  if (self->storage) { /* the views of self's memory are stale now, but self */
    self->storage->ag_rebases++;
    to->view_rebases = self->storage->ag_rebases;
  }
  return 0;
}

/* Note [In-place saved result] (src/ops/inplace.c): result's node keeps a
 * data alias of self, at the version the write gave it, as its saved
 * output (a node that saved no output gets one: its backward then checks
 * that version too). The alias has no autograd meta, so no cycle. Nodes
 * of several outputs are left alone (no in-place op makes one). */
static int saved_result(kiln_tensor *self, kiln_tensor *result) {
  ag_node *n = result->ag ? result->ag->grad_fn : NULL;
  if (!n || n->op < 0 || n->n_inputs != 1) return 0;
  kiln_tensor *alias = core_alias(self, true);
  if (!alias) return core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
  if (!n->saved_outs && !(n->saved_outs = core_calloc(1, sizeof *n->saved_outs))) {
    kiln_release(alias);
    return core_error(KILN_ERR_NOMEM, "in-place autograd: out of memory");
  }
  kiln_release(n->saved_outs[0].t);
  n->saved_outs[0].t = alias;
  n->saved_outs[0].version = self->storage ? self->storage->version : 0;
  n->saved_outs[0].is_output = true;
  return 0;
}

/* A view: made by a view op, with or without history (Note [Views without
 * history] in views.c; *base is the root base it recorded, or NULL when it
 * dropped it), or whose grad_fn's op is OPF_VIEW. A tensor sharing memory
 * without a recorded base (detach's output) is no view. A view made under
 * no_grad, written while recording, is PyTorch's error (< 0). */
static int view_of(const kiln_tensor *t, kiln_tensor **base) {
  char d[160];
  *base = NULL;
  if (t->ag && t->ag->is_view) { /* its grad_fn may be a regenerated one */
    if (t->ag->view_no_grad && !t->ag->grad_fn)
      return core_error(KILN_ERR_INVALID,
                        "%s: a view was created in no_grad mode and is being modified inplace "
                        "with grad mode enabled. Given that this use case is ambiguous and "
                        "error-prone, it is forbidden. You can clarify your code by moving both "
                        "the view and the inplace either both inside the no_grad block (if you "
                        "don't want the inplace to be tracked) or both outside (if you want the "
                        "inplace to be tracked).",
                        core_tensor_desc(t, d, sizeof d));
    *base = t->ag->base;
    return 1;
  }
  if (t->ag && t->ag->grad_fn) {
    int op = t->ag->grad_fn->op;
    if (!(op >= 0 && (op_table[op].flags & OPF_VIEW))) return 0;
    *base = t->ag->base;
    return 1;
  }
  return 0;
}

__attribute__((constructor)) static void inplace_ctor(void) {
  op_rebase_history_hook = rebase_history;
  op_view_of_hook = view_of;
  op_saved_result_hook = saved_result;
}
