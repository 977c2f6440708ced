/* src/ops/vmath.h: float32 exp and tanh written so that the tile loops
 * calling them vectorize (libm's expf/tanhf are opaque calls, one element
 * at a time: the transcendental ops would be compute-bound at a tenth of
 * memory bandwidth). Both are within about 1-2 ulp of libm. */
#ifndef KILN_OPS_VMATH_H
#define KILN_OPS_VMATH_H

#include <stdint.h>

/* e^x: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, Cephes'
 * polynomial for e^r (about 1 ulp), 2^n built in the exponent bits. Below
 * -87.3 the result is 0 (no denormals), above 88.3 +inf; NaN passes
 * through. The rounding uses the 1.5 * 2^23 trick (plain arithmetic, so it
 * vectorizes without SSE4.1 rounding). */
static inline float op_expf(float x) {
  float xc = x > -87.3f ? x : -87.3f; /* also maps NaN to a finite value */
  xc = xc < 88.3f ? xc : 88.3f;
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float q = 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  float y = q * r * r + r + 1.0f;
  union {
    int32_t i;
    float f;
  } sc = {.i = ((int32_t)n + 127) << 23};
  y *= sc.f;
  y = x < -87.3f ? 0.0f : y;
  y = x > 88.3f ? __builtin_inff() : y;
  return x != x ? x : y;
}

/* tanh: Cephes' odd polynomial below |x| = 0.625 (no cancellation near 0),
 * 1 - 2 / (e^{2|x|} + 1) above, the sign restored; branch-free. */
static inline float op_tanhf(float x) {
  float ax = x < 0 ? -x : x;
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float e = op_expf(2.0f * (ax < 44.0f ? ax : 44.0f));
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  float y = ax < 0.625f ? small : big;
  return x != x ? x : y;
}

/* 1 / (1 + e^-x) */
static inline float op_sigmoidf(float x) { return 1.0f / (1.0f + op_expf(-x)); }

#endif
