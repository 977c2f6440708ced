/* tests/ops/test_softmax.c: softmax and log_softmax: PyTorch golden values
 * and gradients (any dim, transposed inputs), stability for large inputs,
 * dtype argument, errors, and gradcheck samples. */
#include "golden_reduce.h"
#include "sample.h"
#include "test.h"

static const int64_t S34[2] = {3, 4}, S234[3] = {2, 3, 4};

OP_SAMPLE(SOFTMAX, last) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(-1);
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
OP_SAMPLE(SOFTMAX, first_transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
OP_SAMPLE(SOFTMAX, middle) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
OP_SAMPLE(LOG_SOFTMAX, last) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
OP_SAMPLE(LOG_SOFTMAX, middle_dtype) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_I(-2);
  s->args[2] = OPV_I(7); /* Double */
  s->n_args = 3;
}
OP_SAMPLE(LOG_SOFTMAX, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}

TEST(softmax_golden) {
  kiln_scope_begin();
  for (int c = 0; c < GOLDEN_SOFTMAX_N; c++) {
    const golden_softmax_case *k = &golden_softmax[c];
    kiln_tensor *x = kiln_from_data(k->x, k->ndim, k->shape, KILN_DTYPE_F64);
    kiln_set_requires_grad(x, true);
    kiln_tensor *xt = k->transpose ? kiln_transpose(x, 0, k->ndim - 1) : x;
    kiln_tensor *y = k->log ? kiln_log_softmax(xt, k->dim) : kiln_softmax(xt, k->dim);
    sample_check_vals(k->name, y, k->y, k->numel, 1e-12);
    if (!y) continue;
    kiln_tensor *gy = kiln_from_data(k->g, y->ndim, y->shape, KILN_DTYPE_F64);
    kiln_tensor *gx = NULL;
    CHECK(kiln_grad(&y, &gy, 1, &x, 1, NULL, &gx) == KILN_OK);
    sample_check_vals(k->name, gx, k->gx, k->numel, 1e-12);
    /* float32 agrees to float precision */
    kiln_tensor *y32 = k->log ? kiln_log_softmax(kiln_to_dtype(xt, KILN_DTYPE_F32), k->dim)
                              : kiln_softmax(kiln_to_dtype(xt, KILN_DTYPE_F32), k->dim);
    CHECK(y32 && kiln_tensor_dtype(y32) == KILN_DTYPE_F32);
    sample_check_vals(k->name, y32, k->y, k->numel, 1e-5);
  }
  kiln_scope_end();
}

TEST(softmax_stable_and_sums_to_one) {
  kiln_scope_begin();
  float v[6] = {1000, 1001, 1002, -1000, -1001, -1e30f};
  kiln_tensor *x = kiln_from_data(v, 2, (int64_t[]){2, 3}, KILN_DTYPE_F32);
  kiln_tensor *y = kiln_softmax(x, 1);
  /* softmax([0, 1, 2]) */
  double e0 = exp(-2.0), e1 = exp(-1.0), z = e0 + e1 + 1;
  double want[6] = {e0 / z, e1 / z, 1 / z, 1 / (1 + exp(-1.0)), exp(-1.0) / (1 + exp(-1.0)), 0};
  sample_check_vals("softmax large", y, want, 6, 1e-6);
  kiln_tensor *ly = kiln_log_softmax(x, 1);
  double lwant[5] = {-2 - log(z), -1 - log(z), -log(z), -log(1 + exp(-1.0)),
                     -1 - log(1 + exp(-1.0))};
  for (int i = 0; ly && i < 5; i++) CHECK_NEAR(core_get_flat(ly, i), lwant[i], 1e-5);
  CHECK(ly && core_get_flat(ly, 5) < -1e29);
  /* a large tensor along a non-last dim: each column sums to 1 */
  kiln_generator *g = kiln_generator_new(9);
  int64_t sh[3] = {4, 37, 300};
  kiln_tensor *r = kiln_mul_scalar(kiln_randn(3, sh, KILN_DTYPE_F32, g), 5.0);
  kiln_tensor *s = kiln_sum(kiln_softmax(r, 1), (int64_t[]){1}, 1, false);
  int bad = 0;
  for (int64_t i = 0; i < 4 * 300; i++) bad += fabs(core_get_flat(s, i) - 1.0) > 1e-5;
  CHECK_EQ_INT(bad, 0);
  /* log_softmax = log(softmax) */
  kiln_tensor *d = kiln_sub(kiln_log_softmax(r, 2), kiln_log(kiln_softmax(r, 2)));
  kiln_tensor *m = kiln_amax(kiln_abs(d), NULL, 0, false);
  CHECK(m && core_get_flat(m, 0) < 1e-4);
  kiln_generator_free(g);
  /* NaN poisons its row (or column), not the others */
  float nv[6] = {1, NAN, 2, 3, 4, 5};
  kiln_tensor *xn = kiln_from_data(nv, 2, (int64_t[]){2, 3}, KILN_DTYPE_F32);
  kiln_tensor *yn = kiln_softmax(xn, 1), *yc = kiln_log_softmax(xn, 0);
  CHECK(yn && isnan(core_get_flat(yn, 0)) && isnan(core_get_flat(yn, 2)));
  CHECK(yn && fabs(core_get_flat(yn, 5) - 1 / (1 + exp(-1.0) + exp(-2.0))) < 1e-6);
  CHECK(yc && isnan(core_get_flat(yc, 1)) && isnan(core_get_flat(yc, 4)));
  CHECK(yc && fabs(core_get_flat(yc, 0) - (1 - 3 - log(1 + exp(-2.0)))) < 1e-6);
  /* 0-d input: softmax 1, log_softmax 0 */
  kiln_tensor *sc = kiln_scalar(3, KILN_DTYPE_F64);
  double one[1] = {1}, zero[1] = {0};
  sample_check_vals("softmax 0-d", kiln_softmax(sc, 0), one, 1, 0);
  sample_check_vals("log_softmax 0-d", kiln_log_softmax(sc, -1), zero, 1, 0);
  kiln_scope_end();
}

TEST(softmax_dtype_and_errors) {
  kiln_scope_begin();
  kiln_tensor *xi = kiln_arange(0, 4, 1, KILN_DTYPE_I64);
  CHECK(kiln_softmax(xi, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::softmax: expected a floating-point tensor");
  CHECK_STR_CONTAINS(kiln_last_error(), "Long[4]");
  /* with a dtype argument an int64 input works */
  kiln_tensor *y = op_call1(KILN_OP_SOFTMAX, (op_val[]){OPV_T(xi), OPV_I(0), OPV_I(7)}, 3);
  CHECK(y && kiln_tensor_dtype(y) == KILN_DTYPE_F64);
  double z = 1 + exp(1.0) + exp(2.0) + exp(3.0);
  double want[4] = {1 / z, exp(1.0) / z, exp(2.0) / z, exp(3.0) / z};
  sample_check_vals("softmax dtype", y, want, 4, 1e-15);
  kiln_tensor *x = kiln_zeros(2, S34, KILN_DTYPE_F32);
  CHECK(kiln_log_softmax(x, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::log_softmax: dim 2 out of range");
  CHECK(op_call1(KILN_OP_SOFTMAX, (op_val[]){OPV_T(x), OPV_I(0), OPV_I(4)}, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "dtype must be floating point, got Long");
  /* float32 input, Double output: the gradient comes back as float32 */
  kiln_tensor *xf = kiln_ones(2, S34, KILN_DTYPE_F32);
  kiln_set_requires_grad(xf, true);
  kiln_tensor *yd = op_call1(KILN_OP_LOG_SOFTMAX, (op_val[]){OPV_T(xf), OPV_I(1), OPV_I(7)}, 3);
  CHECK(yd && kiln_tensor_dtype(yd) == KILN_DTYPE_F64);
  CHECK(kiln_backward(kiln_sum(yd, NULL, 0, false), NULL) == KILN_OK);
  kiln_tensor *gx = kiln_tensor_grad(xf);
  CHECK(gx && kiln_tensor_dtype(gx) == KILN_DTYPE_F32);
  double gz[12] = {0};
  sample_check_vals("log_softmax grad of sum", gx, gz, 12, 1e-6);
  kiln_scope_end();
}

/* Note [Short rows]: float32 rows of at most 32 go through the chunked
 * path; it must agree with the float64 row kernel, across a chunk boundary
 * (300 rows of 20 is two chunks), with an all -inf row (NaN, as PyTorch)
 * and a row of equal values. */
TEST(softmax_short_rows_match_float64) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(21);
  int64_t sh[2] = {300, 20};
  kiln_tensor *x = kiln_mul_scalar(kiln_randn(2, sh, KILN_DTYPE_F32, g), 4.0);
  float *xv = kiln_tensor_data(x);
  for (int j = 0; j < 20; j++) xv[7 * 20 + j] = -INFINITY, xv[8 * 20 + j] = 3.5f;
  for (int lg = 0; lg < 2; lg++) {
    kiln_tensor *y = lg ? kiln_log_softmax(x, 1) : kiln_softmax(x, 1);
    kiln_tensor *x64 = kiln_to_dtype(x, KILN_DTYPE_F64);
    kiln_tensor *w = lg ? kiln_log_softmax(x64, 1) : kiln_softmax(x64, 1);
    int bad = 0;
    for (int64_t i = 0; y && w && i < 300 * 20; i++) {
      double a = core_get_flat(y, i), b = core_get_flat(w, i);
      bool ok = isnan(b) ? isnan(a) : fabs(a - b) <= 2e-6 * (1 + fabs(b));
      if (!ok && bad++ < 3)
        test_fail(__FILE__, __LINE__, "%s: element %lld: %.9g vs %.9g",
                  lg ? "log_softmax" : "softmax", (long long)i, a, b);
    }
    CHECK(y && isnan(core_get_flat(y, 7 * 20))); /* the -inf row */
    CHECK(y && fabs(core_get_flat(y, 8 * 20) - (lg ? -log(20.0) : 0.05)) < 1e-6);
  }
  kiln_generator_free(g);
  kiln_scope_end();
}
