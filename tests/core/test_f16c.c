/* tests/core/test_f16c.c: the F16C half conversions (Note [F16C] in
 * src/core/half_f16c.c) give the scalar round-to-nearest-even path's bits
 * at every CPU level: all 65536 halves to float, and float32 values
 * around every half (ties, subnormals, overflow, NaN payloads) to half. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/cpu.h"
#include "core/half.h"
#include "test.h"

TEST(f16c_half_to_float_every_value_every_level) {
  uint16_t *src = malloc(65536 * 2 + 2);
  float *dst = malloc(65536 * 4 + 4);
  CHECK(src && dst);
  if (!src || !dst) goto done;
  for (uint32_t i = 0; i < 65536; i++) src[i] = (uint16_t)i;
  int saved = core_cpu_level();
  for (int lv = 0; lv <= core_cpu_max_level(); lv++) {
    core_cpu_set_level(lv);
    /* the whole range, and an odd length from an odd start (the tail) */
    core_convert_run(dst, KILN_DTYPE_F32, src, KILN_DTYPE_F16, 1, 65536);
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++)
      if (core_f32_bits(dst[i]) != core_f32_bits(core_f16_to_f32((uint16_t)i)) && bad++ < 3)
        CHECK_MSG(0, "level %s: half %04x -> %08x, scalar %08x", core_cpu_level_name(lv), i,
                  core_f32_bits(dst[i]), core_f32_bits(core_f16_to_f32((uint16_t)i)));
    CHECK_EQ_INT(bad, 0);
    for (int n = 1; n <= 21; n += 4) {
      core_convert_run(dst, KILN_DTYPE_F32, src + 0x7c00 - 3, KILN_DTYPE_F16, 1, n);
      for (int k = 0; k < n; k++)
        CHECK(core_f32_bits(dst[k]) == core_f32_bits(core_f16_to_f32((uint16_t)(0x7c00 - 3 + k))));
    }
  }
  core_cpu_set_level(saved);
done:
  free(src);
  free(dst);
}

TEST(f16c_float_to_half_ties_subnormals_nans_every_level) {
  /* every float32 exponent and sign (the top 16 bits), with low bits that
   * land exactly on, just below and just above a half's rounding tie, and
   * on NaN payloads and float32 subnormals */
  static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff,
                                  0x2000, 0x3000, 0x7fff, 0x8000, 0xffff};
  const int nl = (int)(sizeof lows / sizeof *lows);
  const long n = 65536L * nl;
  float *src = malloc((size_t)n * 4);
  uint16_t *dst = malloc((size_t)n * 2);
  CHECK(src && dst);
  if (!src || !dst) goto done;
  for (long i = 0; i < n; i++) src[i] = core_f32_from_bits(((uint32_t)(i / nl) << 16) | lows[i % nl]);
  int saved = core_cpu_level();
  for (int lv = 0; lv <= core_cpu_max_level(); lv++) {
    core_cpu_set_level(lv);
    core_convert_run(dst, KILN_DTYPE_F16, src, KILN_DTYPE_F32, 1, n);
    int bad = 0;
    for (long i = 0; i < n; i++)
      if (dst[i] != core_f32_to_f16(src[i]) && bad++ < 3)
        CHECK_MSG(0, "level %s: float %08x -> %04x, scalar %04x", core_cpu_level_name(lv),
                  core_f32_bits(src[i]), dst[i], core_f32_to_f16(src[i]));
    CHECK_EQ_INT(bad, 0);
    /* hand-picked: a tie to even (1 + 2^-11 -> 1), the smallest half
     * subnormal's half (2^-25 -> 0), 65520 -> inf, NaN payloads -> 0x7e00 */
    static const uint32_t f[] = {0x3f801000, 0x3f803000, 0x33000000, 0x33000001, 0x477ff000,
                                 0x477fefff, 0x7f800001, 0xffc00001, 0x7fffffff, 0x00000001};
    static const uint16_t h[] = {0x3c00, 0x3c02, 0x0000, 0x0001, 0x7c00,
                                 0x7bff, 0x7e00, 0xfe00, 0x7e00, 0x0000};
    for (int k = 0; k < 10; k++) {
      float x = core_f32_from_bits(f[k]);
      uint16_t out;
      core_convert_run(&out, KILN_DTYPE_F16, &x, KILN_DTYPE_F32, 1, 1);
      CHECK_MSG(out == h[k], "level %s: %08x -> %04x, want %04x", core_cpu_level_name(lv), f[k],
                out, h[k]);
    }
  }
  core_cpu_set_level(saved);
done:
  free(src);
  free(dst);
}
