/* src/ops/softmax.c: softmax and log_softmax along a dim. */
#include "op.h"

kiln_tensor *kiln_softmax(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_SOFTMAX, (op_val[]){OPV_T(t), OPV_I(dim), OPV_NONE}, 3);
}
kiln_tensor *kiln_log_softmax(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_LOG_SOFTMAX, (op_val[]){OPV_T(t), OPV_I(dim), OPV_NONE}, 3);
}
