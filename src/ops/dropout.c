/* src/ops/dropout.c: native_dropout (mask from the default generator) and
 * dropout, which decomposes into it when training. */
#include "op.h"

kiln_tensor *kiln_dropout(kiln_tensor *x, double p, bool train, kiln_generator *gen) {
  (void)gen; /* see Note [Dropout generator] in this file once implemented */
  return op_call1(KILN_OP_DROPOUT, (op_val[]){OPV_T(x), OPV_F(p), OPV_B(train)}, 3);
}
