/* tests/ops/test_compare.c: eq, ne, lt, le, gt, ge and where: bool results,
 * promotion, broadcasting, strided inputs, no gradient through comparisons,
 * where's gradients and errors, and gradcheck samples (PyTorch goldens run
 * in test_unary.c). */
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S21[2] = {2, 1}, S3[1] = {3};

TEST(compare_values_and_promotion) {
  kiln_scope_begin();
  int64_t iv[3] = {1, 2, 3}, n3 = 3;
  float fv[3] = {1.5f, 2.0f, 2.5f};
  kiln_tensor *it = kiln_from_data(iv, 1, &n3, KILN_DTYPE_I64);
  kiln_tensor *ft = kiln_from_data(fv, 1, &n3, KILN_DTYPE_F32);
  /* int64 vs float32 compares in float32: 1 < 1.5, 2 == 2.0, 3 > 2.5 */
  kiln_tensor *r[6] = {kiln_eq(it, ft), kiln_ne(it, ft), kiln_lt(it, ft),
                       kiln_le(it, ft), kiln_gt(it, ft), kiln_ge(it, ft)};
  const int want[6][3] = {{0, 1, 0}, {1, 0, 1}, {1, 0, 0}, {1, 1, 0}, {0, 0, 1}, {0, 1, 1}};
  for (int k = 0; k < 6; k++) {
    CHECK(r[k] && kiln_tensor_dtype(r[k]) == KILN_DTYPE_BOOL);
    for (int i = 0; r[k] && i < 3; i++)
      CHECK_MSG(core_get_flat(r[k], i) == want[k][i], "op %d elem %d", k, i);
  }
  /* a 0-d float64 against a float32 tensor: compared in float32 (0.1 rounds) */
  kiln_tensor *tenth = kiln_scalar(0.1, KILN_DTYPE_F64);
  float f01 = 0.1f;
  int64_t n1 = 1;
  kiln_tensor *e = kiln_eq(kiln_from_data(&f01, 1, &n1, KILN_DTYPE_F32), tenth);
  CHECK(e && core_get_flat(e, 0) == 1);
  /* large int64 values compare exactly */
  int64_t big[2] = {INT64_MAX, INT64_MAX - 1}, big2[2] = {INT64_MAX - 1, INT64_MAX - 1};
  int64_t n2 = 2;
  kiln_tensor *g = kiln_gt(kiln_from_data(big, 1, &n2, KILN_DTYPE_I64),
                           kiln_from_data(big2, 1, &n2, KILN_DTYPE_I64));
  CHECK(g && core_get_flat(g, 0) == 1 && core_get_flat(g, 1) == 0);
  kiln_scope_end();
}

TEST(compare_broadcast_and_strided) {
  kiln_scope_begin();
  double mv[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *m = kiln_from_data(mv, 2, S23, KILN_DTYPE_F64);
  int64_t tsh[2] = {3, 2}, tst[2] = {1, 3};
  /* [[1, 4], [2, 5], [3, 6]] */
  kiln_tensor *mt = core_autorelease(core_tensor_view(m->storage, KILN_DTYPE_F64, 2, tsh, tst, 0));
  double cv[3] = {2, 2, 4};
  int64_t c31[2] = {3, 1};
  kiln_tensor *col = kiln_from_data(cv, 2, c31, KILN_DTYPE_F64);
  kiln_tensor *r = kiln_ge(mt, col);
  CHECK_EQ_INT(kiln_tensor_shape(r)[0], 3);
  CHECK_EQ_INT(kiln_tensor_shape(r)[1], 2);
  const int want[6] = {0, 1, 1, 1, 0, 1};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(core_get_flat(r, i), want[i]);
  kiln_scope_end();
}

TEST(compare_has_no_grad) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_ones(2, S23, KILN_DTYPE_F64);
  kiln_set_requires_grad(a, true);
  kiln_tensor *r = kiln_lt(a, kiln_zeros(1, S3, KILN_DTYPE_F64));
  CHECK(r && !kiln_requires_grad(r));
  CHECK(kiln_grad_fn_name(r) == NULL);
  kiln_scope_end();
}

TEST(where_values) {
  kiln_scope_begin();
  bool cv[2] = {true, false};
  kiln_tensor *c = kiln_from_data(cv, 2, S21, KILN_DTYPE_BOOL);
  double av[3] = {1, 2, 3};
  kiln_tensor *a = kiln_from_data(av, 1, S3, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_scalar(-1.0, KILN_DTYPE_F64);
  kiln_tensor *r = kiln_where(c, a, b);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F64);
  CHECK(kiln_tensor_ndim(r) == 2 && kiln_tensor_shape(r)[0] == 2 && kiln_tensor_shape(r)[1] == 3);
  const double want[6] = {1, 2, 3, -1, -1, -1};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(r, i), want[i], 0);
  /* int64 and float32 operands promote to float32 */
  int64_t iv[3] = {7, 8, 9};
  float fv[3] = {0.5f, 1.5f, 2.5f};
  int64_t n3 = 3;
  bool c3[3] = {true, false, true};
  r = kiln_where(kiln_from_data(c3, 1, &n3, KILN_DTYPE_BOOL),
                 kiln_from_data(iv, 1, &n3, KILN_DTYPE_I64),
                 kiln_from_data(fv, 1, &n3, KILN_DTYPE_F32));
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 0), 7, 0);
  CHECK_NEAR(core_get_flat(r, 1), 1.5, 0);
  CHECK_NEAR(core_get_flat(r, 2), 9, 0);
  /* int64 operands stay int64, exactly */
  int64_t big[3] = {INT64_MAX, 1, 2};
  r = kiln_where(kiln_from_data(c3, 1, &n3, KILN_DTYPE_BOOL),
                 kiln_from_data(big, 1, &n3, KILN_DTYPE_I64),
                 kiln_from_data(iv, 1, &n3, KILN_DTYPE_I64));
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  CHECK(((const int64_t *)kiln_tensor_data(r))[1] == 8);
  kiln_scope_end();
}

TEST(where_errors) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_ones(2, S23, KILN_DTYPE_F32);
  CHECK(kiln_where(a, a, a) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::where: condition must be a Bool tensor, got Float[2, 3]");
  int64_t s4[1] = {4};
  CHECK(kiln_where(kiln_zeros(1, s4, KILN_DTYPE_BOOL), a, a) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::where: shapes [4] and [2, 3] cannot be broadcast");
  CHECK(kiln_eq(a, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::eq: operand 1 must be a tensor or a number");
  kiln_scope_end();
}

/* where's gradients go to the selected operand and are summed back over
 * broadcast dims. */
TEST(where_grad_broadcast) {
  kiln_scope_begin();
  bool cv[6] = {true, false, true, false, false, true};
  kiln_tensor *c = kiln_from_data(cv, 2, S23, KILN_DTYPE_BOOL);
  kiln_tensor *a = kiln_ones(1, S3, KILN_DTYPE_F64), *b = kiln_ones(2, S21, KILN_DTYPE_F64);
  kiln_set_requires_grad(a, true);
  kiln_set_requires_grad(b, true);
  double gv[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *go = kiln_from_data(gv, 2, S23, KILN_DTYPE_F64);
  kiln_tensor *r = kiln_where(c, a, b), *ins[2] = {a, b}, *got[2] = {NULL, NULL};
  CHECK(kiln_grad(&r, &go, 1, ins, 2, NULL, got) == 0);
  double wa[3] = {1, 0, 3 + 6}, wb[2] = {2, 4 + 5};
  CHECK(got[0] && kiln_tensor_ndim(got[0]) == 1);
  for (int i = 0; got[0] && i < 3; i++) CHECK_NEAR(core_get_flat(got[0], i), wa[i], 0);
  CHECK(got[1] && kiln_tensor_ndim(got[1]) == 2 && kiln_tensor_shape(got[1])[1] == 1);
  for (int i = 0; got[1] && i < 2; i++) CHECK_NEAR(core_get_flat(got[1], i), wb[i], 0);
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------- */

/* A Bool condition of the given shape (random). */
static kiln_tensor *rand_cond(kiln_generator *g, int ndim, const int64_t *shape) {
  return kiln_gt(sample_randn(g, ndim, shape), kiln_scalar(0.0, KILN_DTYPE_F64));
}

OP_SAMPLE(WHERE, same_shape) {
  s->args[0] = OPV_T(rand_cond(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 2, S23));
  s->args[2] = OPV_T(sample_randn(g, 2, S23));
  s->n_args = 3;
}
OP_SAMPLE(WHERE, broadcast_transposed) {
  s->args[0] = OPV_T(rand_cond(g, 2, S21));
  s->args[1] = OPV_T(sample_transposed(g, S23));
  s->args[2] = OPV_T(sample_randn(g, 1, S3));
  s->n_args = 3;
}
OP_SAMPLE(WHERE, scalar_other) {
  s->args[0] = OPV_T(rand_cond(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_F(0.5);
  s->n_args = 3;
}
