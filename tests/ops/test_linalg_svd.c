/* tests/ops/test_linalg_svd.c: linalg_svdvals (src/ops/linalg_svd.c) on
 * matrices whose singular values are known by hand, and gradcheck samples
 * for it and the norms built on it (reduce_more.c, linalg_norm.c). */
#include <math.h>

#include "sample.h"
#include "test.h"

static const int64_t S34[2] = {3, 4}, S43[2] = {4, 3}, S233[3] = {2, 3, 3};

/* [[3, 0], [4, 5]]: A^T A = [[25, 20], [20, 25]], eigenvalues 45 and 5;
 * its transpose and [[1, 0, 0], [0, 0, -2]] (a wide matrix, sigma 2, 1);
 * a batch of both 2 x 2 ones */
TEST(linalg_svdvals_known_values) {
  kiln_scope_begin();
  static const double a[4] = {3, 0, 4, 5}, b[8] = {3, 0, 4, 5, 3, 4, 0, 5};
  static const float w[6] = {1, 0, 0, 0, 0, -2};
  kiln_tensor *x = kiln_from_data(a, 2, (int64_t[]){2, 2}, KILN_DTYPE_F64);
  kiln_tensor *s = op_call1(KILN_OP_LINALG_SVDVALS, (op_val[]){OPV_T(x), OPV_NONE}, 2);
  sample_check_vals("svdvals 2x2", s, (double[]){sqrt(45), sqrt(5)}, 2, 1e-12);
  kiln_tensor *y = kiln_from_data(w, 2, (int64_t[]){2, 3}, KILN_DTYPE_F32);
  s = op_call1(KILN_OP_LINALG_SVDVALS, (op_val[]){OPV_T(y), OPV_NONE}, 2);
  CHECK(s && s->dtype == KILN_DTYPE_F32 && s->ndim == 1 && s->shape[0] == 2);
  sample_check_vals("svdvals 2x3", s, (double[]){2, 1}, 2, 1e-6);
  kiln_tensor *z = kiln_from_data(b, 3, (int64_t[]){2, 2, 2}, KILN_DTYPE_F64);
  s = op_call1(KILN_OP_LINALG_SVDVALS, (op_val[]){OPV_T(z), OPV_NONE}, 2);
  sample_check_vals("svdvals batch", s, (double[]){sqrt(45), sqrt(5), sqrt(45), sqrt(5)}, 4, 1e-12);
  /* nuclear norm = sum, cond = ratio */
  kiln_tensor *nn = op_call1(KILN_OP_NUCLEAR_NORM, (op_val[]){OPV_T(x), OPV_B(false)}, 2);
  sample_check_vals("nuclear_norm", nn, (double[]){sqrt(45) + sqrt(5)}, 1, 1e-12);
  kiln_tensor *c = op_call1(KILN_OP_LINALG_COND, (op_val[]){OPV_T(x), OPV_NONE}, 2);
  sample_check_vals("cond", c, (double[]){3}, 1, 1e-12);
  kiln_scope_end();
}

OP_SAMPLE(LINALG_SVDVALS, tall_batch) {
  s->args[0] = OPV_T(sample_randn(g, 2, S43));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(LINALG_SVDVALS, wide) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(FROBENIUS_NORM, dims) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->ints[0][0] = 0;
  s->ints[0][1] = 1;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(NUCLEAR_NORM, matrix) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_B(true);
  s->n_args = 2;
}
OP_SAMPLE(NUCLEAR_NORM_DIM, batch) {
  s->args[0] = OPV_T(sample_randn(g, 3, S233));
  s->ints[0][0] = 0;
  s->ints[0][1] = 2;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
#define MATRIX_NORM(ENUM, tag, ORD)                                              \
  OP_SAMPLE(ENUM, tag) {                                                         \
    s->args[0] = OPV_T(sample_randn(g, 3, S233));                                \
    s->args[1] = ORD;                                                            \
    s->ints[0][0] = -1;                                                          \
    s->ints[0][1] = 0;                                                           \
    s->args[2] = OPV_INTS(s->ints[0], 2);                                        \
    s->args[3] = OPV_B(true);                                                    \
    s->args[4] = OPV_NONE;                                                       \
    s->n_args = 5;                                                               \
  }
MATRIX_NORM(LINALG_MATRIX_NORM, two, OPV_F(2))
MATRIX_NORM(LINALG_MATRIX_NORM, minus_two, OPV_F(-2))
MATRIX_NORM(LINALG_MATRIX_NORM, one, OPV_F(1))
MATRIX_NORM(LINALG_MATRIX_NORM, minus_inf, OPV_F(-INFINITY))
MATRIX_NORM(LINALG_MATRIX_NORM_STR, nuc, OPV_S("nuc"))
MATRIX_NORM(LINALG_MATRIX_NORM_STR, fro, OPV_S("fro"))
OP_SAMPLE(LINALG_NORM, inf_matrix) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_F(INFINITY);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_NONE;
  s->n_args = 5;
}
OP_SAMPLE(LINALG_NORM, vector) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_F(3);
  s->ints[0][0] = 1;
  s->args[2] = OPV_INTS(s->ints[0], 1);
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_NONE;
  s->n_args = 5;
}
OP_SAMPLE(LINALG_NORM_STR, nuc) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_S("nuc");
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_NONE;
  s->n_args = 5;
}
OP_SAMPLE(LINALG_COND, two) {
  s->args[0] = OPV_T(sample_randn(g, 3, S233));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(LINALG_COND, one) {
  s->args[0] = OPV_T(sample_randn(g, 3, S233));
  s->args[1] = OPV_F(1);
  s->n_args = 2;
}
OP_SAMPLE(LINALG_COND_STR, fro) {
  s->args[0] = OPV_T(sample_randn(g, 3, S233));
  s->args[1] = OPV_S("fro");
  s->n_args = 2;
}

static const int64_t S253[3] = {2, 5, 3}, S243[3] = {2, 4, 3};
#define CDIST(tag, P, MODE)                                                      \
  OP_SAMPLE(CDIST, tag) {                                                        \
    s->args[0] = OPV_T(sample_randn(g, 3, S253));                                \
    s->args[1] = OPV_T(sample_randn(g, 3, S243));                                \
    s->args[2] = OPV_F(P);                                                       \
    s->args[3] = MODE;                                                           \
    s->n_args = 4;                                                               \
  }
CDIST(one, 1, OPV_NONE)
CDIST(three, 3, OPV_NONE)
CDIST(euclid_mm, 2, OPV_I(1))
CDIST(euclid, 2, OPV_I(2))
CDIST(zero, 0, OPV_NONE)
