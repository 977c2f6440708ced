/* src/ops/nn_extra.c: nn.functional ops written as decompositions into
 * the table's ops (their derivatives come from those ops, and fusion sees
 * their elementwise parts): activations (hardswish, hardsigmoid, hardtanh,
 * relu6, elu, selu, celu, softplus, mish, log_sigmoid, soft/hardshrink,
 * threshold, glu, prelu) and normalisation (layer_norm, group_norm). */
#include <math.h>
#include <string.h>

#include "op.h"

static kiln_tensor *where_s(kiln_tensor *c, kiln_tensor *a, double b) {
  return c && a ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(c), OPV_T(a), OPV_F(b)}, 3) : NULL;
}
static kiln_tensor *where_t(kiln_tensor *c, kiln_tensor *a, kiln_tensor *b) {
  return c && a && b ? kiln_where(c, a, b) : NULL;
}
static kiln_tensor *gt_s(kiln_tensor *x, double v) {
  return x ? op_call1(KILN_OP_GT, (op_val[]){OPV_T(x), OPV_F(v)}, 2) : NULL;
}
static kiln_tensor *lt_s(kiln_tensor *x, double v) {
  return x ? op_call1(KILN_OP_LT, (op_val[]){OPV_T(x), OPV_F(v)}, 2) : NULL;
}

/* The floating input of an activation: integers are refused as PyTorch does. */
static int float_input(const char *fn, const op_val *a, kiln_tensor **x) {
  char d[64];
  int rc = op_arg_tensor(fn, a, "self", x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating((*x)->dtype))
    return core_error(KILN_ERR_INVALID, "%s: not implemented for %s (floating inputs only)", fn,
                      core_tensor_desc(*x, d, sizeof d));
  return 0;
}

static double num_or(const op_val *v, double dflt) {
  return op_val_is_num(v) ? op_val_num(v) : dflt;
}

/* ---- activations ---------------------------------------------------------- */
/* hardsigmoid(x) = clamp(x / 6 + 1/2, 0, 1) */
static kiln_tensor *hsig(kiln_tensor *x) {
  return kiln_clamp(kiln_add_scalar(kiln_mul_scalar(x, 1.0 / 6.0), 0.5), 0.0, 1.0);
}
int op_hardsigmoid_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::hardsigmoid", &a[0], &x);
  return rc < 0 ? rc : op_out1(hsig(x), outs);
}
/* hardswish(x) = x hardsigmoid(x) */
int op_hardswish_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::hardswish", &a[0], &x);
  return rc < 0 ? rc : op_out1(kiln_mul(x, hsig(x)), outs);
}
int op_hardtanh_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::hardtanh", &a[0], "self", &x);
  if (rc < 0) return rc;
  double lo = num_or(&a[1], -1), hi = num_or(&a[2], 1);
  return op_out1(kiln_clamp(x, lo, hi), outs);
}
int op_relu6_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::relu6", &a[0], "self", &x);
  return rc < 0 ? rc : op_out1(kiln_clamp(x, 0, 6), outs);
}
/* elu(x) = scale (x > 0 ? x : alpha (e^(input_scale x) - 1)) */
static kiln_tensor *elu(kiln_tensor *x, double alpha, double scale, double in_scale) {
  kiln_tensor *neg = kiln_mul_scalar(
      op_call1(KILN_OP_EXPM1, (op_val[]){OPV_T(kiln_mul_scalar(x, in_scale))}, 1), alpha);
  kiln_tensor *r = where_t(gt_s(x, 0), x, neg);
  return r ? kiln_mul_scalar(r, scale) : NULL;
}
int op_elu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::elu", &a[0], &x);
  if (rc < 0) return rc;
  return op_out1(elu(x, num_or(&a[1], 1), num_or(&a[2], 1), num_or(&a[3], 1)), outs);
}
int op_selu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::selu", &a[0], &x);
  if (rc < 0) return rc;
  return op_out1(elu(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1),
             outs);
}
int op_celu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::celu", &a[0], &x);
  if (rc < 0) return rc;
  double alpha = num_or(&a[1], 1);
  if (alpha == 0)
    return core_error(KILN_ERR_INVALID, "aten::celu: ZeroDivisionError (alpha is 0)");
  return op_out1(elu(x, alpha, 1, 1 / alpha), outs);
}
/* softplus(x) = beta x > threshold ? x : log1p(e^(beta x)) / beta */
static kiln_tensor *softplus(kiln_tensor *x, double beta, double th) {
  kiln_tensor *bx = kiln_mul_scalar(x, beta);
  kiln_tensor *sp = kiln_mul_scalar(op_call1(KILN_OP_LOG1P, (op_val[]){OPV_T(kiln_exp(bx))}, 1),
                                    1 / beta);
  return where_t(gt_s(bx, th), x, sp);
}
int op_softplus_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::softplus", &a[0], &x);
  if (rc < 0) return rc;
  return op_out1(softplus(x, num_or(&a[1], 1), num_or(&a[2], 20)), outs);
}
int op_mish_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::mish", &a[0], &x);
  if (rc < 0) return rc;
  return op_out1(kiln_mul(x, kiln_tanh(softplus(x, 1, 20))), outs);
}
/* log_sigmoid(x) = min(x, 0) - log1p(e^-|x|) */
int op_log_sigmoid_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::log_sigmoid", &a[0], &x);
  if (rc < 0) return rc;
  kiln_tensor *l = op_call1(KILN_OP_LOG1P, (op_val[]){OPV_T(kiln_exp(kiln_neg(kiln_abs(x))))}, 1);
  return op_out1(l ? kiln_sub(kiln_clamp(x, NAN, 0), l) : NULL, outs);
}
int op_softshrink_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = float_input("aten::softshrink", &a[0], &x);
  if (rc < 0) return rc;
  double l = num_or(&a[1], 0.5);
  if (l < 0)
    return core_error(KILN_ERR_INVALID, "aten::softshrink: lambda must be greater or equal to 0, "
                                        "but found to be %g.", l);
  kiln_tensor *lo = where_s(lt_s(x, -l), kiln_add_scalar(x, l), 0.0);
  return op_out1(where_t(gt_s(x, l), kiln_add_scalar(x, -l), lo), outs);
}
int op_hardshrink_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::hardshrink", &a[0], "self", &x);
  if (rc < 0) return rc;
  double l = num_or(&a[1], 0.5);
  return op_out1(where_s(gt_s(kiln_abs(x), l), x, 0.0), outs);
}
int op_threshold_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::threshold", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (!op_val_is_num(&a[1]) || !op_val_is_num(&a[2]))
    return core_error(KILN_ERR_INVALID, "aten::threshold: threshold and value must be numbers");
  kiln_tensor *c = op_call1(KILN_OP_GT, (op_val[]){OPV_T(x), a[1]}, 2);
  return op_out1(c ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(c), OPV_T(x), a[2]}, 3) : NULL, outs);
}
/* glu(x, dim) = a sigmoid(b), a and b the halves of x along dim */
int op_glu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  char d[64];
  int rc = op_arg_tensor("aten::glu", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim == 0)
    return core_error(KILN_ERR_INVALID, "aten::glu: glu does not support scalars because halving "
                                        "size must be even");
  int dim = core_wrap_dim("aten::glu", a[1].tag == OP_VAL_INT ? a[1].i : -1, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  if (x->shape[dim] % 2)
    return core_error(KILN_ERR_INVALID, "aten::glu: Halving dimension must be even, but dimension "
                                        "%d is size %lld (%s)", dim, (long long)x->shape[dim],
                      core_tensor_desc(x, d, sizeof d));
  int64_t h = x->shape[dim] / 2;
  kiln_tensor *p = kiln_narrow(x, dim, 0, h), *q = kiln_narrow(x, dim, h, h);
  return op_out1(p && q ? kiln_mul(p, kiln_sigmoid(q)) : NULL, outs);
}
/* prelu(x, w) = x > 0 ? x : w x, w per channel (dim 1) or one value */
int op_prelu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *w;
  int rc;
  if ((rc = op_arg_tensor("aten::prelu", &a[0], "self", &x)) < 0 ||
      (rc = op_arg_tensor("aten::prelu", &a[1], "weight", &w)) < 0)
    return rc;
  int64_t nw = core_numel(w->ndim, w->shape);
  kiln_tensor *wb = w;
  if (nw != 1) {
    if (x->ndim < 2 || x->shape[1] != nw)
      return core_error(KILN_ERR_INVALID, "aten::prelu: Mismatch of parameter numbers and input "
                                          "channel size. Found parameter numbers = %lld and "
                                          "channel size = %lld.", (long long)nw,
                        (long long)(x->ndim >= 2 ? x->shape[1] : 1));
    int64_t sh[KILN_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++) sh[i] = i == 0 ? nw : 1;
    wb = kiln_reshape(w, x->ndim - 1, sh);
  } else {
    wb = kiln_reshape(w, 0, NULL);
  }
  return op_out1(where_t(gt_s(x, 0), x, wb ? kiln_mul(wb, x) : NULL), outs);
}

/* ---- normalisation -------------------------------------------------------- */
/* layer_norm over the trailing dims normalized_shape: (x - mean) /
 * sqrt(var + eps) * weight + bias (biased variance); Float/Double through
 * native_layer_norm's kernel, other dtype mixes by the table's ops. */
int op_layer_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::layer_norm";
  kiln_tensor *x;
  int rc = float_input(fn, &a[0], &x);
  if (rc < 0) return rc;
  int k;
  const int64_t *ns;
  if ((rc = op_check_norm_shape(fn, x, &a[1], &a[2], &k, &ns)) < 0) return rc;
  double eps = a[4].tag == OP_VAL_NONE ? 1e-5 : op_val_num(&a[4]);
  bool fused = x->dtype == KILN_DTYPE_F32 || x->dtype == KILN_DTYPE_F64;
  for (int w = 2; w <= 3; w++) fused = fused && (a[w].tag != OP_VAL_TENSOR || a[w].t->dtype == x->dtype);
  if (fused) { /* the kernel (layer_norm_kernel.c) */
    kiln_tensor *r[3];
    rc = op_call(KILN_OP_NATIVE_LAYER_NORM, (op_val[]){a[0], OPV_INTS(ns, k), a[2], a[3], OPV_F(eps)},
                 5, r, 3);
    return rc < 0 ? rc : op_out1(r[0], outs);
  }
  int64_t dims[KILN_MAX_DIMS];
  for (int i = 0; i < k; i++) dims[i] = x->ndim - k + i;
  kiln_tensor *y;
  if (k == 0) {
    y = kiln_mul_scalar(x, 0.0); /* normalising over no dims: x - x */
  } else {
    kiln_tensor *mu = kiln_mean(x, dims, k, true);
    kiln_tensor *var = kiln_var(x, dims, k, 0, true);
    y = kiln_mul(kiln_sub(x, mu), kiln_rsqrt(kiln_add_scalar(var, eps)));
  }
  if (y && a[2].tag == OP_VAL_TENSOR) y = kiln_mul(y, a[2].t);
  if (y && a[3].tag == OP_VAL_TENSOR) y = kiln_add(y, a[3].t);
  return op_out1(y, outs);
}

/* group_norm: the channels (dim 1) in num_groups groups, each normalised
 * over its channels and the spatial dims; then weight/bias per channel. */
int op_group_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::group_norm";
  kiln_tensor *x;
  char d[64], xd[128]; /* one buffer per argument: their order is unspecified */
  int rc = float_input(fn, &a[0], &x);
  if (rc < 0) return rc;
  int64_t G;
  if ((rc = op_arg_int(fn, &a[1], "num_groups", &G)) < 0) return rc;
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: Expected at least 2 dimensions for input tensor but "
                                        "received %d", fn, x->ndim);
  int64_t N = x->shape[0], C = x->shape[1];
  if (G <= 0 || C % G)
    return core_error(KILN_ERR_INVALID, "%s: Expected number of channels in input to be divisible "
                      "by num_groups, but got input of shape %s and num_groups=%lld", fn,
                      core_tensor_desc(x, d, sizeof d), (long long)G);
  for (int w = 2; w <= 3; w++)
    if (a[w].tag == OP_VAL_TENSOR && (a[w].t->ndim != 1 || a[w].t->shape[0] != C))
      return core_error(KILN_ERR_INVALID, "%s: Expected %s to be a vector of size equal to the "
                        "number of channels in input, but got %s of shape %s and input of shape %s",
                        fn, w == 2 ? "weight" : "bias", w == 2 ? "weight" : "bias",
                        core_tensor_desc(a[w].t, d, sizeof d), core_tensor_desc(x, xd, sizeof xd));
  double eps = a[4].tag == OP_VAL_NONE ? 1e-5 : op_val_num(&a[4]);
  int64_t gshape[3] = {N, G, -1}, dim2 = 2;
  if (N == 0 || core_numel(x->ndim, x->shape) == 0) return op_out1(kiln_mul_scalar(x, 1.0), outs);
  kiln_tensor *xg = kiln_reshape(x, 3, gshape), *y;
  if (xg && (x->dtype == KILN_DTYPE_F32 || x->dtype == KILN_DTYPE_F64)) {
    /* each group a row of layer norm's kernel (layer_norm_kernel.c) */
    kiln_tensor *r[3];
    if ((rc = op_call(KILN_OP_NATIVE_LAYER_NORM, (op_val[]){OPV_T(xg), OPV_INTS(&xg->shape[2], 1),
                                                            OPV_NONE, OPV_NONE, OPV_F(eps)},
                      5, r, 3)) < 0)
      return rc;
    y = r[0];
  } else {
    kiln_tensor *mu = kiln_mean(xg, &dim2, 1, true);
    kiln_tensor *var = kiln_var(xg, &dim2, 1, 0, true);
    y = kiln_mul(kiln_sub(xg, mu), kiln_rsqrt(kiln_add_scalar(var, eps)));
  }
  y = y ? kiln_reshape(y, x->ndim, x->shape) : NULL;
  int64_t cs[KILN_MAX_DIMS];
  for (int i = 0; i < x->ndim - 1; i++) cs[i] = i == 0 ? C : 1;
  if (y && a[2].tag == OP_VAL_TENSOR) y = kiln_mul(y, kiln_reshape(a[2].t, x->ndim - 1, cs));
  if (y && a[3].tag == OP_VAL_TENSOR) y = kiln_add(y, kiln_reshape(a[3].t, x->ndim - 1, cs));
  return op_out1(y, outs);
}
