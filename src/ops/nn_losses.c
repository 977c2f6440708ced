/* src/ops/nn_losses.c: the margin and embedding losses of nn.functional
 * (margin_ranking, hinge_embedding, cosine_embedding, multi_margin,
 * multilabel_margin, triplet_margin) and poisson_nll_loss, as
 * decompositions with PyTorch's formulas (aten/src/ATen/native/Loss.cpp);
 * their derivatives come from the ops they are made of. */
#include <math.h>
#include <string.h>

#include "op.h"

static int tensors(const char *fn, const op_val *a, int n, const char *const *names,
                   kiln_tensor **t) {
  for (int i = 0; i < n; i++) {
    int rc = op_arg_tensor(fn, &a[i], names[i], &t[i]);
    if (rc < 0) return rc;
  }
  return 0;
}
/* Integer and bool operands compute in float32, as PyTorch's promotion with the
 * losses' float margins and epsilons gives. */
static int to_float(kiln_tensor **t, int n) {
  for (int i = 0; i < n; i++)
    if (!core_dtype_is_floating(t[i]->dtype) && !(t[i] = kiln_to_dtype(t[i], KILN_DTYPE_F32)))
      return op_failed_status();
  return 0;
}

static kiln_tensor *relu_(kiln_tensor *t) { return t ? kiln_clamp(t, 0, NAN) : NULL; }
static kiln_tensor *fscalar(double v, const kiln_tensor *like) {
  return kiln_scalar(v, like->dtype);
}
static double num(const op_val *v, double dflt) { return op_val_is_num(v) ? op_val_num(v) : dflt; }

/* max(0, -target (x1 - x2) + margin) */
int op_margin_ranking_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::margin_ranking_loss";
  static const char *const names[] = {"input1", "input2", "target"};
  kiln_tensor *t[3];
  int rc = tensors(fn, a, 3, names, t);
  if (rc < 0 || (rc = to_float(t, 3)) < 0) return rc;
  kiln_tensor *l = kiln_add_scalar(kiln_neg(kiln_mul(t[2], kiln_sub(t[0], t[1]))), num(&a[3], 0));
  return op_out1(op_loss_reduce(fn, relu_(l), &a[4]), outs);
}

/* target == 1: self; target == -1: max(0, margin - self); summed where both */
int op_hinge_embedding_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::hinge_embedding_loss";
  static const char *const names[] = {"self", "target"};
  kiln_tensor *t[2];
  int rc = tensors(fn, a, 2, names, t);
  if (rc < 0 || (rc = to_float(t, 2)) < 0) return rc;
  kiln_tensor *x = t[0], *y = t[1], *zero = fscalar(0, x);
  kiln_tensor *mc = relu_(kiln_add_scalar(kiln_neg(x), num(&a[2], 1.0)));
  kiln_tensor *ne1 = op_call1(KILN_OP_NE, (op_val[]){OPV_T(y), OPV_F(1)}, 2);
  kiln_tensor *nem1 = op_call1(KILN_OP_NE, (op_val[]){OPV_T(y), OPV_F(-1)}, 2);
  if (!mc || !ne1 || !nem1 || !zero) return op_failed_status();
  kiln_tensor *l = kiln_add(kiln_where(ne1, mc, zero), kiln_where(nem1, x, zero));
  return op_out1(op_loss_reduce(fn, l, &a[3]), outs);
}

/* cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)) over the last dim;
 * target 1: 1 - cos, target -1: max(0, cos - margin) */
int op_cosine_embedding_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::cosine_embedding_loss";
  static const char *const names[] = {"input1", "input2", "target"};
  kiln_tensor *t[3];
  char d[96], e[96];
  int rc = tensors(fn, a, 3, names, t);
  if (rc < 0 || (rc = to_float(t, 3)) < 0) return rc;
  kiln_tensor *x1 = t[0], *x2 = t[1], *y = t[2];
  int nd = x1->ndim;
  if (nd != x2->ndim || nd < 1 || nd > 2 || y->ndim != nd - 1)
    return core_error(KILN_ERR_INVALID, "%s: expected 1D or 2D inputs of one shape and a target "
                                        "of one dim less, got %s and %s", fn,
                      core_tensor_desc(x1, d, sizeof d), core_tensor_desc(y, e, sizeof e));
  int64_t last = nd - 1;
  const double EPS = 1e-12;
  kiln_tensor *prod = kiln_sum(kiln_mul(x1, x2), &last, 1, false);
  kiln_tensor *m1 = kiln_add_scalar(kiln_sum(kiln_mul(x1, x1), &last, 1, false), EPS);
  kiln_tensor *m2 = kiln_add_scalar(kiln_sum(kiln_mul(x2, x2), &last, 1, false), EPS);
  kiln_tensor *cos = kiln_div(prod, kiln_sqrt(kiln_mul(m1, m2)));
  if (!cos) return op_failed_status();
  kiln_tensor *zero = fscalar(0, cos);
  kiln_tensor *pos = kiln_add_scalar(kiln_neg(cos), 1.0);
  kiln_tensor *neg = relu_(kiln_add_scalar(cos, -num(&a[3], 0)));
  kiln_tensor *is1 = op_call1(KILN_OP_EQ, (op_val[]){OPV_T(y), OPV_F(1)}, 2);
  kiln_tensor *ism1 = op_call1(KILN_OP_EQ, (op_val[]){OPV_T(y), OPV_F(-1)}, 2);
  if (!pos || !neg || !is1 || !ism1 || !zero) return op_failed_status();
  kiln_tensor *l = kiln_add(kiln_where(is1, pos, zero), kiln_where(ism1, neg, zero));
  return op_out1(op_loss_reduce(fn, l, &a[4]), outs);
}

/* per sample: sum_{j != y} max(0, margin - x[y] + x[j])^p w[y] / C */
int op_multi_margin_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::multi_margin_loss";
  static const char *const names[] = {"self", "target"};
  kiln_tensor *t[2], *w = a[4].tag == OP_VAL_TENSOR ? a[4].t : NULL;
  char d[96], e[96];
  int rc = tensors(fn, a, 2, names, t);
  if (rc < 0 || (rc = to_float(t, 1)) < 0) return rc;
  kiln_tensor *x = t[0], *y = t[1];
  double p = num(&a[2], 1), margin = num(&a[3], 1);
  if (p != 1 && p != 2) return core_error(KILN_ERR_INVALID, "%s: only p == 1 and p == 2 supported", fn);
  bool batched = x->ndim == 2;
  int64_t N = batched ? x->shape[0] : 1, C = x->ndim ? x->shape[x->ndim - 1] : 1;
  if (x->ndim > 2 || y->dtype != KILN_DTYPE_I64 || core_numel(y->ndim, y->shape) != N ||
      y->ndim > 1 || (x->ndim == 2 && C == 0))
    return core_error(KILN_ERR_INVALID, "%s: inconsistent target size: %s for input of size: %s", fn,
                      core_tensor_desc(y, e, sizeof e), core_tensor_desc(x, d, sizeof d));
  if (w && (w->ndim != 1 || w->shape[0] != C))
    return core_error(KILN_ERR_INVALID, "%s: weight must be a 1D tensor of %lld elements", fn,
                      (long long)C);
  int64_t s2[2] = {N, C}, s1[2] = {N, 1};
  kiln_tensor *x2 = kiln_reshape(x, 2, s2), *y2 = kiln_reshape(y, 2, s1);
  if (!x2 || !y2) return op_failed_status();
  kiln_tensor *xy = kiln_gather(x2, 1, y2);
  kiln_tensor *z = relu_(kiln_add(kiln_add_scalar(kiln_neg(xy), margin), x2));
  if (z && p == 2) z = kiln_mul(z, z);
  if (z && w) z = kiln_mul(z, kiln_reshape(kiln_index_select(w, 0, kiln_reshape(y, 1, &N)), 2, s1));
  kiln_tensor *oh = op_call1(KILN_OP_ONE_HOT, (op_val[]){OPV_T(kiln_reshape(y, 1, &N)), OPV_I(C)}, 2);
  kiln_tensor *isy = oh ? op_call1(KILN_OP_NE, (op_val[]){OPV_T(oh), OPV_I(0)}, 2) : NULL;
  if (!z || !isy) return op_failed_status();
  int64_t one = 1;
  kiln_tensor *l = kiln_div_scalar(kiln_sum(kiln_where(isy, fscalar(0, z), z), &one, 1, false),
                                   (double)C);
  if (l && !batched) l = kiln_reshape(l, y->ndim, y->shape);
  return op_out1(op_loss_reduce(fn, l, &a[5]), outs);
}

/* per sample: the targets are y[0..k) before the first -1;
 * sum_{j target} sum_{i not target} max(0, 1 - (x[j] - x[i])) / C */
int op_multilabel_margin_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::multilabel_margin_loss";
  static const char *const names[] = {"self", "target"};
  kiln_tensor *t[2];
  char d[96], e[96];
  int rc = tensors(fn, a, 2, names, t);
  if (rc < 0 || (rc = to_float(t, 1)) < 0) return rc;
  kiln_tensor *x = t[0], *y = t[1];
  bool batched = x->ndim == 2;
  int64_t N = batched ? x->shape[0] : 1, C = x->ndim ? x->shape[x->ndim - 1] : 1;
  if (x->ndim > 2 || y->dtype != KILN_DTYPE_I64 || y->ndim != x->ndim ||
      (x->ndim && memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof *x->shape)))
    return core_error(KILN_ERR_INVALID, "%s: inconsistent target size: %s for input of size: %s", fn,
                      core_tensor_desc(y, e, sizeof e), core_tensor_desc(x, d, sizeof d));
  int64_t s2[2] = {N, C}, s3[3] = {N, C, 1}, s3b[3] = {N, 1, C}, one = 1;
  kiln_tensor *x2 = kiln_reshape(x, 2, s2), *y2 = kiln_reshape(y, 2, s2);
  if (!x2 || !y2) return op_failed_status();
  /* valid[n, p]: position p lies before the first -1 */
  kiln_tensor *nonneg = op_call1(KILN_OP_NE, (op_val[]){OPV_T(y2), OPV_I(-1)}, 2);
  kiln_tensor *valid = nonneg ? op_call1(KILN_OP_CUMPROD,
                                         (op_val[]){OPV_T(kiln_to_dtype(nonneg, KILN_DTYPE_I64)),
                                                    OPV_I(1), OPV_NONE}, 3)
                              : NULL;
  kiln_tensor *yc = kiln_clamp(y2, 0, (double)(C ? C - 1 : 0));
  if (!valid || !yc) return op_failed_status();
  /* is_target[n, c] = any_p valid[n, p] & (y[n, p] == c) */
  kiln_tensor *oh = op_call1(KILN_OP_ONE_HOT, (op_val[]){OPV_T(yc), OPV_I(C)}, 2); /* [N, P, C] */
  kiln_tensor *ist = oh ? kiln_amax(kiln_mul(oh, kiln_reshape(valid, 3, s3)), &one, 1, false) : NULL;
  if (!ist) return op_failed_status();
  kiln_tensor *xt = kiln_reshape(kiln_gather(x2, 1, yc), 3, s3); /* x[y[n, p]] as [N, P, 1] */
  kiln_tensor *z = relu_(kiln_add_scalar(kiln_sub(kiln_reshape(x2, 3, s3b), xt), 1.0));
  /* mask[n, p, i] = valid[n, p] and i not a target */
  kiln_tensor *notgt = kiln_add_scalar(kiln_neg(kiln_reshape(ist, 3, s3b)), 1);
  kiln_tensor *mask = notgt ? kiln_mul(kiln_reshape(valid, 3, s3), notgt) : NULL;
  if (!z || !mask) return op_failed_status();
  int64_t dims[2] = {1, 2};
  kiln_tensor *l = kiln_div_scalar(kiln_sum(kiln_mul(z, kiln_to_dtype(mask, z->dtype)), dims, 2,
                                            false), (double)(C ? C : 1));
  if (l && !batched) l = kiln_reshape(l, 0, NULL);
  return op_out1(op_loss_reduce(fn, l, &a[2]), outs);
}

/* max(0, margin + d(a, p) - d(a, n)) with d the pairwise p-distance (swap:
 * d(a, n) replaced by min(d(a, n), d(p, n))) */
int op_triplet_margin_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::triplet_margin_loss";
  static const char *const names[] = {"anchor", "positive", "negative"};
  kiln_tensor *t[3];
  char d[96], e[96], f[96];
  int rc = tensors(fn, a, 3, names, t);
  if (rc < 0 || (rc = to_float(t, 3)) < 0) return rc;
  int nd = t[0]->ndim;
  if (t[1]->ndim != nd || t[2]->ndim != nd || nd < 1 || nd > 2)
    return core_error(KILN_ERR_INVALID, "%s: The anchor, positive, and negative tensors are expected "
                                        "to have the same number of dimensions (1 or 2), but got: "
                                        "anchor %s, positive %s, and negative %s", fn,
                      core_tensor_desc(t[0], d, sizeof d), core_tensor_desc(t[1], e, sizeof e),
                      core_tensor_desc(t[2], f, sizeof f));
  double margin = num(&a[3], 1.0), p = num(&a[4], 2.0), eps = num(&a[5], 1e-6);
  bool swap = a[6].tag == OP_VAL_BOOL && a[6].b;
#define PD(u, v) op_call1(KILN_OP_PAIRWISE_DISTANCE, \
                          (op_val[]){OPV_T(u), OPV_T(v), OPV_F(p), OPV_F(eps), OPV_B(false)}, 5)
  kiln_tensor *dp = PD(t[0], t[1]), *dn = PD(t[0], t[2]);
  if (dn && swap) dn = kiln_minimum(dn, PD(t[1], t[2]));
#undef PD
  if (!dp || !dn) return op_failed_status();
  return op_out1(op_loss_reduce(fn, relu_(kiln_add_scalar(kiln_sub(dp, dn), margin)), &a[7]), outs);
}

/* log_input: e^x - y x; else x - y log(x + eps); full adds Stirling's
 * y log y - y + log(2 pi y) / 2 where y > 1 */
int op_poisson_nll_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::poisson_nll_loss";
  static const char *const names[] = {"input", "target"};
  kiln_tensor *t[2];
  int rc = tensors(fn, a, 2, names, t);
  if (rc < 0 || (rc = to_float(t, 2)) < 0) return rc;
  kiln_tensor *x = t[0], *y = t[1], *l;
  bool log_input = a[2].tag != OP_VAL_BOOL || a[2].b, full = a[3].tag == OP_VAL_BOOL && a[3].b;
  if (log_input) l = kiln_sub(kiln_exp(x), kiln_mul(y, x));
  else l = kiln_sub(x, kiln_mul(y, kiln_log(kiln_add_scalar(x, num(&a[4], 1e-8)))));
  if (l && full) {
    kiln_tensor *st = kiln_add(kiln_sub(kiln_mul(y, kiln_log(y)), y),
                               kiln_mul_scalar(kiln_log(kiln_mul_scalar(y, 2 * M_PI)), 0.5));
    kiln_tensor *gt1 = op_call1(KILN_OP_GT, (op_val[]){OPV_T(y), OPV_F(1)}, 2);
    l = st && gt1 ? kiln_add(l, kiln_where(gt1, st, fscalar(0, st))) : NULL;
  }
  return op_out1(op_loss_reduce(fn, l, &a[5]), outs);
}
