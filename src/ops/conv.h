/* src/ops/conv.h: the geometry of a 2-d sliding window (conv.c validates
 * it) and the convolution kernels over batches of images (conv_gemm.c). */
#ifndef KILN_OPS_CONV_H
#define KILN_OPS_CONV_H

#include "op.h"

/* Geometry of one 2-d sliding window (conv or pool) over planes. */
typedef struct win_geom {
  int64_t N, C, H, W, O, KH, KW, OH, OW; /* conv: C is per group */
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t G; /* conv: groups (channels C * G in, O out, O / G per group) */
} win_geom;

/* Bytes of each scratch matrix (col, gcol, gout') per chunk of images,
 * at least one image's (Note [Conv batching] in conv_gemm.c); 4 MiB. A
 * test hook: tests set it small to cut batches into several chunks. */
extern size_t op_conv_chunk_bytes;

/* out[N, O, OH, OW] = conv(x[N, G C, H, W], w[O, C, KH, KW]) + bias[O]
 * (bias may be NULL), all contiguous, dt float32 or float64, g validated
 * by conv.c. Returns 0, or KILN_ERR_NOMEM (error set) when its scratch
 * cannot be allocated; out is then unspecified. */
int op_conv_forward(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                    const char *bias, char *out);

/* The input and weight gradients of op_conv_forward for grad_output go
 * [N, O, OH, OW]: gx (if mask[0]) and gw (if mask[1]) are ADDED to, so
 * the caller zeroes them first. Same dtypes, layouts and failure as
 * op_conv_forward (the bias gradient is the caller's). */
int op_conv_backward(kiln_dtype dt, const win_geom *g, const bool mask[3], const char *x,
                     const char *w, const char *go, char *gx, char *gw);

#endif
