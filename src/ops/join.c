/* src/ops/join.c: joining and splitting: cat, stack, chunk, split. */
#include "op.h"

kiln_tensor *kiln_cat(kiln_tensor *const *ts, int n, int dim) {
  return op_call1(KILN_OP_CAT, (op_val[]){OPV_TS(ts, n), OPV_I(dim)}, 2);
}
kiln_tensor *kiln_stack(kiln_tensor *const *ts, int n, int dim) {
  return op_call1(KILN_OP_STACK, (op_val[]){OPV_TS(ts, n), OPV_I(dim)}, 2);
}
int kiln_chunk(kiln_tensor *t, int chunks, int dim, kiln_tensor **outs, int max_out) {
  return op_call(KILN_OP_CHUNK, (op_val[]){OPV_T(t), OPV_I(chunks), OPV_I(dim)}, 3, outs,
                 max_out);
}
int kiln_split(kiln_tensor *t, int64_t split_size, int dim, kiln_tensor **outs, int max_out) {
  return op_call(KILN_OP_SPLIT, (op_val[]){OPV_T(t), OPV_I(split_size), OPV_I(dim)}, 3, outs,
                 max_out);
}
