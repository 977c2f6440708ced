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
