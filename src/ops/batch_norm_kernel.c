/* src/ops/batch_norm_kernel.c: batch norm's fused CPU kernels (Note
 * [Fused norms] in layer_norm_kernel.c): aten::_native_batch_norm_legit
 * (training mode: the batch statistics per channel and the normalised
 * output; the running statistics are not its business, batch_norm.c
 * updates them from its results) and aten::native_batch_norm_backward
 * (training and eval mode). Input [N, C, *] is read as N blocks of C
 * channels of S contiguous elements. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "op.h"

/* ---- kernels --------------------------------------------------------------------- */
/* Channels [c0, c1): mean[c], rstd[c] and y = (x - mean) rstd w + b. */
#define DEF_BN_FWD(SUF, T)                                                                      \
  CORE_CLONES(bn_fwd_##SUF, (const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,       \
                             int64_t c0, int64_t c1, int64_t N, int64_t C, int64_t S,           \
                             double eps),                                                       \
              (x, w, b, y, mean, rstd, c0, c1, N, C, S, eps)) {                                 \
    const double cnt = (double)N * (double)S;                                                   \
    for (int64_t c = c0; c < c1; c++) {                                                         \
      double s = 0, q = 0;                                                                      \
      for (int64_t i = 0; i < N; i++) {                                                         \
        const T *xr = x + (i * C + c) * S;                                                      \
        _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < S; j++) s += (double)xr[j]; \
      }                                                                                         \
      const double mu = s / cnt;                                                                \
      for (int64_t i = 0; i < N; i++) {                                                         \
        const T *xr = x + (i * C + c) * S;                                                      \
        _Pragma("omp simd reduction(+ : q)") for (int64_t j = 0; j < S; j++) {                  \
          double d = (double)xr[j] - mu;                                                        \
          q += d * d;                                                                           \
        }                                                                                       \
      }                                                                                         \
      const double rs = 1.0 / sqrt(q / cnt + eps);                                              \
      mean[c] = (T)mu;                                                                          \
      rstd[c] = (T)rs;                                                                          \
      const double al = w ? rs * (double)w[c] : rs;                                             \
      const T alpha = (T)al, beta = (T)((b ? (double)b[c] : 0.0) - mu * al);                    \
      for (int64_t i = 0; i < N; i++) {                                                         \
        const T *xr = x + (i * C + c) * S;                                                      \
        T *yr = y + (i * C + c) * S;                                                            \
        for (int64_t j = 0; j < S; j++) yr[j] = xr[j] * alpha + beta;                           \
      }                                                                                         \
    }                                                                                           \
  }
DEF_BN_FWD(f32, float)
DEF_BN_FWD(f64, double)

/* Backward over channels [c0, c1), given each channel's mean and rstd (the
 * batch's when train, else the running ones): with sg = sum(g), dot =
 * sum(g (x - mean)) over the channel,
 *   train: dx = (g - sg / n - (x - mean) dot rstd^2 / n) rstd w,
 *   eval:  dx = g rstd w;
 *   dw = dot rstd, db = sg (each written when its pointer is not NULL). */
#define DEF_BN_BWD(SUF, T)                                                                      \
  CORE_CLONES(bn_bwd_##SUF, (const T *g, const T *x, const double *mean, const double *rstd,   \
                             const T *w, T *dx, T *dw, T *db, bool train, int64_t c0,           \
                             int64_t c1, int64_t N, int64_t C, int64_t S),                      \
              (g, x, mean, rstd, w, dx, dw, db, train, c0, c1, N, C, S)) {                      \
    const double cnt = (double)N * (double)S;                                                   \
    for (int64_t c = c0; c < c1; c++) {                                                         \
      const double mu = mean[c], rs = rstd[c];                                                  \
      double sg = 0, dot = 0;                                                                   \
      if (train || dw || db)                                                                    \
        for (int64_t i = 0; i < N; i++) {                                                       \
          const T *gr = g + (i * C + c) * S, *xr = x + (i * C + c) * S;                         \
          _Pragma("omp simd reduction(+ : sg, dot)") for (int64_t j = 0; j < S; j++) {          \
            sg += (double)gr[j];                                                                \
            dot += (double)gr[j] * ((double)xr[j] - mu);                                        \
          }                                                                                     \
        }                                                                                       \
      if (dw) dw[c] = (T)(dot * rs);                                                            \
      if (db) db[c] = (T)sg;                                                                    \
      if (!dx) continue;                                                                        \
      const double sc = w ? rs * (double)w[c] : rs;                                             \
      const T scale = (T)sc;                                                                    \
      if (train) {                                                                              \
        const T gm = (T)(sg / cnt), k = (T)(dot * rs * rs / cnt), m = (T)mu;                    \
        for (int64_t i = 0; i < N; i++) {                                                       \
          const T *gr = g + (i * C + c) * S, *xr = x + (i * C + c) * S;                         \
          T *dr = dx + (i * C + c) * S;                                                         \
          for (int64_t j = 0; j < S; j++) dr[j] = ((gr[j] - gm) - (xr[j] - m) * k) * scale;     \
        }                                                                                       \
      } else {                                                                                  \
        for (int64_t i = 0; i < N; i++) {                                                       \
          const T *gr = g + (i * C + c) * S;                                                    \
          T *dr = dx + (i * C + c) * S;                                                         \
          for (int64_t j = 0; j < S; j++) dr[j] = gr[j] * scale;                                \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }
DEF_BN_BWD(f32, float)
DEF_BN_BWD(f64, double)

/* ---- helpers --------------------------------------------------------------------- */
static const kiln_tensor *contig(const kiln_tensor *t, kiln_tensor **own) {
  *own = NULL;
  if (!t || core_is_contiguous(t)) return t;
  *own = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (!*own) return NULL;
  op_copy_into(*own, t);
  return *own;
}

/* x a Float/Double [N, C, *]; each of the n_per tensors at per[] None or
 * [C] of x's dtype; *N, *C, *S the block geometry. */
static int bn_check(const char *fn, const op_val *x_arg, const op_val *const *per,
                    const char *const *names, int n_per, int64_t *N, int64_t *C, int64_t *S) {
  char d[128];
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, x_arg, "input", &x);
  if (rc < 0) return rc;
  if (x->dtype != KILN_DTYPE_F32 && x->dtype != KILN_DTYPE_F64)
    return core_error(KILN_ERR_INVALID, "%s: not implemented for %s (Float and Double only)", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: expected an input with at least 2 dims, got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  *N = x->shape[0];
  *C = x->shape[1];
  *S = core_numel(x->ndim - 2, x->shape + 2);
  for (int i = 0; i < n_per; i++) {
    const op_val *v = per[i];
    if (v->tag == OP_VAL_NONE) continue;
    if (v->tag != OP_VAL_TENSOR || v->t->ndim != 1 || v->t->shape[0] != *C ||
        v->t->dtype != x->dtype)
      return core_error(KILN_ERR_INVALID, "%s: %s should be a %s tensor of %lld elements, got %s",
                        fn, names[i], kiln_dtype_name(x->dtype), (long long)*C,
                        op_val_desc(v, d, sizeof d));
  }
  return 0;
}

static int64_t par_chunks(int64_t C, int64_t per_channel) {
  return C > 1 && C * per_channel >= OP_PARALLEL_MIN ? C : 1;
}

/* ---- _native_batch_norm_legit.no_stats ---------------------------------------------- */
static const char *const fwd_names[2] = {"weight", "bias"};

int op_native_batch_norm_legit_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::_native_batch_norm_legit";
  char d[128];
  int64_t N, C, S;
  const op_val *per[2] = {&a[1], &a[2]};
  int rc = bn_check(fn, &a[0], per, fwd_names, 2, &N, &C, &S);
  if (rc < 0) return rc;
  if (a[3].tag != OP_VAL_BOOL || !a[3].b)
    return core_error(KILN_ERR_INVALID, "%s: computes batch statistics: training must be True", fn);
  if (!op_val_is_num(&a[5]))
    return core_error(KILN_ERR_INVALID, "%s: expected a float eps", fn);
  if (N * S <= 1)
    return core_error(KILN_ERR_INVALID, "%s: expected more than 1 value per channel when "
                      "training, got input of shape %s", fn, op_val_desc(&a[0], d, sizeof d));
  if (m < 3) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs", fn, m);
  op_meta_of(a[0].t, &o[0]);
  o[1].dtype = o[2].dtype = a[0].t->dtype;
  o[1].ndim = o[2].ndim = 1;
  o[1].shape[0] = o[2].shape[0] = C;
  return 3;
}

int op_native_batch_norm_legit_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  int64_t N, C, S;
  const op_val *per[2] = {&a[1], &a[2]};
  bn_check("aten::_native_batch_norm_legit", &a[0], per, fwd_names, 2, &N, &C, &S);
  double eps = op_val_num(&a[5]);
  kiln_tensor *xo, *wo, *bo;
  const kiln_tensor *x = contig(a[0].t, &xo), *w = contig(op_opt_tensor(&a[1]), &wo),
                    *b = contig(op_opt_tensor(&a[2]), &bo);
  int rc = 0;
  if (!x || (a[1].tag == OP_VAL_TENSOR && !w) || (a[2].tag == OP_VAL_TENSOR && !b)) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  const void *wd = w ? core_data(w) : NULL, *bd = b ? core_data(b) : NULL;
  bool f32 = x->dtype == KILN_DTYPE_F32;
  int64_t nc = par_chunks(C, N * S);
#pragma omp parallel for schedule(static) if (nc > 1)
  for (int64_t k = 0; k < nc; k++) {
    int64_t c0 = nc == 1 ? 0 : k, c1 = nc == 1 ? C : k + 1;
    if (f32)
      bn_fwd_f32(core_data(x), wd, bd, core_data(o[0]), core_data(o[1]), core_data(o[2]), c0, c1,
                 N, C, S, eps);
    else
      bn_fwd_f64(core_data(x), wd, bd, core_data(o[0]), core_data(o[1]), core_data(o[2]), c0, c1,
                 N, C, S, eps);
  }
done:
  kiln_release(xo);
  kiln_release(wo);
  kiln_release(bo);
  return rc;
}

/* The gradient with the table's ops (create_graph), the statistics
 * recomputed from x so that they carry its history. */
static int bn_grad_composite(op_grad_ctx *g, int sw, int sb) {
  kiln_tensor *x = g->args[0].t, *go = g->grads[0], *w = op_opt_tensor(&g->args[1]);
  double eps = op_val_num(&g->args[5]);
  int64_t dims[KILN_MAX_DIMS], C = x->shape[1];
  int nd = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != 1) dims[nd++] = i;
  kiln_tensor *mu = kiln_mean(x, dims, nd, true);
  kiln_tensor *rs = kiln_rsqrt(kiln_add_scalar(kiln_var(x, dims, nd, 0, true), eps));
  kiln_tensor *xhat = kiln_mul(kiln_sub(x, mu), rs);
  int rc = 0;
  if (g->needs[0]) {
    kiln_tensor *gw = w ? kiln_mul(go, op_per_channel(w, x->ndim, C)) : go;
    kiln_tensor *t = kiln_sub(kiln_sub(gw, kiln_mean(gw, dims, nd, true)),
                              kiln_mul(xhat, kiln_mean(kiln_mul(gw, xhat), dims, nd, true)));
    if ((rc = op_grad_put(g, 0, kiln_mul(rs, t))) < 0) return rc;
  }
  if (sw >= 0 && g->needs[sw] && (rc = op_grad_put(g, sw, kiln_sum(kiln_mul(go, xhat), dims, nd,
                                                                    false))) < 0)
    return rc;
  if (sb >= 0 && g->needs[sb] && (rc = op_grad_put(g, sb, kiln_sum(go, dims, nd, false))) < 0)
    return rc;
  return 0;
}

/* Gradients of the output only (the statistics' are ignored, as PyTorch's
 * native_batch_norm_backward takes grad_out alone). */
int op_native_batch_norm_legit_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go) return 0;
  bool has_w = g->args[1].tag == OP_VAL_TENSOR, has_b = g->args[2].tag == OP_VAL_TENSOR;
  int sw = has_w ? 1 : -1, sb = has_b ? 1 + has_w : -1;
  if (op_grad_enabled) return bn_grad_composite(g, sw, sb);
  int64_t mask[3] = {g->needs[0], sw >= 0 && g->needs[sw], sb >= 0 && g->needs[sb]};
  kiln_tensor *outs[3] = {0};
  op_val args[10] = {OPV_T(go),        g->args[0],        g->args[1], OPV_NONE, OPV_NONE,
                     OPV_T(g->outs[1]), OPV_T(g->outs[2]), OPV_B(true), g->args[5],
                     OPV_INTS(mask, 3)};
  int n = op_call(KILN_OP_NATIVE_BATCH_NORM_BACKWARD, args, 10, outs, 3);
  if (n < 0) return n;
  if (mask[0]) g->grad_in[0] = outs[0];
  if (mask[1]) g->grad_in[sw] = outs[1];
  if (mask[2]) g->grad_in[sb] = outs[2];
  return 0;
}

/* ---- native_batch_norm_backward ------------------------------------------------------ */
/* args: grad_out, input, weight, running_mean, running_var, save_mean,
 * save_invstd, train, eps, output_mask */
static const char *const bwd_names[5] = {"weight", "running_mean", "running_var", "save_mean",
                                         "save_invstd"};

static int bwd_check(const op_val *a, bool mask[3], int64_t *N, int64_t *C, int64_t *S) {
  const char *fn = "aten::native_batch_norm_backward";
  char d[160], e[160];
  const op_val *per[5] = {&a[2], &a[3], &a[4], &a[5], &a[6]};
  int rc = bn_check(fn, &a[1], per, bwd_names, 5, N, C, S);
  if (rc < 0) return rc;
  kiln_tensor *go, *x = a[1].t;
  if ((rc = op_arg_tensor(fn, &a[0], "grad_out", &go)) < 0) return rc;
  if (go->dtype != x->dtype || go->ndim != x->ndim ||
      memcmp(go->shape, x->shape, (size_t)x->ndim * sizeof *x->shape))
    return core_error(KILN_ERR_INVALID, "%s: grad_out %s does not match input %s", fn,
                      core_tensor_desc(go, d, sizeof d), core_tensor_desc(x, e, sizeof e));
  if (a[7].tag != OP_VAL_BOOL || !op_val_is_num(&a[8]))
    return core_error(KILN_ERR_INVALID, "%s: expected (bool train, float eps)", fn);
  bool train = a[7].b;
  if (train ? a[5].tag != OP_VAL_TENSOR || a[6].tag != OP_VAL_TENSOR
            : a[3].tag != OP_VAL_TENSOR || a[4].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: %s needs %s", fn, train ? "train" : "eval mode",
                      train ? "save_mean and save_invstd" : "running_mean and running_var");
  if (a[9].tag == OP_VAL_NONE) {
    mask[0] = mask[1] = mask[2] = true;
    return 0;
  }
  if (a[9].tag != OP_VAL_INTS || a[9].ints.n != 3)
    return core_error(KILN_ERR_INVALID, "%s: output_mask must be bool[3], got %s", fn,
                      op_val_desc(&a[9], d, sizeof d));
  for (int i = 0; i < 3; i++) mask[i] = a[9].ints.v[i] != 0;
  return 0;
}

int op_native_batch_norm_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  bool mask[3];
  int64_t N, C, S;
  int rc = bwd_check(a, mask, &N, &C, &S);
  if (rc < 0) return rc;
  if (m < 3)
    return core_error(KILN_ERR_INVALID, "aten::native_batch_norm_backward: room for %d outputs", m);
  op_meta_of(a[1].t, &o[0]);
  for (int i = 1; i < 3; i++) {
    o[i].dtype = a[1].t->dtype;
    o[i].ndim = 1;
    o[i].shape[0] = C;
  }
  for (int i = 0; i < 3; i++)
    if (!mask[i]) { /* undefined in PyTorch: an empty tensor here */
      o[i].ndim = 1;
      o[i].shape[0] = 0;
    }
  return 3;
}

int op_native_batch_norm_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  bool mask[3];
  int64_t N, C, S;
  bwd_check(a, mask, &N, &C, &S);
  bool train = a[7].b, f32 = a[1].t->dtype == KILN_DTYPE_F32;
  double eps = op_val_num(&a[8]);
  kiln_tensor *own[3] = {0};
  double *st = core_alloc((size_t)(C ? 2 * C : 1) * sizeof *st);
  int rc = 0;
  const kiln_tensor *go = contig(a[0].t, &own[0]), *x = contig(a[1].t, &own[1]),
                    *w = contig(op_opt_tensor(&a[2]), &own[2]);
  if (!st || !go || !x || (a[2].tag == OP_VAL_TENSOR && !w)) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  /* the statistics in double: the saved ones, or the running ones' rstd */
  const kiln_tensor *ms = train ? a[5].t : a[3].t, *vs = train ? a[6].t : a[4].t;
  for (int64_t c = 0; c < C; c++) {
    double mv = core_get_flat(ms, c), vv = core_get_flat(vs, c);
    st[c] = mv;
    st[C + c] = train ? vv : 1.0 / sqrt(vv + eps);
  }
  const void *wd = w ? core_data(w) : NULL;
  void *dx = mask[0] ? core_data(o[0]) : NULL, *dw = mask[1] ? core_data(o[1]) : NULL,
       *db = mask[2] ? core_data(o[2]) : NULL;
  int64_t nc = par_chunks(C, N * S);
#pragma omp parallel for schedule(static) if (nc > 1)
  for (int64_t k = 0; k < nc; k++) {
    int64_t c0 = nc == 1 ? 0 : k, c1 = nc == 1 ? C : k + 1;
    if (f32)
      bn_bwd_f32(core_data(go), core_data(x), st, st + C, wd, dx, dw, db, train, c0, c1, N, C, S);
    else
      bn_bwd_f64(core_data(go), core_data(x), st, st + C, wd, dx, dw, db, train, c0, c1, N, C, S);
  }
done:
  core_free(st);
  for (int i = 0; i < 3; i++) kiln_release(own[i]);
  return rc;
}
