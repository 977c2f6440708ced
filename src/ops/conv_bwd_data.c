/* src/ops/conv_bwd_data.c: conv2d's input gradient for stride 1 as a
 * forward convolution of the output gradient (no col2im).
 *
 * Note [Backward data as a conv]: with stride 1, every input pixel
 * (ih, iw) receives gout[o, ih + p - d i, iw + p - d j] w[o, c, i, j]
 * summed over (o, i, j): a convolution of gout with the weight transposed
 * (in and out channels swapped) and flipped (i -> KH - 1 - i), padding
 * p' = d (KH - 1) - p, the same dilation, whose output is H x W again.
 * So gx = op_conv_forward(gout, w'), which is conv_gemm.c's im2col of gout
 * and one GEMM per group written straight into gx, instead of the GEMM
 * W^T @ gout into a col buffer nine times the input's size and its
 * col2im, a read-modify-write scatter that was 13% of resnet18's training
 * step (batch 16, 64x64, one thread). The product's depth is O KH KW
 * instead of O, which the GEMM kernel also runs faster. Groups transpose
 * within each group. The transposed weight is a copy of the weight (a
 * memory-bound 2 ms at 512 x 512 x 3 x 3): at resnet18's layer 4 (2x2
 * images, batch 16) that leaves the new path no faster than col2im, but
 * no slower either, and layers 1-3 gain 10-25%. (At AVX-512 float32 the
 * copy is gone too: Note [Flipped weights] in conv_avx512.c.) Strides > 1
 * keep the col2im path (a stride's input gradient is not one convolution;
 * but see Note [Strided backward data by phases] in conv_bwd_stride.c), as
 * does a 1x1 kernel with no padding (its GEMM already writes gx directly).
 * Each input-gradient
 * element is now one dot product over (o, i, j), rounded differently from
 * col2im's per-(i, j) sums. */
#include <limits.h>

#include "conv.h"

bool op_conv_bwd_data_applies(const win_geom *g) {
  bool pointwise = g->KH == 1 && g->KW == 1 && g->ph == 0 && g->pw == 0;
  return g->sh == 1 && g->sw == 1 && !pointwise && g->ph <= g->dh * (g->KH - 1) &&
         g->pw <= g->dw * (g->KW - 1) && g->O / g->G * g->KH * g->KW <= INT_MAX &&
         g->H * g->W <= INT_MAX && g->C * g->G <= INT_MAX;
}

/* wt[k C + c, o, i, j] = w[k Og + o, c, KH-1-i, KW-1-j] for each group k */
#define DEF_FLIP(NAME, T)                                                                \
  static void NAME(const T *w, const win_geom *g, T *wt) {                               \
    int64_t Og = g->O / g->G, KK = g->KH * g->KW;                                         \
    for (int64_t k = 0; k < g->G; k++)                                                   \
      for (int64_t o = 0; o < Og; o++)                                                   \
        for (int64_t c = 0; c < g->C; c++) {                                             \
          const T *src = w + ((k * Og + o) * g->C + c) * KK;                             \
          T *dst = wt + ((k * g->C + c) * Og + o) * KK;                                  \
          for (int64_t t = 0; t < KK; t++) dst[t] = src[KK - 1 - t];                     \
        }                                                                                \
  }
DEF_FLIP(flip_f32, float)
DEF_FLIP(flip_f64, double)

/* The geometry of the forward convolution that computes g's input gradient. */
static win_geom transposed(const win_geom *g) {
  win_geom t = *g;
  t.C = g->O / g->G, t.O = g->C * g->G; /* per-group in; all out */
  t.H = g->OH, t.W = g->OW, t.OH = g->H, t.OW = g->W;
  t.ph = g->dh * (g->KH - 1) - g->ph, t.pw = g->dw * (g->KW - 1) - g->pw;
  return t;
}

int op_conv_bwd_data(kiln_dtype dt, const win_geom *g, const char *w, const char *go, char *gx) {
  const char *fn = "aten::convolution_backward";
  size_t es = kiln_dtype_size(dt), bytes = 0, block = 0;
  if (dt == KILN_DTYPE_F32) { /* the weight read flipped in place (Note [Flipped weights]) */
    win_geom t = transposed(g);
    int rc = op_conv_forward_avx512_flipped(&t, (const float *)go, (const float *)w, (float *)gx);
    if (rc != 0) return rc < 0 ? rc : 0;
  }
  if (core_buf_bytes(fn, (uint64_t)(g->O * g->C), (uint64_t)(g->KH * g->KW), es, &bytes) < 0)
    return KILN_ERR_INVALID;
  char *wt = core_block_alloc(bytes ? bytes : 64, &block);
  if (!wt) return core_error(KILN_ERR_NOMEM, "%s: out of memory for %zu bytes", fn, bytes);
  if (dt == KILN_DTYPE_F32) flip_f32((const float *)w, g, (float *)wt);
  else flip_f64((const double *)w, g, (double *)wt);
  win_geom t = transposed(g);
  int rc = op_conv_forward(dt, &t, go, wt, NULL, gx);
  core_block_free(wt, block);
  return rc;
}
