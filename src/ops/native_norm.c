/* src/ops/native_norm.c: native_batch_norm, the three-result form
 * (output, mean, 1/std) that PyTorch's batch_norm calls, as a
 * decomposition: the output is the table's batch_norm (which updates the
 * running statistics in training mode); the statistics are the fused
 * kernel's (batch_norm_kernel.c) when batch_norm ran it, else computed
 * beside it, detached (as PyTorch's derivatives read only the output's
 * gradient). native_layer_norm is a kernel (layer_norm_kernel.c). */
#include <math.h>
#include <string.h>

#include "op.h"

/* mean and 1/sqrt(biased var + eps) of x over dims (kept as size 1),
 * without autograd, into *mean and *rstd; < 0 with the error set */
static int stats(kiln_tensor *x, const int64_t *dims, int nd, double eps, kiln_tensor **mean,
                 kiln_tensor **rstd) {
  kiln_no_grad_begin();
  kiln_tensor *xd = kiln_detach(x);
  *mean = xd ? kiln_mean(xd, dims, nd, true) : NULL;
  kiln_tensor *v = xd ? op_call1(KILN_OP_VAR_CORR, (op_val[]){OPV_T(xd), OPV_INTS(dims, nd), OPV_I(0),
                                                            OPV_B(true)}, 4)
                      : NULL;
  *rstd = v ? kiln_rsqrt(kiln_add_scalar(v, eps)) : NULL;
  kiln_no_grad_end();
  return *mean && *rstd ? 0 : op_failed_status();
}

/* x's per-channel (dim 1) mean and rstd, [C], detached */
static int stats_of(kiln_tensor *x, double eps, kiln_tensor **mean, kiln_tensor **rstd) {
  int64_t dims[KILN_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != 1) dims[k++] = i;
  int rc = stats(x, dims, k, eps, mean, rstd);
  if (rc < 0) return rc;
  *mean = kiln_reshape(*mean, 1, &x->shape[1]);
  *rstd = kiln_reshape(*rstd, 1, &x->shape[1]);
  return *mean && *rstd ? 0 : op_failed_status();
}

/* native_batch_norm(input, weight, bias, running_mean, running_var,
 * training, momentum, eps) -> (batch_norm, save_mean, save_invstd): in
 * training (or without running statistics) the batch's per-channel mean
 * and 1/sqrt(biased var + eps), [C]; in eval mode two empty [0] tensors,
 * as PyTorch's CPU kernel */
int op_native_batch_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::native_batch_norm";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "input", &x);
  if (rc < 0) return rc;
  if (max < 3) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs, need 3", fn, max);
  bool training = a[5].tag == OP_VAL_BOOL && a[5].b;
  bool stats_given = a[3].tag == OP_VAL_TENSOR && a[4].tag == OP_VAL_TENSOR;
  double eps = op_val_is_num(&a[7]) ? op_val_num(&a[7]) : 1e-5;
  kiln_tensor *mean = NULL, *rstd = NULL;
  op_val bn[9] = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], OPV_B(false)};
  if (training && x->ndim >= 2) {
    kiln_tensor *res[3];
    if ((rc = op_batch_norm_impl(bn, res)) < 0) return rc;
    if (res[1]) {
      outs[0] = res[0];
      outs[1] = kiln_detach(res[1]);
      outs[2] = kiln_detach(res[2]);
      return outs[1] && outs[2] ? 3 : op_failed_status();
    }
    if ((rc = stats_of(x, eps, &mean, &rstd)) < 0) return rc; /* x is unchanged: any order */
    outs[0] = res[0];
    outs[1] = mean;
    outs[2] = rstd;
    return 3;
  }
  if (!stats_given && x->ndim >= 2) {
    if ((rc = stats_of(x, eps, &mean, &rstd)) < 0) return rc;
  } else {
    int64_t zero = 0;
    mean = kiln_zeros(1, &zero, x->dtype);
    rstd = kiln_zeros(1, &zero, x->dtype);
  }
  if (!mean || !rstd) return op_failed_status();
  kiln_tensor *y = op_call1(KILN_OP_BATCH_NORM, bn, 9);
  if (!y) return op_failed_status();
  outs[0] = y;
  outs[1] = mean;
  outs[2] = rstd;
  return 3;
}
