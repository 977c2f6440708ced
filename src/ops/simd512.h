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

#endif
