/* src/ops/special.c: the elementwise special functions of torch.special
 * and their aten aliases (i0, i0e, i1, i1e, ndtr, ndtri, log_ndtr, erfcx,
 * entr, xlog1py, zeta, Bessel J/Y/I/K, spherical j0, Airy Ai, igamma,
 * igammac) and gcd/lcm: tiles and derivative formulas. The functions
 * themselves are in src/ops/special_fn.c, computed in double and rounded
 * once for float32. Ops PyTorch 1.13 has no derivative for (Bessel J/Y/K,
 * Airy, zeta, igamma) are not OPF_DIFF, as its OpInfo says. */
#include <math.h>
#include <stdint.h>

#include "special_fn.h"
#include "tile.h"

#define SP1(name, ed)                                                            \
  TILE_UNARY_C(name##_f32, float, float, (float)(ed))                            \
  TILE_UNARY_C(name##_f64, double, double, ed)                                   \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, NULL, NULL}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};
#define SP2(name, ed)                                                            \
  TILE_BINARY_C(name##_f32, float, float, (float)(ed))                           \
  TILE_BINARY_C(name##_f64, double, double, ed)                                  \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, NULL, NULL}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

static inline double ndtr_d(double x) { return 0.5 * erfc(-x / M_SQRT2); }
static inline double entr_d(double x) {
  if (isnan(x)) return x;
  if (x > 0) return -x * log(x);
  return x == 0 ? 0.0 : -INFINITY;
}
static inline double xlog1py_d(double x, double y) {
  if (isnan(y)) return NAN;
  if (x == 0) return 0;
  /* log1p below -1 is NaN: one canonical NaN, the same bits at every CPU level */
  return y < -1 ? NAN : x * log1p(y);
}
/* Y_n: -inf at 0, NaN below (glibc agrees; explicit for every libm) */
static inline double y0_d(double x) { return x == 0 ? -INFINITY : x < 0 ? NAN : y0(x); }
static inline double y1_d(double x) { return x == 0 ? -INFINITY : x < 0 ? NAN : y1(x); }
static inline double sph_j0_d(double x) {
  if (isinf(x)) return 0;
  if (fabs(x) < 0.5) {
    double x2 = x * x;
    return 1 + x2 * (-1 / 6.0 + x2 * (1 / 120.0 + x2 * (-1 / 5040.0 + x2 * (1 / 362880.0 +
                                                                          x2 * (-1 / 39916800.0)))));
  }
  return sin(x) / x;
}
static inline double i1_d(double x) { return x == 0 ? x : op_sp_i(1, x); }
static inline double i1e_d(double x) { return x == 0 ? x : op_sp_ie(1, x); }

SP1(i0, op_sp_i(0, a))
SP1(special_i0e, op_sp_ie(0, a))
SP1(special_i1, i1_d(a))
SP1(special_i1e, i1e_d(a))
SP1(special_ndtr, ndtr_d(a))
SP1(special_ndtri, op_sp_ndtri(a))
SP1(special_log_ndtr, op_sp_log_ndtr(a))
SP1(special_erfcx, op_sp_erfcx(a))
SP1(special_entr, entr_d(a))
SP1(special_bessel_j0, j0(a))
SP1(special_bessel_j1, j1(a))
SP1(special_bessel_y0, y0_d(a))
SP1(special_bessel_y1, y1_d(a))
SP1(special_modified_bessel_i0, op_sp_i(0, a))
SP1(special_modified_bessel_i1, i1_d(a))
SP1(special_modified_bessel_k0, op_sp_k(0, a))
SP1(special_modified_bessel_k1, op_sp_k(1, a))
SP1(special_scaled_modified_bessel_k0, op_sp_ke(0, a))
SP1(special_scaled_modified_bessel_k1, op_sp_ke(1, a))
SP1(special_spherical_bessel_j0, sph_j0_d(a))
SP1(special_airy_ai, op_sp_airy_ai(a))
SP2(special_xlog1py, xlog1py_d(a, b))
SP2(special_zeta, op_sp_zeta(a, b))
SP2(igamma, op_sp_igamma(a, b))
SP2(igammac, op_sp_igammac(a, b))

/* gcd/lcm: integers only (PyTorch's calc_gcd: non-negative results) */
static inline int64_t gcd_i(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? -(uint64_t)a : (uint64_t)a, y = b < 0 ? -(uint64_t)b : (uint64_t)b;
  while (y) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return (int64_t)x;
}
static inline int64_t lcm_i(int64_t a, int64_t b) {
  int64_t g = gcd_i(a, b);
  if (g == 0) return 0;
  int64_t l = (int64_t)((uint64_t)(a / g) * (uint64_t)b);
  return l < 0 ? (int64_t)(-(uint64_t)l) : l;
}
TILE_BINARY_C(gcd_i64, int64_t, int64_t, gcd_i(a, b))
TILE_BINARY_C(lcm_i64, int64_t, int64_t, lcm_i(a, b))
const op_tile_fn op_gcd_tiles[KILN_DTYPE_COUNT] = {NULL, NULL, gcd_i64, NULL};
const op_tile_src *const op_gcd_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};
const op_tile_fn op_lcm_tiles[KILN_DTYPE_COUNT] = {NULL, NULL, lcm_i64, NULL};
const op_tile_src *const op_lcm_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

/* ---- derivative formulas (PyTorch's derivatives.yaml) --------------------- */
#define X (g->args[0].t)
#define Y (g->outs[0])
#define PUT(expr) return op_grad_put(g, 0, (expr))
#define CALL1(ENUM, t) op_call1(KILN_OP_##ENUM, (op_val[]){OPV_T(t)}, 1)

int op_i0_grad(op_grad_ctx *g) { /* g i1(x) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, CALL1(SPECIAL_I1, X)));
}
int op_special_i0e_grad(op_grad_ctx *g) { /* g (i1e(x) - sgn(x) i0e(x)) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_sub(CALL1(SPECIAL_I1E, X), kiln_mul(kiln_sign(X), Y))));
}
/* i1 / i1e: x = 0 has the limit 0.5 (PyTorch's i1_backward: where on
 * |x| > eps with a safe x, so no NaN leaks into the other branch) */
static int i1_like_grad(op_grad_ctx *g, bool scaled) {
  OP_GRAD_UNARY_GUARD();
  double eps = X->dtype == KILN_DTYPE_F32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
  kiln_tensor *big = kiln_gt(kiln_abs(X), kiln_scalar(eps, X->dtype));
  kiln_tensor *sx = kiln_where(big, X, kiln_scalar(eps, X->dtype));
  kiln_tensor *r = kiln_div(Y, sx), *d;
  if (scaled) d = kiln_sub(CALL1(SPECIAL_I0E, sx), kiln_add(kiln_mul(Y, kiln_sign(sx)), r));
  else d = kiln_sub(CALL1(I0, sx), r);
  PUT(kiln_mul(go, kiln_where(big, d, kiln_scalar(0.5, X->dtype))));
}
int op_special_i1_grad(op_grad_ctx *g) { return i1_like_grad(g, false); }
int op_special_i1e_grad(op_grad_ctx *g) { return i1_like_grad(g, true); }
static kiln_tensor *gauss(kiln_tensor *x) { /* e^(-x^2/2) / sqrt(2 pi) */
  return kiln_mul_scalar(kiln_exp(kiln_mul_scalar(kiln_mul(x, x), -0.5)), 1 / sqrt(2 * M_PI));
}
int op_special_ndtr_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, gauss(X)));
}
int op_special_ndtri_grad(op_grad_ctx *g) { /* g sqrt(2 pi) e^(y^2/2) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_mul_scalar(kiln_exp(kiln_mul_scalar(kiln_mul(Y, Y), 0.5)),
                                   sqrt(2 * M_PI))));
}
int op_special_log_ndtr_grad(op_grad_ctx *g) { /* g e^(-(y + x^2/2)) / sqrt(2 pi) */
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *e = kiln_exp(kiln_neg(kiln_add(Y, kiln_mul_scalar(kiln_mul(X, X), 0.5))));
  PUT(kiln_mul(go, kiln_mul_scalar(e, 1 / sqrt(2 * M_PI))));
}
int op_special_erfcx_grad(op_grad_ctx *g) { /* g (2 x y - 2 / sqrt(pi)) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_mul(go, kiln_add_scalar(kiln_mul_scalar(kiln_mul(X, Y), 2.0), -M_2_SQRTPI)));
}
int op_special_entr_grad(op_grad_ctx *g) { /* -g (1 + log x) */
  OP_GRAD_UNARY_GUARD();
  PUT(kiln_neg(kiln_mul(go, kiln_add_scalar(kiln_log(X), 1.0))));
}
#undef X
#undef Y
#undef PUT

/* xlog1py(x, y): dx = g xlog1py(x != 0, y), dy = g x / (y + 1); either
 * operand may be a number (no slot); results are summed to its shape */
static int slot_of(const op_val *args, int arg) {
  if (args[arg].tag != OP_VAL_TENSOR) return -1;
  return arg == 0 || args[0].tag != OP_VAL_TENSOR ? 0 : 1;
}
static kiln_tensor *operand(op_grad_ctx *g, int arg) {
  const op_val *v = &g->args[arg];
  if (v->tag == OP_VAL_TENSOR) return v->t;
  return kiln_scalar(op_val_num(v), g->grads[0]->dtype);
}
static int put2(op_grad_ctx *g, int arg, kiln_tensor *r) {
  if (!r) return KILN_ERR_INVALID;
  const kiln_tensor *t = g->args[arg].t;
  return op_grad_put(g, slot_of(g->args, arg), op_sum_to(r, t->ndim, t->shape));
}
int op_special_xlog1py_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  int s0 = slot_of(g->args, 0), s1 = slot_of(g->args, 1), rc;
  if (!go) return 0;
  kiln_tensor *x = operand(g, 0), *y = operand(g, 1);
  if (s0 >= 0 && g->needs[s0]) {
    kiln_tensor *nz = kiln_to_dtype(kiln_ne(x, kiln_scalar(0, x->dtype)), go->dtype);
    kiln_tensor *d = op_call1(KILN_OP_SPECIAL_XLOG1PY, (op_val[]){OPV_T(nz), OPV_T(y)}, 2);
    if ((rc = put2(g, 0, kiln_mul(go, d))) < 0) return rc;
  }
  if (s1 >= 0 && g->needs[s1] &&
      (rc = put2(g, 1, kiln_div(kiln_mul(go, x), kiln_add_scalar(y, 1.0)))) < 0)
    return rc;
  return 0;
}
