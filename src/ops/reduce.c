/* src/ops/reduce.c: reductions over dim lists (sum, mean, amax, amin, var,
 * sum_to_size) and over one dim (max.dim, argmax). */
#include "op.h"

static op_val dims_arg(const int64_t *dims, int n) {
  return n ? OPV_INTS(dims, n) : OPV_NONE;
}
kiln_tensor *kiln_sum(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_SUM, (op_val[]){OPV_T(t), dims_arg(dims, n_dims), OPV_B(keepdim), OPV_NONE}, 4);
}
kiln_tensor *kiln_mean(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_MEAN, (op_val[]){OPV_T(t), dims_arg(dims, n_dims), OPV_B(keepdim), OPV_NONE}, 4);
}
kiln_tensor *kiln_amax(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_AMAX, (op_val[]){OPV_T(t), OPV_INTS(dims, n_dims), OPV_B(keepdim)}, 3);
}
kiln_tensor *kiln_amin(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_AMIN, (op_val[]){OPV_T(t), OPV_INTS(dims, n_dims), OPV_B(keepdim)}, 3);
}
kiln_tensor *kiln_var(kiln_tensor *t, const int64_t *dims, int n_dims, int64_t correction,
                      bool keepdim) {
  return op_call1(KILN_OP_VAR, (op_val[]){OPV_T(t), dims_arg(dims, n_dims),
                                          OPV_B(correction != 0), OPV_B(keepdim)},
                  4);
}
kiln_tensor *kiln_max_dim(kiln_tensor *t, int dim, bool keepdim, kiln_tensor **indices) {
  kiln_tensor *outs[2] = {0};
  int n = op_call(KILN_OP_MAX_DIM, (op_val[]){OPV_T(t), OPV_I(dim), OPV_B(keepdim)}, 3, outs, 2);
  if (n < 2) return NULL;
  if (indices) *indices = outs[1];
  else if (core_scope_depth() == 0) kiln_release(outs[1]);
  return outs[0];
}
kiln_tensor *kiln_argmax(kiln_tensor *t, int dim, bool flatten, bool keepdim) {
  return op_call1(KILN_OP_ARGMAX, (op_val[]){OPV_T(t), flatten ? OPV_NONE : OPV_I(dim), OPV_B(keepdim)}, 3);
}
