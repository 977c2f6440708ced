/* src/ops/layer_norm_kernel.c: aten::native_layer_norm and
 * aten::native_layer_norm_backward as fused CPU kernels (Note [Fused
 * norms]); aten::layer_norm decomposes into the first.
 *
 * Note [Fused norms]: layer norm (each row of the trailing M elements) and
 * training-mode batch norm (each channel over N and the spatial dims,
 * batch_norm_kernel.c) compute their statistics in two passes over the
 * data held in cache, summing in double (the mean, then the centred sum of
 * squares: exact enough for any float32 data, and no cancellation), then
 * normalise with weight and bias in a third pass; one backward kernel
 * returns the gradients output_mask asks for, summing in double too. The
 * decompositions they replace made ~8 passes and as many temporaries. The
 * derivative formula calls the backward kernel when the backward is not
 * itself recorded; under create_graph it writes the same gradient with
 * the table's ops, the statistics recomputed from the input, so that
 * double backward differentiates through them (PyTorch's
 * infinitely_differentiable_native_layer_norm_backward does the same). The
 * row loops run per CPU level (Note [CPU levels]); their reductions carry
 * `omp simd` and so may differ between levels in the last bits. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "op.h"

/* ---- kernels --------------------------------------------------------------------- */
#define LN_INLINE static inline __attribute__((always_inline))
/* Forward rows [r0, r1) of M elements: y, mean[r], rstd[r]. */
#define DEF_LN_FWD(SUF, T)                                                                     \
  CORE_CLONES(ln_fwd_##SUF, (const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,      \
                             int64_t r0, int64_t r1, int64_t M, double eps),                   \
              (x, w, b, y, mean, rstd, r0, r1, M, eps)) {                                      \
    for (int64_t r = r0; r < r1; r++) {                                                        \
      const T *xr = x + r * M;                                                                 \
      T *yr = y + r * M;                                                                       \
      double s = 0, q = 0;                                                                     \
      _Pragma("omp simd reduction(+ : s)") for (int64_t j = 0; j < M; j++) s += (double)xr[j]; \
      double mu = M ? s / (double)M : 0;                                                       \
      _Pragma("omp simd reduction(+ : q)") for (int64_t j = 0; j < M; j++) {                   \
        double d = (double)xr[j] - mu;                                                         \
        q += d * d;                                                                            \
      }                                                                                        \
      double rs = 1.0 / sqrt((M ? q / (double)M : 0) + eps);                                   \
      mean[r] = (T)mu;                                                                         \
      rstd[r] = (T)rs;                                                                         \
      const T m = (T)mu, a = (T)rs;                                                            \
      if (w && b)                                                                              \
        for (int64_t j = 0; j < M; j++) yr[j] = (xr[j] - m) * a * w[j] + b[j];                 \
      else if (w)                                                                              \
        for (int64_t j = 0; j < M; j++) yr[j] = (xr[j] - m) * a * w[j];                        \
      else if (b)                                                                              \
        for (int64_t j = 0; j < M; j++) yr[j] = (xr[j] - m) * a + b[j];                        \
      else                                                                                     \
        for (int64_t j = 0; j < M; j++) yr[j] = (xr[j] - m) * a;                               \
    }                                                                                          \
  }
DEF_LN_FWD(f32, float)
DEF_LN_FWD(f64, double)

/* Backward rows [r0, r1): dx (when dx), and dw/db accumulated in double
 * into aw/ab (when not NULL). With gw = g * w (g without weight):
 *   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), xhat = (x - mu) rstd,
 *   dw += g * xhat, db += g. */
#define DEF_LN_BWD(SUF, T)                                                                     \
  CORE_CLONES(ln_bwd_##SUF, (const T *g, const T *x, const T *mean, const T *rstd,            \
                             const T *w, T *dx, double *aw, double *ab, int64_t r0,            \
                             int64_t r1, int64_t M),                                           \
              (g, x, mean, rstd, w, dx, aw, ab, r0, r1, M)) {                                  \
    for (int64_t r = r0; r < r1; r++) {                                                        \
      const T *gr = g + r * M, *xr = x + r * M;                                                \
      const double mu = (double)mean[r], rs = (double)rstd[r];                                 \
      const T m = mean[r], a = rstd[r];                                                        \
      if (dx) {                                                                                \
        double sg = 0, sq = 0;                                                                 \
        if (w) {                                                                               \
          _Pragma("omp simd reduction(+ : sg, sq)") for (int64_t j = 0; j < M; j++) {          \
            double gw = (double)gr[j] * (double)w[j];                                          \
            sg += gw;                                                                          \
            sq += gw * ((double)xr[j] - mu);                                                   \
          }                                                                                    \
        } else {                                                                               \
          _Pragma("omp simd reduction(+ : sg, sq)") for (int64_t j = 0; j < M; j++) {          \
            sg += (double)gr[j];                                                               \
            sq += (double)gr[j] * ((double)xr[j] - mu);                                        \
          }                                                                                    \
        }                                                                                      \
        /* dx = rs gw + c1 (x - mu) + c2 */                                                    \
        const T c1 = (T)(-sq * rs * rs * rs / (double)M), c2 = (T)(-sg * rs / (double)M);      \
        T *dr = dx + r * M;                                                                    \
        if (w)                                                                                 \
          for (int64_t j = 0; j < M; j++) dr[j] = a * (gr[j] * w[j]) + c1 * (xr[j] - m) + c2;  \
        else                                                                                   \
          for (int64_t j = 0; j < M; j++) dr[j] = a * gr[j] + c1 * (xr[j] - m) + c2;           \
      }                                                                                        \
      if (aw)                                                                                  \
        for (int64_t j = 0; j < M; j++) aw[j] += (double)gr[j] * (((double)xr[j] - mu) * rs);  \
      if (ab)                                                                                  \
        for (int64_t j = 0; j < M; j++) ab[j] += (double)gr[j];                                \
    }                                                                                          \
  }
DEF_LN_BWD(f32, float)
DEF_LN_BWD(f64, double)

/* ---- argument checks ------------------------------------------------------------- */
int op_check_norm_shape(const char *fn, const kiln_tensor *x, const op_val *shape,
                        const op_val wb[2], int *k_out, const int64_t **ns_out) {
  char d[64], s[64], xd[128]; /* one buffer per argument: their order is unspecified */
  if (shape->tag != OP_VAL_INTS && shape->tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: normalized_shape must be an int list", fn);
  int k = shape->tag == OP_VAL_INT ? 1 : shape->ints.n;
  const int64_t *ns = shape->tag == OP_VAL_INT ? &shape->i : shape->ints.v;
  bool ok = k <= x->ndim;
  for (int i = 0; ok && i < k; i++) ok = x->shape[x->ndim - k + i] == ns[i];
  if (!ok)
    return core_error(KILN_ERR_INVALID, "%s: Given normalized_shape=%s, expected input with shape "
                      "[*, %s], but got input of size %s", fn,
                      core_shape_str(k, ns, d, sizeof d), core_shape_str(k, ns, s, sizeof s) + 1,
                      core_tensor_desc(x, xd, sizeof xd));
  for (int w = 0; w < 2; w++) {
    if (wb[w].tag == OP_VAL_NONE) continue;
    if (wb[w].tag != OP_VAL_TENSOR || wb[w].t->ndim != k ||
        memcmp(wb[w].t->shape, ns, (size_t)k * sizeof *ns))
      return core_error(KILN_ERR_INVALID, "%s: %s must have shape %s, got %s", fn,
                        w == 0 ? "weight" : "bias", core_shape_str(k, ns, s, sizeof s),
                        op_val_desc(&wb[w], d, sizeof d));
  }
  *k_out = k;
  *ns_out = ns;
  return 0;
}

/* Checks (input, normalized_shape, weight, bias) as PyTorch; *k = number
 * of normalized dims, *rows, *M the row count and length. */
static int ln_check(const char *fn, const op_val *a, int *k_out, int64_t *rows, int64_t *M) {
  char d[64];
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "input", &x);
  if (rc < 0) return rc;
  if (x->dtype != KILN_DTYPE_F32 && x->dtype != KILN_DTYPE_F64)
    return core_error(KILN_ERR_INVALID, "%s: not implemented for %s (Float and Double only)", fn,
                      core_tensor_desc(x, d, sizeof d));
  int k;
  const int64_t *ns;
  if ((rc = op_check_norm_shape(fn, x, &a[1], &a[2], &k, &ns)) < 0) return rc;
  for (int w = 2; w <= 3; w++)
    if (a[w].tag == OP_VAL_TENSOR && a[w].t->dtype != x->dtype)
      return core_error(KILN_ERR_INVALID, "%s: expected %s of dtype %s, got %s", fn,
                        w == 2 ? "weight" : "bias", kiln_dtype_name(x->dtype),
                        core_tensor_desc(a[w].t, d, sizeof d));
  int64_t m = core_numel(k, x->shape + x->ndim - k);
  *k_out = k;
  *M = m;
  *rows = m ? core_numel(x->ndim, x->shape) / m : core_numel(x->ndim - k, x->shape);
  return 0;
}

static const kiln_tensor *contig(const kiln_tensor *t, kiln_tensor **own) {
  *own = NULL;
  if (!t || core_is_contiguous(t)) return t;
  *own = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (!*own) return NULL;
  op_copy_into(*own, t);
  return *own;
}

/* ---- native_layer_norm -------------------------------------------------------------- */
int op_native_layer_norm_infer(const op_val *a, int n, op_meta *o, int m) {
  int k;
  int64_t rows, M;
  int rc = ln_check("aten::native_layer_norm", a, &k, &rows, &M);
  if (rc < 0) return rc;
  if (m < 3) return core_error(KILN_ERR_INVALID, "aten::native_layer_norm: room for %d outputs", m);
  if (!op_val_is_num(&a[4]))
    return core_error(KILN_ERR_INVALID, "aten::native_layer_norm: expected a float eps");
  const kiln_tensor *x = a[0].t;
  op_meta_of(x, &o[0]);
  o[1] = o[0];
  for (int i = x->ndim - k; i < x->ndim; i++) o[1].shape[i] = 1;
  o[2] = o[1];
  return 3;
}

int op_native_layer_norm_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  int k;
  int64_t rows, M;
  ln_check("aten::native_layer_norm", a, &k, &rows, &M);
  double eps = op_val_num(&a[4]);
  kiln_tensor *xo, *wo, *bo;
  const kiln_tensor *x = contig(a[0].t, &xo), *w = contig(op_opt_tensor(&a[2]), &wo),
                    *b = contig(op_opt_tensor(&a[3]), &bo);
  int rc = 0;
  if (!x || (a[2].tag == OP_VAL_TENSOR && !w) || (a[3].tag == OP_VAL_TENSOR && !b)) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  const void *wd = w ? core_data(w) : NULL, *bd = b ? core_data(b) : NULL;
  bool f32 = x->dtype == KILN_DTYPE_F32;
  /* rows of ~M elements each: split rows among threads when the work is large */
  int64_t chunk = M >= OP_PARALLEL_MIN ? 1 : OP_PARALLEL_MIN / (M ? M : 1);
  int64_t n_chunks = (rows + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n_chunks > 1)
  for (int64_t c = 0; c < n_chunks; c++) {
    int64_t r0 = c * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    if (f32)
      ln_fwd_f32(core_data(x), wd, bd, core_data(o[0]), core_data(o[1]), core_data(o[2]), r0, r1,
                 M, eps);
    else
      ln_fwd_f64(core_data(x), wd, bd, core_data(o[0]), core_data(o[1]), core_data(o[2]), r0, r1,
                 M, eps);
  }
done:
  kiln_release(xo);
  kiln_release(wo);
  kiln_release(bo);
  return rc;
}

/* The gradient with the table's ops (create_graph): statistics recomputed
 * from x so that they carry x's history. */
static int ln_grad_composite(op_grad_ctx *g, int k, int sw, int sb) {
  kiln_tensor *x = g->args[0].t, *go = g->grads[0];
  kiln_tensor *w = op_opt_tensor(&g->args[2]);
  double eps = op_val_num(&g->args[4]);
  int64_t dims[KILN_MAX_DIMS], bdims[KILN_MAX_DIMS];
  int nb = x->ndim - k;
  for (int i = 0; i < k; i++) dims[i] = nb + i;
  for (int i = 0; i < nb; i++) bdims[i] = i;
  /* k == 0 normalises each element alone: y = bias, xhat = 0 (kiln_mean
   * over no dims would reduce over all of them) */
  kiln_tensor *mu = k ? kiln_mean(x, dims, k, true) : x;
  kiln_tensor *rs = kiln_rsqrt(kiln_add_scalar(k ? kiln_var(x, dims, k, 0, true)
                                                 : kiln_mul_scalar(x, 0.0), eps));
  kiln_tensor *xhat = kiln_mul(kiln_sub(x, mu), rs);
  if (g->needs[0]) {
    kiln_tensor *gw = w ? kiln_mul(go, w) : go;
    kiln_tensor *t = k ? kiln_sub(kiln_sub(gw, kiln_mean(gw, dims, k, true)),
                                  kiln_mul(xhat, kiln_mean(kiln_mul(gw, xhat), dims, k, true)))
                       : kiln_mul_scalar(gw, 0.0);
    int rc = op_grad_put(g, 0, kiln_mul(rs, t));
    if (rc < 0) return rc;
  }
  if (sw >= 0 && g->needs[sw]) {
    kiln_tensor *p = kiln_mul(go, xhat);
    int rc = op_grad_put(g, sw, nb ? kiln_sum(p, bdims, nb, false) : p);
    if (rc < 0) return rc;
  }
  if (sb >= 0 && g->needs[sb]) {
    int rc = op_grad_put(g, sb, nb ? kiln_sum(go, bdims, nb, false) : go);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Gradients of the output only: PyTorch's formula ignores the mean's and
 * rstd's (native_layer_norm_backward takes grad_out alone). */
int op_native_layer_norm_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go) return 0;
  bool has_w = g->args[2].tag == OP_VAL_TENSOR, has_b = g->args[3].tag == OP_VAL_TENSOR;
  int sw = has_w ? 1 : -1, sb = has_b ? 1 + has_w : -1;
  if (op_grad_enabled) return ln_grad_composite(g, g->args[1].ints.n, sw, sb);
  int64_t mask[3] = {g->needs[0], sw >= 0 && g->needs[sw], sb >= 0 && g->needs[sb]};
  kiln_tensor *outs[3] = {0};
  op_val args[8] = {OPV_T(go),      g->args[0], g->args[1], OPV_T(g->outs[1]),
                    OPV_T(g->outs[2]), g->args[2], g->args[3], OPV_INTS(mask, 3)};
  int n = op_call(KILN_OP_NATIVE_LAYER_NORM_BACKWARD, args, 8, outs, 3);
  if (n < 0) return n;
  if (mask[0]) g->grad_in[0] = outs[0];
  if (mask[1]) g->grad_in[sw] = outs[1];
  if (mask[2]) g->grad_in[sb] = outs[2];
  return 0;
}

/* ---- native_layer_norm_backward ------------------------------------------------------- */
/* output_mask as bool[3]: an int list of 0/1 (or absent: all true). */
static int mask_arg(const char *fn, const op_val *v, bool mask[3]) {
  char d[160];
  if (v->tag == OP_VAL_NONE) {
    mask[0] = mask[1] = mask[2] = true;
    return 0;
  }
  if (v->tag != OP_VAL_INTS || v->ints.n != 3)
    return core_error(KILN_ERR_INVALID, "%s: output_mask must be bool[3], got %s", fn,
                      op_val_desc(v, d, sizeof d));
  for (int i = 0; i < 3; i++) mask[i] = v->ints.v[i] != 0;
  return 0;
}

/* args: grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask */
int op_native_layer_norm_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::native_layer_norm_backward";
  char d[128], e[128];
  int k;
  int64_t rows, M;
  bool mask[3];
  op_val fa[4] = {a[1], a[2], a[5], a[6]};
  int rc = ln_check(fn, fa, &k, &rows, &M);
  if (rc < 0 || (rc = mask_arg(fn, &a[7], mask)) < 0) return rc;
  const kiln_tensor *x = a[1].t;
  kiln_tensor *go;
  if ((rc = op_arg_tensor(fn, &a[0], "grad_out", &go)) < 0) return rc;
  if (go->dtype != x->dtype || go->ndim != x->ndim ||
      memcmp(go->shape, x->shape, (size_t)x->ndim * sizeof *x->shape))
    return core_error(KILN_ERR_INVALID, "%s: grad_out %s does not match input %s", fn,
                      core_tensor_desc(go, d, sizeof d), core_tensor_desc(x, e, sizeof e));
  for (int i = 3; i <= 4; i++) {
    if (a[i].tag != OP_VAL_TENSOR || a[i].t->dtype != x->dtype ||
        core_numel(a[i].t->ndim, a[i].t->shape) != rows)
      return core_error(KILN_ERR_INVALID, "%s: %s must be a %s tensor of %lld elements, got %s",
                        fn, i == 3 ? "mean" : "rstd", kiln_dtype_name(x->dtype), (long long)rows,
                        op_val_desc(&a[i], d, sizeof d));
  }
  if (m < 3) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs", fn, m);
  op_meta_of(x, &o[0]);
  for (int i = 1; i < 3; i++) {
    o[i].dtype = x->dtype;
    o[i].ndim = k;
    memcpy(o[i].shape, x->shape + x->ndim - k, (size_t)k * sizeof *x->shape);
  }
  for (int i = 0; i < 3; i++)
    if (!mask[i]) { /* undefined in PyTorch: an empty tensor here */
      o[i].ndim = 1;
      o[i].shape[0] = 0;
    }
  return 3;
}

int op_native_layer_norm_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const char *fn = "aten::native_layer_norm_backward";
  int k;
  int64_t rows, M;
  bool mask[3];
  op_val fa[4] = {a[1], a[2], a[5], a[6]};
  ln_check(fn, fa, &k, &rows, &M);
  mask_arg(fn, &a[7], mask);
  kiln_tensor *own[5] = {0};
  double *acc = NULL;
  int rc = 0;
  const kiln_tensor *go = contig(a[0].t, &own[0]), *x = contig(a[1].t, &own[1]),
                    *mean = contig(a[3].t, &own[2]), *rstd = contig(a[4].t, &own[3]),
                    *w = contig(op_opt_tensor(&a[5]), &own[4]);
  if (!go || !x || !mean || !rstd || (a[5].tag == OP_VAL_TENSOR && !w)) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  bool f32 = x->dtype == KILN_DTYPE_F32;
  size_t nacc = (size_t)(mask[1] + mask[2]) * (size_t)M;
  /* Note [Norm weight grads in blocks]: dw/db are summed per block of
   * rows, each block into its own buffer in the same pass as its dx, and
   * the blocks' sums are then added in block order. A block is a fixed
   * number of rows (LN_BLOCK elements, at most LN_MAX_BLOCKS blocks),
   * whatever the thread count, so the result does not depend on it. One
   * thread summing all rows had been a serial pass while the other
   * waited (a transformer layer's two norms: 1024 rows of 256). */
  enum { LN_BLOCK = 1 << 16, LN_MAX_BLOCKS = 64 };
  int64_t rb = M >= LN_BLOCK ? 1 : LN_BLOCK / (M ? M : 1);
  if ((rows + rb - 1) / rb > LN_MAX_BLOCKS) rb = (rows + LN_MAX_BLOCKS - 1) / LN_MAX_BLOCKS;
  int64_t nb = rows ? (rows + rb - 1) / rb : 1; /* <= LN_MAX_BLOCKS: nb * nacc cannot overflow */
  if (nacc && !(acc = core_calloc((size_t)nb * nacc, sizeof *acc))) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  double *aw = mask[1] ? acc : NULL, *ab = mask[2] ? acc + (mask[1] ? M : 0) : NULL;
  void *dx = mask[0] ? core_data(o[0]) : NULL;
  const void *wd = w ? core_data(w) : NULL;
  int64_t chunk = M >= OP_PARALLEL_MIN ? 1 : OP_PARALLEL_MIN / (M ? M : 1);
  int64_t n_chunks = (rows + chunk - 1) / chunk;
  if (nacc) {
#pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t b = 0; b < nb; b++) {
      int64_t r0 = b * rb, r1 = r0 + rb < rows ? r0 + rb : rows;
      double *bw = aw ? aw + (size_t)b * nacc : NULL, *bb = ab ? ab + (size_t)b * nacc : NULL;
      if (f32)
        ln_bwd_f32(core_data(go), core_data(x), core_data(mean), core_data(rstd), wd, dx, bw, bb,
                   r0, r1, M);
      else
        ln_bwd_f64(core_data(go), core_data(x), core_data(mean), core_data(rstd), wd, dx, bw, bb,
                   r0, r1, M);
    }
    for (int64_t b = 1; b < nb; b++) /* block order: the same sum on any thread count */
      for (size_t j = 0; j < nacc; j++) acc[j] += acc[(size_t)b * nacc + j];
  } else if (dx) {
#pragma omp parallel for schedule(static) if (n_chunks > 1)
    for (int64_t c = 0; c < n_chunks; c++) {
      int64_t r0 = c * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
      if (f32)
        ln_bwd_f32(core_data(go), core_data(x), core_data(mean), core_data(rstd), wd, dx, NULL,
                   NULL, r0, r1, M);
      else
        ln_bwd_f64(core_data(go), core_data(x), core_data(mean), core_data(rstd), wd, dx, NULL,
                   NULL, r0, r1, M);
    }
  }
  for (int i = 1; i <= 2; i++) {
    if (!mask[i]) continue;
    const double *s = i == 1 ? aw : ab;
    if (f32)
      for (int64_t j = 0; j < M; j++) ((float *)core_data(o[i]))[j] = (float)s[j];
    else
      memcpy(core_data(o[i]), s, (size_t)M * sizeof *s);
  }
done:
  core_free(acc);
  for (int i = 0; i < 5; i++) kiln_release(own[i]);
  return rc;
}
