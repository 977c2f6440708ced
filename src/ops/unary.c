/* src/ops/unary.c: unary elementwise math ops (neg, abs, sign, exp, log,
 * sqrt, rsqrt, sin, cos, tanh, sigmoid, erf): tiles, formulas, API. */
#include "tile.h"

#define API1(name, ENUM)                                                        \
  kiln_tensor *kiln_##name(kiln_tensor *t) {                                    \
    return op_call1(KILN_OP_##ENUM, (op_val[]){OPV_T(t)}, 1);                   \
  }
API1(neg, NEG)
API1(abs, ABS)
API1(exp, EXP)
API1(log, LOG)
API1(sqrt, SQRT)
API1(rsqrt, RSQRT)
API1(sin, SIN)
API1(cos, COS)
API1(tanh, TANH)
API1(sigmoid, SIGMOID)
