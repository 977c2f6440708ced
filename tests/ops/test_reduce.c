/* tests/ops/test_reduce.c: sum, mean, amax, amin, max.dim, argmax, var,
 * sum_to_size: values by hand and from PyTorch (golden_reduce.h), strided
 * inputs, large inputs against a serial reference, errors, and samples for
 * the table-driven gradcheck. */
#include <stdlib.h>

#include "golden_reduce.h"
#include "sample.h"
#include "test.h"

static const int64_t S234[3] = {2, 3, 4}, S34[2] = {3, 4}, S4[1] = {4};

/* ---- samples ------------------------------------------------------------------ */

OP_SAMPLE(SUM, all) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_NONE;
  s->args[2] = OPV_B(false);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(SUM, dims_keepdim) {
  s->ints[0][0] = -1, s->ints[0][1] = 0;
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_B(true);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(SUM, transposed) {
  s->ints[0][0] = 1;
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_B(false);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(MEAN, dims) {
  s->ints[0][0] = 1;
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_B(false);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(MEAN, all_keepdim) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_NONE;
  s->args[2] = OPV_B(true);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(SUM_TO_SIZE, lead_and_ones) {
  s->ints[0][0] = 3, s->ints[0][1] = 1;
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->n_args = 2;
}
OP_SAMPLE(SUM_TO_SIZE, expanded) {
  s->ints[0][0] = 4;
  kiln_tensor *x = kiln_expand(sample_randn(g, 2, (int64_t[]){1, 4}), 2, S34);
  s->args[0] = OPV_T(kiln_mul_scalar(x, 1.0)); /* a strided copy would be too easy */
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->n_args = 2;
}
OP_SAMPLE(AMAX, dims) {
  s->ints[0][0] = 0, s->ints[0][1] = 2;
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
OP_SAMPLE(AMAX, all_keepdim) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_INTS(s->ints[0], 0);
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(AMIN, dim) {
  s->ints[0][0] = -1;
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
OP_SAMPLE(MAX_DIM, dim1) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
OP_SAMPLE(MAX_DIM, transposed_keepdim) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(VAR, dims) {
  s->ints[0][0] = 2;
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_B(true);
  s->args[3] = OPV_B(false);
  s->n_args = 4;
}
OP_SAMPLE(VAR, all_biased_keepdim) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_NONE;
  s->args[2] = OPV_B(false);
  s->args[3] = OPV_B(true);
  s->n_args = 4;
}

/* ---- helpers ------------------------------------------------------------------ */

static void check_shape(kiln_tensor *t, int ndim, const int64_t *shape) {
  if (!t) {
    test_fail(__FILE__, __LINE__, "NULL (%s)", kiln_last_error());
    return;
  }
  CHECK_EQ_INT(kiln_tensor_ndim(t), ndim);
  for (int d = 0; d < ndim && d < kiln_tensor_ndim(t); d++)
    CHECK_EQ_INT(kiln_tensor_shape(t)[d], shape[d]);
}

/* x = arange(24) as float64 [2, 3, 4] */
static kiln_tensor *iota234(kiln_dtype dt) {
  return kiln_reshape(kiln_arange(0, 24, 1, dt), 3, S234);
}

/* ---- sum, mean -------------------------------------------------------------------- */

TEST(reduce_sum_values) {
  kiln_scope_begin();
  kiln_tensor *x = iota234(KILN_DTYPE_F32);
  double all[1] = {276};
  sample_check_vals("sum all", kiln_sum(x, NULL, 0, false), all, 1, 0);
  check_shape(kiln_sum(x, NULL, 0, false), 0, NULL);
  /* over dim 0: x[0] + x[1] */
  double d0[12];
  for (int i = 0; i < 12; i++) d0[i] = 2 * i + 12;
  kiln_tensor *s0 = kiln_sum(x, (int64_t[]){0}, 1, false);
  sample_check_vals("sum dim0", s0, d0, 12, 0);
  check_shape(s0, 2, S34);
  /* over dims (-1, 0), keepdim: [1, 3, 1] */
  double d20[3];
  for (int j = 0; j < 3; j++) {
    d20[j] = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) d20[j] += 12 * i + 4 * j + k;
  }
  kiln_tensor *s20 = kiln_sum(x, (int64_t[]){-1, 0}, 2, true);
  sample_check_vals("sum dims -1,0", s20, d20, 3, 0);
  check_shape(s20, 3, (int64_t[]){1, 3, 1});
  /* middle dim */
  double d1[8];
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) d1[i * 4 + k] = 3 * (12 * i + k) + 4 * 3;
  sample_check_vals("sum dim1", kiln_sum(x, (int64_t[]){1}, 1, false), d1, 8, 0);
  /* transposed input: sum over dim 0 of x^T (a [4, 3]... view of [3, 4]) */
  kiln_tensor *m = kiln_reshape(kiln_arange(0, 12, 1, KILN_DTYPE_F64), 2, S34);
  kiln_tensor *mt = kiln_t(m); /* [4, 3], strides [1, 4] */
  double rows[3] = {6, 22, 38}, cols[4] = {12, 15, 18, 21};
  sample_check_vals("sum t dim0", kiln_sum(mt, (int64_t[]){0}, 1, false), rows, 3, 0);
  sample_check_vals("sum t dim1", kiln_sum(mt, (int64_t[]){1}, 1, false), cols, 4, 0);
  /* sliced (offset, step) input: columns 1 and 3 */
  kiln_tensor *sl = kiln_slice(m, 1, 1, 4, 2); /* [[1,3],[5,7],[9,11]] */
  double slc[2] = {15, 21}, slr[3] = {4, 12, 20};
  sample_check_vals("sum slice dim0", kiln_sum(sl, (int64_t[]){0}, 1, false), slc, 2, 0);
  sample_check_vals("sum slice dim1", kiln_sum(sl, (int64_t[]){1}, 1, false), slr, 3, 0);
  /* expanded input (stride 0) */
  kiln_tensor *e = kiln_expand(kiln_reshape(kiln_arange(1, 4, 1, KILN_DTYPE_F64), 2,
                                            (int64_t[]){3, 1}),
                               2, (int64_t[]){3, 5});
  double er[3] = {5, 10, 15}, ec[5] = {6, 6, 6, 6, 6};
  sample_check_vals("sum expanded dim1", kiln_sum(e, (int64_t[]){1}, 1, false), er, 3, 0);
  sample_check_vals("sum expanded dim0", kiln_sum(e, (int64_t[]){0}, 1, false), ec, 5, 0);
  /* empty dim list means all dims (PyTorch 1.13) */
  sample_check_vals("sum []", op_call1(KILN_OP_SUM, (op_val[]){OPV_T(x), OPV_INTS(NULL, 0), OPV_B(false), OPV_NONE}, 4), all, 1, 0);
  /* 0-d input, dim 0 */
  kiln_tensor *sc = kiln_scalar(2.5, KILN_DTYPE_F64);
  double v25[1] = {2.5};
  sample_check_vals("sum 0-d", kiln_sum(sc, (int64_t[]){0}, 1, false), v25, 1, 0);
  /* empty input: sum 0 */
  kiln_tensor *z = kiln_zeros(2, (int64_t[]){0, 3}, KILN_DTYPE_F32);
  double zeros3[3] = {0, 0, 0};
  sample_check_vals("sum empty", kiln_sum(z, (int64_t[]){0}, 1, false), zeros3, 3, 0);
  kiln_scope_end();
}

TEST(reduce_sum_dtypes) {
  kiln_scope_begin();
  kiln_tensor *xi = iota234(KILN_DTYPE_I64);
  kiln_tensor *s = kiln_sum(xi, NULL, 0, false);
  CHECK(kiln_tensor_dtype(s) == KILN_DTYPE_I64);
  CHECK_EQ_INT(core_get_flat(s, 0), 276);
  /* bool sums to int64 */
  kiln_tensor *b = kiln_gt(xi, kiln_scalar(10, KILN_DTYPE_I64));
  kiln_tensor *sb = kiln_sum(b, (int64_t[]){2}, 1, false);
  CHECK(sb && kiln_tensor_dtype(sb) == KILN_DTYPE_I64);
  double want_b[6] = {0, 0, 1, 4, 4, 4};
  sample_check_vals("sum bool", sb, want_b, 6, 0);
  /* large int64 values stay exact */
  int64_t big[2] = {(int64_t)1 << 60, 3};
  kiln_tensor *tb = kiln_from_data(big, 1, (int64_t[]){2}, KILN_DTYPE_I64);
  kiln_tensor *sbig = kiln_sum(tb, NULL, 0, false);
  CHECK(sbig && ((int64_t *)kiln_tensor_data(sbig))[0] == ((int64_t)1 << 60) + 3);
  /* dtype argument: Double (code 7) */
  kiln_tensor *x = iota234(KILN_DTYPE_F32);
  kiln_tensor *sd = op_call1(KILN_OP_SUM, (op_val[]){OPV_T(x), OPV_NONE, OPV_B(false), OPV_I(7)}, 4);
  CHECK(sd && kiln_tensor_dtype(sd) == KILN_DTYPE_F64);
  /* mean of int64 with dtype Float */
  kiln_tensor *md = op_call1(KILN_OP_MEAN, (op_val[]){OPV_T(xi), OPV_NONE, OPV_B(false), OPV_I(6)}, 4);
  CHECK(md && kiln_tensor_dtype(md) == KILN_DTYPE_F32);
  double m115[1] = {11.5};
  sample_check_vals("mean int dtype", md, m115, 1, 0);
  kiln_scope_end();
}

TEST(reduce_mean_values) {
  kiln_scope_begin();
  kiln_tensor *x = iota234(KILN_DTYPE_F64);
  double m1[8];
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) m1[i * 4 + k] = 12 * i + 4 + k;
  sample_check_vals("mean dim1", kiln_mean(x, (int64_t[]){1}, 1, false), m1, 8, 1e-15);
  double m115[1] = {11.5};
  kiln_tensor *ma = kiln_mean(x, NULL, 0, true);
  sample_check_vals("mean all", ma, m115, 1, 1e-15);
  check_shape(ma, 3, (int64_t[]){1, 1, 1});
  /* mean of an empty tensor is NaN */
  kiln_tensor *z = kiln_zeros(1, (int64_t[]){0}, KILN_DTYPE_F32);
  double nan1[1] = {NAN};
  sample_check_vals("mean empty", kiln_mean(z, NULL, 0, false), nan1, 1, 0);
  kiln_scope_end();
}

TEST(reduce_errors) {
  kiln_scope_begin();
  kiln_tensor *x = iota234(KILN_DTYPE_F32);
  CHECK(kiln_sum(x, (int64_t[]){3}, 1, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::sum");
  CHECK_STR_CONTAINS(kiln_last_error(), "out of range");
  CHECK(kiln_sum(x, (int64_t[]){1, -2}, 2, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "dim 1 appears multiple times");
  kiln_tensor *xi = iota234(KILN_DTYPE_I64);
  CHECK(kiln_mean(xi, NULL, 0, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mean");
  CHECK_STR_CONTAINS(kiln_last_error(), "floating point");
  CHECK(op_call1(KILN_OP_MEAN, (op_val[]){OPV_T(x), OPV_NONE, OPV_B(false), OPV_I(4)}, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "Long");
  CHECK(op_call1(KILN_OP_SUM, (op_val[]){OPV_T(x), OPV_NONE, OPV_B(false), OPV_I(99)}, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "dtype code 99");
  CHECK(kiln_var(xi, NULL, 0, 1, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::var");
  kiln_tensor *z = kiln_zeros(2, (int64_t[]){0, 3}, KILN_DTYPE_F32);
  CHECK(kiln_amax(z, (int64_t[]){0}, 1, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::amax: expected reduction dim 0 to have non-zero size");
  kiln_tensor *am = kiln_amax(z, (int64_t[]){1}, 1, false); /* fine: [0] */
  CHECK(am && kiln_tensor_numel(am) == 0);
  CHECK(kiln_max_dim(z, 0, false, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::max");
  CHECK(kiln_argmax(z, 0, true, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::argmax");
  CHECK(kiln_max_dim(x, -4, false, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "out of range");
  /* sum_to_size: not expandable */
  CHECK(op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(x), OPV_INTS(((int64_t[]){2, 4}), 2)}, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::sum_to_size: size [2, 4] is not expandable to size [2, 3, 4]");
  CHECK(op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(x), OPV_INTS(((int64_t[]){1, 2, 3, 4}), 4)}, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "not expandable");
  CHECK(op_call1(KILN_OP_SUM, (op_val[]){OPV_I(3), OPV_NONE, OPV_B(false), OPV_NONE}, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected a tensor");
  kiln_scope_end();
}

/* ---- sum_to_size ---------------------------------------------------------------------- */

TEST(reduce_sum_to_size) {
  kiln_scope_begin();
  kiln_tensor *x = iota234(KILN_DTYPE_F64);
  /* to [3, 1]: sum dim 0 and dim 2 */
  kiln_tensor *r = op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(x), OPV_INTS(((int64_t[]){3, 1}), 2)}, 2);
  double w31[3];
  for (int j = 0; j < 3; j++) {
    w31[j] = 0;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) w31[j] += 12 * i + 4 * j + k;
  }
  sample_check_vals("sum_to [3,1]", r, w31, 3, 0);
  check_shape(r, 2, (int64_t[]){3, 1});
  /* to [4]: leading dims summed */
  r = op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(x), OPV_INTS(S4, 1)}, 2);
  double w4[4] = {60, 66, 72, 78};
  sample_check_vals("sum_to [4]", r, w4, 4, 0);
  /* to the same size: unchanged values */
  r = op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(x), OPV_INTS(S234, 3)}, 2);
  double same[24];
  for (int i = 0; i < 24; i++) same[i] = i;
  sample_check_vals("sum_to same", r, same, 24, 0);
  /* to [] (0-d): everything */
  r = op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(x), OPV_INTS(NULL, 0)}, 2);
  double all[1] = {276};
  sample_check_vals("sum_to []", r, all, 1, 0);
  check_shape(r, 0, NULL);
  /* op_sum_to on a transposed gradient */
  kiln_tensor *mt = kiln_t(kiln_reshape(kiln_arange(0, 12, 1, KILN_DTYPE_F32), 2, S34));
  r = op_sum_to(mt, 2, (int64_t[]){1, 3});
  double w13[3] = {6, 22, 38};
  sample_check_vals("op_sum_to", r, w13, 3, 0);
  kiln_scope_end();
}

/* ---- amax, amin, max.dim, argmax ------------------------------------------------------ */

TEST(reduce_minmax_values) {
  kiln_scope_begin();
  double v[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 9};
  kiln_tensor *x = kiln_from_data(v, 2, S34, KILN_DTYPE_F64);
  double mx1[3] = {4, 9, 9}, mn0[4] = {3, 1, 2, 1};
  sample_check_vals("amax dim1", kiln_amax(x, (int64_t[]){1}, 1, false), mx1, 3, 0);
  sample_check_vals("amin dim0", kiln_amin(x, (int64_t[]){0}, 1, false), mn0, 4, 0);
  double mxa[1] = {9}, mna[1] = {1};
  sample_check_vals("amax all", kiln_amax(x, NULL, 0, false), mxa, 1, 0);
  sample_check_vals("amin all", kiln_amin(kiln_t(x), NULL, 0, true), mna, 1, 0);
  /* max.dim: first index among ties */
  kiln_tensor *idx = NULL;
  kiln_tensor *vals = kiln_max_dim(x, 1, false, &idx);
  sample_check_vals("max.dim values", vals, mx1, 3, 0);
  double want_i[3] = {2, 1, 3};
  sample_check_vals("max.dim indices", idx, want_i, 3, 0);
  CHECK(idx && kiln_tensor_dtype(idx) == KILN_DTYPE_I64);
  vals = kiln_max_dim(kiln_t(x), 0, true, &idx); /* same reduction, transposed input */
  sample_check_vals("max.dim t values", vals, mx1, 3, 0);
  sample_check_vals("max.dim t indices", idx, want_i, 3, 0);
  check_shape(idx, 2, (int64_t[]){1, 3});
  double want_i0[4] = {1, 1, 2, 2};
  kiln_max_dim(x, 0, false, &idx);
  sample_check_vals("max.dim dim0 indices", idx, want_i0, 4, 0);
  /* argmax: flattened gives the first of the two 9s */
  double a5[1] = {5};
  kiln_tensor *am = kiln_argmax(x, 0, true, false);
  sample_check_vals("argmax flat", am, a5, 1, 0);
  check_shape(am, 0, NULL);
  check_shape(kiln_argmax(x, 0, true, true), 2, (int64_t[]){1, 1});
  /* argmax of the transposed view flattens in the view's order: 9 at [1,1] -> 1*3+1 */
  double a4[1] = {4};
  sample_check_vals("argmax flat t", kiln_argmax(kiln_t(x), 0, true, false), a4, 1, 0);
  sample_check_vals("argmax dim1", kiln_argmax(x, 1, false, false), want_i, 3, 0);
  /* NaN wins, first one */
  double nv[4] = {1, NAN, 3, NAN};
  kiln_tensor *xn = kiln_from_data(nv, 1, S4, KILN_DTYPE_F64);
  double n1[1] = {1};
  sample_check_vals("argmax nan", kiln_argmax(xn, 0, true, false), n1, 1, 0);
  double nan1[1] = {NAN};
  sample_check_vals("amax nan", kiln_amax(xn, NULL, 0, false), nan1, 1, 0);
  sample_check_vals("amin nan", kiln_amin(xn, NULL, 0, false), nan1, 1, 0);
  /* int64 and bool */
  int64_t iv[4] = {-5, 7, 7, -9};
  kiln_tensor *xi = kiln_from_data(iv, 1, S4, KILN_DTYPE_I64);
  kiln_tensor *ai = kiln_amax(xi, NULL, 0, false);
  CHECK(ai && kiln_tensor_dtype(ai) == KILN_DTYPE_I64 && core_get_flat(ai, 0) == 7);
  kiln_tensor *mi = kiln_max_dim(xi, 0, false, &idx);
  CHECK(mi && core_get_flat(mi, 0) == 7 && core_get_flat(idx, 0) == 1);
  kiln_tensor *bi = kiln_gt(xi, kiln_scalar(0, KILN_DTYPE_I64));
  kiln_tensor *ab = kiln_amax(bi, NULL, 0, false);
  CHECK(ab && kiln_tensor_dtype(ab) == KILN_DTYPE_BOOL && core_get_flat(ab, 0) == 1);
  kiln_tensor *nb = kiln_amin(bi, NULL, 0, false);
  CHECK(nb && core_get_flat(nb, 0) == 0);
  /* 0-d */
  kiln_tensor *sc = kiln_scalar(3, KILN_DTYPE_F32);
  kiln_tensor *si = kiln_max_dim(sc, 0, false, &idx);
  CHECK(si && core_get_flat(si, 0) == 3 && core_get_flat(idx, 0) == 0);
  kiln_scope_end();
}

/* ---- var ------------------------------------------------------------------------------ */

TEST(reduce_var_values) {
  kiln_scope_begin();
  double v[8] = {1, 2, 3, 4, 2, 4, 6, 8};
  kiln_tensor *x = kiln_from_data(v, 2, (int64_t[]){2, 4}, KILN_DTYPE_F64);
  double ub[2] = {5.0 / 3, 20.0 / 3}, b[2] = {1.25, 5};
  sample_check_vals("var unbiased", kiln_var(x, (int64_t[]){1}, 1, 1, false), ub, 2, 1e-15);
  sample_check_vals("var biased", kiln_var(x, (int64_t[]){-1}, 1, 0, false), b, 2, 1e-15);
  double c0[4] = {0.5, 2, 4.5, 8};
  sample_check_vals("var dim0", kiln_var(x, (int64_t[]){0}, 1, 1, false), c0, 4, 1e-15);
  /* all dims: mean 3.75 */
  double s = 0;
  for (int i = 0; i < 8; i++) s += (v[i] - 3.75) * (v[i] - 3.75);
  double all[1] = {s / 7};
  sample_check_vals("var all", kiln_var(x, NULL, 0, 1, false), all, 1, 1e-15);
  /* a single element: NaN (0/0) */
  double nan1[1] = {NAN};
  sample_check_vals("var one", kiln_var(kiln_scalar(1, KILN_DTYPE_F64), NULL, 0, 1, false), nan1, 1, 0);
  /* float32 with a large offset: the two-pass form keeps precision */
  float big[4] = {1e6f + 1, 1e6f + 2, 1e6f + 3, 1e6f + 4};
  kiln_tensor *xb = kiln_from_data(big, 1, S4, KILN_DTYPE_F32);
  double vb[1] = {5.0 / 3};
  sample_check_vals("var f32 offset", kiln_var(xb, NULL, 0, 1, false), vb, 1, 1e-6);
  kiln_scope_end();
}

/* ---- golden values from PyTorch ------------------------------------------------------- */

TEST(reduce_golden) {
  kiln_scope_begin();
  for (int c = 0; c < GOLDEN_REDUCE_N; c++) {
    const golden_reduce_case *k = &golden_reduce[c];
    kiln_tensor *x = kiln_from_data(k->x, k->ndim, k->shape, KILN_DTYPE_F64);
    if (k->transpose) x = kiln_transpose(x, 0, k->ndim - 1);
    const int64_t *dims = k->n_dims ? k->dims : NULL;
    kiln_tensor *r = NULL;
    switch (k->op) {
    case 0: r = kiln_sum(x, dims, k->n_dims, k->keepdim); break;
    case 1: r = kiln_mean(x, dims, k->n_dims, k->keepdim); break;
    case 2: r = kiln_amax(x, dims, k->n_dims, k->keepdim); break;
    case 3: r = kiln_amin(x, dims, k->n_dims, k->keepdim); break;
    case 4: r = kiln_var(x, dims, k->n_dims, 1, k->keepdim); break;
    case 5: r = kiln_max_dim(x, (int)k->dims[0], k->keepdim, NULL); break;
    case 6: kiln_max_dim(x, (int)k->dims[0], k->keepdim, &r); break;
    }
    sample_check_vals(k->name, r, k->want, k->n_want, 1e-12);
    if (r) check_shape(r, k->out_ndim, k->out_shape);
  }
  kiln_scope_end();
}

/* ---- large inputs: parallel paths against a serial double reference ------------------- */

TEST(reduce_large_matches_reference) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(3);
  int64_t sh[2] = {700, 333};
  kiln_tensor *x = kiln_randn(2, sh, KILN_DTYPE_F32, g);
  const float *p = kiln_tensor_data(x);
  double *rows = calloc(700, sizeof *rows), *cols = calloc(333, sizeof *cols), tot = 0;
  float *mx = malloc(333 * sizeof *mx);
  int64_t *amx = calloc(333, sizeof *amx);
  for (int j = 0; j < 333; j++) mx[j] = -INFINITY;
  for (int i = 0; i < 700; i++)
    for (int j = 0; j < 333; j++) {
      float v = p[i * 333 + j];
      rows[i] += v, cols[j] += v, tot += v;
      if (v > mx[j]) mx[j] = v, amx[j] = i;
    }
  kiln_tensor *r = kiln_sum(x, (int64_t[]){1}, 1, false);
  for (int i = 0; i < 700; i++) CHECK_NEAR(core_get_flat(r, i), rows[i], 1e-4);
  r = kiln_sum(x, (int64_t[]){0}, 1, false);
  for (int j = 0; j < 333; j++) CHECK_NEAR(core_get_flat(r, j), cols[j], 1e-4);
  r = kiln_sum(x, NULL, 0, false);
  CHECK_NEAR(core_get_flat(r, 0), tot, 1e-2);
  r = kiln_sum(kiln_t(x), (int64_t[]){1}, 1, false); /* columns via a transposed view */
  for (int j = 0; j < 333; j++) CHECK_NEAR(core_get_flat(r, j), cols[j], 1e-4);
  kiln_tensor *idx = NULL;
  r = kiln_max_dim(x, 0, false, &idx);
  int bad = 0;
  for (int j = 0; j < 333; j++)
    bad += core_get_flat(r, j) != mx[j] || core_get_flat(idx, j) != (double)amx[j];
  CHECK_EQ_INT(bad, 0);
  /* a long 1-d sum in float32: accumulated in double, so exact for 1s */
  int64_t n1[1] = {3000001};
  kiln_tensor *ones = kiln_ones(1, n1, KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(kiln_sum(ones, NULL, 0, false), 0), 3000001.0, 0);
  /* narrow column sum: few outputs, long reduction (split reduced range) */
  int64_t sh2[2] = {100000, 3};
  kiln_tensor *y = kiln_randn(2, sh2, KILN_DTYPE_F64, g);
  const double *q = kiln_tensor_data(y);
  double c3[3] = {0, 0, 0};
  for (int64_t i = 0; i < 100000; i++)
    for (int j = 0; j < 3; j++) c3[j] += q[i * 3 + j];
  r = kiln_sum(y, (int64_t[]){0}, 1, false);
  for (int j = 0; j < 3; j++) CHECK_NEAR(core_get_flat(r, j), c3[j], 1e-9);
  kiln_tensor *am = kiln_argmax(y, 0, true, false);
  int64_t best = 0;
  for (int64_t i = 1; i < 300000; i++)
    if (q[i] > q[best]) best = i;
  CHECK_EQ_INT(core_get_flat(am, 0), best);
  /* the same with indices: max.dim over the long dim (outer shape, split) */
  kiln_tensor *mi = NULL;
  kiln_tensor *mv = kiln_max_dim(y, 0, false, &mi);
  for (int j = 0; j < 3; j++) {
    int64_t bi = 0;
    for (int64_t i = 1; i < 100000; i++)
      if (q[i * 3 + j] > q[bi * 3 + j]) bi = i;
    CHECK_EQ_INT(core_get_flat(mi, j), bi);
    CHECK(core_get_flat(mv, j) == q[bi * 3 + j]);
  }
  /* amin over everything (inner shape, split, no indices) and var */
  double lo = q[0], mean = 0, ss = 0;
  for (int64_t i = 0; i < 300000; i++) lo = q[i] < lo ? q[i] : lo, mean += q[i];
  mean /= 300000;
  for (int64_t i = 0; i < 300000; i++) ss += (q[i] - mean) * (q[i] - mean);
  CHECK(core_get_flat(kiln_amin(y, NULL, 0, false), 0) == lo);
  CHECK_NEAR(core_get_flat(kiln_var(y, NULL, 0, 1, false), 0), ss / 299999, 1e-12);
  /* ties in a long row: the first index wins in every split */
  kiln_tensor *flat = kiln_zeros(1, (int64_t[]){200000}, KILN_DTYPE_F32);
  ((float *)kiln_tensor_data(flat))[123457] = 1;
  ((float *)kiln_tensor_data(flat))[190000] = 1;
  CHECK_EQ_INT(core_get_flat(kiln_argmax(flat, 0, true, false), 0), 123457);
  kiln_tensor *f2 = kiln_reshape(flat, 2, (int64_t[]){100000, 2});
  kiln_max_dim(f2, 0, false, &mi);
  CHECK_EQ_INT(core_get_flat(mi, 0), 95000);
  CHECK_EQ_INT(core_get_flat(mi, 1), 61728);
  free(rows), free(cols), free(mx), free(amx);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* ---- gradients (beyond gradcheck): ties split evenly ---------------------------------- */

TEST(reduce_amax_ties_grad) {
  kiln_scope_begin();
  double v[4] = {2, 5, 5, 1};
  kiln_tensor *x = kiln_from_data(v, 1, S4, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  CHECK(kiln_backward(kiln_amax(x, NULL, 0, false), NULL) == KILN_OK);
  double want[4] = {0, 0.5, 0.5, 0};
  sample_check_vals("amax ties grad", kiln_tensor_grad(x), want, 4, 0);
  kiln_tensor *x2 = kiln_from_data(v, 1, S4, KILN_DTYPE_F64);
  kiln_set_requires_grad(x2, true);
  CHECK(kiln_backward(kiln_max_dim(x2, 0, false, NULL), NULL) == KILN_OK);
  double want2[4] = {0, 1, 0, 0};
  sample_check_vals("max.dim grad", kiln_tensor_grad(x2), want2, 4, 0);
  kiln_scope_end();
}
