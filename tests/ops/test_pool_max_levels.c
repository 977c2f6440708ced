/* tests/ops/test_pool_max_levels.c: float32 max_pool2d_with_indices at
 * every CPU level (Note [Vector max pool] in src/ops/pool_max_simd.c)
 * against a direct scan written here with PyTorch's rule (the window's
 * first in-range element starts; `v > best || isnan(v)` takes a tap, so the
 * first of tied maxima and the last NaN win). Inputs are small integers
 * (many ties) with NaNs, -inf and signed zeros sprinkled in; geometries
 * cover strides 1, 2 and 3 (3 stays scalar), padding, dilation, ceil_mode,
 * rows narrower and wider than a vector and not a multiple of 8 or 16.
 * Values and indices must match bitwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "ops/op.h"
#include "test.h"

typedef struct lcase {
  int64_t N, C, H, W, k[2], s[2], p[2], d[2];
  bool ceil;
} lcase;

static const lcase lcases[] = {
    {2, 3, 32, 32, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, /* resnet's stem */
    {1, 2, 9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},  /* 20 columns: 16 + a tail */
    {1, 2, 7, 37, {2, 3}, {1, 1}, {0, 1}, {1, 1}, false},  /* stride 1 */
    {1, 1, 6, 50, {3, 2}, {2, 1}, {1, 1}, {1, 2}, true},   /* dilation, ceil_mode */
    {1, 3, 8, 35, {3, 3}, {2, 2}, {1, 1}, {2, 2}, true},   /* dilated stride 2, ceil */
    {2, 1, 5, 5, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},    /* fewer columns than lanes */
    {1, 2, 6, 40, {3, 3}, {3, 3}, {1, 1}, {1, 1}, false},  /* stride 3: scalar at every level */
    {1, 1, 4, 64, {1, 5}, {1, 2}, {0, 2}, {1, 1}, false},  /* one-row windows */
};

static int64_t osize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1;
  int64_t o = (ceil ? (num + s - 1) / s : num / s) + 1;
  if (ceil && (o - 1) * s >= in + p) o--;
  return o;
}

TEST(max_pool2d_indices_every_level_matches_direct_scan) {
  kiln_generator *gen = kiln_generator_new(77);
  int saved = core_cpu_level(), max = core_cpu_max_level();
  for (size_t ci = 0; ci < sizeof lcases / sizeof *lcases; ci++) {
    const lcase *c = &lcases[ci];
    kiln_scope_begin();
    int64_t OH = osize(c->H, c->k[0], c->s[0], c->p[0], c->d[0], c->ceil);
    int64_t OW = osize(c->W, c->k[1], c->s[1], c->p[1], c->d[1], c->ceil);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, n = c->N * c->C * c->H * c->W;
    kiln_tensor *r = kiln_randn(4, xs, KILN_DTYPE_F32, gen);
    kiln_tensor *x = kiln_zeros(4, xs, KILN_DTYPE_F32);
    const float *rv = kiln_tensor_data(r);
    float *xv = kiln_tensor_data(x);
    for (int64_t i = 0; i < n; i++) {
      float v = floorf(rv[i] * 1.5f); /* a handful of values: ties everywhere */
      if (i % 53 == 7) v = NAN;
      else if (i % 41 == 3) v = -INFINITY;
      else if (v == 0 && i % 2) v = -0.0f;
      xv[i] = v;
    }
    int64_t planes = c->N * c->C, no = planes * OH * OW;
    float *want = malloc((size_t)no * sizeof *want);
    int64_t *want_i = malloc((size_t)no * sizeof *want_i);
    CHECK(want && want_i);
    for (int64_t q = 0; want && want_i && q < planes; q++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          float m = -INFINITY;
          int64_t mi = -1;
          for (int64_t i = 0; i < c->k[0]; i++)
            for (int64_t j = 0; j < c->k[1]; j++) {
              int64_t h = oh * c->s[0] - c->p[0] + i * c->d[0];
              int64_t w = ow * c->s[1] - c->p[1] + j * c->d[1];
              if (h < 0 || h >= c->H || w < 0 || w >= c->W) continue;
              float v = xv[(q * c->H + h) * c->W + w];
              if (mi < 0) mi = h * c->W + w; /* the first in-range element */
              if (v > m || isnan(v)) m = v, mi = h * c->W + w;
            }
          want[(q * OH + oh) * OW + ow] = m;
          want_i[(q * OH + oh) * OW + ow] = mi;
        }
    for (int l = CORE_CPU_BASELINE; want && want_i && l <= max; l++) {
      core_cpu_set_level(l);
      op_val args[6] = {OPV_T(x),           OPV_INTS(c->k, 2), OPV_INTS(c->s, 2),
                        OPV_INTS(c->p, 2), OPV_INTS(c->d, 2), OPV_B(c->ceil)};
      kiln_tensor *outs[2] = {0};
      int k = op_call(KILN_OP_MAX_POOL2D_WITH_INDICES, args, 6, outs, 2);
      CHECK_MSG(k == 2, "case %zu level %s: %s", ci, core_cpu_level_name(l), kiln_last_error());
      if (k != 2) continue;
      CHECK(kiln_tensor_numel(outs[0]) == no);
      const float *got = kiln_tensor_data(outs[0]);
      const int64_t *got_i = kiln_tensor_data(outs[1]);
      int bad = 0;
      for (int64_t j = 0; j < no; j++)
        if (memcmp(&got[j], &want[j], sizeof *got) || got_i[j] != want_i[j]) {
          if (!bad)
            CHECK_MSG(false, "case %zu level %s output %lld: %g@%lld, want %g@%lld", ci,
                      core_cpu_level_name(l), (long long)j, got[j], (long long)got_i[j],
                      want[j], (long long)want_i[j]);
          bad++;
        }
      CHECK_MSG(bad == 0, "case %zu level %s: %d bad", ci, core_cpu_level_name(l), bad);
    }
    core_cpu_set_level(saved);
    free(want);
    free(want_i);
    kiln_scope_end();
  }
  kiln_generator_free(gen);
}
