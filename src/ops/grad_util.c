/* src/ops/grad_util.c: helpers shared by derivative formulas, written with
 * the public API so they record like any other op (lazy, create_graph). */
#include "op.h"

kiln_tensor *op_sum_to(kiln_tensor *g, int ndim, const int64_t *shape) {
  if (!g) return NULL;
  if (g->ndim == ndim) {
    bool same = true;
    for (int i = 0; i < ndim; i++) same &= g->shape[i] == shape[i];
    if (same) return g;
  }
  return op_call1(KILN_OP_SUM_TO_SIZE, (op_val[]){OPV_T(g), OPV_INTS(shape, ndim)}, 2);
}
