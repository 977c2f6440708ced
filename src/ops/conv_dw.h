/* src/ops/conv_dw.h: the direct depthwise convolution kernels
 * (conv_depthwise.c, Note [Depthwise kernels]) that conv.c dispatches to
 * instead of the im2col + GEMM ones when each group has one input channel. */
#ifndef KILN_OPS_CONV_DW_H
#define KILN_OPS_CONV_DW_H

#include "conv.h"

/* True when the direct kernels do this convolution: groups > 1 and one
 * input channel per group (depthwise, any channel multiplier O / G, any
 * kernel, stride, padding and dilation). */
bool op_conv_dw_applies(const win_geom *g);

/* out[N, O, OH, OW] = conv(x[N, G, H, W], w[O, 1, KH, KW]) + bias[O]
 * (bias may be NULL), all contiguous, dt float32 or float64, g validated
 * by conv.c with op_conv_dw_applies(g). Returns 0, or KILN_ERR_NOMEM /
 * KILN_ERR_INVALID (error set) when its scratch cannot be allocated or
 * sized; out is then unspecified. */
int op_conv_dw_forward(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                       const char *bias, char *out);

/* The gradients of op_conv_dw_forward for grad_output go [N, O, OH, OW]:
 * gx [N, G, H, W] if mask[0], gw [O, 1, KH, KW] if mask[1], gb [O] if
 * mask[2] are WRITTEN (not added to; masked-out ones are left alone).
 * Same layouts and failure as op_conv_dw_forward. */
int op_conv_dw_backward(kiln_dtype dt, const win_geom *g, const bool mask[3], const char *x,
                        const char *w, const char *go, char *gx, char *gw, char *gb);

#endif
