/* src/ops/matmul.c: mm, bmm, addmm through CBLAS; matmul and linear
 * decompose into them. */
#include "op.h"

kiln_tensor *kiln_mm(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_bmm(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_BMM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_matmul(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MATMUL, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_addmm(kiln_tensor *bias, kiln_tensor *a, kiln_tensor *b, double beta,
                        double alpha) {
  return op_call1(KILN_OP_ADDMM,
                  (op_val[]){OPV_T(bias), OPV_T(a), OPV_T(b), OPV_F(beta), OPV_F(alpha)}, 5);
}
kiln_tensor *kiln_linear(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b) {
  return op_call1(KILN_OP_LINEAR, (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b)}, 3);
}
