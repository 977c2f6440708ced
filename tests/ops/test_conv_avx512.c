/* tests/ops/test_conv_avx512.c: the implicit-im2col float32 forward at
 * AVX-512 and at AVX2 (Note [Implicit im2col] in src/ops/conv_avx512.c,
 * Note [Implicit im2col at AVX2] in conv_avx2.c) against a direct
 * convolution in double with the fused epilogue (scale, shift, residual,
 * relu), and against conv_gemm.c's path: the dot-product path (few
 * positions), row loads and gathers, outputs stored whole and scattered
 * across images, channel counts off the 8- and 6-row tiles, blocks past
 * one, blocks shared between threads by units, groups, one thread against
 * two (bitwise), and the two levels against each other (bitwise). Each
 * level is skipped where the CPU lacks it. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv.h"
#include "test.h"

typedef struct imp_case {
  int64_t N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G;
  bool scale, shift, residual, relu;
} imp_case;

static const imp_case cases[] = {
    {1, 256, 2, 2, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, true},   /* P 4: dots */
    {1, 24, 4, 4, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true, false, false}, /* P 16: dots */
    {1, 9, 5, 4, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, true, true},    /* P 20: gemm */
    {3, 7, 16, 16, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, true},   /* row loads */
    {5, 6, 4, 4, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, false},    /* L 16: 1 image/vector */
    {4, 10, 5, 6, 9, 3, 2, 2, 1, 1, 0, 1, 2, 1, false, false, true, true},   /* L 9: scatters */
    {2, 3, 30, 33, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, true, false, true},  /* conv1-like */
    {2, 1, 90, 80, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, false, false}, /* K 1, many blocks */
    {2, 12, 9, 9, 12, 3, 3, 1, 1, 2, 2, 2, 2, 3, false, true, true, true},   /* groups, dilation */
    {3, 32, 8, 8, 40, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, true, true, true},    /* 1x1 stride 2 */
    /* K 576: 3 blocks at AVX-512 (5 at AVX2) of 529 positions, shared by
     * units, so a thread's blocks start mid-way (Note [Balanced position
     * blocks]) */
    {1, 64, 23, 23, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, true},
};

static int64_t osz(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* The epilogue'd convolution in double. */
static void reference(const imp_case *c, int64_t OH, int64_t OW, const float *x, const float *w,
                      const float *sc, const float *sh, const float *res, double *y) {
  int64_t Cg = c->C / c->G, Og = c->O / c->G;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double s = 0;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < c->KH; ki++)
              for (int64_t kj = 0; kj < c->KW; kj++) {
                int64_t ih = oh * c->sh - c->ph + ki * c->dh, iw = ow * c->sw - c->pw + kj * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                s += (double)x[((n * c->C + o / Og * Cg + ci) * c->H + ih) * c->W + iw] *
                     w[((o * Cg + ci) * c->KH + ki) * c->KW + kj];
              }
          int64_t at = ((n * c->O + o) * OH + oh) * OW + ow;
          if (sc) s *= sc[o];
          if (sh) s += sh[o];
          if (res) s += res[at];
          y[at] = c->relu && s < 0 ? 0 : s;
        }
}

typedef int (*conv_kernel)(const win_geom *, const float *, const float *, const conv_epilogue *,
                           float *);

/* Every case through kern at level: against the double reference, 1
 * thread against 2, and conv_gemm.c's path. */
static void check_kernel(int level, conv_kernel kern) {
  int saved = core_cpu_level();
  core_cpu_set_level(level);
  unsigned seed = 7;
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const imp_case *c = &cases[k];
    int64_t OH = osz(c->H, c->KH, c->sh, c->ph, c->dh), OW = osz(c->W, c->KW, c->sw, c->pw, c->dw);
    win_geom g = {.N = c->N, .C = c->C / c->G, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH,
                  .KW = c->KW, .OH = OH, .OW = OW, .sh = c->sh, .sw = c->sw, .ph = c->ph,
                  .pw = c->pw, .dh = c->dh, .dw = c->dw, .G = c->G};
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C / c->G * c->KH * c->KW);
    size_t no = (size_t)(c->N * c->O * OH * OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *res = malloc(no * 4), *ch = malloc((size_t)c->O * 8);
    float *o1 = malloc(no * 4), *o2 = malloc(no * 4), *o3 = malloc(no * 4);
    double *y = malloc(no * sizeof *y);
    CHECK(x && w && res && ch && o1 && o2 && o3 && y);
    if (!(x && w && res && ch && o1 && o2 && o3 && y)) goto next;
    for (size_t i = 0; i < nx; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < nw; i++) w[i] = frand(&seed);
    for (size_t i = 0; i < no; i++) res[i] = frand(&seed);
    for (int64_t i = 0; i < 2 * c->O; i++) ch[i] = frand(&seed) + 1.5f;
    const float *sc = c->scale ? ch : NULL, *shv = c->shift ? ch + c->O : NULL;
    const float *rv = c->residual ? res : NULL;
    conv_epilogue ep = {.scale = (const char *)sc, .shift = (const char *)shv,
                        .residual = (const char *)rv, .relu = c->relu};
    reference(c, OH, OW, x, w, sc, shv, rv, y);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc1 = kern(&g, x, w, &ep, o1);
    omp_set_num_threads(2);
    int rc2 = kern(&g, x, w, &ep, o2);
    omp_set_num_threads(nt);
    op_conv_implicit = false;
    int rc3 = op_conv_forward_ep(KILN_DTYPE_F32, &g, (const char *)x, (const char *)w, &ep,
                                 (char *)o3);
    op_conv_implicit = true;
    CHECK_MSG(rc1 == 1 && rc2 == 1 && rc3 == 0, "case %zu: rc %d %d %d", k, rc1, rc2, rc3);
    double big = 1e-30;
    for (size_t i = 0; i < no; i++) big = fmax(big, fabs(y[i]));
    int bad = 0, diff = 0, gemm = 0;
    for (size_t i = 0; i < no; i++) {
      bad += !(fabs(o1[i] - y[i]) <= 1e-5 * big);
      diff += o1[i] != o2[i];
      gemm += !(fabs(o1[i] - o3[i]) <= 1e-5 * big);
    }
    CHECK_MSG(bad == 0 && diff == 0 && gemm == 0,
              "level %d case %zu: %d off the direct conv, %d differ between 1 and 2 threads, %d "
              "off conv_gemm.c's",
              level, k, bad, diff, gemm);
  next:
    free(x), free(w), free(res), free(ch), free(o1), free(o2), free(o3), free(y);
  }
  core_cpu_set_level(saved);
}

TEST(conv2d_implicit_im2col_equals_direct_and_gemm_path) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  check_kernel(CORE_CPU_AVX512, op_conv_forward_avx512);
}

TEST(conv2d_implicit_im2col_avx2_equals_direct_and_gemm_path) {
  if (core_cpu_max_level() < CORE_CPU_AVX2) return; /* nothing to test on this CPU */
  check_kernel(CORE_CPU_AVX2, op_conv_forward_avx2);
}

/* The AVX2 kernels form each output's sum as the AVX-512 ones do (Note
 * [Implicit im2col at AVX2], Note [Winograd at AVX2]): bitwise the same
 * outputs for every case, through the direct tiles and through Winograd
 * (which rounds differently from the direct tiles; test_conv_winograd.c
 * bounds it). */
TEST(conv2d_implicit_im2col_avx2_bitwise_equals_avx512) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* needs both levels */
  int saved = core_cpu_level();
  unsigned seed = 11;
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const imp_case *c = &cases[k];
    int64_t OH = osz(c->H, c->KH, c->sh, c->ph, c->dh), OW = osz(c->W, c->KW, c->sw, c->pw, c->dw);
    win_geom g = {.N = c->N, .C = c->C / c->G, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH,
                  .KW = c->KW, .OH = OH, .OW = OW, .sh = c->sh, .sw = c->sw, .ph = c->ph,
                  .pw = c->pw, .dh = c->dh, .dw = c->dw, .G = c->G};
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C / c->G * c->KH * c->KW);
    size_t no = (size_t)(c->N * c->O * OH * OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *res = malloc(no * 4), *ch = malloc((size_t)c->O * 8);
    float *o1 = malloc(no * 4), *o2 = malloc(no * 4);
    CHECK(x && w && res && ch && o1 && o2);
    if (!(x && w && res && ch && o1 && o2)) goto next;
    for (size_t i = 0; i < nx; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < nw; i++) w[i] = frand(&seed);
    for (size_t i = 0; i < no; i++) res[i] = frand(&seed);
    for (int64_t i = 0; i < 2 * c->O; i++) ch[i] = frand(&seed) + 1.5f;
    conv_epilogue ep = {.scale = c->scale ? (const char *)ch : NULL,
                        .shift = c->shift ? (const char *)(ch + c->O) : NULL,
                        .residual = c->residual ? (const char *)res : NULL, .relu = c->relu};
    for (int wino = 0; wino < 2; wino++) { /* the direct tiles, then Winograd where it applies */
      op_conv_winograd = wino;
      core_cpu_set_level(CORE_CPU_AVX512);
      int rc1 = op_conv_forward_avx512(&g, x, w, &ep, o1);
      core_cpu_set_level(CORE_CPU_AVX2);
      int rc2 = op_conv_forward_avx2(&g, x, w, &ep, o2);
      op_conv_winograd = true;
      CHECK_MSG(rc1 == 1 && rc2 == 1, "case %zu: rc %d %d", k, rc1, rc2);
      int diff = 0;
      for (size_t i = 0; i < no; i++) diff += memcmp(&o1[i], &o2[i], 4) != 0;
      CHECK_MSG(diff == 0, "case %zu, winograd %d: %d of %zu outputs differ between AVX-512 and AVX2",
                k, wino, diff, no);
    }
  next:
    free(x), free(w), free(res), free(ch), free(o1), free(o2);
  }
  core_cpu_set_level(saved);
}

TEST(conv2d_implicit_im2col_relu_keeps_nan_and_declines_other_levels) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  int saved = core_cpu_level();
  /* one input NaN reaches the outputs whose windows hold it, through relu
   * (max(NaN, 0) stays NaN, as torch.relu); 3x3, padding 1, 6x6 */
  win_geom g = {.N = 1, .C = 2, .H = 6, .W = 6, .O = 3, .KH = 3, .KW = 3, .OH = 6, .OW = 6,
                .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .G = 1};
  float x[72], w[54], out[108];
  for (int i = 0; i < 72; i++) x[i] = 1.0f;
  for (int i = 0; i < 54; i++) w[i] = -1.0f;
  x[0] = NAN; /* channel 0, (0, 0): outputs (0..1, 0..1) of every channel */
  conv_epilogue ep = {.relu = true};
  core_cpu_set_level(CORE_CPU_AVX512);
  CHECK_EQ_INT(op_conv_forward_avx512(&g, x, w, &ep, out), 1);
  int nans = 0, zeros = 0;
  for (int i = 0; i < 108; i++) nans += isnan(out[i]), zeros += out[i] == 0.0f;
  CHECK_EQ_INT(nans, 12);
  CHECK_EQ_INT(zeros, 96);
  core_cpu_set_level(CORE_CPU_AVX2);
  CHECK_EQ_INT(op_conv_forward_avx512(&g, x, w, &ep, out), 0);
  for (int i = 0; i < 108; i++) out[i] = 5.0f;
  CHECK_EQ_INT(op_conv_forward_avx2(&g, x, w, &ep, out), 1);
  nans = zeros = 0;
  for (int i = 0; i < 108; i++) nans += isnan(out[i]), zeros += out[i] == 0.0f;
  CHECK_EQ_INT(nans, 12);
  CHECK_EQ_INT(zeros, 96);
  core_cpu_set_level(CORE_CPU_AVX512);
  CHECK_EQ_INT(op_conv_forward_avx2(&g, x, w, &ep, out), 0);
  core_cpu_set_level(CORE_CPU_BASELINE);
  CHECK_EQ_INT(op_conv_forward_avx2(&g, x, w, &ep, out), 0);
  core_cpu_set_level(saved);
}

/* gw[o, c, ki, kj] = sum over n, oh, ow of go[n, o, oh, ow] x[n, g c, ih, iw], in double. */
static void reference_wgrad(const imp_case *c, int64_t OH, int64_t OW, const float *x,
                            const float *go, double *gw) {
  int64_t Cg = c->C / c->G, Og = c->O / c->G;
  for (int64_t o = 0; o < c->O; o++)
    for (int64_t ci = 0; ci < Cg; ci++)
      for (int64_t ki = 0; ki < c->KH; ki++)
        for (int64_t kj = 0; kj < c->KW; kj++) {
          double s = 0;
          for (int64_t n = 0; n < c->N; n++)
            for (int64_t oh = 0; oh < OH; oh++)
              for (int64_t ow = 0; ow < OW; ow++) {
                int64_t ih = oh * c->sh - c->ph + ki * c->dh, iw = ow * c->sw - c->pw + kj * c->dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                s += (double)x[((n * c->C + o / Og * Cg + ci) * c->H + ih) * c->W + iw] *
                     go[((n * c->O + o) * OH + oh) * OW + ow];
              }
          gw[((o * Cg + ci) * c->KH + ki) * c->KW + kj] = s;
        }
}

/* The weight gradient (Note [Implicit weight gradient]): odd channel
 * counts (K off the 32-wide panels, O off the 8-row tiles), strides,
 * padding, dilation, groups, position blocks past one and cut inside an
 * image, images of 1 to 1000+ positions; against the direct sums in
 * double, conv_gemm.c's path, and itself at 1 and 2 threads (bitwise).
 * gw is overwritten: it starts as NaN. */
TEST(conv2d_implicit_weight_gradient_equals_direct_and_gemm_path) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  static const imp_case wcases[] = {
      {1, 5, 3, 3, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    /* P 9, K 45 */
      {3, 7, 16, 16, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  /* row loads, 6 blocks */
      {16, 20, 2, 2, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, /* 2x2 images: quads */
      {4, 10, 5, 6, 9, 3, 2, 2, 1, 1, 0, 1, 2, 1, 0, 0, 0, 0},   /* stride, dilation: gathers */
      {2, 3, 30, 33, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 0, 0, 0}, /* conv1-like: K 147 */
      {2, 12, 9, 9, 12, 3, 3, 1, 1, 2, 2, 2, 2, 3, 0, 0, 0, 0},  /* groups 3 */
      {3, 33, 8, 8, 40, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0, 0, 0},  /* 1x1 stride 2, K 33 */
      {5, 3, 7, 5, 6, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0},    /* no padding, K 27 < 32 */
  };
  int saved = core_cpu_level();
  core_cpu_set_level(CORE_CPU_AVX512);
  unsigned seed = 11;
  for (size_t k = 0; k < sizeof wcases / sizeof *wcases; k++) {
    const imp_case *c = &wcases[k];
    int64_t OH = osz(c->H, c->KH, c->sh, c->ph, c->dh), OW = osz(c->W, c->KW, c->sw, c->pw, c->dw);
    win_geom g = {.N = c->N, .C = c->C / c->G, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH,
                  .KW = c->KW, .OH = OH, .OW = OW, .sh = c->sh, .sw = c->sw, .ph = c->ph,
                  .pw = c->pw, .dh = c->dh, .dw = c->dw, .G = c->G};
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C / c->G * c->KH * c->KW);
    size_t no = (size_t)(c->N * c->O * OH * OW);
    float *x = malloc(nx * 4), *go = malloc(no * 4), *g1 = malloc(nw * 4), *g2 = malloc(nw * 4);
    float *g3 = malloc(nw * 4);
    double *y = malloc(nw * sizeof *y);
    CHECK(x && go && g1 && g2 && g3 && y);
    if (!(x && go && g1 && g2 && g3 && y)) goto next;
    for (size_t i = 0; i < nx; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < no; i++) go[i] = frand(&seed);
    reference_wgrad(c, OH, OW, x, go, y);
    for (size_t i = 0; i < nw; i++) g1[i] = g2[i] = NAN, g3[i] = 0.0f;
    CHECK(op_conv_wgrad_avx512_applies(KILN_DTYPE_F32, &g));
    CHECK(!op_conv_wgrad_avx512_applies(KILN_DTYPE_F64, &g));
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc1 = op_conv_wgrad_avx512(&g, x, go, g1);
    omp_set_num_threads(2);
    int rc2 = op_conv_wgrad_avx512(&g, x, go, g2);
    omp_set_num_threads(nt);
    op_conv_implicit = false;
    bool mask[3] = {false, true, false};
    int rc3 = op_conv_backward(KILN_DTYPE_F32, &g, mask, (const char *)x, NULL, (const char *)go,
                               NULL, (char *)g3);
    op_conv_implicit = true;
    CHECK_MSG(rc1 == 0 && rc2 == 0 && rc3 == 0, "case %zu: rc %d %d %d", k, rc1, rc2, rc3);
    double big = 1e-30;
    for (size_t i = 0; i < nw; i++) big = fmax(big, fabs(y[i]));
    int bad = 0, diff = 0, gemm = 0;
    for (size_t i = 0; i < nw; i++) {
      bad += !(fabs(g1[i] - y[i]) <= 1e-5 * big);
      diff += g1[i] != g2[i];
      gemm += !(fabs(g1[i] - g3[i]) <= 1e-5 * big);
    }
    CHECK_MSG(bad == 0 && diff == 0 && gemm == 0,
              "case %zu: %d off the direct sums, %d differ between 1 and 2 threads, %d off "
              "conv_gemm.c's",
              k, bad, diff, gemm);
  next:
    free(x), free(go), free(g1), free(g2), free(g3), free(y);
  }
  core_cpu_set_level(saved);
}

/* Note [Flipped weights]: the forward with the weight read transposed
 * and flipped in place equals the forward with the flipped copy bit for
 * bit (the same sums in the same order), at 1 and 2 threads, over odd
 * channel counts, kernels 3x3, 2x3 and 1x1 with padding, dilation, and
 * blocks past one; few positions and groups decline. */
TEST(conv2d_implicit_flipped_weight_equals_flipped_copy) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  static const imp_case fcases[] = {
      {3, 7, 16, 16, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {16, 20, 2, 2, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {4, 10, 5, 6, 9, 2, 3, 1, 1, 1, 0, 1, 2, 1, 0, 0, 0, 0},
      {2, 33, 9, 9, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0},
  };
  int saved = core_cpu_level();
  core_cpu_set_level(CORE_CPU_AVX512);
  unsigned seed = 5;
  for (size_t k = 0; k < sizeof fcases / sizeof *fcases; k++) {
    const imp_case *c = &fcases[k];
    int64_t OH = osz(c->H, c->KH, c->sh, c->ph, c->dh), OW = osz(c->W, c->KW, c->sw, c->pw, c->dw);
    win_geom g = {.N = c->N, .C = c->C, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH,
                  .KW = c->KW, .OH = OH, .OW = OW, .sh = 1, .sw = 1, .ph = c->ph,
                  .pw = c->pw, .dh = c->dh, .dw = c->dw, .G = 1};
    int64_t KK = c->KH * c->KW;
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C * KK);
    size_t no = (size_t)(c->N * c->O * OH * OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *wf = malloc(nw * 4);
    float *o1 = malloc(no * 4), *o2 = malloc(no * 4), *o3 = malloc(no * 4);
    CHECK(x && w && wf && o1 && o2 && o3);
    if (!(x && w && wf && o1 && o2 && o3)) goto next;
    for (size_t i = 0; i < nx; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < nw; i++) w[i] = frand(&seed);
    /* w holds [C][O][KK] (an original conv's weight, C its out channels);
     * wf[o][c][t] = w[c][o][KK - 1 - t] */
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t ci = 0; ci < c->C; ci++)
        for (int64_t t = 0; t < KK; t++)
          wf[(o * c->C + ci) * KK + t] = w[(ci * c->O + o) * KK + KK - 1 - t];
    int nt = omp_get_max_threads();
    op_conv_winograd = false; /* the direct tiles (test_conv_winograd.c has its own) */
    omp_set_num_threads(1);
    int rc1 = op_conv_forward_avx512_flipped(&g, x, w, o1);
    omp_set_num_threads(2);
    int rc2 = op_conv_forward_avx512_flipped(&g, x, w, o2);
    omp_set_num_threads(nt);
    int rc3 = op_conv_forward_avx512(&g, x, wf, NULL, o3);
    op_conv_winograd = true;
    CHECK_MSG(rc1 == 1 && rc2 == 1 && rc3 == 1, "case %zu: rc %d %d %d", k, rc1, rc2, rc3);
    int diff = 0;
    for (size_t i = 0; i < no; i++) diff += o1[i] != o3[i] || o2[i] != o3[i];
    CHECK_MSG(diff == 0, "case %zu: %d outputs differ from the flipped copy's", k, diff);
  next:
    free(x), free(w), free(wf), free(o1), free(o2), free(o3);
  }
  win_geom one = {.N = 1, .C = 4, .H = 3, .W = 3, .O = 4, .KH = 3, .KW = 3, .OH = 3, .OW = 3,
                  .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .G = 1};
  float x[36] = {0}, w[144] = {0}, out[36];
  CHECK_EQ_INT(op_conv_forward_avx512_flipped(&one, x, w, out), 0); /* P 9: dots decline */
  one.G = 2, one.C = 2;
  CHECK_EQ_INT(op_conv_forward_avx512_flipped(&one, x, w, out), 0);
  core_cpu_set_level(saved);
}

/* Note [Strided backward data by phases]: the input gradient at strides
 * 2 and 3 against direct sums in double: padding, dilation, non-square
 * kernels, sizes the stride does not divide, 1x1 (phases without taps),
 * odd channel counts, at 1 and 2 threads (bitwise); gx is added to. A
 * phase whose taps start past its rows (p' < 0), few positions and 1x1
 * kernels decline. */
TEST(conv2d_strided_input_gradient_by_phases_equals_direct) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  static const imp_case scases[] = {
      {4, 7, 16, 16, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0, 0, 0},  /* resnet's 3x3 stride 2 */
      {16, 33, 9, 9, 20, 2, 1, 2, 2, 0, 0, 1, 1, 1, 0, 0, 0, 0},   /* 2x1 stride 2, odd size */
      {12, 5, 21, 10, 9, 5, 2, 3, 2, 2, 0, 1, 2, 1, 0, 0, 0, 0},   /* strides 3 x 2, dilation */
      {2, 3, 30, 33, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0, 0, 0, 0},  /* conv1-like */
      {256, 24, 4, 4, 40, 3, 3, 2, 2, 1, 1, 2, 2, 1, 0, 0, 0, 0}, /* 1x1 outputs, dilation 2 */
      {6, 6, 14, 7, 5, 5, 5, 2, 1, 2, 2, 1, 1, 1, 0, 0, 0, 0},    /* stride 2 x 1 */
  };
  int saved = core_cpu_level();
  core_cpu_set_level(CORE_CPU_AVX512);
  unsigned seed = 3;
  for (size_t k = 0; k < sizeof scases / sizeof *scases; k++) {
    const imp_case *c = &scases[k];
    int64_t OH = osz(c->H, c->KH, c->sh, c->ph, c->dh), OW = osz(c->W, c->KW, c->sw, c->pw, c->dw);
    win_geom g = {.N = c->N, .C = c->C, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH,
                  .KW = c->KW, .OH = OH, .OW = OW, .sh = c->sh, .sw = c->sw, .ph = c->ph,
                  .pw = c->pw, .dh = c->dh, .dw = c->dw, .G = 1};
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C * c->KH * c->KW);
    size_t no = (size_t)(c->N * c->O * OH * OW);
    float *w = malloc(nw * 4), *go = malloc(no * 4), *g1 = malloc(nx * 4), *g2 = malloc(nx * 4);
    double *y = malloc(nx * sizeof *y);
    CHECK(w && go && g1 && g2 && y);
    if (!(w && go && g1 && g2 && y)) goto next;
    for (size_t i = 0; i < nw; i++) w[i] = frand(&seed);
    for (size_t i = 0; i < no; i++) go[i] = frand(&seed);
    for (size_t i = 0; i < nx; i++) y[i] = 0.5, g1[i] = g2[i] = 0.5f;
    for (int64_t n = 0; n < c->N; n++)
      for (int64_t o = 0; o < c->O; o++)
        for (int64_t oh = 0; oh < OH; oh++)
          for (int64_t ow = 0; ow < OW; ow++)
            for (int64_t ci = 0; ci < c->C; ci++)
              for (int64_t ki = 0; ki < c->KH; ki++)
                for (int64_t kj = 0; kj < c->KW; kj++) {
                  int64_t ih = oh * c->sh - c->ph + ki * c->dh, iw = ow * c->sw - c->pw + kj * c->dw;
                  if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                  y[((n * c->C + ci) * c->H + ih) * c->W + iw] +=
                      (double)go[((n * c->O + o) * OH + oh) * OW + ow] *
                      w[((o * c->C + ci) * c->KH + ki) * c->KW + kj];
                }
    CHECK_MSG(op_conv_bwd_stride_applies(KILN_DTYPE_F32, &g), "case %zu: declined", k);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc1 = op_conv_bwd_stride(&g, w, go, g1);
    omp_set_num_threads(2);
    int rc2 = op_conv_bwd_stride(&g, w, go, g2);
    omp_set_num_threads(nt);
    CHECK_MSG(rc1 == 0 && rc2 == 0, "case %zu: rc %d %d", k, rc1, rc2);
    double big = 1e-30;
    for (size_t i = 0; i < nx; i++) big = fmax(big, fabs(y[i]));
    int bad = 0, diff = 0;
    for (size_t i = 0; i < nx; i++) {
      bad += !(fabs(g1[i] - y[i]) <= 1e-5 * big);
      diff += g1[i] != g2[i];
    }
    CHECK_MSG(bad == 0 && diff == 0, "case %zu: %d off the direct sums, %d differ at 2 threads",
              k, bad, diff);
  next:
    free(w), free(go), free(g1), free(g2), free(y);
  }
  win_geom grp = {.N = 1, .C = 2, .H = 8, .W = 8, .O = 4, .KH = 3, .KW = 3, .OH = 4, .OW = 4,
                  .sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .G = 2};
  CHECK(!op_conv_bwd_stride_applies(KILN_DTYPE_F32, &grp)); /* groups: col2im */
  grp.G = 1, grp.sh = grp.sw = 1;
  CHECK(!op_conv_bwd_stride_applies(KILN_DTYPE_F32, &grp)); /* stride 1: not this path */
  grp.N = 64, grp.sh = grp.sw = 2;
  CHECK(op_conv_bwd_stride_applies(KILN_DTYPE_F32, &grp));
  grp.sh = 3; /* 3x3 stride 3 padding 1: phase 2's tap reads one row past: p' -1 */
  CHECK(!op_conv_bwd_stride_applies(KILN_DTYPE_F32, &grp));
  grp.sh = 2, grp.N = 8; /* 128 positions: col2im */
  CHECK(!op_conv_bwd_stride_applies(KILN_DTYPE_F32, &grp));
  grp.N = 64, grp.KH = grp.KW = 1, grp.ph = grp.pw = 0; /* 1x1: col2im */
  CHECK(!op_conv_bwd_stride_applies(KILN_DTYPE_F32, &grp));
  core_cpu_set_level(saved);
}
