/* src/ops/conv_depthwise.c: direct kernels for depthwise convolution (one
 * input channel per group) and its input, weight and bias gradients.
 *
 * Note [Depthwise kernels]: im2col + GEMM (conv_gemm.c) does a depthwise
 * convolution as one GEMM per group of K = KH * KW (9) deep: the im2col
 * copy is 9x the input and the products are too thin to use the GEMM
 * kernel's panels (MobileNet's 3x3 at 32 channels, 56x56, batch 8,
 * forward + backward: 0.56x PyTorch 1.13, which itself has no special
 * kernel there). Here each image plane is copied once into a zero-padded
 * plane in per-thread scratch (in L1/L2), so every tap reads a plain
 * row without bounds checks, and then:
 *   forward      out[oh, ow] = bias + sum_taps w[ki, kj] xp[oh sh + ki dh,
 *                ow sw + kj dw]: a loop along the output row (vectorized
 *                along the width; 3x3 at stride 1 as one loop of nine
 *                loads per vector, other kernels one pass per tap);
 *   grad input   at stride 1, the same loop over go padded by the dilated
 *                kernel's extent with the kernel flipped (a gather, no
 *                scatter conflicts); at other strides, a scatter-add of
 *                each tap into a padded plane, then its interior;
 *   grad weight  per tap, the dot product of go's plane with the tap's
 *                shifted input plane, in a 64-byte vector of partial sums
 *                (GCC vector extension: the same lanes at every CPU level),
 *                the lanes then summed in double; the bias gradient the
 *                same over go alone.
 * Every sum has a fixed order (taps in (ki, kj) order; lanes by position),
 * with no contraction (Note [Explicit FMA]), so the CPU levels (Note [CPU
 * levels]) give bit-identical results. Planes run in parallel: forward and
 * grad input over (image, group), grad weight over output channels. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "conv_dw.h"

bool op_conv_dw_applies(const win_geom *g) { return g->C == 1 && g->G > 1; }

/* dst[RH, RW] = src[SR, SC] placed at (top, left), zeros elsewhere, src
 * clipped to dst (elements of es bytes). */
static void pad_plane(const char *src, int64_t SR, int64_t SC, int64_t top, int64_t left,
                      char *dst, int64_t RH, int64_t RW, size_t es) {
  int64_t rows = SR < RH - top ? SR : RH - top, cols = SC < RW - left ? SC : RW - left;
  size_t row = (size_t)RW * es;
  if (rows <= 0 || cols <= 0) {
    memset(dst, 0, (size_t)RH * row);
    return;
  }
  memset(dst, 0, (size_t)top * row);
  for (int64_t r = 0; r < rows; r++) {
    char *d = dst + (size_t)(top + r) * row;
    memset(d, 0, (size_t)left * es);
    memcpy(d + (size_t)left * es, src + (size_t)(r * SC) * es, (size_t)cols * es);
    memset(d + (size_t)(left + cols) * es, 0, (size_t)(RW - left - cols) * es);
  }
  memset(dst + (size_t)(top + rows) * row, 0, (size_t)(RH - top - rows) * row);
}

/* The tap geometry of one call: rows of the output R x Cn; row r reads the
 * padded plane from r * sh * P; tap (ki, kj) adds at (ki dh, kj dw), along
 * the row every sw-th element. */
typedef struct dw_taps {
  int64_t R, Cn, P, sh, sw, KH, KW, dh, dw;
} dw_taps;

/* Vectors of 64 bytes in GCC's vector extension: the same lanes whatever
 * the CPU level compiles them to (one zmm, two ymm or four xmm). */
typedef float vf32 __attribute__((vector_size(64)));
typedef double vf64 __attribute__((vector_size(64)));

/* taps_<T>: o[r, j] += sum_taps wt[ki KW + kj] xp[...] (o holds the start
 * value: the bias, 0, or the sum so far). wgrad_<T>: acc[tap] += the dot
 * product of go [R, Cn] with the tap's input plane. bsum_<T>: the sum of
 * n elements, in vector lanes then in double. */
#define DEF_DW(SUF, T, V)                                                                   \
  CORE_CLONES(taps_##SUF, (T *restrict o, const T *restrict xp, const T *restrict wt,       \
                           const dw_taps *t), (o, xp, wt, t)) {                             \
    int64_t Cn = t->Cn, P = t->P, sw = t->sw, dh = t->dh, dw = t->dw;                       \
    for (int64_t r = 0; r < t->R; r++) {                                                    \
      T *restrict orow = o + r * Cn;                                                        \
      const T *base = xp + r * t->sh * P;                                                   \
      if (t->KH == 3 && t->KW == 3 && sw == 1) {                                            \
        const T *a = base, *b = base + dh * P, *c = base + 2 * dh * P;                      \
        T w0 = wt[0], w1 = wt[1], w2 = wt[2], w3 = wt[3], w4 = wt[4], w5 = wt[5];           \
        T w6 = wt[6], w7 = wt[7], w8 = wt[8];                                               \
        _Pragma("omp simd")                                                                 \
        for (int64_t j = 0; j < Cn; j++) {                                                  \
          T s = orow[j];                                                                    \
          s += w0 * a[j];                                                                   \
          s += w1 * a[j + dw];                                                              \
          s += w2 * a[j + 2 * dw];                                                          \
          s += w3 * b[j];                                                                   \
          s += w4 * b[j + dw];                                                              \
          s += w5 * b[j + 2 * dw];                                                          \
          s += w6 * c[j];                                                                   \
          s += w7 * c[j + dw];                                                              \
          s += w8 * c[j + 2 * dw];                                                          \
          orow[j] = s;                                                                      \
        }                                                                                   \
        continue;                                                                           \
      }                                                                                     \
      for (int64_t ki = 0; ki < t->KH; ki++)                                                \
        for (int64_t kj = 0; kj < t->KW; kj++) {                                            \
          const T *restrict x = base + ki * dh * P + kj * dw;                               \
          T wv = wt[ki * t->KW + kj];                                                       \
          if (sw == 1) {                                                                    \
            _Pragma("omp simd")                                                             \
            for (int64_t j = 0; j < Cn; j++) orow[j] += wv * x[j];                          \
          } else {                                                                          \
            for (int64_t j = 0; j < Cn; j++) orow[j] += wv * x[j * sw];                     \
          }                                                                                 \
        }                                                                                   \
    }                                                                                       \
  }                                                                                         \
  CORE_CLONES(wgrad_##SUF, (const T *restrict go, const T *restrict xp, const dw_taps *t,   \
                            double *acc), (go, xp, t, acc)) {                               \
    enum { NL = (int)(sizeof(V) / sizeof(T)) };                                             \
    int64_t Cn = t->Cn, P = t->P, sw = t->sw;                                               \
    for (int64_t ki = 0; ki < t->KH; ki++)                                                  \
      for (int64_t kj = 0; kj < t->KW; kj++) {                                              \
        V lane = {0};                                                                       \
        T tail[NL] = {0};                                                                   \
        for (int64_t r = 0; r < t->R; r++) {                                                \
          const T *g = go + r * Cn, *x = xp + (r * t->sh + ki * t->dh) * P + kj * t->dw;    \
          int64_t j = 0;                                                                    \
          for (; j + NL <= Cn; j += NL) {                                                   \
            V gv, xv;                                                                       \
            memcpy(&gv, g + j, sizeof gv);                                                  \
            if (sw == 1) {                                                                  \
              memcpy(&xv, x + j, sizeof xv);                                                \
            } else {                                                                        \
              T tmp[NL];                                                                    \
              for (int l = 0; l < NL; l++) tmp[l] = x[(j + l) * sw];                        \
              memcpy(&xv, tmp, sizeof xv);                                                  \
            }                                                                               \
            lane += gv * xv;                                                                \
          }                                                                                 \
          for (int l = 0; j + l < Cn; l++) tail[l] += g[j + l] * x[(j + l) * sw];           \
        }                                                                                   \
        double s = 0;                                                                       \
        for (int l = 0; l < NL; l++) s += (double)lane[l] + (double)tail[l];                \
        acc[ki * t->KW + kj] += s;                                                          \
      }                                                                                     \
  }                                                                                         \
  CORE_CLONES(bsum_##SUF, (const T *restrict g, int64_t n, double *acc), (g, n, acc)) {     \
    enum { NL = (int)(sizeof(V) / sizeof(T)) };                                             \
    V lane = {0};                                                                           \
    int64_t j = 0;                                                                          \
    for (; j + NL <= n; j += NL) {                                                          \
      V gv;                                                                                 \
      memcpy(&gv, g + j, sizeof gv);                                                        \
      lane += gv;                                                                           \
    }                                                                                       \
    double s = 0;                                                                           \
    for (int l = 0; l < NL; l++) s += (double)lane[l];                                      \
    for (; j < n; j++) s += (double)g[j];                                                   \
    *acc += s;                                                                              \
  }

DEF_DW(f32, float, vf32)
DEF_DW(f64, double, vf64)

static void taps(kiln_dtype dt, char *o, const char *xp, const char *wt, const dw_taps *t) {
  if (dt == KILN_DTYPE_F32) taps_f32((float *)o, (const float *)xp, (const float *)wt, t);
  else taps_f64((double *)o, (const double *)xp, (const double *)wt, t);
}

/* p[0, n) = v (float32 or float64; one loop per dtype, so each vectorizes). */
static void fill(kiln_dtype dt, char *p, int64_t n, double v) {
  if (dt == KILN_DTYPE_F32) {
    float f = (float)v, *q = (float *)p;
    for (int64_t i = 0; i < n; i++) q[i] = f;
  } else {
    double *q = (double *)p;
    for (int64_t i = 0; i < n; i++) q[i] = v;
  }
}

static double get(kiln_dtype dt, const char *p, int64_t i) {
  return dt == KILN_DTYPE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

/* Per-thread scratch: the largest padded plane any pass uses, then KH KW
 * doubles (weight-gradient sums) and KH KW elements (a flipped kernel). */
typedef struct dw_plan {
  int64_t RH, RW;   /* the input padded: H + 2 ph, W + 2 pw */
  int64_t RHg, RWg; /* go padded for the stride-1 input gradient */
  size_t acc_off;   /* the sums' offset in a thread's scratch (64-aligned) */
  size_t flip_off;  /* the flipped kernel's */
  size_t per;       /* bytes per thread, a multiple of 64 */
  int nt;
  char *buf;
  size_t block;
} dw_plan;

static int add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

/* Multiply-adds of a pass (saturating: only compared with a threshold). */
static int64_t work_of(const win_geom *g) {
  int64_t w = g->N;
  int64_t f[4] = {g->O, g->OH * g->OW, g->KH, g->KW};
  for (int i = 0; i < 4; i++)
    if (__builtin_mul_overflow(w, f[i], &w)) return INT64_MAX;
  return w;
}

/* Sizes the scratch and allocates it for nt threads; < 0 with the error set. */
static int plan(const char *fn, kiln_dtype dt, const win_geom *g, int64_t work, dw_plan *p) {
  size_t es = kiln_dtype_size(dt), plane = 0, gplane = 0, taps_b = 0, all = 0;
  int64_t th, tw;
  memset(p, 0, sizeof *p);
  if (__builtin_mul_overflow(g->KH - 1, g->dh, &th) || __builtin_mul_overflow(g->KW - 1, g->dw, &tw) ||
      !add_ok(g->H, 2 * g->ph, &p->RH) || !add_ok(g->W, 2 * g->pw, &p->RW) ||
      !add_ok(g->H + g->ph, th, &p->RHg) || !add_ok(g->W + g->pw, tw, &p->RWg))
    return core_error(KILN_ERR_INVALID, "%s: padded plane size overflows", fn);
  if (core_buf_bytes(fn, (uint64_t)p->RH, (uint64_t)p->RW, es, &plane) < 0 ||
      core_buf_bytes(fn, (uint64_t)p->RHg, (uint64_t)p->RWg, es, &gplane) < 0 ||
      core_buf_bytes(fn, (uint64_t)g->KH, (uint64_t)g->KW, 16, &taps_b) < 0)
    return KILN_ERR_INVALID;
  size_t big = plane > gplane ? plane : gplane;
  if (big > SIZE_MAX / 2 - taps_b) return core_error(KILN_ERR_INVALID, "%s: scratch overflows", fn);
  p->acc_off = (big + 63) / 64 * 64;
  p->flip_off = p->acc_off + (size_t)(g->KH * g->KW) * sizeof(double);
  p->per = (p->acc_off + taps_b + 63) / 64 * 64;
  p->nt = omp_in_parallel() || work < OP_PARALLEL_MIN ? 1 : omp_get_max_threads();
  if (p->nt < 1) p->nt = 1;
  if (core_buf_bytes(fn, p->per, (uint64_t)p->nt, 1, &all) < 0) return KILN_ERR_INVALID;
  p->buf = core_block_alloc(all, &p->block);
  if (!p->buf)
    return core_error(KILN_ERR_NOMEM, "%s: out of memory for %zu bytes of scratch", fn, all);
  return 0;
}

/* This thread's scratch: the plane, then the sums, then the flipped kernel. */
static char *mine(const dw_plan *p) { return p->buf + p->per * (size_t)omp_get_thread_num(); }

int op_conv_dw_forward(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                       const char *bias, char *out) {
  dw_plan p;
  int64_t Og = g->O / g->G, L = g->OH * g->OW, HW = g->H * g->W, KK = g->KH * g->KW;
  size_t es = kiln_dtype_size(dt);
  int rc = plan("aten::conv2d", dt, g, work_of(g), &p);
  if (rc < 0) return rc;
  dw_taps t = {g->OH, g->OW, p.RW, g->sh, g->sw, g->KH, g->KW, g->dh, g->dw};
#pragma omp parallel for schedule(static) num_threads(p.nt) if (p.nt > 1)
  for (int64_t q = 0; q < g->N * g->G; q++) { /* plane q = (image, group) */
    char *xp = mine(&p);
    int64_t n = q / g->G, k = q % g->G;
    pad_plane(x + (size_t)(q * HW) * es, g->H, g->W, g->ph, g->pw, xp, p.RH, p.RW, es);
    for (int64_t j = 0; j < Og; j++) {
      int64_t o = k * Og + j;
      char *op = out + (size_t)((n * g->O + o) * L) * es;
      fill(dt, op, L, bias ? get(dt, bias, o) : 0.0);
      taps(dt, op, xp, w + (size_t)(o * KK) * es, &t);
    }
  }
  core_block_free(p.buf, p.block);
  return 0;
}

/* gx for plane q = (n, k): at stride 1 a gather over go padded by the
 * dilated kernel's extent with the kernel flipped; else a scatter-add of
 * each tap into the padded plane and its interior copied out. */
static void dw_grad_input(kiln_dtype dt, const win_geom *g, const dw_plan *p, int64_t q,
                          const char *w, const char *go, char *gx) {
  int64_t Og = g->O / g->G, L = g->OH * g->OW, HW = g->H * g->W, KK = g->KH * g->KW;
  int64_t n = q / g->G, k = q % g->G;
  size_t es = kiln_dtype_size(dt);
  char *sp = mine(p), *flip = sp + p->flip_off;
  char *gxq = gx + (size_t)(q * HW) * es;
  if (g->sh == 1 && g->sw == 1) {
    int64_t th = (g->KH - 1) * g->dh, tw = (g->KW - 1) * g->dw;
    dw_taps t = {g->H, g->W, p->RWg, 1, 1, g->KH, g->KW, g->dh, g->dw};
    fill(dt, gxq, HW, 0.0);
    for (int64_t j = 0; j < Og; j++) {
      int64_t o = k * Og + j;
      const char *wo = w + (size_t)(o * KK) * es;
      for (int64_t i = 0; i < KK; i++) memcpy(flip + (size_t)i * es, wo + (size_t)(KK - 1 - i) * es, es);
      pad_plane(go + (size_t)((n * g->O + o) * L) * es, g->OH, g->OW, th, tw, sp, p->RHg, p->RWg, es);
      taps(dt, gxq, sp + (size_t)(g->ph * p->RWg + g->pw) * es, flip, &t);
    }
    return;
  }
  fill(dt, sp, p->RH * p->RW, 0.0);
  for (int64_t j = 0; j < Og; j++) {
    int64_t o = k * Og + j;
    const char *gop = go + (size_t)((n * g->O + o) * L) * es, *wo = w + (size_t)(o * KK) * es;
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t ki = 0; ki < g->KH; ki++)
        for (int64_t kj = 0; kj < g->KW; kj++) {
          int64_t base = (oh * g->sh + ki * g->dh) * p->RW + kj * g->dw;
          if (dt == KILN_DTYPE_F32) {
            float wv = ((const float *)wo)[ki * g->KW + kj], *row = (float *)sp + base;
            const float *gr = (const float *)gop + oh * g->OW;
            for (int64_t ow = 0; ow < g->OW; ow++) row[ow * g->sw] += wv * gr[ow];
          } else {
            double wv = ((const double *)wo)[ki * g->KW + kj], *row = (double *)sp + base;
            const double *gr = (const double *)gop + oh * g->OW;
            for (int64_t ow = 0; ow < g->OW; ow++) row[ow * g->sw] += wv * gr[ow];
          }
        }
  }
  for (int64_t ih = 0; ih < g->H; ih++)
    memcpy(gxq + (size_t)(ih * g->W) * es, sp + (size_t)((ih + g->ph) * p->RW + g->pw) * es,
           (size_t)g->W * es);
}

/* gw[o] (and gb[o]) summed over the images: each image's plane padded,
 * then the taps' dot products with go's plane. */
static void dw_grad_weight(kiln_dtype dt, const win_geom *g, const dw_plan *p, int64_t o,
                           const bool mask[3], const char *x, const char *go, char *gw,
                           char *gb) {
  int64_t Og = g->O / g->G, L = g->OH * g->OW, HW = g->H * g->W, KK = g->KH * g->KW;
  int64_t k = o / Og;
  size_t es = kiln_dtype_size(dt);
  char *sp = mine(p);
  double *acc = (double *)(sp + p->acc_off), bs = 0;
  dw_taps t = {g->OH, g->OW, p->RW, g->sh, g->sw, g->KH, g->KW, g->dh, g->dw};
  for (int64_t i = 0; i < KK; i++) acc[i] = 0;
  for (int64_t n = 0; n < g->N; n++) {
    const char *gop = go + (size_t)((n * g->O + o) * L) * es;
    if (mask[2]) {
      if (dt == KILN_DTYPE_F32) bsum_f32((const float *)gop, L, &bs);
      else bsum_f64((const double *)gop, L, &bs);
    }
    if (!mask[1]) continue;
    pad_plane(x + (size_t)((n * g->G + k) * HW) * es, g->H, g->W, g->ph, g->pw, sp, p->RH, p->RW, es);
    if (dt == KILN_DTYPE_F32) wgrad_f32((const float *)gop, (const float *)sp, &t, acc);
    else wgrad_f64((const double *)gop, (const double *)sp, &t, acc);
  }
  for (int64_t i = 0; mask[1] && i < KK; i++) {
    if (dt == KILN_DTYPE_F32) ((float *)gw)[o * KK + i] = (float)acc[i];
    else ((double *)gw)[o * KK + i] = acc[i];
  }
  if (mask[2] && dt == KILN_DTYPE_F32) ((float *)gb)[o] = (float)bs;
  else if (mask[2]) ((double *)gb)[o] = bs;
}

int op_conv_dw_backward(kiln_dtype dt, const win_geom *g, const bool mask[3], const char *x,
                        const char *w, const char *go, char *gx, char *gw, char *gb) {
  dw_plan p;
  if (!mask[0] && !mask[1] && !mask[2]) return 0;
  int rc = plan("aten::convolution_backward", dt, g, work_of(g), &p);
  if (rc < 0) return rc;
  if (mask[0]) {
#pragma omp parallel for schedule(static) num_threads(p.nt) if (p.nt > 1)
    for (int64_t q = 0; q < g->N * g->G; q++) dw_grad_input(dt, g, &p, q, w, go, gx);
  }
  if (mask[1] || mask[2]) {
#pragma omp parallel for schedule(static) num_threads(p.nt) if (p.nt > 1)
    for (int64_t o = 0; o < g->O; o++) dw_grad_weight(dt, g, &p, o, mask, x, go, gw, gb);
  }
  core_block_free(p.buf, p.block);
  return 0;
}
