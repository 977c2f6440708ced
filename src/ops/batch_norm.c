/* src/ops/batch_norm.c: aten::batch_norm, training mode (batch statistics,
 * running statistics updated in place) and eval mode (running statistics).
 * It decomposes into ops of the table, so its derivative is theirs and it
 * runs unchanged on lazy tensors: in training mode on Float/Double the
 * fused kernel _native_batch_norm_legit (batch_norm_kernel.c), else
 * elementwise ops and reductions; the running statistics are updated with
 * in-place ops outside autograd, as PyTorch does.
 *
 * Note [Batch norm]: for input x [N, C, ...] and each channel c,
 *   training: mean, var = the mean and biased variance of x over every
 *             dim but 1; running_mean = (1 - momentum) running_mean +
 *             momentum mean, running_var likewise with the unbiased
 *             variance (var * n / (n - 1), n = numel / C);
 *   eval:     mean, var = running_mean, running_var;
 *   y = (x - mean) / sqrt(var + eps) * weight + bias (weight, bias
 *   optional). Without running statistics, training mode is used whatever
 *   `training` says (PyTorch requires them in eval mode: an error). The
 *   schema marks the running statistics `(a!)`/`(b!)` so that the alias
 *   analysis sees the write (PyTorch 1.13's schema does not mark them;
 *   TorchScript's AliasDb special-cases the op instead). */
#include "op.h"


/* t [C] viewed as [1, C, 1, ...] for an input of ndim dims; declared in op.h */
kiln_tensor *op_per_channel(kiln_tensor *t, int ndim, int64_t c) {
  int64_t shape[KILN_MAX_DIMS];
  for (int d = 0; d < ndim; d++) shape[d] = d == 1 ? c : 1;
  return kiln_reshape(t, ndim, shape);
}

/* running = (1 - m) running + m v, in place and outside autograd */
static int update(kiln_tensor *running, kiln_tensor *v, double m) {
  bool was = op_grad_enabled;
  op_grad_enabled = false;
  int rc = kiln_mul_scalar_(running, 1.0 - m);
  if (rc == 0) rc = kiln_add_(running, kiln_detach(v), m);
  op_grad_enabled = was;
  return rc;
}

/* Training mode through the fused kernel (Note [Fused norms] in
 * layer_norm_kernel.c) when the dtypes fit it: res = (y, batch mean, batch
 * rstd), then the running statistics updated. The running variance is
 * the unbiased variance recovered from rstd in double, (rstd^-2 - eps) *
 * count / (count - 1): rstd has the input's precision, so the recovered
 * variance has relative error ~1e-7 * (1 + eps / var) in float32, the
 * running statistics' own rounding for any variance not far below eps.
 * 1 (res untouched) when the kernel does not apply. */
static int train_fused(const op_val *a, kiln_tensor *x, kiln_tensor *w, kiln_tensor *b,
                       kiln_tensor *rm, kiln_tensor *rv, double momentum, double eps,
                       int64_t count, kiln_tensor *res[3]) {
  if ((x->dtype != KILN_DTYPE_F32 && x->dtype != KILN_DTYPE_F64) || (w && w->dtype != x->dtype) ||
      (b && b->dtype != x->dtype))
    return 1;
  int n = op_call(KILN_OP_NATIVE_BATCH_NORM_LEGIT,
                  (op_val[]){a[0], OPV_T(w), OPV_T(b), OPV_B(true), OPV_F(momentum), OPV_F(eps)},
                  6, res, 3);
  if (n < 0) return n;
  if (rm && update(rm, res[1], momentum) < 0) return -1;
  if (rv) {
    kiln_tensor *r = kiln_to_dtype(kiln_detach(res[2]), KILN_DTYPE_F64);
    kiln_tensor *v = r ? kiln_mul_scalar(kiln_sub_scalar(kiln_pow_scalar(r, -2.0), eps),
                                         (double)count / (double)(count - 1))
                       : NULL;
    if (!v || update(rv, v, momentum) < 0) return -1;
  }
  return 0;
}

int op_batch_norm_impl(const op_val *a, kiln_tensor *res[3]) {
  char d[64];
  const char *fn = "aten::batch_norm";
  kiln_tensor *x;
  if (op_arg_tensor(fn, &a[0], "input", &x) < 0) return -1;
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: expected an input with at least 2 dims, got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (a[5].tag != OP_VAL_BOOL || !op_val_is_num(&a[6]) || !op_val_is_num(&a[7]))
    return core_error(KILN_ERR_INVALID, "%s: expected (bool training, float momentum, float eps)", fn);
  kiln_tensor *w = op_opt_tensor(&a[1]), *b = op_opt_tensor(&a[2]);
  kiln_tensor *rm = op_opt_tensor(&a[3]), *rv = op_opt_tensor(&a[4]);
  bool training = a[5].b;
  double momentum = op_val_num(&a[6]), eps = op_val_num(&a[7]);
  int64_t c = x->shape[1];
  const kiln_tensor *per[4] = {w, b, rm, rv};
  static const char *const names[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 0; i < 4; i++)
    if (per[i] && (per[i]->ndim != 1 || per[i]->shape[0] != c))
      return core_error(KILN_ERR_INVALID, "%s: %s should have %lld elements, got %s", fn, names[i],
                        (long long)c, op_val_desc(&a[1 + i], d, sizeof d));
  if (!training && (!rm || !rv))
    return core_error(KILN_ERR_INVALID, "%s: running_mean and running_var must be defined in "
                                        "evaluation mode", fn);
  int64_t dims[KILN_MAX_DIMS];
  int nd = 0;
  for (int k = 0; k < x->ndim; k++)
    if (k != 1) dims[nd++] = k;
  kiln_tensor *mean, *var, *xc;
  if (training) {
    int64_t count = c ? kiln_tensor_numel(x) / c : 0;
    if (count <= 1)
      return core_error(KILN_ERR_INVALID,
                        "%s: expected more than 1 value per channel when training, got input "
                        "of shape %s", fn, op_val_desc(&a[0], d, sizeof d));
    int rc = train_fused(a, x, w, b, rm, rv, momentum, eps, count, res);
    if (rc <= 0) return rc;
    mean = kiln_mean(x, dims, nd, true);
    xc = kiln_sub(x, mean);
    var = kiln_mean(kiln_mul(xc, xc), dims, nd, true);
    if (!var) return -1;
    int64_t cs[1] = {c};
    if (rm && update(rm, kiln_reshape(mean, 1, cs), momentum) < 0) return -1;
    if (rv && update(rv, kiln_mul_scalar(kiln_reshape(var, 1, cs), (double)count / (double)(count - 1)),
                     momentum) < 0)
      return -1;
  } else {
    mean = op_per_channel(rm, x->ndim, c);
    var = op_per_channel(rv, x->ndim, c);
    xc = kiln_sub(x, mean);
  }
  kiln_tensor *y = kiln_mul(xc, kiln_rsqrt(kiln_add_scalar(var, eps)));
  if (w) y = kiln_mul(y, op_per_channel(w, x->ndim, c));
  if (b) y = kiln_add(y, op_per_channel(b, x->ndim, c));
  if (!y) return -1;
  res[0] = y;
  res[1] = res[2] = NULL;
  return 0;
}

int op_batch_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *res[3];
  int rc = op_batch_norm_impl(a, res);
  if (rc < 0) return rc;
  if (max < 1) return core_error(KILN_ERR_INVALID, "aten::batch_norm: no room for the result");
  outs[0] = res[0];
  return 1;
}
