/* src/ops/binary.c: pow, maximum, minimum: tiles, formulas, API. */
#include "tile.h"
#include "vmath.h"

/* ---- tiles ------------------------------------------------------------------ */

/* Float pow (x ** 2 as a * a, x ** 0.5 as sqrt) is in vmath.h. */
TILE_BINARY(pow_f32, float, float, op_powf(a, b))
TILE_BINARY(pow_f64, double, double, op_pow(a, b))

/* PyTorch's powi: exponentiation by squaring in wrapping arithmetic; a
 * negative exponent gives 1 for base 1, +-1 for base -1, else 0. (PyTorch
 * rejects a negative *scalar* exponent of an integer tensor with an error;
 * a tile cannot fail, so that case gives these values too.) */
static inline int64_t powi(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, base = (uint64_t)a;
  while (b) {
    if (b & 1) r *= base;
    b >>= 1;
    base *= base;
  }
  return (int64_t)r;
}
TILE_BINARY_C(pow_i64, int64_t, int64_t, powi(a, b)) /* powi is this file's: no text */

/* NaN propagates (either operand), as torch.maximum/minimum. */
TILE_BINARY(maximum_f32, float, float, (a > b || a != a) ? a : b)
TILE_BINARY(maximum_f64, double, double, (a > b || a != a) ? a : b)
TILE_BINARY(maximum_i64, int64_t, int64_t, a > b ? a : b)
TILE_BINARY(maximum_b, bool, bool, a || b)
TILE_BINARY(minimum_f32, float, float, (a < b || a != a) ? a : b)
TILE_BINARY(minimum_f64, double, double, (a < b || a != a) ? a : b)
TILE_BINARY(minimum_i64, int64_t, int64_t, a < b ? a : b)
TILE_BINARY(minimum_b, bool, bool, a && b)

OP_TILES(pow, pow_f32, pow_f64, pow_i64, NOTILE)
OP_TILES(maximum, maximum_f32, maximum_f64, maximum_i64, maximum_b)
OP_TILES(minimum, minimum_f32, minimum_f64, minimum_i64, minimum_b)

/* ---- derivative formulas ------------------------------------------------- */
/* Public API only (they record lazily and under create_graph). Either
 * operand may be a number (no slot) instead of a tensor. Results have the
 * broadcast output shape and are summed back to each operand's shape. */

/* Slot of argument arg (tensor operands are numbered in order), or -1. */
static int slot_of(const op_val *args, int arg) {
  int s = 0;
  for (int i = 0; i < arg; i++) s += args[i].tag == OP_VAL_TENSOR;
  return args[arg].tag == OP_VAL_TENSOR ? s : -1;
}

/* Does argument arg want a gradient? Sets *slot. */
static bool wants(const op_grad_ctx *g, int arg, int *slot) {
  *slot = slot_of(g->args, arg);
  return *slot >= 0 && g->needs[*slot];
}

/* Stores r, summed to argument arg's shape, as the gradient of slot. */
static int put(op_grad_ctx *g, int slot, int arg, kiln_tensor *r) {
  const kiln_tensor *t = g->args[arg].t;
  r = r ? op_sum_to(r, t->ndim, t->shape) : NULL;
  if (!r) return KILN_ERR_INVALID; /* a step failed; its message is set */
  g->grad_in[slot] = r;
  return 0;
}

/* a <op> b over op_vals (tensors or numbers). */
static kiln_tensor *cmp(int op, const op_val *a, const op_val *b) {
  return op_call1(op, (op_val[]){*a, *b}, 2);
}

/* where(mask, 0, a) */
static kiln_tensor *zero_where(kiln_tensor *mask, kiln_tensor *a) {
  return op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(mask), OPV_F(0.0), OPV_T(a)}, 3);
}

static kiln_tensor *zeros_like(kiln_tensor *t) {
  return op_call1(KILN_OP_ZEROS_LIKE,
                  (op_val[]){OPV_T(t), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE}, 6);
}

/* PyTorch's pow_backward_self and pow_backward_exponent:
 *   d/da = where(b == 0, 0, g * b * a^(b-1))      (zeros for a number b == 0)
 *   d/db = g * where(a == 0 & b >= 0, 0, a^b * log(a))
 * The log term is computed only when the exponent wants a gradient, and is
 * masked where a == 0 so that 0^b (b >= 0) does not give 0 * -inf. */
int op_pow_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  const op_val *a = &g->args[0], *b = &g->args[1];
  int s;
  if (!go) return 0;
  if (wants(g, 0, &s)) {
    kiln_tensor *r;
    if (b->tag != OP_VAL_TENSOR) {
      double e = op_val_num(b);
      r = e == 0.0 ? zeros_like(go)
                   : kiln_mul(go, kiln_mul_scalar(kiln_pow_scalar(a->t, e - 1.0), e));
    } else {
      kiln_tensor *d = kiln_mul(b->t, kiln_pow(a->t, kiln_sub_scalar(b->t, 1.0)));
      r = zero_where(cmp(KILN_OP_EQ, b, &OPV_F(0.0)), kiln_mul(go, d));
    }
    if (put(g, s, 0, r) < 0) return KILN_ERR_INVALID;
  }
  if (wants(g, 1, &s)) {
    kiln_tensor *res = op_call1(KILN_OP_POW, (op_val[]){*a, *b}, 2), *r = NULL;
    if (res && a->tag != OP_VAL_TENSOR) {
      double base = op_val_num(a);
      if (base == 0.0)
        r = zero_where(cmp(KILN_OP_GE, b, &OPV_F(0.0)), kiln_mul_scalar(res, -INFINITY));
      else
        r = kiln_mul_scalar(res, log(base));
    } else if (res) {
      /* log of the base in the result's dtype (an int64 base would
       * otherwise take its log in float32) */
      kiln_tensor *base = a->t->dtype == res->dtype ? a->t : kiln_to_dtype(a->t, res->dtype);
      kiln_tensor *zero_base = cmp(KILN_OP_EQ, a, &OPV_F(0.0));
      kiln_tensor *nonneg = cmp(KILN_OP_GE, b, &OPV_F(0.0));
      r = zero_where(kiln_mul(zero_base, nonneg), kiln_mul(res, kiln_log(base)));
    }
    if (put(g, s, 1, r ? kiln_mul(go, r) : NULL) < 0) return KILN_ERR_INVALID;
  }
  return 0;
}

/* PyTorch 1.13's maximum/minimum backward: ties split the gradient
 * equally, h = where(a == b, g/2, g); the operand that lost gets 0:
 *   maximum: da = h masked where a < b, db = h masked where a > b
 *   minimum: da = h masked where a > b, db = h masked where a < b
 * (NaN compares false everywhere, so both operands get g there). */
static int minmax_grad(op_grad_ctx *g, int lose_a, int lose_b) {
  kiln_tensor *go = g->grads[0], *h;
  const op_val *a = &g->args[0], *b = &g->args[1];
  int sa, sb;
  bool wa = wants(g, 0, &sa), wb = wants(g, 1, &sb);
  if (!go || (!wa && !wb)) return 0;
  h = kiln_where(cmp(KILN_OP_EQ, a, b), kiln_mul_scalar(go, 0.5), go);
  if (wa && put(g, sa, 0, zero_where(cmp(lose_a, a, b), h)) < 0) return KILN_ERR_INVALID;
  if (wb && put(g, sb, 1, zero_where(cmp(lose_b, a, b), h)) < 0) return KILN_ERR_INVALID;
  return 0;
}

int op_maximum_grad(op_grad_ctx *g) { return minmax_grad(g, KILN_OP_LT, KILN_OP_GT); }
int op_minimum_grad(op_grad_ctx *g) { return minmax_grad(g, KILN_OP_GT, KILN_OP_LT); }

/* ---- public API ------------------------------------------------------------- */
/* Each returns a new reference (registered with the current scope), or NULL
 * with kiln_last_error() set (shapes that do not broadcast, pow of Bool). */

kiln_tensor *kiln_pow(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_POW, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
/* A Python float exponent: a float tensor keeps its dtype, an int64 tensor
 * gives float32 (as x ** 2.0 in PyTorch). */
kiln_tensor *kiln_pow_scalar(kiln_tensor *a, double exponent) {
  return op_call1(KILN_OP_POW, (op_val[]){OPV_T(a), OPV_F(exponent)}, 2);
}
kiln_tensor *kiln_maximum(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MAXIMUM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_minimum(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MINIMUM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
