/* tests/ops/test_activation.c: relu, gelu, silu, leaky_relu, clamp: values
 * by hand (PyTorch goldens run in test_unary.c), dtypes, kink and NaN
 * conventions of the gradients, errors, and gradcheck samples. */
#include "sample.h"
#include "test.h"

/* Exactly equal, or both NaN (CHECK_NEAR cannot compare infinities). */
#define CHECK_SAME(got, want)                                                   \
  do {                                                                          \
    double g_ = (got), w_ = (want);                                             \
    CHECK_MSG(g_ == w_ || (isnan(g_) && isnan(w_)), "%s: got %g, want %g", #got, g_, w_); \
  } while (0)

static kiln_tensor *vec(const double *v, int64_t n) {
  return kiln_from_data(v, 1, &n, KILN_DTYPE_F64);
}

TEST(activation_values) {
  kiln_scope_begin();
  double v[5] = {-2.0, -0.5, 0.0, 0.75, 3.0};
  kiln_tensor *x = vec(v, 5);
  kiln_tensor *r = kiln_relu(x), *l = kiln_leaky_relu(x, 0.1), *c = kiln_clamp(x, -1.0, 1.0);
  kiln_tensor *ge = kiln_gelu(x, false), *gt = kiln_gelu(x, true), *si = kiln_silu(x);
  for (int i = 0; i < 5; i++) {
    double a = v[i];
    CHECK_NEAR(core_get_flat(r, i), a > 0 ? a : 0, 0);
    CHECK_NEAR(core_get_flat(l, i), a > 0 ? a : 0.1 * a, 1e-16);
    CHECK_NEAR(core_get_flat(c, i), a < -1 ? -1 : a > 1 ? 1 : a, 0);
    CHECK_NEAR(core_get_flat(ge, i), a * 0.5 * erfc(-a / sqrt(2.0)), 1e-15);
    double u = sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a);
    CHECK_NEAR(core_get_flat(gt, i), 0.5 * a * (1 + tanh(u)), 1e-15);
    CHECK_NEAR(core_get_flat(si, i), a / (1 + exp(-a)), 1e-15);
  }
  /* clamp with no bounds is the identity here (PyTorch rejects it) */
  kiln_tensor *id = kiln_clamp(x, NAN, NAN);
  for (int i = 0; id && i < 5; i++) CHECK_NEAR(core_get_flat(id, i), v[i], 0);
  /* relu and clamp keep NaN; leaky_relu too */
  double nv[1] = {NAN};
  kiln_tensor *nx = vec(nv, 1);
  CHECK(isnan(core_get_flat(kiln_relu(nx), 0)));
  CHECK(isnan(core_get_flat(kiln_clamp(nx, 0, 1), 0)));
  CHECK(isnan(core_get_flat(kiln_leaky_relu(nx, 0.1), 0)));
  kiln_scope_end();
}

TEST(activation_dtypes) {
  kiln_scope_begin();
  int64_t iv[5] = {-9, -2, 0, 3, 8}, n5 = 5;
  kiln_tensor *it = kiln_from_data(iv, 1, &n5, KILN_DTYPE_I64);
  kiln_tensor *r = kiln_relu(it);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  const int64_t *rp = kiln_tensor_data(r);
  CHECK(rp[0] == 0 && rp[1] == 0 && rp[2] == 0 && rp[3] == 3 && rp[4] == 8);
  r = kiln_clamp(it, -3, 5);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  rp = kiln_tensor_data(r);
  CHECK(rp[0] == -3 && rp[1] == -2 && rp[3] == 3 && rp[4] == 5);
  r = kiln_clamp(it, NAN, 1e300); /* huge bounds saturate */
  rp = kiln_tensor_data(r);
  CHECK(rp[0] == -9 && rp[4] == 8);
  /* floating-only activations compute in float32 for integer input */
  r = kiln_silu(it);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 3), 3.0f / (1.0f + expf(-3.0f)), 1e-6); /* vmath.h: ~1 ulp */
  r = kiln_gelu(it, true);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  /* float32 stays float32 */
  float fv[2] = {-1.5f, 2.5f};
  int64_t n2 = 2;
  kiln_tensor *ft = kiln_from_data(fv, 1, &n2, KILN_DTYPE_F32);
  r = kiln_leaky_relu(ft, 0.01);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 0), -1.5f * 0.01f, 0);
  kiln_scope_end();
}

TEST(activation_errors) {
  kiln_scope_begin();
  bool bv[2] = {true, false};
  int64_t n2 = 2, iv[2] = {1, -1};
  kiln_tensor *bt = kiln_from_data(bv, 1, &n2, KILN_DTYPE_BOOL);
  kiln_tensor *it = kiln_from_data(iv, 1, &n2, KILN_DTYPE_I64);
  CHECK(kiln_relu(bt) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::relu: not implemented for dtype Bool");
  CHECK(kiln_leaky_relu(it, 0.1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::leaky_relu: not implemented for dtype Long");
  CHECK(kiln_clamp(bt, 0, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::clamp: not implemented for dtype Bool");
  CHECK(kiln_gelu(NULL, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::gelu: operand 0 must be a tensor");
  kiln_scope_end();
}

/* Gradients at the kinks and at NaN follow PyTorch: relu' = 0 at 0 but
 * passes the gradient at NaN (threshold_backward); leaky_relu' = slope at
 * 0; clamp' = 1 on a bound, 0 at NaN; a masked element never sees an
 * infinite upstream gradient as NaN. */
TEST(activation_grad_conventions) {
  kiln_scope_begin();
  double v[5] = {0.0, NAN, -1.0, 1.0, 2.0}, gv[5] = {2.0, 3.0, INFINITY, 5.0, 7.0};
  kiln_tensor *x = vec(v, 5), *go = vec(gv, 5), *gx = NULL;
  kiln_set_requires_grad(x, true);
  kiln_tensor *r = kiln_relu(x);
  CHECK(kiln_grad(&r, &go, 1, &x, 1, NULL, &gx) == 0);
  double want_relu[5] = {0, 3, 0, 5, 7};
  for (int i = 0; gx && i < 5; i++) CHECK_SAME(core_get_flat(gx, i), want_relu[i]);
  r = kiln_leaky_relu(x, 0.25);
  CHECK(kiln_grad(&r, &go, 1, &x, 1, NULL, &gx) == 0);
  double want_leaky[5] = {0.5, 0.75, INFINITY, 5, 7};
  for (int i = 0; gx && i < 5; i++) CHECK_SAME(core_get_flat(gx, i), want_leaky[i]);
  r = kiln_clamp(x, -1.0, 1.0);
  CHECK(kiln_grad(&r, &go, 1, &x, 1, NULL, &gx) == 0);
  double want_clamp[5] = {2, 0, INFINITY, 5, 0};
  for (int i = 0; gx && i < 5; i++) CHECK_SAME(core_get_flat(gx, i), want_clamp[i]);
  r = kiln_clamp(x, NAN, 0.5); /* max only */
  CHECK(kiln_grad(&r, &go, 1, &x, 1, NULL, &gx) == 0);
  double want_max[5] = {2, 0, INFINITY, 0, 0};
  for (int i = 0; gx && i < 5; i++) CHECK_SAME(core_get_flat(gx, i), want_max[i]);
  r = kiln_clamp(x, NAN, NAN); /* no bounds: the gradient passes */
  CHECK(kiln_grad(&r, &go, 1, &x, 1, NULL, &gx) == 0);
  for (int i = 0; gx && i < 5; i++) CHECK_SAME(core_get_flat(gx, i), gv[i]);
  kiln_scope_end();
}

/* relu's formula reads the saved output: modifying it in place is caught. */
TEST(activation_relu_saved_output_checked) {
  kiln_scope_begin();
  double v[3] = {-1.0, 0.5, 2.0};
  kiln_tensor *x = vec(v, 3);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_relu(x);
  kiln_no_grad_begin();
  CHECK(kiln_fill_(y, 1.0) == 0);
  kiln_no_grad_end();
  int64_t n = 3;
  CHECK(kiln_backward(y, kiln_ones(1, &n, KILN_DTYPE_F64)) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "has been modified by an inplace operation");
  kiln_scope_end();
}

/* A large float32 input: the parallel path matches the scalar definition. */
TEST(activation_large_parallel) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(23);
  int64_t n = 70001;
  kiln_tensor *x = kiln_randn(1, &n, KILN_DTYPE_F32, g);
  kiln_tensor *r = kiln_relu(x), *c = kiln_clamp(x, -0.5, 0.25), *l = kiln_leaky_relu(x, 0.3);
  const float *px = kiln_tensor_data(x), *pr = kiln_tensor_data(r), *pc = kiln_tensor_data(c),
              *pl = kiln_tensor_data(l);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float a = px[i];
    bad += pr[i] != (a < 0 ? 0.0f : a);
    bad += pc[i] != (a < -0.5f ? -0.5f : a > 0.25f ? 0.25f : a);
    bad += pl[i] != (a > 0 ? a : a * 0.3f);
  }
  CHECK_EQ_INT(bad, 0);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------- */

static const int64_t S34[2] = {3, 4}, S252[3] = {2, 5, 2};

/* Values in [0.2, 1.5) with random signs: away from the kink at 0. */
static kiln_tensor *away_from_zero(kiln_generator *g, int ndim, const int64_t *shape) {
  kiln_tensor *sign = kiln_sign(sample_randn(g, ndim, shape));
  return kiln_mul(sample_uniform(g, ndim, shape, 0.2, 1.5), sign);
}

/* A transposed [3, 4] view of values away from zero. */
static kiln_tensor *away_transposed(kiln_generator *g) {
  int64_t sh[2] = {4, 3};
  return kiln_t(away_from_zero(g, 2, sh));
}

OP_SAMPLE(RELU, away_from_zero) {
  s->args[0] = OPV_T(away_from_zero(g, 2, S34));
  s->n_args = 1;
}
OP_SAMPLE(RELU, transposed) {
  s->args[0] = OPV_T(away_transposed(g));
  s->n_args = 1;
}
OP_SAMPLE(GELU, exact) {
  s->args[0] = OPV_T(sample_randn(g, 3, S252));
  s->args[1] = OPV_S("none");
  s->n_args = 2;
}
OP_SAMPLE(GELU, tanh) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_S("tanh");
  s->n_args = 2;
}
OP_SAMPLE(SILU, plain) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->n_args = 1;
}
OP_SAMPLE(LEAKY_RELU, slope) {
  s->args[0] = OPV_T(away_from_zero(g, 2, S34));
  s->args[1] = OPV_F(0.2);
  s->n_args = 2;
}
OP_SAMPLE(LEAKY_RELU, negative_slope_transposed) {
  s->args[0] = OPV_T(away_transposed(g));
  s->args[1] = OPV_F(-0.5);
  s->n_args = 2;
}
/* Clamp inputs: -1.45 + 0.25 i (i < 12) plus noise in [-0.04, 0.04), so
 * that every element stays >= 0.06 away from the bounds used below. */
static kiln_tensor *clamp_grid(kiln_generator *g, const int64_t shape[2]) {
  double v[12];
  for (int i = 0; i < 12; i++) v[i] = -1.45 + 0.25 * i;
  kiln_tensor *t = kiln_from_data(v, 2, shape, KILN_DTYPE_F64);
  return kiln_add(t, sample_uniform(g, 2, shape, -0.04, 0.04));
}
OP_SAMPLE(CLAMP, both) {
  s->args[0] = OPV_T(clamp_grid(g, S34));
  s->args[1] = OPV_F(-0.55);
  s->args[2] = OPV_F(0.75);
  s->n_args = 3;
}
OP_SAMPLE(CLAMP, min_only_transposed) {
  int64_t sh[2] = {4, 3};
  s->args[0] = OPV_T(kiln_t(clamp_grid(g, sh)));
  s->args[1] = OPV_F(0.1);
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
OP_SAMPLE(CLAMP, max_only_int_bound) {
  s->args[0] = OPV_T(clamp_grid(g, S34));
  s->args[1] = OPV_NONE;
  s->args[2] = OPV_I(1);
  s->n_args = 3;
}
