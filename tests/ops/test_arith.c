/* tests/ops/test_arith.c: add, sub, mul, div: values by hand and samples
 * for the table-driven gradcheck. */
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S3[1] = {3}, S13[2] = {1, 3}, S21[2] = {2, 1};

OP_SAMPLE(ADD, same) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 2, S23));
  s->args[2] = OPV_F(1.0);
  s->n_args = 3;
}
OP_SAMPLE(ADD, broadcast_alpha) {
  s->args[0] = OPV_T(sample_randn(g, 2, S21));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_F(-2.5);
  s->n_args = 3;
}
OP_SAMPLE(ADD, scalar_other) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_F(3.0);
  s->args[2] = OPV_I(2);
  s->n_args = 3;
}
OP_SAMPLE(SUB, broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 1, S3));
  s->args[1] = OPV_T(sample_transposed(g, S23));
  s->args[2] = OPV_F(0.5);
  s->n_args = 3;
}
OP_SAMPLE(MUL, broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 2, S13));
  s->args[1] = OPV_T(sample_randn(g, 2, S21));
  s->n_args = 2;
}
OP_SAMPLE(MUL, scalar) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_F(-1.5);
  s->n_args = 2;
}
OP_SAMPLE(DIV, broadcast) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_T(sample_uniform(g, 1, S3, 0.5, 2.0));
  s->n_args = 2;
}

TEST(arith_values) {
  kiln_scope_begin();
  double av[6] = {1, 2, 3, 4, 5, 6}, bv[2] = {2, 4};
  kiln_tensor *a = kiln_from_data(av, 2, S23, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 2, S21, KILN_DTYPE_F64);
  kiln_tensor *r = kiln_sub_alpha(a, b, 0.5); /* a - 0.5*b, b broadcast over columns */
  double want_sub[6] = {0, 1, 2, 2, 3, 4};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(r, i), want_sub[i], 0);
  r = kiln_div(a, b);
  double want_div[6] = {0.5, 1, 1.5, 1, 1.25, 1.5};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(r, i), want_div[i], 1e-15);
  int64_t iv[3] = {7, -3, 2};
  kiln_tensor *it = kiln_from_data(iv, 1, S3, KILN_DTYPE_I64);
  kiln_tensor *q = kiln_div(it, it); /* true division of ints gives float32 */
  CHECK(kiln_tensor_dtype(q) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(q, 1), 1.0, 0);
  kiln_tensor *m = kiln_mul(it, it);
  CHECK(kiln_tensor_dtype(m) == KILN_DTYPE_I64);
  CHECK_NEAR(core_get_flat(m, 0), 49, 0);
  kiln_scope_end();
}

TEST(arith_large_parallel_matches_serial) {
  kiln_scope_begin();
  int64_t n[1] = {100003};
  kiln_generator *g = kiln_generator_new(5);
  kiln_tensor *a = kiln_randn(1, n, KILN_DTYPE_F32, g);
  kiln_tensor *b = kiln_randn(1, n, KILN_DTYPE_F32, g);
  kiln_tensor *c = kiln_add_alpha(a, b, 3.0);
  const float *pa = kiln_tensor_data(a), *pb = kiln_tensor_data(b), *pc = kiln_tensor_data(c);
  int bad = 0;
  /* a + alpha * b rounds once (fmadd, as PyTorch's vectorized add) */
  for (int64_t i = 0; i < n[0]; i++) bad += pc[i] != fmaf(3.0f, pb[i], pa[i]);
  CHECK_EQ_INT(bad, 0);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Regression: strided, broadcast and one-element int64 operands were
 * converted through double, losing everything past 53 bits. */
TEST(arith_int64_exact_through_strides_and_scalars) {
  kiln_scope_begin();
  int64_t big = (int64_t)1 << 60, v[4] = {big + 1, 2, big + 3, 4};
  int64_t sh[2] = {2, 2};
  kiln_tensor *a = kiln_from_data(v, 2, sh, KILN_DTYPE_I64);
  kiln_tensor *t = kiln_t(a); /* strided */
  kiln_tensor *one = kiln_from_data((int64_t[]){big + 7}, 0, NULL, KILN_DTYPE_I64);
  kiln_tensor *r = kiln_add(t, one);
  const int64_t *d = kiln_tensor_data(r);
  CHECK(d[0] == big + 1 + big + 7);
  CHECK(d[1] == big + 3 + big + 7);
  CHECK(d[2] == 2 + big + 7);
  kiln_scope_end();
}

/* int64 arithmetic wraps around as PyTorch's does (two's complement), with
 * no undefined behaviour: the sanitizer build checks this. Found by the
 * .npy fuzz target (summing an int64 file). */
TEST(arith_int64_overflow_wraps) {
  kiln_scope_begin();
  int64_t av[3] = {INT64_MAX, INT64_MIN, (int64_t)1 << 62}, bv[3] = {1, 1, 4}, n = 3;
  kiln_tensor *a = kiln_from_data(av, 1, &n, KILN_DTYPE_I64);
  kiln_tensor *b = kiln_from_data(bv, 1, &n, KILN_DTYPE_I64);
  const int64_t *s = kiln_tensor_data(kiln_contiguous(kiln_add(a, b)));
  const int64_t *d = kiln_tensor_data(kiln_contiguous(kiln_sub(a, b)));
  const int64_t *m = kiln_tensor_data(kiln_contiguous(kiln_mul(a, b)));
  CHECK(s && s[0] == INT64_MIN && s[1] == INT64_MIN + 1 && s[2] == ((int64_t)1 << 62) + 4);
  CHECK(d && d[0] == INT64_MAX - 1 && d[1] == INT64_MAX);
  CHECK(m && m[0] == INT64_MAX && m[1] == INT64_MIN && m[2] == 0);
  /* torch.tensor([2**63-1, 2**63-1, 2]).sum() == 0 */
  int64_t cv[3] = {INT64_MAX, INT64_MAX, 2};
  kiln_tensor *total = kiln_sum(kiln_from_data(cv, 1, &n, KILN_DTYPE_I64), NULL, 0, false);
  CHECK(total && kiln_tensor_dtype(total) == KILN_DTYPE_I64 &&
        *(const int64_t *)kiln_tensor_data(total) == 0);
  kiln_scope_end();
}
