/* src/lazy/views.c: writes through views of lazy tensors (Note [Lazy
 * views]): an in-place op on a lazy view also writes its base, and the
 * base's other views see every write.
 *
 * Note [Lazy views]: a lazy tensor holds a value, not memory. As PyTorch's
 * functionalization, a lazy view remembers its root base tensor and the
 * view ops (by their schemas' alias annotations) from it
 * (lazy_state.view_base, view_steps, noted when a view op is recorded:
 * lazy_note_view), so the relation outlives a sync (which turns every
 * tensor into plain device data). Writing a view `v = x[0]; v.add_(1)`
 * replays its steps on the base's current value and puts r back step by
 * step: the step's input with the written region replaced
 * (`where(mask, select_backward(r), x)` for select and slice, the inverse
 * permutation for t/transpose/permute, a reshape back for
 * view/reshape/squeeze/unsqueeze and for an expand that repeats no
 * element, r itself for contiguous); every live tensor on the base's old
 * value (the base, its other aliases) is rebound to the result. An expand
 * that repeats elements takes a fill_ or zero_ written straight into it
 * (each repeat once); any other write to it, and chunk, split and unbind
 * views, cannot be written this way: an error says so. A dtype-changing `to` (or one with
 * copy=True) is a copy, not a view; one that keeps the dtype is self.
 * reshape and contiguous of a view eager would not find contiguous are
 * copies too. Writing the base (an in-place op or kiln_copy_) just rebinds
 * it. Then every live view of that base, made before the
 * write of the base or of another of its views, is rebound to its steps
 * replayed on the base's new value (lazy_refresh_views; PyTorch
 * regenerates a view on access once its base's version moved). So `v =
 * b[0]; b.add_(1); v * 2` and `v1 = b.t(); v2 = b[1]; v2.mul_(3); v1`
 * give eager's values, with or without a mark_step in between. A tensor
 * on the base's value that is not a view of it (a detach, autograd's saved
 * alias) keeps its value.
 *
 * Note [Lazy views and autograd]: a write recorded by autograd through a
 * lazy view gives the base the history of its rebuilt value (the put-back
 * ops on the written result: eager's CopySlices, Note [CopySlices] in
 * src/ops/inplace.c), and every refreshed view the history of its steps
 * replayed on the base (eager's view regeneration, Note [View
 * regeneration] in src/autograd/views.c), so a view of a tensor without
 * history written with an operand that requires grad backpropagates as in
 * eager mode and PyTorch. */
#include <string.h>

#include "lazy.h"

static kiln_tensor *tensor_on(lazy_value v) {
  return core_autorelease(lazy_tensor_new(v.node, v.index, &v.node->metas[v.index]));
}

static int64_t int_arg(const lazy_node *n, int k, int64_t dflt) {
  const op_val *a = &n->args[k];
  return a->tag == OP_VAL_INT ? a->i : dflt;
}

/* Is r a fill_/zero_'s value (the same number everywhere)? */
static bool uniform(kiln_tensor *r) {
  if (r->device != CORE_DEVICE_LAZY) return false;
  int op = lazy_of(r)->value.node->op;
  return op == KILN_OP_FILL || op == KILN_OP_ZERO;
}

/* r (an expand of base's shape, uniform) with each repeat taken once:
 * index 0 of the dims the expand added and of those it repeated. */
static kiln_tensor *first_repeat(kiln_tensor *r, const kiln_tensor *base) {
  kiln_tensor *t = r;
  while (t && t->ndim > base->ndim) t = kiln_select(t, 0, 0);
  for (int d = 0; t && d < base->ndim; d++)
    if (base->shape[d] == 1 && t->shape[d] != 1) t = kiln_narrow(t, d, 0, 1);
  return t ? kiln_contiguous(t) : NULL;
}

/* base with the region view op n took replaced by r; NULL + error */
static kiln_tensor *put_back(const lazy_node *n, kiln_tensor *base, kiln_tensor *r) {
  const char *name = op_table[n->op].name;
  int nd = base->ndim;
  switch (n->op) {
  /* permuted back and made contiguous: a lazy value must stay viewable
   * (a later aten::view of the base) */
  case KILN_OP_T:
    return kiln_contiguous(kiln_t(r));
  case KILN_OP_TRANSPOSE:
    return kiln_contiguous(kiln_transpose(r, (int)int_arg(n, 1, 0), (int)int_arg(n, 2, 1)));
  case KILN_OP_PERMUTE: {
    const op_val *d = &n->args[1];
    int64_t inv[KILN_MAX_DIMS];
    if (d->tag != OP_VAL_INTS || d->ints.n != nd) break;
    for (int i = 0; i < nd; i++) {
      int64_t k = d->ints.v[i] < 0 ? d->ints.v[i] + nd : d->ints.v[i];
      if (k < 0 || k >= nd) break;
      inv[k] = i;
    }
    return kiln_contiguous(kiln_permute(r, nd, inv));
  }
  case KILN_OP_VIEW:
  case KILN_OP_RESHAPE:
  case KILN_OP_SQUEEZE:
  case KILN_OP_UNSQUEEZE:
    return kiln_reshape(r, nd, base->shape);
  case KILN_OP_TO: /* a view only when it keeps the dtype: self itself */
  case KILN_OP_CONTIGUOUS:
    return r;
  case KILN_OP_EXPAND:
    /* as many elements as the base: only size-1 dims added or kept, so
     * no element repeats and the write is the base reshaped */
    if (kiln_tensor_numel(r) == kiln_tensor_numel(base)) return kiln_reshape(r, nd, base->shape);
    /* an expand that repeats elements takes only a uniform write (fill_,
     * zero_: every repeat of an element gets the same value), as PyTorch;
     * any other is refused below, as PyTorch refuses it */
    if (uniform(r)) return first_repeat(r, base);
    break;
  case KILN_OP_SELECT:
  case KILN_OP_SLICE:
  case KILN_OP_NARROW: {
    int dim = core_wrap_dim(name, int_arg(n, 1, 0), nd);
    if (dim < 0) return NULL;
    int64_t size = base->shape[dim];
    op_val sizes = OPV_INTS(base->shape, nd);
    kiln_tensor *ones = kiln_ones(r->ndim, r->shape, r->dtype), *sb, *mask;
    if (n->op == KILN_OP_SELECT) {
      int64_t i = int_arg(n, 2, 0);
      if (i < 0) i += size;
      sb = op_call1(KILN_OP_SELECT_BACKWARD, (op_val[]){OPV_T(r), sizes, OPV_I(dim), OPV_I(i)}, 4);
      mask = op_call1(KILN_OP_SELECT_BACKWARD, (op_val[]){OPV_T(ones), sizes, OPV_I(dim), OPV_I(i)}, 4);
    } else {
      int64_t start, end, step = 1;
      if (n->op == KILN_OP_NARROW) {
        start = int_arg(n, 2, 0);
        if (start < 0) start += size;
        end = start + int_arg(n, 3, 0);
      } else {
        start = int_arg(n, 2, 0);
        end = int_arg(n, 3, size);
        step = int_arg(n, 4, 1);
        if (start < 0) start += size;
        if (end < 0) end += size;
        start = start < 0 ? 0 : start > size ? size : start;
        end = end < start ? start : end > size ? size : end;
      }
      op_val a[6] = {OPV_T(r), sizes, OPV_I(dim), OPV_I(start), OPV_I(end), OPV_I(step)};
      sb = op_call1(KILN_OP_SLICE_BACKWARD, a, 6);
      a[0] = OPV_T(ones);
      mask = op_call1(KILN_OP_SLICE_BACKWARD, a, 6);
    }
    if (core_scope_depth() == 0) kiln_release(ones); /* else the scope owns it */
    mask = mask ? op_call1(KILN_OP_NE, (op_val[]){OPV_T(mask), OPV_I(0)}, 2) : NULL;
    return sb && mask ? kiln_where(mask, sb, base) : NULL;
  }
  default:
    break;
  }
  core_error(KILN_ERR_UNSUPPORTED,
             "in-place write through a lazy view made by %s is not supported (Note [Lazy "
             "views]); clone the view first",
             name);
  return NULL;
}

/* Rebinds every live tensor on value v to r's value (v's aliases). */
static int rebind_all(lazy_value v, kiln_tensor *r) {
  lazy_value nv;
  int rc = lazy_value_of(r, &nv);
  if (rc < 0) return rc;
  for (lazy_state *s = lazy_live_first(); s; s = s->next)
    if (s->value.node == v.node && s->value.index == v.index) lazy_rebind(s->owner, nv.node, nv.index);
  lazy_node_release(nv.node);
  return 0;
}

/* Is v a view of another value (made by a view op, by its schema's alias
 * annotation)? That value in *b (not retained), its argument in *arg. */
static bool view_base(lazy_value v, lazy_value *b, int *arg) {
  const lazy_node *n = v.node;
  if (n->op < 0) return false;
  int out = (op_table[n->op].flags & OPF_LIST_OUT) ? 0 : v.index;
  int k = op_output_alias(n->op, out);
  if (k < 0 || n->arg_kind[k] != LAZY_ARG_TENSOR) return false;
  if (n->op == KILN_OP_TO && n->metas[v.index].dtype != n->metas[0].dtype) return false;
  if (n->op == KILN_OP_TO && n->n_args > 3 && n->args[3].tag == OP_VAL_BOOL && n->args[3].b)
    return false; /* copy=True: a copy */
  *b = n->operands[n->arg_operand[k]];
  if (n->op == KILN_OP_TO && b->node->metas[b->index].dtype != n->metas[v.index].dtype)
    return false;
  *arg = k;
  return true;
}

/* Output index of view node n recorded again, its argument k_base bound
 * to nb and the others as n has them; NULL + error. */
static kiln_tensor *replay(const lazy_node *n, int index, int k_base, kiln_tensor *nb) {
  op_val args[32];
  kiln_tensor *small[4], **outs = small;
  if (n->n_args > (int)(sizeof args / sizeof *args)) {
    core_error(KILN_ERR_UNSUPPORTED, "lazy views: %s has too many arguments to replay",
               op_table[n->op].name);
    return NULL;
  }
  for (int k = 0; k < n->n_args; k++) {
    const lazy_value *o = &n->operands[n->arg_operand[k]];
    double x = 0;
    switch (n->arg_kind[k]) {
    case LAZY_ARG_CONST: args[k] = n->args[k]; break;
    case LAZY_ARG_TENSOR:
      args[k] = OPV_T(k == k_base ? nb : tensor_on(*o));
      if (!args[k].t) return NULL;
      break;
    case LAZY_ARG_SCALAR: /* a 0-d device data node */
      if (kiln_item(o->node->data, &x) < 0) return NULL;
      args[k] = n->args[k].tag == OP_VAL_INT     ? OPV_I((int64_t)x)
                : n->args[k].tag == OP_VAL_FLOAT ? OPV_F(x)
                                                 : OPV_B(x != 0);
      break;
    default:
      core_error(KILN_ERR_UNSUPPORTED, "lazy views: cannot replay %s on a tensor list",
                 op_table[n->op].name);
      return NULL;
    }
  }
  if (n->n_outs > 4 && !(outs = core_alloc((size_t)n->n_outs * sizeof *outs))) {
    core_error(KILN_ERR_NOMEM, "lazy views: out of memory");
    return NULL;
  }
  int got = op_call(n->op, args, n->n_args, outs, n->n_outs); /* the scope owns them */
  kiln_tensor *t = got > index ? outs[index] : NULL;
  if (got >= 0 && got <= index)
    core_error(KILN_ERR_STATE, "lazy views: %s replayed gave %d outputs, not %d",
               op_table[n->op].name, got, n->n_outs);
  if (outs != small) core_free(outs);
  return t;
}

static void rebind_to(kiln_tensor *t, kiln_tensor *r, int *rc) {
  lazy_value nv;
  if (*rc < 0) return;
  if ((*rc = lazy_value_of(r, &nv)) < 0) return;
  lazy_rebind(t, nv.node, nv.index);
  lazy_node_release(nv.node);
}

void lazy_drop_view(lazy_state *s) {
  for (int i = 0; i < s->n_view_steps; i++) lazy_node_release(s->view_steps[i].node);
  core_free(s->view_steps);
  if (s->view_base && lazy_of(s->view_base)) lazy_of(s->view_base)->n_views--;
  kiln_release(s->view_base);
  s->view_steps = NULL;
  s->n_view_steps = 0;
  s->view_base = NULL;
}

/* Would eager's tensor for s be contiguous (its view steps keep a
 * contiguous base contiguous)? reshape and contiguous view only those. */
static bool keeps_contiguous(const lazy_state *s) {
  for (int i = 0; i < s->n_view_steps; i++) {
    const lazy_node *n = s->view_steps[i].node;
    switch (n->op) {
    case KILN_OP_VIEW:
    case KILN_OP_RESHAPE:
    case KILN_OP_SQUEEZE:
    case KILN_OP_UNSQUEEZE:
    case KILN_OP_CONTIGUOUS:
    case KILN_OP_TO:
      break;
    case KILN_OP_SELECT:
    case KILN_OP_NARROW:
      if (int_arg(n, 1, 0) != 0) return false;
      break;
    case KILN_OP_SLICE:
      if (int_arg(n, 1, 0) != 0 || int_arg(n, 4, 1) != 1) return false;
      break;
    default:
      return false;
    }
  }
  return true;
}

int lazy_note_view(lazy_node *node, const op_val *args, kiln_tensor *const *outs, int n_outs) {
  for (int i = 0; i < n_outs; i++) {
    lazy_value b;
    int arg;
    if (!view_base((lazy_value){node, i}, &b, &arg)) continue;
    const kiln_tensor *t = args[arg].t;
    if (t->device != CORE_DEVICE_LAZY) continue; /* a CPU input uploaded: no lazy base */
    lazy_state *from = lazy_of(t), *to = lazy_of(outs[i]);
    if ((node->op == KILN_OP_RESHAPE || node->op == KILN_OP_CONTIGUOUS) && !keeps_contiguous(from))
      continue; /* eager copies a non-contiguous input: not a view */
    int n = from->n_view_steps + 1;
    lazy_view_step *st = core_alloc((size_t)n * sizeof *st);
    if (!st) return core_error(KILN_ERR_NOMEM, "lazy views: out of memory");
    for (int k = 0; k < n - 1; k++) {
      st[k] = from->view_steps[k];
      lazy_node_retain(st[k].node);
    }
    st[n - 1] = (lazy_view_step){node, i, arg};
    lazy_node_retain(node);
    lazy_drop_view(to);
    to->view_steps = st;
    to->n_view_steps = n;
    to->view_base = kiln_retain(from->view_base ? from->view_base : from->owner);
    lazy_of(to->view_base)->n_views++;
  }
  return 0;
}

/* Every live view of base (by its record) rebound to its steps replayed
 * on base's value now. */
int lazy_refresh_views(kiln_tensor *base) {
  int rc = 0, n = 0, cap = 0;
  lazy_state **views = NULL;
  /* a base without live views (most in-place updates: an optimizer's)
   * need not walk every live tensor */
  if (!lazy_of(base) || lazy_of(base)->n_views == 0) return 0;
  /* collected first: replaying records new views of base */
  for (lazy_state *s = lazy_live_first(); s; s = s->next) {
    if (s->view_base != base) continue;
    if (n == cap) {
      lazy_state **v2 = core_realloc(views, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *v2);
      if (!v2) {
        core_free(views);
        return core_error(KILN_ERR_NOMEM, "lazy views: out of memory");
      }
      views = v2;
    }
    views[n++] = s;
  }
  kiln_scope_begin();
  for (int k = 0; k < n && rc == 0; k++) {
    lazy_state *s = views[k];
    kiln_tensor *t = base;
    for (int i = 0; i < s->n_view_steps && t; i++)
      t = replay(s->view_steps[i].node, s->view_steps[i].index, s->view_steps[i].arg, t);
    if (!t) rc = -1;
    rebind_to(s->owner, t, &rc);
    /* Note [Lazy views and autograd]: the view's history is its steps'
     * replayed on the base's (PyTorch's view regeneration) */
    if (rc == 0 && t->requires_grad && t != s->owner && op_grad_enabled && op_rebase_history_hook)
      rc = op_rebase_history_hook(s->owner, t);
  }
  kiln_scope_end();
  core_free(views);
  return rc;
}

/* Writing view self (its record in s) = r: each step's input replayed
 * from the base, then r put back step by step; the base and its aliases
 * take the result. */
static int write_view(lazy_state *s, kiln_tensor *r) {
  int n = s->n_view_steps, rc = 0;
  kiln_tensor *small[8], **at = n <= 8 ? small : core_alloc((size_t)n * sizeof *at);
  if (!at) return core_error(KILN_ERR_NOMEM, "lazy views: out of memory");
  at[0] = s->view_base;
  for (int i = 1; i < n && at[i - 1]; i++)
    at[i] = replay(s->view_steps[i - 1].node, s->view_steps[i - 1].index,
                   s->view_steps[i - 1].arg, at[i - 1]);
  kiln_tensor *nb = at[n - 1] ? r : NULL;
  for (int i = n - 1; i >= 0 && nb; i--) nb = put_back(s->view_steps[i].node, at[i], nb);
  if (!nb) rc = -1;
  else rc = rebind_all(lazy_of(s->view_base)->value, nb);
  /* Note [Lazy views and autograd]: nb's history (put_back's ops on r) is
   * the base's new one, as eager's CopySlices */
  if (rc == 0 && nb->requires_grad && op_grad_enabled && op_rebase_history_hook)
    rc = op_rebase_history_hook(s->view_base, nb);
  if (at != small) core_free(at);
  return rc;
}

int lazy_write(kiln_tensor *self, kiln_tensor *r) {
  if (self->device != CORE_DEVICE_LAZY) return op_lazy_copy_hook(self, r); /* its error */
  lazy_state *s = lazy_of(self);
  if (!s->view_base) return op_lazy_copy_hook(self, r); /* it refreshes self's views */
  kiln_scope_begin();
  int rc = write_view(s, r);
  kiln_scope_end();
  return rc < 0 ? rc : lazy_refresh_views(s->view_base); /* self among them */
}
