/* tests/ops/test_reduce_more.c: gradcheck samples (tests/ops/sample.h) for
 * the ops of src/ops/reduce_more.c (quantile, nanquantile, the norm
 * overloads), shape_more.c (unfold, as_strided, repeat_interleave,
 * gradient) and native_norm.c; their values on inputs small enough to
 * work out by hand, and their argument checks. Values against PyTorch come
 * from tests/ops/test_opinfo.c's OpInfo samples. */
#include <math.h>
#include <string.h>

#include "sample.h"
#include "test.h"

static const int64_t S25[2] = {2, 5}, S3[1] = {3};

#define QUANTILE_SAMPLE(ENUM)                                                    \
  OP_SAMPLE(ENUM, rows) {                                                        \
    s->args[0] = OPV_T(sample_randn(g, 2, S25));                                 \
    s->args[1] = OPV_T(sample_uniform(g, 1, S3, 0.1, 0.9));                      \
    s->args[2] = OPV_I(1);                                                       \
    s->args[3] = OPV_B(true);                                                    \
    s->args[4] = OPV_S("linear");                                                \
    s->n_args = 5;                                                               \
  }
QUANTILE_SAMPLE(QUANTILE)
QUANTILE_SAMPLE(NANQUANTILE)

#define QUANTILE_SCALAR_SAMPLE(ENUM, mode)                                       \
  OP_SAMPLE(ENUM, all) {                                                         \
    s->args[0] = OPV_T(sample_randn(g, 2, S25));                                 \
    s->args[1] = OPV_F(0.3);                                                     \
    s->args[2] = OPV_NONE;                                                       \
    s->args[3] = OPV_B(false);                                                   \
    s->args[4] = OPV_S(mode);                                                    \
    s->n_args = 5;                                                               \
  }
QUANTILE_SCALAR_SAMPLE(QUANTILE_SCALAR, "midpoint")
QUANTILE_SCALAR_SAMPLE(NANQUANTILE_SCALAR, "nearest")

OP_SAMPLE(NORM_DIM_DTYPE, f64) {
  s->args[0] = OPV_T(sample_randn(g, 2, S25));
  s->args[1] = OPV_F(3.0);
  s->ints[0][0] = 1;
  s->args[2] = OPV_INTS(s->ints[0], 1);
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_I(7);
  s->n_args = 5;
}

/* ---- shape_more.c's ops --------------------------------------------------------- */
static const int64_t S34[2] = {3, 4}, S7[1] = {7}, S9[1] = {9};

OP_SAMPLE(UNFOLD, overlapping) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_I(3);
  s->args[3] = OPV_I(1);
  s->n_args = 4;
}
/* windows that overlap (stride 1 < size 3) and skip element 0 */
OP_SAMPLE(AS_STRIDED, overlapping) {
  s->args[0] = OPV_T(sample_randn(g, 1, S9));
  s->ints[0][0] = 3;
  s->ints[0][1] = 3;
  s->ints[1][0] = 2;
  s->ints[1][1] = 1;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_INTS(s->ints[1], 2);
  s->args[3] = OPV_I(1);
  s->n_args = 4;
}
OP_SAMPLE(REPEAT_INTERLEAVE, dim) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(3);
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(REPEAT_INTERLEAVE_T, counts) {
  static const int64_t reps[3] = {2, 0, 1};
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(kiln_from_data(reps, 1, S3, KILN_DTYPE_I64));
  s->args[2] = OPV_I(0);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(GRADIENT, order2) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_F(0.5);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(2);
  s->n_args = 4;
}
OP_SAMPLE(GRADIENT_DIMS, dim1) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_F(2.0);
  s->ints[0][0] = -1;
  s->args[2] = OPV_INTS(s->ints[0], 1);
  s->args[3] = OPV_I(1);
  s->n_args = 4;
}
OP_SAMPLE(GRADIENT_ARRAY, one_dim) {
  s->args[0] = OPV_T(sample_randn(g, 1, S7));
  s->ints[0][0] = 0;
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_I(1);
  s->n_args = 3;
}

/* ---- native_norm.c's ops ---------------------------------------------------------- */
OP_SAMPLE(NATIVE_LAYER_NORM, affine) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->ints[0][0] = 4;
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[3] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[4] = OPV_F(1e-5);
  s->n_args = 5;
  s->skip_outs = 6; /* mean, rstd: detached, as PyTorch's formula ignores their gradients */
}
OP_SAMPLE(NATIVE_BATCH_NORM, training) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[2] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[3] = OPV_NONE;
  s->args[4] = OPV_NONE;
  s->args[5] = OPV_B(true);
  s->args[6] = OPV_F(0.1);
  s->args[7] = OPV_F(1e-5);
  s->n_args = 8;
  s->skip_outs = 6;
}

/* ---- values computed by hand, and bad arguments ---------------------------------- */
static kiln_tensor *vec(const double *v, int64_t n) { return kiln_from_data(v, 1, &n, KILN_DTYPE_F64); }

static void expect_error(const char *what, kiln_tensor *r, const char *text) {
  const char *e = kiln_last_error();
  CHECK_MSG(r == NULL, "%s: succeeded", what);
  CHECK_MSG(e && strstr(e, text), "%s: \"%s\" does not say \"%s\"", what, e ? e : "", text);
}

TEST(reduce_more_values_by_hand) {
  kiln_scope_begin();
  kiln_tensor *x = vec((double[]){4, 1, 3, 2}, 4);
  static const char *const modes[5] = {"linear", "lower", "higher", "midpoint", "nearest"};
  static const double want[5] = {2.5, 2, 3, 2.5, 3}; /* rank 1.5 of 1 2 3 4; nearest: half to even */
  for (int i = 0; i < 5; i++) {
    kiln_tensor *q = op_call1(KILN_OP_QUANTILE_SCALAR, (op_val[]){OPV_T(x), OPV_F(0.5), OPV_NONE, OPV_B(false),
                                                                 OPV_S(modes[i])}, 5);
    sample_check_vals(modes[i], q, &want[i], 1, 1e-12);
  }
  kiln_tensor *qs = vec((double[]){0, 1.0 / 3, 1}, 3);
  kiln_tensor *q3 = op_call1(KILN_OP_QUANTILE, (op_val[]){OPV_T(x), OPV_T(qs), OPV_I(0), OPV_B(true), OPV_S("linear")}, 5);
  CHECK(q3 && q3->ndim == 2 && q3->shape[0] == 3 && q3->shape[1] == 1);
  sample_check_vals("quantile q tensor", q3, (double[]){1, 2, 4}, 3, 1e-12);
  kiln_tensor *xn = vec((double[]){1, NAN, 3}, 3);
  kiln_tensor *nq = op_call1(KILN_OP_NANQUANTILE_SCALAR, (op_val[]){OPV_T(xn), OPV_F(0.5), OPV_NONE, OPV_B(false),
                                                                    OPV_S("linear")}, 5);
  sample_check_vals("nanquantile", nq, (double[]){2}, 1, 1e-12);
  kiln_tensor *qn = op_call1(KILN_OP_QUANTILE_SCALAR, (op_val[]){OPV_T(xn), OPV_F(0.5), OPV_NONE, OPV_B(false),
                                                                 OPV_S("linear")}, 5);
  sample_check_vals("quantile NaN", qn, (double[]){NAN}, 1, 0);
  /* histc over the data's range [1, 4]: bins of width 0.75, 4 in the last */
  kiln_tensor *h = op_call1(KILN_OP_HISTC, (op_val[]){OPV_T(vec((double[]){1, 2, 1, 4}, 4)), OPV_I(4), OPV_I(0),
                                                     OPV_I(0)}, 4);
  sample_check_vals("histc", h, (double[]){2, 1, 0, 1}, 4, 0);
  static const int64_t iv[4] = {0, 2, 2, 5};
  kiln_tensor *ix = kiln_from_data(iv, 1, (int64_t[]){4}, KILN_DTYPE_I64);
  kiln_tensor *bc = op_call1(KILN_OP_BINCOUNT, (op_val[]){OPV_T(ix), OPV_NONE, OPV_I(3)}, 3);
  CHECK(bc && bc->dtype == KILN_DTYPE_I64);
  sample_check_vals("bincount", bc, (double[]){1, 0, 2, 0, 0, 1}, 6, 0);
  kiln_tensor *bw = op_call1(KILN_OP_BINCOUNT, (op_val[]){OPV_T(ix), OPV_T(x), OPV_I(0)}, 3);
  sample_check_vals("bincount weights", bw, (double[]){4, 0, 4, 0, 0, 2}, 6, 0);
  /* the views, and the decompositions of shape_more.c */
  kiln_tensor *r9 = kiln_arange(0, 9, 1, KILN_DTYPE_F64);
  kiln_tensor *as = op_call1(KILN_OP_AS_STRIDED, (op_val[]){OPV_T(r9), OPV_INTS(((int64_t[]){3, 3}), 2),
                                                           OPV_INTS(((int64_t[]){2, 1}), 2), OPV_I(1)}, 4);
  CHECK(as && as->storage == r9->storage);
  sample_check_vals("as_strided", as, (double[]){1, 2, 3, 3, 4, 5, 5, 6, 7}, 9, 0);
  kiln_tensor *uf = op_call1(KILN_OP_UNFOLD, (op_val[]){OPV_T(kiln_narrow(r9, 0, 0, 5)), OPV_I(0), OPV_I(2),
                                                       OPV_I(2)}, 4);
  CHECK(uf && uf->ndim == 2 && uf->shape[0] == 2 && uf->shape[1] == 2 && uf->storage == r9->storage);
  sample_check_vals("unfold", uf, (double[]){0, 1, 2, 3}, 4, 0);
  static const int64_t reps[3] = {2, 0, 1};
  kiln_tensor *ri = op_call1(KILN_OP_REPEAT_INTERLEAVE_T, (op_val[]){OPV_T(vec((double[]){1, 2, 3}, 3)),
                             OPV_T(kiln_from_data(reps, 1, (int64_t[]){3}, KILN_DTYPE_I64)), OPV_NONE, OPV_NONE}, 4);
  sample_check_vals("repeat_interleave", ri, (double[]){1, 1, 3}, 3, 0);
  kiln_tensor *gr[2];
  CHECK(op_call(KILN_OP_GRADIENT, (op_val[]){OPV_T(vec((double[]){1, 2, 4, 8}, 4)), OPV_NONE, OPV_NONE, OPV_I(1)},
                4, gr, 2) == 1);
  sample_check_vals("gradient", gr[0], (double[]){1, 1.5, 3, 4}, 4, 0);
  /* norm.out writes into out and returns it */
  kiln_tensor *out = kiln_zeros(0, NULL, KILN_DTYPE_F64);
  int64_t d0 = 0;
  kiln_tensor *no = op_call1(KILN_OP_NORM_OUT, (op_val[]){OPV_T(x), OPV_F(1), OPV_INTS(&d0, 1), OPV_B(false),
                                                         OPV_T(out)}, 5);
  CHECK(no == out);
  sample_check_vals("norm.out", out, (double[]){10}, 1, 0);
  /* bad arguments */
  expect_error("quantile q", op_call1(KILN_OP_QUANTILE_SCALAR, (op_val[]){OPV_T(x), OPV_F(1.5), OPV_NONE,
               OPV_B(false), OPV_S("linear")}, 5), "q must be in the range [0, 1]");
  expect_error("quantile mode", op_call1(KILN_OP_QUANTILE_SCALAR, (op_val[]){OPV_T(x), OPV_F(0.5), OPV_NONE,
               OPV_B(false), OPV_S("cubic")}, 5), "interpolation must be one of");
  expect_error("histc range", op_call1(KILN_OP_HISTC, (op_val[]){OPV_T(x), OPV_I(4), OPV_I(3), OPV_I(1)}, 4),
               "max must be larger than min");
  static const int64_t neg[2] = {1, -1};
  expect_error("bincount negative", op_call1(KILN_OP_BINCOUNT, (op_val[]){OPV_T(kiln_from_data(neg, 1,
               (int64_t[]){2}, KILN_DTYPE_I64)), OPV_NONE, OPV_I(0)}, 3), "non-negative");
  expect_error("unfold size", op_call1(KILN_OP_UNFOLD, (op_val[]){OPV_T(x), OPV_I(0), OPV_I(5), OPV_I(1)}, 4),
               "maximum size for tensor at dimension 0 is 4 but size is 5");
  expect_error("as_strided bounds", op_call1(KILN_OP_AS_STRIDED, (op_val[]){OPV_T(x), OPV_INTS(((int64_t[]){3}), 1),
               OPV_INTS(((int64_t[]){2}), 1), OPV_I(0)}, 4), "out of bounds");
  expect_error("norm.out shape", op_call1(KILN_OP_NORM_OUT, (op_val[]){OPV_T(x), OPV_F(1), OPV_INTS(&d0, 1),
               OPV_B(true), OPV_T(out)}, 5), "cannot hold the result");
  kiln_scope_end();
}
