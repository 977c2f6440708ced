/* src/ops/conv_implicit.c: the parts of the implicit-im2col convolution
 * kernels (conv_avx512.c, conv_avx2.c: Notes [Implicit im2col] and
 * [Implicit im2col at AVX2]) that do not depend on the CPU level: the
 * int32 bound on their offsets and the receptive fields of the dot-product
 * path. */
#include <limits.h>

#include "conv.h"

bool op_conv_offsets_fit(const win_geom *g, int64_t nr) {
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW, xs = g->G * g->C * g->H * g->W;
  return K > 0 && L > 0 && g->N > 0 && g->O > 0 && xs > 0 && g->N <= INT32_MAX / 2 / xs &&
         g->N * g->O <= INT32_MAX / L && K <= INT32_MAX / nr &&
         g->KH * g->dh <= INT32_MAX / 4 / g->W && g->KW * g->dw <= INT32_MAX / 4;
}

void op_conv_gather_rows(const win_geom *g, const float *x, int64_t xs, int64_t p0, int64_t p1,
                         int64_t K, float *rows, int64_t kp) {
  int64_t KK = g->KH * g->KW, HW = g->H * g->W, L = g->OH * g->OW;
  int32_t off[64];
  for (int64_t p = p0; p < p1; p++) {
    int64_t n = p / L, q = p % L, oh = q / g->OW, ow = q % g->OW;
    float *r = rows + p * kp;
    const float *xn = x + n * xs;
    for (int64_t k = K; k < kp; k++) r[k] = 0.0f;
    if (KK > 64) { /* large kernels: one element at a time */
      for (int64_t k = 0; k < K; k++) {
        int64_t c = k / KK, kk = k % KK;
        int64_t ih = oh * g->sh - g->ph + (kk / g->KW) * g->dh;
        int64_t iw = ow * g->sw - g->pw + (kk % g->KW) * g->dw;
        r[k] = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? xn[c * HW + ih * g->W + iw] : 0.0f;
      }
      continue;
    }
    for (int64_t kk = 0; kk < KK; kk++) {
      int64_t ih = oh * g->sh - g->ph + (kk / g->KW) * g->dh;
      int64_t iw = ow * g->sw - g->pw + (kk % g->KW) * g->dw;
      off[kk] = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W ? (int32_t)(ih * g->W + iw) : -1;
    }
    for (int64_t c = 0; c < g->C; c++, r += KK, xn += HW)
      for (int64_t kk = 0; kk < KK; kk++) r[kk] = off[kk] >= 0 ? xn[off[kk]] : 0.0f;
  }
}
