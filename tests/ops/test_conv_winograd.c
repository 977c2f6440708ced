/* tests/ops/test_conv_winograd.c: the Winograd F(2x2, 3x3) forward at
 * AVX-512 and AVX2 (Note [Winograd F(2x2,3x3)] in src/ops/conv_winograd.c,
 * Note [Winograd at AVX2] in conv_winograd_avx2.c), bitwise the same at
 * both levels, against
 * a direct convolution in double with the fused epilogue: paddings 0, 1
 * and 2, odd output sizes (partial tiles), tile rows of 8, 4 and 2 tiles
 * (runs loaded whole) and of other widths (gathers), tiles of several
 * images in one vector, channel counts off the 8-row tile, blocks past
 * one, the weights transformed per row block and shared (Note [Winograd
 * weights]), 1 thread against 2 (bitwise); the input gradient's form
 * (the weight read flipped) against the flipped copy (bitwise); the
 * convolutions it declines; and how a NaN or an infinity spreads. Each
 * level is skipped where the CPU lacks it. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv.h"
#include "test.h"

typedef struct wcase {
  int64_t N, C, H, W, O, ph, pw;
  bool scale, shift, residual, relu;
} wcase;

static const wcase cases[] = {
    {16, 64, 16, 16, 64, 1, 1, true, true, true, true},   /* resnet18 layer1: rows of 8 */
    {16, 24, 8, 8, 13, 1, 1, true, true, false, true},    /* rows of 4, O off the tile */
    {16, 40, 4, 4, 24, 1, 1, false, true, true, false},   /* rows of 2, 4 images a vector */
    {8, 5, 9, 9, 11, 1, 1, true, false, true, true},      /* 9x9: rows of 5 tiles (gathers) */
    {2, 6, 7, 12, 10, 1, 1, true, true, true, true},      /* 7x12: rows of 6 (runs of 2) */
    {2, 7, 13, 33, 9, 0, 0, false, false, false, false},  /* no padding: 11 x 31, rows of 16 */
    {2, 6, 10, 10, 8, 2, 2, true, true, true, false},     /* padding 2: 12 x 12 */
    {1, 8, 64, 64, 16, 1, 1, false, true, false, true},   /* many blocks for one image */
    {4, 300, 8, 8, 20, 1, 1, true, true, false, false},   /* C 300: 2 blocks (per row block at 2 threads) */
    {5, 4, 6, 6, 3, 1, 0, false, false, true, true},      /* padding 1 x 0 */
};

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static win_geom geom(const wcase *c) {
  win_geom g = {.N = c->N, .C = c->C, .H = c->H, .W = c->W, .O = c->O, .KH = 3, .KW = 3,
                .OH = c->H + 2 * c->ph - 2, .OW = c->W + 2 * c->pw - 2, .sh = 1, .sw = 1,
                .ph = c->ph, .pw = c->pw, .dh = 1, .dw = 1, .G = 1};
  return g;
}

/* The epilogue'd 3x3 convolution in double. */
static void reference(const win_geom *g, const float *x, const float *w, const float *sc,
                      const float *sh, const float *res, bool relu, double *y) {
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t o = 0; o < g->O; o++)
      for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) {
          double s = 0;
          for (int64_t c = 0; c < g->C; c++)
            for (int64_t ki = 0; ki < 3; ki++)
              for (int64_t kj = 0; kj < 3; kj++) {
                int64_t ih = oh - g->ph + ki, iw = ow - g->pw + kj;
                if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W) continue;
                s += (double)x[((n * g->C + c) * g->H + ih) * g->W + iw] *
                     w[((o * g->C + c) * 3 + ki) * 3 + kj];
              }
          int64_t at = ((n * g->O + o) * g->OH + oh) * g->OW + ow;
          if (sc) s *= sc[o];
          if (sh) s += sh[o];
          if (res) s += res[at];
          y[at] = relu && s < 0 ? 0 : s;
        }
}

typedef int (*wino_kernel)(const win_geom *, const float *, const float *, const conv_epilogue *,
                           float *);

/* Every case at 1 and 2 threads through kern at level: within 2e-6 of
 * the largest output of the double convolution (seen at AVX-512: 1.1e-7
 * to 6.3e-7, where the direct tiles of conv_avx512.c were 1.4e-7 to
 * 1.1e-6: each point sums C products, not 9 C), the same bits at both
 * thread counts; with prev (the other level's outputs, case after case,
 * or NULL), the same bits as prev. */
static void check_level(int level, wino_kernel kern, float **prev, float **mine) {
  int saved = core_cpu_level();
  core_cpu_set_level(level);
  unsigned seed = 3;
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const wcase *c = &cases[k];
    win_geom g = geom(c);
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C * 9);
    size_t no = (size_t)(c->N * c->O * g.OH * g.OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *res = malloc(no * 4);
    float *ch = malloc((size_t)c->O * 8), *o1 = malloc(no * 4), *o2 = malloc(no * 4);
    double *y = malloc(no * sizeof *y);
    mine[k] = o1;
    CHECK(x && w && res && ch && o1 && o2 && y);
    if (!(x && w && res && ch && o1 && o2 && y)) goto next;
    for (size_t i = 0; i < nx; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < nw; i++) w[i] = frand(&seed);
    for (size_t i = 0; i < no; i++) res[i] = frand(&seed);
    for (int64_t i = 0; i < 2 * c->O; i++) ch[i] = frand(&seed) + 1.5f;
    const float *sc = c->scale ? ch : NULL, *shv = c->shift ? ch + c->O : NULL;
    const float *rv = c->residual ? res : NULL;
    conv_epilogue ep = {.scale = (const char *)sc, .shift = (const char *)shv,
                        .residual = (const char *)rv, .relu = c->relu};
    reference(&g, x, w, sc, shv, rv, c->relu, y);
    for (size_t i = 0; i < no; i++) o1[i] = o2[i] = NAN; /* every output must be written */
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc1 = kern(&g, x, w, &ep, o1);
    omp_set_num_threads(2);
    int rc2 = kern(&g, x, w, &ep, o2);
    omp_set_num_threads(nt);
    CHECK_MSG(rc1 == 1 && rc2 == 1, "level %d case %zu: rc %d %d", level, k, rc1, rc2);
    double big = 1e-30, worst = 0;
    for (size_t i = 0; i < no; i++) big = fmax(big, fabs(y[i]));
    int bad = 0, diff = 0, other = 0;
    for (size_t i = 0; i < no; i++) {
      double e = fabs(o1[i] - y[i]);
      worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
      bad += !(e <= 2e-6 * big);
      diff += memcmp(&o1[i], &o2[i], 4) != 0;
      other += prev && prev[k] && memcmp(&o1[i], &prev[k][i], 4) != 0;
    }
    CHECK_MSG(bad == 0 && diff == 0 && other == 0,
              "level %d case %zu: %d off the double conv (worst %.3g of %.3g), %d differ between "
              "1 and 2 threads, %d from the other level",
              level, k, bad, worst, big, diff, other);
  next:
    free(x), free(w), free(res), free(ch), free(o2), free(y);
  }
  core_cpu_set_level(saved);
}

enum { NCASES = sizeof cases / sizeof *cases };

/* At AVX-512 and at AVX2 (each where the CPU has it), and the two levels
 * bitwise the same (Note [Winograd at AVX2]). */
TEST(conv2d_winograd_equals_direct_in_double_at_each_level) {
  float *o512[NCASES] = {0}, *o256[NCASES] = {0};
  if (core_cpu_max_level() >= CORE_CPU_AVX512)
    check_level(CORE_CPU_AVX512, op_conv_winograd_avx512, NULL, o512);
  if (core_cpu_max_level() >= CORE_CPU_AVX2)
    check_level(CORE_CPU_AVX2, op_conv_winograd_avx2, o512, o256);
  for (int k = 0; k < NCASES; k++) free(o512[k]), free(o256[k]);
}

/* The input gradient's form (op_conv_winograd_avx512_flipped, the weight
 * w [C][O][3][3] read transposed and flipped): the same bits as the
 * forward on the flipped copy, in both weight paths (one block per thread
 * and shared weights), at 1 and 2 threads. */
TEST(conv2d_winograd_flipped_weight_equals_flipped_copy) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  int saved = core_cpu_level();
  core_cpu_set_level(CORE_CPU_AVX512);
  static const wcase fcases[] = {
      {16, 128, 8, 8, 13, 1, 1, false, false, false, false}, /* 8 blocks: shared weights */
      {4, 300, 8, 8, 19, 1, 1, false, false, false, false},  /* 2 blocks: per row block at 2 threads */
      {3, 7, 9, 11, 17, 2, 2, false, false, false, false},
  };
  unsigned seed = 9;
  for (size_t k = 0; k < sizeof fcases / sizeof *fcases; k++) {
    const wcase *c = &fcases[k];
    win_geom g = geom(c);
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), nw = (size_t)(c->O * c->C * 9);
    size_t no = (size_t)(c->N * c->O * g.OH * g.OW);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *wf = malloc(nw * 4);
    float *o1 = malloc(no * 4), *o2 = malloc(no * 4), *o3 = malloc(no * 4);
    CHECK(x && w && wf && o1 && o2 && o3);
    if (!(x && w && wf && o1 && o2 && o3)) goto next;
    for (size_t i = 0; i < nx; i++) x[i] = frand(&seed);
    for (size_t i = 0; i < nw; i++) w[i] = frand(&seed);
    /* w holds [C][O][9]; wf[o][c][t] = w[c][o][8 - t] */
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t ci = 0; ci < c->C; ci++)
        for (int64_t t = 0; t < 9; t++)
          wf[(o * c->C + ci) * 9 + t] = w[(ci * c->O + o) * 9 + 8 - t];
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc1 = op_conv_winograd_avx512_flipped(&g, x, w, o1);
    omp_set_num_threads(2);
    int rc2 = op_conv_winograd_avx512_flipped(&g, x, w, o2);
    int rc3 = op_conv_winograd_avx512(&g, x, wf, NULL, o3);
    omp_set_num_threads(nt);
    CHECK_MSG(rc1 == 1 && rc2 == 1 && rc3 == 1, "case %zu: rc %d %d %d", k, rc1, rc2, rc3);
    int diff = 0;
    for (size_t i = 0; i < no; i++)
      diff += memcmp(&o1[i], &o3[i], 4) != 0 || memcmp(&o2[i], &o3[i], 4) != 0;
    CHECK_MSG(diff == 0, "case %zu: %d outputs differ from the flipped copy's", k, diff);
  next:
    free(x), free(w), free(wf), free(o1), free(o2), free(o3);
  }
  core_cpu_set_level(saved);
}

/* It computes only 3x3 stride-1 undilated ungrouped convolutions with
 * padding up to 2, at AVX-512, with the hook on, and only when enough
 * tiles fill its panels; op_conv_forward_avx512 then runs the direct
 * tiles, which give a different rounding. */
TEST(conv2d_winograd_declines_what_it_does_not_compute) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  int saved = core_cpu_level();
  core_cpu_set_level(CORE_CPU_AVX512);
  enum { NX = 4 * 8 * 18 * 18, NW = 8 * 8 * 25, NO = 4 * 8 * 18 * 18 };
  float *x = calloc(NX, 4), *w = calloc(NW, 4), *out = calloc(NO, 4);
  CHECK(x && w && out);
  if (!(x && w && out)) goto done;
  win_geom base = {.N = 4, .C = 8, .H = 16, .W = 16, .O = 8, .KH = 3, .KW = 3, .OH = 16,
                   .OW = 16, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .G = 1};
  CHECK_EQ_INT(op_conv_winograd_avx512(&base, x, w, NULL, out), 1);
  win_geom g = base;
  g.sh = g.sw = 2, g.OH = g.OW = 8; /* stride 2 */
  CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, NULL, out), 0);
  g = base, g.KH = g.KW = 5, g.ph = g.pw = 2; /* 5x5 */
  CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, NULL, out), 0);
  g = base, g.dh = g.dw = 2, g.ph = g.pw = 2; /* dilation */
  CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, NULL, out), 0);
  g = base, g.G = 2, g.C = 4; /* groups */
  CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, NULL, out), 0);
  g = base, g.ph = g.pw = 3, g.OH = g.OW = 20; /* padding 3 */
  CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, NULL, out), 0);
  g = base, g.N = 1, g.H = g.W = g.OH = g.OW = 4; /* 4 tiles: a panel of 32 mostly empty */
  CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, NULL, out), 0);
  op_conv_winograd = false;
  CHECK_EQ_INT(op_conv_winograd_avx512(&base, x, w, NULL, out), 0);
  op_conv_winograd = true;
  op_conv_implicit = false;
  CHECK_EQ_INT(op_conv_winograd_avx512(&base, x, w, NULL, out), 0);
  op_conv_implicit = true;
  core_cpu_set_level(CORE_CPU_AVX2);
  CHECK_EQ_INT(op_conv_winograd_avx512(&base, x, w, NULL, out), 0);
  CHECK_EQ_INT(op_conv_winograd_avx2(&base, x, w, NULL, out), 1);
  g = base, g.sh = g.sw = 2, g.OH = g.OW = 8;
  CHECK_EQ_INT(op_conv_winograd_avx2(&g, x, w, NULL, out), 0);
  core_cpu_set_level(CORE_CPU_AVX512);
  CHECK_EQ_INT(op_conv_winograd_avx2(&base, x, w, NULL, out), 0);
  core_cpu_set_level(CORE_CPU_BASELINE);
  CHECK_EQ_INT(op_conv_winograd_avx2(&base, x, w, NULL, out), 0);
done:
  free(x), free(w), free(out);
  core_cpu_set_level(saved);
}

/* A NaN input reaches exactly the outputs whose 3x3 windows hold it, as
 * in the direct conv (the transforms' zeros keep it from a tile's other
 * outputs): at (2, 2) of a 6x6 image with padding 1, outputs (1..3, 1..3)
 * of every channel, relu keeping the NaN. An infinity reaches the same
 * outputs, but may come out NaN (Note [Winograd F(2x2,3x3)]). The other
 * images' outputs are the exact sums of their windows' 0.25s. */
TEST(conv2d_winograd_nan_and_inf_reach_their_windows) {
  if (core_cpu_max_level() < CORE_CPU_AVX512) return; /* nothing to test on this CPU */
  int saved = core_cpu_level();
  core_cpu_set_level(CORE_CPU_AVX512);
  win_geom g = {.N = 8, .C = 4, .H = 6, .W = 6, .O = 8, .KH = 3, .KW = 3, .OH = 6, .OW = 6,
                .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .G = 1};
  float x[8 * 4 * 36], w[8 * 4 * 9], out[8 * 8 * 36]; /* 72 tiles: enough to be taken */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < 8 * 4 * 36; i++) x[i] = 1.0f;
    for (int i = 0; i < 8 * 4 * 9; i++) w[i] = 0.25f;
    x[2 * 6 + 2] = pass ? INFINITY : NAN; /* image 0, channel 0, (2, 2) */
    conv_epilogue ep = {.relu = true};
    CHECK_EQ_INT(op_conv_winograd_avx512(&g, x, w, &ep, out), 1);
    int wrong = 0;
    for (int o = 0; o < 8; o++)
      for (int p = 0; p < 36; p++) {
        int oh = p / 6, ow = p % 6;
        bool hit = oh >= 1 && oh <= 3 && ow >= 1 && ow <= 3;
        float v = out[o * 36 + p];
        wrong += pass ? isfinite(v) == hit : isnan(v) != hit;
      }
    CHECK_MSG(wrong == 0, "%s: %d outputs of image 0 wrong", pass ? "inf" : "nan", wrong);
    int off = 0; /* corner windows hold 4 taps, edges 6, the inside 9, over 4 channels */
    for (int n = 1; n < 8; n++)
      for (int o = 0; o < 8; o++)
        for (int p = 0; p < 36; p++) {
          int oh = p / 6, ow = p % 6;
          int rows = 3 - (oh == 0) - (oh == 5), cols = 3 - (ow == 0) - (ow == 5);
          off += out[(n * 8 + o) * 36 + p] != (float)(rows * cols);
        }
    CHECK_EQ_INT(off, 0);
  }
  core_cpu_set_level(saved);
}
