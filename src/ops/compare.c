/* src/ops/compare.c: comparisons (eq, ne, lt, le, gt, ge: bool results)
 * and where: tiles, formulas, API. */
#include "tile.h"

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
