/* tests/ops/test_linalg.c: src/ops/linalg.c: inverse, determinant and
 * their decompositions on matrices worked by hand, batching, the
 * singular-matrix error, and gradcheck samples (values against PyTorch
 * come from tests/ops/test_opinfo.c). */
#include <math.h>

#include "sample.h"
#include "test.h"

TEST(linalg_inv_det_values) {
  kiln_scope_begin();
  /* batch of [[2, 1], [1, 1]] (inverse [[1, -1], [-1, 2]], det 1) and
   * [[0, 2], [3, 0]] (a pivot swap: inverse [[0, 1/3], [1/2, 0]], det -6) */
  const double v[8] = {2, 1, 1, 1, 0, 2, 3, 0};
  kiln_tensor *a = kiln_from_data(v, 3, (int64_t[]){2, 2, 2}, KILN_DTYPE_F64);
  kiln_tensor *inv = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(a)}, 1);
  kiln_tensor *det = op_call1(KILN_OP_LINALG_DET, (op_val[]){OPV_T(a)}, 1);
  CHECK(inv && det && kiln_tensor_ndim(det) == 1);
  const double want[8] = {1, -1, -1, 2, 0, 1.0 / 3, 0.5, 0};
  for (int i = 0; i < 8; i++) CHECK_NEAR(core_get_flat(inv, i), want[i], 1e-15);
  CHECK_NEAR(core_get_flat(det, 0), 1, 1e-15);
  CHECK_NEAR(core_get_flat(det, 1), -6, 1e-15);
  /* slogdet of the second: sign -1, log 6; logdet NaN */
  kiln_tensor *o[2];
  CHECK(op_call(KILN_OP_LINALG_SLOGDET, (op_val[]){OPV_T(a)}, 1, o, 2) == 2);
  CHECK_NEAR(core_get_flat(o[0], 1), -1, 0);
  CHECK_NEAR(core_get_flat(o[1], 1), log(6), 1e-15);
  kiln_tensor *ld = op_call1(KILN_OP_LOGDET, (op_val[]){OPV_T(a)}, 1);
  CHECK(ld && isnan(core_get_flat(ld, 1)));
  /* solve A x = b with b = [3, 2]: x = [1, 1] */
  const double bv[2] = {3, 2};
  kiln_tensor *b = kiln_from_data(bv, 1, (int64_t[]){2}, KILN_DTYPE_F64);
  kiln_tensor *x = op_call1(KILN_OP_LINALG_SOLVE, (op_val[]){OPV_T(kiln_select(a, 0, 0)), OPV_T(b), OPV_B(true)}, 3);
  CHECK(x && kiln_tensor_ndim(x) == 1);
  CHECK_NEAR(core_get_flat(x, 0), 1, 1e-15);
  CHECK_NEAR(core_get_flat(x, 1), 1, 1e-15);
  /* matrix_power(A, -2) = inv(A)^2 = [[2, -3], [-3, 5]] */
  kiln_tensor *p = op_call1(KILN_OP_LINALG_MATRIX_POWER, (op_val[]){OPV_T(kiln_select(a, 0, 0)), OPV_I(-2)}, 2);
  const double wp[4] = {2, -3, -3, 5};
  for (int i = 0; p && i < 4; i++) CHECK_NEAR(core_get_flat(p, i), wp[i], 1e-14);
  kiln_scope_end();
}

TEST(linalg_errors) {
  kiln_scope_begin();
  const double s[4] = {1, 2, 2, 4};
  kiln_tensor *a = kiln_from_data(s, 2, (int64_t[]){2, 2}, KILN_DTYPE_F64);
  CHECK(!op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(a)}, 1));
  CHECK_STR_CONTAINS(kiln_last_error(), "singular");
  kiln_tensor *det = op_call1(KILN_OP_LINALG_DET, (op_val[]){OPV_T(a)}, 1);
  CHECK(det && core_get_flat(det, 0) == 0);
  kiln_tensor *r = kiln_from_data(s, 2, (int64_t[]){1, 4}, KILN_DTYPE_F64);
  CHECK(!op_call1(KILN_OP_LINALG_DET, (op_val[]){OPV_T(r)}, 1));
  CHECK_STR_CONTAINS(kiln_last_error(), "square");
  int64_t iv[4] = {1, 0, 0, 1};
  kiln_tensor *ia = kiln_from_data(iv, 2, (int64_t[]){2, 2}, KILN_DTYPE_I64);
  CHECK(!op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(ia)}, 1));
  CHECK_STR_CONTAINS(kiln_last_error(), "floating point");
  kiln_scope_end();
}

/* ---- gradcheck samples: well-conditioned 3 I + U(-1, 1) matrices ------------- */
static kiln_tensor *wellcond(kiln_generator *g, int batch) {
  int64_t sh[3] = {batch, 3, 3};
  kiln_tensor *u = batch ? sample_uniform(g, 3, sh, -1, 1) : sample_uniform(g, 2, sh + 1, -1, 1);
  kiln_tensor *e = op_call1(KILN_OP_EYE, (op_val[]){OPV_I(3), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE}, 5);
  return kiln_contiguous(kiln_add(u, kiln_mul_scalar(kiln_to_dtype(e, KILN_DTYPE_F64), 3.0)));
}
OP_SAMPLE(LINALG_INV, batched) {
  s->args[0] = OPV_T(wellcond(g, 2));
  s->n_args = 1;
}
OP_SAMPLE(LINALG_DET, batched) {
  s->args[0] = OPV_T(wellcond(g, 2));
  s->n_args = 1;
}
OP_SAMPLE(LINALG_SLOGDET, single) {
  s->args[0] = OPV_T(wellcond(g, 0));
  s->n_args = 1;
}
OP_SAMPLE(LOGDET, single) {
  s->args[0] = OPV_T(wellcond(g, 0));
  s->n_args = 1;
}
OP_SAMPLE(LINALG_SOLVE, matrix) {
  s->args[0] = OPV_T(wellcond(g, 0));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(LINALG_MATRIX_POWER, neg) {
  s->args[0] = OPV_T(wellcond(g, 0));
  s->args[1] = OPV_I(-3);
  s->n_args = 2;
}
OP_SAMPLE(LINALG_TENSORINV, ind1) {
  s->args[0] = OPV_T(kiln_contiguous(kiln_reshape(wellcond(g, 0), 3, (int64_t[]){3, 3, 1})));
  s->args[1] = OPV_I(1);
  s->n_args = 2;
}
OP_SAMPLE(LINALG_TENSORSOLVE, plain) {
  s->args[0] = OPV_T(wellcond(g, 0));
  s->args[1] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
