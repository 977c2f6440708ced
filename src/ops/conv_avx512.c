/* src/ops/conv_avx512.c: conv2d's float32 forward at AVX-512 without an
 * im2col matrix: a GEMM whose image operand is packed straight from the
 * input, with the epilogue applied as each tile leaves the registers.
 *
 * Note [Implicit im2col]: profiled on resnet18 at 3x64x64 (perf, 1
 * thread), the im2col + GEMM path of conv_gemm.c spent, at batch 16, 18%
 * in im2col, 13% packing that col matrix again into the GEMM's panels, 3%
 * transposing weight panels and 3% in the epilogue's scatter, against 49%
 * in the micro-kernels; at batch 1, 43% transposing the weights into
 * panels (the swapped product of its 2x2 and 4x4 stages: the weights are
 * 45 MB, streamed from memory three times) against 32% multiplying. Here:
 *
 * - out[O, P] = W[O, K] @ col[K, P] over the P = N OH OW positions of the
 *   whole batch (columns (n, oh, ow)). The micro-kernel keeps an 8 x 32
 *   tile (8 output channels, 32 positions) in 16 zmm registers over the
 *   WHOLE K, so every output is written once, with scale, shift, the
 *   residual and relu applied on the way (Note [Conv epilogue]). 8 rows
 *   divide every channel count of resnet18 (12 rows left 11% of the 64-row
 *   products as padding).
 * - W is read where it lies (8 rows, one broadcast from each per k; each
 *   cache line serves 16 k), so weights are never packed or copied.
 * - The image operand is packed once per block of positions into 32-wide
 *   panels [K][32] (the block sized so that its panels stay in L2), each
 *   16-lane vector of a panel row (c, ki, kj) read directly from the input
 *   as its lanes' offsets allow: one masked load where they are
 *   consecutive (a stride-1 output row; at "same" padding also 8x8 and 4x4
 *   planes whole, the padding lanes masked off), two and a permute where
 *   they are 2 apart (stride 2), four 4-lane loads where they are 4 runs of
 *   4 (2x2 planes of 4 images), else a masked gather (gathers were 18% of
 *   batch 16's time before the other three). The masks and offsets depend
 *   on (ki, kj) and the position only, so they are tabulated once per block
 *   for all channels.
 * - Outputs go straight to [N, O, OH, OW]: a 16-lane vector of positions
 *   in one image is one store; one that spans images (OH OW not a multiple
 *   of 16) is a scatter.
 * - Few positions (P <= 16: batch 1 at resnet18's 2x2 and 4x4 stages),
 *   where 32-wide panels would be mostly padding, take dot products along
 *   K instead: the P receptive fields are gathered into rows [P][K] and
 *   each output is a dot of a weight row with one of them, 4 channels x 4
 *   positions at a time; the weights are streamed from memory once.
 *
 * Every output's sum runs over k in order within one accumulator lane set,
 * independent of blocking and threads, so results do not depend on the
 * thread count or on how the positions are blocked. They differ from
 * conv_gemm.c's by float32 rounding (its K slices add partial sums), and
 * the dot-product path (16 lanes summed at the end) rounds differently
 * from the tiles: a batch of one small image can differ from the same
 * image inside a larger batch in the last bits. Measured (CPU time, one
 * thread, loaded machine, alternating runs against conv_gemm.c's path):
 * resnet18 inference b16 jit 82.6/75.9 -> 53.4/52.6 ms, b1 14.6/11.2 ->
 * 6.4/6.1 ms; at b16 the tiles are now 74% of the time and run near the
 * FMA peak, packing 10%. Taken only at the AVX-512 level, for float32,
 * and while every element offset fits in int32 (the gathers' indices);
 * else op_conv_forward_ep runs conv_gemm.c's path. A 3x3 stride-1 conv
 * with enough tiles goes to conv_winograd.c first (Note [Winograd
 * F(2x2,3x3)]). */
#include <immintrin.h>
#include <limits.h>
#include <omp.h>

#include "conv.h"

#ifdef __clang__ /* clang has no GCC target pragma (the fuzz build, make fuzz) */
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl",                        \
                  "avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt") /* CORE_TARGET_AVX512 */
#endif

#include "simd512.h"

bool op_conv_implicit = true;

enum { MR = 8, NR = 32, NCMAX = 1024, DOT_MAX = 16 };
#ifndef FLIP_AHEAD
#define FLIP_AHEAD 6 /* o's ahead that tile_flipped prefetches its weights */
#endif
#ifndef PREFETCH
#define PREFETCH 256 /* floats ahead on each weight row the dot products stream */
#endif
/* bytes of packed image panels per block (they stay in the 1 MiB L2) */
#define BLOCK_BYTES ((size_t)512 << 10)

/* Everything a block's tiles need about the convolution (one group). */
typedef struct conv_job {
  const win_geom *g;
  const float *x, *w;    /* the group's input channels and weight rows */
  const conv_epilogue *ep;
  float *out;
  int64_t K, L, P, Og;   /* K = C KH KW, L = OH OW, P = N L */
  int64_t ch0;           /* the group's first output channel */
  int64_t xs;            /* elements between images of x */
  int64_t fkk;           /* > 0: w is a weight [K / fkk][Og][fkk] read flipped
                          * (Note [Flipped weights]); 0: w is [Og][K] */
} conv_job;

/* How a panel vector's 16 lanes are read from the input (offsets of the
 * lanes inside the image, for kernel offset (0, 0) and channel 0). */
enum { READ_GATHER, READ_RUN, READ_RUN2, READ_QUADS };

/* A block of nc positions [p0, p0 + nc): its 16-lane vectors' tables. */
typedef struct conv_block {
  int64_t p0, nc, nv;    /* nv = ceil(nc / 16) vectors */
  __m512i *gidx;         /* [nv] the lanes' input offsets at (ki, kj) = (0, 0), channel 0 */
  __m512i *oidx;         /* [nv] output offsets n O L + l (channel 0) */
  int32_t *mode;         /* [nv] READ_*: the lanes consecutive (a run), 2 apart, or in 4 runs of 4 */
  int32_t *cont;         /* [nv] lane 0's output offset if the lanes are consecutive there, else -1 */
  __mmask16 *valid;      /* [nv] lanes inside [p0, p0 + nc) */
  __mmask16 *mk;         /* [KH KW][nv] lanes whose input (ih, iw) is inside the image */
  int32_t *koff;         /* [KH KW] offset of (ki, kj) in the input */
  float *bp;             /* [ceil(nc / 32)][K][32] packed panels */
} conv_block;

/* Fills b's tables for positions [p0, p0 + nc). */
static void block_tables(const conv_job *j, conv_block *b, int64_t p0, int64_t nc) {
  const win_geom *g = j->g;
  int64_t KK = g->KH * g->KW;
  b->p0 = p0, b->nc = nc, b->nv = (nc + 15) / 16;
  for (int64_t kk = 0; kk < KK; kk++)
    b->koff[kk] = (int32_t)((kk / g->KW) * g->dh * g->W + (kk % g->KW) * g->dw);
  for (int64_t v = 0; v < b->nv; v++) {
    int32_t gi[16], oi[16], ihb[16], iwb[16];
    __mmask16 val = 0;
    bool run = true, run2 = true, quads = true, cont = true;
    for (int l = 0; l < 16; l++) {
      int64_t p = p0 + v * 16 + l;
      if (p >= p0 + nc) { /* past the block: masked off everywhere */
        gi[l] = oi[l] = 0;
        ihb[l] = iwb[l] = INT32_MIN / 2;
        continue;
      }
      int64_t n = p / j->L, q = p % j->L, oh = q / g->OW, ow = q % g->OW;
      ihb[l] = (int32_t)(oh * g->sh - g->ph);
      iwb[l] = (int32_t)(ow * g->sw - g->pw);
      gi[l] = (int32_t)(n * j->xs + ihb[l] * g->W + iwb[l]);
      oi[l] = (int32_t)(n * g->O * j->L + q);
      val |= (__mmask16)(1u << l);
      run = run && gi[l] == gi[0] + l;
      run2 = run2 && gi[l] == gi[0] + 2 * l;
      quads = quads && gi[l] == gi[l & ~3] + (l & 3);
      cont = cont && oi[l] == oi[0] + l;
    }
    b->gidx[v] = _mm512_loadu_si512(gi);
    b->oidx[v] = _mm512_loadu_si512(oi);
    b->mode[v] = run ? READ_RUN : run2 ? READ_RUN2 : quads ? READ_QUADS : READ_GATHER;
    b->cont[v] = cont ? oi[0] : -1;
    b->valid[v] = val;
    __m512i vh = _mm512_loadu_si512(ihb), vw = _mm512_loadu_si512(iwb);
    __m512i H = _mm512_set1_epi32((int32_t)g->H), W = _mm512_set1_epi32((int32_t)g->W);
    for (int64_t kk = 0; kk < KK; kk++) { /* (unsigned) ih < H and iw < W */
      __m512i ih = _mm512_add_epi32(vh, _mm512_set1_epi32((int32_t)((kk / g->KW) * g->dh)));
      __m512i iw = _mm512_add_epi32(vw, _mm512_set1_epi32((int32_t)((kk % g->KW) * g->dw)));
      __mmask16 m = _mm512_mask_cmplt_epu32_mask(val, ih, H);
      b->mk[kk * b->nv + v] = _mm512_mask_cmplt_epu32_mask(m, iw, W);
    }
  }
}

/* The 16 lanes of one panel vector, read at offset off (channel and
 * kernel offset) from x: lanes outside m read as 0. A masked-off lane's
 * address is never touched (masked loads), so offsets past the image's
 * ends in the padding are harmless. */
static inline __m512 read_vec(const conv_block *b, int64_t v, const float *x, int32_t off,
                              __mmask16 m) {
  int32_t o0 = _mm_cvtsi128_si32(_mm512_castsi512_si128(b->gidx[v])) + off;
  switch (b->mode[v]) {
  case READ_RUN: return _mm512_maskz_loadu_ps(m, x + o0);
  case READ_RUN2: { /* 32 inputs, the even ones */
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    uint32_t m2 = _pdep_u32(m, 0x55555555u);
    __m512 lo = _mm512_maskz_loadu_ps((__mmask16)m2, x + o0);
    __m512 hi = _mm512_maskz_loadu_ps((__mmask16)(m2 >> 16), x + o0 + 16);
    return _mm512_permutex2var_ps(lo, even, hi);
  }
  case READ_QUADS: { /* 4 runs of 4 (4 positions of each of 4 images) */
    __m512i q = _mm512_add_epi32(b->gidx[v], _mm512_set1_epi32(off));
    int32_t at[16];
    _mm512_storeu_si512(at, q);
    __m512 r = _mm512_castps128_ps512(_mm_maskz_loadu_ps((__mmask8)(m & 15), x + at[0]));
    r = _mm512_insertf32x4(r, _mm_maskz_loadu_ps((__mmask8)(m >> 4 & 15), x + at[4]), 1);
    r = _mm512_insertf32x4(r, _mm_maskz_loadu_ps((__mmask8)(m >> 8 & 15), x + at[8]), 2);
    return _mm512_insertf32x4(r, _mm_maskz_loadu_ps((__mmask8)(m >> 12 & 15), x + at[12]), 3);
  }
  default:
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                    _mm512_add_epi32(b->gidx[v], _mm512_set1_epi32(off)), x, 4);
  }
}

/* Packs the block's image panels: bp[v / 2][k][(v % 2) 16 + lane] =
 * x[position of lane, input element of row k = (c, ki, kj)], 0 where that
 * lies in the padding or past the block. */
static void pack_block(const conv_job *j, conv_block *b) {
  const win_geom *g = j->g;
  int64_t KK = g->KH * g->KW, HW = g->H * g->W, K = j->K, nv = b->nv;
  const float *x = j->x;
  for (int64_t k = 0; k < K; k++) {
    int64_t c = k / KK, kk = k % KK;
    int32_t off = (int32_t)(c * HW) + b->koff[kk];
    const __mmask16 *mk = b->mk + kk * nv;
    for (int64_t v = 0; v < nv; v++) {
      float *dst = b->bp + (v / 2) * K * NR + k * NR + (v % 2) * 16;
      __mmask16 m = mk[v];
      _mm512_store_ps(dst, m ? read_vec(b, v, x, off, m) : _mm512_setzero_ps());
    }
    if (nv % 2) _mm512_store_ps(b->bp + (nv / 2) * K * NR + k * NR + 16, _mm512_setzero_ps());
  }
}

/* One output vector val of channel ch (global) for the block's vector v:
 * the epilogue, then the store into out. */
static inline void put(const conv_job *j, const conv_block *b, int64_t v, int64_t ch, __m512 val,
                       __m512 s, __m512 t) {
  const conv_epilogue *ep = j->ep;
  int64_t L = j->L;
  if (ep->scale) val = _mm512_mul_ps(val, s);
  if (ep->shift) val = _mm512_add_ps(val, t);
  __mmask16 m = b->valid[v];
  int32_t c0 = b->cont[v];
  if (c0 >= 0) {
    int64_t at = c0 + ch * L;
    if (ep->residual)
      val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(m, (const float *)ep->residual + at));
    if (ep->relu) val = _mm512_max_ps(_mm512_setzero_ps(), val); /* NaN stays */
    _mm512_mask_storeu_ps(j->out + at, m, val);
    return;
  }
  __m512i idx = _mm512_add_epi32(b->oidx[v], _mm512_set1_epi32((int32_t)(ch * L)));
  if (ep->residual)
    val = _mm512_add_ps(
        val, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, (const float *)ep->residual, 4));
  if (ep->relu) val = _mm512_max_ps(_mm512_setzero_ps(), val);
  _mm512_mask_i32scatter_ps(j->out, m, idx, val, 4);
}

/* The tile of rows [o0, o0 + mr) (mr <= MR, of the group) and panel jp of
 * the block: the whole K's sums, then put. Rows past mr read row mr - 1. */
/* The tile's sums through the epilogue into out (rows [o0, o0 + mr) of
 * panel jp). */
static inline void tile_put(const conv_job *j, const conv_block *b, int64_t o0, int mr,
                            int64_t jp, __m512 acc[MR][2]) {
  const conv_epilogue *ep = j->ep;
  int64_t v0 = jp * 2;
  for (int i = 0; i < mr; i++) {
    int64_t ch = j->ch0 + o0 + i;
    __m512 s = _mm512_set1_ps(ep->scale ? ((const float *)ep->scale)[ch] : 1.0f);
    __m512 t = _mm512_set1_ps(ep->shift ? ((const float *)ep->shift)[ch] : 0.0f);
    put(j, b, v0, ch, acc[i][0], s, t);
    if (v0 + 1 < b->nv) put(j, b, v0 + 1, ch, acc[i][1], s, t);
  }
}

static void tile(const conv_job *j, const conv_block *b, int64_t o0, int mr, int64_t jp) {
  int64_t K = j->K;
  const float *a[MR];
  for (int i = 0; i < MR; i++) a[i] = j->w + (o0 + (i < mr ? i : mr - 1)) * K;
  __m512 acc[MR][2];
  op_tile8x32_ps(a, b->bp + jp * K * NR, K, acc);
  tile_put(j, b, o0, mr, jp, acc);
}

/* Note [Flipped weights]: the stride-1 input gradient is a forward conv
 * of grad_output with the weight transposed and flipped (Note [Backward
 * data as a conv] in conv_bwd_data.c), whose copy streamed the weights
 * twice more (3% of resnet18's training step, most at layer 4's 9 MB
 * weights). Here the tiles read the original weight w[o][c][kk] in place:
 * row c of the product at k = o KK + t is w[o][c][KK - 1 - t], the 8 rows'
 * KK-runs adjacent in memory, each o's in another page, so prefetched.
 * Same sums in the same order as the copy's. */
static void tile_flipped(const conv_job *j, const conv_block *b, int64_t o0, int mr,
                         int64_t jp) {
  int64_t KK = j->fkk, no = j->K / KK, ostride = j->Og * KK;
  const float *a[MR];
  for (int i = 0; i < MR; i++) a[i] = j->w + (o0 + (i < mr ? i : mr - 1)) * KK + KK - 1;
  const float *bp = b->bp + jp * j->K * NR;
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5],
              *a6 = a[6], *a7 = a[7];
  int64_t span = (MR * KK * (int64_t)sizeof(float) + 63) / 64 + 1; /* lines of 8 rows' runs */
  for (int64_t o = 0; o < no; o++) {
    /* each o's runs are in another page (C KK floats on): no hardware
     * prefetch, so they are fetched FLIP_AHEAD o's ahead */
    if (o + FLIP_AHEAD < no) {
      const char *pf = (const char *)(j->w + (o + FLIP_AHEAD) * ostride + o0 * KK);
      for (int64_t l = 0; l < span; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
    }
    for (int64_t t = 0; t < KK; t++) {
      __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#define ROW(i, p)                                                        \
  do {                                                                   \
    __m512 ai = _mm512_set1_ps(p[-t]);                                   \
    acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                      \
    acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                      \
  } while (0)
      ROW(0, a0); ROW(1, a1); ROW(2, a2); ROW(3, a3);
      ROW(4, a4); ROW(5, a5); ROW(6, a6); ROW(7, a7);
#undef ROW
      bp += NR;
    }
    a0 += ostride, a1 += ostride, a2 += ostride, a3 += ostride;
    a4 += ostride, a5 += ostride, a6 += ostride, a7 += ostride;
  }
  tile_put(j, b, o0, mr, jp, acc);
}

/* Rows [r0, r1) of the group over block b (packed). */
static void block_rows(const conv_job *j, const conv_block *b, int64_t r0, int64_t r1) {
  int64_t np = (b->nv + 1) / 2;
  for (int64_t o = r0; o < r1; o += MR) {
    int mr = (int)(r1 - o < MR ? r1 - o : MR);
    for (int64_t jp = 0; jp < np; jp++) {
      if (j->fkk) tile_flipped(j, b, o, mr, jp);
      else tile(j, b, o, mr, jp);
    }
  }
}

/* ---- few positions: dot products along K --------------------------------- */

static inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

/* out at channel rows [o0, o0 + 4) x positions [p0, p0 + 4) (clamped to
 * the group's Og and P; duplicates are computed and dropped). */
static void dot_tile(const conv_job *j, const float *rows, int64_t kp, int64_t o0, int64_t p0) {
  int64_t K = j->K;
  const float *a[4], *r[4];
  for (int i = 0; i < 4; i++) {
    a[i] = j->w + (o0 + i < j->Og ? o0 + i : j->Og - 1) * K;
    r[i] = rows + (p0 + i < j->P ? p0 + i : j->P - 1) * kp;
  }
  /* 16 named accumulators: as an array GCC kept them on the stack */
#define Z(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = c##i##0, c##i##2 = c##i##0, \
                    c##i##3 = c##i##0
  Z(0); Z(1); Z(2); Z(3);
#undef Z
#define STEP(LOADW, LOADX)                                                                   \
  do {                                                                                       \
    __m512 x0 = LOADX(r[0]), x1 = LOADX(r[1]), x2 = LOADX(r[2]), x3 = LOADX(r[3]);         \
    __m512 w0 = LOADW(a[0]), w1 = LOADW(a[1]), w2 = LOADW(a[2]), w3 = LOADW(a[3]);         \
    c00 = _mm512_fmadd_ps(w0, x0, c00), c01 = _mm512_fmadd_ps(w0, x1, c01);               \
    c02 = _mm512_fmadd_ps(w0, x2, c02), c03 = _mm512_fmadd_ps(w0, x3, c03);               \
    c10 = _mm512_fmadd_ps(w1, x0, c10), c11 = _mm512_fmadd_ps(w1, x1, c11);               \
    c12 = _mm512_fmadd_ps(w1, x2, c12), c13 = _mm512_fmadd_ps(w1, x3, c13);               \
    c20 = _mm512_fmadd_ps(w2, x0, c20), c21 = _mm512_fmadd_ps(w2, x1, c21);               \
    c22 = _mm512_fmadd_ps(w2, x2, c22), c23 = _mm512_fmadd_ps(w2, x3, c23);               \
    c30 = _mm512_fmadd_ps(w3, x0, c30), c31 = _mm512_fmadd_ps(w3, x1, c31);               \
    c32 = _mm512_fmadd_ps(w3, x2, c32), c33 = _mm512_fmadd_ps(w3, x3, c33);               \
  } while (0)
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    for (int i = 0; i < 4; i++) _mm_prefetch((const char *)(a[i] + k + PREFETCH), _MM_HINT_T0);
#define LW(p) _mm512_loadu_ps((p) + k)
#define LX(p) _mm512_load_ps((p) + k)
    STEP(LW, LX);
#undef LW
  }
  if (k < K) { /* the rows are zero past K; the weights are masked there */
    __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
#define LW(p) _mm512_maskz_loadu_ps(m, (p) + k)
    STEP(LW, LX);
#undef LW
#undef LX
  }
#undef STEP
  __m512 acc[4][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                      {c30, c31, c32, c33}};
  const conv_epilogue *ep = j->ep;
  const win_geom *g = j->g;
  for (int i = 0; i < 4 && o0 + i < j->Og; i++) {
    int64_t ch = j->ch0 + o0 + i;
    float s = ep->scale ? ((const float *)ep->scale)[ch] : 1.0f;
    float t = ep->shift ? ((const float *)ep->shift)[ch] : 0.0f;
    for (int q = 0; q < 4 && p0 + q < j->P; q++) {
      int64_t p = p0 + q, at = (p / j->L * g->O + ch) * j->L + p % j->L;
      float v = hsum(acc[i][q]);
      if (ep->scale) v = v * s;
      if (ep->shift) v = v + t;
      if (ep->residual) v += ((const float *)ep->residual)[at];
      if (ep->relu) v = v < 0 ? 0.0f : v;
      j->out[at] = v;
    }
  }
}

/* ---- driver ------------------------------------------------------------------ */

/* Scratch of one thread for blocks of up to nc positions: NULL on OOM. */
static char *block_scratch(const conv_job *j, int64_t nc, conv_block *b, size_t *nbytes) {
  int64_t nv = (nc + 15) / 16, KK = j->g->KH * j->g->KW, np = (nv + 1) / 2;
  size_t vec = (size_t)nv * 64, pan = (size_t)(np * j->K * NR) * sizeof(float);
  size_t tab = (size_t)nv * (2 * sizeof(int32_t) + sizeof(__mmask16)) +
               (size_t)(KK * nv) * sizeof(__mmask16) + (size_t)KK * sizeof(int32_t);
  size_t all = pan + 2 * vec + tab + 64;
  char *p = core_block_alloc(all, nbytes);
  if (!p) return NULL;
  b->bp = (float *)p;
  b->gidx = (__m512i *)(p + pan);
  b->oidx = (__m512i *)(p + pan + vec);
  char *q = p + pan + 2 * vec;
  b->mode = (int32_t *)q, q += (size_t)nv * sizeof(int32_t);
  b->cont = (int32_t *)q, q += (size_t)nv * sizeof(int32_t);
  b->koff = (int32_t *)q, q += (size_t)KK * sizeof(int32_t);
  b->valid = (__mmask16 *)q, q += (size_t)nv * sizeof(__mmask16);
  b->mk = (__mmask16 *)q;
  return p;
}

/* The dot-product path of one group (Note [Implicit im2col]). */
static int run_dot(const conv_job *j, int nt) {
  int64_t kp = (j->K + 15) / 16 * 16;
  size_t nbytes = 0, need = (size_t)(j->P * kp) * sizeof(float);
  float *rows = core_block_alloc(need, &nbytes);
  if (!rows) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for %zu bytes", need);
  int64_t nq = (j->P + 3) / 4, no = (j->Og + 3) / 4;
  /* one team: each thread gathers a share of the rows (serial, this was
   * ~2% of resnet18's batch-1 inference with the other thread idle), then,
   * after the barrier that ends the first loop, a share of the tiles */
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
#pragma omp for schedule(static)
    for (int64_t p = 0; p < j->P; p++)
      op_conv_gather_rows(j->g, j->x, j->xs, p, p + 1, j->K, rows, kp);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < no * nq; t++) dot_tile(j, rows, kp, t / nq * 4, t % nq * 4);
  }
  core_block_free(rows, nbytes);
  return 0;
}

/* The GEMM path of one group: blocks of at most nc positions, each packed
 * once by the thread that runs its rows; with fewer blocks than threads
 * each thread packs the block and runs a share of the rows.
 *
 * Note [Balanced position blocks]: with at least as many blocks as
 * threads, thread t takes the NR-wide position units [U t / n, U (t+1) / n)
 * of the U = ceil(P / NR) units, cut into the fewest near-equal blocks of
 * at most nc (op_conv_share in conv.h, shared with conv_avx2.c). A static loop over whole blocks of nc split resnet18's
 * layers at batch 16 (19, 5, 11 and 3 blocks) 10:9, 3:2, 6:5 and 2:1, the
 * longer thread setting the time and the other waiting; now the shares
 * differ by at most one unit. Each position's sums are the same whichever
 * block holds it, so the output is bitwise the same at any thread count. */
static int run_gemm(const conv_job *j, int nt) {
  int64_t nc = (int64_t)(BLOCK_BYTES / ((size_t)j->K * NR * sizeof(float))) * NR;
  if (nc < NR) nc = NR;
  if (nc > NCMAX) nc = NCMAX;
  int64_t pr = (j->P + NR - 1) / NR * NR;
  if (nc > pr) nc = pr;
  int64_t nblk = (j->P + nc - 1) / nc, split = nblk >= nt ? 1 : nt;
  int64_t rows_per = ((j->Og + split - 1) / split + MR - 1) / MR * MR;
  int failed = 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    conv_block b;
    size_t nbytes = 0;
    char *mem = block_scratch(j, nc, &b, &nbytes);
    if (!mem) {
#pragma omp atomic write
      failed = 1;
    }
    if (split == 1) { /* Note [Balanced position blocks] */
      conv_share sh = op_conv_share(j->P, NR, nc, omp_get_thread_num(), omp_get_num_threads());
      for (int64_t i = 0; mem && i < sh.nb; i++) {
        core_poll(); /* Note [Kernel poll] */
        int64_t p0, np;
        op_conv_share_block(&sh, j->P, NR, i, &p0, &np);
        block_tables(j, &b, p0, np);
        pack_block(j, &b);
        block_rows(j, &b, 0, j->Og);
      }
    } else {
#pragma omp for schedule(static)
      for (int64_t it = 0; it < nblk * split; it++) { /* thread t: share t of every block */
        int64_t blk = it % nblk, s = it / nblk;
        int64_t r0 = s * rows_per, r1 = r0 + rows_per < j->Og ? r0 + rows_per : j->Og;
        if (!mem || r0 >= r1) continue;
        core_poll(); /* Note [Kernel poll] */
        int64_t p0 = blk * nc;
        block_tables(j, &b, p0, j->P - p0 < nc ? j->P - p0 : nc);
        pack_block(j, &b);
        block_rows(j, &b, r0, r1);
      }
    }
    if (mem) core_block_free(mem, nbytes);
  }
  if (failed) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for packed panels");
  return 0;
}

int op_conv_forward_avx512(const win_geom *g, const float *x, const float *w,
                           const conv_epilogue *ep, float *out) {
  if (core_cpu_level() != CORE_CPU_AVX512) return 0;
  int wr = op_conv_winograd_avx512(g, x, w, ep, out); /* Note [Winograd F(2x2,3x3)] */
  if (wr != 0) return wr;
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW, Og = g->O / g->G;
  int64_t xs = g->G * g->C * g->H * g->W;
  if (!op_conv_offsets_fit(g, NR)) return 0;
  conv_epilogue none = {0};
  int64_t P = g->N * L;
  double work = (double)P * (double)g->O * (double)K;
  int nt = omp_in_parallel() || work < 64.0 * 64 * 64 ? 1 : omp_get_max_threads();
  for (int64_t k = 0; k < g->G; k++) {
    conv_job j = {.g = g, .x = x + k * g->C * g->H * g->W, .w = w + k * Og * K,
                  .ep = ep ? ep : &none, .out = out, .K = K, .L = L, .P = P, .Og = Og,
                  .ch0 = k * Og, .xs = xs};
    int rc = P <= DOT_MAX ? run_dot(&j, nt) : run_gemm(&j, nt);
    if (rc < 0) return rc;
  }
  return 1;
}

int op_conv_forward_avx512_flipped(const win_geom *g, const float *x, const float *w,
                                   float *out) {
  if (core_cpu_level() != CORE_CPU_AVX512 || !op_conv_implicit || g->G != 1) return 0;
  int wr = op_conv_winograd_avx512_flipped(g, x, w, out); /* Note [Winograd F(2x2,3x3)] */
  if (wr != 0) return wr;
  int64_t L = g->OH * g->OW, KK = g->KH * g->KW, K = g->C * KK, P = g->N * L;
  int64_t xs = g->C * g->H * g->W;
  if (P <= DOT_MAX || !op_conv_offsets_fit(g, NR)) return 0;
  conv_epilogue none = {0};
  double work = (double)P * (double)g->O * (double)K;
  int nt = omp_in_parallel() || work < 64.0 * 64 * 64 ? 1 : omp_get_max_threads();
  conv_job j = {.g = g, .x = x, .w = w, .ep = &none, .out = out, .K = K, .L = L, .P = P,
                .Og = g->O, .ch0 = 0, .xs = xs, .fkk = KK};
  int rc = run_gemm(&j, nt);
  return rc < 0 ? rc : 1;
}

/* ---- weight gradient ----------------------------------------------------------- */

/* Note [Implicit weight gradient]: gW[o, k] += sum over the positions p of
 * gout[o, p] col[k, p], the reduction over P = N OH OW. Profiled on
 * resnet18's training step (batch 16, 64x64, one thread), conv_gemm.c's
 * im2col + GEMM ran it at 48-75 GFLOP/s (83 ms of a 225 ms step, the
 * im2col of the forward input done again 6%). Here the same 8 x 32 tile
 * as the forward's, with rows o (gout, regrouped once into [O][P], each
 * row's element broadcast) and 32 columns k whose panels [p][32] are
 * packed straight from the input: 16 rows k of 16 positions read as the
 * forward's panels are (read_vec), then transposed 16 x 16 in registers.
 * Positions go in blocks of WB_P (the panel, 16 KiB, stays in L1); each
 * block's tile sums are stored into gW, the next blocks' added. The k panels are shared out among the
 * threads, each packing its own, so every gW element is summed in the
 * same order (positions in order within a block, blocks in order) at
 * any thread count. */
enum { WB_P = 128 };

/* bp[p][32] = col[k0 + c, p0 + p] for the block's positions (p < nv 16;
 * 0 for k >= K, padding and positions past the block). */
static void pack_wpanel(const conv_job *j, const conv_block *b, int64_t k0, float *bp) {
  const win_geom *g = j->g;
  int64_t KK = g->KH * g->KW, HW = g->H * g->W, nv = b->nv;
  int32_t off[NR];
  const __mmask16 *mk[NR]; /* NULL past K */
  for (int i = 0; i < NR; i++) {
    int64_t k = k0 + i, kk = k % KK;
    off[i] = (int32_t)(k / KK * HW) + b->koff[kk];
    mk[i] = k < j->K ? b->mk + kk * nv : NULL;
  }
  for (int64_t v = 0; v < nv; v++)
    for (int h = 0; h < 2; h++) {
      __m512 r[16];
      for (int i = 0; i < 16; i++) {
        const __mmask16 *m = mk[16 * h + i];
        r[i] = m && m[v] ? read_vec(b, v, j->x, off[16 * h + i], m[v]) : _mm512_setzero_ps();
      }
      op_transpose16_ps(r);
      float *dst = bp + v * 16 * NR + 16 * h;
      for (int i = 0; i < 16; i++) _mm512_store_ps(dst + i * NR, r[i]);
    }
}

/* gw rows [o0, o0 + mr) x columns [k0, k0 + kw) = (first) or += the sums
 * over the np positions of the packed rows a ([np][8]: row i of position p
 * at a[8 p + i]) times the panel bp. */
static void wtile(const float *a, int mr, const float *bp, int64_t np, float *gw, int64_t K,
                  int kw, bool first) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < np; p++) {
    __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#define ROW(i)                                                           \
  do {                                                                   \
    __m512 ai = _mm512_set1_ps(a[i]);                                    \
    acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                      \
    acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                      \
  } while (0)
    ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5); ROW(6); ROW(7); /* unrolled: GCC -O2 */
#undef ROW
    bp += NR, a += MR;
  }
  __mmask16 m0 = (__mmask16)(kw >= 16 ? 0xffff : (1u << kw) - 1);
  __mmask16 m1 = (__mmask16)(kw >= 32 ? 0xffff : kw <= 16 ? 0 : (1u << (kw - 16)) - 1);
  for (int i = 0; i < mr; i++) {
    float *d = gw + i * K;
    if (!first) {
      acc[i][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, d), acc[i][0]);
      acc[i][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, d + 16), acc[i][1]);
    }
    _mm512_mask_storeu_ps(d, m0, acc[i][0]);
    _mm512_mask_storeu_ps(d + 16, m1, acc[i][1]);
  }
}

/* ap[t][p][8] = go[n, ch0 + 8 t + i, l] for the block's positions p =
 * (n, l) (rows past Og repeat the last row). */
static void pack_wrows(const conv_job *j, const float *go, int64_t p0, int64_t nc, float *ap) {
  int64_t O = j->g->O, L = j->L;
  for (int64_t q = 0; q < nc;) { /* the run of positions in image n */
    int64_t n = (p0 + q) / L, l0 = (p0 + q) % L, len = L - l0 < nc - q ? L - l0 : nc - q;
    for (int64_t t = 0; t * MR < j->Og; t++)
      for (int i = 0; i < MR; i++) {
        int64_t o = t * MR + i < j->Og ? t * MR + i : j->Og - 1;
        const float *src = go + (n * O + j->ch0 + o) * L + l0;
        float *d = ap + (t * WB_P + q) * MR + i;
        for (int64_t r = 0; r < len; r++) d[r * MR] = src[r];
      }
    q += len;
  }
}

/* One group's weight gradient: go the whole grad_output, gw the group's
 * [Og][K] rows. */
static int run_wgrad(const conv_job *j, const float *go, float *gw, int nt) {
  int64_t npan = (j->K + NR - 1) / NR, nblk = (j->P + WB_P - 1) / WB_P;
  int64_t ntile = (j->Og + MR - 1) / MR;
  if (nt > npan) nt = (int)npan;
  int failed = 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t q0 = npan * t / n, q1 = npan * (t + 1) / n;
    conv_block b;
    size_t nbytes = 0, abytes = 0;
    conv_job one = *j; /* block_scratch's panels hold K x 32 per 32 positions */
    one.K = NR;        /* so WB_P x 32 here: one panel */
    char *mem = q0 < q1 ? block_scratch(&one, WB_P, &b, &nbytes) : NULL;
    float *ap = mem ? core_block_alloc((size_t)(ntile * WB_P * MR) * sizeof(float), &abytes)
                    : NULL;
    if (q0 < q1 && !ap) {
#pragma omp atomic write
      failed = 1;
    }
    for (int64_t blk = 0; ap && blk < nblk; blk++) {
      core_poll(); /* Note [Kernel poll] */
      int64_t p0 = blk * WB_P, nc = j->P - p0 < WB_P ? j->P - p0 : WB_P;
      block_tables(j, &b, p0, nc);
      pack_wrows(j, go, p0, nc, ap);
      for (int64_t q = q0; q < q1; q++) {
        int64_t k0 = q * NR;
        int kw = (int)(j->K - k0 < NR ? j->K - k0 : NR);
        pack_wpanel(j, &b, k0, b.bp);
        for (int64_t o = 0; o < j->Og; o += MR) {
          int mr = (int)(j->Og - o < MR ? j->Og - o : MR);
          /* the next tile's gw lines, scattered K apart, arrive meanwhile
           * (their misses were 17% of the time) */
          for (int64_t i = o + MR; i < o + 2 * MR && i < j->Og; i++) {
            _mm_prefetch((const char *)(gw + i * j->K + k0), _MM_HINT_T0);
            _mm_prefetch((const char *)(gw + i * j->K + k0 + 16), _MM_HINT_T0);
          }
          wtile(ap + o * WB_P, mr, b.bp, nc, gw + o * j->K + k0, j->K, kw, blk == 0);
        }
      }
    }
    if (ap) core_block_free(ap, abytes);
    if (mem) core_block_free(mem, nbytes);
  }
  if (failed) return core_error(KILN_ERR_NOMEM, "aten::convolution_backward: out of memory");
  return 0;
}

bool op_conv_wgrad_avx512_applies(kiln_dtype dt, const win_geom *g) {
  if (dt != KILN_DTYPE_F32 || core_cpu_level() != CORE_CPU_AVX512 || !op_conv_implicit)
    return false;
  return op_conv_offsets_fit(g, NR);
}

int op_conv_wgrad_avx512(const win_geom *g, const float *x, const float *go, float *gw) {
  int64_t L = g->OH * g->OW, K = g->C * g->KH * g->KW, Og = g->O / g->G;
  int64_t xs = g->G * g->C * g->H * g->W, P = g->N * L;
  double work = (double)P * (double)g->O * (double)K;
  int nt = omp_in_parallel() || work < 64.0 * 64 * 64 ? 1 : omp_get_max_threads();
  for (int64_t k = 0; k < g->G; k++) {
    conv_job j = {.g = g, .x = x + k * g->C * g->H * g->W, .w = NULL, .ep = NULL, .out = NULL,
                  .K = K, .L = L, .P = P, .Og = Og, .ch0 = k * Og, .xs = xs};
    int rc = run_wgrad(&j, go, gw + k * Og * K, nt);
    if (rc < 0) return rc;
  }
  return 0;
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
