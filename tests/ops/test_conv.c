/* tests/ops/test_conv.c: conv2d, convolution_backward, max_pool2d(_with_indices)
 * and its backward: PyTorch golden values and gradients, float32, batch
 * parallelism, non-contiguous inputs, error messages, and gradcheck samples. */
#include "golden_linalg.h"
#include "sample.h"
#include "test.h"

static void check_close(const kiln_tensor *r, const double *want, int64_t n, double tol,
                        const char *what, int c) {
  CHECK_MSG(r && kiln_tensor_numel(r) == n, "%s case %d: missing or wrong numel", what, c);
  if (!r || kiln_tensor_numel(r) != n) return;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = core_get_flat(r, i);
    if (!(fabs(v - want[i]) <= tol * (1 + fabs(want[i]))) && bad++ < 3)
      test_fail(__FILE__, __LINE__, "%s case %d: element %lld: %.9g != %.9g", what, c,
                (long long)i, v, want[i]);
  }
}

static bool shape_is(const kiln_tensor *t, int nd, const int64_t *s) {
  if (!t || t->ndim != nd) return false;
  for (int i = 0; i < nd; i++)
    if (t->shape[i] != s[i]) return false;
  return true;
}

static kiln_tensor *conv(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b, const int64_t *st,
                         const int64_t *pd, const int64_t *dl) {
  return op_call1(KILN_OP_CONV2D, (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_INTS(st, 2),
                                             OPV_INTS(pd, 2), OPV_INTS(dl, 2), OPV_I(1)},
                  7);
}

/* ---- conv2d ----------------------------------------------------------------------- */

TEST(conv2d_golden_forward_backward) {
  int n = (int)(sizeof golden_conv_cases / sizeof *golden_conv_cases);
  for (int i = 0; i < n; i++) {
    const golden_conv *c = &golden_conv_cases[i];
    kiln_scope_begin();
    kiln_tensor *x = kiln_from_data(c->x, 4, c->xs, KILN_DTYPE_F64);
    kiln_tensor *w = kiln_from_data(c->w, 4, c->ws, KILN_DTYPE_F64);
    kiln_tensor *b = c->has_bias ? kiln_from_data(c->b, 1, c->ws, KILN_DTYPE_F64) : NULL;
    kiln_set_requires_grad(x, true);
    kiln_set_requires_grad(w, true);
    if (b) kiln_set_requires_grad(b, true);
    kiln_tensor *y = conv(x, w, b, c->stride, c->pad, c->dil);
    CHECK_MSG(y, "conv case %d: %s", i, kiln_last_error());
    if (y) {
      CHECK(shape_is(y, 4, c->os));
      check_close(y, c->out, core_numel(4, c->os), 1e-13, "conv2d out", i);
      kiln_tensor *gout = kiln_from_data(c->gout, 4, c->os, KILN_DTYPE_F64);
      CHECK_MSG(kiln_backward(y, gout) == 0, "conv backward %d: %s", i, kiln_last_error());
      check_close(kiln_tensor_grad(x), c->gx, core_numel(4, c->xs), 1e-13, "conv2d dx", i);
      check_close(kiln_tensor_grad(w), c->gw, core_numel(4, c->ws), 1e-13, "conv2d dw", i);
      if (b) check_close(kiln_tensor_grad(b), c->gb, c->ws[0], 1e-13, "conv2d db", i);
    }
    /* float32, no autograd */
    kiln_tensor *yf = conv(kiln_to_dtype(x, KILN_DTYPE_F32), kiln_to_dtype(w, KILN_DTYPE_F32),
                           b ? kiln_to_dtype(b, KILN_DTYPE_F32) : NULL, c->stride, c->pad, c->dil);
    CHECK(yf && kiln_tensor_dtype(yf) == KILN_DTYPE_F32);
    check_close(yf, c->out, core_numel(4, c->os), 1e-5, "conv2d f32", i);
    kiln_scope_end();
  }
}

TEST(conv2d_public_api_and_noncontiguous) {
  const golden_conv *c = &golden_conv_cases[0]; /* stride 1, no padding, bias */
  kiln_scope_begin();
  kiln_tensor *x = kiln_from_data(c->x, 4, c->xs, KILN_DTYPE_F64);
  kiln_tensor *w = kiln_from_data(c->w, 4, c->ws, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(c->b, 1, c->ws, KILN_DTYPE_F64);
  /* the same input as an NHWC tensor permuted to NCHW (non-contiguous) */
  kiln_tensor *nhwc = kiln_contiguous(kiln_permute(x, 4, (int64_t[]){0, 2, 3, 1}));
  kiln_tensor *xp = kiln_permute(nhwc, 4, (int64_t[]){0, 3, 1, 2});
  CHECK(!kiln_tensor_is_contiguous(xp));
  kiln_tensor *y = kiln_conv2d(xp, w, b, NULL, NULL);
  check_close(y, c->out, core_numel(4, c->os), 1e-13, "conv2d permuted input", 0);
  kiln_tensor *y2 = kiln_conv2d(x, w, b, (int64_t[]){1, 1}, (int64_t[]){0, 0});
  check_close(y2, c->out, core_numel(4, c->os), 1e-13, "conv2d api", 0);
  kiln_scope_end();
}

TEST(conv2d_batch_parallel_matches_single) {
  /* 6 samples at once equal 6 single-sample convolutions (the OpenMP path
   * against the serial one). */
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(3);
  kiln_tensor *x = kiln_randn(4, (int64_t[]){6, 3, 9, 8}, KILN_DTYPE_F32, g);
  kiln_tensor *w = kiln_randn(4, (int64_t[]){4, 3, 3, 3}, KILN_DTYPE_F32, g);
  kiln_tensor *b = kiln_randn(1, (int64_t[]){4}, KILN_DTYPE_F32, g);
  const int64_t st[2] = {2, 1}, pd[2] = {1, 1};
  kiln_tensor *y = kiln_conv2d(x, w, b, st, pd);
  CHECK(shape_is(y, 4, (int64_t[]){6, 4, 5, 8}));
  for (int64_t i = 0; y && i < 6; i++) {
    kiln_tensor *yi = kiln_conv2d(kiln_narrow(x, 0, i, 1), w, b, st, pd);
    kiln_tensor *part = kiln_narrow(y, 0, i, 1);
    int bad = 0;
    for (int64_t k = 0; yi && k < kiln_tensor_numel(yi); k++)
      bad += core_get_flat(yi, k) != core_get_flat(part, k);
    CHECK_EQ_INT(bad, 0);
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(convolution_backward_mask) {
  const golden_conv *c = &golden_conv_cases[4];
  kiln_scope_begin();
  kiln_tensor *x = kiln_from_data(c->x, 4, c->xs, KILN_DTYPE_F64);
  kiln_tensor *w = kiln_from_data(c->w, 4, c->ws, KILN_DTYPE_F64);
  kiln_tensor *go = kiln_from_data(c->gout, 4, c->os, KILN_DTYPE_F64);
  int64_t zero2[2] = {0, 0}, bs[1] = {c->ws[0]}, mask[3] = {0, 1, 1};
  kiln_tensor *outs[3] = {0};
  int n = op_call(KILN_OP_CONVOLUTION_BACKWARD,
                  (op_val[]){OPV_T(go), OPV_T(x), OPV_T(w), OPV_INTS(bs, 1),
                             OPV_INTS(c->stride, 2), OPV_INTS(c->pad, 2), OPV_INTS(c->dil, 2),
                             OPV_B(false), OPV_INTS(zero2, 2), OPV_I(1), OPV_INTS(mask, 3)},
                  11, outs, 3);
  CHECK_EQ_INT(n, 3);
  if (n == 3) {
    CHECK(shape_is(outs[0], 4, c->xs));
    for (int64_t i = 0; i < kiln_tensor_numel(outs[0]); i++)
      CHECK_NEAR(core_get_flat(outs[0], i), 0.0, 0); /* masked out: zeros */
    check_close(outs[1], c->gw, core_numel(4, c->ws), 1e-13, "convolution_backward dw", 4);
    check_close(outs[2], c->gb, c->ws[0], 1e-13, "convolution_backward db", 4);
  }
  /* transposed convolution is not supported */
  n = op_call(KILN_OP_CONVOLUTION_BACKWARD,
              (op_val[]){OPV_T(go), OPV_T(x), OPV_T(w), OPV_INTS(bs, 1), OPV_INTS(c->stride, 2),
                         OPV_INTS(c->pad, 2), OPV_INTS(c->dil, 2), OPV_B(true),
                         OPV_INTS(zero2, 2), OPV_I(1), OPV_INTS(mask, 3)},
              11, outs, 3);
  CHECK(n < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "transposed convolution is not supported");
  kiln_scope_end();
}

TEST(conv2d_errors) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_zeros(4, (int64_t[]){2, 4, 5, 5}, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_zeros(4, (int64_t[]){8, 3, 3, 3}, KILN_DTYPE_F32);
  CHECK(kiln_conv2d(x, w, NULL, NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::conv2d: weight Float[8, 3, 3, 3] expects input with 3 channels, got "
                     "Float[2, 4, 5, 5] (4 channels)");
  kiln_tensor *w4 = kiln_zeros(4, (int64_t[]){8, 4, 3, 3}, KILN_DTYPE_F32);
  CHECK(kiln_conv2d(x, w4, kiln_zeros(1, (int64_t[]){7}, KILN_DTYPE_F32), NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::conv2d: bias Float[7] does not match weight");
  CHECK(kiln_conv2d(kiln_zeros(3, (int64_t[]){4, 5, 5}, KILN_DTYPE_F32), w4, NULL, NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::conv2d: expected input to be 4-D, got Float[4, 5, 5]");
  CHECK(kiln_conv2d(x, kiln_zeros(4, (int64_t[]){8, 4, 6, 3}, KILN_DTYPE_F32), NULL, NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "is smaller than the (dilated) kernel 6x3");
  CHECK(kiln_conv2d(x, kiln_zeros(4, (int64_t[]){8, 4, 3, 3}, KILN_DTYPE_F64), NULL, NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::conv2d: expected input and weight to have the same dtype");
  kiln_tensor *xi = kiln_zeros(4, (int64_t[]){2, 4, 5, 5}, KILN_DTYPE_I64);
  CHECK(kiln_conv2d(xi, w4, NULL, NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::conv2d: input must be Float or Double, got Long");
  CHECK(kiln_conv2d(x, w4, NULL, (int64_t[]){0, 1}, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "need stride >= 1");
  int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  CHECK(op_call1(KILN_OP_CONV2D, (op_val[]){OPV_T(x), OPV_T(w4), OPV_NONE, OPV_INTS(one, 2),
                                            OPV_INTS(zero, 2), OPV_INTS(one, 2), OPV_I(2)},
                 7) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::conv2d: weight Float[8, 4, 3, 3] with groups > 1 "
                                         "expects input with 8 channels");
  CHECK(op_call1(KILN_OP_CONV2D, (op_val[]){OPV_T(x), OPV_T(w4), OPV_NONE, OPV_INTS(one, 2),
                                            OPV_INTS(zero, 2), OPV_INTS(one, 2), OPV_I(0)},
                 7) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::conv2d: non-positive groups is not supported");
  kiln_scope_end();
}

/* groups = G is G independent convolutions of the channel blocks: against
 * conv2d of each block (groups=1), forward and backward */
TEST(conv2d_groups_match_per_group_convs) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(3);
  kiln_tensor *x = kiln_randn(4, (int64_t[]){2, 6, 5, 5}, KILN_DTYPE_F64, g);
  kiln_tensor *w = kiln_randn(4, (int64_t[]){9, 2, 3, 3}, KILN_DTYPE_F64, g);
  kiln_tensor *b = kiln_randn(1, (int64_t[]){9}, KILN_DTYPE_F64, g);
  int64_t one[2] = {1, 1}, pad[2] = {1, 1};
  kiln_set_requires_grad(x, true);
  kiln_set_requires_grad(w, true);
  kiln_tensor *y = op_call1(KILN_OP_CONV2D, (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_INTS(one, 2),
                                                       OPV_INTS(pad, 2), OPV_INTS(one, 2), OPV_I(3)},
                            7);
  CHECK(y != NULL);
  kiln_tensor *parts[3];
  for (int k = 0; k < 3; k++)
    parts[k] = kiln_conv2d(kiln_narrow(x, 1, 2 * k, 2), kiln_narrow(w, 0, 3 * k, 3),
                           kiln_narrow(b, 0, 3 * k, 3), NULL, pad);
  kiln_tensor *want = kiln_cat(parts, 3, 1);
  double err;
  kiln_item(kiln_amax(kiln_abs(kiln_sub(y, want)), NULL, 0, false), &err);
  CHECK_NEAR(err, 0, 1e-12);
  kiln_tensor *gx1, *gw1, *gx2, *gw2;
  kiln_tensor *wt = kiln_randn(4, (int64_t[]){2, 9, 5, 5}, KILN_DTYPE_F64, g);
  kiln_tensor *ins[2] = {x, w}, *gs[2];
  kiln_tensor *l1 = kiln_sum(kiln_mul(y, wt), NULL, 0, false), *l2 = kiln_sum(kiln_mul(want, wt), NULL, 0, false);
  CHECK(kiln_grad(&l1, NULL, 1, ins, 2, NULL, gs) == 0);
  gx1 = gs[0], gw1 = gs[1];
  CHECK(kiln_grad(&l2, NULL, 1, ins, 2, NULL, gs) == 0);
  gx2 = gs[0], gw2 = gs[1];
  kiln_item(kiln_amax(kiln_abs(kiln_sub(gx1, gx2)), NULL, 0, false), &err);
  CHECK_NEAR(err, 0, 1e-12);
  kiln_item(kiln_amax(kiln_abs(kiln_sub(gw1, gw2)), NULL, 0, false), &err);
  CHECK_NEAR(err, 0, 1e-12);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* ---- max pooling -------------------------------------------------------------------- */

TEST(max_pool2d_golden) {
  int n = (int)(sizeof golden_pool_cases / sizeof *golden_pool_cases);
  for (int i = 0; i < n; i++) {
    const golden_pool *c = &golden_pool_cases[i];
    kiln_scope_begin();
    kiln_tensor *x = kiln_from_data(c->x, c->nd, c->xs, KILN_DTYPE_F64);
    kiln_set_requires_grad(x, true);
    bool def_stride = c->stride[0] == 0;
    op_val args[6] = {OPV_T(x),           OPV_INTS(c->k, 2), OPV_INTS(c->stride, def_stride ? 0 : 2),
                      OPV_INTS(c->pad, 2), OPV_INTS(c->dil, 2), OPV_B(false)};
    kiln_tensor *outs[2] = {0};
    int k = op_call(KILN_OP_MAX_POOL2D_WITH_INDICES, args, 6, outs, 2);
    CHECK_MSG(k == 2, "pool case %d: %s", i, kiln_last_error());
    if (k == 2) {
      CHECK(shape_is(outs[0], c->nd, c->os) && shape_is(outs[1], c->nd, c->os));
      CHECK(kiln_tensor_dtype(outs[1]) == KILN_DTYPE_I64);
      int64_t m = core_numel(c->nd, c->os);
      check_close(outs[0], c->out, m, 0, "max_pool2d values", i);
      for (int64_t j = 0; j < m; j++)
        CHECK_MSG(core_get_flat(outs[1], j) == (double)c->idx[j], "case %d index %lld", i,
                  (long long)j);
      kiln_tensor *go = kiln_from_data(c->gout, c->nd, c->os, KILN_DTYPE_F64);
      CHECK(kiln_backward(outs[0], go) == 0);
      check_close(kiln_tensor_grad(x), c->gx, core_numel(c->nd, c->xs), 0, "max_pool2d dx", i);
    }
    /* the decomposing op, float32 */
    args[0] = OPV_T(kiln_to_dtype(x, KILN_DTYPE_F32));
    kiln_tensor *v = op_call1(KILN_OP_MAX_POOL2D, args, 6);
    CHECK(v && kiln_tensor_dtype(v) == KILN_DTYPE_F32);
    check_close(v, c->out, core_numel(c->nd, c->os), 0, "max_pool2d f32", i);
    kiln_scope_end();
  }
}

TEST(max_pool2d_public_api_nan_and_errors) {
  kiln_scope_begin();
  double xv[8] = {1, 5, 2, 0, 3, -1, NAN, 4};
  kiln_tensor *x = kiln_from_data(xv, 4, (int64_t[]){1, 1, 2, 4}, KILN_DTYPE_F64);
  kiln_tensor *y = kiln_max_pool2d(x, (int64_t[]){2, 2}, NULL, NULL);
  CHECK(shape_is(y, 4, (int64_t[]){1, 1, 1, 2}));
  CHECK_NEAR(y ? core_get_flat(y, 0) : 0, 5.0, 0);
  CHECK(y && isnan(core_get_flat(y, 1))); /* NaN propagates */
  kiln_tensor *y2 = kiln_max_pool2d(x, (int64_t[]){1, 2}, (int64_t[]){1, 1}, NULL);
  CHECK(shape_is(y2, 4, (int64_t[]){1, 1, 2, 3}));
  /* errors */
  int64_t k2[2] = {2, 2}, one[2] = {1, 1}, zero[2] = {0, 0};
  /* ceil_mode keeps the partial last window (PyTorch: [[5, 2], [nan, nan]]) */
  int64_t k13[2] = {1, 3}, s12[2] = {1, 2};
  kiln_tensor *yc = op_call1(KILN_OP_MAX_POOL2D, (op_val[]){OPV_T(x), OPV_INTS(k13, 2),
                                                            OPV_INTS(s12, 2), OPV_INTS(zero, 2),
                                                            OPV_INTS(one, 2), OPV_B(true)},
                             6);
  CHECK(shape_is(yc, 4, (int64_t[]){1, 1, 2, 2}));
  CHECK_NEAR(yc ? core_get_flat(yc, 0) : 0, 5.0, 0);
  CHECK_NEAR(yc ? core_get_flat(yc, 1) : 0, 2.0, 0);
  CHECK(yc && isnan(core_get_flat(yc, 2)) && isnan(core_get_flat(yc, 3)));
  (void)k2;
  CHECK(kiln_max_pool2d(x, (int64_t[]){2, 2}, NULL, (int64_t[]){2, 0}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "padding [2, 0] must be at most half the kernel size [2, 2]");
  CHECK(kiln_max_pool2d(kiln_zeros(2, (int64_t[]){4, 4}, KILN_DTYPE_F32), (int64_t[]){2, 2}, NULL,
                        NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected a 3-D or 4-D input, got Float[4, 4]");
  CHECK(kiln_max_pool2d(kiln_zeros(3, (int64_t[]){1, 4, 4}, KILN_DTYPE_I64), (int64_t[]){2, 2},
                        NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "self must be Float or Double, got Long[1, 4, 4]");
  CHECK(kiln_max_pool2d(x, (int64_t[]){3, 3}, NULL, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "is smaller than the (dilated) kernel 3x3");
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------------------ */

OP_SAMPLE(CONV2D, bias_stride_pad) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 2, 4, 4}));
  s->args[1] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 2, 3, 2}));
  s->args[2] = OPV_T(sample_randn(g, 1, (int64_t[]){2}));
  s->ints[0][0] = 2, s->ints[0][1] = 1; /* stride */
  s->ints[1][0] = 1, s->ints[1][1] = 1; /* padding */
  s->ints[2][0] = 1, s->ints[2][1] = 1; /* dilation */
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[2], 2);
  s->args[6] = OPV_I(1);
  s->n_args = 7;
}
OP_SAMPLE(CONV2D, dilated_no_bias) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){1, 2, 5, 5}));
  s->args[1] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 2, 2, 2}));
  s->args[2] = OPV_NONE;
  s->ints[0][0] = 1, s->ints[0][1] = 2;
  s->ints[1][0] = 0, s->ints[1][1] = 1;
  s->ints[2][0] = 2, s->ints[2][1] = 1;
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[2], 2);
  s->args[6] = OPV_I(1);
  s->n_args = 7;
}
OP_SAMPLE(CONV2D, pointwise) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 3, 2, 3}));
  s->args[1] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 3, 1, 1}));
  s->args[2] = OPV_T(sample_randn(g, 1, (int64_t[]){2}));
  s->ints[0][0] = 1, s->ints[0][1] = 1;
  s->ints[1][0] = 0, s->ints[1][1] = 0;
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[0], 2);
  s->args[6] = OPV_I(1);
  s->n_args = 7;
}

/* Pool inputs: a shuffled grid with gaps of 0.1, so no two window entries
 * are within finite-difference reach of each other. */
static kiln_tensor *pool_input(kiln_generator *g, int nd, const int64_t *shape) {
  int64_t n = core_numel(nd, shape);
  kiln_tensor *t = kiln_zeros(nd, shape, KILN_DTYPE_F64);
  double *d = kiln_tensor_data(t);
  for (int64_t i = 0; i < n; i++) d[i] = 0.1 * (double)i - 0.05 * (double)n;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(core_rand_u64(g) % (uint64_t)(i + 1));
    double tmp = d[i];
    d[i] = d[j];
    d[j] = tmp;
  }
  return t;
}

static void pool_sample(op_sample *s, kiln_tensor *x, int64_t k0, int64_t k1, int n_stride,
                        int64_t s0, int64_t s1, int64_t p0, int64_t p1) {
  s->args[0] = OPV_T(x);
  s->ints[0][0] = k0, s->ints[0][1] = k1;
  s->ints[1][0] = s0, s->ints[1][1] = s1;
  s->ints[2][0] = p0, s->ints[2][1] = p1;
  s->ints[3][0] = 1, s->ints[3][1] = 1;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_INTS(s->ints[1], n_stride);
  s->args[3] = OPV_INTS(s->ints[2], 2);
  s->args[4] = OPV_INTS(s->ints[3], 2);
  s->args[5] = OPV_B(false);
  s->n_args = 6;
}

OP_SAMPLE(MAX_POOL2D_WITH_INDICES, overlap_pad) {
  pool_sample(s, pool_input(g, 4, (int64_t[]){1, 2, 5, 4}), 3, 2, 2, 2, 1, 1, 1);
}
OP_SAMPLE(MAX_POOL2D, default_stride) {
  pool_sample(s, pool_input(g, 4, (int64_t[]){2, 1, 4, 6}), 2, 2, 0, 0, 0, 0, 0);
}
OP_SAMPLE(MAX_POOL2D, unbatched) {
  pool_sample(s, pool_input(g, 3, (int64_t[]){2, 3, 5}), 2, 3, 2, 1, 1, 1, 1);
}
