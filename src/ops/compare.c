/* src/ops/compare.c: comparisons (eq, ne, lt, le, gt, ge: bool results)
 * and where: tiles, formulas, API. */
#include "tile.h"

/* ---- tiles ------------------------------------------------------------------ */
/* Comparisons read both operands in the promoted compute dtype (the table
 * index) and write bool (OPF_BOOL_OUT). NaN compares unequal to everything,
 * so only ne is true for it. */
#define CMP_TILES(name, OPR)                                                    \
  TILE_BINARY(name##_f32, float, bool, a OPR b)                                 \
  TILE_BINARY(name##_f64, double, bool, a OPR b)                                \
  TILE_BINARY(name##_i64, int64_t, bool, a OPR b)                               \
  TILE_BINARY(name##_b, bool, bool, a OPR b)                                    \
  OP_TILES(name, name##_f32, name##_f64, name##_i64, name##_b)
CMP_TILES(eq, ==)
CMP_TILES(ne, !=)
CMP_TILES(lt, <)
CMP_TILES(le, <=)
CMP_TILES(gt, >)
CMP_TILES(ge, >=)

/* where: the driver converts the Bool condition to the compute dtype (0/1),
 * so every tile reads three arrays of one type and selects with c != 0. */
TILE_TERNARY(where_f32, float, float, c != 0 ? a : b)
TILE_TERNARY(where_f64, double, double, c != 0 ? a : b)
TILE_TERNARY(where_i64, int64_t, int64_t, c != 0 ? a : b)
TILE_TERNARY(where_b, bool, bool, c ? a : b)

OP_TILES(where, where_f32, where_f64, where_i64, where_b)

/* ---- derivative formula ----------------------------------------------------- */
/* where(c, a, b): da = where(c, g, 0), db = where(c, 0, g), each summed to its
 * operand's shape (c, a and b broadcast together). Slot 0 is the Bool
 * condition, which never needs a gradient; a number operand has no slot.
 * Public API only, so it records lazily and under create_graph. */
int op_where_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0], *cond = g->args[0].t;
  if (!go) return 0;
  int slot = 1;
  for (int arg = 1; arg <= 2; arg++) {
    const op_val *v = &g->args[arg];
    if (v->tag != OP_VAL_TENSOR) continue;
    int s = slot++;
    if (!g->needs[s]) continue;
    op_val sel[3] = {OPV_T(cond), arg == 1 ? OPV_T(go) : OPV_F(0.0),
                     arg == 1 ? OPV_F(0.0) : OPV_T(go)};
    kiln_tensor *r = op_call1(KILN_OP_WHERE, sel, 3);
    r = r ? op_sum_to(r, v->t->ndim, v->t->shape) : NULL;
    if (!r) return KILN_ERR_INVALID; /* the failing op set the message */
    g->grad_in[s] = r;
  }
  return 0;
}

/* ---- public API ------------------------------------------------------------- */
/* Each returns a new reference (registered with the current scope), or NULL
 * with kiln_last_error() set (shapes that do not broadcast; a condition that
 * is not Bool). */

#define API2(name, ENUM)                                                        \
  kiln_tensor *kiln_##name(kiln_tensor *a, kiln_tensor *b) {                    \
    return op_call1(KILN_OP_##ENUM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);         \
  }
API2(eq, EQ)
API2(ne, NE)
API2(lt, LT)
API2(le, LE)
API2(gt, GT)
API2(ge, GE)

kiln_tensor *kiln_where(kiln_tensor *cond, kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(cond), OPV_T(a), OPV_T(b)}, 3);
}
