/* tests/ops/test_binary.c: pow, maximum, minimum: broadcasting, strided
 * inputs, promotion, integer kernels, tie-splitting gradients, errors, and
 * gradcheck samples (PyTorch goldens run in test_unary.c). */
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S21[2] = {2, 1}, S3[1] = {3}, S13[2] = {1, 3};

TEST(binary_broadcast_values) {
  kiln_scope_begin();
  double av[2] = {2.0, 3.0}, bv[3] = {0.5, 2.0, -1.0};
  kiln_tensor *a = kiln_from_data(av, 2, S21, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, S3, KILN_DTYPE_F64);
  kiln_tensor *p = kiln_pow(a, b), *mx = kiln_maximum(a, b), *mn = kiln_minimum(b, a);
  CHECK_EQ_INT(kiln_tensor_ndim(p), 2);
  CHECK_EQ_INT(kiln_tensor_shape(p)[0], 2);
  CHECK_EQ_INT(kiln_tensor_shape(p)[1], 3);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      CHECK_NEAR(core_get_flat(p, i * 3 + j), pow(av[i], bv[j]), 1e-15);
      CHECK_NEAR(core_get_flat(mx, i * 3 + j), fmax(av[i], bv[j]), 0);
      CHECK_NEAR(core_get_flat(mn, i * 3 + j), fmin(av[i], bv[j]), 0);
    }
  /* a transposed [3, 2] operand against a [2] row */
  double tv[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *m = kiln_from_data(tv, 2, S23, KILN_DTYPE_F64); /* [[1,2,3],[4,5,6]] */
  int64_t tsh[2] = {3, 2}, tst[2] = {1, 3};
  kiln_tensor *mt = core_autorelease(core_tensor_view(m->storage, KILN_DTYPE_F64, 2, tsh, tst, 0));
  double rv[2] = {2.5, 4.5};
  int64_t n2 = 2;
  kiln_tensor *row = kiln_from_data(rv, 1, &n2, KILN_DTYPE_F64);
  kiln_tensor *r = kiln_maximum(mt, row);
  double want[6] = {2.5, 4.5, 2.5, 5, 3, 6}; /* max([[1,4],[2,5],[3,6]], [2.5,4.5]) */
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(r, i), want[i], 0);
  /* scalar exponents */
  r = kiln_pow_scalar(mt, 2.0);
  double sq[6] = {1, 16, 4, 25, 9, 36};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(r, i), sq[i], 0);
  r = kiln_pow_scalar(mt, -1.0);
  CHECK_NEAR(core_get_flat(r, 1), 0.25, 0);
  kiln_scope_end();
}

TEST(binary_dtypes) {
  kiln_scope_begin();
  int64_t iv[4] = {2, -3, 1, 0}, ev[4] = {10, 3, -5, 0}, n4 = 4;
  kiln_tensor *ia = kiln_from_data(iv, 1, &n4, KILN_DTYPE_I64);
  kiln_tensor *ie = kiln_from_data(ev, 1, &n4, KILN_DTYPE_I64);
  kiln_tensor *r = kiln_pow(ia, ie);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  const int64_t *rp = kiln_tensor_data(r);
  CHECK(rp[0] == 1024 && rp[1] == -27 && rp[2] == 1 && rp[3] == 1);
  /* int ** float scalar is float32; int ** int tensor stays int */
  r = kiln_pow_scalar(ia, 2.0);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 1), 9.0, 0);
  /* float32 base, int exponent tensor: float32; float64 0-d exponent does
   * not promote a float32 tensor */
  float fv[4] = {1.5f, 2.0f, 0.5f, 4.0f};
  kiln_tensor *fa = kiln_from_data(fv, 1, &n4, KILN_DTYPE_F32);
  r = kiln_pow(fa, ie);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 0), powf(1.5f, 10.0f), 0);
  CHECK_NEAR(core_get_flat(r, 2), 32.0, 0);
  r = kiln_pow(fa, kiln_scalar(3.0, KILN_DTYPE_F64));
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 3), 64.0, 0);
  /* maximum of int64 and float32 is float32 */
  r = kiln_maximum(ia, fa);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 0), 2.0, 0);
  CHECK_NEAR(core_get_flat(r, 1), 2.0, 0);
  r = kiln_minimum(ia, ie);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  rp = kiln_tensor_data(r);
  CHECK(rp[0] == 2 && rp[1] == -3 && rp[2] == -5 && rp[3] == 0);
  /* bool maximum is or, minimum is and */
  bool ba[2] = {true, false}, bb[2] = {false, false};
  int64_t n2 = 2;
  kiln_tensor *ta = kiln_from_data(ba, 1, &n2, KILN_DTYPE_BOOL);
  kiln_tensor *tb = kiln_from_data(bb, 1, &n2, KILN_DTYPE_BOOL);
  r = kiln_maximum(ta, tb);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_BOOL && core_get_flat(r, 0) == 1 &&
        core_get_flat(r, 1) == 0);
  r = kiln_minimum(ta, tb);
  CHECK(core_get_flat(r, 0) == 0);
  kiln_scope_end();
}

TEST(binary_errors) {
  kiln_scope_begin();
  int64_t s4[1] = {4};
  kiln_tensor *a = kiln_zeros(2, S23, KILN_DTYPE_F32), *b = kiln_zeros(1, s4, KILN_DTYPE_F32);
  CHECK(kiln_maximum(a, b) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::maximum: shapes [2, 3] and [4] cannot be broadcast");
  CHECK(kiln_pow(a, b) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::pow: shapes [2, 3] and [4] cannot be broadcast");
  kiln_tensor *t = kiln_zeros(1, s4, KILN_DTYPE_BOOL);
  CHECK(kiln_pow(t, t) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::pow: not implemented for dtype Bool");
  CHECK(kiln_minimum(a, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::minimum: operand 1 must be a tensor or a number");
  kiln_scope_end();
}

/* Ties split the gradient equally (PyTorch 1.13), and broadcast operands
 * get their gradients summed back to their shapes. */
TEST(binary_minmax_grad_ties_and_broadcast) {
  kiln_scope_begin();
  double av[6] = {1, 5, 3, 4, 2, 6}, bv[3] = {1, 2, 6};
  kiln_tensor *a = kiln_from_data(av, 2, S23, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, S3, KILN_DTYPE_F64);
  kiln_set_requires_grad(a, true);
  kiln_set_requires_grad(b, true);
  kiln_tensor *ins[2] = {a, b}, *got[2] = {NULL, NULL};
  kiln_tensor *go = kiln_ones(2, S23, KILN_DTYPE_F64);
  /* a = [[1, 5, 3], [4, 2, 6]] against b = [1, 2, 6]: ties at [0,0], [1,1]
   * and [1,2]; a is larger at [0,1] and [1,0], smaller at [0,2] */
  kiln_tensor *r = kiln_maximum(a, b);
  CHECK(kiln_grad(&r, &go, 1, ins, 2, NULL, got) == 0);
  double wa[6] = {0.5, 1, 0, 1, 0.5, 0.5}, wb[3] = {0.5, 0.5, 1.5};
  for (int i = 0; got[0] && i < 6; i++) CHECK_NEAR(core_get_flat(got[0], i), wa[i], 0);
  CHECK(got[1] && kiln_tensor_ndim(got[1]) == 1 && kiln_tensor_shape(got[1])[0] == 3);
  for (int i = 0; got[1] && i < 3; i++) CHECK_NEAR(core_get_flat(got[1], i), wb[i], 0);
  r = kiln_minimum(a, b);
  CHECK(kiln_grad(&r, &go, 1, ins, 2, NULL, got) == 0);
  double va[6] = {0.5, 0, 1, 0, 0.5, 0.5}, vb[3] = {1.5, 1.5, 0.5};
  for (int i = 0; got[0] && i < 6; i++) CHECK_NEAR(core_get_flat(got[0], i), va[i], 0);
  for (int i = 0; got[1] && i < 3; i++) CHECK_NEAR(core_get_flat(got[1], i), vb[i], 0);
  kiln_scope_end();
}

/* pow's special cases: d/da of a ** 0 is 0 even at a == 0; d/db at a == 0
 * is 0 for b >= 0 (no 0 * -inf); only the operand that wants a gradient
 * gets one (the exponent does not require grad here). */
TEST(binary_pow_grad_edges) {
  kiln_scope_begin();
  double av[3] = {0.0, 2.0, 0.0}, bv[3] = {0.0, 3.0, 2.0};
  int64_t n = 3;
  kiln_tensor *a = kiln_from_data(av, 1, &n, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, &n, KILN_DTYPE_F64);
  kiln_tensor *go = kiln_ones(1, &n, KILN_DTYPE_F64), *ga = NULL, *gb[2] = {NULL, NULL};
  kiln_set_requires_grad(a, true);
  kiln_tensor *r = kiln_pow(a, b);
  CHECK(kiln_grad(&r, &go, 1, &a, 1, NULL, &ga) == 0);
  double want_a[3] = {0, 12, 0};
  for (int i = 0; ga && i < 3; i++) CHECK_NEAR(core_get_flat(ga, i), want_a[i], 0);
  r = kiln_pow_scalar(a, 0.0);
  CHECK(kiln_grad(&r, &go, 1, &a, 1, NULL, &ga) == 0);
  for (int i = 0; ga && i < 3; i++) CHECK_NEAR(core_get_flat(ga, i), 0, 0);
  kiln_set_requires_grad(b, true);
  kiln_tensor *ins[2] = {a, b};
  r = kiln_pow(a, b);
  CHECK(kiln_grad(&r, &go, 1, ins, 2, NULL, gb) == 0);
  double want_b[3] = {0, 8 * log(2.0), 0};
  for (int i = 0; gb[1] && i < 3; i++) CHECK_NEAR(core_get_flat(gb[1], i), want_b[i], 1e-15);
  /* an int64 exponent: the base still gets its gradient, in float64 */
  int64_t ev[3] = {1, 2, 3};
  kiln_tensor *ie = kiln_from_data(ev, 1, &n, KILN_DTYPE_I64);
  r = kiln_pow(a, ie);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F64);
  CHECK(kiln_grad(&r, &go, 1, &a, 1, NULL, &ga) == 0);
  double want_i[3] = {1, 4, 0};
  for (int i = 0; ga && i < 3; i++) CHECK_NEAR(core_get_flat(ga, i), want_i[i], 0);
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------- */

OP_SAMPLE(POW, broadcast) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S21, 0.5, 2.0));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->n_args = 2;
}
OP_SAMPLE(POW, transposed_base) {
  int64_t sh[2] = {3, 2};
  s->args[0] = OPV_T(kiln_t(sample_uniform(g, 2, sh, 0.5, 2.0)));
  s->args[1] = OPV_T(sample_uniform(g, 2, S13, -1.5, 2.5));
  s->n_args = 2;
}
OP_SAMPLE(POW, integer_scalar_exponent) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_F(3.0);
  s->n_args = 2;
}
OP_SAMPLE(POW, fractional_scalar_exponent) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S23, 0.5, 2.0));
  s->args[1] = OPV_F(-1.5);
  s->n_args = 2;
}
OP_SAMPLE(POW, scalar_base) {
  s->args[0] = OPV_F(1.7);
  s->args[1] = OPV_T(sample_randn(g, 2, S23));
  s->n_args = 2;
}
OP_SAMPLE(MAXIMUM, broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->n_args = 2;
}
OP_SAMPLE(MAXIMUM, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_T(sample_randn(g, 2, S21));
  s->n_args = 2;
}
OP_SAMPLE(MINIMUM, broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 2, S21));
  s->args[1] = OPV_T(sample_transposed(g, S23));
  s->n_args = 2;
}
OP_SAMPLE(MINIMUM, scalar_other) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_F(0.1);
  s->n_args = 2;
}
