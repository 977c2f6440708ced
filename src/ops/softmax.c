/* src/ops/softmax.c: softmax and log_softmax along a dim, numerically
 * stable (the max along the dim is subtracted first), over any dim. */
#include <math.h>
#include <string.h>

#include "op.h"
#include "vmath.h"

#define SM_W 1024 /* columns per block when the dim is not the last */

static int sm_infer(const char *fn, const op_val *a, op_meta *o) {
  char d[160];
  kiln_dtype dt;
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor, got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (a[1].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: dim must be an int, got %s", fn,
                      op_val_desc(&a[1], d, sizeof d));
  if (core_wrap_dim(fn, a[1].i, a[0].t->ndim) < 0) return -1;
  if (a[2].tag == OP_VAL_INT) {
    if (op_dtype_from_code(a[2].i, &dt) < 0) return -1;
    if (!core_dtype_is_floating(dt))
      return core_error(KILN_ERR_INVALID, "%s: dtype must be floating point, got %s", fn,
                        kiln_dtype_name(dt));
  } else if (a[2].tag != OP_VAL_NONE) {
    return core_error(KILN_ERR_INVALID, "%s: dtype must be a ScalarType code or None, got %s",
                      fn, op_val_desc(&a[2], d, sizeof d));
  } else if (!core_dtype_is_floating(a[0].t->dtype)) {
    return core_error(KILN_ERR_INVALID,
                      "%s: expected a floating-point tensor (or a dtype argument), got %s", fn,
                      core_tensor_desc(a[0].t, d, sizeof d));
  } else {
    dt = a[0].t->dtype;
  }
  op_meta_of(a[0].t, &o[0]);
  o[0].dtype = dt;
  return 1;
}

/* Row kernels (the dim is the last: contiguous rows of n) and column-block
 * kernels (w neighbouring columns of stride `inner`, the dim has stride
 * inner), compiled per CPU level (Note [CPU levels]: the vector sums
 * group their terms by the level's width, so the levels' results may
 * differ in the last bit). Sums of exponentials accumulate in double. NaN
 * anywhere in a row gives a NaN row, as in PyTorch. */
#define DEF_SM(SUF, T, EXP)                                                       \
  CORE_CLONES(row_##SUF, (const T *x, T *y, int64_t n, bool lg), (x, y, n, lg)) { \
    T mx = x[0];                                                                  \
    int nan = 0;                                                                  \
    _Pragma("omp simd reduction(max : mx) reduction(| : nan)")                    \
    for (int64_t j = 0; j < n; j++) {                                             \
      mx = x[j] > mx ? x[j] : mx;                                                 \
      nan |= isnan(x[j]);                                                         \
    }                                                                             \
    if (nan) mx = NAN;                                                            \
    double s = 0;                                                                 \
    if (lg) {                                                                     \
      _Pragma("omp simd reduction(+ : s)")                                        \
      for (int64_t j = 0; j < n; j++) s += EXP(x[j] - mx);                        \
      T ls = (T)log(s); /* (x - max) - log(s): exact first step */               \
      for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mx) - ls;                    \
    } else {                                                                      \
      _Pragma("omp simd reduction(+ : s)")                                        \
      for (int64_t j = 0; j < n; j++) {                                           \
        T e = EXP(x[j] - mx);                                                     \
        y[j] = e;                                                                 \
        s += e;                                                                   \
      }                                                                           \
      T inv = (T)(1.0 / s);                                                       \
      for (int64_t j = 0; j < n; j++) y[j] *= inv;                                \
    }                                                                             \
  }                                                                               \
  CORE_CLONES(cols_##SUF, (const T *x, T *y, int64_t n, int64_t inner, int64_t w, \
                           bool lg), (x, y, n, inner, w, lg)) {                   \
    T mx[SM_W];                                                                   \
    double s[SM_W];                                                               \
    for (int64_t k = 0; k < w; k++) mx[k] = x[k], s[k] = 0;                       \
    for (int64_t j = 1; j < n; j++) {                                             \
      const T *xj = x + j * inner;                                                \
      _Pragma("omp simd")                                                         \
      for (int64_t k = 0; k < w; k++) {                                           \
        T v = xj[k];                                                              \
        mx[k] = ((v > mx[k]) | (v != v)) ? v : mx[k];                               \
      }                                                                           \
    }                                                                             \
    for (int64_t j = 0; j < n; j++) {                                             \
      const T *xj = x + j * inner;                                                \
      T *yj = y + j * inner;                                                      \
      if (lg) {                                                                   \
        _Pragma("omp simd")                                                       \
        for (int64_t k = 0; k < w; k++) s[k] += EXP(xj[k] - mx[k]);               \
      } else {                                                                    \
        _Pragma("omp simd")                                                       \
        for (int64_t k = 0; k < w; k++) {                                         \
          T e = EXP(xj[k] - mx[k]);                                               \
          yj[k] = e;                                                              \
          s[k] += e;                                                              \
        }                                                                         \
      }                                                                           \
    }                                                                             \
    T f[SM_W];                                                                    \
    for (int64_t k = 0; k < w; k++) f[k] = (T)(lg ? log(s[k]) : 1.0 / s[k]);      \
    for (int64_t j = 0; j < n; j++) {                                             \
      const T *xj = x + j * inner;                                                \
      T *yj = y + j * inner;                                                      \
      if (lg) {                                                                   \
        _Pragma("omp simd")                                                       \
        for (int64_t k = 0; k < w; k++) yj[k] = (xj[k] - mx[k]) - f[k];           \
      } else {                                                                    \
        _Pragma("omp simd")                                                       \
        for (int64_t k = 0; k < w; k++) yj[k] *= f[k];                            \
      }                                                                           \
    }                                                                             \
  }

DEF_SM(f32, float, op_expf)
DEF_SM(f64, double, exp)

/* Note [Short rows]: a classifier's log_softmax runs over rows of ~10: the
 * row kernel's vector loops (max, exp-sum, write) are mostly set-up and
 * lane reductions at that length, about 230 cycles a row. For float32 rows
 * of at most SHORT_N, a chunk of rows is done in three flat passes: row
 * maxima and x - max (scalar, short), one vectorized exp over the whole
 * chunk, then per-row double sums and the result. Same formulas as
 * row_f32 (the sums may round differently in their last bits). */
#define SHORT_N 32
#define SHORT_CHUNK 4096

CORE_CLONES(short_rows_f32, (const float *x, float *y, int64_t rows, int64_t n, bool lg),
            (x, y, rows, n, lg)) {
  float e[SHORT_CHUNK], mx[SHORT_CHUNK];
  int64_t per = SHORT_CHUNK / n;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    int64_t nr = rows - r0 < per ? rows - r0 : per, m = nr * n;
    const float *xs = x + r0 * n;
    float *ys = y + r0 * n;
    for (int64_t r = 0; r < nr; r++) {
      const float *xr = xs + r * n;
      float v = xr[0];
      int nan = 0;
      for (int64_t j = 0; j < n; j++) {
        v = xr[j] > v ? xr[j] : v;
        nan |= isnan(xr[j]);
      }
      mx[r] = nan ? NAN : v;
      for (int64_t j = 0; j < n; j++) e[r * n + j] = xr[j] - mx[r];
    }
    if (lg) memcpy(ys, e, (size_t)m * sizeof *e); /* x - max, kept for the result */
    for (int64_t k = 0; k < m; k++) e[k] = op_expf(e[k]);
    for (int64_t r = 0; r < nr; r++) {
      double sum = 0;
      for (int64_t j = 0; j < n; j++) sum += e[r * n + j];
      float *yr = ys + r * n;
      if (lg) {
        float ls = (float)log(sum);
        for (int64_t j = 0; j < n; j++) yr[j] -= ls;
      } else {
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < n; j++) yr[j] = e[r * n + j] * inv;
      }
    }
  }
}

static int sm_cpu(const op_val *a, kiln_tensor *out, bool lg) {
  const kiln_tensor *x = a[0].t;
  kiln_tensor *tmp = NULL;
  int dim = core_wrap_dim("", a[1].i, x->ndim);
  if (x->dtype != out->dtype || !core_is_contiguous(x)) {
    /* one contiguous copy in the compute dtype keeps the kernels simple */
    tmp = core_tensor_new(x->ndim, x->shape, out->dtype);
    if (!tmp) return KILN_ERR_NOMEM;
    op_copy_into(tmp, x);
    x = tmp;
  }
  int64_t outer = 1, n = x->ndim ? x->shape[dim] : 1, inner = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (d < dim) outer *= x->shape[d];
    if (d > dim) inner *= x->shape[d];
  }
  const char *xp = core_data(x);
  char *yp = core_data(out);
  int64_t es = (int64_t)kiln_dtype_size(out->dtype), total = outer * n * inner;
  bool f32 = out->dtype == KILN_DTYPE_F32;
  if (total == 0) goto done;
  if (inner == 1 && f32 && n <= SHORT_N && total < OP_PARALLEL_MIN) {
    short_rows_f32((const float *)xp, (float *)yp, outer, n, lg);
  } else if (inner == 1) {
#pragma omp parallel for schedule(static) if (total >= OP_PARALLEL_MIN)
    for (int64_t r = 0; r < outer; r++) {
      int64_t off = r * n * es;
      if (f32) row_f32((const float *)(xp + off), (float *)(yp + off), n, lg);
      else row_f64((const double *)(xp + off), (double *)(yp + off), n, lg);
    }
  } else {
    int64_t nb = (inner + SM_W - 1) / SM_W;
#pragma omp parallel for schedule(static) if (total >= OP_PARALLEL_MIN)
    for (int64_t it = 0; it < outer * nb; it++) {
      int64_t r = it / nb, k0 = it % nb * SM_W, w = inner - k0 < SM_W ? inner - k0 : SM_W;
      int64_t off = (r * n * inner + k0) * es;
      if (f32) cols_f32((const float *)(xp + off), (float *)(yp + off), n, inner, w, lg);
      else cols_f64((const double *)(xp + off), (double *)(yp + off), n, inner, w, lg);
    }
  }
done:
  kiln_release(tmp);
  return 0;
}

/* The gradient in the input's dtype (a dtype argument may have changed it). */
static kiln_tensor *in_dtype(kiln_tensor *r, const op_grad_ctx *g) {
  kiln_dtype dt = g->args[0].t->dtype;
  return r && r->dtype != dt ? kiln_to_dtype(r, dt) : r;
}

int op_softmax_infer(const op_val *a, int n, op_meta *o, int m) {
  return sm_infer("aten::softmax", a, o);
}
int op_softmax_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return sm_cpu(a, o[0], false);
}
/* dx = y * (g - sum(g * y, dim)): one kernel, _softmax_backward_data
 * (softmax_backward.c), when g has y's dtype and that is one the kernel
 * computes in (a Half or BFloat16 softmax takes the public ops, which
 * widen: Note [Widening] in widen.c) */
int op_softmax_grad(op_grad_ctx *g) {
  kiln_tensor *y = g->outs[0], *go = g->grads[0];
  if (!g->needs[0] || !go) return 0;
  int64_t dim = g->args[1].i;
  if (go->dtype == y->dtype && !core_dtype_is_extended(y->dtype)) {
    op_val a[4] = {OPV_T(go), OPV_T(y), OPV_I(dim), OPV_I(op_dtype_code(g->args[0].t->dtype))};
    return op_grad_put(g, 0, op_call1(KILN_OP_SOFTMAX_BACKWARD_DATA, a, 4));
  }
  kiln_tensor *s = kiln_sum(kiln_mul(go, y), &dim, 1, true);
  g->grad_in[0] = in_dtype(kiln_mul(y, kiln_sub(go, s)), g);
  return g->grad_in[0] ? 0 : -1;
}

int op_log_softmax_infer(const op_val *a, int n, op_meta *o, int m) {
  return sm_infer("aten::log_softmax", a, o);
}
int op_log_softmax_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return sm_cpu(a, o[0], true);
}
/* dx = g - exp(y) * sum(g, dim) */
int op_log_softmax_grad(op_grad_ctx *g) {
  kiln_tensor *y = g->outs[0], *go = g->grads[0];
  if (!g->needs[0] || !go) return 0;
  int64_t dim = g->args[1].i;
  kiln_tensor *s = kiln_sum(go, &dim, 1, true);
  g->grad_in[0] = in_dtype(kiln_sub(go, kiln_mul(kiln_exp(y), s)), g);
  return g->grad_in[0] ? 0 : -1;
}

/* ---- public API ------------------------------------------------------------------ */

kiln_tensor *kiln_softmax(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_SOFTMAX, (op_val[]){OPV_T(t), OPV_I(dim), OPV_NONE}, 3);
}
kiln_tensor *kiln_log_softmax(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_LOG_SOFTMAX, (op_val[]){OPV_T(t), OPV_I(dim), OPV_NONE}, 3);
}
