/* tests/ops/test_conv_depthwise.c: conv2d and convolution_backward through
 * the direct depthwise kernels (Note [Depthwise kernels] in
 * src/ops/conv_depthwise.c) against a direct six-loop convolution in
 * double precision, at every CPU level this machine has (float32 results
 * bit-identical between levels) and in float64: odd widths (not a
 * multiple of any vector width), stride 2 and mixed strides, padding 0, 1,
 * 2 and beyond the kernel's extent, dilation 2, channel multipliers 2 and
 * 3, kernels 1x1, 3x3, 5x5, 3x1 and 2x4, and partial output masks; plus
 * finite-difference samples for the table's gradcheck. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_dw.h"
#include "ops/sample.h"
#include "test.h"

typedef struct dw_case {
  int64_t N, G, H, W, mult, KH, KW, st[2], pd[2], dl[2];
  bool bias;
} dw_case;

static const dw_case cases[] = {
    {2, 8, 9, 19, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},    /* MobileNet's, odd width */
    {3, 5, 11, 13, 1, 3, 3, {2, 2}, {1, 1}, {1, 1}, false},  /* stride 2 */
    {2, 4, 7, 37, 1, 3, 3, {1, 1}, {0, 0}, {1, 1}, true},    /* padding 0, wide */
    {2, 3, 8, 10, 1, 3, 3, {1, 1}, {2, 2}, {2, 2}, true},    /* dilation 2, padding 2 */
    {2, 4, 6, 9, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, true},     /* multiplier 2 */
    {1, 3, 10, 12, 3, 5, 5, {2, 1}, {2, 2}, {1, 1}, false},  /* 5x5, mixed strides, x3 */
    {2, 2, 5, 6, 1, 3, 3, {1, 1}, {4, 3}, {1, 1}, true},     /* padding past the extent */
    {2, 6, 7, 17, 2, 3, 1, {1, 2}, {1, 0}, {1, 1}, true},    /* 3x1 */
    {1, 4, 9, 11, 1, 2, 4, {3, 2}, {1, 2}, {2, 1}, false},   /* 2x4, stride 3, dilation */
    {3, 7, 4, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, true},     /* 1x1, width 1 */
    {1, 32, 14, 14, 1, 3, 3, {2, 2}, {1, 1}, {1, 1}, true},  /* MobileNet's stride-2 */
};

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* The direct convolution and its gradients for grad_output go, in double. */
static void reference(const dw_case *c, const double *x, const double *w, const double *b,
                      const double *go, double *y, double *gx, double *gw, double *gb) {
  int64_t OH = out_size(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
  int64_t OW = out_size(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]), O = c->G * c->mult;
  memset(gx, 0, (size_t)(c->N * c->G * c->H * c->W) * sizeof *gx);
  memset(gw, 0, (size_t)(O * c->KH * c->KW) * sizeof *gw);
  memset(gb, 0, (size_t)O * sizeof *gb);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t yi = ((n * O + o) * OH + oh) * OW + ow;
          double s = b ? b[o] : 0;
          gb[o] += go[yi];
          for (int64_t ki = 0; ki < c->KH; ki++)
            for (int64_t kj = 0; kj < c->KW; kj++) {
              int64_t ih = oh * c->st[0] - c->pd[0] + ki * c->dl[0];
              int64_t iw = ow * c->st[1] - c->pd[1] + kj * c->dl[1];
              if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
              int64_t xi = ((n * c->G + o / c->mult) * c->H + ih) * c->W + iw;
              int64_t wi = (o * c->KH + ki) * c->KW + kj;
              s += x[xi] * w[wi];
              gx[xi] += go[yi] * w[wi];
              gw[wi] += go[yi] * x[xi];
            }
          y[yi] = s;
        }
}

/* Elements of t off want by more than tol relative to the largest |want|. */
static int count_off(const kiln_tensor *t, const double *want, int64_t n, double tol) {
  if (!t || kiln_tensor_numel(t) != n) return -1;
  double big = 1e-30;
  for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad += !(fabs(core_get_flat(t, i) - want[i]) <= tol * big);
  return bad;
}

static double *values(kiln_tensor *t) {
  int64_t n = kiln_tensor_numel(t);
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) v[i] = core_get_flat(t, i);
  return v;
}

/* conv2d and convolution_backward (mask m) of one case in dtype dt:
 * r[0] the output, r[1..3] the gradients. Returns false on an error. */
static bool run(const dw_case *c, kiln_dtype dt, kiln_tensor *x, kiln_tensor *w, kiln_tensor *b,
                kiln_tensor *go, const int64_t m[3], kiln_tensor *r[4]) {
  kiln_tensor *xd = kiln_to_dtype(x, dt), *wd = kiln_to_dtype(w, dt);
  kiln_tensor *bd = b ? kiln_to_dtype(b, dt) : NULL, *god = kiln_to_dtype(go, dt);
  r[0] = op_call1(KILN_OP_CONV2D,
                  (op_val[]){OPV_T(xd), OPV_T(wd), OPV_T(bd), OPV_INTS(c->st, 2),
                             OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2), OPV_I(c->G)},
                  7);
  int64_t zero2[2] = {0, 0}, bs[1] = {c->G * c->mult};
  int n = op_call(KILN_OP_CONVOLUTION_BACKWARD,
                  (op_val[]){OPV_T(god), OPV_T(xd), OPV_T(wd), OPV_INTS(bs, 1),
                             OPV_INTS(c->st, 2), OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2),
                             OPV_B(false), OPV_INTS(zero2, 2), OPV_I(c->G), OPV_INTS(m, 3)},
                  11, r + 1, 3);
  return r[0] && n == 3;
}

static bool all_zero(const kiln_tensor *t) {
  for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
    if (core_get_flat(t, i) != 0) return false;
  return true;
}

TEST(conv2d_depthwise_direct_kernels_every_level) {
  int saved = core_cpu_level(), max = core_cpu_max_level();
  kiln_generator *gen = kiln_generator_new(23);
  static const int64_t masks[3][3] = {{1, 1, 1}, {0, 1, 0}, {1, 0, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const dw_case *c = &cases[k];
    kiln_scope_begin();
    int64_t OH = out_size(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
    int64_t OW = out_size(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]), O = c->G * c->mult;
    kiln_tensor *x = kiln_randn(4, (int64_t[]){c->N, c->G, c->H, c->W}, KILN_DTYPE_F64, gen);
    kiln_tensor *w = kiln_randn(4, (int64_t[]){O, 1, c->KH, c->KW}, KILN_DTYPE_F64, gen);
    kiln_tensor *b = c->bias ? kiln_randn(1, (int64_t[]){O}, KILN_DTYPE_F64, gen) : NULL;
    kiln_tensor *go = kiln_randn(4, (int64_t[]){c->N, O, OH, OW}, KILN_DTYPE_F64, gen);
    win_geom geom = {.C = 1, .G = c->G};
    CHECK(op_conv_dw_applies(&geom));
    double *xv = values(x), *wv = values(w), *bv = b ? values(b) : NULL, *gov = values(go);
    double *want[4] = {malloc((size_t)kiln_tensor_numel(go) * sizeof(double)),
                       malloc((size_t)kiln_tensor_numel(x) * sizeof(double)),
                       malloc((size_t)kiln_tensor_numel(w) * sizeof(double)),
                       malloc((size_t)O * sizeof(double))};
    int64_t nums[4] = {kiln_tensor_numel(go), kiln_tensor_numel(x), kiln_tensor_numel(w), O};
    CHECK(xv && wv && gov && want[0] && want[1] && want[2] && want[3]);
    if (xv && wv && gov && want[0] && want[1] && want[2] && want[3]) {
      reference(c, xv, wv, bv, gov, want[0], want[1], want[2], want[3]);
      kiln_tensor *base[4] = {0};
      for (int l = CORE_CPU_BASELINE; l <= max; l++) {
        core_cpu_set_level(l);
        for (int mi = 0; mi < 3; mi++) {
          kiln_tensor *r[4] = {0};
          bool ok = run(c, KILN_DTYPE_F32, x, w, b, go, masks[mi], r);
          CHECK_MSG(ok, "case %zu level %s: %s", k, core_cpu_level_name(l), kiln_last_error());
          if (!ok) continue;
          for (int i = 0; i < 4; i++) {
            if (i && !masks[mi][i - 1]) { /* masked out: zeros, as the GEMM path */
              CHECK_MSG(all_zero(r[i]), "case %zu mask %d: output %d not zero", k, mi, i);
              continue;
            }
            int bad = count_off(r[i], want[i], nums[i], 2e-5);
            CHECK_MSG(bad == 0, "case %zu level %s mask %d, result %d: %d bad", k,
                      core_cpu_level_name(l), mi, i, bad);
            if (mi) continue;
            if (l == CORE_CPU_BASELINE) {
              base[i] = r[i];
            } else if (base[i]) {
              bool same = !memcmp(core_data(base[i]), core_data(r[i]), (size_t)nums[i] * 4);
              CHECK_MSG(same, "case %zu result %d: level %s differs from the baseline", k, i,
                        core_cpu_level_name(l));
            }
          }
        }
      }
      core_cpu_set_level(saved);
      kiln_tensor *r[4] = {0};
      bool ok = run(c, KILN_DTYPE_F64, x, w, b, go, masks[0], r);
      CHECK_MSG(ok, "case %zu float64: %s", k, kiln_last_error());
      for (int i = 0; ok && i < 4; i++) {
        int bad = count_off(r[i], want[i], nums[i], 1e-12);
        CHECK_MSG(bad == 0, "case %zu float64 result %d: %d bad", k, i, bad);
      }
    }
    free(xv), free(wv), free(bv), free(gov);
    for (int i = 0; i < 4; i++) free(want[i]);
    kiln_scope_end();
  }
  core_cpu_set_level(saved);
  kiln_generator_free(gen);
}

/* Through autograd on non-contiguous inputs (conv2d copies them) and with
 * two threads or one: the same values. */
TEST(conv2d_depthwise_autograd_and_threads_agree) {
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(29);
  kiln_tensor *x = kiln_transpose(kiln_randn(4, (int64_t[]){2, 6, 21, 18}, KILN_DTYPE_F32, gen), 2, 3);
  kiln_tensor *w = kiln_randn(4, (int64_t[]){12, 1, 3, 3}, KILN_DTYPE_F32, gen);
  kiln_tensor *b = kiln_randn(1, (int64_t[]){12}, KILN_DTYPE_F32, gen);
  int64_t one[2] = {1, 1}, two[2] = {2, 2};
  kiln_tensor *res[2][4] = {{0}};
  int saved = omp_get_max_threads();
  for (int t = 0; t < 2; t++) {
    omp_set_num_threads(t ? 2 : 1);
    kiln_tensor *xi = kiln_detach(x), *wi = kiln_detach(w), *bi = kiln_detach(b);
    kiln_set_requires_grad(xi, true), kiln_set_requires_grad(wi, true);
    kiln_set_requires_grad(bi, true);
    kiln_tensor *y = op_call1(KILN_OP_CONV2D,
                              (op_val[]){OPV_T(xi), OPV_T(wi), OPV_T(bi), OPV_INTS(one, 2),
                                         OPV_INTS(two, 2), OPV_INTS(two, 2), OPV_I(6)},
                              7);
    CHECK(y && kiln_backward(kiln_sum(kiln_mul(y, y), NULL, 0, false), NULL) == 0);
    res[t][0] = y, res[t][1] = kiln_tensor_grad(xi), res[t][2] = kiln_tensor_grad(wi);
    res[t][3] = kiln_tensor_grad(bi);
  }
  omp_set_num_threads(saved);
  for (int i = 0; i < 4; i++) {
    CHECK(res[0][i] && res[1][i]);
    if (!res[0][i] || !res[1][i]) continue;
    double d = -1;
    CHECK(kiln_item(kiln_amax(kiln_abs(kiln_sub(res[0][i], res[1][i])), NULL, 0, false), &d) == 0);
    CHECK_MSG(d == 0, "result %d differs by %g", i, d);
  }
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* gradcheck (float64 finite differences) through the direct kernels. */
OP_SAMPLE(CONV2D, depthwise_mult2_stride_dilation) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){1, 2, 4, 7}));
  s->args[1] = OPV_T(sample_randn(g, 4, (int64_t[]){4, 1, 3, 3}));
  s->args[2] = OPV_NONE;
  s->ints[0][0] = 2, s->ints[0][1] = 1; /* stride */
  s->ints[1][0] = 2, s->ints[1][1] = 1; /* padding */
  s->ints[2][0] = 1, s->ints[2][1] = 2; /* dilation */
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[2], 2);
  s->args[6] = OPV_I(2);
  s->n_args = 7;
}
OP_SAMPLE(CONV2D, depthwise_bias_no_padding) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){1, 3, 3, 5}));
  s->args[1] = OPV_T(sample_randn(g, 4, (int64_t[]){3, 1, 2, 3}));
  s->args[2] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
  s->ints[0][0] = 1, s->ints[0][1] = 1;
  s->ints[1][0] = 0, s->ints[1][1] = 0;
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[0], 2);
  s->args[6] = OPV_I(3);
  s->n_args = 7;
}
