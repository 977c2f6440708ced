/* src/ops/simd512.h: register-level helpers shared by the AVX-512
 * kernels (sgemm.c, conv_avx512.c, conv_winograd.c). Include it inside a
 * file's AVX-512 target region (after its GCC target push or clang
 * attribute push), so that these functions compile for that level. */
#ifndef KILN_OPS_SIMD512_H
#define KILN_OPS_SIMD512_H

#include <immintrin.h>

/* 16 x 16 transpose of r[0..15] in registers: r[i] lane l <- r[l] lane i. */
static inline void op_transpose16_ps(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  /* r[4i+j] now holds, in each 128-bit lane l, column 4l+j of rows 4i..4i+3 */
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      __m512 a = r[8 * i + j], b = r[8 * i + 4 + j];
      t[8 * i + j] = _mm512_shuffle_f32x4(a, b, 0x88);     /* lanes 0,2 of a; 0,2 of b */
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(a, b, 0xdd); /* lanes 1,3 of a; 1,3 of b */
    }
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++)
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m512 a = t[4 * h + j], b = t[8 + 4 * h + j];
      r[j + 4 * h] = _mm512_shuffle_f32x4(a, b, 0x88);     /* column j + 4h */
      r[j + 8 + 4 * h] = _mm512_shuffle_f32x4(a, b, 0xdd); /* column j + 8 + 4h */
    }
}

/* acc[i][h] = sum over k < K of a[i][k] bp[32 k + 16 h ...]: the 8 x 32
 * register tile of the AVX-512 conv kernels (conv_avx512.c's forward,
 * conv_winograd.c's GEMMs), each sum from zero by one FMA per k in order;
 * bp advances 32 floats a k. */
static inline void op_tile8x32_ps(const float *const a[8], const float *bp, int64_t K,
                                  __m512 acc[8][2]) {
  for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5],
              *a6 = a[6], *a7 = a[7];
  for (int64_t k = 0; k < K; k++) {
    __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#define OP_TILE_ROW(i, p)                                                \
  do {                                                                   \
    __m512 ai = _mm512_set1_ps(p[k]);                                    \
    acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                      \
    acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                      \
  } while (0)
    OP_TILE_ROW(0, a0); OP_TILE_ROW(1, a1); OP_TILE_ROW(2, a2); OP_TILE_ROW(3, a3);
    OP_TILE_ROW(4, a4); OP_TILE_ROW(5, a5); OP_TILE_ROW(6, a6); OP_TILE_ROW(7, a7);
#undef OP_TILE_ROW
    bp += 32;
  }
}

#endif
