/* src/ops/inplace.c: the runner of every derived in-place entry (Note
 * [In-place variants] in op.h): aten::relu_, add_, mul_, clamp_, ... run
 * their functional op's kernel and write the result into self. */
#include <stdint.h>
#include <string.h>

#include "op.h"

int (*op_rebase_history_hook)(kiln_tensor *self, kiln_tensor *result);
int (*op_view_of_hook)(const kiln_tensor *t, kiln_tensor **base);
int (*op_saved_result_hook)(kiln_tensor *self, kiln_tensor *result);
int (*op_lazy_write_hook)(kiln_tensor *self, kiln_tensor *result);

int op_inplace_infer(int op, const op_val *a, int n_args, op_meta *outs, int max_outs) {
  char d[64];
  (void)n_args;
  if (max_outs < 1) return core_error(KILN_ERR_INVALID, "%s_: no room for the result", op_table[op].name);
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s_: expected a tensor for 'self', got %s",
                      op_table[op].name, op_val_desc(&a[0], d, sizeof d));
  op_meta_of(a[0].t, &outs[0]);
  return 1;
}

/* (a view may have come to require grad: Note [Views without history]) */
static bool requires_grad(kiln_tensor *t) {
  return t->requires_grad || (t->ag && op_view_grad_hook && op_view_grad_hook(t));
}

static bool any_requires_grad(const op_val *a, int n) {
  for (int i = 0; i < n; i++) {
    if (a[i].tag == OP_VAL_TENSOR && requires_grad(a[i].t)) return true;
    if (a[i].tag == OP_VAL_TENSORS)
      for (int k = 0; k < a[i].ts.n; k++)
        if (a[i].ts.v[k] && requires_grad(a[i].ts.v[k])) return true;
  }
  return false;
}

/* PyTorch's rules for writing a result into self: its shape must be
 * self's (self does not grow by broadcasting), and its dtype must cast to
 * self's without losing its kind (no float into an integer tensor, no
 * number into a bool one). */
static int check_fits(const char *name, const kiln_tensor *self, int ndim, const int64_t *shape,
                      kiln_dtype dt) {
  char sh[2][96];
  if (ndim != self->ndim || memcmp(shape, self->shape, (size_t)ndim * sizeof *shape))
    return core_error(KILN_ERR_INVALID, "%s: output with shape %s doesn't match the broadcast shape %s",
                      name, core_shape_str(self->ndim, self->shape, sh[0], sizeof sh[0]),
                      core_shape_str(ndim, shape, sh[1], sizeof sh[1]));
  if ((core_dtype_is_floating(dt) && !core_dtype_is_floating(self->dtype)) ||
      (dt != KILN_DTYPE_BOOL && self->dtype == KILN_DTYPE_BOOL))
    return core_error(KILN_ERR_INVALID,
                      "%s: result type %s can't be cast to the desired output type %s", name,
                      kiln_dtype_name(dt), kiln_dtype_name(self->dtype));
  return 0;
}

/* Note [In place]: on the CPU, an elementwise op whose result has self's
 * shape and dtype writes straight into a contiguous self (one pass, no
 * temporary), as long as no other argument overlaps self differently
 * (reading element i and writing element i is safe; anything else takes
 * the functional op and a copy). */
static bool direct_ok(int op, const op_val *a, int n_args, const kiln_tensor *self) {
  bool direct = self->device == CORE_DEVICE_CPU && (op_table[op].flags & OPF_ELEMENTWISE) &&
                core_is_contiguous(self);
  for (int i = 1; i < n_args && direct; i++) {
    if (a[i].tag != OP_VAL_TENSOR) continue;
    const kiln_tensor *o = a[i].t;
    direct = o->device == CORE_DEVICE_CPU &&
             (o->storage != self->storage ||
              (o->offset == self->offset && o->ndim == self->ndim &&
               !memcmp(o->shape, self->shape, (size_t)o->ndim * sizeof *o->shape) &&
               !memcmp(o->strides, self->strides, (size_t)o->ndim * sizeof *o->strides)));
  }
  return direct;
}

/* Note [In-place autograd]: as PyTorch. In-place on a leaf that requires
 * grad is an error while grad mode is on (an optimizer step runs under
 * no_grad). Otherwise, when some argument requires grad, the functional op
 * runs on the arguments (on a clone of self when its formula saves its
 * inputs, so that the write below does not invalidate what it saved) and
 * records its backward node; the result is written into self and self
 * takes over the result's history (rebase_history): later readers of self
 * differentiate through the in-place op, and backward nodes that saved
 * self's old value fail through the version counter. A view made by a
 * view op (of a tensor with history or without: Note [Views without
 * history] in src/autograd/views.c) is written through Note [CopySlices];
 * a view that no longer knows its base, or a lazy view of a tensor with
 * history, cannot be rebased, so recording an in-place op on one is an
 * error that says so (a lazy view of one without history is: Note [Lazy
 * views and autograd] in src/lazy/views.c). A tensor
 * sharing memory without a recorded base (detach's output) is written as
 * a tensor of its own, as PyTorch's non-differentiable views.
 *
 * Note [Lazy writes]: on lazy tensors the write is recorded as a new
 * version: self is rebound to the functional op's lazy value (the graph
 * stays functional; buffer donation may later reuse self's old buffer).
 * Writing a lazy view rebuilds its base (Note [Lazy views] in
 * src/lazy/views.c). */
static int check_autograd(const char *name, const kiln_tensor *self, kiln_tensor **base) {
  *base = NULL;
  if (self->requires_grad && op_is_leaf_hook && op_is_leaf_hook(self))
    return core_error(KILN_ERR_INVALID,
                      "%s: a leaf Variable that requires grad is being used in an in-place "
                      "operation.",
                      name);
  int view = op_view_of_hook ? op_view_of_hook(self, base) : 0;
  if (view < 0) return view;
  if (view) {
    kiln_tensor *b = *base;
    if (b && b->requires_grad && op_is_leaf_hook && op_is_leaf_hook(b))
      return core_error(KILN_ERR_INVALID,
                        "%s: a view of a leaf Variable that requires grad is being used in an "
                        "in-place operation.",
                        name);
    if (b && b->device == CORE_DEVICE_CPU && self->device == CORE_DEVICE_CPU &&
        b->storage == self->storage)
      return 0; /* Note [CopySlices] */
    *base = NULL;
    return core_error(KILN_ERR_UNSUPPORTED,
                      "%s: an in-place operation on a view of a tensor, recorded by autograd, "
                      "needs PyTorch's CopySlices, which kiln implements only for CPU views "
                      "that know their base (not for lazy tensors, nor for a view that a "
                      "backward formula saved: it dropped its base, Note [CopySlices]); clone "
                      "the view (or write the base tensor) instead",
                      name);
  }
  return 0;
}

/* Note [CopySlices]: as PyTorch's CopySlices, for a view (made by a view
 * op, so that it recorded its root base) written in place while
 * recording. The functional result r of the view's op is scattered
 * into a functional copy of the base: new_base = index_copy(base.flatten(),
 * 0, pos, r.flatten()), pos being each view element's position in the base
 * (found from the shared storage's offsets). new_base is written into the
 * base's memory; the base takes over new_base's history and the view that
 * of new_base.flatten()[pos]. Other views of the base made before the write
 * get their history regenerated when next used, as PyTorch's (Note [View
 * regeneration] in src/autograd/views.c). A view that a backward node
 * saved has dropped its base (node.c: the base's history could hold that
 * node, a reference cycle), so writing it under autograd is the error
 * above. */
kiln_tensor *op_view_positions(const kiln_tensor *view, const kiln_tensor *base, const char *who) {
  int64_t nb = core_numel(base->ndim, base->shape), nv = core_numel(view->ndim, view->shape);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  int64_t *map = NULL, *pos = NULL;
  kiln_tensor *out = NULL;
  /* the storage span of the base's elements */
  for (int64_t i = 0; i < nb; i++) {
    int64_t off = base->offset, rem = i;
    for (int d = base->ndim - 1; d >= 0; d--) {
      off += (rem % base->shape[d]) * base->strides[d];
      rem /= base->shape[d];
    }
    lo = off < lo ? off : lo;
    hi = off > hi ? off : hi;
  }
  size_t span = nb ? (size_t)(hi - lo + 1) : 1, bytes;
  if (__builtin_mul_overflow(span, sizeof *map, &bytes) || !(map = core_alloc(bytes)) ||
      !(pos = core_alloc((size_t)(nv ? nv : 1) * sizeof *pos))) {
    core_error(KILN_ERR_NOMEM, "%s: out of memory", who);
    goto done;
  }
  for (size_t i = 0; i < span; i++) map[i] = -1;
  for (int64_t i = 0; i < nb; i++) {
    int64_t off = base->offset, rem = i;
    for (int d = base->ndim - 1; d >= 0; d--) {
      off += (rem % base->shape[d]) * base->strides[d];
      rem /= base->shape[d];
    }
    map[off - lo] = i;
  }
  for (int64_t i = 0; i < nv; i++) {
    int64_t off = view->offset, rem = i;
    for (int d = view->ndim - 1; d >= 0; d--) {
      off += (rem % view->shape[d]) * view->strides[d];
      rem /= view->shape[d];
    }
    if (off < lo || off > hi || map[off - lo] < 0) {
      core_error(KILN_ERR_UNSUPPORTED, "%s: the view reaches memory outside its base", who);
      goto done;
    }
    pos[i] = map[off - lo];
  }
  out = kiln_from_data(pos, 1, &nv, KILN_DTYPE_I64);
done:
  core_free(map);
  core_free(pos);
  return out;
}

static int copy_slices(kiln_tensor *view, kiln_tensor *base, kiln_tensor *r) {
  int rc = -1;
  kiln_tensor *p = op_view_positions(view, base, "CopySlices");
  if (!p) return -1;
  int64_t flat = -1;
  /* a copy of the base: the formulas below may save it, and the base is written next */
  kiln_tensor *bc = kiln_clone(base), *bf = bc ? kiln_reshape(bc, 1, &flat) : NULL;
  kiln_tensor *rf = kiln_reshape(r, 1, &flat);
  kiln_tensor *nf = p && bf && rf ? op_call1(KILN_OP_INDEX_COPY,
                                             (op_val[]){OPV_T(bf), OPV_I(0), OPV_T(p), OPV_T(rf)}, 4)
                                  : NULL;
  kiln_tensor *newb = nf ? kiln_reshape(nf, base->ndim, base->shape) : NULL;
  kiln_tensor *sel = nf ? kiln_index_select(nf, 0, p) : NULL;
  kiln_tensor *newv = sel ? kiln_reshape(sel, view->ndim, view->shape) : NULL;
  if (!newb || !newv) goto done;
  op_copy_into(base, newb);
  core_bump_version(base);
  if (op_rebase_history_hook && (op_rebase_history_hook(base, newb) < 0 ||
                                 op_rebase_history_hook(view, newv) < 0))
    goto done;
  rc = 0;
done:
  return rc;
}

/* Note [In-place saved result]: as PyTorch, an in-place op whose backward
 * formula uses the result saves self after the write (the result is
 * self), at the version the write gave it; a later write to self (or to
 * memory it shares) makes that backward fail on the version: y.relu_()
 * then y.add_(1) cannot backpropagate, as in PyTorch. The functional op's
 * own result, a temporary, would not see the write. These are the ops
 * flagged OPF_INPLACE_SAVES_RESULT in ops.def, those whose in-place form
 * PyTorch 1.13 saves the result for (checked by
 * scripts/golden/inplace_saved.py; erfinv_ saves self's old value, as
 * other ops do through the clone above, and pow_ the result only for a
 * tensor exponent). */
static bool saves_result(int op, const op_val *a, int n_args) {
  if (!(op_table[op].flags & OPF_INPLACE_SAVES_RESULT)) return false;
  /* pow_(Tensor exponent) only: pow_(Scalar)'s formula reads self's old value */
  return op != KILN_OP_POW || (n_args > 1 && a[1].tag == OP_VAL_TENSOR);
}

static int save_result(int op, const op_val *a, int n_args, kiln_tensor *self, kiln_tensor *r) {
  if (!saves_result(op, a, n_args) || !r->requires_grad || !op_saved_result_hook) return 0;
  return op_saved_result_hook(self, r);
}

/* PyTorch's assert_no_internal_overlap: an in-place op may not write a
 * tensor in which several elements are one memory location (a dim of size
 * > 1 with stride 0: an expand that repeats elements); fill_ and zero_
 * may, as in PyTorch (every element gets the same value). */
static int check_overlap(int op, const char *name, const kiln_tensor *self) {
  if (self->device == CORE_DEVICE_LAZY || op == KILN_OP_FILL || op == KILN_OP_ZERO) return 0;
  for (int d = 0; d < self->ndim; d++)
    if (self->strides[d] == 0 && self->shape[d] > 1)
      return core_error(KILN_ERR_INVALID,
                        "%s: unsupported operation: more than one element of the written-to "
                        "tensor refers to a single memory location. Please clone() the tensor "
                        "before performing the operation.",
                        name);
  return 0;
}

int op_inplace_run(int op, const op_val *a, int n_args, kiln_tensor **outs, int max_outs) {
  char d[64];
  const char *name = op_table[KILN_OP_INPLACE(op)].name;
  op_val args[32];
  if (max_outs < 1) return core_error(KILN_ERR_INVALID, "%s: no room for the result", name);
  if (n_args > (int)(sizeof args / sizeof *args))
    return core_error(KILN_ERR_INVALID, "%s: too many arguments (%d)", name, n_args);
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor, got %s", name,
                      op_val_desc(&a[0], d, sizeof d));
  kiln_tensor *self = a[0].t;
  if (check_overlap(op, name, self) < 0) return KILN_ERR_INVALID;
  bool lazy = self->device == CORE_DEVICE_LAZY;
  for (int i = 1; i < n_args; i++) lazy |= a[i].tag == OP_VAL_TENSOR && a[i].t->device == CORE_DEVICE_LAZY;
  bool record = op_grad_enabled && any_requires_grad(a, n_args);
  kiln_tensor *base = NULL;
  if (record && check_autograd(name, self, &base) < 0) return KILN_ERR_INVALID;
  if (lazy && !op_lazy_write_hook)
    return core_error(KILN_ERR_STATE, "%s: lazy tensors without the lazy layer", name);
  if (!record && !lazy && (op_table[op].flags & OPF_ELEMENTWISE)) {
    op_meta m[1];
    if (op_table[op].infer(a, n_args, m, 1) < 0) return -1;
    if (check_fits(name, self, m[0].ndim, m[0].shape, m[0].dtype) < 0) return KILN_ERR_INVALID;
    if (direct_ok(op, a, n_args, self)) {
      if (op_call_into(op, a, n_args, self) == 0) {
        outs[0] = core_autorelease(kiln_retain(self));
        return outs[0] ? 1 : KILN_ERR_NOMEM;
      }
      kiln_clear_error(); /* e.g. a wider result dtype: the general path */
    }
  }
  memcpy(args, a, (size_t)n_args * sizeof *args);
  if (record && !(op_table[op].flags & OPF_NO_SAVE_IN)) {
    kiln_tensor *c = kiln_clone(self); /* its formula saves self (Note [In-place autograd]) */
    if (!c) return -1;
    args[0] = OPV_T(c);
  }
  kiln_tensor *r = op_call1(op, args, n_args);
  if (!r) return -1;
  if (check_fits(name, self, r->ndim, r->shape, r->dtype) < 0) return KILN_ERR_INVALID;
  /* self keeps its dtype: eager casts when it copies; a recorded or lazy
   * write rebinds self to r, so r is cast first */
  if ((record || lazy) && r->dtype != self->dtype && !(r = kiln_to_dtype(r, self->dtype)))
    return -1;
  if (base) { /* Note [CopySlices] */
    if (copy_slices(self, base, r) < 0 || save_result(op, a, n_args, self, r) < 0) return -1;
    outs[0] = core_autorelease(kiln_retain(self));
    return outs[0] ? 1 : KILN_ERR_NOMEM;
  }
  if (r != self) { /* the functional op may hand back self unchanged (eval dropout) */
    bool rebase = record && r->requires_grad && op_rebase_history_hook;
    if (lazy) {
      /* Note [Lazy writes]: self is rebound to r's value: a new version;
       * it takes r's history first, so that the views of it the write
       * refreshes replay on that (Note [Lazy views and autograd] in
       * src/lazy/views.c) */
      if (rebase && op_rebase_history_hook(self, r) < 0) return -1;
      if (op_lazy_write_hook(self, r) < 0) return -1;
    } else if (!record) {
      if (kiln_copy_(self, r) < 0) return -1;
    } else {
      op_copy_into(self, r);
      core_bump_version(self);
    }
    if (rebase && !lazy && op_rebase_history_hook(self, r) < 0) return -1;
    if (record && !lazy && save_result(op, a, n_args, self, r) < 0) return -1;
  }
  outs[0] = core_autorelease(kiln_retain(self));
  return outs[0] ? 1 : KILN_ERR_NOMEM;
}
