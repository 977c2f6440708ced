/* src/ops/activation.c: activation functions (relu, gelu, silu, leaky_relu,
 * clamp): tiles, formulas, API. */
#include <stdint.h>
#include <string.h>

#include "tile.h"
#include "vmath.h"

/* ---- tiles ------------------------------------------------------------------ */
/* Attributes (op_attrs.s, NAN for None): gelu s[0] = 1 for approximate='tanh';
 * leaky_relu s[0] = negative_slope; clamp s[0] = min, s[1] = max. Reading
 * them inside the loop costs nothing: they are loop invariants the compiler
 * hoists (out is restrict, so stores cannot change *at). */

/* relu keeps NaN (PyTorch's clamp_min(x, 0) propagates it). */
TILE_UNARY(relu_f32, float, float, a < 0.0f ? 0.0f : a)
TILE_UNARY(relu_f64, double, double, a < 0.0 ? 0.0 : a)
TILE_UNARY(relu_i64, int64_t, int64_t, a < 0 ? 0 : a)

/* gelu: exact x * Phi(x) = x/2 (1 + erf(x/sqrt 2)), or the tanh form
 * x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); PyTorch's constants. */
#define GELU_BETA (M_SQRT2 * M_2_SQRTPI * 0.5)
#define GELU_KAPPA 0.044715
TILE_UNARY(gelu_erf_f32, float, float, 0.5f * a * (1.0f + erff(a * (float)M_SQRT1_2)))
TILE_UNARY(gelu_erf_f64, double, double, 0.5 * a * (1.0 + erf(a * M_SQRT1_2)))
TILE_UNARY(gelu_tanh_f32, float, float,
           0.5f * a * (1.0f + op_tanhf((float)GELU_BETA * (a + (float)GELU_KAPPA * a * a * a))))
TILE_UNARY(gelu_tanh_f64, double, double,
           0.5 * a * (1.0 + tanh(GELU_BETA * (a + GELU_KAPPA * a * a * a))))

/* The form is chosen once per tile, not per element. */
static void gelu_f32(void *out, const void *const *in, int64_t n, const op_attrs *at) {
  (at->s[0] == 1.0 ? gelu_tanh_f32 : gelu_erf_f32)(out, in, n, at);
}
static void gelu_f64(void *out, const void *const *in, int64_t n, const op_attrs *at) {
  (at->s[0] == 1.0 ? gelu_tanh_f64 : gelu_erf_f64)(out, in, n, at);
}
TILE_NO_TEXT(gelu_f32, 1, float, float)
TILE_NO_TEXT(gelu_f64, 1, double, double)

/* silu: x / (1 + e^-x), as PyTorch writes it. */
TILE_UNARY(silu_f32, float, float, a * op_sigmoidf(a))
TILE_UNARY(silu_f64, double, double, a / (1.0 + exp(-a)))

/* leaky_relu and clamp's float helpers are in vmath.h. */
TILE_UNARY(leaky_relu_f32, float, float, op_leakyf(a, at->s[0]))
TILE_UNARY(leaky_relu_f64, double, double, op_leaky(a, at->s[0]))

/* clamp of int64: a None bound is the int64 range; float bounds on an
 * int64 tensor are truncated and saturated (PyTorch would promote the
 * result to float32 instead). */
static inline int64_t bound_i64(double v, int64_t none) {
  if (isnan(v)) return none;
  if (v >= 0x1p63) return INT64_MAX;
  if (v <= -0x1p63) return INT64_MIN;
  return (int64_t)v;
}
static inline int64_t clamp_i64(int64_t a, const op_attrs *at) {
  int64_t lo = bound_i64(at->s[0], INT64_MIN), hi = bound_i64(at->s[1], INT64_MAX);
  int64_t t = a < lo ? lo : a;
  return hi < t ? hi : t;
}
TILE_UNARY(clamp_f32_tile, float, float, op_clampf(a, at->s[0], at->s[1]))
TILE_UNARY(clamp_f64_tile, double, double, op_clamp(a, at->s[0], at->s[1]))
TILE_UNARY_C(clamp_i64_tile, int64_t, int64_t, clamp_i64(a, at))

/* Tile texts (tile.h) for the tiles that are one expression of their
 * operands and vmath.h; gelu (two forms chosen per tile: TILE_NO_TEXT) and
 * the int64 clamp (helpers of this file: TILE_UNARY_C) have none, and
 * their groups keep the tile kernels. */
OP_TILES(relu, relu_f32, relu_f64, relu_i64, NOTILE)
OP_TILES(gelu, gelu_f32, gelu_f64, NOTILE, NOTILE)
OP_TILES(silu, silu_f32, silu_f64, NOTILE, NOTILE)
OP_TILES(leaky_relu, leaky_relu_f32, leaky_relu_f64, NOTILE, NOTILE)
OP_TILES(clamp, clamp_f32_tile, clamp_f64_tile, clamp_i64_tile, NOTILE)

/* ---- derivative formulas ------------------------------------------------- */
/* Public API only (they record lazily and under create_graph). Masks are
 * comparisons with a number operand (no gradient flows through them), and
 * masked gradients are where(mask, g, 0) rather than g * mask, so that an
 * inf/NaN gradient does not leak into masked-out elements (as PyTorch). */

#define X (g->args[0].t)

/* t <op> s for a number s: a bool tensor. */
static kiln_tensor *cmp_num(int op, kiln_tensor *t, double s) {
  return op_call1(op, (op_val[]){OPV_T(t), OPV_F(s)}, 2);
}

/* where(mask, a, 0) */
static kiln_tensor *where_or_zero(kiln_tensor *mask, kiln_tensor *a) {
  return op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(mask), OPV_T(a), OPV_F(0.0)}, 3);
}

/* PyTorch's threshold_backward(g, y, 0): y <= 0 ? 0 : g, from the saved
 * output (a NaN output passes the gradient, as there). */
int op_relu_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *dead = cmp_num(KILN_OP_LE, g->outs[0], 0.0);
  return op_grad_put(g, 0, op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(dead), OPV_F(0.0), OPV_T(go)}, 3));
}

/* exact: d = Phi(x) + x phi(x);
 * tanh:  with u = beta (x + kappa x^3), t = tanh u:
 *        d = (1 + t)/2 + x/2 (1 - t^2) beta (1 + 3 kappa x^2). */
int op_gelu_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  const op_val *ap = &g->args[1];
  bool tanh_form = ap->tag == OP_VAL_STR && strcmp(ap->s, "tanh") == 0;
  kiln_tensor *x2 = kiln_mul(X, X), *d;
  if (tanh_form) {
    kiln_tensor *u = kiln_mul_scalar(kiln_add(X, kiln_mul_scalar(kiln_mul(x2, X), GELU_KAPPA)),
                                     GELU_BETA);
    kiln_tensor *t = kiln_tanh(u);
    kiln_tensor *left = kiln_mul_scalar(kiln_add_scalar(t, 1.0), 0.5);
    kiln_tensor *du = kiln_mul_scalar(kiln_add_scalar(kiln_mul_scalar(x2, 3.0 * GELU_KAPPA), 1.0),
                                      GELU_BETA);
    kiln_tensor *dt = kiln_add_scalar(kiln_neg(kiln_mul(t, t)), 1.0);
    kiln_tensor *right = kiln_mul(kiln_mul_scalar(X, 0.5), kiln_mul(dt, du));
    d = kiln_add(left, right);
  } else {
    kiln_tensor *cdf =
        kiln_mul_scalar(kiln_add_scalar(kiln_erf(kiln_mul_scalar(X, M_SQRT1_2)), 1.0), 0.5);
    kiln_tensor *pdf = kiln_mul_scalar(kiln_exp(kiln_mul_scalar(x2, -0.5)),
                                       M_2_SQRTPI * M_SQRT1_2 * 0.5);
    d = kiln_add(cdf, kiln_mul(X, pdf));
  }
  return op_grad_put(g, 0, kiln_mul(go, d));
}

/* d silu = s (1 + x (1 - s)), s = sigmoid(x) */
int op_silu_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *s = kiln_sigmoid(X);
  kiln_tensor *inner = kiln_add_scalar(kiln_mul(X, kiln_add_scalar(kiln_neg(s), 1.0)), 1.0);
  return op_grad_put(g, 0, kiln_mul(go, kiln_mul(s, inner)));
}

/* x > 0 ? g : slope * g */
int op_leaky_relu_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  double slope = op_val_num(&g->args[1]);
  return op_grad_put(g, 0, kiln_where(cmp_num(KILN_OP_GT, X, 0.0), go, kiln_mul_scalar(go, slope)));
}

/* PyTorch's clamp_backward: g where min <= x <= max (the subgradient 1 on
 * the bounds), else 0; a None bound imposes no condition. */
int op_clamp_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  double lo = op_val_num(&g->args[1]), hi = op_val_num(&g->args[2]);
  kiln_tensor *mask = NULL;
  if (isnan(lo) && isnan(hi)) return op_grad_put(g, 0, go);
  if (!isnan(lo)) mask = cmp_num(KILN_OP_GE, X, lo);
  if (!isnan(hi)) {
    kiln_tensor *m = cmp_num(KILN_OP_LE, X, hi);
    mask = mask ? kiln_mul(mask, m) : m; /* Bool * Bool is logical and */
  }
  return op_grad_put(g, 0, where_or_zero(mask, go));
}

#undef X

/* ---- public API ------------------------------------------------------------- */
/* Each returns a new reference (registered with the current scope), or NULL
 * with kiln_last_error() set (e.g. gelu of an unsupported dtype). */

kiln_tensor *kiln_relu(kiln_tensor *t) {
  return op_call1(KILN_OP_RELU, (op_val[]){OPV_T(t)}, 1);
}
kiln_tensor *kiln_gelu(kiln_tensor *t, bool approximate_tanh) {
  return op_call1(KILN_OP_GELU, (op_val[]){OPV_T(t), OPV_S(approximate_tanh ? "tanh" : "none")}, 2);
}
kiln_tensor *kiln_silu(kiln_tensor *t) {
  return op_call1(KILN_OP_SILU, (op_val[]){OPV_T(t)}, 1);
}
kiln_tensor *kiln_leaky_relu(kiln_tensor *t, double negative_slope) {
  return op_call1(KILN_OP_LEAKY_RELU, (op_val[]){OPV_T(t), OPV_F(negative_slope)}, 2);
}
kiln_tensor *kiln_clamp(kiln_tensor *t, double min, double max) {
  return op_call1(KILN_OP_CLAMP, (op_val[]){OPV_T(t), isnan(min) ? OPV_NONE : OPV_F(min),
                                            isnan(max) ? OPV_NONE : OPV_F(max)},
                  3);
}
