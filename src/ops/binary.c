/* src/ops/binary.c: pow, maximum, minimum: tiles, formulas, API. */
#include "tile.h"

kiln_tensor *kiln_pow(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_POW, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_pow_scalar(kiln_tensor *a, double exponent) {
  return op_call1(KILN_OP_POW, (op_val[]){OPV_T(a), OPV_F(exponent)}, 2);
}
kiln_tensor *kiln_maximum(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MAXIMUM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_minimum(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MINIMUM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
