/* src/ops/simd256.h: register-level helpers shared by the AVX2 kernels
 * (sgemm_avx2.c, conv_avx2.c, conv_winograd_avx2.c). Include it inside a file's AVX2
 * target region (after its GCC target push or clang attribute push), so
 * that these functions compile for that level. */
#ifndef KILN_OPS_SIMD256_H
#define KILN_OPS_SIMD256_H

#include <immintrin.h>

/* 8 x 8 transpose of r[0..7] in registers: r[i] lane l <- r[l] lane i. */
static inline void op_transpose8_ps(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* acc[i][h] = sum over k < K of a[i][k] bp[16 k + 8 h ...]: the 6 x 16
 * register tile of the AVX2 kernels (conv_avx2.c, conv_winograd_avx2.c),
 * each sum from zero by one FMA per k in order; bp advances 16 floats a
 * k. The 12 accumulators are named (as an array GCC kept them on the
 * stack). */
static inline void op_tile6x16_ps(const float *const a[6], const float *bp, int64_t K,
                                  __m256 acc[6][2]) {
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < K; k++) {
    __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#define OP_TILE_ROW(i, p)                                                \
  do {                                                                   \
    __m256 ai = _mm256_broadcast_ss(p + k);                              \
    c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                          \
    c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                          \
  } while (0)
    OP_TILE_ROW(0, a0); OP_TILE_ROW(1, a1); OP_TILE_ROW(2, a2);
    OP_TILE_ROW(3, a3); OP_TILE_ROW(4, a4); OP_TILE_ROW(5, a5);
#undef OP_TILE_ROW
    bp += 16;
  }
  acc[0][0] = c00, acc[0][1] = c01, acc[1][0] = c10, acc[1][1] = c11;
  acc[2][0] = c20, acc[2][1] = c21, acc[3][0] = c30, acc[3][1] = c31;
  acc[4][0] = c40, acc[4][1] = c41, acc[5][0] = c50, acc[5][1] = c51;
}

#endif
