/* src/ops/conv.c: conv2d (im2col + GEMM), its backward op, and max pooling
 * with indices and its backward op. NCHW. */
#include "op.h"

kiln_tensor *kiln_conv2d(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b,
                         const int64_t stride[2], const int64_t padding[2]) {
  static const int64_t one[2] = {1, 1};
  return op_call1(KILN_OP_CONV2D, (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_INTS(stride, 2),
                                             OPV_INTS(padding, 2), OPV_INTS(one, 2), OPV_I(1)},
                  7);
}
kiln_tensor *kiln_max_pool2d(kiln_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                             const int64_t padding[2]) {
  static const int64_t one[2] = {1, 1};
  return op_call1(KILN_OP_MAX_POOL2D, (op_val[]){OPV_T(x), OPV_INTS(kernel, 2), OPV_INTS(stride, 2),
                                                 OPV_INTS(padding, 2), OPV_INTS(one, 2), OPV_B(false)},
                  6);
}
