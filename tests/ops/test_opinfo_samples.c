/* tests/ops/test_opinfo_samples.c: gradcheck samples (tests/ops/sample.h)
 * for the ops added for OpInfo coverage (src/ops/unary_math.c,
 * binary_math.c, ...): the table-driven gradcheck and gradgradcheck run
 * each one against float64 finite differences. Values against PyTorch
 * come from tests/ops/test_opinfo.c. */
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S3[1] = {3};

#define U1(ENUM, lo, hi)                                                        \
  OP_SAMPLE(ENUM, uniform) {                                                    \
    s->args[0] = OPV_T(sample_uniform(g, 2, S23, lo, hi));                      \
    s->n_args = 1;                                                              \
  }
U1(TAN, -1.2, 1.2)
U1(ASIN, -0.9, 0.9)
U1(ACOS, -0.9, 0.9)
U1(ATAN, -3, 3)
U1(SINH, -2, 2)
U1(COSH, -2, 2)
U1(ASINH, -3, 3)
U1(ACOSH, 1.2, 4)
U1(ATANH, -0.9, 0.9)
U1(EXPM1, -2, 2)
U1(LOG1P, -0.5, 3)
U1(LOG2, 0.2, 4)
U1(LOG10, 0.2, 4)
U1(EXP2, -2, 2)
U1(ERFC, -2, 2)
U1(ERFINV, -0.9, 0.9)
U1(LGAMMA, 0.3, 4)
U1(DIGAMMA, 0.3, 4)
U1(FLOOR, -3, 3)
U1(CEIL, -3, 3)
U1(TRUNC, -3, 3)
U1(ROUND, -3, 3)
U1(FRAC, 0.1, 0.9)
U1(SGN, -3, 3)
U1(SQUARE, -3, 3)
U1(DEG2RAD, -3, 3)
U1(RAD2DEG, -3, 3)
U1(POSITIVE, -3, 3)

OP_SAMPLE(NAN_TO_NUM, finite) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_F(0.0);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(POLYGAMMA, trigamma) {
  s->args[0] = OPV_I(1);
  s->args[1] = OPV_T(sample_uniform(g, 2, S23, 0.5, 3));
  s->n_args = 2;
}
OP_SAMPLE(LOGIT, eps) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S23, 0.1, 0.9));
  s->args[1] = OPV_F(1e-3);
  s->n_args = 2;
}

#define B2(ENUM, tag, lo1, hi1, lo2, hi2)                                       \
  OP_SAMPLE(ENUM, tag) {                                                        \
    s->args[0] = OPV_T(sample_uniform(g, 2, S23, lo1, hi1));                    \
    s->args[1] = OPV_T(sample_uniform(g, 1, S3, lo2, hi2));                     \
    s->n_args = 2;                                                              \
  }
B2(ATAN2, broadcast, -2, 2, 0.5, 2)
B2(HYPOT, broadcast, 0.5, 2, -2, -0.5)
B2(COPYSIGN, broadcast, 0.5, 2, -2, 2)
B2(LOGADDEXP, broadcast, -2, 2, -2, 2)
B2(LOGADDEXP2, broadcast, -2, 2, -2, 2)
B2(XLOGY, broadcast, -2, 2, 0.5, 2)
B2(FMAX, broadcast, -2, 2, -2, 2)
B2(FMIN, broadcast, -2, 2, -2, 2)
B2(REMAINDER, broadcast, 0.1, 0.9, 1.5, 2)
B2(FMOD, broadcast, 0.1, 0.9, 1.5, 2)
B2(FLOOR_DIVIDE, broadcast, 0.1, 0.9, 1.5, 2)
B2(TRUE_DIVIDE, broadcast, -2, 2, 0.5, 2)
B2(MAX_OTHER, broadcast, -2, 2, -2, 2)
B2(MIN_OTHER, broadcast, -2, 2, -2, 2)
B2(CLAMP_MIN_T, broadcast, -2, 2, -2, 2)
B2(CLAMP_MAX_T, broadcast, -2, 2, -2, 2)
B2(FLOAT_POWER, broadcast, 0.5, 2, -2, 2)
B2(LDEXP, broadcast, -2, 2, -2, 2)

OP_SAMPLE(DIV_MODE, none) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_uniform(g, 1, S3, 0.5, 2));
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}
OP_SAMPLE(DIV_MODE, trunc) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S23, 0.1, 0.9));
  s->args[1] = OPV_T(sample_uniform(g, 1, S3, 1.5, 2));
  s->args[2] = OPV_S("trunc");
  s->n_args = 3;
}
OP_SAMPLE(CLAMP_TENSOR, both) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_uniform(g, 1, S3, -1, -0.5));
  s->args[2] = OPV_T(sample_uniform(g, 1, S3, 0.5, 1));
  s->n_args = 3;
}
OP_SAMPLE(CLAMP_MIN, scalar) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_F(0.1);
  s->n_args = 2;
}
OP_SAMPLE(CLAMP_MAX, scalar) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_F(0.1);
  s->n_args = 2;
}
OP_SAMPLE(LERP, scalar) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_F(0.3);
  s->n_args = 3;
}
OP_SAMPLE(LERP_T, tensor) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_T(sample_randn(g, 1, S3));
  s->n_args = 3;
}
OP_SAMPLE(ADDCMUL, value) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_T(sample_randn(g, 2, S23));
  s->args[3] = OPV_F(0.5);
  s->n_args = 4;
}
OP_SAMPLE(ADDCDIV, value) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_T(sample_uniform(g, 2, S23, 0.5, 2));
  s->args[3] = OPV_F(0.5);
  s->n_args = 4;
}
OP_SAMPLE(FLOAT_POWER_S, scalar) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S23, 0.5, 2));
  s->args[1] = OPV_F(1.5);
  s->n_args = 2;
}

/* not differentiable: samples for the fusion test's every-op check */
U1(ISNAN, -3, 3)
U1(ISINF, -3, 3)
U1(ISFINITE, -3, 3)
U1(ISPOSINF, -3, 3)
U1(ISNEGINF, -3, 3)
U1(SIGNBIT, -3, 3)
U1(LOGICAL_NOT, -1, 1)

/* ---- nn_extra.c ---- */
static const int64_t S2345[4] = {2, 3, 2, 2};
U1(HARDSIGMOID, -4, 4)
U1(HARDSWISH, -4, 4)
U1(RELU6, -2, 8)
U1(SELU, -2, 2)
U1(MISH, -2, 2)
U1(LOG_SIGMOID, -3, 3)
#define U1S(ENUM, lo, hi, ...)                                                  \
  OP_SAMPLE(ENUM, args) {                                                       \
    s->args[0] = OPV_T(sample_uniform(g, 2, S23, lo, hi));                      \
    op_val rest[] = {__VA_ARGS__};                                              \
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) s->args[1 + i] = rest[i]; \
    s->n_args = 1 + (int)(sizeof rest / sizeof *rest);                          \
  }
U1S(HARDTANH, -2, 2, OPV_F(-0.5), OPV_F(0.7))
U1S(ELU, -2, 2, OPV_F(0.8), OPV_F(1.2), OPV_F(0.9))
U1S(CELU, -2, 2, OPV_F(0.7))
U1S(SOFTPLUS, -2, 2, OPV_F(2.0), OPV_F(3.0))
U1S(SOFTSHRINK, -2, 2, OPV_F(0.3))
U1S(HARDSHRINK, -2, 2, OPV_F(0.3))
U1S(THRESHOLD, -2, 2, OPV_F(0.1), OPV_F(-1.0))
OP_SAMPLE(GLU, last) {
  int64_t sh[2] = {2, 4};
  s->args[0] = OPV_T(sample_randn(g, 2, sh));
  s->args[1] = OPV_I(-1);
  s->n_args = 2;
}
OP_SAMPLE(PRELU, channels) {
  s->args[0] = OPV_T(sample_randn(g, 4, S2345));
  s->args[1] = OPV_T(sample_uniform(g, 1, S3, 0.1, 0.5));
  s->n_args = 2;
}
OP_SAMPLE(LAYER_NORM, affine) {
  s->ints[0][0] = 2;
  s->ints[0][1] = 2;
  s->args[0] = OPV_T(sample_randn(g, 4, S2345));
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_T(sample_randn(g, 2, s->ints[0]));
  s->args[3] = OPV_T(sample_randn(g, 2, s->ints[0]));
  s->args[4] = OPV_F(1e-5);
  s->args[5] = OPV_B(true);
  s->n_args = 6;
}
OP_SAMPLE(GROUP_NORM, affine) {
  int64_t sh[4] = {2, 4, 2, 2}, c[1] = {4};
  s->args[0] = OPV_T(sample_randn(g, 4, sh));
  s->args[1] = OPV_I(2);
  s->args[2] = OPV_T(sample_randn(g, 1, c));
  s->args[3] = OPV_T(sample_randn(g, 1, c));
  s->args[4] = OPV_F(1e-5);
  s->args[5] = OPV_B(true);
  s->n_args = 6;
}

/* ---- reduce_extra.c ---- */
U1(MIN_ALL, -2, 2)
U1S(MIN_DIM, -2, 2, OPV_I(1), OPV_B(false))
U1S(AMINMAX, -2, 2, OPV_I(0), OPV_B(true))
U1S(PROD, 0.5, 2, OPV_NONE)
U1S(PROD_DIM, -2, 2, OPV_I(1), OPV_B(true), OPV_NONE)
U1S(VAR_ALL, -2, 2, OPV_B(true))
U1S(VAR_CORR, -2, 2, OPV_I(1), OPV_I(0), OPV_B(false))
U1S(STD_DIM, -2, 2, OPV_I(1), OPV_B(true), OPV_B(true))
U1S(STD_ALL, -2, 2, OPV_B(false))
U1S(STD_CORR, -2, 2, OPV_I(1), OPV_I(2), OPV_B(false))
U1S(VAR_MEAN, -2, 2, OPV_I(0), OPV_I(1), OPV_B(false))
U1S(STD_MEAN, -2, 2, OPV_I(0), OPV_I(1), OPV_B(true))
U1S(LOGSUMEXP, -2, 2, OPV_I(1), OPV_B(false))
U1S(NANSUM, -2, 2, OPV_NONE, OPV_B(false), OPV_NONE)
U1S(NANMEAN, -2, 2, OPV_I(1), OPV_B(false), OPV_NONE)
U1S(VAR_MEAN_DIM, -2, 2, OPV_I(1), OPV_B(true), OPV_B(true))
U1S(STD_MEAN_DIM, -2, 2, OPV_I(1), OPV_B(false), OPV_B(false))

/* ---- shape_extra.c ---- */
static const int64_t S234[3] = {2, 3, 4};
#define T3 OPV_T(sample_randn(g, 3, S234))
#define SAMPLE_ARGS(ENUM, tag, ...)                                             \
  OP_SAMPLE(ENUM, tag) {                                                        \
    op_val args_[] = {__VA_ARGS__};                                             \
    for (size_t i = 0; i < sizeof args_ / sizeof *args_; i++) s->args[i] = args_[i]; \
    s->n_args = (int)(sizeof args_ / sizeof *args_);                            \
  }
static const int64_t L2[2] = {2, 1}, L3[3] = {1, 2, 1}, L13[2] = {1, 3}, L0[1] = {0},
                     L1[1] = {1}, L12[2] = {1, 2}, L2x[2] = {2, 2}, LP[2] = {-1, 1},
                     L31[2] = {3, 1}, L01[2] = {0, 1};
SAMPLE_ARGS(EXPAND_AS, plain, OPV_T(sample_randn(g, 2, L31)), T3)
SAMPLE_ARGS(VIEW_AS, plain, OPV_T(sample_randn(g, 2, (int64_t[]){6, 4})), T3)
SAMPLE_ARGS(RESHAPE_AS, plain, OPV_T(sample_transposed(g, (int64_t[]){6, 4})), T3)
SAMPLE_ARGS(BROADCAST_TO, plain, OPV_T(sample_randn(g, 2, L31)), OPV_INTS(S234, 3))
SAMPLE_ARGS(REPEAT, plain, OPV_T(sample_randn(g, 2, S23)), OPV_INTS(L3, 3))
SAMPLE_ARGS(TILE, plain, OPV_T(sample_randn(g, 2, S23)), OPV_INTS(L2, 2))
SAMPLE_ARGS(SPLIT_SIZES, plain, T3, OPV_INTS(L13, 2), OPV_I(2))
SAMPLE_ARGS(SPLIT_WITH_SIZES, plain, T3, OPV_INTS(L12, 2), OPV_I(1))
SAMPLE_ARGS(TENSOR_SPLIT, plain, T3, OPV_I(3), OPV_I(2))
SAMPLE_ARGS(TENSOR_SPLIT_IND, plain, T3, OPV_INTS(L12, 2), OPV_I(2))
SAMPLE_ARGS(HSPLIT, plain, OPV_T(sample_randn(g, 2, (int64_t[]){2, 4})), OPV_I(2))
SAMPLE_ARGS(HSPLIT_IND, plain, T3, OPV_INTS(L1, 1))
SAMPLE_ARGS(VSPLIT, plain, T3, OPV_I(2))
SAMPLE_ARGS(VSPLIT_IND, plain, T3, OPV_INTS(L1, 1))
SAMPLE_ARGS(DSPLIT, plain, T3, OPV_I(2))
SAMPLE_ARGS(DSPLIT_IND, plain, T3, OPV_INTS(L13, 2))
SAMPLE_ARGS(FLIP, plain, T3, OPV_INTS(LP, 2))
SAMPLE_ARGS(FLIPLR, plain, T3)
SAMPLE_ARGS(FLIPUD, plain, T3)
SAMPLE_ARGS(ROLL, dims, T3, OPV_INTS(L12, 2), OPV_INTS(LP, 2))
SAMPLE_ARGS(ROLL, flat, T3, OPV_INTS(L2, 1), OPV_INTS(L0, 0))
SAMPLE_ARGS(ROT90, plain, T3, OPV_I(1), OPV_INTS(L12, 2))
SAMPLE_ARGS(TRIL, plain, T3, OPV_I(1))
SAMPLE_ARGS(TRIU, plain, T3, OPV_I(-1))
SAMPLE_ARGS(DIAGONAL, plain, T3, OPV_I(1), OPV_I(0), OPV_I(2))
SAMPLE_ARGS(TRACE, plain, OPV_T(sample_randn(g, 2, S23)))
SAMPLE_ARGS(DIAG, vector, OPV_T(sample_randn(g, 1, S3)), OPV_I(1))
SAMPLE_ARGS(DIAG, matrix, OPV_T(sample_randn(g, 2, S23)), OPV_I(0))
SAMPLE_ARGS(MOVEDIM, plain, T3, OPV_INTS(L12, 2), OPV_INTS(L01, 2))
SAMPLE_ARGS(MOVEDIM_INT, plain, T3, OPV_I(0), OPV_I(2))
SAMPLE_ARGS(MOVEAXIS, plain, T3, OPV_INTS(L12, 2), OPV_INTS(L01, 2))
SAMPLE_ARGS(MOVEAXIS_INT, plain, T3, OPV_I(2), OPV_I(0))
SAMPLE_ARGS(SWAPAXES, plain, T3, OPV_I(0), OPV_I(2))
SAMPLE_ARGS(SWAPDIMS, plain, T3, OPV_I(1), OPV_I(2))
SAMPLE_ARGS(UNFLATTEN, plain, T3, OPV_I(2), OPV_INTS(L2x, 2))
SAMPLE_ARGS(ATLEAST_1D, plain, OPV_T(sample_randn(g, 0, NULL)))
SAMPLE_ARGS(ATLEAST_2D, plain, OPV_T(sample_randn(g, 1, S3)))
SAMPLE_ARGS(ATLEAST_3D, plain, OPV_T(sample_randn(g, 2, S23)))
SAMPLE_ARGS(RAVEL, plain, OPV_T(sample_transposed(g, (int64_t[]){2, 3})))
#define TWO_TS(ENUM)                                                            \
  OP_SAMPLE(ENUM, pair) {                                                       \
    kiln_tensor **ts = (kiln_tensor **)s->ints[3];                              \
    ts[0] = sample_randn(g, 2, S23);                                            \
    ts[1] = sample_randn(g, 2, S23);                                            \
    s->args[0] = OPV_TS(ts, 2);                                                 \
    s->n_args = 1;                                                              \
  }
TWO_TS(HSTACK)
TWO_TS(VSTACK)
TWO_TS(DSTACK)
TWO_TS(COLUMN_STACK)
static kiln_tensor *mask23(kiln_generator *g) {
  return kiln_gt(sample_randn(g, 2, S23), kiln_scalar(0, KILN_DTYPE_F64));
}
SAMPLE_ARGS(MASKED_FILL, plain, OPV_T(sample_randn(g, 2, S23)), OPV_T(mask23(g)), OPV_F(0.5))
SAMPLE_ARGS(MASKED_FILL_T, plain, OPV_T(sample_randn(g, 2, S23)), OPV_T(mask23(g)),
            OPV_T(sample_randn(g, 0, NULL)))
SAMPLE_ARGS(INDEX_FILL, plain, OPV_T(sample_randn(g, 2, S23)), OPV_I(1),
            OPV_T(sample_index(g, 1, L1, 3)), OPV_F(-1))
SAMPLE_ARGS(INDEX_FILL_T, plain, OPV_T(sample_randn(g, 2, S23)), OPV_I(0),
            OPV_T(sample_index(g, 1, L1, 2)), OPV_T(sample_randn(g, 0, NULL)))
OP_SAMPLE(INDEX_COPY, plain) {
  int64_t n2[1] = {2};
  kiln_tensor *ix = kiln_zeros(1, n2, KILN_DTYPE_I64);
  ((int64_t *)kiln_tensor_data(ix))[0] = 2;
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_T(ix);
  s->args[3] = OPV_T(sample_randn(g, 2, L2x));
  s->n_args = 4;
}
SAMPLE_ARGS(TAKE, plain, OPV_T(sample_randn(g, 2, S23)), OPV_T(sample_index(g, 1, (int64_t[]){4}, 6)))
SAMPLE_ARGS(TAKE_ALONG_DIM, plain, OPV_T(sample_randn(g, 2, S23)),
            OPV_T(sample_index(g, 2, L2, 2)), OPV_I(1))
OP_SAMPLE(SCATTER, plain) {
  /* distinct indices per column: a permutation of the rows */
  int64_t sh[2] = {2, 3};
  kiln_tensor *ix = kiln_zeros(2, sh, KILN_DTYPE_I64);
  int64_t *p = kiln_tensor_data(ix);
  for (int j = 0; j < 3; j++) {
    p[j] = j % 2;
    p[3 + j] = 1 - j % 2;
  }
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_T(ix);
  s->args[3] = OPV_T(sample_randn(g, 2, S23));
  s->n_args = 4;
}
SAMPLE_ARGS(SCATTER_VALUE, plain, OPV_T(sample_randn(g, 2, S23)), OPV_I(1),
            OPV_T(sample_index(g, 2, L12, 3)), OPV_F(2.0))

/* ---- conv2d with groups (src/ops/conv.c) ---- */
OP_SAMPLE(CONV2D, depthwise_groups) {
  int64_t xs[4] = {1, 4, 4, 4}, ws[4] = {4, 1, 3, 3}, bs[1] = {4};
  for (int i = 0; i < 2; i++) {
    s->ints[0][i] = 1;
    s->ints[1][i] = 1;
    s->ints[2][i] = 1;
  }
  s->args[0] = OPV_T(sample_randn(g, 4, xs));
  s->args[1] = OPV_T(sample_randn(g, 4, ws));
  s->args[2] = OPV_T(sample_randn(g, 1, bs));
  s->args[3] = OPV_INTS(s->ints[0], 2);
  s->args[4] = OPV_INTS(s->ints[1], 2);
  s->args[5] = OPV_INTS(s->ints[2], 2);
  s->args[6] = OPV_I(4);
  s->n_args = 7;
}

/* ---- matrix_extra.c ---- */
static const int64_t B234[3] = {2, 3, 4}, B243[3] = {2, 4, 3}, M33[2] = {3, 3}, V4[1] = {4},
                     M34[2] = {3, 4}, L1x[1] = {1}, L0x[1] = {0};
SAMPLE_ARGS(BADDBMM, plain, OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 3})),
            OPV_T(sample_randn(g, 3, B234)), OPV_T(sample_randn(g, 3, B243)), OPV_F(0.5), OPV_F(2))
SAMPLE_ARGS(ADDBMM, plain, OPV_T(sample_randn(g, 2, M33)), OPV_T(sample_randn(g, 3, B234)),
            OPV_T(sample_randn(g, 3, B243)), OPV_F(1), OPV_F(0.5))
SAMPLE_ARGS(ADDMV, plain, OPV_T(sample_randn(g, 1, S3)), OPV_T(sample_randn(g, 2, M34)),
            OPV_T(sample_randn(g, 1, V4)), OPV_F(2), OPV_F(1))
SAMPLE_ARGS(ADDR, plain, OPV_T(sample_randn(g, 2, M34)), OPV_T(sample_randn(g, 1, S3)),
            OPV_T(sample_randn(g, 1, V4)), OPV_F(1), OPV_F(-1))
SAMPLE_ARGS(MV, plain, OPV_T(sample_randn(g, 2, M34)), OPV_T(sample_randn(g, 1, V4)))
SAMPLE_ARGS(DOT, plain, OPV_T(sample_randn(g, 1, V4)), OPV_T(sample_randn(g, 1, V4)))
SAMPLE_ARGS(VDOT, plain, OPV_T(sample_randn(g, 1, V4)), OPV_T(sample_randn(g, 1, V4)))
SAMPLE_ARGS(OUTER, plain, OPV_T(sample_randn(g, 1, S3)), OPV_T(sample_randn(g, 1, V4)))
SAMPLE_ARGS(GER, plain, OPV_T(sample_randn(g, 1, S3)), OPV_T(sample_randn(g, 1, V4)))
SAMPLE_ARGS(INNER, plain, OPV_T(sample_randn(g, 2, M34)), OPV_T(sample_randn(g, 3, B234)))
SAMPLE_ARGS(KRON, plain, OPV_T(sample_randn(g, 2, S23)), OPV_T(sample_randn(g, 2, L2x)))
SAMPLE_ARGS(TENSORDOT, plain, OPV_T(sample_randn(g, 3, B234)), OPV_T(sample_randn(g, 2, M34)),
            OPV_INTS(L1x, 1), OPV_INTS(L0x, 1))

/* ---- pool.c ---- */
static const int64_t P4[4] = {1, 2, 5, 4}, K2[2] = {2, 3}, ST[2] = {2, 1}, PD[2] = {1, 1},
                     OS[2] = {3, 2}, PADS[4] = {1, 2, 0, 1}, PADN[4] = {-1, 2, 1, 0};
SAMPLE_ARGS(ADAPTIVE_AVG_POOL2D, plain, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(OS, 2))
SAMPLE_ARGS(ADAPTIVE_AVG_POOL1D, plain, OPV_T(sample_randn(g, 3, S234)), OPV_I(3))
SAMPLE_ARGS(AVG_POOL2D, ceil_pad, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(K2, 2), OPV_INTS(ST, 2),
            OPV_INTS(PD, 2), OPV_B(true), OPV_B(false), OPV_NONE)
SAMPLE_ARGS(AVG_POOL2D, divisor, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(K2, 2), OPV_INTS(K2, 0),
            OPV_I(0), OPV_B(false), OPV_B(true), OPV_I(4))
SAMPLE_ARGS(AVG_POOL1D, plain, OPV_T(sample_randn(g, 3, S234)), OPV_I(2), OPV_I(1), OPV_I(1),
            OPV_B(false), OPV_B(true))
SAMPLE_ARGS(PAD, reflect, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(PADS, 4), OPV_S("reflect"), OPV_NONE)
SAMPLE_ARGS(PAD, replicate, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(PADS, 4), OPV_S("replicate"),
            OPV_NONE)
SAMPLE_ARGS(PAD, circular, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(PADS, 4), OPV_S("circular"),
            OPV_NONE)
SAMPLE_ARGS(PAD, constant, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(PADN, 4), OPV_S("constant"),
            OPV_F(0.5))
SAMPLE_ARGS(CONSTANT_PAD_ND, plain, OPV_T(sample_randn(g, 4, P4)), OPV_INTS(PADN, 4), OPV_F(-1))

/* ---- sort.c ---- */
SAMPLE_ARGS(SORT, plain, T3, OPV_I(1), OPV_B(true))
SAMPLE_ARGS(SORT_STABLE, plain, T3, OPV_B(true), OPV_I(-1), OPV_B(false))
SAMPLE_ARGS(MSORT, plain, T3)
SAMPLE_ARGS(TOPK, plain, T3, OPV_I(2), OPV_I(-1), OPV_B(true), OPV_B(true))
SAMPLE_ARGS(KTHVALUE, plain, T3, OPV_I(2), OPV_I(1), OPV_B(false))
SAMPLE_ARGS(MEDIAN, plain, T3)
SAMPLE_ARGS(MEDIAN_DIM, plain, T3, OPV_I(2), OPV_B(true))
SAMPLE_ARGS(CUMMAX, plain, T3, OPV_I(2))
SAMPLE_ARGS(CUMMIN, plain, T3, OPV_I(1))
SAMPLE_ARGS(CUMSUM, plain, T3, OPV_I(1), OPV_NONE)
SAMPLE_ARGS(CUMPROD, plain, T3, OPV_I(2), OPV_NONE)
SAMPLE_ARGS(LOGCUMSUMEXP, plain, T3, OPV_I(0))
OP_SAMPLE(MAX_POOL2D_WITH_INDICES, ceil_mode) {
  int64_t xs[4] = {1, 2, 5, 5};
  s->ints[0][0] = s->ints[0][1] = 2;
  s->ints[1][0] = s->ints[1][1] = 2;
  s->ints[2][0] = s->ints[2][1] = 0;
  s->ints[3][0] = s->ints[3][1] = 1;
  s->args[0] = OPV_T(sample_randn(g, 4, xs));
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_INTS(s->ints[1], 2);
  s->args[3] = OPV_INTS(s->ints[2], 2);
  s->args[4] = OPV_INTS(s->ints[3], 2);
  s->args[5] = OPV_B(true);
  s->n_args = 6;
}

/* ---- loss_extra.c ---- */
#define X23 OPV_T(sample_randn(g, 2, S23))
SAMPLE_ARGS(L1_LOSS, plain, X23, X23, OPV_I(1))
SAMPLE_ARGS(SMOOTH_L1_LOSS, plain, X23, X23, OPV_I(2), OPV_F(0.5))
SAMPLE_ARGS(HUBER_LOSS, plain, X23, X23, OPV_I(0), OPV_F(0.7))
SAMPLE_ARGS(BCE_LOGITS, plain, X23, OPV_T(sample_uniform(g, 2, S23, 0, 1)),
            OPV_T(sample_uniform(g, 1, S3, 0.5, 2)), OPV_T(sample_uniform(g, 1, S3, 0.5, 2)), OPV_I(1))
SAMPLE_ARGS(BCE, plain, OPV_T(sample_uniform(g, 2, S23, 0.1, 0.9)),
            OPV_T(sample_uniform(g, 2, S23, 0, 1)), OPV_NONE, OPV_I(1))
SAMPLE_ARGS(KL_DIV, plain, X23, OPV_T(sample_uniform(g, 2, S23, 0.1, 1)), OPV_I(2), OPV_B(false))
SAMPLE_ARGS(NORM, plain, X23, OPV_F(3))
SAMPLE_ARGS(NORM_DIM, plain, X23, OPV_F(2), OPV_INTS(L1x, 1), OPV_B(true))
SAMPLE_ARGS(VECTOR_NORM, plain, X23, OPV_F(1.5), OPV_NONE, OPV_B(false), OPV_NONE)
SAMPLE_ARGS(COSINE_SIMILARITY, plain, X23, X23, OPV_I(1), OPV_F(1e-8))
SAMPLE_ARGS(PAIRWISE_DISTANCE, plain, X23, X23, OPV_F(2), OPV_F(1e-6), OPV_B(false))
SAMPLE_ARGS(PIXEL_SHUFFLE, plain, OPV_T(sample_randn(g, 4, (int64_t[]){1, 8, 2, 3})), OPV_I(2))
SAMPLE_ARGS(PIXEL_UNSHUFFLE, plain, OPV_T(sample_randn(g, 4, (int64_t[]){1, 2, 4, 2})), OPV_I(2))
SAMPLE_ARGS(ROUND_DECIMALS, plain, X23, OPV_I(1))
OP_SAMPLE(CONV1D, groups) {
  int64_t xs[3] = {2, 4, 6}, ws[3] = {4, 2, 3};
  s->ints[0][0] = 1;
  s->ints[1][0] = 1;
  s->ints[2][0] = 1;
  s->args[0] = OPV_T(sample_randn(g, 3, xs));
  s->args[1] = OPV_T(sample_randn(g, 3, ws));
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_INTS(s->ints[0], 1);
  s->args[4] = OPV_INTS(s->ints[1], 1);
  s->args[5] = OPV_INTS(s->ints[2], 1);
  s->args[6] = OPV_I(2);
  s->n_args = 7;
}
SAMPLE_ARGS(MAX_POOL1D, plain, T3, OPV_I(2), OPV_I(1), OPV_I(0), OPV_I(1), OPV_B(false))

/* ---- misc_extra.c ---- */
SAMPLE_ARGS(CONJ, plain, X23)
SAMPLE_ARGS(CONJ_PHYSICAL, plain, X23)
SAMPLE_ARGS(RESOLVE_CONJ, plain, X23)
SAMPLE_ARGS(RESOLVE_NEG, plain, X23)
SAMPLE_ARGS(REAL, plain, X23)
SAMPLE_ARGS(ANGLE, plain, X23)
SAMPLE_ARGS(SINC, plain, X23)
SAMPLE_ARGS(DIST, plain, X23, X23, OPV_F(3))
SAMPLE_ARGS(NARROW_COPY, plain, X23, OPV_I(1), OPV_I(1), OPV_I(2))
SAMPLE_ARGS(DIFF, plain, X23, OPV_I(2), OPV_I(1), OPV_T(sample_randn(g, 2, (int64_t[]){2, 1})),
            OPV_NONE)
SAMPLE_ARGS(MVLGAMMA, plain, OPV_T(sample_uniform(g, 2, S23, 2, 4)), OPV_I(3))
