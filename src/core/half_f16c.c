/* src/core/half_f16c.c: float16 <-> float32 runs with the F16C
 * instructions, for the avx2 and avx512 CPU levels (Note [F16C]). */
#include <immintrin.h>

#include "core.h"
#include "cpu.h"
#include "half.h"

/* Note [F16C]: VCVTPH2PS and VCVTPS2PH (imm 0: round to nearest even,
 * MXCSR's FTZ/DAZ not set by kiln) give the scalar conversions' bits
 * (Note [Half conversions]) for every value but one class: a float32 NaN
 * keeps its payload's top bits through VCVTPS2PH, where c10 (and kiln's
 * scalar path) gives sign | 0x7e00. The NaN lanes are patched to that, so
 * the result does not depend on the CPU level (tests/ops/test_f16c.c: all
 * 65536 halves, and float32 ties, subnormals, NaN payloads, at every
 * level). Both levels that have F16C (x86-64-v3 includes it) run these
 * 8-lane loops; the tail goes through an 8-element buffer, so every
 * element takes the instruction's path. */
CORE_TARGET_AVX2 static __m128i to_f16_8(__m256 x) {
  __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  __m128i m = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
  __m128i fix = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(-32768)),
                             _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, fix, m);
}

CORE_TARGET_AVX2 void core_f16c_from_f32(uint16_t *dst, const float *src, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm_storeu_si128((__m128i *)(dst + j), to_f16_8(_mm256_loadu_ps(src + j)));
  if (j < n) {
    float in[8] = {0};
    uint16_t out[8];
    for (int64_t k = j; k < n; k++) in[k - j] = src[k];
    _mm_storeu_si128((__m128i *)out, to_f16_8(_mm256_loadu_ps(in)));
    for (int64_t k = j; k < n; k++) dst[k] = out[k - j];
  }
}

CORE_TARGET_AVX2 void core_f16c_to_f32(float *dst, const uint16_t *src, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + j))));
  if (j < n) {
    uint16_t in[8] = {0};
    float out[8];
    for (int64_t k = j; k < n; k++) in[k - j] = src[k];
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)in)));
    for (int64_t k = j; k < n; k++) dst[k] = out[k - j];
  }
}
