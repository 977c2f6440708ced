/* src/ops/binary_math.c: more binary elementwise ops: atan2, hypot,
 * copysign, logaddexp(2), xlogy, fmax/fmin, remainder/fmod, floor_divide,
 * bitwise and/or/xor/shifts, logical and/or/xor; and the overloads that
 * decompose into them (div with rounding_mode, __and__/__or__/__xor__,
 * true_divide, max/min of two tensors, clamp with tensor bounds, lerp,
 * addcmul/addcdiv, float_power, ldexp). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tile.h"

#define FLOAT_TILES2(name, ef, ed)                                               \
  TILE_BINARY(name##_f32, float, float, ef)                                      \
  TILE_BINARY(name##_f64, double, double, ed)                                    \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, NULL, NULL}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

static inline double logaddexp_d(double a, double b) {
  if (isinf(a) && a == b) return a;
  double m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}
static inline double logaddexp2_d(double a, double b) {
  if (isinf(a) && a == b) return a;
  double m = a > b ? a : b;
  return m + log1p(exp2(-fabs(a - b))) / M_LN2;
}
static inline double xlogy_d(double x, double y) {
  if (isnan(y)) return NAN;
  if (x == 0) return 0;
  /* log of a negative y is NaN; one canonical NaN, so every CPU level
   * gives the same bits (the product's payload depended on the level) */
  return y < 0 ? NAN : x * log(y);
}
/* fmax/fmin ignore a NaN operand */
static inline double fmax_d(double a, double b) { return a != a ? b : b != b ? a : a > b ? a : b; }
static inline double fmin_d(double a, double b) { return a != a ? b : b != b ? a : a < b ? a : b; }

FLOAT_TILES2(atan2, atan2f(a, b), atan2(a, b))
FLOAT_TILES2(hypot, hypotf(a, b), hypot(a, b))
FLOAT_TILES2(copysign, copysignf(a, b), copysign(a, b))
FLOAT_TILES2(logaddexp, (float)logaddexp_d(a, b), logaddexp_d(a, b))
FLOAT_TILES2(logaddexp2, (float)logaddexp2_d(a, b), logaddexp2_d(a, b))
FLOAT_TILES2(xlogy, (float)xlogy_d(a, b), xlogy_d(a, b))
FLOAT_TILES2(nextafter, nextafterf(a, b), nextafter(a, b))

TILE_BINARY(fmax_f32, float, float, (float)fmax_d(a, b))
TILE_BINARY(fmax_f64, double, double, fmax_d(a, b))
TILE_BINARY(fmax_i64, int64_t, int64_t, a > b ? a : b)
TILE_BINARY(fmin_f32, float, float, (float)fmin_d(a, b))
TILE_BINARY(fmin_f64, double, double, fmin_d(a, b))
TILE_BINARY(fmin_i64, int64_t, int64_t, a < b ? a : b)
TILE_BINARY(fmax_b, bool, bool, a || b)
TILE_BINARY(fmin_b, bool, bool, a && b)
const op_tile_fn op_fmax_tiles[KILN_DTYPE_COUNT] = {fmax_f32, fmax_f64, fmax_i64, fmax_b};
const op_tile_src *const op_fmax_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};
const op_tile_fn op_fmin_tiles[KILN_DTYPE_COUNT] = {fmin_f32, fmin_f64, fmin_i64, fmin_b};
const op_tile_src *const op_fmin_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

/* remainder takes the divisor's sign (Python's %), fmod the dividend's (C's).
 * An integer division by zero cannot raise inside a tile: it gives 0. */
static inline double remainder_d(double a, double b) {
  double m = fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}
static inline int64_t remainder_i(int64_t a, int64_t b) { return b ? core_int_remainder(a, b) : 0; }
static inline int64_t fmod_i(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
/* floor division: PyTorch's div_floor_floating (exact at the integers) */
static inline double floordiv_d(double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  double fl;
  if (div != 0) {
    fl = floor(div);
    if (div - fl > 0.5) fl += 1;
  } else {
    fl = copysign(0, a / b);
  }
  return fl;
}
static inline int64_t floordiv_i(int64_t a, int64_t b) { return b ? core_int_floordiv(a, b) : 0; }

TILE_BINARY(remainder_f32, float, float, (float)remainder_d(a, b))
TILE_BINARY(remainder_f64, double, double, remainder_d(a, b))
TILE_BINARY(remainder_i64, int64_t, int64_t, remainder_i(a, b))
TILE_BINARY(fmod_f32, float, float, fmodf(a, b))
TILE_BINARY(fmod_f64, double, double, fmod(a, b))
TILE_BINARY(fmod_i64, int64_t, int64_t, fmod_i(a, b))
TILE_BINARY(floor_divide_f32, float, float, (float)floordiv_d(a, b))
TILE_BINARY(floor_divide_f64, double, double, floordiv_d(a, b))
TILE_BINARY(floor_divide_i64, int64_t, int64_t, floordiv_i(a, b))
const op_tile_fn op_remainder_tiles[KILN_DTYPE_COUNT] = {remainder_f32, remainder_f64,
                                                         remainder_i64, NULL};
const op_tile_src *const op_remainder_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};
const op_tile_fn op_fmod_tiles[KILN_DTYPE_COUNT] = {fmod_f32, fmod_f64, fmod_i64, NULL};
const op_tile_src *const op_fmod_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};
const op_tile_fn op_floor_divide_tiles[KILN_DTYPE_COUNT] = {floor_divide_f32, floor_divide_f64,
                                                            floor_divide_i64, NULL};
const op_tile_src *const op_floor_divide_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

/* Bitwise ops: integers and bool only (PyTorch has no float kernel). Shifts
 * by a negative or too large amount give 0 (>> of a negative: -1), as
 * PyTorch's. */
static inline int64_t shl_i(int64_t a, int64_t b) {
  return b < 0 || b >= 64 ? 0 : (int64_t)((uint64_t)a << b);
}
static inline int64_t shr_i(int64_t a, int64_t b) {
  return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b;
}
#define BITWISE_TILES(name, ei, eb)                                              \
  TILE_BINARY(name##_i64, int64_t, int64_t, ei)                                  \
  TILE_BINARY(name##_b, bool, bool, eb)                                          \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {NULL, NULL, name##_i64, name##_b}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, &name##_i64_src, \
                                                                      &name##_b_src};
BITWISE_TILES(bitwise_and, a & b, a && b)
BITWISE_TILES(bitwise_or, a | b, a || b)
BITWISE_TILES(bitwise_xor, a ^ b, a != b)
TILE_BINARY(shl_i64, int64_t, int64_t, shl_i(a, b))
TILE_BINARY(shr_i64, int64_t, int64_t, shr_i(a, b))
const op_tile_fn op_bitwise_left_shift_tiles[KILN_DTYPE_COUNT] = {NULL, NULL, shl_i64, NULL};
const op_tile_src *const op_bitwise_left_shift_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL,
                                                                              NULL};
const op_tile_fn op_bitwise_right_shift_tiles[KILN_DTYPE_COUNT] = {NULL, NULL, shr_i64, NULL};
const op_tile_src *const op_bitwise_right_shift_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL,
                                                                               NULL};

/* Logical ops: bool results of any dtype's truth values. */
#define LOGICAL_TILES(name, OPR)                                                 \
  TILE_BINARY(name##_f32, float, bool, (a != 0) OPR (b != 0))                    \
  TILE_BINARY(name##_f64, double, bool, (a != 0) OPR (b != 0))                   \
  TILE_BINARY(name##_i64, int64_t, bool, (a != 0) OPR (b != 0))                  \
  TILE_BINARY(name##_b, bool, bool, a OPR b)                                     \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, name##_i64, \
                                                          name##_b};             \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {           \
      &name##_f32_src, &name##_f64_src, &name##_i64_src, &name##_b_src};
LOGICAL_TILES(logical_and, &&)
LOGICAL_TILES(logical_or, ||)
LOGICAL_TILES(logical_xor, !=)

/* ---- derivative formulas ------------------------------------------------- */
/* Either operand may be a number (no slot). Results have the broadcast
 * shape and are summed back to their operand's shape. */
static int slot_of(const op_val *args, int arg) {
  if (args[arg].tag != OP_VAL_TENSOR) return -1;
  return arg == 0 || args[0].tag != OP_VAL_TENSOR ? 0 : 1;
}
static bool wants(op_grad_ctx *g, int arg) {
  int s = slot_of(g->args, arg);
  return s >= 0 && g->needs[s] && g->grads[0];
}
static int put(op_grad_ctx *g, int arg, kiln_tensor *r) {
  if (!r) return KILN_ERR_INVALID;
  const kiln_tensor *t = g->args[arg].t;
  r = op_sum_to(r, t->ndim, t->shape);
  return op_grad_put(g, slot_of(g->args, arg), r);
}
/* operand arg as a tensor (numbers as 0-d tensors of the gradient's dtype) */
static kiln_tensor *operand(op_grad_ctx *g, int arg) {
  const op_val *v = &g->args[arg];
  if (v->tag == OP_VAL_TENSOR) return v->t;
  return kiln_scalar(op_val_num(v), g->grads[0]->dtype);
}
#define A operand(g, 0)
#define B operand(g, 1)
#define GO (g->grads[0])

/* atan2(a, b): da = g b / (a^2 + b^2), db = -g a / (a^2 + b^2) */
int op_atan2_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  kiln_tensor *den = kiln_add(kiln_mul(A, A), kiln_mul(B, B));
  if (wants(g, 0) && (rc = put(g, 0, kiln_div(kiln_mul(GO, B), den))) < 0) return rc;
  if (wants(g, 1) && (rc = put(g, 1, kiln_neg(kiln_div(kiln_mul(GO, A), den)))) < 0) return rc;
  return 0;
}
/* hypot: da = g a / y, db = g b / y */
int op_hypot_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  kiln_tensor *y = g->outs[0];
  if (wants(g, 0) && (rc = put(g, 0, kiln_div(kiln_mul(GO, A), y))) < 0) return rc;
  if (wants(g, 1) && (rc = put(g, 1, kiln_div(kiln_mul(GO, B), y))) < 0) return rc;
  return 0;
}
/* copysign: da = g sign(a) sign-of-b... PyTorch: g * (a != 0 ? y / a : 0); db = 0 */
int op_copysign_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  kiln_tensor *y = g->outs[0], *a = A;
  if (wants(g, 0)) {
    kiln_tensor *nz = kiln_ne(a, kiln_scalar(0, a->dtype));
    kiln_tensor *q = kiln_where(nz, kiln_div(y, a), kiln_scalar(0, y->dtype));
    if ((rc = put(g, 0, kiln_mul(GO, q))) < 0) return rc;
  }
  if (wants(g, 1) && (rc = put(g, 1, kiln_mul_scalar(GO, 0.0))) < 0) return rc;
  return 0;
}
/* logaddexp: da = g / (1 + e^(b - a)), db = g / (1 + e^(a - b)) */
int op_logaddexp_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  if (wants(g, 0) && (rc = put(g, 0, kiln_mul(GO, kiln_sigmoid(kiln_sub(A, B))))) < 0) return rc;
  if (wants(g, 1) && (rc = put(g, 1, kiln_mul(GO, kiln_sigmoid(kiln_sub(B, A))))) < 0) return rc;
  return 0;
}
/* logaddexp2: the same with base 2: da = g / (1 + 2^(b - a)) */
int op_logaddexp2_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  if (wants(g, 0) &&
      (rc = put(g, 0, kiln_mul(GO, kiln_sigmoid(kiln_mul_scalar(kiln_sub(A, B), M_LN2))))) < 0)
    return rc;
  if (wants(g, 1) &&
      (rc = put(g, 1, kiln_mul(GO, kiln_sigmoid(kiln_mul_scalar(kiln_sub(B, A), M_LN2))))) < 0)
    return rc;
  return 0;
}
/* xlogy(x, y): dx = g * (x == 0 & !isnan(y) ? 0 : log y); dy = g x / y */
int op_xlogy_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  kiln_tensor *x = A, *y = B;
  if (wants(g, 0)) {
    kiln_tensor *z = kiln_eq(x, kiln_scalar(0, x->dtype));
    kiln_tensor *ly = kiln_log(y);
    kiln_tensor *d = kiln_where(z, kiln_scalar(0, GO->dtype), ly);
    if ((rc = put(g, 0, kiln_mul(GO, d))) < 0) return rc;
  }
  if (wants(g, 1) && (rc = put(g, 1, kiln_div(kiln_mul(GO, x), y))) < 0) return rc;
  return 0;
}
/* fmax/fmin: the gradient goes to the chosen operand (a on ties) */
static int fmaxmin_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  kiln_tensor *y = g->outs[0];
  kiln_tensor *pick_a = kiln_eq(y, A);
  kiln_tensor *z = kiln_scalar(0, GO->dtype);
  if (wants(g, 0) && (rc = put(g, 0, kiln_where(pick_a, GO, z))) < 0) return rc;
  if (wants(g, 1) && (rc = put(g, 1, kiln_where(pick_a, z, GO))) < 0) return rc;
  return 0;
}
int op_fmax_grad(op_grad_ctx *g) { return fmaxmin_grad(g); }
int op_fmin_grad(op_grad_ctx *g) { return fmaxmin_grad(g); }
/* remainder: da = g, db = -g floor_divide(a, b); fmod: db = -g trunc(a / b) */
int op_remainder_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  if (wants(g, 0) && (rc = put(g, 0, kiln_mul_scalar(GO, 1.0))) < 0) return rc;
  if (wants(g, 1)) {
    kiln_tensor *q = op_call1(KILN_OP_FLOOR_DIVIDE, (op_val[]){OPV_T(A), OPV_T(B)}, 2);
    if ((rc = put(g, 1, q ? kiln_neg(kiln_mul(GO, q)) : NULL)) < 0) return rc;
  }
  return 0;
}
int op_fmod_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  if (wants(g, 0) && (rc = put(g, 0, kiln_mul_scalar(GO, 1.0))) < 0) return rc;
  if (wants(g, 1)) {
    kiln_tensor *q = op_call1(KILN_OP_TRUNC, (op_val[]){OPV_T(kiln_div(A, B))}, 1);
    if ((rc = put(g, 1, q ? kiln_neg(kiln_mul(GO, q)) : NULL)) < 0) return rc;
  }
  return 0;
}
/* floor_divide is piecewise constant */
int op_floor_divide_grad(op_grad_ctx *g) {
  int rc = 0;
  if (!GO) return 0;
  if (wants(g, 0) && (rc = put(g, 0, kiln_mul_scalar(GO, 0.0))) < 0) return rc;
  if (wants(g, 1) && (rc = put(g, 1, kiln_mul_scalar(GO, 0.0))) < 0) return rc;
  return 0;
}
#undef A
#undef B
#undef GO

/* ---- decompositions ------------------------------------------------------- */
static bool is_int_like(const op_val *v) {
  if (v->tag == OP_VAL_TENSOR) return !core_dtype_is_floating(v->t->dtype);
  return v->tag == OP_VAL_INT || v->tag == OP_VAL_BOOL;
}

/* div(a, b, rounding_mode): None is true division, "trunc" rounds toward
 * zero, "floor" down (floor_divide). Integer operands stay integers. */
int op_div_mode_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *mode = a[2].tag == OP_VAL_STR ? a[2].s : NULL;
  if (a[2].tag != OP_VAL_NONE && a[2].tag != OP_VAL_STR)
    return core_error(KILN_ERR_INVALID, "aten::div: rounding_mode must be a string or None");
  if (!mode) return op_out1(op_call1(KILN_OP_DIV, a, 2), outs);
  if (!strcmp(mode, "floor")) return op_out1(op_call1(KILN_OP_FLOOR_DIVIDE, a, 2), outs);
  if (strcmp(mode, "trunc"))
    return core_error(KILN_ERR_INVALID, "aten::div: expected rounding_mode to be one of None, "
                                        "'trunc', or 'floor' but found '%s'", mode);
  bool ints = is_int_like(&a[0]) && is_int_like(&a[1]);
  if (!ints) return op_out1(op_call1(KILN_OP_TRUNC, (op_val[]){OPV_T(op_call1(KILN_OP_DIV, a, 2))}, 1), outs);
  /* integers: a - fmod(a, b) is an exact multiple of b */
  kiln_tensor *m = op_call1(KILN_OP_FMOD, a, 2);
  if (!m) return KILN_ERR_INVALID;
  kiln_tensor *num = op_call1(KILN_OP_SUB, (op_val[]){a[0], OPV_T(m), OPV_I(1)}, 3);
  kiln_tensor *q = num ? op_call1(KILN_OP_FLOOR_DIVIDE, (op_val[]){OPV_T(num), a[1]}, 2) : NULL;
  return op_out1(q, outs);
}

int op_true_divide_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_DIV, a, 2), outs);
}
int op_and_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_BITWISE_AND, a, 2), outs);
}
int op_or_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_BITWISE_OR, a, 2), outs);
}
int op_xor_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_BITWISE_XOR, a, 2), outs);
}
int op_lshift_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_BITWISE_LEFT_SHIFT, a, 2), outs);
}
int op_rshift_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_BITWISE_RIGHT_SHIFT, a, 2), outs);
}
int op_max_other_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_MAXIMUM, a, 2), outs);
}
int op_min_other_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_MINIMUM, a, 2), outs);
}

/* clamp with tensor bounds: minimum(maximum(x, min), max) */
int op_clamp_tensor_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::clamp", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (a[1].tag == OP_VAL_NONE && a[2].tag == OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "aten::clamp: at least one of 'min' or 'max' must not "
                                        "be None");
  kiln_tensor *r = x;
  if (a[1].tag != OP_VAL_NONE)
    r = op_call1(KILN_OP_MAXIMUM, (op_val[]){OPV_T(r), a[1]}, 2);
  if (r && a[2].tag != OP_VAL_NONE)
    r = op_call1(KILN_OP_MINIMUM, (op_val[]){OPV_T(r), a[2]}, 2);
  return op_out1(r, outs);
}
/* clamp_min/clamp_max with a number: clamp; with a tensor: maximum/minimum */
int op_clamp_min_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  if (a[1].tag == OP_VAL_TENSOR) return op_out1(op_call1(KILN_OP_MAXIMUM, a, 2), outs);
  return op_out1(op_call1(KILN_OP_CLAMP, (op_val[]){a[0], a[1], OPV_NONE}, 3), outs);
}
int op_clamp_max_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  if (a[1].tag == OP_VAL_TENSOR) return op_out1(op_call1(KILN_OP_MINIMUM, a, 2), outs);
  return op_out1(op_call1(KILN_OP_CLAMP, (op_val[]){a[0], OPV_NONE, a[1]}, 3), outs);
}

/* lerp(start, end, weight) = start + weight (end - start) */
int op_lerp_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *s, *e;
  int rc;
  if ((rc = op_arg_tensor("aten::lerp", &a[0], "self", &s)) < 0 ||
      (rc = op_arg_tensor("aten::lerp", &a[1], "end", &e)) < 0)
    return rc;
  kiln_tensor *d = kiln_sub(e, s);
  kiln_tensor *w = d ? op_call1(KILN_OP_MUL, (op_val[]){a[2], OPV_T(d)}, 2) : NULL;
  return op_out1(w ? kiln_add(s, w) : NULL, outs);
}
/* addcmul(self, t1, t2, value) = self + value t1 t2; addcdiv with t1 / t2 */
static int addc(const char *fn, const op_val *a, kiln_tensor **outs, int op) {
  kiln_tensor *s, *t1, *t2;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &s)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "tensor1", &t1)) < 0 ||
      (rc = op_arg_tensor(fn, &a[2], "tensor2", &t2)) < 0)
    return rc;
  if (op == KILN_OP_DIV && !core_dtype_is_floating(t1->dtype) &&
      !core_dtype_is_floating(t2->dtype))
    return core_error(KILN_ERR_INVALID, "%s: integer division with addcdiv is no longer "
                                        "supported", fn);
  kiln_tensor *p = op_call1(op, (op_val[]){OPV_T(t1), OPV_T(t2)}, 2);
  if (!p) return KILN_ERR_INVALID;
  return op_out1(op_call1(KILN_OP_ADD, (op_val[]){OPV_T(s), OPV_T(p), a[3]}, 3), outs);
}
int op_addcmul_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return addc("aten::addcmul", a, outs, KILN_OP_MUL);
}
int op_addcdiv_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return addc("aten::addcdiv", a, outs, KILN_OP_DIV);
}
/* float_power: pow computed in float64 */
static op_val as_f64(const op_val *v) {
  if (v->tag == OP_VAL_TENSOR) return OPV_T(kiln_to_dtype(v->t, KILN_DTYPE_F64));
  return OPV_F(op_val_num(v));
}
int op_float_power_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  op_val x = as_f64(&a[0]), e = as_f64(&a[1]);
  if ((a[0].tag == OP_VAL_TENSOR && !x.t) || (a[1].tag == OP_VAL_TENSOR && !e.t))
    return KILN_ERR_INVALID;
  if (x.tag != OP_VAL_TENSOR && e.tag == OP_VAL_TENSOR)
    x = OPV_T(kiln_scalar(x.f, KILN_DTYPE_F64));
  return op_out1(op_call1(KILN_OP_POW, (op_val[]){x, e}, 2), outs);
}
/* ldexp(x, e) = x * 2^e (a float result) */
int op_ldexp_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *e;
  int rc;
  if ((rc = op_arg_tensor("aten::ldexp", &a[0], "self", &x)) < 0 ||
      (rc = op_arg_tensor("aten::ldexp", &a[1], "other", &e)) < 0)
    return rc;
  kiln_tensor *p = op_call1(KILN_OP_EXP2, (op_val[]){OPV_T(e)}, 1);
  return op_out1(p ? kiln_mul(x, p) : NULL, outs);
}
int op_clamp_min_t_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_clamp_min_decompose(a, n, outs, max);
}
int op_clamp_max_t_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_clamp_max_decompose(a, n, outs, max);
}
int op_lerp_t_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_lerp_decompose(a, n, outs, max);
}
int op_float_power_s_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_float_power_decompose(a, n, outs, max);
}
