/* src/ops/loss.c: losses: nll_loss, cross_entropy (decomposes into
 * log_softmax + nll_loss), mse_loss (decomposes). */
#include "op.h"

kiln_tensor *kiln_nll_loss(kiln_tensor *logp, kiln_tensor *target, kiln_reduction reduction) {
  return op_call1(KILN_OP_NLL_LOSS, (op_val[]){OPV_T(logp), OPV_T(target), OPV_NONE,
                                               OPV_I(reduction), OPV_I(-100)},
                  5);
}
kiln_tensor *kiln_cross_entropy(kiln_tensor *logits, kiln_tensor *target,
                                kiln_reduction reduction) {
  return op_call1(KILN_OP_CROSS_ENTROPY, (op_val[]){OPV_T(logits), OPV_T(target), OPV_NONE,
                                                    OPV_I(reduction), OPV_I(-100), OPV_F(0.0)},
                  6);
}
kiln_tensor *kiln_mse_loss(kiln_tensor *input, kiln_tensor *target, kiln_reduction reduction) {
  return op_call1(KILN_OP_MSE_LOSS, (op_val[]){OPV_T(input), OPV_T(target), OPV_I(reduction)}, 3);
}
