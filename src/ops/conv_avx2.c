/* src/ops/conv_avx2.c: conv2d's float32 forward at the AVX2 level without
 * an im2col matrix: conv_avx512.c's implicit-im2col GEMM (Note [Implicit
 * im2col] there) with 8-lane vectors, for CPUs with AVX2 and FMA but no
 * AVX-512 (AMD Zen 1-3, Intel Haswell to Alder Lake).
 *
 * Note [Implicit im2col at AVX2]: the same three parts as the AVX-512
 * kernel, fitted to 16 ymm registers and no mask registers:
 * - the tile is 6 output channels x 16 positions (12 accumulators, two
 *   panel loads and six weight broadcasts per k: BLIS's Haswell/Zen
 *   shape, as sgemm_avx2.c), again over the whole K, with the epilogue
 *   applied as each tile is stored;
 * - image panels are [K][16], packed straight from the input per block of
 *   positions (256 KiB of panels: Zen 2/3 have 512 KiB of L2, Haswell 256),
 *   each 8-lane vector read as a maskload where its lanes are consecutive,
 *   two maskloads and a shuffle where they are 2 apart (stride 2), two
 *   4-lane maskloads where they are 2 runs of 4, else a masked gather; the
 *   lanes' masks are bit sets per (ki, kj) turned into vector masks on use;
 * - outputs are stored whole (maskstore at a block's edge) where a
 *   vector's positions are consecutive in one image, else lane by lane;
 * - few positions (P <= 16) take dot products along K, two channels x two
 *   positions at a time, each sum kept as two 8-lane halves of a 16-lane
 *   one.
 * Every output's sum is the one the AVX-512 kernel forms, in the same
 * order: the tiles add k = 0, 1, ... with one FMA each from zero; the dot
 * products keep k's partial sums in lane k mod 16 and add the lanes as
 * GCC 12's _mm512_reduce_add_ps does (hsum16 below; clang 14's gives the
 * same sums: 10^6 random vectors checked). So the two levels give bitwise
 * the same outputs (tested). Taken only at the AVX2
 * level, for float32, while every element offset fits in int32; else
 * op_conv_forward_ep runs conv_gemm.c's path. A 3x3 stride-1 conv with
 * enough tiles goes to conv_winograd_avx2.c first (Note [Winograd at
 * AVX2]), as the AVX-512 level's goes to conv_winograd.c. */
#include <immintrin.h>
#include <limits.h>
#include <omp.h>

#include "conv.h"

#ifdef __clang__ /* clang has no GCC target pragma (the fuzz build, make fuzz) */
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt") /* CORE_TARGET_AVX2 */
#endif

#include "simd256.h"

enum { MR = 6, NR = 16, VL = 8, NCMAX = 1024, DOT_MAX = 16 };
#ifndef PREFETCH
#define PREFETCH 256 /* floats ahead on each weight row the dot products stream */
#endif
/* bytes of packed image panels per block (they stay in a 512 KiB L2) */
#define BLOCK_BYTES ((size_t)256 << 10)

/* Everything a block's tiles need about the convolution (one group). */
typedef struct conv_job {
  const win_geom *g;
  const float *x, *w;    /* the group's input channels and weight rows */
  const conv_epilogue *ep;
  float *out;
  int64_t K, L, P, Og;   /* K = C KH KW, L = OH OW, P = N L */
  int64_t ch0;           /* the group's first output channel */
  int64_t xs;            /* elements between images of x */
} conv_job;

/* How a panel vector's 8 lanes are read from the input. */
enum { READ_GATHER, READ_RUN, READ_RUN2, READ_QUADS };

/* A block of nc positions [p0, p0 + nc): its 8-lane vectors' tables. */
typedef struct conv_block {
  int64_t p0, nc, nv;    /* nv = ceil(nc / 8) vectors */
  int32_t *gidx;         /* [nv][8] the lanes' input offsets at (ki, kj) = (0, 0), channel 0 */
  int32_t *oidx;         /* [nv][8] output offsets n O L + l (channel 0) */
  int32_t *mode;         /* [nv] READ_* */
  int32_t *cont;         /* [nv] lane 0's output offset if the lanes are consecutive there, else -1 */
  int32_t *koff;         /* [KH KW] offset of (ki, kj) in the input */
  uint8_t *valid;        /* [nv] lanes inside [p0, p0 + nc), a bit each */
  uint8_t *mk;           /* [KH KW][nv] lanes whose input (ih, iw) is inside the image */
  float *bp;             /* [ceil(nv / 2)][K][16] packed panels */
} conv_block;

/* The lanes of the bit set m as a vector mask (all ones where set). */
static inline __m256i bits_mask(unsigned m) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bit), bit);
}

/* The first n of 8 lanes as a mask (none for n <= 0, all for n >= 8). */
static inline __m256i lanes(int64_t n) {
  return bits_mask(n <= 0 ? 0u : n >= 8 ? 0xffu : (1u << n) - 1);
}

/* Fills b's tables for positions [p0, p0 + nc). */
static void block_tables(const conv_job *j, conv_block *b, int64_t p0, int64_t nc) {
  const win_geom *g = j->g;
  int64_t KK = g->KH * g->KW;
  b->p0 = p0, b->nc = nc, b->nv = (nc + VL - 1) / VL;
  for (int64_t kk = 0; kk < KK; kk++)
    b->koff[kk] = (int32_t)((kk / g->KW) * g->dh * g->W + (kk % g->KW) * g->dw);
  for (int64_t v = 0; v < b->nv; v++) {
    int32_t *gi = b->gidx + v * VL, *oi = b->oidx + v * VL, ihb[VL], iwb[VL];
    unsigned val = 0;
    bool run = true, run2 = true, quads = true, cont = true;
    for (int l = 0; l < VL; l++) {
      int64_t p = p0 + v * VL + l;
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
      val |= 1u << l;
      run = run && gi[l] == gi[0] + l;
      run2 = run2 && gi[l] == gi[0] + 2 * l;
      quads = quads && gi[l] == gi[l & ~3] + (l & 3);
      cont = cont && oi[l] == oi[0] + l;
    }
    b->mode[v] = run ? READ_RUN : run2 ? READ_RUN2 : quads ? READ_QUADS : READ_GATHER;
    b->cont[v] = cont ? oi[0] : -1;
    b->valid[v] = (uint8_t)val;
    for (int64_t kk = 0; kk < KK; kk++) { /* (unsigned) ih < H and iw < W */
      int32_t dh = (int32_t)((kk / g->KW) * g->dh), dw = (int32_t)((kk % g->KW) * g->dw);
      unsigned m = 0;
      for (int l = 0; l < VL; l++)
        if ((val >> l & 1) && (uint32_t)(ihb[l] + dh) < (uint32_t)g->H &&
            (uint32_t)(iwb[l] + dw) < (uint32_t)g->W)
          m |= 1u << l;
      b->mk[kk * b->nv + v] = (uint8_t)m;
    }
  }
}

/* The 8 lanes of one panel vector, read at offset off (channel and kernel
 * offset) from x: lanes outside m read as 0. A masked-off lane's address
 * is never touched (maskloads and masked gathers do not fault there). */
static inline __m256 read_vec(const conv_block *b, int64_t v, const float *x, int32_t off,
                              unsigned m) {
  const int32_t *gi = b->gidx + v * VL;
  int32_t o0 = gi[0] + off;
  switch (b->mode[v]) {
  case READ_RUN: return _mm256_maskload_ps(x + o0, bits_mask(m));
  case READ_RUN2: { /* 16 inputs, the even ones */
    unsigned m2 = _pdep_u32(m, 0x5555u);
    __m256 lo = _mm256_maskload_ps(x + o0, bits_mask(m2 & 0xffu));
    __m256 hi = _mm256_maskload_ps(x + o0 + 8, bits_mask(m2 >> 8));
    /* [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] -> [lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6] */
    __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  case READ_QUADS: { /* 2 runs of 4 (4 positions of each of 2 images) */
    const __m128i bit = _mm_setr_epi32(1, 2, 4, 8);
    __m128i m0 = _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32((int)(m & 15)), bit), bit);
    __m128i m1 = _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32((int)(m >> 4 & 15)), bit), bit);
    __m128 r0 = _mm_maskload_ps(x + o0, m0), r1 = _mm_maskload_ps(x + gi[4] + off, m1);
    return _mm256_insertf128_ps(_mm256_castps128_ps256(r0), r1, 1);
  }
  default: {
    __m256i idx = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)gi), _mm256_set1_epi32(off));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, idx, _mm256_castsi256_ps(bits_mask(m)),
                                    4);
  }
  }
}

/* Packs the block's image panels: bp[v / 2][k][(v % 2) 8 + lane] = x[position
 * of lane, input element of row k = (c, ki, kj)], 0 where that lies in the
 * padding or past the block. */
static void pack_block(const conv_job *j, conv_block *b) {
  const win_geom *g = j->g;
  int64_t KK = g->KH * g->KW, HW = g->H * g->W, K = j->K, nv = b->nv;
  const float *x = j->x;
  for (int64_t k = 0; k < K; k++) {
    int64_t c = k / KK, kk = k % KK;
    int32_t off = (int32_t)(c * HW) + b->koff[kk];
    const uint8_t *mk = b->mk + kk * nv;
    for (int64_t v = 0; v < nv; v++) {
      float *dst = b->bp + (v / 2) * K * NR + k * NR + (v % 2) * VL;
      unsigned m = mk[v];
      _mm256_store_ps(dst, m ? read_vec(b, v, x, off, m) : _mm256_setzero_ps());
    }
    if (nv % 2) _mm256_store_ps(b->bp + (nv / 2) * K * NR + k * NR + VL, _mm256_setzero_ps());
  }
}

/* One output vector val of channel ch (global) for the block's vector v:
 * the epilogue, then the store into out. */
static inline void put(const conv_job *j, const conv_block *b, int64_t v, int64_t ch, __m256 val,
                       __m256 s, __m256 t) {
  const conv_epilogue *ep = j->ep;
  const float *res = (const float *)ep->residual;
  int64_t L = j->L;
  if (ep->scale) val = _mm256_mul_ps(val, s);
  if (ep->shift) val = _mm256_add_ps(val, t);
  unsigned m = b->valid[v];
  int32_t c0 = b->cont[v];
  if (c0 >= 0) {
    int64_t at = c0 + ch * L;
    if (m == 0xffu) {
      if (res) val = _mm256_add_ps(val, _mm256_loadu_ps(res + at));
      if (ep->relu) val = _mm256_max_ps(_mm256_setzero_ps(), val); /* NaN stays */
      _mm256_storeu_ps(j->out + at, val);
      return;
    }
    __m256i mask = bits_mask(m);
    if (res) val = _mm256_add_ps(val, _mm256_maskload_ps(res + at, mask));
    if (ep->relu) val = _mm256_max_ps(_mm256_setzero_ps(), val);
    _mm256_maskstore_ps(j->out + at, mask, val);
    return;
  }
  const int32_t *oi = b->oidx + v * VL;
  float r[VL] = {0};
  if (res)
    for (int l = 0; l < VL; l++)
      if (m >> l & 1) r[l] = res[oi[l] + ch * L];
  if (res) val = _mm256_add_ps(val, _mm256_loadu_ps(r));
  if (ep->relu) val = _mm256_max_ps(_mm256_setzero_ps(), val);
  _mm256_storeu_ps(r, val);
  for (int l = 0; l < VL; l++)
    if (m >> l & 1) j->out[oi[l] + ch * L] = r[l];
}

/* The tile of rows [o0, o0 + mr) (mr <= MR, of the group) and panel jp of
 * the block: the whole K's sums, then put. Rows past mr read row mr - 1. */
static void tile(const conv_job *j, const conv_block *b, int64_t o0, int mr, int64_t jp) {
  int64_t K = j->K;
  const float *a[MR];
  for (int i = 0; i < MR; i++) a[i] = j->w + (o0 + (i < mr ? i : mr - 1)) * K;
  __m256 acc[MR][2];
  op_tile6x16_ps(a, b->bp + jp * K * NR, K, acc);
  const conv_epilogue *ep = j->ep;
  int64_t v0 = jp * 2;
  for (int i = 0; i < mr; i++) {
    int64_t ch = j->ch0 + o0 + i;
    __m256 s = _mm256_set1_ps(ep->scale ? ((const float *)ep->scale)[ch] : 1.0f);
    __m256 t = _mm256_set1_ps(ep->shift ? ((const float *)ep->shift)[ch] : 0.0f);
    put(j, b, v0, ch, acc[i][0], s, t);
    if (v0 + 1 < b->nv) put(j, b, v0 + 1, ch, acc[i][1], s, t);
  }
}

/* Rows [r0, r1) of the group over block b (packed). */
static void block_rows(const conv_job *j, const conv_block *b, int64_t r0, int64_t r1) {
  int64_t np = (b->nv + 1) / 2;
  for (int64_t o = r0; o < r1; o += MR) {
    int mr = (int)(r1 - o < MR ? r1 - o : MR);
    for (int64_t jp = 0; jp < np; jp++) tile(j, b, o, mr, jp);
  }
}

/* ---- few positions: dot products along K --------------------------------- */

/* The sum of a 16-lane vector held as lanes 0-7 (lo) and 8-15 (hi), added
 * in GCC's _mm512_reduce_add_ps order: (hi + lo), its two halves, then the
 * pairs (0, 2) and (1, 3), then those two. */
static inline float hsum16(__m256 lo, __m256 hi) {
  __m256 t3 = _mm256_add_ps(hi, lo);
  __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, 1));
}

/* out at channel rows [o0, o0 + 2) x positions [p0, p0 + 2) (clamped to
 * the group's Og and P; duplicates are computed and dropped). */
static void dot_tile(const conv_job *j, const float *rows, int64_t kp, int64_t o0, int64_t p0) {
  int64_t K = j->K;
  const float *a0 = j->w + o0 * K, *a1 = j->w + (o0 + 1 < j->Og ? o0 + 1 : o0) * K;
  const float *r0 = rows + p0 * kp, *r1 = rows + (p0 + 1 < j->P ? p0 + 1 : p0) * kp;
  /* c<channel><position><half>: lanes k mod 16 in 0-7 (l) and 8-15 (h) */
  __m256 c00l = _mm256_setzero_ps(), c00h = c00l, c01l = c00l, c01h = c00l;
  __m256 c10l = c00l, c10h = c00l, c11l = c00l, c11h = c00l;
#define STEP(LW)                                                                             \
  do {                                                                                       \
    __m256 x0l = _mm256_load_ps(r0 + k), x0h = _mm256_load_ps(r0 + k + 8);                  \
    __m256 x1l = _mm256_load_ps(r1 + k), x1h = _mm256_load_ps(r1 + k + 8);                  \
    __m256 w0l = LW(a0, k, 0), w0h = LW(a0, k + 8, 1);                                       \
    __m256 w1l = LW(a1, k, 0), w1h = LW(a1, k + 8, 1);                                       \
    c00l = _mm256_fmadd_ps(w0l, x0l, c00l), c00h = _mm256_fmadd_ps(w0h, x0h, c00h);         \
    c01l = _mm256_fmadd_ps(w0l, x1l, c01l), c01h = _mm256_fmadd_ps(w0h, x1h, c01h);         \
    c10l = _mm256_fmadd_ps(w1l, x0l, c10l), c10h = _mm256_fmadd_ps(w1h, x0h, c10h);         \
    c11l = _mm256_fmadd_ps(w1l, x1l, c11l), c11h = _mm256_fmadd_ps(w1h, x1h, c11h);         \
  } while (0)
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    _mm_prefetch((const char *)(a0 + k + PREFETCH), _MM_HINT_T0);
    _mm_prefetch((const char *)(a1 + k + PREFETCH), _MM_HINT_T0);
#define LW(p, at, h) _mm256_loadu_ps((p) + (at))
    STEP(LW);
#undef LW
  }
  if (k < K) { /* the rows are zero past K; the weights are masked there */
    __m256i ml = lanes(K - k), mh = lanes(K - k - 8);
#define LW(p, at, h) _mm256_maskload_ps((p) + (at), (h) ? mh : ml)
    STEP(LW);
#undef LW
  }
#undef STEP
  float sum[2][2] = {{hsum16(c00l, c00h), hsum16(c01l, c01h)},
                     {hsum16(c10l, c10h), hsum16(c11l, c11h)}};
  const conv_epilogue *ep = j->ep;
  const win_geom *g = j->g;
  for (int i = 0; i < 2 && o0 + i < j->Og; i++) {
    int64_t ch = j->ch0 + o0 + i;
    float s = ep->scale ? ((const float *)ep->scale)[ch] : 1.0f;
    float t = ep->shift ? ((const float *)ep->shift)[ch] : 0.0f;
    for (int q = 0; q < 2 && p0 + q < j->P; q++) {
      int64_t p = p0 + q, at = (p / j->L * g->O + ch) * j->L + p % j->L;
      float v = sum[i][q];
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
  int64_t nv = (nc + VL - 1) / VL, KK = j->g->KH * j->g->KW, np = (nv + 1) / 2;
  size_t pan = (size_t)(np * j->K * NR) * sizeof(float);
  size_t tab = (size_t)nv * (2 * VL + 2) * sizeof(int32_t) + (size_t)KK * sizeof(int32_t) +
               (size_t)nv + (size_t)(KK * nv);
  char *p = core_block_alloc(pan + tab + 64, nbytes);
  if (!p) return NULL;
  b->bp = (float *)p;
  char *q = p + pan;
  b->gidx = (int32_t *)q, q += (size_t)nv * VL * sizeof(int32_t);
  b->oidx = (int32_t *)q, q += (size_t)nv * VL * sizeof(int32_t);
  b->mode = (int32_t *)q, q += (size_t)nv * sizeof(int32_t);
  b->cont = (int32_t *)q, q += (size_t)nv * sizeof(int32_t);
  b->koff = (int32_t *)q, q += (size_t)KK * sizeof(int32_t);
  b->valid = (uint8_t *)q, q += (size_t)nv;
  b->mk = (uint8_t *)q;
  return p;
}

/* The dot-product path of one group. */
static int run_dot(const conv_job *j, int nt) {
  int64_t kp = (j->K + 15) / 16 * 16;
  size_t nbytes = 0, need = (size_t)(j->P * kp) * sizeof(float);
  float *rows = core_block_alloc(need, &nbytes);
  if (!rows) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for %zu bytes", need);
  int64_t nq = (j->P + 1) / 2, no = (j->Og + 1) / 2;
  /* one team: each thread gathers a share of the rows (serial, this was
   * ~2% of resnet18's batch-1 inference with the other thread idle), then,
   * after the barrier that ends the first loop, a share of the tiles */
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
#pragma omp for schedule(static)
    for (int64_t p = 0; p < j->P; p++)
      op_conv_gather_rows(j->g, j->x, j->xs, p, p + 1, j->K, rows, kp);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < no * nq; t++) dot_tile(j, rows, kp, t / nq * 2, t % nq * 2);
  }
  core_block_free(rows, nbytes);
  return 0;
}

/* The GEMM path of one group, blocked and shared over threads as in
 * conv_avx512.c's run_gemm. */
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

int op_conv_forward_avx2(const win_geom *g, const float *x, const float *w,
                         const conv_epilogue *ep, float *out) {
  if (core_cpu_level() != CORE_CPU_AVX2) return 0;
  int wr = op_conv_winograd_avx2(g, x, w, ep, out); /* Note [Winograd at AVX2] */
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

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
