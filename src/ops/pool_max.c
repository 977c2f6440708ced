/* src/ops/pool_max.c: 2-d max pooling of values only (no argmax indices),
 * for aten::max_pool2d when nothing needs its gradient (conv.c's
 * decomposition calls it; with grad it keeps max_pool2d_with_indices).
 *
 * Note [Separable max]: the max over a KH x KW window is the max over its
 * columns of the max over its rows, so for each output row the KH input
 * rows are first reduced elementwise into one row (contiguous, whole rows:
 * vectorizable), then each output takes the max of its KW entries of that
 * row. 3x3 stride 2 (resnet's stem) reads each input once or twice instead
 * of 2.25 times with 9 compares, and writes no 8-byte index per output. A
 * NaN anywhere in the window wins (max propagates NaN, as PyTorch), in
 * either order; the two orders differ only in the sign of a zero tie. The
 * windows are clipped to the input (padding reads as -inf). Dilation 1. */
#include <math.h>

#include "conv.h"

#define MAXNAN(a, b) ((b) > (a) || isnan(b) ? (b) : (a))

#define DEF_MAXV(NAME, T)                                                                 \
  static void NAME(const T *x, const win_geom *g, T *out, T *row) {                      \
    const T *xp = x;                                                                     \
    T *op = out;                                                                         \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                             \
      int64_t h0 = oh * g->sh - g->ph, h1 = h0 + g->KH;                                  \
      if (h0 < 0) h0 = 0;                                                                \
      if (h1 > g->H) h1 = g->H;                                                          \
      const T *r0 = xp + h0 * g->W;                                                      \
      for (int64_t w = 0; w < g->W; w++) row[w] = r0[w];                                 \
      for (int64_t h = h0 + 1; h < h1; h++) {                                            \
        const T *r = xp + h * g->W;                                                      \
        for (int64_t w = 0; w < g->W; w++) row[w] = MAXNAN(row[w], r[w]);                \
      }                                                                                  \
      T *o = op + oh * g->OW;                                                            \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                           \
        int64_t w0 = ow * g->sw - g->pw, w1 = w0 + g->KW;                                \
        if (w0 < 0) w0 = 0;                                                              \
        if (w1 > g->W) w1 = g->W;                                                        \
        T m = row[w0];                                                                   \
        for (int64_t w = w0 + 1; w < w1; w++) m = MAXNAN(m, row[w]);                     \
        o[ow] = m;                                                                       \
      }                                                                                  \
    }                                                                                    \
  }

DEF_MAXV(maxv_f32, float)
DEF_MAXV(maxv_f64, double)

int op_max_pool2d_values(kiln_dtype dt, const win_geom *g, const char *x, char *out) {
  int64_t HW = g->H * g->W, OHW = g->OH * g->OW;
  size_t es = kiln_dtype_size(dt), nb = 0;
  if (core_buf_bytes("aten::max_pool2d", (uint64_t)g->W, 1, es, &nb) < 0) return -1;
  int rc = 0;
  int64_t work = g->C * OHW * g->KH * g->KW;
#pragma omp parallel if (g->C > 1 && work >= OP_PARALLEL_MIN)
  {
    char *row = core_alloc(nb ? nb : 16);
    if (!row) {
#pragma omp atomic write
      rc = KILN_ERR_NOMEM;
    }
#pragma omp for schedule(static)
    for (int64_t p = 0; p < g->C; p++) {
      if (!row) continue;
      const char *xp = x + (size_t)(p * HW) * es;
      char *op = out + (size_t)(p * OHW) * es;
      if (dt == KILN_DTYPE_F32) maxv_f32((const float *)xp, g, (float *)op, (float *)row);
      else maxv_f64((const double *)xp, g, (double *)op, (double *)row);
    }
    core_free(row);
  }
  if (rc < 0) return core_error(KILN_ERR_NOMEM, "aten::max_pool2d: out of memory");
  return 0;
}
