/* src/ops/loss.c: losses: nll_loss (a kernel; its gradient a one-hot mask
 * built with public ops, so it is differentiable again), cross_entropy
 * (decomposes into log_softmax + nll_loss) and mse_loss (decomposes into
 * sub, mul and a reduction). */
#include <string.h>

#include "op.h"

static const char *const reduction_names[3] = {"none", "mean", "sum"};

static int check_reduction(const char *fn, const op_val *v) {
  char d[64];
  if (v->tag != OP_VAL_INT || v->i < 0 || v->i > 2)
    return core_error(KILN_ERR_INVALID,
                      "%s: reduction must be 0 (none), 1 (mean) or 2 (sum), got %s", fn,
                      op_val_desc(v, d, sizeof d));
  return 0;
}

/* A new reference that only the caller's scope would otherwise release:
 * outside any scope, intermediates of a decomposition are released here. */
static void drop(kiln_tensor *t) {
  if (core_scope_depth() == 0) kiln_release(t);
}

/* ---- nll_loss -------------------------------------------------------------------- */

int op_nll_loss_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::nll_loss_nd";
  char d[160], e[160];
  if (a[0].tag != OP_VAL_TENSOR || a[1].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: self and target must be tensors, got %s and %s",
                      fn, op_val_desc(&a[0], d, sizeof d), op_val_desc(&a[1], e, sizeof e));
  const kiln_tensor *x = a[0].t, *t = a[1].t;
  if (!core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "%s: expected floating-point log-probabilities, got %s",
                      fn, core_tensor_desc(x, d, sizeof d));
  if (x->ndim != 1 && x->ndim != 2)
    return core_error(KILN_ERR_UNSUPPORTED,
                      "%s: only [N, C] or [C] inputs are supported, got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (t->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: expected a target of dtype Long, got %s", fn,
                      core_tensor_desc(t, d, sizeof d));
  if (x->ndim == 2 ? t->ndim != 1 || t->shape[0] != x->shape[0] : t->ndim != 0)
    return core_error(KILN_ERR_INVALID, "%s: input %s and target %s: expected a target of shape %s",
                      fn, core_tensor_desc(x, d, sizeof d), core_tensor_desc(t, e, sizeof e),
                      x->ndim == 2 ? core_shape_str(1, x->shape, (char[32]){0}, 32) : "[]");
  if (a[2].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: class weights are not supported (weight=%s)",
                      fn, op_val_desc(&a[2], d, sizeof d));
  if (check_reduction(fn, &a[3]) < 0) return -1;
  if (a[4].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: ignore_index must be an int, got %s", fn,
                      op_val_desc(&a[4], d, sizeof d));
  o[0].dtype = x->dtype;
  o[0].ndim = a[3].i == 0 ? t->ndim : 0;
  if (o[0].ndim) o[0].shape[0] = t->shape[0];
  return 1;
}

int op_nll_loss_cpu(const op_val *a, int n_args, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[0].t, *t = a[1].t;
  int64_t red = a[3].i, ign = a[4].i;
  int64_t n = x->ndim == 2 ? x->shape[0] : 1, c = x->shape[x->ndim - 1];
  int64_t sn = x->ndim == 2 ? x->strides[0] : 0, sc = x->strides[x->ndim - 1];
  int64_t st = t->ndim ? t->strides[0] : 0, count = 0;
  const int64_t *tp = core_data(t);
  const char *xp = core_data(x);
  bool f32 = x->dtype == KILN_DTYPE_F32;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t k = tp[i * st];
    double l = 0;
    if (k != ign) {
      if (k < 0 || k >= c)
        return core_error(KILN_ERR_INVALID,
                          "aten::nll_loss_nd: target %lld is out of bounds for %lld classes "
                          "(target element %lld)",
                          (long long)k, (long long)c, (long long)i);
      int64_t off = i * sn + k * sc;
      l = -(f32 ? (double)((const float *)xp)[off] : ((const double *)xp)[off]);
      count++;
    }
    sum += l;
    if (red == 0) {
      if (f32) ((float *)core_data(o[0]))[i] = (float)l;
      else ((double *)core_data(o[0]))[i] = l;
    }
  }
  if (red != 0) {
    double v = red == 1 ? sum / (double)count : sum; /* all ignored: 0/0 = NaN */
    if (f32) *(float *)core_data(o[0]) = (float)v;
    else *(double *)core_data(o[0]) = v;
  }
  return 0;
}

/* dx[i, c] = -g_i (or -g / count for mean, -g for sum) where c == target[i]
 * and target[i] != ignore_index, else 0: a mask where(arange(C) ==
 * target), so the formula is differentiable in g (double backward). */
int op_nll_loss_grad(op_grad_ctx *g) {
  if (!g->needs[0] || !g->grads[0]) return 0;
  kiln_tensor *x = g->args[0].t, *t = g->args[1].t, *go = g->grads[0];
  int64_t red = g->args[3].i, ign = g->args[4].i, c = x->shape[x->ndim - 1];
  kiln_tensor *zero = kiln_zeros(0, NULL, x->dtype);
  kiln_tensor *valid = kiln_ne(t, kiln_full(0, NULL, (double)ign, KILN_DTYPE_I64));
  kiln_tensor *coef = kiln_neg(go);
  if (red == 1)
    coef = kiln_div(coef, kiln_to_dtype(kiln_sum(valid, NULL, 0, false), x->dtype));
  coef = kiln_where(valid, coef, zero); /* shape of target */
  kiln_tensor *tk = t;
  if (x->ndim == 2) {
    coef = kiln_unsqueeze(coef, 1);
    tk = kiln_unsqueeze(t, 1);
  }
  kiln_tensor *hit = kiln_eq(kiln_arange(0, (double)c, 1, KILN_DTYPE_I64), tk);
  g->grad_in[0] = kiln_where(hit, coef, zero);
  return g->grad_in[0] ? 0 : -1;
}

/* ---- cross_entropy ---------------------------------------------------------------- */

int op_cross_entropy_decompose(const op_val *a, int n, kiln_tensor **outs, int max_outs) {
  const char *fn = "aten::cross_entropy_loss";
  char d[160];
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor, got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (a[0].t->ndim > 2 && a[1].tag == OP_VAL_TENSOR && a[1].t->dtype == KILN_DTYPE_I64 &&
      a[1].t->ndim == a[0].t->ndim - 1) {
    /* [N, C, d...] with target [N, d...]: classes moved last, rows flattened */
    kiln_tensor *x = a[0].t, *t = a[1].t;
    int64_t perm[KILN_MAX_DIMS], rows[2] = {-1, x->shape[1]}, m = -1;
    for (int i = 0, k = 0; i < x->ndim; i++)
      if (i != 1) perm[k++] = i;
    perm[x->ndim - 1] = 1;
    kiln_tensor *x2 = kiln_reshape(kiln_permute(x, x->ndim, perm), 2, rows);
    kiln_tensor *t1 = kiln_reshape(t, 1, &m);
    if (!x2 || !t1) return -1;
    op_val c[6];
    memcpy(c, a, sizeof c);
    c[0] = OPV_T(x2);
    c[1] = OPV_T(t1);
    int rc = op_cross_entropy_decompose(c, n, outs, max_outs);
    if (rc < 0 || outs[0]->ndim != 1) return rc;
    outs[0] = kiln_reshape(outs[0], t->ndim, t->shape);
    return outs[0] ? 1 : -1;
  }
  if (a[0].t->ndim != 1 && a[0].t->ndim != 2)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: only [N, C] or [C] inputs are supported (or "
                                            "[N, C, d...] with an int64 target [N, d...]), got %s",
                      fn, core_tensor_desc(a[0].t, d, sizeof d));
  if (a[2].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: class weights are not supported (weight=%s)",
                      fn, op_val_desc(&a[2], d, sizeof d));
  if (op_val_is_num(&a[5]) && op_val_num(&a[5]) != 0)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: label_smoothing=%g is not supported", fn,
                      op_val_num(&a[5]));
  if (max_outs < 1) return core_error(KILN_ERR_INVALID, "%s: no room for the output", fn);
  kiln_tensor *lp = kiln_log_softmax(a[0].t, a[0].t->ndim == 2 ? 1 : 0);
  if (!lp) return -1;
  outs[0] = op_call1(KILN_OP_NLL_LOSS,
                     (op_val[]){OPV_T(lp), a[1], OPV_NONE, a[3], a[4]}, 5);
  drop(lp);
  return outs[0] ? 1 : -1;
}

/* ---- mse_loss ---------------------------------------------------------------------- */

int op_mse_loss_decompose(const op_val *a, int n, kiln_tensor **outs, int max_outs) {
  const char *fn = "aten::mse_loss";
  char d[160], e[160];
  if (a[0].tag != OP_VAL_TENSOR || a[1].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: self and target must be tensors, got %s and %s",
                      fn, op_val_desc(&a[0], d, sizeof d), op_val_desc(&a[1], e, sizeof e));
  if (check_reduction(fn, &a[2]) < 0) return -1;
  if (max_outs < 1) return core_error(KILN_ERR_INVALID, "%s: no room for the output", fn);
  kiln_tensor *diff = kiln_sub(a[0].t, a[1].t);
  if (!diff) return -1;
  kiln_tensor *sq = kiln_mul(diff, diff);
  drop(diff);
  if (!sq) return -1;
  if (a[2].i == 0) {
    outs[0] = sq;
    return 1;
  }
  outs[0] = a[2].i == 1 ? kiln_mean(sq, NULL, 0, false) : kiln_sum(sq, NULL, 0, false);
  drop(sq);
  if (!outs[0]) core_error_prefix("%s (reduction=%s): ", fn, reduction_names[a[2].i]);
  return outs[0] ? 1 : -1;
}

/* ---- public API ------------------------------------------------------------------ */

kiln_tensor *kiln_nll_loss(kiln_tensor *logp, kiln_tensor *target, kiln_reduction reduction) {
  return op_call1(KILN_OP_NLL_LOSS, (op_val[]){OPV_T(logp), OPV_T(target), OPV_NONE,
                                               OPV_I(reduction), OPV_I(-100)},
                  5);
}
kiln_tensor *kiln_cross_entropy(kiln_tensor *logits, kiln_tensor *target,
                                kiln_reduction reduction) {
  return op_call1(KILN_OP_CROSS_ENTROPY, (op_val[]){OPV_T(logits), OPV_T(target), OPV_NONE,
                                                    OPV_I(reduction), OPV_I(-100), OPV_F(0.0)},
                  6);
}
kiln_tensor *kiln_mse_loss(kiln_tensor *input, kiln_tensor *target, kiln_reduction reduction) {
  return op_call1(KILN_OP_MSE_LOSS, (op_val[]){OPV_T(input), OPV_T(target), OPV_I(reduction)}, 3);
}
