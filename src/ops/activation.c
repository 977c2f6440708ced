/* src/ops/activation.c: activation functions (relu, gelu, silu, leaky_relu,
 * clamp): tiles, formulas, API. */
#include "tile.h"

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
