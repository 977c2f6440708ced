/* tests/ops/test_conv_fused.c: aten::_conv_bn_eval (Note [Conv epilogue] in
 * src/ops/conv_fused.c), conv2d + eval batch norm + residual + relu, against
 * a direct convolution followed by the batch norm formula in double, at
 * every CPU level this machine has and with the batch whole or cut into
 * chunks: odd sizes, strides, padding, dilation, groups, a pointwise kernel
 * at batch 1 (the GEMM writes the output itself), 2x2 outputs at batch 1
 * (the transposed product), with and without bias, batch norm weight,
 * residual and relu; with grad required (the unfused ops) it gives the same
 * values; a gradcheck sample. */
#include <math.h>
#include <stdlib.h>

#include "ops/conv.h"
#include "sample.h"
#include "test.h"

typedef struct fcase {
  int64_t N, C, H, W, O, KH, KW, st[2], pd[2], dl[2], G;
  bool bias, bnw, res, relu;
} fcase;

static const fcase cases[] = {
    {3, 5, 7, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, true, true},     /* odd */
    {2, 4, 11, 10, 6, 3, 2, {2, 3}, {1, 0}, {2, 1}, 1, false, true, false, true}, /* strides */
    {3, 6, 8, 7, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2, true, false, true, false},   /* groups */
    {1, 33, 5, 5, 17, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true, true, true},   /* pointwise b1 */
    {1, 20, 2, 2, 50, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, true, true, true},  /* 2x2 b1 */
    {4, 16, 8, 8, 32, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false, true, false, false},/* 1x1 s2 */
    {2, 3, 13, 13, 10, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, false, true, false, true},/* conv1 */
};

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* The direct convolution, then (v - rm) / sqrt(rv + eps) * bw + bb + res,
 * then relu, in double. */
static void reference(const fcase *c, const double *x, const double *w, const double *b,
                      const double *bw, const double *bb, const double *rm, const double *rv,
                      const double *res, double eps, double *y) {
  int64_t OH = out_size(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
  int64_t OW = out_size(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
  int64_t Cg = c->C / c->G, Og = c->O / c->G;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t o = 0; o < c->O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          int64_t yi = ((n * c->O + o) * OH + oh) * OW + ow;
          double s = b ? b[o] : 0;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < c->KH; ki++)
              for (int64_t kj = 0; kj < c->KW; kj++) {
                int64_t ih = oh * c->st[0] - c->pd[0] + ki * c->dl[0];
                int64_t iw = ow * c->st[1] - c->pd[1] + kj * c->dl[1];
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                s += x[((n * c->C + (o / Og) * Cg + ci) * c->H + ih) * c->W + iw] *
                     w[((o * Cg + ci) * c->KH + ki) * c->KW + kj];
              }
          double v = (s - rm[o]) / sqrt(rv[o] + eps) * (bw ? bw[o] : 1.0) + bb[o];
          if (res) v += res[yi];
          y[yi] = c->relu && v < 0 ? 0 : v;
        }
}

static double *values(kiln_tensor *t) {
  int64_t n = kiln_tensor_numel(t);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) v[i] = core_get_flat(t, i);
  return v;
}

/* Elements of t off want by more than tol relative to the largest |want|
 * (-1: no tensor or the wrong size). */
static int count_off(const kiln_tensor *t, const double *want, int64_t n, double tol) {
  if (!t || kiln_tensor_numel(t) != n) return -1;
  double big = 1e-30;
  for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) bad += !(fabs(core_get_flat(t, i) - want[i]) <= tol * big);
  return bad;
}

/* The op on t[0..6] (x, w, b, bw, bb, rm, rv, res) converted to dt. */
static kiln_tensor *run_op(const fcase *c, kiln_dtype dt, kiln_tensor *const *t, double eps,
                           bool grad) {
  kiln_tensor *d[8];
  for (int i = 0; i < 8; i++) d[i] = t[i] ? kiln_to_dtype(t[i], dt) : NULL;
  if (grad) kiln_set_requires_grad(d[1], true);
  return op_call1(KILN_OP_CONV_BN_EVAL,
                  (op_val[]){OPV_T(d[0]), OPV_T(d[1]), d[2] ? OPV_T(d[2]) : OPV_NONE,
                             OPV_INTS(c->st, 2), OPV_INTS(c->pd, 2), OPV_INTS(c->dl, 2),
                             OPV_I(c->G), d[3] ? OPV_T(d[3]) : OPV_NONE, OPV_T(d[4]),
                             OPV_T(d[5]), OPV_T(d[6]), OPV_F(eps),
                             d[7] ? OPV_T(d[7]) : OPV_NONE, OPV_B(c->relu)},
                  14);
}

TEST(conv_bn_eval_edges_every_level_and_chunking) {
  int saved = core_cpu_level(), max = core_cpu_max_level();
  size_t saved_chunk = op_conv_chunk_bytes;
  double eps = 1e-3;
  kiln_generator *gen = kiln_generator_new(23);
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const fcase *c = &cases[k];
    kiln_scope_begin();
    int64_t OH = out_size(c->H, c->KH, c->st[0], c->pd[0], c->dl[0]);
    int64_t OW = out_size(c->W, c->KW, c->st[1], c->pd[1], c->dl[1]);
    int64_t os[4] = {c->N, c->O, OH, OW}, cs[1] = {c->O};
    kiln_tensor *t[8] = {
        kiln_randn(4, (int64_t[]){c->N, c->C, c->H, c->W}, KILN_DTYPE_F64, gen),
        kiln_randn(4, (int64_t[]){c->O, c->C / c->G, c->KH, c->KW}, KILN_DTYPE_F64, gen),
        c->bias ? kiln_randn(1, cs, KILN_DTYPE_F64, gen) : NULL,
        c->bnw ? kiln_randn(1, cs, KILN_DTYPE_F64, gen) : NULL,
        kiln_randn(1, cs, KILN_DTYPE_F64, gen),
        kiln_randn(1, cs, KILN_DTYPE_F64, gen),
        kiln_add_scalar(kiln_rand(1, cs, KILN_DTYPE_F64, gen), 0.5),
        c->res ? kiln_randn(4, os, KILN_DTYPE_F64, gen) : NULL};
    double *v[8] = {0};
    bool ok = true;
    for (int i = 0; i < 8; i++)
      if (t[i]) ok &= (v[i] = values(t[i])) != NULL;
    int64_t ny = c->N * c->O * OH * OW;
    double *y = malloc((size_t)ny * sizeof *y);
    CHECK(ok && y);
    if (ok && y) {
      reference(c, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], eps, y);
      size_t one = (size_t)(c->C / c->G * c->KH * c->KW > c->O ? c->C / c->G * c->KH * c->KW
                                                               : c->O) *
                   (size_t)(OH * OW) * 4;
      size_t chunks[3] = {saved_chunk, one, 2 * one};
      for (int l = CORE_CPU_BASELINE; l <= max; l++) {
        core_cpu_set_level(l);
        for (int ch = 0; ch < 3; ch++) {
          op_conv_chunk_bytes = chunks[ch];
          int bad = count_off(run_op(c, KILN_DTYPE_F32, t, eps, false), y, ny, 2e-5);
          CHECK_MSG(bad == 0, "case %zu, level %s, chunk %d: %d bad (%s)", k,
                    core_cpu_level_name(l), ch, bad, bad < 0 ? kiln_last_error() : "");
        }
      }
      core_cpu_set_level(saved);
      for (int ch = 0; ch < 3; ch++) {
        op_conv_chunk_bytes = chunks[ch] * (ch ? 2 : 1);
        int bad = count_off(run_op(c, KILN_DTYPE_F64, t, eps, false), y, ny, 1e-12);
        CHECK_MSG(bad == 0, "case %zu float64, chunk %d: %d bad", k, ch, bad);
      }
      op_conv_chunk_bytes = saved_chunk;
      /* grad required: the unfused ops, the same values, and a gradient */
      kiln_tensor *g = run_op(c, KILN_DTYPE_F64, t, eps, true);
      CHECK_MSG(count_off(g, y, ny, 1e-12) == 0, "case %zu with grad", k);
      CHECK_MSG(g && g->requires_grad, "case %zu: the result does not require grad", k);
    }
    for (int i = 0; i < 8; i++) free(v[i]);
    free(y);
    kiln_scope_end();
  }
  core_cpu_set_level(saved);
  op_conv_chunk_bytes = saved_chunk;
  kiln_generator_free(gen);
}

TEST(conv_bn_eval_kernel_refuses_mismatched_statistics) {
  kiln_scope_begin();
  int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  kiln_tensor *x = kiln_ones(4, (int64_t[]){1, 2, 3, 3}, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_ones(4, (int64_t[]){4, 2, 1, 1}, KILN_DTYPE_F32);
  kiln_tensor *c3 = kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32);
  kiln_tensor *c4 = kiln_ones(1, (int64_t[]){4}, KILN_DTYPE_F32);
  op_val a[14] = {OPV_T(x),  OPV_T(w),  OPV_NONE,  OPV_INTS(one, 2), OPV_INTS(zero, 2),
                  OPV_INTS(one, 2), OPV_I(1), OPV_NONE, OPV_T(c4), OPV_T(c3),
                  OPV_T(c4), OPV_F(1e-5), OPV_NONE, OPV_B(true)};
  /* the kernel refuses 3 running means for 4 channels; the op (unfused)
   * fails as batch_norm does */
  CHECK(op_call1(KILN_OP_CONV_BN_EVAL_KERNEL, a, 14) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "do not fit");
  CHECK(op_call1(KILN_OP_CONV_BN_EVAL, a, 14) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "running_mean");
  /* all of [4]: x * w sums 2 ones, (2 - 1) / sqrt(1 + eps) + 1 */
  a[9] = OPV_T(c4);
  kiln_tensor *y = op_call1(KILN_OP_CONV_BN_EVAL, a, 14);
  CHECK(y && y->shape[1] == 4);
  if (y) CHECK_NEAR(core_get_flat(y, 5), 1.0 / sqrt(1.0 + 1e-5) + 1.0, 1e-6);
  kiln_scope_end();
}

/* The float32 kernel reads its per-channel vectors (conv bias, batch norm
 * weight, running statistics) through their strides: every other element
 * of [8] tensors, no batch norm bias; against the formula by hand. */
TEST(conv_bn_eval_kernel_strided_channel_vectors) {
  kiln_scope_begin();
  int64_t one[2] = {1, 1}, zero[2] = {0, 0}, n8[1] = {8};
  const float bv[8] = {0.5f, 9, -1, 9, 2, 9, 0, 9}, wv[8] = {2, 9, 1, 9, -3, 9, 0.5f, 9},
              mv[8] = {1, 9, 0, 9, -2, 9, 3, 9}, vv[8] = {3, 9, 0.25f, 9, 1, 9, 8, 9};
  kiln_tensor *x = kiln_ones(4, (int64_t[]){1, 2, 3, 3}, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_ones(4, (int64_t[]){4, 2, 1, 1}, KILN_DTYPE_F32);
  kiln_tensor *v[4];
  const float *src[4] = {bv, wv, mv, vv};
  for (int i = 0; i < 4; i++)
    v[i] = kiln_slice(kiln_from_data(src[i], 1, n8, KILN_DTYPE_F32), 0, 0, 8, 2);
  CHECK(v[0] && v[0]->strides[0] == 2 && v[3] && v[3]->shape[0] == 4);
  double eps = 1e-5;
  op_val a[14] = {OPV_T(x),  OPV_T(w),  OPV_T(v[0]), OPV_INTS(one, 2), OPV_INTS(zero, 2),
                  OPV_INTS(one, 2), OPV_I(1), OPV_T(v[1]), OPV_NONE, OPV_T(v[2]),
                  OPV_T(v[3]), OPV_F(eps), OPV_NONE, OPV_B(true)};
  kiln_tensor *y = op_call1(KILN_OP_CONV_BN_EVAL_KERNEL, a, 14);
  CHECK_MSG(y && kiln_tensor_numel(y) == 36, "%s", y ? "" : kiln_last_error());
  for (int c = 0; y && c < 4; c++) {
    /* x * w sums two ones per position */
    double want = (2.0 + bv[2 * c] - mv[2 * c]) / sqrt(vv[2 * c] + eps) * wv[2 * c];
    want = want < 0 ? 0 : want;
    for (int p = 0; p < 9; p++)
      CHECK_MSG(fabs(core_get_flat(y, c * 9 + p) - want) <= 1e-6 * (1 + fabs(want)),
                "channel %d position %d: %g, want %g", c, p, core_get_flat(y, c * 9 + p), want);
  }
  kiln_scope_end();
}

OP_SAMPLE(CONV_BN_EVAL, residual_relu) {
  int64_t cs[1] = {3};
  s->ints[0][0] = s->ints[0][1] = 1;
  s->ints[1][0] = s->ints[1][1] = 1;
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 2, 3, 3}));
  s->args[1] = OPV_T(sample_randn(g, 4, (int64_t[]){3, 2, 2, 2}));
  s->args[2] = OPV_T(sample_randn(g, 1, cs));
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[0], 2);
  s->args[6] = OPV_I(1);
  s->args[7] = OPV_T(sample_randn(g, 1, cs));
  s->args[8] = OPV_T(sample_randn(g, 1, cs));
  s->args[9] = OPV_T(sample_randn(g, 1, cs));
  s->args[10] = OPV_T(sample_uniform(g, 1, cs, 0.5, 1.5));
  s->args[11] = OPV_F(1e-5);
  s->args[12] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 3, 4, 4}));
  s->args[13] = OPV_B(true);
  s->skip_slot[5] = s->skip_slot[6] = true; /* the running statistics */
  s->n_args = 14;
}
