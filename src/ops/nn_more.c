/* src/ops/nn_more.c: instance_norm, bilinear and pdist as decompositions
 * (their derivatives come from the ops they are made of).
 *
 * instance_norm normalises each (sample, channel) over its spatial dims;
 * with running statistics and use_input_stats it also updates them in
 * place, outside autograd, as PyTorch's (which runs batch_norm on the
 * [1, N C, ...] view and averages the per-sample statistics over N):
 * running = (1 - momentum) running + momentum mean_N(stat), the variance
 * unbiased. Without use_input_stats it is batch_norm in eval mode. */
#include <math.h>
#include <string.h>

#include "op.h"


/* running = (1 - m) running + m mean over dim 0 of v [N, C] */
static int update(kiln_tensor *running, kiln_tensor *v, double m) {
  bool was = op_grad_enabled;
  op_grad_enabled = false;
  int64_t zero = 0;
  int rc = kiln_mul_scalar_(running, 1.0 - m);
  if (rc == 0) rc = kiln_add_(running, kiln_mean(kiln_detach(v), &zero, 1, false), m);
  op_grad_enabled = was;
  return rc;
}

/* instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
 * cudnn_enabled) */
int op_instance_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::instance_norm";
  kiln_tensor *x;
  char d[96];
  int rc = op_arg_tensor(fn, &a[0], "input", &x);
  if (rc < 0) return rc;
  if (x->ndim < 2 || !core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "%s: expected a floating input with at least 2 dims, got %s",
                      fn, core_tensor_desc(x, d, sizeof d));
  kiln_tensor *w = op_opt_tensor(&a[1]), *b = op_opt_tensor(&a[2]);
  kiln_tensor *rm = op_opt_tensor(&a[3]), *rv = op_opt_tensor(&a[4]);
  bool use_input = a[5].tag != OP_VAL_BOOL || a[5].b;
  double momentum = op_val_is_num(&a[6]) ? op_val_num(&a[6]) : 0.1;
  double eps = op_val_is_num(&a[7]) ? op_val_num(&a[7]) : 1e-5;
  int64_t N = x->shape[0], C = x->shape[1];
  const kiln_tensor *per[4] = {w, b, rm, rv};
  static const char *const names[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 0; i < 4; i++)
    if (per[i] && (per[i]->ndim != 1 || per[i]->shape[0] != C))
      return core_error(KILN_ERR_INVALID, "%s: %s should have %lld elements, got %s", fn, names[i],
                        (long long)C, op_val_desc(&a[1 + i], d, sizeof d));
  if (!use_input) {
    if (!rm || !rv)
      return core_error(KILN_ERR_INVALID, "%s: Expected running_mean and running_var to be defined "
                                          "when use_input_stats is false", fn);
    return op_out1(op_call1(KILN_OP_BATCH_NORM,
                            (op_val[]){a[0], a[1], a[2], a[3], a[4], OPV_B(false), OPV_F(momentum),
                                       OPV_F(eps), OPV_B(false)},
                            9),
                   outs);
  }
  int64_t dims[KILN_MAX_DIMS], count = 1;
  int nd = 0;
  for (int k = 2; k < x->ndim; k++) dims[nd++] = k, count *= x->shape[k];
  if (count <= 1)
    return core_error(KILN_ERR_INVALID, "%s: Expected more than 1 spatial element when training, "
                                        "got input size %s", fn, core_tensor_desc(x, d, sizeof d));
  kiln_tensor *mean = kiln_mean(x, dims, nd, true);
  kiln_tensor *xc = kiln_sub(x, mean);
  kiln_tensor *var = xc ? kiln_mean(kiln_mul(xc, xc), dims, nd, true) : NULL;
  if (!var) return op_failed_status();
  int64_t nc[2] = {N, C};
  if (rm && update(rm, kiln_reshape(mean, 2, nc), momentum) < 0) return op_failed_status();
  if (rv && update(rv, kiln_mul_scalar(kiln_reshape(var, 2, nc), (double)count / (double)(count - 1)),
                   momentum) < 0)
    return op_failed_status();
  kiln_tensor *y = kiln_mul(xc, kiln_rsqrt(kiln_add_scalar(var, eps)));
  if (y && w) y = kiln_mul(y, op_per_channel(w, x->ndim, C));
  if (y && b) y = kiln_add(y, op_per_channel(b, x->ndim, C));
  return op_out1(y, outs);
}

/* bilinear(x1 [..., I], x2 [..., J], weight [O, I, J], bias [O]):
 * y[..., o] = x1 W[o] x2 + b[o], as one matmul and a product-sum */
int op_bilinear_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::bilinear";
  kiln_tensor *x1, *x2, *w, *b = op_opt_tensor(&a[3]);
  char d[96], e[96], f[96];
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "input1", &x1)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "input2", &x2)) < 0 ||
      (rc = op_arg_tensor(fn, &a[2], "weight", &w)) < 0)
    return rc;
  if (w->ndim != 3 || x1->ndim < 1 || x1->ndim != x2->ndim ||
      x1->shape[x1->ndim - 1] != w->shape[1] || x2->shape[x2->ndim - 1] != w->shape[2] ||
      memcmp(x1->shape, x2->shape, (size_t)(x1->ndim - 1) * sizeof *x1->shape))
    return core_error(KILN_ERR_INVALID, "%s: input1 %s, input2 %s and weight %s do not match "
                                        "(weight [out, in1, in2], inputs [..., in1] and [..., in2])",
                      fn, core_tensor_desc(x1, d, sizeof d), core_tensor_desc(x2, e, sizeof e),
                      core_tensor_desc(w, f, sizeof f));
  int64_t O = w->shape[0], I = w->shape[1], J = w->shape[2];
  if (b && (b->ndim != 1 || b->shape[0] != O))
    return core_error(KILN_ERR_INVALID, "%s: bias must be [%lld], got %s", fn, (long long)O,
                      core_tensor_desc(b, d, sizeof d));
  int64_t B = core_numel(x1->ndim - 1, x1->shape);
  int64_t s2a[2] = {B, I}, s2w[2] = {I, O * J}, s3[3] = {B, O, J}, s3b[3] = {B, 1, J}, last = 2;
  int64_t perm[3] = {1, 0, 2};
  kiln_tensor *wm = kiln_reshape(kiln_permute(w, 3, perm), 2, s2w);
  kiln_tensor *t = wm ? kiln_reshape(kiln_matmul(kiln_reshape(x1, 2, s2a), wm), 3, s3) : NULL;
  kiln_tensor *y = t ? kiln_sum(kiln_mul(t, kiln_reshape(x2, 3, s3b)), &last, 1, false) : NULL;
  if (y && b) y = kiln_add(y, b);
  int64_t sh[KILN_MAX_DIMS];
  memcpy(sh, x1->shape, (size_t)x1->ndim * sizeof *sh);
  sh[x1->ndim - 1] = O;
  return op_out1(y ? kiln_reshape(y, x1->ndim, sh) : NULL, outs);
}

/* pdist(self [N, M], p): ||x_i - x_j||_p for i < j, row-major */
int op_pdist_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::pdist";
  kiln_tensor *x;
  char d[96];
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  double p = op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 2.0;
  if (x->ndim != 2 || !core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "%s: pdist only supports 2D floating tensors, got: %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (!(p >= 0))
    return core_error(KILN_ERR_INVALID, "%s: pdist only supports non-negative p values", fn);
  int64_t N = x->shape[0], P = N > 1 ? N * (N - 1) / 2 : 0;
  kiln_tensor *ii = kiln_zeros(1, &P, KILN_DTYPE_I64), *jj = kiln_zeros(1, &P, KILN_DTYPE_I64);
  if (!ii || !jj) return op_failed_status();
  int64_t *pi = kiln_tensor_data(ii), *pj = kiln_tensor_data(jj), k = 0;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = i + 1; j < N; j++) pi[k] = i, pj[k++] = j;
  kiln_tensor *diff = kiln_sub(kiln_index_select(x, 0, ii), kiln_index_select(x, 0, jj));
  int64_t one = 1;
  return op_out1(diff ? op_call1(KILN_OP_VECTOR_NORM,
                                 (op_val[]){OPV_T(diff), OPV_F(p), OPV_INTS(&one, 1), OPV_B(false),
                                            OPV_NONE}, 5)
                      : NULL,
                 outs);
}
