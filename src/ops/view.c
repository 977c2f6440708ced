/* src/ops/view.c: views (view, reshape, t, transpose, permute, unsqueeze,
 * squeeze, expand, narrow, slice, select) and the backward ops of the
 * slicing views (slice_backward, select_backward). */
#include "op.h"

kiln_tensor *kiln_view(kiln_tensor *t, int ndim, const int64_t *shape) {
  return op_call1(KILN_OP_VIEW, (op_val[]){OPV_T(t), OPV_INTS(shape, ndim)}, 2);
}
kiln_tensor *kiln_reshape(kiln_tensor *t, int ndim, const int64_t *shape) {
  return op_call1(KILN_OP_RESHAPE, (op_val[]){OPV_T(t), OPV_INTS(shape, ndim)}, 2);
}
kiln_tensor *kiln_t(kiln_tensor *t) { return op_call1(KILN_OP_T, (op_val[]){OPV_T(t)}, 1); }
kiln_tensor *kiln_transpose(kiln_tensor *t, int dim0, int dim1) {
  return op_call1(KILN_OP_TRANSPOSE, (op_val[]){OPV_T(t), OPV_I(dim0), OPV_I(dim1)}, 3);
}
kiln_tensor *kiln_permute(kiln_tensor *t, int ndim, const int64_t *dims) {
  return op_call1(KILN_OP_PERMUTE, (op_val[]){OPV_T(t), OPV_INTS(dims, ndim)}, 2);
}
kiln_tensor *kiln_unsqueeze(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_UNSQUEEZE, (op_val[]){OPV_T(t), OPV_I(dim)}, 2);
}
kiln_tensor *kiln_squeeze(kiln_tensor *t) {
  return op_call1(KILN_OP_SQUEEZE, (op_val[]){OPV_T(t), OPV_NONE}, 2);
}
kiln_tensor *kiln_squeeze_dim(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_SQUEEZE, (op_val[]){OPV_T(t), OPV_I(dim)}, 2);
}
kiln_tensor *kiln_expand(kiln_tensor *t, int ndim, const int64_t *shape) {
  return op_call1(KILN_OP_EXPAND, (op_val[]){OPV_T(t), OPV_INTS(shape, ndim), OPV_B(false)}, 3);
}
kiln_tensor *kiln_narrow(kiln_tensor *t, int dim, int64_t start, int64_t length) {
  return op_call1(KILN_OP_NARROW, (op_val[]){OPV_T(t), OPV_I(dim), OPV_I(start), OPV_I(length)}, 4);
}
kiln_tensor *kiln_slice(kiln_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
  return op_call1(KILN_OP_SLICE,
                  (op_val[]){OPV_T(t), OPV_I(dim), OPV_I(start), OPV_I(end), OPV_I(step)}, 5);
}
kiln_tensor *kiln_select(kiln_tensor *t, int dim, int64_t index) {
  return op_call1(KILN_OP_SELECT, (op_val[]){OPV_T(t), OPV_I(dim), OPV_I(index)}, 3);
}
