/* src/lazy/views.c: writes through views of lazy tensors (Note [Lazy
 * views]): an in-place op on a lazy view also writes its base.
 *
 * Note [Lazy views]: a lazy tensor holds a value, not memory, so writing a
 * view `v = x[0]; v.add_(1)` must rebuild the base: the view's node (a
 * view op, by its schema's alias annotation) names the base value and the
 * view's arguments; the base's new value is the old one with the written
 * region replaced (`where(mask, select_backward(r), x)` for select and
 * slice, the inverse permutation for t/transpose/permute, a reshape back
 * for view/reshape/squeeze/unsqueeze and for an expand that repeats no
 * element, r itself for contiguous), and every live tensor on the base's
 * old value (the base, its other aliases) is rebound to it; a view of a
 * view recurses. Views made earlier of the same base keep their old value
 * (PyTorch's functionalization would refresh them). An expand that repeats
 * elements, chunk, split and unbind views cannot be written this way: an
 * error says so. A dtype-changing `to` was a copy: only the view changes;
 * one that keeps the dtype is self, written as contiguous's view is. */
#include <string.h>

#include "lazy.h"

static kiln_tensor *tensor_on(lazy_value v) {
  return core_autorelease(lazy_tensor_new(v.node, v.index, &v.node->metas[v.index]));
}

static int64_t int_arg(const lazy_node *n, int k, int64_t dflt) {
  const op_val *a = &n->args[k];
  return a->tag == OP_VAL_INT ? a->i : dflt;
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
     * no element repeats and the write is the base reshaped (an expand
     * that repeats elements is refused below, as PyTorch refuses it) */
    if (kiln_tensor_numel(r) == kiln_tensor_numel(base)) return kiln_reshape(r, nd, base->shape);
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

/* Rebinds every live tensor on value v to r's value. */
static int rebind_all(lazy_value v, kiln_tensor *r) {
  lazy_value nv;
  int rc = lazy_value_of(r, &nv);
  if (rc < 0) return rc;
  for (lazy_state *s = lazy_live_first(); s; s = s->next)
    if (s->value.node == v.node && s->value.index == v.index) lazy_rebind(s->owner, nv.node, nv.index);
  lazy_node_release(nv.node);
  return 0;
}

/* The base's value becomes `base with the view's region = r`, recursively. */
static int write_base(lazy_value v, kiln_tensor *r) {
  const lazy_node *n = v.node;
  if (n->op < 0) return 0;
  int out = (op_table[n->op].flags & OPF_LIST_OUT) ? 0 : v.index;
  int k = op_output_alias(n->op, out);
  if (k < 0 || n->arg_kind[k] != LAZY_ARG_TENSOR) return 0; /* not a view */
  if (n->op == KILN_OP_TO && n->metas[v.index].dtype != n->metas[0].dtype) return 0;
  if (n->op == KILN_OP_TO && n->n_args > 3 && n->args[3].tag == OP_VAL_BOOL && n->args[3].b)
    return 0; /* copy=True: a copy */
  lazy_value b = n->operands[n->arg_operand[k]];
  if (n->op == KILN_OP_TO && b.node->metas[b.index].dtype != n->metas[v.index].dtype) return 0;
  kiln_tensor *base = tensor_on(b);
  kiln_tensor *nb = base ? put_back(n, base, r) : NULL;
  if (!nb) return -1;
  int rc = write_base(b, nb);
  return rc < 0 ? rc : rebind_all(b, nb);
}

int lazy_write(kiln_tensor *self, kiln_tensor *r) {
  if (self->device != CORE_DEVICE_LAZY) return op_lazy_copy_hook(self, r); /* its error */
  lazy_value v = lazy_of(self)->value;
  lazy_node_retain(v.node);
  int rc = write_base(v, r);
  lazy_node_release(v.node);
  return rc < 0 ? rc : op_lazy_copy_hook(self, r);
}
