/* tests/ops/test_pool_max.c: aten::max_pool2d's values-only path (Note
 * [Separable max] in src/ops/pool_max.c: no gradient needed) against a
 * direct window maximum, and equal to the indices path (grad required):
 * odd sizes, strides, padding, ceil_mode, a NaN, float32 and float64. The
 * kernel is plain C (no CPU levels). */
#include <math.h>
#include <stdlib.h>

#include "ops/op.h"
#include "test.h"

typedef struct pcase {
  int64_t N, C, H, W, k[2], s[2], p[2];
  bool ceil, nan;
} pcase;

static const pcase cases[] = {
    {2, 3, 9, 8, {3, 3}, {2, 2}, {1, 1}, false, false}, /* resnet's stem, odd */
    {1, 2, 7, 7, {2, 2}, {2, 2}, {0, 0}, false, true},  /* a NaN */
    {2, 1, 6, 5, {3, 2}, {1, 2}, {1, 1}, true, false},  /* ceil_mode, uneven */
    {1, 4, 8, 8, {3, 3}, {2, 2}, {1, 1}, true, false},  /* ceil_mode window at the edge */
    {3, 2, 1, 5, {1, 3}, {1, 1}, {0, 1}, false, true},  /* one row */
};

static int64_t osize(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
  int64_t num = in + 2 * p - k;
  int64_t o = (ceil ? (num + s - 1) / s : num / s) + 1;
  if (ceil && (o - 1) * s >= in + p) o--;
  return o;
}

TEST(max_pool2d_values_match_direct_windows) {
  kiln_generator *gen = kiln_generator_new(31);
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const pcase *c = &cases[ci];
    kiln_scope_begin();
    int64_t OH = osize(c->H, c->k[0], c->s[0], c->p[0], c->ceil);
    int64_t OW = osize(c->W, c->k[1], c->s[1], c->p[1], c->ceil);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, n = c->N * c->C * c->H * c->W;
    kiln_tensor *x = kiln_randn(4, xs, KILN_DTYPE_F64, gen);
    double *xv = kiln_tensor_data(x);
    if (c->nan) xv[n / 2] = NAN;
    int64_t planes = c->N * c->C, no = planes * OH * OW;
    double *want = malloc((size_t)no * sizeof *want);
    CHECK(want != NULL);
    for (int64_t q = 0; want && q < planes; q++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double m = -INFINITY;
          for (int64_t i = 0; i < c->k[0]; i++)
            for (int64_t j = 0; j < c->k[1]; j++) {
              int64_t h = oh * c->s[0] - c->p[0] + i, w = ow * c->s[1] - c->p[1] + j;
              if (h < 0 || h >= c->H || w < 0 || w >= c->W) continue;
              double v = xv[(q * c->H + h) * c->W + w];
              if (isnan(v) || v > m) m = isnan(m) ? m : v;
            }
          want[(q * OH + oh) * OW + ow] = m;
        }
    int64_t one[2] = {1, 1};
    for (int d = 0; want && d < 2; d++) {
      kiln_dtype dt = d ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
      for (int grad = 0; grad < 2; grad++) {
        kiln_tensor *xd = kiln_clone(kiln_to_dtype(x, dt));
        if (grad) kiln_set_requires_grad(xd, true);
        kiln_tensor *y = op_call1(KILN_OP_MAX_POOL2D,
                                  (op_val[]){OPV_T(xd), OPV_INTS(c->k, 2), OPV_INTS(c->s, 2),
                                             OPV_INTS(c->p, 2), OPV_INTS(one, 2),
                                             OPV_B(c->ceil)},
                                  6);
        CHECK_MSG(y && kiln_tensor_numel(y) == no && y->shape[2] == OH && y->shape[3] == OW,
                  "case %zu: %s", ci, y ? "wrong shape" : kiln_last_error());
        if (!y || kiln_tensor_numel(y) != no) continue;
        CHECK_MSG(y->requires_grad == (grad != 0), "case %zu: requires_grad", ci);
        int bad = 0;
        for (int64_t i = 0; i < no; i++) {
          double got = core_get_flat(y, i), w = d ? want[i] : (double)(float)want[i];
          bad += !(got == w || (isnan(got) && isnan(w)));
        }
        CHECK_MSG(bad == 0, "case %zu, %s, grad %d: %d bad", ci, kiln_dtype_name(dt), grad, bad);
      }
    }
    free(want);
    kiln_scope_end();
  }
  kiln_generator_free(gen);
}
