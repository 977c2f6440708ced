/* src/ops/conv_bwd_stride.c: conv2d's float32 input gradient for strides
 * > 1 at AVX-512 as stride-1 forward convolutions of grad_output, one per
 * phase of the input (no col2im).
 *
 * Note [Strided backward data by phases]: with stride s, the input rows
 * ih = s a + r of one phase r in [0, s) receive gout[oh] w[ki] exactly
 * from the taps ki with ki d = r + p (mod s), at oh = a + u(ki), u(ki) =
 * (r + p - ki d) / s. So a phase is a stride-1 convolution of gout (in
 * and out channels swapped) with those taps reversed (tap t reads oh = a -
 * p' + t d', p' = -min u, d' = d / gcd(s, d)), whose H / s x W / s output
 * goes to every s-th input element. Each phase runs conv_avx512.c's
 * implicit forward (near the FMA peak) on a copy of its taps (transposed
 * and flipped; all phases together are one copy of the weight), instead
 * of the GEMM W^T @ gout into a col buffer nine times the input and its
 * col2im (resnet18's three 3x3 stride-2 input gradients and three 1x1 ran
 * at 22-57 GFLOP/s, 13 ms of the training step at batch 16, one thread).
 * A phase without taps adds nothing. Where the output has few positions
 * (N OH OW < 256: layer 4's, batch 16) the phase convs' tiles are mostly
 * the weight copy's and col2im stays faster (4.2 against 2.8-3.9 ms), as
 * for 1x1 kernels (one GEMM with a cheap col2im, 0.3-0.6 ms either way). Each
 * input element is one dot product over (o, taps): rounded differently
 * from col2im's per-tap sums. Groups, padding past the taps (p' < 0) and
 * offsets near int32 keep col2im too. */
#include <limits.h>
#include <string.h>

#include "conv.h"

/* The taps of phase r of one dimension (kernel k, stride s, padding p,
 * dilation d): their count, and the phase's padding and dilation; taps[t]
 * is the kernel index tap t of the phase conv reads (descending). */
static int64_t phase_taps(int64_t r, int64_t k, int64_t s, int64_t p, int64_t d, int64_t *taps,
                          int64_t *pad, int64_t *dil) {
  int64_t m = 0, umin = 0;
  for (int64_t ki = k - 1; ki >= 0; ki--) {
    int64_t num = r + p - ki * d;
    if (((num % s) + s) % s != 0) continue;
    int64_t u = num >= 0 ? num / s : -((-num) / s);
    if (m == 0) umin = u;
    taps[m++] = ki;
  }
  int64_t gs = s, gd = d; /* gcd(s, d) */
  while (gd) {
    int64_t t = gs % gd;
    gs = gd, gd = t;
  }
  *pad = -umin, *dil = d / gs;
  return m;
}

/* Phase r's output size: the inputs r, r + s, ... below n. */
static int64_t phase_len(int64_t n, int64_t r, int64_t s) { return n > r ? (n - r + s - 1) / s : 0; }

bool op_conv_bwd_stride_applies(kiln_dtype dt, const win_geom *g) {
  if (dt != KILN_DTYPE_F32 || core_cpu_level() != CORE_CPU_AVX512 || !op_conv_implicit ||
      g->G != 1 || (g->sh == 1 && g->sw == 1) || g->KH > 64 || g->KW > 64 ||
      g->KH * g->KW == 1 || g->N * g->OH * g->OW < 256)
    return false;
  /* every offset the phase convs index in int32 (conv_avx512.c's checks) */
  int64_t lim = INT32_MAX / 64;
  if (g->N * g->O * g->OH * g->OW > lim || g->N * g->C * g->H * g->W > lim ||
      g->O * g->KH * g->KW > lim / 32 || g->OH * g->OW > lim || g->dh * g->KH > 1024 ||
      g->dw * g->KW > 1024)
    return false;
  int64_t taps[64], pad, dil;
  for (int64_t r = 0; r < g->sh; r++)
    if (phase_taps(r, g->KH, g->sh, g->ph, g->dh, taps, &pad, &dil) > 0 && pad < 0) return false;
  for (int64_t r = 0; r < g->sw; r++)
    if (phase_taps(r, g->KW, g->sw, g->pw, g->dw, taps, &pad, &dil) > 0 && pad < 0) return false;
  return true;
}

int op_conv_bwd_stride(const win_geom *g, const float *w, const float *go, float *gx) {
  const char *fn = "aten::convolution_backward";
  int64_t KK = g->KH * g->KW, Hp = phase_len(g->H, 0, g->sh), Wp = phase_len(g->W, 0, g->sw);
  size_t wb = 0, ob = 0, wneed = (size_t)(g->O * g->C * KK) * sizeof(float);
  size_t oneed = (size_t)(g->N * g->C * Hp * Wp) * sizeof(float);
  float *wp = core_block_alloc(wneed ? wneed : 64, &wb);
  float *tmp = wp ? core_block_alloc(oneed ? oneed : 64, &ob) : NULL;
  int rc = 0;
  if (!tmp) {
    rc = core_error(KILN_ERR_NOMEM, "%s: out of memory for %zu bytes", fn, wneed + oneed);
    goto done;
  }
  for (int64_t rh = 0; rh < g->sh; rh++)
    for (int64_t rw = 0; rw < g->sw; rw++) {
      int64_t th[64], tw[64];
      win_geom t = {.N = g->N, .C = g->O, .H = g->OH, .W = g->OW, .O = g->C, .sh = 1, .sw = 1,
                    .G = 1};
      t.KH = phase_taps(rh, g->KH, g->sh, g->ph, g->dh, th, &t.ph, &t.dh);
      t.KW = phase_taps(rw, g->KW, g->sw, g->pw, g->dw, tw, &t.pw, &t.dw);
      t.OH = phase_len(g->H, rh, g->sh), t.OW = phase_len(g->W, rw, g->sw);
      if (t.KH == 0 || t.KW == 0 || t.OH == 0 || t.OW == 0) continue; /* adds nothing */
      /* wp[c, o, a, b] = w[o, c, th[a], tw[b]] */
      int64_t tk = t.KH * t.KW;
      for (int64_t o = 0; o < g->O; o++) /* w read in order */
        for (int64_t c = 0; c < g->C; c++) {
          const float *src = w + (o * g->C + c) * KK;
          float *dst = wp + (c * g->O + o) * tk;
          for (int64_t a = 0; a < t.KH; a++)
            for (int64_t b = 0; b < t.KW; b++) dst[a * t.KW + b] = src[th[a] * g->KW + tw[b]];
        }
      rc = op_conv_forward_avx512(&t, go, wp, NULL, tmp);
      if (rc <= 0) { /* op_conv_bwd_stride_applies promised it applies */
        if (rc == 0) rc = core_error(KILN_ERR_STATE, "%s: a phase conv declined", fn);
        goto done;
      }
      rc = 0;
      for (int64_t nc = 0; nc < g->N * g->C; nc++) /* every s-th input element */
        for (int64_t a = 0; a < t.OH; a++) {
          float *row = gx + (nc * g->H + rh + a * g->sh) * g->W + rw;
          const float *v = tmp + (nc * t.OH + a) * t.OW;
          for (int64_t b = 0; b < t.OW; b++) row[b * g->sw] += v[b];
        }
    }
done:
  if (tmp) core_block_free(tmp, ob);
  if (wp) core_block_free(wp, wb);
  return rc;
}
