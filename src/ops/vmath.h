/* src/ops/vmath.h: float math the tiles call, and so every native fused
 * kernel (this text is part of each one's source; it includes only libc
 * headers). float32 exp and tanh are written so that the tile loops
 * calling them vectorize (libm's expf/tanhf are opaque calls, one element
 * at a time: the transcendental ops would be compute-bound at a tenth of
 * memory bandwidth). exp is within about 1 ulp of libm, tanh 2.5 ulp.
 *
 * Note [Explicit FMA]: kiln builds with -ffp-contract=off, so a * b + c
 * rounds twice unless written fmaf(a, b, c): results do not depend on
 * what the compiler sees at once, and a fused kernel compiled from several
 * ops' expressions (Note [Native kernels]) gives exactly the values the
 * ops give one at a time. The polynomials here use fmaf where it is
 * faster and no less accurate; at the AVX2 and AVX-512 levels (Note [CPU
 * levels]) it is one instruction, at the baseline a call to libm's exact
 * fmaf: the same value either way. */
#ifndef KILN_OPS_VMATH_H
#define KILN_OPS_VMATH_H

#include <math.h>
#include <stdint.h>

/* Note [Vector-friendly vmath]: gcc 12 vectorizes a float select with a
 * constant arm ("z > -18.0f ? z : -18.0f") as a compare and a blend, not
 * as maxps, and merges neighbouring selects into longer compare chains; at
 * the AVX2 level, where every compare and blend competes with the FMAs
 * for the same two pipes, the fused chain y = sigmoid(x*a + b) * tanh(x)
 * + 0.5*x*x was 80 instructions per 8 floats. So the selects that can be
 * are integer operations on the float's bits: |x| and tanh's sign are bit
 * masks, clamps of a non-negative float (or, with the bound chosen by the
 * sign, of any float) are one unsigned min of the bits (vpminud), and 2^n
 * comes from the rounding sum's own bits (1.5 * 2^23 + n holds n in its
 * low mantissa bits, so (bits << 23) + (127 << 23) is 2^n: no float-to-int
 * conversion). 67 instructions per 8 floats, about 13% faster at AVX2 and
 * 20% at AVX-512. Each function returns the same bits as its previous
 * select form for every float (checked over all 2^32 inputs at the
 * baseline, AVX2 and AVX-512 levels), so no ulp bound changed. */

static inline uint32_t op_fbits(float f) {
  union {
    float f;
    uint32_t u;
  } v = {.f = f};
  return v.u;
}
static inline float op_bitsf(uint32_t u) {
  union {
    uint32_t u;
    float f;
  } v = {.u = u};
  return v.f;
}

/* 2^n from t = 1.5 * 2^23 + n (the rounding sum, -126 <= n <= 127): n sits in
 * t's low mantissa bits, so shifting them into the exponent field and
 * adding the bias gives 2^n (Note [Vector-friendly vmath]). */
static inline float op_pow2_of_round(float t) {
  return op_bitsf((op_fbits(t) << 23) + (127u << 23));
}

/* e^x for x already clamped to [-87.3, 88.3]: Cody-Waite range reduction
 * x = n ln2 + r, |r| <= ln2/2, Cephes' polynomial for e^r (about 1 ulp),
 * 2^n built in the exponent bits. The rounding uses the 1.5 * 2^23 trick
 * (plain arithmetic, so it vectorizes without SSE4.1 rounding). */
static inline float op_expf_clamped(float xc) {
  float t = fmaf(xc, 1.44269504088896341f, 12582912.0f);
  float n = t - 12582912.0f;
  float r = fmaf(-n, 0.693359375f, xc);
  r = fmaf(-n, -2.12194440e-4f, r);
  float q = 1.9875691500e-4f;
  q = fmaf(q, r, 1.3981999507e-3f);
  q = fmaf(q, r, 8.3334519073e-3f);
  q = fmaf(q, r, 4.1665795894e-2f);
  q = fmaf(q, r, 1.6666665459e-1f);
  q = fmaf(q, r, 5.0000001201e-1f);
  float y = fmaf(q * r, r, r) + 1.0f;
  return y * op_pow2_of_round(t);
}

/* e^x: below -87.3 the result is 0 (no denormals), above 88.3 +inf; NaN
 * passes through. */
static inline float op_expf(float x) {
  float xc = x > -87.3f ? x : -87.3f; /* also maps NaN to a finite value */
  xc = xc < 88.3f ? xc : 88.3f;
  float y = op_expf_clamped(xc);
  y = x < -87.3f ? 0.0f : y;
  y = x > 88.3f ? __builtin_inff() : y;
  return x != x ? x : y;
}

/* tanh: with z = -2|x| (clamped to -18, where tanh is 1 in float),
 * tanh|x| = -expm1(z) / (2 + expm1(z)), the sign restored. expm1 is
 * e^z's range reduction z = n ln2 + r with a Taylor polynomial for
 * expm1(r) (relative error 3e-10 on |r| <= ln2/2) and
 * expm1(z) = 2^n expm1(r) + (2^n - 1): no cancellation near 0, so one
 * formula serves every x (no second branch to compute and blend), and one
 * division. Max error 2.5 ulp against double tanh over a sweep of every
 * 7th float below 12 (the previous two-branch form: 1.3 ulp, at twice the
 * cost; torch.testing's float32 tolerance is about 11 ulp). NaN passes
 * through. The quotient is positive except at x = +-0, where it is -0, so
 * OR-ing in x's sign bit negates it for x < 0 and leaves -0 at zero,
 * exactly as the select x < 0 ? -t : t did. */
static inline float op_tanhf(float x) {
  uint32_t xb = op_fbits(x);
  uint32_t ab = xb & 0x7fffffffu; /* |x|, NaN above +inf */
  ab = ab < 0x41100000u ? ab : 0x41100000u; /* min(|x|, 9): 9 for NaN */
  float z = -2.0f * op_bitsf(ab);
  float tt = fmaf(z, 1.44269504088896341f, 12582912.0f);
  float n = tt - 12582912.0f;
  float r = fmaf(-n, 0.693359375f, z);
  r = fmaf(-n, -2.12194440e-4f, r);
  float q = 1.0f / 5040.0f;
  q = fmaf(q, r, 1.0f / 720.0f);
  q = fmaf(q, r, 1.0f / 120.0f);
  q = fmaf(q, r, 1.0f / 24.0f);
  q = fmaf(q, r, 1.0f / 6.0f);
  q = fmaf(q, r, 0.5f);
  float p = fmaf(q, r * r, r); /* expm1(r) */
  float sc = op_pow2_of_round(tt);
  float em = fmaf(sc, p, sc - 1.0f); /* expm1(z) */
  float t = -em / (2.0f + em);
  t = op_bitsf(op_fbits(t) | (xb & 0x80000000u));
  return x != x ? x : t;
}

/* 1 / (1 + e^-x), with e^-x clamped rather than special-cased (the same
 * values as 1 / (1 + op_expf(-x)) for every float, about 12% cheaper):
 * 0 below -88.3, 1 above 87.3, NaN through. */
static inline float op_sigmoidf(float x) {
  uint32_t zb = op_fbits(x) ^ 0x80000000u; /* -x */
  /* -x clamped to [-87.3, 88.3] as one unsigned min: a negative float's
   * bits exceed -87.3's exactly when it is below -87.3, a positive one's
   * exceed 88.3's when it is above (NaN becomes a bound; it is passed
   * through below) */
  uint32_t lim = 0x42b0999au + (-(zb >> 31) & (0xc2ae999au - 0x42b0999au));
  float z = op_bitsf(zb < lim ? zb : lim);
  float y = 1.0f / (1.0f + op_expf_clamped(z));
  y = x < -88.3f ? 0.0f : y;
  return x != x ? x : y;
}

/* The helpers of tiles whose expression is more than one line, here so
 * that their text, like every tile's, compiles into native kernels (this
 * header is part of every kernel's source). Attributes come in as the
 * op_attrs values (NAN for None). */

/* leaky_relu: the product is formed unconditionally so that the slope
 * load is not conditional: the loop then if-converts (and vectorizes). */
static inline float op_leakyf(float a, double slope) {
  float m = a * (float)slope;
  return a > 0.0f ? a : m;
}
static inline double op_leaky(double a, double slope) {
  double m = a * slope;
  return a > 0.0 ? a : m;
}

/* clamp: min(max(x, lo), hi) as std::min/std::max, so NaN propagates and
 * lo > hi gives hi (PyTorch's semantics); a None bound is -inf / +inf. */
static inline double op_bound(double v, double none) { return v != v ? none : v; }
static inline float op_clampf(float a, double lo_, double hi_) {
  float lo = (float)op_bound(lo_, -__builtin_inf()), hi = (float)op_bound(hi_, __builtin_inf());
  float t = a < lo ? lo : a;
  return hi < t ? hi : t;
}
static inline double op_clamp(double a, double lo_, double hi_) {
  double lo = op_bound(lo_, -__builtin_inf()), hi = op_bound(hi_, __builtin_inf());
  double t = a < lo ? lo : a;
  return hi < t ? hi : t;
}

/* pow as PyTorch's with a scalar exponent: x ** 2 is a * a (the correctly
 * rounded result pow would also give, at a fraction of the cost) and
 * x ** 0.5 is sqrt (which differs from pow only at -0 and -inf: -0, NaN). */
static inline float op_powf(float a, float b) {
  return b == 2.0f ? a * a : b == 0.5f ? sqrtf(a) : powf(a, b);
}
static inline double op_pow(double a, double b) {
  return b == 2.0 ? a * a : b == 0.5 ? sqrt(a) : pow(a, b);
}

#endif
