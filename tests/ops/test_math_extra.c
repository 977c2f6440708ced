/* tests/ops/test_math_extra.c: the decompositions of src/ops/math_extra.c:
 * values worked by hand (trapezoid rules, cross products, diag_embed,
 * combinations, tril/triu_indices, block_diag, cov), argument errors,
 * and gradcheck samples for the differentiable ones (values against
 * PyTorch come from tests/ops/test_opinfo.c). */
#include <math.h>

#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S3[1] = {3}, S4[1] = {4}, S33[2] = {3, 3};

static kiln_tensor *vec(int n, const double *v) {
  int64_t s = n;
  return kiln_from_data(v, 1, &s, KILN_DTYPE_F64);
}

TEST(math_extra_values) {
  kiln_scope_begin();
  /* trapezoid of [1, 2, 4] with dx 2: 2 (1.5 + 3) = 9; cumulative: [3, 9] */
  const double y[3] = {1, 2, 4};
  kiln_tensor *t = op_call1(KILN_OP_TRAPEZOID, (op_val[]){OPV_T(vec(3, y)), OPV_F(2), OPV_I(-1)}, 3);
  CHECK(t && kiln_tensor_ndim(t) == 0);
  CHECK_NEAR(core_get_flat(t, 0), 9, 1e-15);
  kiln_tensor *c = op_call1(KILN_OP_CUMULATIVE_TRAPEZOID, (op_val[]){OPV_T(vec(3, y)), OPV_F(2), OPV_I(-1)}, 3);
  CHECK(c && kiln_tensor_numel(c) == 2);
  CHECK_NEAR(core_get_flat(c, 0), 3, 1e-15);
  CHECK_NEAR(core_get_flat(c, 1), 9, 1e-15);
  /* e_x x e_y = e_z */
  const double ex[3] = {1, 0, 0}, ey[3] = {0, 1, 0};
  kiln_tensor *z = op_call1(KILN_OP_LINALG_CROSS, (op_val[]){OPV_T(vec(3, ex)), OPV_T(vec(3, ey)), OPV_I(-1)}, 3);
  CHECK(z);
  CHECK_NEAR(core_get_flat(z, 0), 0, 0);
  CHECK_NEAR(core_get_flat(z, 1), 0, 0);
  CHECK_NEAR(core_get_flat(z, 2), 1, 0);
  /* diag_embed([1, 2], offset 1) = [[0, 1, 0], [0, 0, 2], [0, 0, 0]] */
  const double d2[2] = {1, 2};
  kiln_tensor *de = op_call1(KILN_OP_DIAG_EMBED, (op_val[]){OPV_T(vec(2, d2)), OPV_I(1), OPV_I(-2), OPV_I(-1)}, 4);
  CHECK(de && kiln_tensor_shape(de)[0] == 3 && kiln_tensor_shape(de)[1] == 3);
  const double want_de[9] = {0, 1, 0, 0, 0, 2, 0, 0, 0};
  for (int i = 0; i < 9; i++) CHECK_NEAR(core_get_flat(de, i), want_de[i], 0);
  /* combinations([1, 2, 3], 2) = [[1, 2], [1, 3], [2, 3]] */
  kiln_tensor *cb = op_call1(KILN_OP_COMBINATIONS, (op_val[]){OPV_T(vec(3, y)), OPV_I(2), OPV_B(false)}, 3);
  CHECK(cb && kiln_tensor_shape(cb)[0] == 3 && kiln_tensor_shape(cb)[1] == 2);
  const double want_cb[6] = {1, 2, 1, 4, 2, 4};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(cb, i), want_cb[i], 0);
  /* with replacement: 6 pairs */
  cb = op_call1(KILN_OP_COMBINATIONS, (op_val[]){OPV_T(vec(3, y)), OPV_I(2), OPV_B(true)}, 3);
  CHECK(cb && kiln_tensor_shape(cb)[0] == 6);
  /* tril_indices(3, 3) has 6 coordinates; triu_indices(2, 3, 1): (0,1) (0,2) (1,2) */
  op_val tri[7] = {OPV_I(2), OPV_I(3), OPV_I(1), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE};
  kiln_tensor *tu = op_call1(KILN_OP_TRIU_INDICES, tri, 7);
  CHECK(tu && kiln_tensor_shape(tu)[1] == 3);
  const double want_tu[6] = {0, 0, 1, 1, 2, 2};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(tu, i), want_tu[i], 0);
  /* block_diag([1, 2], [[3]]) = [[1, 2, 0], [0, 0, 3]] */
  kiln_tensor *bl[2] = {vec(2, d2), kiln_full(2, (int64_t[]){1, 1}, 3, KILN_DTYPE_F64)};
  kiln_tensor *bd = op_call1(KILN_OP_BLOCK_DIAG, (op_val[]){OPV_TS(bl, 2)}, 1);
  CHECK(bd && kiln_tensor_shape(bd)[0] == 2 && kiln_tensor_shape(bd)[1] == 3);
  const double want_bd[6] = {1, 2, 0, 0, 0, 3};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(bd, i), want_bd[i], 0);
  /* cov of one variable is its variance, 0-d: var([1, 2, 4]) = 7/3 */
  kiln_tensor *cv = op_call1(KILN_OP_COV, (op_val[]){OPV_T(vec(3, y)), OPV_I(1), OPV_NONE, OPV_NONE}, 4);
  CHECK(cv && kiln_tensor_ndim(cv) == 0);
  CHECK_NEAR(core_get_flat(cv, 0), 7.0 / 3.0, 1e-15);
  /* isin([1, 2, 4], [4, 1, 9]) = [1, 0, 1]; inverted [0, 1, 0] */
  const double te[3] = {4, 1, 9};
  kiln_tensor *in = op_call1(KILN_OP_ISIN, (op_val[]){OPV_T(vec(3, y)), OPV_T(vec(3, te)), OPV_B(false), OPV_B(false)}, 4);
  kiln_tensor *ni = op_call1(KILN_OP_ISIN, (op_val[]){OPV_T(vec(3, y)), OPV_T(vec(3, te)), OPV_B(false), OPV_B(true)}, 4);
  CHECK(in && ni && kiln_tensor_dtype(in) == KILN_DTYPE_BOOL);
  for (int i = 0; i < 3; i++) {
    CHECK_NEAR(core_get_flat(in, i), i != 1, 0);
    CHECK_NEAR(core_get_flat(ni, i), i == 1, 0);
  }
  kiln_scope_end();
}

TEST(math_extra_errors) {
  kiln_scope_begin();
  const double y[4] = {1, 2, 4, 5};
  CHECK(!op_call1(KILN_OP_LINALG_CROSS, (op_val[]){OPV_T(vec(4, y)), OPV_T(vec(4, y)), OPV_I(-1)}, 3));
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::linalg_cross");
  CHECK(!op_call1(KILN_OP_COMBINATIONS, (op_val[]){OPV_T(vec(4, y)), OPV_I(-1), OPV_B(false)}, 3));
  CHECK_STR_CONTAINS(kiln_last_error(), "non-negative");
  op_val tri[7] = {OPV_I(-1), OPV_I(3), OPV_I(0), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE};
  CHECK(!op_call1(KILN_OP_TRIL_INDICES, tri, 7));
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::tril_indices");
  CHECK(!op_call1(KILN_OP_MESHGRID, (op_val[]){OPV_TS(NULL, 0), OPV_S("ij")}, 2));
  CHECK(!op_call1(KILN_OP_RENORM, (op_val[]){OPV_T(vec(4, y)), OPV_F(-1), OPV_I(0), OPV_F(1)}, 4));
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::renorm");
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------- */
#define SX(ENUM, tag, ...)                                                      \
  OP_SAMPLE(ENUM, tag) {                                                        \
    op_val v_[] = {__VA_ARGS__};                                                \
    for (unsigned i_ = 0; i_ < sizeof v_ / sizeof *v_; i_++) s->args[i_] = v_[i_]; \
    s->n_args = (int)(sizeof v_ / sizeof *v_);                                  \
  }
SX(TRAPZ, dx, OPV_T(sample_randn(g, 2, S23)), OPV_F(0.5), OPV_I(1))
SX(TRAPEZOID, dx, OPV_T(sample_randn(g, 2, S23)), OPV_F(2.0), OPV_I(0))
SX(CUMULATIVE_TRAPEZOID, dx, OPV_T(sample_randn(g, 2, S23)), OPV_F(1.5), OPV_I(-1))
SX(FFT_FFTSHIFT, all, OPV_T(sample_randn(g, 2, S23)), OPV_NONE)
SX(FFT_IFFTSHIFT, dim, OPV_T(sample_randn(g, 2, S23)), OPV_I(1))
SX(DIAG_EMBED, offset, OPV_T(sample_randn(g, 2, S23)), OPV_I(-1), OPV_I(0), OPV_I(2))
SX(DIAGFLAT, offset, OPV_T(sample_randn(g, 2, S23)), OPV_I(1))
SX(LINALG_VECDOT, dim, OPV_T(sample_randn(g, 2, S23)), OPV_T(sample_randn(g, 1, S3)), OPV_I(-1))
SX(CROSS, first3, OPV_T(sample_randn(g, 2, S33)), OPV_T(sample_randn(g, 2, S33)), OPV_NONE)
SX(LINALG_CROSS, broadcast, OPV_T(sample_randn(g, 2, S23)), OPV_T(sample_randn(g, 1, S3)), OPV_I(-1))
SX(LINALG_VANDER, n4, OPV_T(sample_uniform(g, 1, S3, 0.5, 2)), OPV_I(4))
SX(COV, rows, OPV_T(sample_randn(g, 2, S23)), OPV_I(1), OPV_NONE, OPV_NONE)
SX(CORRCOEF, rows, OPV_T(sample_randn(g, 2, (int64_t[]){2, 4})))
SX(RENORM, p2, OPV_T(sample_randn(g, 2, S23)), OPV_F(2), OPV_I(0), OPV_F(0.5))
SX(COMBINATIONS, r2, OPV_T(sample_randn(g, 1, S4)), OPV_I(2), OPV_B(false))
OP_SAMPLE(MESHGRID, xy) {
  static kiln_tensor *ts[2];
  ts[0] = sample_randn(g, 1, S3);
  ts[1] = sample_randn(g, 1, S4);
  s->args[0] = OPV_TS(ts, 2);
  s->args[1] = OPV_S("xy");
  s->n_args = 2;
}
OP_SAMPLE(CARTESIAN_PROD, two) {
  static kiln_tensor *ts[2];
  ts[0] = sample_randn(g, 1, S3);
  ts[1] = sample_randn(g, 1, S4);
  s->args[0] = OPV_TS(ts, 2);
  s->n_args = 1;
}
OP_SAMPLE(BLOCK_DIAG, mixed) {
  static kiln_tensor *ts[3];
  ts[0] = sample_randn(g, 2, S23);
  ts[1] = sample_randn(g, 1, S3);
  ts[2] = sample_randn(g, 0, NULL);
  s->args[0] = OPV_TS(ts, 3);
  s->n_args = 1;
}
OP_SAMPLE(LINALG_MULTI_DOT, chain) {
  static kiln_tensor *ts[3];
  ts[0] = sample_randn(g, 1, S3);
  ts[1] = sample_randn(g, 2, (int64_t[]){3, 4});
  ts[2] = sample_randn(g, 2, (int64_t[]){4, 2});
  s->args[0] = OPV_TS(ts, 3);
  s->n_args = 1;
}
