/* src/ops/unary.c: unary elementwise math ops (neg, abs, sign, exp, log,
 * sqrt, rsqrt, sin, cos, tanh, sigmoid, erf): tiles, formulas, API. */
#include "tile.h"
#include "vmath.h"

/* ---- tiles ------------------------------------------------------------------ */
/* Each tile is one plain loop over restrict pointers (tile.h), so the cheap
 * ones (neg, abs, sign, sqrt) vectorize; the transcendental ones call libm
 * per element (glibc's vector variants need -ffast-math, whose accuracy we
 * do not want). Integer neg/abs go through uint64_t so that INT64_MIN wraps
 * as in PyTorch instead of being undefined behaviour. Where PyTorch has no
 * kernel for a dtype (neg/abs of Bool) the entry is NULL: the driver reports
 * "not implemented for dtype". FLOAT_ONLY ops get integer inputs already
 * promoted to float32, so they have only F32/F64 tiles. */


TILE_UNARY(neg_f32, float, float, -a)
TILE_UNARY(neg_f64, double, double, -a)
TILE_UNARY_C(neg_i64, int64_t, int64_t, core_wrap_neg(a))
TILE_UNARY(abs_f32, float, float, fabsf(a))
TILE_UNARY(abs_f64, double, double, fabs(a))
TILE_UNARY_C(abs_i64, int64_t, int64_t, core_wrap_abs(a))
/* sign(NaN) is 0, as PyTorch's (0 < a) - (a < 0). */
TILE_UNARY(sign_f32, float, float, (float)((0.0f < a) - (a < 0.0f)))
TILE_UNARY(sign_f64, double, double, (double)((0.0 < a) - (a < 0.0)))
TILE_UNARY(sign_i64, int64_t, int64_t, (int64_t)((0 < a) - (a < 0)))
TILE_UNARY(sign_b, bool, bool, a)
TILE_UNARY(exp_f32, float, float, op_expf(a))
TILE_UNARY(exp_f64, double, double, exp(a))
TILE_UNARY(log_f32, float, float, logf(a))
TILE_UNARY(log_f64, double, double, log(a))
TILE_UNARY(sqrt_f32, float, float, sqrtf(a))
TILE_UNARY(sqrt_f64, double, double, sqrt(a))
TILE_UNARY(rsqrt_f32, float, float, 1.0f / sqrtf(a))
TILE_UNARY(rsqrt_f64, double, double, 1.0 / sqrt(a))
TILE_UNARY(sin_f32, float, float, sinf(a))
TILE_UNARY(sin_f64, double, double, sin(a))
TILE_UNARY(cos_f32, float, float, cosf(a))
TILE_UNARY(cos_f64, double, double, cos(a))
TILE_UNARY(tanh_f32, float, float, op_tanhf(a))
TILE_UNARY(tanh_f64, double, double, tanh(a))
/* 1/(1+e^-x): e^-x overflows to inf for x << 0, giving exactly 0. */
TILE_UNARY(sigmoid_f32, float, float, op_sigmoidf(a))
TILE_UNARY(sigmoid_f64, double, double, 1.0 / (1.0 + exp(-a)))
TILE_UNARY(erf_f32, float, float, erff(a))
TILE_UNARY(erf_f64, double, double, erf(a))

OP_TILES(neg, neg_f32, neg_f64, neg_i64, NOTILE)
OP_TILES(abs, abs_f32, abs_f64, abs_i64, NOTILE)
OP_TILES(sign, sign_f32, sign_f64, sign_i64, sign_b)
OP_TILES(exp, exp_f32, exp_f64, NOTILE, NOTILE)
OP_TILES(log, log_f32, log_f64, NOTILE, NOTILE)
OP_TILES(sqrt, sqrt_f32, sqrt_f64, NOTILE, NOTILE)
OP_TILES(rsqrt, rsqrt_f32, rsqrt_f64, NOTILE, NOTILE)
OP_TILES(sin, sin_f32, sin_f64, NOTILE, NOTILE)
OP_TILES(cos, cos_f32, cos_f64, NOTILE, NOTILE)
OP_TILES(tanh, tanh_f32, tanh_f64, NOTILE, NOTILE)
OP_TILES(sigmoid, sigmoid_f32, sigmoid_f64, NOTILE, NOTILE)
OP_TILES(erf, erf_f32, erf_f64, NOTILE, NOTILE)

/* ---- derivative formulas ------------------------------------------------- */
/* Written with the public API only, so that they record lazily and under
 * create_graph (double backward). Formulas that read the saved output y
 * (OPF_SAVE_OUT) differentiate through it because the engine re-attaches y
 * to this node under create_graph (Note [Saved outputs under create_graph]).
 * Each unary op has one slot (0); a NULL result from any step means a
 * failed op, whose message is already set. */

#define X (g->args[0].t)
#define Y (g->outs[0])

/* d(-x) = -g */
int op_neg_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_neg(go));
}

/* d|x| = g * sign(x) (0 at x == 0, as PyTorch's sgn) */
int op_abs_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_mul(go, kiln_sign(X)));
}

/* sign is piecewise constant: zeros (of the gradient's shape, which is the
 * input's; the input itself is not saved). */
int op_sign_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, op_call1(KILN_OP_ZEROS_LIKE,
                          (op_val[]){OPV_T(go), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE,
                                     OPV_NONE},
                          6));
}

/* d e^x = g * y */
int op_exp_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_mul(go, Y));
}

/* d log x = g / x */
int op_log_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_div(go, X));
}

/* d sqrt x = g / (2 y) */
int op_sqrt_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_div(go, kiln_mul_scalar(Y, 2.0)));
}

/* d x^-1/2 = -1/2 x^-3/2 = -0.5 * g * y^3 */
int op_rsqrt_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *y3 = kiln_mul(Y, kiln_mul(Y, Y));
  return op_grad_put(g, 0, kiln_mul(go, kiln_mul_scalar(y3, -0.5)));
}

/* d sin x = g * cos x */
int op_sin_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_mul(go, kiln_cos(X)));
}

/* d cos x = -g * sin x */
int op_cos_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  return op_grad_put(g, 0, kiln_neg(kiln_mul(go, kiln_sin(X))));
}

/* d tanh x = g * (1 - y^2) */
int op_tanh_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *d = kiln_add_scalar(kiln_neg(kiln_mul(Y, Y)), 1.0);
  return op_grad_put(g, 0, kiln_mul(go, d));
}

/* d sigmoid x = g * y * (1 - y) */
int op_sigmoid_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *d = kiln_mul(Y, kiln_add_scalar(kiln_neg(Y), 1.0));
  return op_grad_put(g, 0, kiln_mul(go, d));
}

/* d erf x = g * 2/sqrt(pi) * e^(-x^2) */
int op_erf_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *e = kiln_exp(kiln_neg(kiln_mul(X, X)));
  return op_grad_put(g, 0, kiln_mul(go, kiln_mul_scalar(e, M_2_SQRTPI)));
}

#undef X
#undef Y

/* ---- public API ------------------------------------------------------------- */
/* Each returns a new reference (registered with the current scope), or NULL
 * with kiln_last_error() set (e.g. neg/abs of a Bool tensor). */

#define API1(name, ENUM)                                                        \
  kiln_tensor *kiln_##name(kiln_tensor *t) {                                    \
    return op_call1(KILN_OP_##ENUM, (op_val[]){OPV_T(t)}, 1);                   \
  }
API1(neg, NEG)
API1(abs, ABS)
API1(sign, SIGN)
API1(exp, EXP)
API1(log, LOG)
API1(sqrt, SQRT)
API1(rsqrt, RSQRT)
API1(sin, SIN)
API1(cos, COS)
API1(tanh, TANH)
API1(sigmoid, SIGMOID)
API1(erf, ERF)
