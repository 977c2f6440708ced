/* src/ops/index.c: indexing: index_select, index_add, embedding, gather,
 * scatter_add (int64 indices). */
#include "op.h"

kiln_tensor *kiln_index_select(kiln_tensor *t, int dim, kiln_tensor *index) {
  return op_call1(KILN_OP_INDEX_SELECT, (op_val[]){OPV_T(t), OPV_I(dim), OPV_T(index)}, 3);
}
kiln_tensor *kiln_embedding(kiln_tensor *weight, kiln_tensor *indices) {
  return op_call1(KILN_OP_EMBEDDING, (op_val[]){OPV_T(weight), OPV_T(indices), OPV_I(-1),
                                                OPV_B(false), OPV_B(false)},
                  5);
}
kiln_tensor *kiln_gather(kiln_tensor *t, int dim, kiln_tensor *index) {
  return op_call1(KILN_OP_GATHER, (op_val[]){OPV_T(t), OPV_I(dim), OPV_T(index), OPV_B(false)}, 4);
}
