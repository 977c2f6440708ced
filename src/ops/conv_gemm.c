/* src/ops/conv_gemm.c: conv2d's forward and backward kernels as GEMMs
 * over the im2col'd images of a whole batch (Note [Conv layout] in conv.c).
 *
 * Note [Conv batching]: one GEMM per image has as many columns as the
 * image has output positions, which at resnet18's later stages is tiny
 * (2x2 or 4x4: 4 or 16 columns against the AVX-512 kernel's 32-wide
 * panels, mostly zero padding), and every image packs the whole weight
 * matrix again. So the images of a chunk (as many as keep each scratch
 * matrix under op_conv_chunk_bytes, 4 MiB: 6 of resnet18's 64x64 images at
 * its first stages, all 16 at the last; a smaller col stays in cache for
 * the GEMM's packing, 8% faster inference than 32 MiB) are
 * laid side by side: col[K, n L] holds image j's im2col in columns
 * [j L, (j + 1) L), and one GEMM per group does the chunk:
 *   forward      out'[O, n L] = W[O, K] @ col, then scattered to [n, O, L]
 *                with the bias added;
 *   grad weight  gW[O, K] += gout'[O, n L] @ col^T (gout' gathered from
 *                [n, O, L]), the sum over the chunk's images and positions
 *                inside the GEMM;
 *   grad input   gcol[K, n L] = W^T @ gout', then col2im of each image.
 * The GEMMs thread themselves (Note [BLAS threads] in gemm.c); the
 * im2col, col2im, gather and scatter loops run over the images in
 * parallel. A chunk of one image with a pointwise kernel (1x1, stride 1,
 * no padding) reads the input and writes the output in place: no copies.
 * A chunk of few columns (batch 1 at 2x2 or 4x4) runs the transposed
 * product col^T W^T instead, whose few rows waste less of the kernel's
 * panels (resnet18 b1 inference 16.3 -> 11.6-12.4 ms, CPU time).
 *
 * Note [Small-weight chunks]: a weight of at most 64 KiB per group is
 * cheap to pack again, and its GEMM does few flops per column (the
 * Fashion-MNIST CNN's 5x5 convolutions: K = 25 and 400), so it is bound by
 * the scratch's memory traffic: when one image's scratch matrix is at most
 * 128 KiB, such a conv takes chunks of at most 256 KiB per matrix, which
 * stay in a 1 MiB L2 with the chunk's input and output. The CNN's
 * training step took 16-34% less CPU time than with 4 MiB chunks (batch 64
 * and 128, one thread, a loaded machine), so a batch-64 step costs no more
 * per image than batch 128, as 2 data-parallel ranks of 64 need (issue
 * 18). resnet18 keeps 4 MiB but for its first 1x1 downsample (8 images a
 * chunk instead of 16); its training step measured 0.92-1.03x (noise).
 *
 * Note [Weight gradient transposed]: where the batch has many output
 * positions (N L >= 1024: resnet18's conv1 to layer2 at 64x64, batch 16),
 * the weight gradient is computed as its transpose gW^T[K, O] = col @
 * gout'^T, then added to gW: the large col is then the GEMM's A, read in
 * place or packed by rows, not B transposed 16 x 16 into panels, and
 * gout' (K / O times smaller) is the packed B; 1.05-1.5x faster GEMMs. At
 * fewer positions the [K, O] transpose would cost more than it saves.
 * The K order of every dot product is the per-image one, so forward
 * results do not depend on the chunking; the weight gradient sums the
 * images inside one GEMM (not per thread), which rounds differently. */
#include <omp.h>
#include <string.h>

#include "conv.h"

size_t op_conv_chunk_bytes = (size_t)4 << 20;

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

/* The output columns [ow0, ow1) whose input column ow*sw + off is inside
 * [0, W): the loops below copy that run and zero (or skip) the rest. */
static void valid_cols(int64_t off, int64_t sw, int64_t W, int64_t OW, int64_t *ow0,
                       int64_t *ow1) {
  int64_t a = off >= 0 ? 0 : ceil_div(-off, sw), b = ceil_div(W - off, sw);
  if (b > OW) b = OW;
  if (a > b) a = b;
  *ow0 = a;
  *ow1 = b;
}

/* GCC turns the short zero and copy loops below into memset/memmove calls
 * (-ftree-loop-distribute-patterns), which at resnet's 2x2 and 4x4 stages
 * cost more than the few elements they move; these functions keep loops. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_CALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_CALLS
#endif

/* col[row (c, ki, kj), (oh, ow)] at col[row * ld + oh * OW + ow] = x[c,
 * ih, iw] (0 in the padding) for one image's g->C channels. The rows and
 * columns in range depend on (ki, kj) only, so they are found once for
 * all channels; the padding rows are zeroed as one block each, and where
 * a kernel offset reads whole input rows in order (stride 1, no column
 * offset, OW == W) the rows in range are one copy. */
#define DEF_IM2COL(NAME, T)                                                              \
  NO_CALLS static void NAME(const T *x, const win_geom *g, T *col, int64_t ld) {         \
    int64_t OH = g->OH, OW = g->OW, HW = g->H * g->W;                                    \
    for (int64_t ki = 0; ki < g->KH; ki++) {                                             \
      int64_t offh = ki * g->dh - g->ph, oh0, oh1;                                       \
      valid_cols(offh, g->sh, g->H, OH, &oh0, &oh1);                                     \
      for (int64_t kj = 0; kj < g->KW; kj++) {                                           \
        int64_t off = kj * g->dw - g->pw, ow0, ow1;                                      \
        valid_cols(off, g->sw, g->W, OW, &ow0, &ow1);                                    \
        bool whole = g->sh == 1 && g->sw == 1 && off == 0 && OW == g->W;                 \
        for (int64_t c = 0; c < g->C; c++) {                                             \
          T *row = col + ((c * g->KH + ki) * g->KW + kj) * ld;                           \
          const T *xc = x + c * HW;                                                      \
          for (int64_t i = 0; i < oh0 * OW; i++) row[i] = 0;                             \
          for (int64_t i = oh1 * OW; i < OH * OW; i++) row[i] = 0;                       \
          if (whole) {                                                                   \
            if (oh1 > oh0)                                                               \
              memcpy(row + oh0 * OW, xc + (oh0 + offh) * g->W,                           \
                     (size_t)((oh1 - oh0) * OW) * sizeof(T));                            \
            continue;                                                                    \
          }                                                                              \
          for (int64_t oh = oh0; oh < oh1; oh++) {                                       \
            T *r = row + oh * OW;                                                        \
            const T *xr = xc + (oh * g->sh + offh) * g->W + off;                         \
            for (int64_t ow = 0; ow < ow0; ow++) r[ow] = 0;                              \
            if (g->sw == 1 && ow1 - ow0 > 16)                                            \
              memcpy(r + ow0, xr + ow0, (size_t)(ow1 - ow0) * sizeof(T));                \
            else if (g->sw == 1) /* short rows: no call */                               \
              for (int64_t ow = ow0; ow < ow1; ow++) r[ow] = xr[ow];                     \
            else                                                                         \
              for (int64_t ow = ow0; ow < ow1; ow++) r[ow] = xr[ow * g->sw];             \
            for (int64_t ow = ow1; ow < OW; ow++) r[ow] = 0;                             \
          }                                                                              \
        }                                                                                \
      }                                                                                  \
    }                                                                                    \
  }

/* x[C, H, W] += col2im(col): each column entry adds back where im2col read
 * it (rows of col ld apart). */
#define DEF_COL2IM(NAME, T)                                                              \
  static void NAME(const T *col, const win_geom *g, T *x, int64_t ld) {                  \
    for (int64_t c = 0; c < g->C; c++)                                                   \
      for (int64_t ki = 0; ki < g->KH; ki++)                                             \
        for (int64_t kj = 0; kj < g->KW; kj++) {                                         \
          const T *row = col + ((c * g->KH + ki) * g->KW + kj) * ld;                     \
          int64_t off = kj * g->dw - g->pw, ow0, ow1;                                    \
          valid_cols(off, g->sw, g->W, g->OW, &ow0, &ow1);                               \
          for (int64_t oh = 0; oh < g->OH; oh++) {                                       \
            int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                \
            if (ih < 0 || ih >= g->H) continue;                                          \
            const T *r = row + oh * g->OW;                                               \
            T *xr = x + (c * g->H + ih) * g->W + off;                                    \
            if (g->sw == 1)                                                              \
              for (int64_t ow = ow0; ow < ow1; ow++) xr[ow] += r[ow];                    \
            else                                                                         \
              for (int64_t ow = ow0; ow < ow1; ow++) xr[ow * g->sw] += r[ow];            \
          }                                                                              \
        }                                                                                \
  }

DEF_IM2COL(im2col_f32, float)
DEF_IM2COL(im2col_f64, double)
DEF_COL2IM(col2im_f32, float)
DEF_COL2IM(col2im_f64, double)

static bool is_pointwise(const win_geom *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* A loop over n images runs in parallel when there are several and the
 * work (elements touched) is worth a parallel region. */
#define PAR_IMAGES(n, work) ((n) > 1 && (work) >= OP_PARALLEL_MIN)

/* im2col of n images (group channels at x, images xs elements apart) into
 * col[K, n L]: image j's columns start at j L. */
static void im2col_images(kiln_dtype dt, const win_geom *g, const char *x, int64_t xs,
                          int64_t n, char *col, int64_t ld) {
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW;
  size_t es = kiln_dtype_size(dt);
#pragma omp parallel for schedule(static) if (PAR_IMAGES(n, n * K * L))
  for (int64_t j = 0; j < n; j++) {
    const char *xj = x + (size_t)(j * xs) * es;
    char *cj = col + (size_t)(j * L) * es;
    if (dt == KILN_DTYPE_F32) im2col_f32((const float *)xj, g, (float *)cj, ld);
    else im2col_f64((const double *)xj, g, (double *)cj, ld);
  }
}

/* The inverse scatter-add of im2col_images into n images of gx. */
static void col2im_images(kiln_dtype dt, const win_geom *g, const char *col, int64_t ld,
                          char *gx, int64_t xs, int64_t n) {
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW;
  size_t es = kiln_dtype_size(dt);
#pragma omp parallel for schedule(static) if (PAR_IMAGES(n, n * K * L))
  for (int64_t j = 0; j < n; j++) {
    const char *cj = col + (size_t)(j * L) * es;
    char *xj = gx + (size_t)(j * xs) * es;
    if (dt == KILN_DTYPE_F32) col2im_f32((const float *)cj, g, (float *)xj, ld);
    else col2im_f64((const double *)cj, g, (double *)xj, ld);
  }
}

/* dst[l] = epilogue(src[l]) for output channel o (src may be dst; res,
 * if given, the residual's row). */
#define DEF_EPI(NAME, T)                                                                 \
  static void NAME(const conv_epilogue *ep, int64_t o, int64_t L, const T *src, T *dst,  \
                   const T *res) {                                                       \
    T t = ep->shift ? ((const T *)ep->shift)[o] : (T)0;                                  \
    if (ep->scale) {                                                                     \
      T s = ((const T *)ep->scale)[o];                                                   \
      for (int64_t l = 0; l < L; l++) dst[l] = src[l] * s + t;                           \
    } else {                                                                             \
      for (int64_t l = 0; l < L; l++) dst[l] = src[l] + t;                               \
    }                                                                                    \
    if (res)                                                                             \
      for (int64_t l = 0; l < L; l++) dst[l] += res[l];                                  \
    if (ep->relu)                                                                        \
      for (int64_t l = 0; l < L; l++) dst[l] = dst[l] < 0 ? (T)0 : dst[l];               \
  }

DEF_EPI(epi_f32, float)
DEF_EPI(epi_f64, double)

static void epilogue(kiln_dtype dt, const conv_epilogue *ep, int64_t o, int64_t L,
                     const char *src, char *dst, const char *res) {
  if (dt == KILN_DTYPE_F32)
    epi_f32(ep, o, L, (const float *)src, (float *)dst, (const float *)res);
  else
    epi_f64(ep, o, L, (const double *)src, (double *)dst, (const double *)res);
}

/* Rows o of m[O, n L] <-> images [n, O, L]: to_images scatters m into
 * img through the epilogue ep (res: the residual's images, or NULL), else
 * gathers img into m. */
NO_CALLS static void regroup(kiln_dtype dt, int64_t O, int64_t L, int64_t n, char *m, char *img,
                    const conv_epilogue *ep, const char *res, bool to_images) {
  size_t es = kiln_dtype_size(dt);
  int64_t ld = n * L;
  bool copy = !ep || (!ep->scale && !ep->shift && !ep->residual && !ep->relu);
#pragma omp parallel for schedule(static) if (PAR_IMAGES(n, n * O * L))
  for (int64_t j = 0; j < n; j++)
    for (int64_t o = 0; o < O; o++) {
      char *mr = m + (size_t)(o * ld + j * L) * es, *ir = img + (size_t)((j * O + o) * L) * es;
      if (!to_images && dt == KILN_DTYPE_F32 && L <= 16) { /* short rows: no call */
        for (int64_t l = 0; l < L; l++) ((float *)mr)[l] = ((const float *)ir)[l];
      } else if (!to_images) {
        memcpy(mr, ir, (size_t)L * es);
      } else if (copy) {
        memcpy(ir, mr, (size_t)L * es);
      } else {
        epilogue(dt, ep, o, L, mr, ir, res ? res + (size_t)((j * O + o) * L) * es : NULL);
      }
    }
}

/* Images per chunk (>= 1) so that each [max(K, O), n L] scratch matrix
 * stays under op_conv_chunk_bytes; -1 with the error set if one image's is
 * too large to allocate. */
static int64_t chunk_images(const char *fn, const win_geom *g, size_t es, size_t *per) {
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW;
  if (core_buf_bytes(fn, (uint64_t)(K > g->O ? K : g->O), (uint64_t)L, es, per) < 0) return -1;
  /* Note [Small-weight chunks] */
  size_t cap = op_conv_chunk_bytes, small = (size_t)256 << 10;
  if (cap > small && 2 * *per <= small &&
      (uint64_t)(g->O / g->G) * (uint64_t)K * es <= (64u << 10))
    cap = small;
  int64_t nb = *per ? (int64_t)(cap / *per) : g->N;
  return nb < 1 ? 1 : nb > g->N ? g->N : nb;
}

/* A scratch block of n * per bytes (n <= 3 matrices); NULL with the error
 * set on failure. */
static char *scratch(const char *fn, size_t per, int64_t nb, int n, size_t *block) {
  size_t all = 0;
  if (core_buf_bytes(fn, per, (uint64_t)nb, (uint64_t)n, &all) < 0) return NULL;
  char *p = core_block_alloc(all ? all : 64, block);
  if (!p) core_error(KILN_ERR_NOMEM, "%s: out of memory for %zu bytes of scratch", fn, all);
  return p;
}

int op_conv_forward(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                    const char *bias, char *out) {
  conv_epilogue ep = {.shift = bias};
  return op_conv_forward_ep(dt, g, x, w, &ep, out);
}

int op_conv_forward_ep(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                       const conv_epilogue *ep, char *out) {
  const char *fn = "aten::conv2d";
  conv_epilogue none = {0};
  if (!ep) ep = &none;
  if (dt == KILN_DTYPE_F32 && op_conv_implicit) { /* Note [Implicit im2col] in conv_avx512.c */
    int rc = op_conv_forward_avx512(g, (const float *)x, (const float *)w, ep, (float *)out);
    if (rc != 0) return rc < 0 ? rc : 0;
  }
  /* only a bias: the GEMM adds it (one image) or the scatter does */
  bool plain = !ep->scale && !ep->residual && !ep->relu;
  const char *bias = ep->shift;
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW, Og = g->O / g->G;
  int64_t xs = g->G * g->C * g->H * g->W, os = g->O * L, gxs = g->C * g->H * g->W;
  size_t es = kiln_dtype_size(dt), per = 0, block = 0;
  int64_t nb = chunk_images(fn, g, es, &per);
  if (nb < 0) return KILN_ERR_INVALID;
  bool direct = nb == 1 && is_pointwise(g); /* the input is col */
  char *buf = scratch(fn, per, nb, 3, &block);
  if (!buf) return KILN_ERR_NOMEM;
  /* col [K, nL]; out' [O, nL]; out'^T [nL, O] */
  char *col = buf, *mid = buf + per * (size_t)nb, *midt = mid + per * (size_t)nb;
  for (int64_t i0 = 0; i0 < g->N; i0 += nb) {
    core_poll(); /* Note [Kernel poll] */
    int64_t n = g->N - i0 < nb ? g->N - i0 : nb, ld = n * L;
    /* few columns (batch 1 at 2x2 or 4x4): the transposed product, whose
     * rows fill the kernel's 12- or 6-row panels better than the columns
     * its 32- or 16-wide ones; out' is its transpose */
    bool swap = ld < 32 && Og >= 2 * ld;
    for (int64_t k = 0; k < g->G; k++) {
      const char *b = x + (size_t)(i0 * xs + k * gxs) * es, *wk = w + (size_t)(k * Og * K) * es;
      int64_t ldb = L;
      if (!direct) {
        im2col_images(dt, g, b, xs, n, col, ld);
        b = col, ldb = ld;
      }
      if (swap) {
        op_gemm(dt, true, true, ld, Og, K, 1.0, b, ldb, wk, K, 0.0, midt, Og);
        char *mk = mid + (size_t)(k * Og * ld) * es;
        for (int64_t o = 0; o < Og; o++)
          for (int64_t l = 0; l < ld; l++) {
            if (dt == KILN_DTYPE_F32) ((float *)mk)[o * ld + l] = ((const float *)midt)[l * Og + o];
            else ((double *)mk)[o * ld + l] = ((const double *)midt)[l * Og + o];
          }
        continue;
      }
      if (n > 1) {
        op_gemm(dt, false, false, Og, ld, K, 1.0, wk, K, b, ldb, 0.0,
                mid + (size_t)(k * Og * ld) * es, ld);
        continue;
      }
      /* one image: straight into the output, the bias as its addend */
      char *c = out + (size_t)(i0 * os + k * Og * L) * es;
      if (!plain) { /* the epilogue on each row just written (in cache) */
        op_gemm(dt, false, false, Og, L, K, 1.0, wk, K, b, ldb, 0.0, c, L);
        for (int64_t o = 0; o < Og; o++) {
          size_t at = (size_t)(i0 * os + (k * Og + o) * L) * es;
          epilogue(dt, ep, k * Og + o, L, out + at, out + at,
                   ep->residual ? ep->residual + at : NULL);
        }
        continue;
      }
      for (int64_t o = 0; bias && o < Og; o++)
        for (int64_t l = 0; l < L; l++) {
          if (dt == KILN_DTYPE_F32) ((float *)c)[o * L + l] = ((const float *)bias)[k * Og + o];
          else ((double *)c)[o * L + l] = ((const double *)bias)[k * Og + o];
        }
      op_gemm(dt, false, false, Og, L, K, 1.0, wk, K, b, ldb, bias ? 1.0 : 0.0, c, L);
    }
    if (n > 1 || swap)
      regroup(dt, g->O, L, n, mid, out + (size_t)(i0 * os) * es, ep,
              ep->residual ? ep->residual + (size_t)(i0 * os) * es : NULL, true);
  }
  core_block_free(buf, block);
  return 0;
}

int op_conv_backward(kiln_dtype dt, const win_geom *g, const bool mask[3], const char *x,
                     const char *w, const char *go, char *gx, char *gw) {
  const char *fn = "aten::convolution_backward";
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW, Og = g->O / g->G;
  int64_t xs = g->G * g->C * g->H * g->W, os = g->O * L, gxs = g->C * g->H * g->W;
  size_t es = kiln_dtype_size(dt), per = 0, block = 0;
  if (!mask[0] && !mask[1]) return 0;
  int64_t nb = chunk_images(fn, g, es, &per);
  if (nb < 0) return KILN_ERR_INVALID;
  bool direct = nb == 1 && is_pointwise(g);
  char *buf = scratch(fn, per, nb, 3, &block);
  if (!buf) return KILN_ERR_NOMEM;
  size_t m = per * (size_t)nb, wbytes = (size_t)(g->O * K) * es, wblock = 0;
  char *col = buf, *gcol = buf + m, *got = buf + 2 * m; /* [K, nL], [K, nL], [O, nL] */
  /* Note [Weight gradient transposed] */
  char *gwt = mask[1] && g->N * L >= 1024 ? core_block_alloc(wbytes, &wblock) : NULL;
  if (gwt) memset(gwt, 0, wbytes);
  for (int64_t i0 = 0; i0 < g->N; i0 += nb) {
    core_poll(); /* Note [Kernel poll] */
    int64_t n = g->N - i0 < nb ? g->N - i0 : nb, ld = n * L;
    const char *gt = go + (size_t)(i0 * os) * es;
    int64_t ldg = L;
    if (n > 1) {
      regroup(dt, g->O, L, n, got, (char *)gt, NULL, NULL, false);
      gt = got, ldg = ld;
    }
    for (int64_t k = 0; k < g->G; k++) {
      const char *gk = gt + (size_t)(k * Og * ldg) * es, *wk = w + (size_t)(k * Og * K) * es;
      if (mask[1]) {
        const char *b = x + (size_t)(i0 * xs + k * gxs) * es;
        int64_t ldb = L;
        if (!direct) {
          im2col_images(dt, g, b, xs, n, col, ld);
          b = col, ldb = ld;
        }
        if (gwt)
          op_gemm(dt, false, true, K, Og, ld, 1.0, b, ldb, gk, ldg, 1.0,
                  gwt + (size_t)(k * Og * K) * es, Og);
        else
          op_gemm(dt, false, true, Og, K, ld, 1.0, gk, ldg, b, ldb, 1.0,
                  gw + (size_t)(k * Og * K) * es, K);
      }
      if (mask[0]) {
        char *gxk = gx + (size_t)(i0 * xs + k * gxs) * es;
        if (direct) {
          op_gemm(dt, true, false, K, L, Og, 1.0, wk, K, gk, ldg, 1.0, gxk, L);
        } else {
          op_gemm(dt, true, false, K, ld, Og, 1.0, wk, K, gk, ldg, 0.0, gcol, ld);
          col2im_images(dt, g, gcol, ld, gxk, xs, n);
        }
      }
    }
  }
  for (int64_t k = 0; gwt && k < g->G; k++) /* gw[o, kk] += gwt[kk, o] per group */
    for (int64_t o = 0; o < Og; o++)
      for (int64_t kk = 0; kk < K; kk++) {
        size_t at = (size_t)((k * Og + o) * K + kk), from = (size_t)(k * Og * K + kk * Og + o);
        if (dt == KILN_DTYPE_F32) ((float *)gw)[at] += ((const float *)gwt)[from];
        else ((double *)gw)[at] += ((const double *)gwt)[from];
      }
  if (gwt) core_block_free(gwt, wblock);
  core_block_free(buf, block);
  return 0;
}
