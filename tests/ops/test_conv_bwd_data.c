/* tests/ops/test_conv_bwd_data.c: conv2d's backward kernels of issue 17
 * against direct loops in double precision. The input gradient at stride
 * 1 as a forward convolution of grad_output (Note [Backward data as a
 * conv] in src/ops/conv_bwd_data.c):
 * padding from 0 to its largest, dilation, non-square kernels, groups,
 * batches whole and cut into one-image chunks, float32 and float64; and
 * the cases that keep col2im (a stride 2, pointwise). The weight gradient
 * computed transposed (Note [Weight gradient transposed] in conv_gemm.c). */
#include <math.h>
#include <stdlib.h>

#include "ops/conv.h"
#include "test.h"

typedef struct bd_case {
  int64_t N, C, H, W, O, KH, KW, st[2], pd[2], dl[2], G;
  bool direct; /* expected op_conv_bwd_data_applies */
} bd_case;

static const bd_case bd_cases[] = {
    {8, 5, 7, 9, 7, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, true},   /* no padding: p' = 2 */
    {3, 4, 8, 7, 6, 3, 3, {1, 1}, {2, 2}, {1, 1}, 1, true},   /* padding 2 = K - 1: p' = 0 */
    {4, 3, 9, 10, 5, 3, 3, {1, 1}, {2, 1}, {2, 2}, 1, true},  /* dilation 2 */
    {7, 4, 6, 8, 5, 2, 3, {1, 1}, {1, 0}, {1, 1}, 1, true},   /* 2x3 kernel */
    {6, 6, 7, 7, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},   /* groups 2 */
    {4, 3, 9, 9, 8, 5, 5, {1, 1}, {1, 3}, {1, 1}, 1, true},   /* 5x5, uneven padding */
    {64, 20, 2, 2, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true}, /* 2x2 images */
    {2, 4, 8, 8, 6, 3, 3, {2, 1}, {1, 1}, {1, 1}, 1, false},  /* a stride 2: col2im */
    {9, 5, 6, 6, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},  /* pointwise: direct GEMM */
};

static int64_t osz(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* gx of the direct convolution for grad_output go, in double */
static void ref_gx(const bd_case *c, const double *w, const double *go, double *gx) {
  int64_t OH = osz(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
  int64_t OW = osz(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
  int64_t Cg = c->C / c->G, Og = c->O / c->G;
  for (int64_t i = 0; i < c->N * c->C * c->H * c->W; i++) gx[i] = 0;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++)
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < c->KH; ki++)
              for (int64_t kj = 0; kj < c->KW; kj++) {
                int64_t ih = oh * c->st[0] - c->pd[0] + ki * c->dl[0];
                int64_t iw = ow * c->st[1] - c->pd[1] + kj * c->dl[1];
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                gx[((n * c->C + (o / Og) * Cg + ci) * c->H + ih) * c->W + iw] +=
                    go[((n * c->O + o) * OH + oh) * OW + ow] *
                    w[((o * Cg + ci) * c->KH + ki) * c->KW + kj];
              }
}

/* elements of the op's input gradient off by more than tol of the largest */
static int bd_run(const bd_case *c, kiln_dtype dt, kiln_tensor *x, kiln_tensor *w,
                  kiln_tensor *go, const double *want) {
  double tol = dt == KILN_DTYPE_F32 ? 2e-5 : 1e-12;
  int64_t zero2[2] = {0, 0}, mask[3] = {1, 0, 0};
  kiln_tensor *g[3] = {0};
  int n = op_call(KILN_OP_CONVOLUTION_BACKWARD,
                  (op_val[]){OPV_T(kiln_to_dtype(go, dt)), OPV_T(kiln_to_dtype(x, dt)),
                             OPV_T(kiln_to_dtype(w, dt)), OPV_NONE, OPV_INTS(c->st, 2),
                             OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2), OPV_B(false),
                             OPV_INTS(zero2, 2), OPV_I(c->G), OPV_INTS(mask, 3)},
                  11, g, 3);
  if (n != 3 || !g[0] || kiln_tensor_numel(g[0]) != kiln_tensor_numel(x)) return -1;
  int64_t m = kiln_tensor_numel(x);
  double big = 1e-30;
  for (int64_t i = 0; i < m; i++) big = fmax(big, fabs(want[i]));
  int bad = 0;
  for (int64_t i = 0; i < m; i++) bad += !(fabs(core_get_flat(g[0], i) - want[i]) <= tol * big);
  return bad;
}

TEST(conv2d_input_grad_as_conv_equals_direct_loop) {
  size_t saved_chunk = op_conv_chunk_bytes;
  kiln_generator *gen = kiln_generator_new(23);
  for (size_t k = 0; k < sizeof bd_cases / sizeof *bd_cases; k++) {
    const bd_case *c = &bd_cases[k];
    kiln_scope_begin();
    int64_t OH = osz(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
    int64_t OW = osz(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
    win_geom g = {.N = c->N, .C = c->C / c->G, .H = c->H, .W = c->W, .O = c->O, .KH = c->KH,
                  .KW = c->KW, .OH = OH, .OW = OW, .sh = c->st[0], .sw = c->st[1],
                  .ph = c->pd[0], .pw = c->pd[1], .dh = c->dl[0], .dw = c->dl[1], .G = c->G};
    CHECK_MSG(op_conv_bwd_data_applies(&g) == c->direct, "case %zu: applies", k);
    kiln_tensor *x = kiln_randn(4, (int64_t[]){c->N, c->C, c->H, c->W}, KILN_DTYPE_F64, gen);
    kiln_tensor *w =
        kiln_randn(4, (int64_t[]){c->O, c->C / c->G, c->KH, c->KW}, KILN_DTYPE_F64, gen);
    kiln_tensor *go = kiln_randn(4, (int64_t[]){c->N, c->O, OH, OW}, KILN_DTYPE_F64, gen);
    int64_t nw = kiln_tensor_numel(w), ng = kiln_tensor_numel(go), nx = kiln_tensor_numel(x);
    double *wv = malloc((size_t)nw * sizeof *wv), *gv = malloc((size_t)ng * sizeof *gv);
    double *want = malloc((size_t)nx * sizeof *want);
    CHECK(wv && gv && want);
    if (wv && gv && want) {
      for (int64_t i = 0; i < nw; i++) wv[i] = core_get_flat(w, i);
      for (int64_t i = 0; i < ng; i++) gv[i] = core_get_flat(go, i);
      ref_gx(c, wv, gv, want);
      /* the whole batch in one chunk, then one image per chunk */
      size_t chunks[2] = {saved_chunk, 1};
      for (int ch = 0; ch < 2; ch++) {
        op_conv_chunk_bytes = chunks[ch];
        int b32 = bd_run(c, KILN_DTYPE_F32, x, w, go, want);
        int b64 = bd_run(c, KILN_DTYPE_F64, x, w, go, want);
        CHECK_MSG(b32 == 0 && b64 == 0, "case %zu chunk %d: %d bad float32, %d float64 (%s)", k,
                  ch, b32, b64, b32 < 0 || b64 < 0 ? kiln_last_error() : "");
      }
      op_conv_chunk_bytes = saved_chunk;
    }
    free(wv), free(gv), free(want);
    kiln_scope_end();
  }
  op_conv_chunk_bytes = saved_chunk;
  kiln_generator_free(gen);
}

/* The weight gradient computed transposed (Note [Weight gradient
 * transposed] in src/ops/conv_gemm.c: N OH OW >= 1024) against a direct
 * loop: groups, a stride, pointwise in place, chunks of one image. */
TEST(conv2d_weight_grad_transposed_equals_direct_loop) {
  static const bd_case wcases[] = {
      {4, 6, 17, 16, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true},
      {5, 3, 31, 30, 7, 5, 3, {2, 1}, {2, 1}, {1, 1}, 1, true},
      {3, 9, 19, 19, 5, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
  };
  size_t saved_chunk = op_conv_chunk_bytes;
  kiln_generator *gen = kiln_generator_new(29);
  for (size_t k = 0; k < sizeof wcases / sizeof *wcases; k++) {
    const bd_case *c = &wcases[k];
    kiln_scope_begin();
    int64_t OH = osz(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
    int64_t OW = osz(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
    CHECK_MSG(c->N * OH * OW >= 1024, "case %zu: too few positions to test", k);
    int64_t Cg = c->C / c->G, Og = c->O / c->G, nw = c->O * Cg * c->KH * c->KW;
    kiln_tensor *x = kiln_randn(4, (int64_t[]){c->N, c->C, c->H, c->W}, KILN_DTYPE_F64, gen);
    kiln_tensor *w = kiln_randn(4, (int64_t[]){c->O, Cg, c->KH, c->KW}, KILN_DTYPE_F64, gen);
    kiln_tensor *go = kiln_randn(4, (int64_t[]){c->N, c->O, OH, OW}, KILN_DTYPE_F64, gen);
    double *want = calloc((size_t)nw, sizeof *want);
    CHECK(want != NULL);
    for (int64_t n = 0; want && n < c->N; n++)
      for (int64_t o = 0; o < c->O; o++)
        for (int64_t oh = 0; oh < OH; oh++)
          for (int64_t ow = 0; ow < OW; ow++)
            for (int64_t ci = 0; ci < Cg; ci++)
              for (int64_t ki = 0; ki < c->KH; ki++)
                for (int64_t kj = 0; kj < c->KW; kj++) {
                  int64_t ih = oh * c->st[0] - c->pd[0] + ki * c->dl[0];
                  int64_t iw = ow * c->st[1] - c->pd[1] + kj * c->dl[1];
                  if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                  want[((o * Cg + ci) * c->KH + ki) * c->KW + kj] +=
                      core_get_flat(go, ((n * c->O + o) * OH + oh) * OW + ow) *
                      core_get_flat(x, ((n * c->C + (o / Og) * Cg + ci) * c->H + ih) * c->W + iw);
                }
    size_t chunks[2] = {saved_chunk, 1};
    for (int ch = 0; want && ch < 2; ch++) {
      op_conv_chunk_bytes = chunks[ch];
      for (int d = 0; d < 2; d++) {
        kiln_dtype dt = d ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
        double tol = d ? 1e-12 : 2e-5, big = 1e-30;
        int64_t zero2[2] = {0, 0}, mask[3] = {0, 1, 0};
        kiln_tensor *g[3] = {0};
        int n = op_call(KILN_OP_CONVOLUTION_BACKWARD,
                        (op_val[]){OPV_T(kiln_to_dtype(go, dt)), OPV_T(kiln_to_dtype(x, dt)),
                                   OPV_T(kiln_to_dtype(w, dt)), OPV_NONE, OPV_INTS(c->st, 2),
                                   OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2), OPV_B(false),
                                   OPV_INTS(zero2, 2), OPV_I(c->G), OPV_INTS(mask, 3)},
                        11, g, 3);
        CHECK_MSG(n == 3 && g[1] && kiln_tensor_numel(g[1]) == nw, "case %zu: %s", k,
                  kiln_last_error());
        if (n != 3 || !g[1] || kiln_tensor_numel(g[1]) != nw) continue;
        for (int64_t i = 0; i < nw; i++) big = fmax(big, fabs(want[i]));
        int bad = 0;
        for (int64_t i = 0; i < nw; i++)
          bad += !(fabs(core_get_flat(g[1], i) - want[i]) <= tol * big);
        CHECK_MSG(bad == 0, "case %zu chunk %d %s: %d of %lld bad", k, ch, kiln_dtype_name(dt),
                  bad, (long long)nw);
      }
    }
    op_conv_chunk_bytes = saved_chunk;
    free(want);
    kiln_scope_end();
  }
  op_conv_chunk_bytes = saved_chunk;
  kiln_generator_free(gen);
}
