/* src/ops/loss_extra.c: more nn.functional decompositions: losses (l1,
 * smooth_l1, huber, binary_cross_entropy(_with_logits), kl_div), norms
 * (norm, linalg_vector_norm), distances (cosine_similarity,
 * pairwise_distance), one_hot, pixel_(un)shuffle, round with decimals,
 * conv1d (as conv2d) and max_pool1d (as max_pool2d). Derivatives come
 * from the ops they are made of. */
#include <math.h>
#include <string.h>

#include "op.h"

static int t2(const char *fn, const op_val *a, kiln_tensor **x, kiln_tensor **y) {
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "self", x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "target", y)) < 0)
    return rc;
  return 0;
}

/* reduction: 0 none, 1 mean, 2 sum (at::Reduction); declared in op.h */
kiln_tensor *op_loss_reduce(const char *fn, kiln_tensor *l, const op_val *r) {
  int64_t k = r->tag == OP_VAL_INT ? r->i : 1;
  if (!l) return NULL;
  if (k == 0) return l;
  if (k == 1) return kiln_mean(l, NULL, 0, false);
  if (k == 2) return kiln_sum(l, NULL, 0, false);
  core_error(KILN_ERR_INVALID, "%s: %lld is not a valid value for reduction", fn, (long long)k);
  return NULL;
}

int op_l1_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::l1_loss", a, &x, &y);
  return rc < 0 ? rc : op_out1(op_loss_reduce("aten::l1_loss", kiln_abs(kiln_sub(x, y)), &a[2]), outs);
}
/* smooth_l1: |d| < beta ? d^2 / (2 beta) : |d| - beta / 2 (beta 0: l1) */
int op_smooth_l1_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::smooth_l1_loss", a, &x, &y);
  if (rc < 0) return rc;
  double beta = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 1.0;
  if (beta < 0)
    return core_error(KILN_ERR_INVALID, "aten::smooth_l1_loss: smooth_l1_loss does not support "
                                        "negative values for beta.");
  kiln_tensor *d = kiln_abs(kiln_sub(x, y));
  if (!d) return KILN_ERR_INVALID;
  if (beta == 0) return op_out1(op_loss_reduce("aten::smooth_l1_loss", d, &a[2]), outs);
  kiln_tensor *q = kiln_mul_scalar(kiln_mul(d, d), 0.5 / beta), *l = kiln_add_scalar(d, -0.5 * beta);
  kiln_tensor *c = op_call1(KILN_OP_LT, (op_val[]){OPV_T(d), OPV_F(beta)}, 2);
  return op_out1(op_loss_reduce("aten::smooth_l1_loss", c && q && l ? kiln_where(c, q, l) : NULL, &a[2]), outs);
}
/* huber: |d| < delta ? d^2 / 2 : delta (|d| - delta / 2) */
int op_huber_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::huber_loss", a, &x, &y);
  if (rc < 0) return rc;
  double delta = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 1.0;
  if (delta <= 0)
    return core_error(KILN_ERR_INVALID, "aten::huber_loss: huber_loss does not support non-positive "
                                        "values for delta.");
  kiln_tensor *d = kiln_abs(kiln_sub(x, y));
  if (!d) return KILN_ERR_INVALID;
  kiln_tensor *q = kiln_mul_scalar(kiln_mul(d, d), 0.5);
  kiln_tensor *l = kiln_mul_scalar(kiln_add_scalar(d, -0.5 * delta), delta);
  kiln_tensor *c = op_call1(KILN_OP_LT, (op_val[]){OPV_T(d), OPV_F(delta)}, 2);
  return op_out1(op_loss_reduce("aten::huber_loss", c && q && l ? kiln_where(c, q, l) : NULL, &a[2]), outs);
}
/* bce with logits: (1 - t) x + (1 + (pw - 1) t) (log1p(e^-|x|) + max(-x, 0)), weighted */
int op_bce_logits_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::binary_cross_entropy_with_logits";
  kiln_tensor *x, *t;
  int rc = t2(fn, a, &x, &t);
  if (rc < 0) return rc;
  kiln_tensor *sp = kiln_add(op_call1(KILN_OP_LOG1P, (op_val[]){OPV_T(kiln_exp(kiln_neg(kiln_abs(x))))}, 1),
                             kiln_clamp(kiln_neg(x), 0, NAN));
  kiln_tensor *w = a[3].tag == OP_VAL_TENSOR
                       ? kiln_add_scalar(kiln_mul(kiln_add_scalar(a[3].t, -1.0), t), 1.0)
                       : NULL;
  kiln_tensor *l = kiln_add(kiln_mul(kiln_add_scalar(kiln_neg(t), 1.0), x), w ? kiln_mul(w, sp) : sp);
  if (l && a[2].tag == OP_VAL_TENSOR) l = kiln_mul(l, a[2].t);
  return op_out1(op_loss_reduce(fn, l, &a[4]), outs);
}
/* bce: -w (t log(x) + (1 - t) log(1 - x)), logs clamped at -100 */
int op_bce_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::binary_cross_entropy";
  kiln_tensor *x, *t;
  int rc = t2(fn, a, &x, &t);
  if (rc < 0) return rc;
  kiln_tensor *lx = kiln_clamp(kiln_log(x), -100, NAN);
  kiln_tensor *l1x = kiln_clamp(op_call1(KILN_OP_LOG1P, (op_val[]){OPV_T(kiln_neg(x))}, 1), -100, NAN);
  kiln_tensor *l = kiln_neg(kiln_add(kiln_mul(t, lx), kiln_mul(kiln_add_scalar(kiln_neg(t), 1.0), l1x)));
  if (l && a[2].tag == OP_VAL_TENSOR) l = kiln_mul(l, a[2].t);
  return op_out1(op_loss_reduce(fn, l, &a[3]), outs);
}
/* kl_div(input, target, reduction, log_target): target (log target - input),
 * xlogy form so zero targets give 0; reduction mean is over all elements */
int op_kl_div_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *t;
  int rc = t2("aten::kl_div", a, &x, &t);
  if (rc < 0) return rc;
  bool log_t = a[3].tag == OP_VAL_BOOL && a[3].b;
  kiln_tensor *l = log_t ? kiln_mul(kiln_exp(t), kiln_sub(t, x))
                         : kiln_sub(op_call1(KILN_OP_XLOGY, (op_val[]){OPV_T(t), OPV_T(t)}, 2),
                                    kiln_mul(t, x));
  return op_out1(op_loss_reduce("aten::kl_div", l, &a[2]), outs);
}

/* ---- norms and distances -------------------------------------------------------------- */
/* p-norm over dims: inf max|x|, -inf min|x|, 0 count of nonzeros, else
 * (sum |x|^p)^(1/p) */
static kiln_tensor *pnorm(kiln_tensor *x, double p, const int64_t *dims, int nd, bool keep) {
  if (!core_dtype_is_floating(x->dtype)) {
    core_error(KILN_ERR_INVALID, "aten::norm: expected a floating point input, got %s",
               kiln_dtype_name(x->dtype));
    return NULL;
  }
  kiln_tensor *ax = kiln_abs(x);
  if (isinf(p)) return p > 0 ? kiln_amax(ax, dims, nd, keep) : kiln_amin(ax, dims, nd, keep);
  if (p == 0) {
    kiln_tensor *nz = op_call1(KILN_OP_NE, (op_val[]){OPV_T(x), OPV_I(0)}, 2);
    return nz ? kiln_sum(kiln_to_dtype(nz, x->dtype), dims, nd, keep) : NULL;
  }
  if (p == 1) return kiln_sum(ax, dims, nd, keep);
  if (p == 2) return kiln_sqrt(kiln_sum(kiln_mul(x, x), dims, nd, keep));
  return kiln_pow_scalar(kiln_sum(kiln_pow_scalar(ax, p), dims, nd, keep), 1.0 / p);
}
static int dims_of(const op_val *v, int64_t *dims) {
  if (v->tag == OP_VAL_INT) {
    dims[0] = v->i;
    return 1;
  }
  if (v->tag != OP_VAL_INTS) return 0;
  int k = v->ints.n < KILN_MAX_DIMS ? v->ints.n : KILN_MAX_DIMS;
  memcpy(dims, v->ints.v, (size_t)k * sizeof *dims);
  return k;
}
int op_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::norm", &a[0], "self", &x);
  if (rc < 0) return rc;
  return op_out1(pnorm(x, op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 2, NULL, 0, false), outs);
}
int op_norm_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::norm", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(&a[2], dims);
  return op_out1(pnorm(x, op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 2, dims, nd,
                   a[3].tag == OP_VAL_BOOL && a[3].b),
             outs);
}
int op_vector_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::linalg_vector_norm", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(&a[2], dims);
  return op_out1(pnorm(x, op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 2, dims, nd,
                   a[3].tag == OP_VAL_BOOL && a[3].b),
             outs);
}
/* cosine_similarity(x1, x2, dim, eps) = sum(x1 x2) / max(|x1| |x2|, eps) */
int op_cosine_similarity_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc;
  if ((rc = op_arg_tensor("aten::cosine_similarity", &a[0], "x1", &x)) < 0 ||
      (rc = op_arg_tensor("aten::cosine_similarity", &a[1], "x2", &y)) < 0)
    return rc;
  int64_t d = a[2].tag == OP_VAL_INT ? a[2].i : 1;
  double eps = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 1e-8;
  kiln_tensor *w12 = kiln_sum(kiln_mul(x, y), &d, 1, false);
  kiln_tensor *w1 = kiln_sum(kiln_mul(x, x), &d, 1, false), *w2 = kiln_sum(kiln_mul(y, y), &d, 1, false);
  kiln_tensor *den = w1 && w2 ? kiln_sqrt(kiln_clamp(kiln_mul(w1, w2), eps * eps, NAN)) : NULL;
  return op_out1(w12 && den ? kiln_div(w12, den) : NULL, outs);
}
/* pairwise_distance(x1, x2, p, eps, keepdim) = ||x1 - x2 + eps||_p over the last dim */
int op_pairwise_distance_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc;
  if ((rc = op_arg_tensor("aten::pairwise_distance", &a[0], "x1", &x)) < 0 ||
      (rc = op_arg_tensor("aten::pairwise_distance", &a[1], "x2", &y)) < 0)
    return rc;
  double p = op_val_is_num(&a[2]) ? op_val_num(&a[2]) : 2, eps = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 1e-6;
  kiln_tensor *d = kiln_add_scalar(kiln_sub(x, y), eps);
  if (!d) return KILN_ERR_INVALID;
  int64_t last = d->ndim ? d->ndim - 1 : 0;
  bool keep = a[4].tag == OP_VAL_BOOL && a[4].b;
  if (d->ndim == 0) return op_out1(pnorm(d, p, NULL, 0, false), outs);
  return op_out1(pnorm(d, p, &last, 1, keep), outs);
}

/* ---- one_hot, pixel shuffles, round(decimals) ------------------------------------------------ */
int op_one_hot_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::one_hot";
  kiln_tensor *x;
  char d[64];
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: one_hot is only applicable to index tensor, got %s",
                      fn, core_tensor_desc(x, d, sizeof d));
  int64_t k = a[1].tag == OP_VAL_INT ? a[1].i : -1;
  kiln_tensor *mx = NULL;
  if (k == -1) {
    if (core_numel(x->ndim, x->shape) == 0)
      return core_error(KILN_ERR_INVALID, "%s: Can not infer total number of classes from empty "
                                          "tensor.", fn);
    double v;
    mx = kiln_amax(x, NULL, 0, false);
    if (!mx || kiln_item(mx, &v) < 0) return KILN_ERR_INVALID;
    k = (int64_t)v + 1;
  }
  if (k < 0) return core_error(KILN_ERR_INVALID, "%s: num_classes should be positive", fn);
  kiln_tensor *c = kiln_arange(0, (double)k, 1, KILN_DTYPE_I64);
  kiln_tensor *e = c ? kiln_eq(kiln_unsqueeze(x, x->ndim), c) : NULL;
  return op_out1(e ? kiln_to_dtype(e, KILN_DTYPE_I64) : NULL, outs);
}
/* pixel_shuffle: [.., C r^2, H, W] -> [.., C, H r, W r] */
static int shuffle(const char *fn, const op_val *a, bool down, kiln_tensor **outs) {
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t r = a[1].tag == OP_VAL_INT ? a[1].i : 0;
  if (x->ndim < 3 || r <= 0 || x->ndim > KILN_MAX_DIMS - 2)
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor of at least 3 dims and a positive "
                                        "factor", fn);
  int b = x->ndim - 3;
  int64_t C = x->shape[b], H = x->shape[b + 1], W = x->shape[b + 2];
  if (!down && C % (r * r))
    return core_error(KILN_ERR_INVALID, "%s: pixel_shuffle expects its input's 'channel' dimension "
                      "to be divisible by the square of upscale_factor, but input.size(-3)=%lld is "
                      "not divisible by %lld", fn, (long long)C, (long long)(r * r));
  if (down && (H % r || W % r))
    return core_error(KILN_ERR_INVALID, "%s: pixel_unshuffle expects height and width to be "
                                        "divisible by downscale_factor", fn);
  int64_t sh[KILN_MAX_DIMS], perm[KILN_MAX_DIMS], out[KILN_MAX_DIMS];
  for (int i = 0; i < b; i++) sh[i] = out[i] = x->shape[i], perm[i] = i;
  if (!down) { /* [.., C, r, r, H, W] -> [.., C, H, r, W, r] */
    int64_t v[5] = {C / (r * r), r, r, H, W}, p[5] = {0, 3, 1, 4, 2}, o[3] = {C / (r * r), H * r, W * r};
    for (int i = 0; i < 5; i++) sh[b + i] = v[i], perm[b + i] = b + p[i];
    for (int i = 0; i < 3; i++) out[b + i] = o[i];
  } else { /* [.., C, H/r, r, W/r, r] -> [.., C, r, r, H/r, W/r] */
    int64_t v[5] = {C, H / r, r, W / r, r}, p[5] = {0, 2, 4, 1, 3}, o[3] = {C * r * r, H / r, W / r};
    for (int i = 0; i < 5; i++) sh[b + i] = v[i], perm[b + i] = b + p[i];
    for (int i = 0; i < 3; i++) out[b + i] = o[i];
  }
  kiln_tensor *t = kiln_permute(kiln_reshape(x, b + 5, sh), b + 5, perm);
  return op_out1(t ? kiln_reshape(t, b + 3, out) : NULL, outs);
}
int op_pixel_shuffle_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return shuffle("aten::pixel_shuffle", a, false, outs);
}
int op_pixel_unshuffle_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return shuffle("aten::pixel_unshuffle", a, true, outs);
}
/* round(x, decimals): PyTorch's nearbyint(x * 10^d) / 10^d (d < 0: x / 10^-d) */
int op_round_decimals_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::round", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t d = a[1].tag == OP_VAL_INT ? a[1].i : 0;
  if (d == 0) return op_out1(op_call1(KILN_OP_ROUND, a, 1), outs);
  if (!core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "aten::round: round_cpu not implemented for '%s' with "
                                        "decimals", kiln_dtype_name(x->dtype));
  double p = pow(10.0, (double)(d < 0 ? -d : d));
  if (x->dtype == KILN_DTYPE_F32) p = (float)p;
  kiln_tensor *s = d > 0 ? kiln_mul_scalar(x, p) : kiln_div_scalar(x, p);
  kiln_tensor *r = s ? op_call1(KILN_OP_ROUND, (op_val[]){OPV_T(s)}, 1) : NULL;
  return op_out1(r ? (d > 0 ? kiln_div_scalar(r, p) : kiln_mul_scalar(r, p)) : NULL, outs);
}

/* ---- 1-d convolution and pooling through their 2-d forms ------------------------------------- */
static op_val pair(const op_val *v, int64_t *buf, int64_t first) {
  buf[0] = first;
  buf[1] = v->tag == OP_VAL_INT ? v->i : v->tag == OP_VAL_INTS && v->ints.n ? v->ints.v[0] : first;
  if (v->tag == OP_VAL_INTS && v->ints.n == 0) return OPV_INTS(buf, 0);
  return OPV_INTS(buf, 2);
}
/* conv1d(x [N, C, L], w [O, C/g, K]) = conv2d on [N, C, 1, L] with [O, C/g, 1, K] */
int op_conv1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::conv1d";
  kiln_tensor *x, *w;
  char d[64];
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "input", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "weight", &w)) < 0)
    return rc;
  if ((x->ndim != 3 && x->ndim != 2) || w->ndim != 3)
    return core_error(KILN_ERR_INVALID, "%s: expected a 2-D or 3-D input and a 3-D weight, got %s",
                      fn, core_tensor_desc(x, d, sizeof d));
  bool batched = x->ndim == 3;
  kiln_tensor *x4 = kiln_unsqueeze(batched ? x : kiln_unsqueeze(x, 0), 2), *w4 = kiln_unsqueeze(w, 2);
  int64_t s[2], p[2], dl[2];
  kiln_tensor *y = x4 && w4 ? op_call1(KILN_OP_CONV2D,
                                       (op_val[]){OPV_T(x4), OPV_T(w4), a[2], pair(&a[3], s, 1),
                                                  pair(&a[4], p, 0), pair(&a[5], dl, 1), a[6]},
                                       7)
                            : NULL;
  y = y ? kiln_squeeze_dim(y, 2) : NULL;
  return op_out1(y && !batched ? kiln_squeeze_dim(y, 0) : y, outs);
}
/* max_pool1d(x [N, C, L]) = max_pool2d on [N, C, 1, L] */
int op_max_pool1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::max_pool1d";
  kiln_tensor *x;
  char d[64];
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim != 2 && x->ndim != 3)
    return core_error(KILN_ERR_INVALID, "%s: expected a 2-D or 3-D input, got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  int64_t k[2], s[2], p[2], dl[2];
  op_val kv = pair(&a[1], k, 1), sv = pair(&a[2], s, 1);
  if (a[2].tag == OP_VAL_INTS && a[2].ints.n == 0) {
    s[0] = 1;
    s[1] = k[1];
    sv = OPV_INTS(s, 2);
  }
  kiln_tensor *y = op_call1(KILN_OP_MAX_POOL2D,
                            (op_val[]){OPV_T(kiln_unsqueeze(x, x->ndim - 1)), kv, sv,
                                       pair(&a[3], p, 0), pair(&a[4], dl, 1), a[5]},
                            6);
  return op_out1(y ? kiln_squeeze_dim(y, x->ndim - 1) : NULL, outs);
}
