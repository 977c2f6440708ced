/* src/core/half.h: float16 and bfloat16 <-> float32, bit-exact with
 * PyTorch's c10::Half and c10::BFloat16 (Note [Half conversions]). */
#ifndef KILN_CORE_HALF_H
#define KILN_CORE_HALF_H

#include <stdint.h>
#include <string.h>

/* Note [Half conversions]: float32 -> float16 rounds to nearest even,
 * overflows to infinity, keeps subnormals (no flush to zero) and gives
 * the NaN 0x7e00 with the input's sign; float16 -> float32 is exact.
 * Written as c10 (the FP16 library's fp16_ieee_from_fp32_value): float
 * arithmetic does the rounding, so it needs round-to-nearest and no
 * FTZ/DAZ, which kiln never sets. bfloat16 is float32's top half: from
 * float32 rounding to nearest even, a NaN giving 0x7fc0 (c10's
 * round_to_nearest_even). Checked bit-exactly against PyTorch 1.13
 * (tests/core/test_half.c). A double becomes a half through float32, as
 * PyTorch's static_cast does (two roundings). */
static inline uint32_t core_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float core_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint16_t core_f32_to_f16(float f) {
  const float scale_to_inf = core_f32_from_bits(UINT32_C(0x77800000));
  const float scale_to_zero = core_f32_from_bits(UINT32_C(0x08800000));
  float base = (__builtin_fabsf(f) * scale_to_inf) * scale_to_zero;
  uint32_t w = core_f32_bits(f);
  uint32_t shl1_w = w + w;
  uint32_t sign = w & UINT32_C(0x80000000);
  uint32_t bias = shl1_w & UINT32_C(0xFF000000);
  if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);
  base = core_f32_from_bits((bias >> 1) + UINT32_C(0x07800000)) + base;
  uint32_t bits = core_f32_bits(base);
  uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
  uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
  uint32_t nonsign = exp_bits + mantissa_bits;
  return (uint16_t)((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? UINT16_C(0x7E00) : nonsign));
}

static inline float core_f16_to_f32(uint16_t h) {
  uint32_t w = (uint32_t)h << 16;
  uint32_t sign = w & UINT32_C(0x80000000);
  uint32_t two_w = w + w;
  uint32_t exp_offset = UINT32_C(0xE0) << 23;
  float exp_scale = core_f32_from_bits(UINT32_C(0x7800000));
  float normalized = core_f32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
  uint32_t magic_mask = UINT32_C(126) << 23;
  float denormalized = core_f32_from_bits((two_w >> 17) | magic_mask) - 0.5f;
  uint32_t cutoff = UINT32_C(1) << 27;
  uint32_t r = sign | (two_w < cutoff ? core_f32_bits(denormalized) : core_f32_bits(normalized));
  return core_f32_from_bits(r);
}

static inline uint16_t core_f32_to_bf16(float f) {
  if (f != f) return UINT16_C(0x7FC0);
  uint32_t u = core_f32_bits(f);
  uint32_t rounding_bias = ((u >> 16) & 1) + UINT32_C(0x7FFF);
  return (uint16_t)((u + rounding_bias) >> 16);
}

static inline float core_bf16_to_f32(uint16_t b) { return core_f32_from_bits((uint32_t)b << 16); }

/* n contiguous conversions with F16C (half_f16c.c, Note [F16C]): only at
 * the avx2 or avx512 CPU level (core_cpu_level()); bit-identical to the
 * scalar ones above. Never fail. */
void core_f16c_from_f32(uint16_t *dst, const float *src, int64_t n);
void core_f16c_to_f32(float *dst, const uint16_t *src, int64_t n);

#endif
