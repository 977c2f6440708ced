/* src/ops/arith.c: add, sub, mul, div: tiles, derivative formulas and the
 * public API. The pattern every elementwise op follows: TILE_* kernels per
 * compute dtype, an op_<name>_tiles table, an op_<name>_grad written with
 * the public API, and thin kiln_<name> wrappers around op_call1. */
#include "tile.h"

/* alpha is attribute 0 (the schema's third argument). */
/* a + alpha * b in one rounding, as PyTorch's vectorized add (fmadd) */
TILE_BINARY(add_f32, float, float, fmaf((float)at->s[0], b, a))
TILE_BINARY(add_f64, double, double, fma(at->s[0], b, a))
TILE_BINARY_C(add_i64, int64_t, int64_t, core_wrap_add(a, core_wrap_mul((int64_t)at->s[0], b)))
TILE_BINARY(add_b, bool, bool, a || b)
TILE_BINARY(sub_f32, float, float, fmaf(-(float)at->s[0], b, a))
TILE_BINARY(sub_f64, double, double, fma(-at->s[0], b, a))
TILE_BINARY_C(sub_i64, int64_t, int64_t, core_wrap_sub(a, core_wrap_mul((int64_t)at->s[0], b)))
TILE_BINARY(mul_f32, float, float, a * b)
TILE_BINARY(mul_f64, double, double, a * b)
TILE_BINARY_C(mul_i64, int64_t, int64_t, core_wrap_mul(a, b))
TILE_BINARY(mul_b, bool, bool, a && b)
TILE_BINARY(div_f32, float, float, a / b)
TILE_BINARY(div_f64, double, double, a / b)

OP_TILES(add, add_f32, add_f64, add_i64, add_b)
OP_TILES(sub, sub_f32, sub_f64, sub_i64, NOTILE)
OP_TILES(mul, mul_f32, mul_f64, mul_i64, mul_b)
OP_TILES(div, div_f32, div_f64, NOTILE, NOTILE)

/* Gradient of a broadcast operand: sum g down to the operand's shape. */
static kiln_tensor *to_operand(kiln_tensor *g, const op_val *operand) {
  if (!g || operand->tag != OP_VAL_TENSOR) return NULL;
  return op_sum_to(g, operand->t->ndim, operand->t->shape);
}

/* Slots are tensor operands in order; a scalar operand has no slot. */
static int slot_of(const op_val *args, int arg) {
  int s = 0;
  for (int i = 0; i < arg; i++) s += args[i].tag == OP_VAL_TENSOR;
  return args[arg].tag == OP_VAL_TENSOR ? s : -1;
}

static int addsub_grad(op_grad_ctx *g, double sign) {
  kiln_tensor *go = g->grads[0];
  double alpha = op_val_num(&g->args[2]);
  int s0 = slot_of(g->args, 0), s1 = slot_of(g->args, 1);
  if (!go) return 0;
  if (s0 >= 0 && g->needs[s0] && op_grad_put(g, s0, to_operand(go, &g->args[0])) < 0) return -1;
  if (s1 >= 0 && g->needs[s1]) {
    kiln_tensor *x = sign * alpha == 1.0 ? go : kiln_mul_scalar(go, sign * alpha);
    if (op_grad_put(g, s1, to_operand(x, &g->args[1])) < 0) return -1;
  }
  return 0;
}

int op_add_grad(op_grad_ctx *g) { return addsub_grad(g, 1.0); }
int op_sub_grad(op_grad_ctx *g) { return addsub_grad(g, -1.0); }

int op_mul_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  int s0 = slot_of(g->args, 0), s1 = slot_of(g->args, 1);
  const op_val *a = &g->args[0], *b = &g->args[1];
  if (!go) return 0;
  if (s0 >= 0 && g->needs[s0] &&
      op_grad_put(g, s0, to_operand(b->tag == OP_VAL_TENSOR ? kiln_mul(go, b->t)
                                                    : kiln_mul_scalar(go, op_val_num(b)),
                            a)) < 0)
    return -1;
  if (s1 >= 0 && g->needs[s1] &&
      op_grad_put(g, s1, to_operand(a->tag == OP_VAL_TENSOR ? kiln_mul(go, a->t)
                                                    : kiln_mul_scalar(go, op_val_num(a)),
                            b)) < 0)
    return -1;
  return 0;
}

/* 1/b written with ops (so it records lazily). */
static kiln_tensor *reciprocal(kiln_tensor *b) {
  return op_call1(KILN_OP_DIV, (op_val[]){OPV_F(1.0), OPV_T(b)}, 2);
}

/* d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 */
int op_div_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  int s0 = slot_of(g->args, 0), s1 = slot_of(g->args, 1);
  const op_val *a = &g->args[0], *b = &g->args[1];
  if (!go) return 0;
  if (s0 >= 0 && g->needs[s0] &&
      op_grad_put(g, s0, to_operand(b->tag == OP_VAL_TENSOR ? kiln_div(go, b->t)
                                                    : kiln_div_scalar(go, op_val_num(b)),
                            a)) < 0)
    return -1;
  if (s1 >= 0 && g->needs[s1]) {
    /* b is a tensor here; a may be a scalar: d(a/b)/db = -(a/b)/b */
    kiln_tensor *q = a->tag == OP_VAL_TENSOR ? kiln_div(a->t, b->t)
                                             : kiln_mul_scalar(reciprocal(b->t), op_val_num(a));
    kiln_tensor *r = q ? kiln_mul_scalar(kiln_div(kiln_mul(go, q), b->t), -1.0) : NULL;
    if (op_grad_put(g, s1, to_operand(r, b)) < 0) return -1;
  }
  return 0;
}

/* ---- public API ------------------------------------------------------------- */

kiln_tensor *kiln_add(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_ADD, (op_val[]){OPV_T(a), OPV_T(b), OPV_I(1)}, 3);
}
kiln_tensor *kiln_sub(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_SUB, (op_val[]){OPV_T(a), OPV_T(b), OPV_I(1)}, 3);
}
kiln_tensor *kiln_add_alpha(kiln_tensor *a, kiln_tensor *b, double alpha) {
  return op_call1(KILN_OP_ADD, (op_val[]){OPV_T(a), OPV_T(b), OPV_F(alpha)}, 3);
}
kiln_tensor *kiln_sub_alpha(kiln_tensor *a, kiln_tensor *b, double alpha) {
  return op_call1(KILN_OP_SUB, (op_val[]){OPV_T(a), OPV_T(b), OPV_F(alpha)}, 3);
}
kiln_tensor *kiln_mul(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MUL, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_div(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_DIV, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
/* These take Python float scalars: a float32 tensor stays float32, an
 * int64 tensor becomes float32 (as x + 2.0 in PyTorch). */
kiln_tensor *kiln_add_scalar(kiln_tensor *a, double s) {
  return op_call1(KILN_OP_ADD, (op_val[]){OPV_T(a), OPV_F(s), OPV_I(1)}, 3);
}
kiln_tensor *kiln_sub_scalar(kiln_tensor *a, double s) {
  return op_call1(KILN_OP_SUB, (op_val[]){OPV_T(a), OPV_F(s), OPV_I(1)}, 3);
}
kiln_tensor *kiln_mul_scalar(kiln_tensor *a, double s) {
  return op_call1(KILN_OP_MUL, (op_val[]){OPV_T(a), OPV_F(s)}, 2);
}
/* In place (Note [In-place variants] in op.h): self += alpha * other, self *=
 * other, self *= s. KILN_OK, or a negative status (self is a leaf that
 * requires grad with grad mode on, a shape other cannot broadcast to). */
kiln_status kiln_add_(kiln_tensor *self, kiln_tensor *other, double alpha) {
  kiln_tensor *out[1];
  int n = op_call(KILN_OP_INPLACE(KILN_OP_ADD), (op_val[]){OPV_T(self), OPV_T(other), OPV_F(alpha)}, 3, out, 1);
  return n == 1 ? KILN_OK : n < 0 ? (kiln_status)n : KILN_ERR_STATE;
}
kiln_status kiln_mul_(kiln_tensor *self, kiln_tensor *other) {
  kiln_tensor *out[1];
  int n = op_call(KILN_OP_INPLACE(KILN_OP_MUL), (op_val[]){OPV_T(self), OPV_T(other)}, 2, out, 1);
  return n == 1 ? KILN_OK : n < 0 ? (kiln_status)n : KILN_ERR_STATE;
}
kiln_status kiln_mul_scalar_(kiln_tensor *self, double s) {
  kiln_tensor *out[1];
  int n = op_call(KILN_OP_INPLACE(KILN_OP_MUL), (op_val[]){OPV_T(self), OPV_F(s)}, 2, out, 1);
  return n == 1 ? KILN_OK : n < 0 ? (kiln_status)n : KILN_ERR_STATE;
}
kiln_tensor *kiln_div_scalar(kiln_tensor *a, double s) {
  return op_call1(KILN_OP_DIV, (op_val[]){OPV_T(a), OPV_F(s)}, 2);
}
