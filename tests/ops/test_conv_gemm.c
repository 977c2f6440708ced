/* tests/ops/test_conv_gemm.c: conv2d and convolution_backward through the
 * batched GEMM kernels (Note [Conv batching] in src/ops/conv_gemm.c)
 * against a direct six-loop convolution in double precision, at every CPU
 * level this machine has and with the batch whole or cut into chunks of
 * one or two images: odd sizes, strides, padding, dilation, groups
 * (depthwise too), pointwise kernels, K beyond one GEMM slice, and 2x2
 * outputs. */
#include <math.h>
#include <stdlib.h>

#include "ops/conv.h"
#include "test.h"

typedef struct conv_case {
  int64_t N, C, H, W, O, KH, KW, st[2], pd[2], dl[2], G;
  bool bias;
} conv_case;

static const conv_case cases[] = {
    {3, 5, 7, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},     /* odd sizes */
    {2, 4, 11, 10, 6, 3, 2, {2, 3}, {1, 0}, {2, 1}, 1, false},  /* strides, dilation */
    {3, 6, 8, 7, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2, true},     /* groups */
    {2, 8, 6, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 8, false},    /* depthwise */
    {5, 33, 5, 5, 17, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},   /* pointwise */
    {4, 16, 8, 8, 32, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},  /* 1x1 stride 2 */
    {4, 40, 6, 6, 70, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   /* K = 360 > one slice */
    {2, 3, 13, 13, 10, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, false}, /* resnet's conv1 */
    {6, 20, 2, 2, 50, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},   /* 2x2 outputs */
};

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* The direct convolution and its gradients for grad_output go, in double. */
static void reference(const conv_case *c, const double *x, const double *w, const double *b,
                      const double *go, double *y, double *gx, double *gw, double *gb) {
  int64_t OH = out_size(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
  int64_t OW = out_size(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
  int64_t Cg = c->C / c->G, Og = c->O / c->G;
  for (int64_t i = 0; i < c->N * c->C * c->H * c->W; i++) gx[i] = 0;
  for (int64_t i = 0; i < c->O * Cg * c->KH * c->KW; i++) gw[i] = 0;
  for (int64_t o = 0; o < c->O; o++) gb[o] = 0;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t yi = ((n * c->O + o) * OH + oh) * OW + ow;
          double s = b ? b[o] : 0;
          gb[o] += go[yi];
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < c->KH; ki++)
              for (int64_t kj = 0; kj < c->KW; kj++) {
                int64_t ih = oh * c->st[0] - c->pd[0] + ki * c->dl[0];
                int64_t iw = ow * c->st[1] - c->pd[1] + kj * c->dl[1];
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                int64_t xi = ((n * c->C + (o / Og) * Cg + ci) * c->H + ih) * c->W + iw;
                int64_t wi = ((o * Cg + ci) * c->KH + ki) * c->KW + kj;
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

/* Runs one case at the current CPU level and chunking in dtype dt; the
 * number of bad elements over y, gx, gw, gb (or -1 on an error). */
static int run_case(const conv_case *c, kiln_dtype dt, kiln_tensor *x, kiln_tensor *w,
                    kiln_tensor *b, kiln_tensor *go, const double *y, const double *gx,
                    const double *gw, const double *gb) {
  double tol = dt == KILN_DTYPE_F32 ? 2e-5 : 1e-12;
  kiln_tensor *xd = kiln_to_dtype(x, dt), *wd = kiln_to_dtype(w, dt);
  kiln_tensor *bd = b ? kiln_to_dtype(b, dt) : NULL, *god = kiln_to_dtype(go, dt);
  kiln_tensor *out = op_call1(KILN_OP_CONV2D,
                              (op_val[]){OPV_T(xd), OPV_T(wd), OPV_T(bd), OPV_INTS(c->st, 2),
                                         OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2), OPV_I(c->G)},
                              7);
  int64_t zero2[2] = {0, 0}, bs[1] = {c->O}, mask[3] = {1, 1, 1};
  kiln_tensor *g[3] = {0};
  int n = op_call(KILN_OP_CONVOLUTION_BACKWARD,
                  (op_val[]){OPV_T(god), OPV_T(xd), OPV_T(wd), OPV_INTS(bs, 1),
                             OPV_INTS(c->st, 2), OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2),
                             OPV_B(false), OPV_INTS(zero2, 2), OPV_I(c->G), OPV_INTS(mask, 3)},
                  11, g, 3);
  if (!out || n != 3) return -1;
  int r[4] = {count_off(out, y, kiln_tensor_numel(out), tol),
              count_off(g[0], gx, kiln_tensor_numel(x), tol),
              count_off(g[1], gw, kiln_tensor_numel(w), tol), count_off(g[2], gb, c->O, tol)};
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    if (r[i] < 0) return -1;
    bad += r[i];
  }
  return bad;
}

TEST(conv2d_gemm_edges_every_level_and_chunking) {
  int saved = core_cpu_level(), max = core_cpu_max_level();
  size_t saved_chunk = op_conv_chunk_bytes;
  kiln_generator *gen = kiln_generator_new(17);
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const conv_case *c = &cases[k];
    kiln_scope_begin();
    int64_t OH = out_size(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
    int64_t OW = out_size(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
    kiln_tensor *x = kiln_randn(4, (int64_t[]){c->N, c->C, c->H, c->W}, KILN_DTYPE_F64, gen);
    kiln_tensor *w =
        kiln_randn(4, (int64_t[]){c->O, c->C / c->G, c->KH, c->KW}, KILN_DTYPE_F64, gen);
    kiln_tensor *b = c->bias ? kiln_randn(1, (int64_t[]){c->O}, KILN_DTYPE_F64, gen) : NULL;
    kiln_tensor *go = kiln_randn(4, (int64_t[]){c->N, c->O, OH, OW}, KILN_DTYPE_F64, gen);
    double *xv = values(x), *wv = values(w), *bv = b ? values(b) : NULL, *gov = values(go);
    double *y = malloc((size_t)kiln_tensor_numel(go) * sizeof *y);
    double *gx = malloc((size_t)kiln_tensor_numel(x) * sizeof *gx);
    double *gw = malloc((size_t)kiln_tensor_numel(w) * sizeof *gw);
    double *gb = malloc((size_t)c->O * sizeof *gb);
    CHECK(xv && wv && gov && y && gx && gw && gb);
    if (xv && wv && gov && y && gx && gw && gb) {
      reference(c, xv, wv, bv, gov, y, gx, gw, gb);
      /* one image's largest scratch matrix, so chunks of 1 and 2 images */
      size_t one = (size_t)(c->C / c->G * c->KH * c->KW > c->O ? c->C / c->G * c->KH * c->KW
                                                               : c->O) *
                   (size_t)(OH * OW) * 4;
      size_t chunks[3] = {saved_chunk, one, 2 * one};
      for (int l = CORE_CPU_BASELINE; l <= max; l++) {
        core_cpu_set_level(l);
        for (int ch = 0; ch < 3; ch++) {
          op_conv_chunk_bytes = chunks[ch];
          int bad = run_case(c, KILN_DTYPE_F32, x, w, b, go, y, gx, gw, gb);
          CHECK_MSG(bad == 0, "case %zu, level %s, chunk %d: %d bad (%s)", k,
                    core_cpu_level_name(l), ch, bad, bad < 0 ? kiln_last_error() : "");
        }
      }
      core_cpu_set_level(saved);
      for (int ch = 0; ch < 3; ch++) {
        /* float64 (OpenBLAS's dgemm at every level): a chunk holds fewer */
        op_conv_chunk_bytes = chunks[ch] * (ch ? 2 : 1);
        int bad = run_case(c, KILN_DTYPE_F64, x, w, b, go, y, gx, gw, gb);
        CHECK_MSG(bad == 0, "case %zu float64, chunk %d: %d bad", k, ch, bad);
      }
      op_conv_chunk_bytes = saved_chunk;
    }
    free(xv), free(wv), free(bv), free(gov), free(y), free(gx), free(gw), free(gb);
    kiln_scope_end();
  }
  core_cpu_set_level(saved);
  op_conv_chunk_bytes = saved_chunk;
  kiln_generator_free(gen);
}
