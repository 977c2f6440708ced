/* src/ops/unary_math.c: more unary elementwise math (trigonometric and
 * hyperbolic inverses, exp/log variants, erfc/erfinv, lgamma/digamma,
 * rounding, float classification, logical/bitwise not, nan_to_num):
 * tiles and derivative formulas. Float-only functions get integer inputs
 * promoted to float32 (OPF_FLOAT_ONLY), as PyTorch does. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "special_fn.h"
#include "tile.h"

/* Float tiles of one function: the f32 tile calls the float libm variant,
 * the f64 tile the double one; both keep their text for native fusion. */
#define FLOAT_TILES(name, ef, ed)                                                \
  TILE_UNARY(name##_f32, float, float, ef)                                       \
  TILE_UNARY(name##_f64, double, double, ed)                                     \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, NULL, NULL}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {           \
      &name##_f32_src, &name##_f64_src, NULL, NULL};

/* The same with helpers of this file (no text: fused groups keep tiles). */
#define FLOAT_TILES_NOSRC(name, ef, ed)                                          \
  TILE_UNARY(name##_f32, float, float, ef)                                       \
  TILE_UNARY(name##_f64, double, double, ed)                                     \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, NULL, NULL}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

FLOAT_TILES(tan, tanf(a), tan(a))
FLOAT_TILES(asin, asinf(a), asin(a))
FLOAT_TILES(acos, acosf(a), acos(a))
FLOAT_TILES(atan, atanf(a), atan(a))
FLOAT_TILES(sinh, sinhf(a), sinh(a))
FLOAT_TILES(cosh, coshf(a), cosh(a))
FLOAT_TILES(asinh, asinhf(a), asinh(a))
FLOAT_TILES(acosh, acoshf(a), acosh(a))
FLOAT_TILES(atanh, atanhf(a), atanh(a))
FLOAT_TILES(expm1, expm1f(a), expm1(a))
FLOAT_TILES(log1p, log1pf(a), log1p(a))
FLOAT_TILES(log2, log2f(a), log2(a))
FLOAT_TILES(log10, log10f(a), log10(a))
FLOAT_TILES(exp2, exp2f(a), exp2(a))
FLOAT_TILES(erfc, erfcf(a), erfc(a))

/* erfinv: Giles' single-precision approximation, then two Newton steps in
 * double (erf' = 2/sqrt(pi) e^-y^2), which make it accurate to double. */
static double erfinv_d(double x) {
  if (isnan(x) || x < -1 || x > 1) return NAN;
  if (x == 1) return INFINITY;
  if (x == -1) return -INFINITY;
  double w = -log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * x;
  for (int i = 0; i < 2; i++) y -= (erf(y) - x) / (M_2_SQRTPI * exp(-y * y));
  return y;
}
static double lgamma_d(double x) {
  int s;
  return lgamma_r(x, &s);
}
/* digamma: PyTorch's conventions (0 -> -inf with the sign of zero... it
 * returns -inf for +-0 since 1.8? it gives copysign(inf, -x)); negative
 * integers give NaN; reflection for x < 0; recurrence to x >= 10, then the
 * asymptotic series. */
static double digamma_d(double x) {
  if (x == 0) return copysign(INFINITY, -x);
  if (x < 0) {
    if (x == floor(x)) return NAN;
    return digamma_d(1 - x) - M_PI / tan(M_PI * x);
  }
  double r = 0;
  while (x < 10) {
    r -= 1 / x;
    x += 1;
  }
  double f = 1 / (x * x);
  double t = f * (-1 / 12.0 +
                  f * (1 / 120.0 +
                       f * (-1 / 252.0 + f * (1 / 240.0 + f * (-1 / 132.0 + f * (691 / 32760.0 +
                                                                                   f * (-1 / 12.0)))))));
  return r + log(x) - 0.5 / x + t;
}
FLOAT_TILES_NOSRC(erfinv, (float)erfinv_d(a), erfinv_d(a))
FLOAT_TILES_NOSRC(lgamma, (float)lgamma_d(a), lgamma_d(a))
FLOAT_TILES_NOSRC(digamma, (float)digamma_d(a), digamma_d(a))

/* Rounding keeps the dtype; integers are already whole. round is half to
 * even, as PyTorch's (nearbyint in the default rounding mode). */
#define ROUND_TILES(name, ef, ed)                                                \
  TILE_UNARY(name##_f32, float, float, ef)                                       \
  TILE_UNARY(name##_f64, double, double, ed)                                     \
  TILE_UNARY(name##_i64, int64_t, int64_t, a)                                    \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, name##_i64, \
                                                          NULL};                 \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {           \
      &name##_f32_src, &name##_f64_src, &name##_i64_src, NULL};
ROUND_TILES(floor, floorf(a), floor(a))
ROUND_TILES(ceil, ceilf(a), ceil(a))
ROUND_TILES(trunc, truncf(a), trunc(a))
ROUND_TILES(round, nearbyintf(a), nearbyint(a))
FLOAT_TILES(frac, a - truncf(a), a - trunc(a))

/* Classification: bool results; integers and bools are always finite. */
#define CLASS_TILES(name, ef, ed, ei, eb)                                            \
  TILE_UNARY(name##_f32, float, bool, ef)                                        \
  TILE_UNARY(name##_f64, double, bool, ed)                                       \
  TILE_UNARY(name##_i64, int64_t, bool, ei)                                      \
  TILE_UNARY(name##_b, bool, bool, eb)                                           \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, name##_i64, \
                                                          name##_b};             \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {           \
      &name##_f32_src, &name##_f64_src, &name##_i64_src, &name##_b_src};
CLASS_TILES(isnan, a != a, a != a, a * 0 != 0, (int)a < 0)
CLASS_TILES(isinf, isinf(a), isinf(a), a * 0 != 0, (int)a < 0)
CLASS_TILES(isfinite, isfinite(a), isfinite(a), a * 0 == 0, (int)a >= 0)
CLASS_TILES(isposinf, a == INFINITY, a == INFINITY, a * 0 != 0, (int)a < 0)
CLASS_TILES(isneginf, a == -INFINITY, a == -INFINITY, a * 0 != 0, (int)a < 0)
CLASS_TILES(signbit, signbit(a) != 0, signbit(a) != 0, a < 0, (int)a < 0)
CLASS_TILES(logical_not, a == 0, a == 0, a == 0, !a)

/* bitwise_not: ~a for integers, !a for bool; no float kernel. */
TILE_UNARY(bitwise_not_i64, int64_t, int64_t, ~a)
TILE_UNARY(bitwise_not_b, bool, bool, !a)
const op_tile_fn op_bitwise_not_tiles[KILN_DTYPE_COUNT] = {NULL, NULL, bitwise_not_i64,
                                                           bitwise_not_b};
const op_tile_src *const op_bitwise_not_tile_srcs[KILN_DTYPE_COUNT] = {
    NULL, NULL, &bitwise_not_i64_src, &bitwise_not_b_src};

/* nan_to_num(x, nan=0, posinf=None, neginf=None): a None bound is the
 * dtype's largest finite value (attributes are NAN for None). */
static inline float n2n_f32(float a, const op_attrs *at) {
  if (a != a) return isnan(at->s[0]) ? 0.0f : (float)at->s[0];
  if (a == INFINITY) return isnan(at->s[1]) ? FLT_MAX : (float)at->s[1];
  if (a == -INFINITY) return isnan(at->s[2]) ? -FLT_MAX : (float)at->s[2];
  return a;
}
static inline double n2n_f64(double a, const op_attrs *at) {
  if (a != a) return isnan(at->s[0]) ? 0.0 : at->s[0];
  if (a == INFINITY) return isnan(at->s[1]) ? DBL_MAX : at->s[1];
  if (a == -INFINITY) return isnan(at->s[2]) ? -DBL_MAX : at->s[2];
  return a;
}
TILE_UNARY(n2n_f32t, float, float, n2n_f32(a, at))
TILE_UNARY(n2n_f64t, double, double, n2n_f64(a, at))
TILE_UNARY(n2n_i64t, int64_t, int64_t, a)
TILE_UNARY(n2n_bt, bool, bool, a)
const op_tile_fn op_nan_to_num_tiles[KILN_DTYPE_COUNT] = {n2n_f32t, n2n_f64t, n2n_i64t, n2n_bt};
const op_tile_src *const op_nan_to_num_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

/* ---- derivative formulas ------------------------------------------------- */
/* Public API only (lazy recording, double backward). X is the input, Y
 * the output (OPF_SAVE_OUT ops). */
#define X (g->args[0].t)
#define Y (g->outs[0])
#define PUT(expr) return op_grad_put(g, 0, (expr))

static kiln_tensor *one_minus_sq(kiln_tensor *x) {
  return kiln_add_scalar(kiln_neg(kiln_mul(x, x)), 1.0);
}

int op_tan_grad(op_grad_ctx *g) { /* g (1 + y^2) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_add_scalar(kiln_mul(Y, Y), 1.0)));
}
int op_asin_grad(op_grad_ctx *g) { /* g / sqrt(1 - x^2) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_rsqrt(one_minus_sq(X))));
}
int op_acos_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_neg(kiln_mul(go, kiln_rsqrt(one_minus_sq(X)))));
}
int op_atan_grad(op_grad_ctx *g) { /* g / (1 + x^2) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_div(go, kiln_add_scalar(kiln_mul(X, X), 1.0)));
}
int op_sinh_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, op_call1(KILN_OP_COSH, (op_val[]){OPV_T(X)}, 1)));
}
int op_cosh_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, op_call1(KILN_OP_SINH, (op_val[]){OPV_T(X)}, 1)));
}
int op_asinh_grad(op_grad_ctx *g) { /* g / sqrt(x^2 + 1) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_rsqrt(kiln_add_scalar(kiln_mul(X, X), 1.0))));
}
int op_acosh_grad(op_grad_ctx *g) { /* g / sqrt(x^2 - 1) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_rsqrt(kiln_add_scalar(kiln_mul(X, X), -1.0))));
}
int op_atanh_grad(op_grad_ctx *g) { /* g / (1 - x^2) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_div(go, one_minus_sq(X)));
}
int op_expm1_grad(op_grad_ctx *g) { /* g (y + 1) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_add_scalar(Y, 1.0)));
}
int op_log1p_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_div(go, kiln_add_scalar(X, 1.0)));
}
int op_log2_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_div(go, kiln_mul_scalar(X, M_LN2)));
}
int op_log10_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_div(go, kiln_mul_scalar(X, M_LN10)));
}
int op_exp2_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_mul_scalar(Y, M_LN2)));
}
int op_erfc_grad(op_grad_ctx *g) { /* -g 2/sqrt(pi) e^-x^2 */
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *e = kiln_exp(kiln_neg(kiln_mul(X, X)));
  PUT(kiln_mul(go, kiln_mul_scalar(e, -M_2_SQRTPI)));
}
int op_erfinv_grad(op_grad_ctx *g) { /* g sqrt(pi)/2 e^(y^2) */
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *e = kiln_exp(kiln_mul(Y, Y));
  PUT(kiln_mul(go, kiln_mul_scalar(e, 1.0 / M_2_SQRTPI)));
}
int op_lgamma_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, op_call1(KILN_OP_DIGAMMA, (op_val[]){OPV_T(X)}, 1)));
}
int op_digamma_grad(op_grad_ctx *g) { /* g polygamma(1, x) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, op_call1(KILN_OP_POLYGAMMA, (op_val[]){OPV_I(1), OPV_T(X)}, 2)));
}
static int zero_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul_scalar(go, 0.0));
}
int op_floor_grad(op_grad_ctx *g) { return zero_grad(g); }
int op_ceil_grad(op_grad_ctx *g) { return zero_grad(g); }
int op_trunc_grad(op_grad_ctx *g) { return zero_grad(g); }
int op_round_grad(op_grad_ctx *g) { return zero_grad(g); }
int op_frac_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul_scalar(go, 1.0));
}
/* nan_to_num passes the gradient where x was finite, 0 elsewhere */
int op_nan_to_num_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *fin = op_call1(KILN_OP_ISFINITE, (op_val[]){OPV_T(X)}, 1);
  PUT(fin ? kiln_mul(go, kiln_to_dtype(fin, go->dtype)) : NULL);
}
#undef X
#undef Y
#undef PUT

/* ---- polygamma(n, x) -------------------------------------------------------- */
/* n = 0 is digamma; n >= 1 is (-1)^(n+1) n! zeta(n+1, x) (Hurwitz zeta by
 * Euler-Maclaurin summation, as Cephes: op_sp_zeta in special_fn.c). Not elementwise in the table's
 * sense (its operand is the second argument): an op of its own. */
static double polygamma_d(int64_t n, double x) {
  if (n == 0) return digamma_d(x);
  double f = tgamma((double)n + 1);
  return ((n % 2) ? 1.0 : -1.0) * f * op_sp_zeta((double)n + 1, x);
}

int op_polygamma_infer(const op_val *a, int n, op_meta *o, int m) {
  kiln_tensor *t;
  int64_t k;
  int rc;
  if ((rc = op_arg_int("aten::polygamma", &a[0], "n", &k)) < 0 ||
      (rc = op_arg_tensor("aten::polygamma", &a[1], "self", &t)) < 0)
    return rc;
  if (k < 0)
    return core_error(KILN_ERR_INVALID, "aten::polygamma: n must be non-negative, got %lld",
                      (long long)k);
  op_meta_of(t, o);
  if (!core_dtype_is_floating(t->dtype)) o->dtype = KILN_DTYPE_F32;
  return 1;
}

int op_polygamma_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *t = a[1].t, *out = o[0];
  int64_t k = a[0].i, numel = core_numel(out->ndim, out->shape);
  for (int64_t i = 0; i < numel; i++) {
    double v = polygamma_d(k, core_get_flat(t, i));
    if (out->dtype == KILN_DTYPE_F32) ((float *)core_data(out))[i] = (float)v;
    else ((double *)core_data(out))[i] = v;
  }
  return 0;
}

int op_polygamma_grad(op_grad_ctx *g) { /* g polygamma(n + 1, x) */
  kiln_tensor *go = g->grads[0];
  if (!go || !g->needs[0]) return 0;
  return op_grad_put(g, 0, kiln_mul(go, op_call1(KILN_OP_POLYGAMMA,
                                                  (op_val[]){OPV_I(g->args[0].i + 1),
                                                             g->args[1]},
                                                  2)));
}

/* ---- decompositions ------------------------------------------------------- */
/* sgn is sign for real tensors */
int op_sgn_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_SIGN, a, 1), outs);
}
/* positive(x) is x itself (a view of it) */
int op_positive_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *t;
  int rc = op_arg_tensor("aten::positive", &a[0], "self", &t);
  if (rc < 0) return rc;
  if (t->dtype == KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID, "aten::positive: not supported for bool tensors");
  return op_out1(kiln_expand(t, t->ndim, t->shape), outs);
}
int op_square_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *t;
  int rc = op_arg_tensor("aten::square", &a[0], "self", &t);
  if (rc < 0) return rc;
  return op_out1(op_call1(KILN_OP_POW, (op_val[]){a[0], OPV_I(2)}, 2), outs);
}
int op_deg2rad_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *t;
  int rc = op_arg_tensor("aten::deg2rad", &a[0], "self", &t);
  if (rc < 0) return rc;
  return op_out1(kiln_mul_scalar(t, M_PI / 180.0), outs);
}
int op_rad2deg_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *t;
  int rc = op_arg_tensor("aten::rad2deg", &a[0], "self", &t);
  if (rc < 0) return rc;
  return op_out1(kiln_mul_scalar(t, 180.0 / M_PI), outs);
}
/* logit(x, eps) = log(z / (1 - z)), z = clamp(x, eps, 1 - eps) when eps is given */
int op_logit_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *t;
  int rc = op_arg_tensor("aten::logit", &a[0], "self", &t);
  if (rc < 0) return rc;
  kiln_tensor *z = core_dtype_is_floating(t->dtype) ? t : kiln_to_dtype(t, KILN_DTYPE_F32);
  if (z && a[1].tag != OP_VAL_NONE) {
    double eps = op_val_num(&a[1]);
    z = kiln_clamp(z, eps, 1.0 - eps);
  }
  if (!z) return KILN_ERR_INVALID;
  return op_out1(kiln_log(kiln_div(z, kiln_add_scalar(kiln_neg(z), 1.0))), outs);
}
