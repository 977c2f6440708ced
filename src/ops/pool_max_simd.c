/* src/ops/pool_max_simd.c: max_pool2d_with_indices' float32 kernel for one
 * output row's interior columns, at the AVX2 and AVX-512 levels (conv.c
 * runs the edge columns, and everything at the baseline, with its scalar
 * loop; Note [CPU levels] in src/core/cpu.h).
 *
 * Note [Vector max pool]: each lane is one output column; the lanes run
 * the window's taps in the scalar loop's order (rows, then columns within
 * a row), each tap one load of 8 or 16 inputs (stride 1: consecutive;
 * stride 2: two loads deinterleaved by a permute), a compare and two
 * blends, one for the value and one for its int32 flat index. A lane takes
 * the tap when `v > best || isnan(v)`, the scalar rule (PyTorch's): the
 * first maximum wins a tie and a later NaN replaces an earlier one, so
 * values and indices are bitwise the scalar loop's (tested at every
 * level). Interior columns are those whose window lies inside the row, so
 * no lane reads padding; a row's last vector is masked, and so is the
 * upper load of a stride-2 deinterleave (its last element is never used
 * and may lie past the input's end). Resnet's 3x3 stride-2 stem pool:
 * 9 taps x ~6 instructions per 16 outputs against ~70 cycles per output
 * for the scalar loop's branches. */
#include <immintrin.h>
#include <math.h>

#include "conv.h"

/* ---- AVX-512: 16 columns per vector, k-masks for the tail ---- */

CORE_TARGET_AVX512 static inline __m512 load16(const float *p, int64_t sw, int n) {
  if (sw == 1) return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
  /* lanes i < n need elements 2i: element 2n-2 is the last one read */
  int lo = n < 8 ? n : 8, hi = n - lo;
  __m512 a = _mm512_maskz_loadu_ps((__mmask16)((1u << (2 * lo - 1)) - 1), p);
  __m512 b = hi > 0 ? _mm512_maskz_loadu_ps((__mmask16)((1u << (2 * hi - 1)) - 1), p + 16)
                    : _mm512_setzero_ps();
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                         28, 30);
  return _mm512_permutex2var_ps(a, even, b);
}

CORE_TARGET_AVX512 void op_maxpool_row_f32_avx512(const float *xp, const win_geom *g,
                                                  int64_t h0, int64_t h1, int64_t ow_a,
                                                  int64_t ow_b, float *o, int64_t *ix) {
  const int64_t W = g->W, sw = g->sw, dw = g->dw;
  const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                            11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int)sw));
  for (int64_t ow = ow_a; ow < ow_b; ow += 16) {
    int n = ow_b - ow < 16 ? (int)(ow_b - ow) : 16;
    int64_t w0 = ow * sw - g->pw;
    __m512 best = _mm512_set1_ps(-INFINITY);
    __m512i bi = _mm512_add_epi32(_mm512_set1_epi32((int)(h0 * W + w0)), step);
    for (int64_t ih = h0; ih < h1; ih += g->dh)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t at = ih * W + w0 + kw * dw;
        __m512 v = load16(xp + at, sw, n);
        __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                         _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        best = _mm512_mask_blend_ps(take, best, v);
        bi = _mm512_mask_blend_epi32(take, bi, _mm512_add_epi32(_mm512_set1_epi32((int)at), step));
      }
    __mmask16 k = (__mmask16)((1u << n) - 1);
    _mm512_mask_storeu_ps(o + ow, k, best);
    _mm512_mask_storeu_epi64(ix + ow, (__mmask8)k,
                             _mm512_cvtepi32_epi64(_mm512_castsi512_si256(bi)));
    if (n > 8)
      _mm512_mask_storeu_epi64(ix + ow + 8, (__mmask8)(k >> 8),
                               _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(bi, 1)));
  }
}

/* ---- AVX2: 8 columns per vector, lane masks for the tail ---- */

CORE_TARGET_AVX2 static inline __m256i first_lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

CORE_TARGET_AVX2 static inline __m256 load8(const float *p, int64_t sw, int n) {
  if (sw == 1) return _mm256_maskload_ps(p, first_lanes8(n));
  int lo = n < 4 ? n : 4, hi = n - lo;
  __m256 a = _mm256_maskload_ps(p, first_lanes8(2 * lo - 1));
  __m256 b = hi > 0 ? _mm256_maskload_ps(p + 8, first_lanes8(2 * hi - 1)) : _mm256_setzero_ps();
  /* [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6] */
  __m256 s = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
}

CORE_TARGET_AVX2 void op_maxpool_row_f32_avx2(const float *xp, const win_geom *g, int64_t h0,
                                              int64_t h1, int64_t ow_a, int64_t ow_b, float *o,
                                              int64_t *ix) {
  const int64_t W = g->W, sw = g->sw, dw = g->dw;
  const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32((int)sw));
  for (int64_t ow = ow_a; ow < ow_b; ow += 8) {
    int n = ow_b - ow < 8 ? (int)(ow_b - ow) : 8;
    int64_t w0 = ow * sw - g->pw;
    __m256 best = _mm256_set1_ps(-INFINITY);
    __m256i bi = _mm256_add_epi32(_mm256_set1_epi32((int)(h0 * W + w0)), step);
    for (int64_t ih = h0; ih < h1; ih += g->dh)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t at = ih * W + w0 + kw * dw;
        __m256 v = load8(xp + at, sw, n);
        __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ),
                                   _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        best = _mm256_blendv_ps(best, v, take);
        __m256i at_i = _mm256_add_epi32(_mm256_set1_epi32((int)at), step);
        bi = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(bi),
                                                  _mm256_castsi256_ps(at_i), take));
      }
    __m256i lanes = first_lanes8(n);
    _mm256_maskstore_ps(o + ow, lanes, best);
    __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(bi));
    __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(bi, 1));
    _mm256_maskstore_epi64((long long *)(ix + ow), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(lanes)), lo);
    _mm256_maskstore_epi64((long long *)(ix + ow + 4),
                           _mm256_cvtepi32_epi64(_mm256_extracti128_si256(lanes, 1)), hi);
  }
}
