/* src/ops/reduce.c: reductions over dim lists (sum, mean, amax, amin, var,
 * sum_to_size) and over one dim (max.dim, argmax), all run by one strided
 * reduction driver.
 *
 * Note [Reduction driver]: the input's dims are tagged kept/reduced, each
 * with its input stride and its output stride (0 when reduced). Size-1
 * dims are dropped; when the order of the reduced elements does not matter
 * (no indices wanted) the dims are sorted by input stride, largest first,
 * so the innermost loop walks memory in order whatever the input's layout
 * (transposed, expanded); then adjacent dims of the same kind that are
 * contiguous with each other are merged. Two loop shapes remain:
 *  - inner: the innermost dim is reduced (row sums, full reductions). Each
 *    output element sums runs of the innermost dim (stride 1: an 8-way
 *    unrolled loop the compiler vectorizes).
 *  - outer: the innermost dim is kept (column sums: every bias gradient).
 *    A block of up to RED_W neighbouring outputs is accumulated together,
 *    one reduced position at a time, so the loads stream through memory.
 * float32 sums accumulate in double (no loss over millions of terms);
 * int64 in int64. Work items (outputs, or output blocks) run in parallel;
 * when there are too few of them for the threads (a full sum, a column sum
 * of a narrow matrix) the reduced range is split as well and the partial
 * results are combined in order, so the result does not depend on the
 * thread count. Indices (max.dim, argmax) are the first among ties; NaN
 * wins, as in PyTorch. */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "op.h"

enum { RK_SUM, RK_SQDEV, RK_MAX, RK_MIN };
#define RED_W 1024 /* outputs per block in the outer loop shape */

typedef union r_val {
  double f;
  int64_t i;
} r_val;

typedef struct red_plan {
  int kind;
  bool want_idx;
  kiln_dtype dt;        /* F32, F64 or I64 */
  const char *base;     /* input element [0, ..., 0] */
  int nd;
  int64_t size[KILN_MAX_DIMS], is[KILN_MAX_DIMS], os[KILN_MAX_DIMS];
  bool red[KILN_MAX_DIMS];
  int nk, nr;           /* kept / reduced dims other than the innermost */
  int kd[KILN_MAX_DIMS], rd[KILN_MAX_DIMS];
  bool inner;           /* innermost dim reduced */
  int64_t L, s, osl;    /* innermost dim: size, input stride, output stride */
  int64_t n_out, n_red; /* output elements; reduced elements per output */
  const double *center; /* RK_SQDEV: the mean, per output offset */
} red_plan;

static void plan_build(red_plan *p, const kiln_tensor *x, uint32_t mask) {
  int64_t ks[KILN_MAX_DIMS], kstr[KILN_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) ks[d] = (mask >> d & 1) ? 1 : x->shape[d];
  core_contiguous_strides(x->ndim, ks, kstr);
  p->base = core_data(x);
  p->dt = x->dtype;
  p->nd = 0;
  p->n_out = p->n_red = 1;
  for (int d = 0; d < x->ndim; d++) {
    bool r = mask >> d & 1;
    int64_t sz = x->shape[d];
    if (r) p->n_red *= sz;
    else p->n_out *= sz;
    if (sz == 1) continue;
    p->size[p->nd] = sz;
    p->is[p->nd] = x->strides[d];
    p->os[p->nd] = r ? 0 : kstr[d];
    p->red[p->nd++] = r;
  }
  if (!p->want_idx) /* stable insertion sort, largest input stride first */
    for (int i = 1; i < p->nd; i++)
      for (int j = i; j > 0 && p->is[j - 1] < p->is[j]; j--) {
        int64_t t0 = p->size[j], t1 = p->is[j], t2 = p->os[j];
        bool t3 = p->red[j];
        p->size[j] = p->size[j - 1], p->is[j] = p->is[j - 1];
        p->os[j] = p->os[j - 1], p->red[j] = p->red[j - 1];
        p->size[j - 1] = t0, p->is[j - 1] = t1, p->os[j - 1] = t2, p->red[j - 1] = t3;
      }
  int m = 0;
  for (int d = 0; d < p->nd; d++) {
    if (m > 0 && p->red[m - 1] == p->red[d] && p->is[m - 1] == p->is[d] * p->size[d] &&
        p->os[m - 1] == p->os[d] * p->size[d]) {
      p->size[m - 1] *= p->size[d];
      p->is[m - 1] = p->is[d];
      p->os[m - 1] = p->os[d];
      continue;
    }
    p->size[m] = p->size[d], p->is[m] = p->is[d], p->os[m] = p->os[d];
    p->red[m++] = p->red[d];
  }
  p->nd = m;
  if (p->nd == 0) { /* one element */
    p->size[0] = 1, p->is[0] = 0, p->os[0] = 0, p->red[0] = true;
    p->nd = 1;
  }
  int last = p->nd - 1;
  p->inner = p->red[last];
  p->L = p->size[last], p->s = p->is[last], p->osl = p->os[last];
  p->nk = p->nr = 0;
  for (int d = 0; d < last; d++) {
    if (p->red[d]) p->rd[p->nr++] = d;
    else p->kd[p->nk++] = d;
  }
}

/* Offsets of linear index lin over dims (C order, last fastest). */
static inline void decode(const red_plan *p, const int *dims, int n, int64_t lin,
                          int64_t *ioff, int64_t *ooff) {
  for (int k = n - 1; k >= 0; k--) {
    int d = dims[k];
    int64_t q = lin % p->size[d];
    lin /= p->size[d];
    *ioff += q * p->is[d];
    if (ooff) *ooff += q * p->os[d];
  }
}

#define RED_ISNAN_F(v) isnan(v)
#define RED_ISNAN_I(v) 0

/* Kernels for input type T, accumulating in A, result in r_val field F;
 * NANV is T's NaN (0 for integers, never used). The stride-1 loops carry
 * `omp simd` so that their reductions vectorize (they may reassociate:
 * partial sums per lane, combined at the end). max/min loops track NaN
 * separately so that they vectorize; arg-max is two passes: the max (fast),
 * then the first position holding it. The item kernels are compiled per CPU
 * level (Note [CPU levels]), the run helpers inlined into each copy; the
 * lane count of the vector sums follows the level's width, so float sums
 * may differ between levels in the last bits. */
#define RED_INLINE static inline __attribute__((always_inline))
#define DEF_RED(SUF, T, A, F, ISNAN, NANV)                                        \
  RED_INLINE A run_sum_##SUF(const T *x, int64_t n, int64_t s) {                  \
    A acc = 0;                                                                    \
    if (s == 1) {                                                                 \
      _Pragma("omp simd reduction(+ : acc)")                                      \
      for (int64_t j = 0; j < n; j++) acc += (A)x[j];                             \
    } else {                                                                      \
      for (int64_t j = 0; j < n; j++) acc += (A)x[j * s];                         \
    }                                                                             \
    return acc;                                                                   \
  }                                                                               \
  RED_INLINE double run_sq_##SUF(const T *x, int64_t n, int64_t s, double m) {    \
    double acc = 0;                                                               \
    if (s == 1) {                                                                 \
      _Pragma("omp simd reduction(+ : acc)")                                      \
      for (int64_t j = 0; j < n; j++) {                                           \
        double d = (double)x[j] - m;                                              \
        acc += d * d;                                                             \
      }                                                                           \
    } else {                                                                      \
      for (int64_t j = 0; j < n; j++) {                                           \
        double d = (double)x[j * s] - m;                                          \
        acc += d * d;                                                             \
      }                                                                           \
    }                                                                             \
    return acc;                                                                   \
  }                                                                               \
  /* The max (mx) or min of n >= 1 elements; NaN if any is NaN. */               \
  RED_INLINE T run_best_##SUF(const T *x, int64_t n, int64_t s, bool mx) {        \
    T b = x[0];                                                                   \
    int nan = 0;                                                                  \
    if (s == 1 && mx) {                                                           \
      _Pragma("omp simd reduction(max : b) reduction(| : nan)")                   \
      for (int64_t j = 0; j < n; j++) {                                           \
        T v = x[j];                                                               \
        b = v > b ? v : b;                                                        \
        nan |= ISNAN(v);                                                          \
      }                                                                           \
    } else if (s == 1) {                                                          \
      _Pragma("omp simd reduction(min : b) reduction(| : nan)")                   \
      for (int64_t j = 0; j < n; j++) {                                           \
        T v = x[j];                                                               \
        b = v < b ? v : b;                                                        \
        nan |= ISNAN(v);                                                          \
      }                                                                           \
    } else {                                                                      \
      for (int64_t j = 0; j < n; j++) {                                           \
        T v = x[j * s];                                                           \
        b = (mx ? v > b : v < b) ? v : b;                                         \
        nan |= ISNAN(v);                                                          \
      }                                                                           \
    }                                                                             \
    return nan ? NANV : b;                                                        \
  }                                                                               \
  /* Index of the first max (mx) or min of n >= 1 elements (the first NaN if   \
   * any); its value in *best. */                                                \
  RED_INLINE int64_t run_arg_##SUF(const T *x, int64_t n, int64_t s, bool mx, T *best) { \
    T b = run_best_##SUF(x, n, s, mx);                                            \
    int64_t j = 0;                                                                \
    if (ISNAN(b))                                                                 \
      while (j < n - 1 && !ISNAN(x[j * s])) j++;                                  \
    else                                                                          \
      while (j < n - 1 && x[j * s] != b) j++;                                     \
    *best = b;                                                                    \
    return j;                                                                     \
  }                                                                               \
  /* One output element o, reduced linear positions [q0, q1). */                 \
  CORE_CLONES(inner_item_##SUF, (const red_plan *p, int64_t o, int64_t q0, int64_t q1, \
                                 r_val *pv, int64_t *pi), (p, o, q0, q1, pv, pi)) { \
    int64_t ioff = 0, ooff = 0;                                                   \
    decode(p, p->kd, p->nk, o, &ioff, &ooff);                                     \
    const T *x = (const T *)p->base + ioff;                                       \
    double m = p->center ? p->center[ooff] : 0.0, dacc = 0;                       \
    bool mx = p->kind == RK_MAX;                                                  \
    A acc = 0;                                                                    \
    T best = 0;                                                                   \
    int64_t bi = -1;                                                              \
    for (int64_t q = q0; q < q1;) {                                               \
      int64_t r = q / p->L, j0 = q - r * p->L, n = p->L - j0, roff = 0;           \
      if (n > q1 - q) n = q1 - q;                                                 \
      decode(p, p->rd, p->nr, r, &roff, NULL);                                    \
      const T *px = x + roff + j0 * p->s;                                         \
      if (p->kind == RK_SUM) {                                                    \
        acc += run_sum_##SUF(px, n, p->s);                                        \
      } else if (p->kind == RK_SQDEV) {                                           \
        dacc += run_sq_##SUF(px, n, p->s, m);                                     \
      } else if (!pi) {                                                           \
        T b = run_best_##SUF(px, n, p->s, mx);                                    \
        if (bi < 0 || (mx ? b > best : b < best) || (ISNAN(b) && !ISNAN(best)))   \
          best = b, bi = 0;                                                       \
      } else {                                                                    \
        T b;                                                                      \
        int64_t k = run_arg_##SUF(px, n, p->s, mx, &b);                           \
        if (bi < 0 || (mx ? b > best : b < best) || (ISNAN(b) && !ISNAN(best)))   \
          best = b, bi = q + k;                                                   \
      }                                                                           \
      q += n;                                                                     \
    }                                                                             \
    if (p->kind == RK_SUM) pv[ooff].F = acc;                                      \
    else if (p->kind == RK_SQDEV) pv[ooff].f = dacc;                              \
    else pv[ooff].F = best;                                                       \
    if (pi) pi[ooff] = bi;                                                        \
  }                                                                               \
  /* Outputs j0..j0+w-1 of the innermost dim in group g, reduced [r0, r1). */    \
  CORE_CLONES(outer_item_##SUF, (const red_plan *p, int64_t g, int64_t j0, int64_t w, \
                                 int64_t r0, int64_t r1, r_val *pv, int64_t *pi),  \
              (p, g, j0, w, r0, r1, pv, pi)) {                                    \
    int64_t ioff = 0, ooff = 0, s = p->s;                                         \
    decode(p, p->kd, p->nk, g, &ioff, &ooff);                                     \
    const T *x = (const T *)p->base + ioff + j0 * s;                              \
    A acc[RED_W];                                                                 \
    double m[RED_W];                                                              \
    T best[RED_W];                                                                \
    int64_t bi[RED_W];                                                            \
    bool mx = p->kind == RK_MAX;                                                  \
    ooff += j0 * p->osl;                                                          \
    for (int64_t j = 0; j < w; j++) {                                             \
      acc[j] = 0;                                                                 \
      m[j] = p->center ? p->center[ooff + j * p->osl] : 0.0;                      \
    }                                                                             \
    if (p->kind == RK_MAX || p->kind == RK_MIN) {                                 \
      int64_t roff = 0;                                                           \
      decode(p, p->rd, p->nr, r0, &roff, NULL);                                   \
      for (int64_t j = 0; j < w; j++) best[j] = x[roff + j * s], bi[j] = r0;      \
    }                                                                             \
    int64_t r = r0;                                                               \
    if (p->kind == RK_SUM && s == 1) /* four rows per pass over acc */            \
      for (; r + 4 <= r1; r += 4) {                                               \
        int64_t o4[4] = {0, 0, 0, 0};                                             \
        for (int k = 0; k < 4; k++) decode(p, p->rd, p->nr, r + k, &o4[k], NULL); \
        const T *p0 = x + o4[0], *p1 = x + o4[1], *p2 = x + o4[2], *p3 = x + o4[3]; \
        _Pragma("omp simd")                                                       \
        for (int64_t j = 0; j < w; j++)                                           \
          acc[j] += ((A)p0[j] + (A)p1[j]) + ((A)p2[j] + (A)p3[j]);                \
      }                                                                           \
    for (; r < r1; r++) {                                                         \
      int64_t roff = 0;                                                           \
      decode(p, p->rd, p->nr, r, &roff, NULL);                                    \
      const T *px = x + roff;                                                     \
      if (p->kind == RK_SUM && s == 1) {                                          \
        _Pragma("omp simd")                                                       \
        for (int64_t j = 0; j < w; j++) acc[j] += (A)px[j];                       \
      } else if (p->kind == RK_SUM) {                                             \
        for (int64_t j = 0; j < w; j++) acc[j] += (A)px[j * s];                   \
      } else if (p->kind == RK_SQDEV) {                                           \
        for (int64_t j = 0; j < w; j++) {                                         \
          double d = (double)px[j * s] - m[j];                                    \
          acc[j] += (A)(d * d);                                                   \
        }                                                                         \
      } else if (mx) {                                                            \
        _Pragma("omp simd")                                                       \
        for (int64_t j = 0; j < w; j++) {                                         \
          T v = px[j * s];                                                        \
          bool t = v > best[j] || (ISNAN(v) && !ISNAN(best[j]));                  \
          best[j] = t ? v : best[j];                                              \
          bi[j] = t ? r : bi[j];                                                  \
        }                                                                         \
      } else {                                                                    \
        _Pragma("omp simd")                                                       \
        for (int64_t j = 0; j < w; j++) {                                         \
          T v = px[j * s];                                                        \
          bool t = v < best[j] || (ISNAN(v) && !ISNAN(best[j]));                  \
          best[j] = t ? v : best[j];                                              \
          bi[j] = t ? r : bi[j];                                                  \
        }                                                                         \
      }                                                                           \
    }                                                                             \
    for (int64_t j = 0; j < w; j++) {                                             \
      r_val *v = &pv[ooff + j * p->osl];                                          \
      if (p->kind == RK_SUM) v->F = acc[j];                                       \
      else if (p->kind == RK_SQDEV) v->f = (double)acc[j];                        \
      else v->F = best[j];                                                        \
      if (pi) pi[ooff + j * p->osl] = bi[j];                                      \
    }                                                                             \
  }

DEF_RED(f32, float, double, f, RED_ISNAN_F, NAN)
DEF_RED(f64, double, double, f, RED_ISNAN_F, NAN)
/* int64 sums accumulate in uint64: they wrap as PyTorch's do, without C's
 * undefined behaviour on signed overflow */
DEF_RED(i64, int64_t, uint64_t, i, RED_ISNAN_I, 0)

static void run_item(const red_plan *p, int64_t item, int64_t r0, int64_t r1, r_val *pv,
                     int64_t *pi) {
  if (p->inner) {
    switch (p->dt) {
    case KILN_DTYPE_F32: inner_item_f32(p, item, r0, r1, pv, pi); break;
    case KILN_DTYPE_F64: inner_item_f64(p, item, r0, r1, pv, pi); break;
    default: inner_item_i64(p, item, r0, r1, pv, pi); break;
    }
    return;
  }
  int64_t nb = (p->L + RED_W - 1) / RED_W, g = item / nb, j0 = item % nb * RED_W;
  int64_t w = p->L - j0 < RED_W ? p->L - j0 : RED_W;
  switch (p->dt) {
  case KILN_DTYPE_F32: outer_item_f32(p, g, j0, w, r0, r1, pv, pi); break;
  case KILN_DTYPE_F64: outer_item_f64(p, g, j0, w, r0, r1, pv, pi); break;
  default: outer_item_i64(p, g, j0, w, r0, r1, pv, pi); break;
  }
}

/* Folds partial b (later in reduction order) into a. */
static void combine(const red_plan *p, r_val *a, int64_t *ai, r_val b, int64_t bidx) {
  bool fl = p->dt != KILN_DTYPE_I64;
  if (p->kind == RK_SUM || p->kind == RK_SQDEV) {
    if (fl || p->kind == RK_SQDEV) a->f += b.f;
    else a->i += b.i;
    return;
  }
  bool mx = p->kind == RK_MAX, take;
  if (fl)
    take = (mx ? b.f > a->f : b.f < a->f) || (isnan(b.f) && !isnan(a->f));
  else
    take = mx ? b.i > a->i : b.i < a->i;
  if (take) {
    *a = b;
    if (ai) *ai = bidx;
  }
}

static void store_val(kiln_tensor *out, int64_t o, bool is_int, r_val v) {
  char *d = core_data(out);
  switch (out->dtype) {
  case KILN_DTYPE_F32: ((float *)d)[o] = is_int ? (float)v.i : (float)v.f; break;
  case KILN_DTYPE_F64: ((double *)d)[o] = is_int ? (double)v.i : v.f; break;
  case KILN_DTYPE_I64: ((int64_t *)d)[o] = is_int ? v.i : core_f2i(v.f); break;
  case KILN_DTYPE_BOOL: ((bool *)d)[o] = is_int ? v.i != 0 : v.f != 0; break;
  default: { /* the extended dtypes: rounded or wrapped from the int64/double result */
    char *e = d + o * (int64_t)kiln_dtype_size(out->dtype);
    if (is_int) core_store_int(e, out->dtype, v.i);
    else core_store_double(e, out->dtype, v.f);
    break;
  }
  }
}

/* Reduces x (F32, F64 or I64, any strides) over the dims in mask into the
 * contiguous out (values, any dtype, may be NULL) and idx (int64 indices:
 * the position along the reduced dims in C order, may be NULL), whose
 * element order is that of x's shape with the reduced dims removed. Float
 * sums are divided by divisor (1 for sum, n for mean, n - correction for
 * var). center: the mean per output element (RK_SQDEV). Returns 0 or
 * KILN_ERR_NOMEM. */
static int reduce_into(const kiln_tensor *x, uint32_t mask, int kind, kiln_tensor *out,
                       kiln_tensor *idx, double divisor, const double *center) {
  red_plan p;
  memset(&p, 0, sizeof p);
  p.kind = kind;
  p.want_idx = idx != NULL;
  p.center = center;
  plan_build(&p, x, mask);
  int64_t n_out = p.n_out;
  bool is_int = x->dtype == KILN_DTYPE_I64 && kind != RK_SQDEV;
  if (n_out == 0) return 0;
  if (p.n_red == 0) { /* empty sums; max/min were rejected by infer */
    r_val z = {.f = kind == RK_SQDEV ? NAN : 0.0 / divisor};
    if (is_int) z.i = 0;
    for (int64_t o = 0; o < n_out; o++) {
      if (out) store_val(out, o, is_int, z);
      if (idx) ((int64_t *)core_data(idx))[o] = 0;
    }
    return 0;
  }
  int64_t n_items = p.inner ? n_out : n_out / p.L * ((p.L + RED_W - 1) / RED_W);
  int64_t range = p.n_red, work = n_out * p.n_red, nsplit = 1;
  int nt = 1;
#ifdef _OPENMP
  nt = omp_get_max_threads();
#endif
  bool par = work >= OP_PARALLEL_MIN && nt > 1;
  if (par && n_items < 2 * nt) {
    int64_t per = p.inner ? 4096 : 16;
    nsplit = (4 * nt + n_items - 1) / n_items;
    if (nsplit > range / per) nsplit = range / per;
    if (nsplit < 1) nsplit = 1;
  }
  r_val *pv = core_alloc((size_t)(nsplit * n_out) * sizeof *pv);
  int64_t *pi = idx ? core_alloc((size_t)(nsplit * n_out) * sizeof *pi) : NULL;
  if (!pv || (idx && !pi)) {
    core_free(pv);
    core_free(pi);
    return KILN_ERR_NOMEM;
  }
  int64_t total = n_items * nsplit;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t t = 0; t < total; t++) {
    int64_t item = t / nsplit, k = t % nsplit;
    run_item(&p, item, range * k / nsplit, range * (k + 1) / nsplit, pv + k * n_out,
             pi ? pi + k * n_out : NULL);
  }
#pragma omp parallel for schedule(static) if (par)
  for (int64_t o = 0; o < n_out; o++) {
    for (int64_t k = 1; k < nsplit; k++)
      combine(&p, &pv[o], pi ? &pi[o] : NULL, pv[k * n_out + o], pi ? pi[k * n_out + o] : 0);
    r_val v = pv[o];
    if (!is_int && (kind == RK_SUM || kind == RK_SQDEV)) v.f /= divisor;
    if (out) store_val(out, o, is_int, v);
    if (idx) ((int64_t *)core_data(idx))[o] = pi[o];
  }
  core_free(pv);
  core_free(pi);
  return 0;
}

/* ---- argument parsing and inference ---------------------------------------- */

/* Parses a dim list (None or [] = all dims; a single int is one dim) into
 * a bit mask. Errors on out-of-range or repeated dims. */
static int parse_dims(const char *fn, const op_val *v, int ndim, uint32_t *mask) {
  char d[64];
  *mask = 0;
  if (v->tag == OP_VAL_NONE || (v->tag == OP_VAL_INTS && v->ints.n == 0)) {
    *mask = ndim ? (uint32_t)((1u << ndim) - 1) : 0;
    return 0;
  }
  if (v->tag != OP_VAL_INTS && v->tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: dim must be an int list or None, got %s", fn,
                      op_val_desc(v, d, sizeof d));
  int n = v->tag == OP_VAL_INT ? 1 : v->ints.n;
  for (int k = 0; k < n; k++) {
    int w = core_wrap_dim(fn, v->tag == OP_VAL_INT ? v->i : v->ints.v[k], ndim);
    if (w < 0) return -1;
    if (*mask >> w & 1)
      return core_error(KILN_ERR_INVALID, "%s: dim %d appears multiple times in the list of dims",
                        fn, w);
    if (ndim > 0) *mask |= 1u << w;
  }
  return 0;
}

static bool flag_arg(const op_val *v) { return op_val_is_num(v) && op_val_num(v) != 0; }

static void reduced_meta(const kiln_tensor *x, uint32_t mask, bool keepdim, kiln_dtype dt,
                         op_meta *m) {
  m->dtype = dt;
  m->ndim = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (!(mask >> d & 1)) m->shape[m->ndim++] = x->shape[d];
    else if (keepdim) m->shape[m->ndim++] = 1;
  }
}

static int64_t reduced_count(const kiln_tensor *x, uint32_t mask) {
  int64_t n = 1;
  for (int d = 0; d < x->ndim; d++)
    if (mask >> d & 1) n *= x->shape[d];
  return n;
}

/* Errors when a max/min reduces over an empty dim. */
static int check_nonempty(const char *fn, const kiln_tensor *x, uint32_t mask) {
  for (int d = 0; d < x->ndim; d++)
    if ((mask >> d & 1) && x->shape[d] == 0)
      return core_error(KILN_ERR_INVALID,
                        "%s: expected reduction dim %d to have non-zero size (input %s)", fn,
                        d, core_shape_str(x->ndim, x->shape, (char[160]){0}, 160));
  return 0;
}

/* The output dtype of sum/mean: the dtype argument (a ScalarType code) or
 * the input's (integers and bool sum to int64). */
static int sum_dtype(const char *fn, const kiln_tensor *x, const op_val *dt_arg, bool mean,
                     kiln_dtype *out) {
  char d[160];
  if (dt_arg->tag == OP_VAL_INT) {
    if (op_dtype_from_code(dt_arg->i, out) < 0) return -1;
    if (mean && !core_dtype_is_floating(*out))
      return core_error(KILN_ERR_INVALID,
                        "%s: could not infer output dtype: the dtype argument must be "
                        "floating point, got %s",
                        fn, kiln_dtype_name(*out));
    return 0;
  }
  if (dt_arg->tag != OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "%s: dtype must be a ScalarType code or None, got %s",
                      fn, op_val_desc(dt_arg, d, sizeof d));
  if (mean && !core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID,
                      "%s: could not infer output dtype: input must be floating point, got %s",
                      fn, core_tensor_desc(x, d, sizeof d));
  *out = core_dtype_is_floating(x->dtype) ? x->dtype : KILN_DTYPE_I64;
  return 0;
}

/* x itself, or (in *tmp, new reference) a contiguous copy in dtype dt. */
static const kiln_tensor *as_dtype(const kiln_tensor *x, kiln_dtype dt, kiln_tensor **tmp) {
  *tmp = NULL;
  if (x->dtype == dt) return x;
  *tmp = core_tensor_new(x->ndim, x->shape, dt);
  if (!*tmp) return NULL;
  op_copy_into(*tmp, x);
  return *tmp;
}

/* The dtype a reduction computes in: bool and the narrow integers become
 * int64, the half types float32 (core_dtype_compute). */
static kiln_dtype compute_dtype(kiln_dtype dt) {
  return dt == KILN_DTYPE_BOOL ? KILN_DTYPE_I64 : core_dtype_compute(dt);
}

/* Runs a reduction of kind over mask on x converted to dt. */
static int reduce_as(const kiln_tensor *x, kiln_dtype dt, uint32_t mask, int kind,
                     kiln_tensor *out, kiln_tensor *idx, double divisor) {
  kiln_tensor *tmp;
  const kiln_tensor *src = as_dtype(x, compute_dtype(dt), &tmp);
  if (!src) return KILN_ERR_NOMEM;
  int rc = reduce_into(src, mask, kind, out, idx, divisor, NULL);
  kiln_release(tmp);
  return rc;
}

/* ---- gradient helpers (public API only) -------------------------------------- */

/* The reduced dims of mask as a list (for kiln_sum etc.); returns the count. */
static int mask_dims(uint32_t mask, int ndim, int64_t *dims) {
  int n = 0;
  for (int d = 0; d < ndim; d++)
    if (mask >> d & 1) dims[n++] = d;
  return n;
}

/* g (the reduced shape) reshaped to keepdim form: reduced dims of size 1. */
static kiln_tensor *keep_shape(kiln_tensor *g, const kiln_tensor *x, uint32_t mask,
                               bool keepdim) {
  int64_t ks[KILN_MAX_DIMS];
  if (!g || keepdim) return g;
  for (int d = 0; d < x->ndim; d++) ks[d] = (mask >> d & 1) ? 1 : x->shape[d];
  return kiln_reshape(g, x->ndim, ks);
}

/* g broadcast back to x's shape (in x's dtype). */
static kiln_tensor *expand_back(kiln_tensor *g, const kiln_tensor *x, uint32_t mask,
                                bool keepdim) {
  g = keep_shape(g, x, mask, keepdim);
  if (g && g->dtype != x->dtype) g = kiln_to_dtype(g, x->dtype);
  return g ? kiln_expand(g, x->ndim, x->shape) : NULL;
}

/* ---- sum, mean ------------------------------------------------------------------ */

static int summean_infer(const char *fn, bool mean, const op_val *a, op_meta *o) {
  uint32_t mask;
  kiln_dtype dt;
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0 || parse_dims(fn, &a[1], a[0].t->ndim, &mask) < 0 ||
      sum_dtype(fn, a[0].t, &a[3], mean, &dt) < 0)
    return -1;
  reduced_meta(a[0].t, mask, flag_arg(&a[2]), dt, &o[0]);
  return 1;
}

static int summean_cpu(bool mean, const op_val *a, kiln_tensor **o) {
  uint32_t mask;
  parse_dims("", &a[1], a[0].t->ndim, &mask);
  /* with a dtype argument the input is converted first, as PyTorch does */
  kiln_dtype dt = a[3].tag == OP_VAL_INT ? o[0]->dtype : a[0].t->dtype;
  double n = mean ? (double)reduced_count(a[0].t, mask) : 1.0;
  return reduce_as(a[0].t, dt, mask, RK_SUM, o[0], NULL, n);
}

int op_sum_infer(const op_val *a, int n, op_meta *o, int m) {
  return summean_infer("aten::sum", false, a, o);
}
int op_sum_cpu(const op_val *a, int n, kiln_tensor **o, int m) { return summean_cpu(false, a, o); }
int op_sum_grad(op_grad_ctx *g) {
  uint32_t mask;
  const kiln_tensor *x = g->args[0].t;
  if (!g->needs[0] || !g->grads[0]) return 0;
  parse_dims("", &g->args[1], x->ndim, &mask);
  g->grad_in[0] = expand_back(g->grads[0], x, mask, flag_arg(&g->args[2]));
  return g->grad_in[0] ? 0 : -1;
}

int op_mean_infer(const op_val *a, int n, op_meta *o, int m) {
  return summean_infer("aten::mean", true, a, o);
}
int op_mean_cpu(const op_val *a, int n, kiln_tensor **o, int m) { return summean_cpu(true, a, o); }
int op_mean_grad(op_grad_ctx *g) {
  uint32_t mask;
  const kiln_tensor *x = g->args[0].t;
  if (!g->needs[0] || !g->grads[0]) return 0;
  parse_dims("", &g->args[1], x->ndim, &mask);
  kiln_tensor *s = kiln_div_scalar(g->grads[0], (double)reduced_count(x, mask));
  g->grad_in[0] = s ? expand_back(s, x, mask, flag_arg(&g->args[2])) : NULL;
  return g->grad_in[0] ? 0 : -1;
}

/* ---- sum_to_size ---------------------------------------------------------------- */

/* The dims of x summed to reach size: leading extra dims and dims where
 * size is 1. */
static int sum_to_mask(const kiln_tensor *x, const op_val *size, uint32_t *mask) {
  char a[160], b[160];
  int n = size->ints.n, lead = x->ndim - n;
  bool ok = lead >= 0;
  *mask = 0;
  for (int d = 0; ok && d < x->ndim; d++) {
    if (d < lead) {
      *mask |= 1u << d;
      continue;
    }
    int64_t want = size->ints.v[d - lead];
    if (want == x->shape[d]) continue;
    if (want == 1) *mask |= 1u << d;
    else ok = false;
  }
  if (!ok)
    return core_error(KILN_ERR_INVALID, "aten::sum_to_size: size %s is not expandable to size %s",
                      core_shape_str(n, size->ints.v, a, sizeof a),
                      core_shape_str(x->ndim, x->shape, b, sizeof b));
  return 0;
}

int op_sum_to_size_infer(const op_val *a, int n, op_meta *o, int m) {
  char d[64];
  uint32_t mask;
  if (op_arg_tensor("aten::sum_to_size", &a[0], NULL, NULL) < 0) return -1;
  if (a[1].tag != OP_VAL_INTS)
    return core_error(KILN_ERR_INVALID, "aten::sum_to_size: size must be an int list, got %s",
                      op_val_desc(&a[1], d, sizeof d));
  if (sum_to_mask(a[0].t, &a[1], &mask) < 0) return -1;
  o[0].dtype = core_dtype_is_floating(a[0].t->dtype) ? a[0].t->dtype : KILN_DTYPE_I64;
  o[0].ndim = a[1].ints.n;
  if (a[1].ints.n) memcpy(o[0].shape, a[1].ints.v, (size_t)a[1].ints.n * sizeof *o[0].shape);
  return 1;
}
int op_sum_to_size_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  uint32_t mask;
  sum_to_mask(a[0].t, &a[1], &mask);
  /* keepdim order = size's order (the dropped leading dims have size 1) */
  return reduce_as(a[0].t, a[0].t->dtype, mask, RK_SUM, o[0], NULL, 1.0);
}
int op_sum_to_size_grad(op_grad_ctx *g) {
  const kiln_tensor *x = g->args[0].t;
  if (!g->needs[0] || !g->grads[0]) return 0;
  g->grad_in[0] = kiln_expand(g->grads[0], x->ndim, x->shape);
  return g->grad_in[0] ? 0 : -1;
}

/* ---- amax, amin ---------------------------------------------------------------- */

static int aminmax_infer(const char *fn, const op_val *a, op_meta *o) {
  uint32_t mask;
  char d[64];
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0) return -1;
  if (a[1].tag != OP_VAL_INTS && a[1].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: dim must be an int list, got %s", fn,
                      op_val_desc(&a[1], d, sizeof d));
  if (parse_dims(fn, &a[1], a[0].t->ndim, &mask) < 0 || check_nonempty(fn, a[0].t, mask) < 0)
    return -1;
  reduced_meta(a[0].t, mask, flag_arg(&a[2]), a[0].t->dtype, &o[0]);
  return 1;
}

static int aminmax_cpu(int kind, const op_val *a, kiln_tensor **o) {
  uint32_t mask;
  parse_dims("", &a[1], a[0].t->ndim, &mask);
  return reduce_as(a[0].t, a[0].t->dtype, mask, kind, o[0], NULL, 1.0);
}

/* Ties share the gradient evenly: g / count at every position equal to the
 * result (mask and count are constants, so this is differentiable in g). */
static int aminmax_grad(op_grad_ctx *g) {
  uint32_t mask;
  int64_t dims[KILN_MAX_DIMS];
  kiln_tensor *x = g->args[0].t;
  if (!g->needs[0] || !g->grads[0]) return 0;
  parse_dims("", &g->args[1], x->ndim, &mask);
  bool keep = flag_arg(&g->args[2]);
  int nd = mask_dims(mask, x->ndim, dims);
  kiln_tensor *hit = kiln_eq(x, keep_shape(g->outs[0], x, mask, keep));
  kiln_tensor *count = kiln_sum(kiln_to_dtype(hit, x->dtype), dims, nd, true);
  kiln_tensor *share = kiln_div(keep_shape(g->grads[0], x, mask, keep), count);
  g->grad_in[0] = kiln_where(hit, share, kiln_zeros(0, NULL, x->dtype));
  return g->grad_in[0] ? 0 : -1;
}

int op_amax_infer(const op_val *a, int n, op_meta *o, int m) {
  return aminmax_infer("aten::amax", a, o);
}
int op_amax_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return aminmax_cpu(RK_MAX, a, o);
}
int op_amax_grad(op_grad_ctx *g) { return aminmax_grad(g); }
int op_amin_infer(const op_val *a, int n, op_meta *o, int m) {
  return aminmax_infer("aten::amin", a, o);
}
int op_amin_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return aminmax_cpu(RK_MIN, a, o);
}
int op_amin_grad(op_grad_ctx *g) { return aminmax_grad(g); }

/* ---- max.dim, argmax ------------------------------------------------------------ */

int op_max_dim_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::max";
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0) return -1;
  if (a[1].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: dim must be an int", fn);
  uint32_t mask;
  if (parse_dims(fn, &a[1], a[0].t->ndim, &mask) < 0 || check_nonempty(fn, a[0].t, mask) < 0)
    return -1;
  reduced_meta(a[0].t, mask, flag_arg(&a[2]), a[0].t->dtype, &o[0]);
  reduced_meta(a[0].t, mask, flag_arg(&a[2]), KILN_DTYPE_I64, &o[1]);
  return 2;
}
int op_max_dim_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  uint32_t mask;
  parse_dims("", &a[1], a[0].t->ndim, &mask);
  return reduce_as(a[0].t, a[0].t->dtype, mask, RK_MAX, o[0], o[1], 1.0);
}
/* The gradient goes to the selected index: where(arange == index, g, 0)
 * along dim (written with public ops, so it is differentiable in g). */
int op_max_dim_grad(op_grad_ctx *g) {
  kiln_tensor *x = g->args[0].t;
  if (!g->needs[0] || !g->grads[0]) return 0;
  if (x->ndim == 0) {
    g->grad_in[0] = g->grads[0];
    return 0;
  }
  int dim = core_wrap_dim("aten::max", g->args[1].i, x->ndim);
  bool keep = flag_arg(&g->args[2]);
  int64_t shape[KILN_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) shape[d] = d == dim ? x->shape[d] : 1;
  kiln_tensor *pos = kiln_reshape(kiln_arange(0, (double)x->shape[dim], 1, KILN_DTYPE_I64),
                                  x->ndim, shape);
  kiln_tensor *ix = keep ? g->outs[1] : kiln_unsqueeze(g->outs[1], dim);
  kiln_tensor *gk = keep ? g->grads[0] : kiln_unsqueeze(g->grads[0], dim);
  g->grad_in[0] = kiln_where(kiln_eq(pos, ix), gk, kiln_zeros(0, NULL, x->dtype));
  return g->grad_in[0] ? 0 : -1;
}

int op_argmax_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::argmax";
  uint32_t mask;
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0) return -1;
  const kiln_tensor *x = a[0].t;
  if (a[1].tag == OP_VAL_NONE) {
    if (core_numel(x->ndim, x->shape) == 0)
      return core_error(KILN_ERR_INVALID,
                        "%s: expected reduction dim to be specified for an empty input (%s)",
                        fn, core_shape_str(x->ndim, x->shape, (char[160]){0}, 160));
    mask = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
  } else if (a[1].tag != OP_VAL_INT) {
    return core_error(KILN_ERR_INVALID, "%s: dim must be an int or None", fn);
  } else if (parse_dims(fn, &a[1], x->ndim, &mask) < 0 || check_nonempty(fn, x, mask) < 0) {
    return -1;
  }
  reduced_meta(x, mask, flag_arg(&a[2]), KILN_DTYPE_I64, &o[0]);
  return 1;
}
int op_argmax_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  uint32_t mask;
  const kiln_tensor *x = a[0].t;
  if (a[1].tag == OP_VAL_NONE) mask = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
  else parse_dims("", &a[1], x->ndim, &mask);
  return reduce_as(x, x->dtype, mask, RK_MAX, NULL, o[0], 1.0);
}

/* ---- var ---------------------------------------------------------------------- */

int op_var_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::var";
  char d[160];
  uint32_t mask;
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0 || parse_dims(fn, &a[1], a[0].t->ndim, &mask) < 0) return -1;
  if (!core_dtype_is_floating(a[0].t->dtype))
    return core_error(KILN_ERR_INVALID, "%s: only floating-point tensors are supported, got %s",
                      fn, core_tensor_desc(a[0].t, d, sizeof d));
  reduced_meta(a[0].t, mask, flag_arg(&a[3]), a[0].t->dtype, &o[0]);
  return 1;
}
/* Two passes: the mean (in double), then the squared deviations from it. */
int op_var_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  uint32_t mask;
  const kiln_tensor *x = a[0].t;
  parse_dims("", &a[1], x->ndim, &mask);
  double cnt = (double)reduced_count(x, mask);
  double corr = a[2].tag == OP_VAL_NONE ? 1.0 : (flag_arg(&a[2]) ? 1.0 : 0.0);
  kiln_tensor *mean = core_tensor_new(o[0]->ndim, o[0]->shape, KILN_DTYPE_F64);
  if (!mean) return KILN_ERR_NOMEM;
  int rc = reduce_into(x, mask, RK_SUM, mean, NULL, cnt, NULL);
  if (rc == 0) rc = reduce_into(x, mask, RK_SQDEV, o[0], NULL, cnt - corr, core_data(mean));
  kiln_release(mean);
  return rc;
}
/* d var / dx = 2 (x - mean) / (n - correction), times g. */
int op_var_grad(op_grad_ctx *g) {
  uint32_t mask;
  int64_t dims[KILN_MAX_DIMS];
  kiln_tensor *x = g->args[0].t;
  if (!g->needs[0] || !g->grads[0]) return 0;
  parse_dims("", &g->args[1], x->ndim, &mask);
  double cnt = (double)reduced_count(x, mask);
  double corr = g->args[2].tag == OP_VAL_NONE ? 1.0 : (flag_arg(&g->args[2]) ? 1.0 : 0.0);
  int nd = mask_dims(mask, x->ndim, dims);
  kiln_tensor *dev = kiln_sub(x, kiln_mean(x, dims, nd, true));
  kiln_tensor *gk = keep_shape(g->grads[0], x, mask, flag_arg(&g->args[3]));
  g->grad_in[0] = kiln_mul(dev, kiln_mul_scalar(gk, 2.0 / (cnt - corr)));
  return g->grad_in[0] ? 0 : -1;
}

/* ---- public API ------------------------------------------------------------------ */

static op_val dims_arg(const int64_t *dims, int n) {
  return n ? OPV_INTS(dims, n) : OPV_NONE;
}
kiln_tensor *kiln_sum(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_SUM, (op_val[]){OPV_T(t), dims_arg(dims, n_dims), OPV_B(keepdim), OPV_NONE}, 4);
}
kiln_tensor *kiln_mean(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_MEAN, (op_val[]){OPV_T(t), dims_arg(dims, n_dims), OPV_B(keepdim), OPV_NONE}, 4);
}
kiln_tensor *kiln_amax(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_AMAX, (op_val[]){OPV_T(t), OPV_INTS(dims, n_dims), OPV_B(keepdim)}, 3);
}
kiln_tensor *kiln_amin(kiln_tensor *t, const int64_t *dims, int n_dims, bool keepdim) {
  return op_call1(KILN_OP_AMIN, (op_val[]){OPV_T(t), OPV_INTS(dims, n_dims), OPV_B(keepdim)}, 3);
}
kiln_tensor *kiln_var(kiln_tensor *t, const int64_t *dims, int n_dims, int64_t correction,
                      bool keepdim) {
  return op_call1(KILN_OP_VAR, (op_val[]){OPV_T(t), dims_arg(dims, n_dims),
                                          OPV_B(correction != 0), OPV_B(keepdim)},
                  4);
}
kiln_tensor *kiln_max_dim(kiln_tensor *t, int dim, bool keepdim, kiln_tensor **indices) {
  kiln_tensor *outs[2] = {0};
  int n = op_call(KILN_OP_MAX_DIM, (op_val[]){OPV_T(t), OPV_I(dim), OPV_B(keepdim)}, 3, outs, 2);
  if (n < 2) return NULL;
  if (indices) *indices = outs[1];
  else if (core_scope_depth() == 0) kiln_release(outs[1]);
  return outs[0];
}
kiln_tensor *kiln_argmax(kiln_tensor *t, int dim, bool flatten, bool keepdim) {
  return op_call1(KILN_OP_ARGMAX, (op_val[]){OPV_T(t), flatten ? OPV_NONE : OPV_I(dim), OPV_B(keepdim)}, 3);
}
