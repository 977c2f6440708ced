/* src/ops/conv_winograd.c: conv2d's float32 forward for 3x3 stride-1
 * kernels at AVX-512 by Winograd's minimal filtering F(2x2, 3x3).
 *
 * Note [Winograd F(2x2,3x3)]: resnet18's 3x3 stride-1 convolutions are
 * 85% of its multiplies, and the direct tiles of conv_avx512.c already run
 * them near the FMA peak (Note [Implicit im2col]), so only fewer
 * multiplies make them faster. Lavin and Gray's F(2x2, 3x3) computes each
 * 2x2 output tile from its 4x4 input patch d as
 *     Y = A^T [ (G g G^T) (.) (B^T d B) ] A
 * (g the 3x3 kernel, (.) elementwise over the 16 points xi): per tile and
 * channel pair 16 multiplies instead of 36, 2.25x fewer. Summed over the
 * channels c, the products at each point xi are a GEMM
 *     M_xi[o, t] = sum_c U_xi[o, c] V_xi[c, t]
 * over the tiles t = (n, th, tw) of the batch, with U = G g G^T (the
 * weights, Note [Winograd weights] in conv_winograd_plan.c) and V =
 * B^T d B (the input). Here:
 * - Threads take equal shares of 32-tile units (Note [Balanced position
 *   blocks]), cut into blocks whose 16 transformed panels V_xi [C][32]
 *   stay in the L2 (256 KiB). A block's input patches are read 16 tiles
 *   at a time, one lane per tile, lanes whose patch element lies in the
 *   padding masked off, and transformed in registers. Where every R = 8,
 *   4 or 2 lanes are adjacent tiles of one row (rows of 8, 4, 2 tiles:
 *   resnet18's 16x16, 8x8 and 4x4 stages), an element's R lanes are one
 *   masked load of 2 R floats and a permute; else a gather (the gathers
 *   were a quarter of the time).
 * - For each 8 output channels, the 16 GEMMs run conv_avx512.c's 8 x 32
 *   register tile over the whole C, their sums kept in an L1 buffer; the
 *   output transform then makes each tile's 2x2 outputs, applies the
 *   epilogue (Note [Conv epilogue]) and stores them into [N, O, OH, OW],
 *   a run's 2 R outputs of a row as one masked store (else a scatter).
 * - Every output is the same sum in the same order whatever the blocking
 *   and the thread count, so 1 and 2 threads give the same bits. The sums
 *   differ from the direct conv's in float32 rounding: tested against a
 *   double convolution, the largest errors were 0.4-0.8x the direct
 *   tiles' (each point sums C products, not 9 C). A NaN input reaches the
 *   outputs whose windows hold it, as in the direct conv (the transforms'
 *   zeros keep it from the others); an infinity reaches the same outputs
 *   but may come out NaN (the transforms subtract it from itself).
 * Measured (2 threads, alternating runs in one process, batch 16, 3x3
 * "same", scale, shift and relu): resnet18's 64-channel 16x16 layer 0.61x
 * the direct tiles' time, 128 at 8x8 0.63x, 256 at 4x4 0.76x, batch 1's
 * 64 at 16x16 0.75x; resnet18 inference at batch 16 (jit) 0.81-0.83x.
 * Taken when the MACs fall at least 40% (few tiles, as at resnet18's 2x2
 * stage, fill the 32-wide panels too thinly), C <= 4096 (a panel block's
 * size) and op_conv_winograd is set (op_conv_winograd_applies in
 * conv_winograd_plan.c, which also builds the lanes' tables; the AVX2
 * level, conv_winograd_avx2.c, decides and computes alike). */
#include <immintrin.h>

#include "conv.h"

#ifdef __clang__ /* clang has no GCC target pragma (the fuzz build, make fuzz) */
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl",                        \
                  "avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt") /* CORE_TARGET_AVX512 */
#endif

#include "simd512.h"

enum { MR = 8, NR = 32, XI = 16 };
/* bytes of a block's transformed input panels (they stay in the L2) */
#define PANEL_BYTES ((size_t)256 << 10)

typedef op_wino_run wino_job; /* conv.h: the convolution the block computes */

/* A block of nt tiles [t0, t0 + nt) and its lanes' tables. */
typedef struct wino_block {
  int64_t nv, np;         /* nv = ceil(nt / 16) vectors, np = ceil(nt / 32) panels */
  op_wino_tab tab;        /* the lanes' offsets, masks and runs (op_wino_tables) */
  float *v;               /* [XI][np][C][32] transformed input panels */
  float *m;               /* [np][MR][XI][32] one row block's GEMM sums */
  float *uc;              /* [XI][MR][C] one row block's transformed weights */
} wino_block;

/* u[xi us + p] = (G g G^T)[xi] for the kernels p in [p0, p1) of rows
 * o0, o0 + 1, ... (kernel p: out channel o0 + p / C, in channel p % C),
 * 16 at a time: their floats loaded as 16 rows and transposed in
 * registers (a gather of 9 strided floats cost more than the rest). The
 * kernel g of (o, c) is w[o][c] (9 floats), or with j->flipped w[c][o]
 * read backwards (Note [Flipped weights] in conv_avx512.c). */
static void transform_weights(const wino_job *j, int64_t o0, int64_t p0, int64_t p1, int64_t us,
                              float *u) {
  const __m512 half = _mm512_set1_ps(0.5f);
  int64_t C = j->g->C, O = j->g->O, nw = O * C * 9;
  for (int64_t p = p0; p < p1; p += 16) {
    __mmask16 m = (__mmask16)(p1 - p >= 16 ? 0xffff : (1u << (p1 - p)) - 1);
    __m512 g[16], r[4][3];
    for (int l = 0; l < 16; l++) {
      int64_t q = o0 * C + p + l, o = q / C, c = q % C;
      int64_t at = j->flipped ? (c * O + o) * 9 : q * 9;
      /* 16 floats where they lie inside w (a masked load across cache
       * lines cost 4x); lanes 9..15 unused */
      g[l] = p + l >= p1      ? _mm512_setzero_ps()
             : at + 16 <= nw ? _mm512_loadu_ps(j->w + at)
                             : _mm512_maskz_loadu_ps(0x1ff, j->w + at);
    }
    op_transpose16_ps(g); /* g[e] lane l = kernel p + l's float e */
    if (j->flipped)
      for (int e = 0; e < 4; e++) {
        __m512 t = g[e];
        g[e] = g[8 - e], g[8 - e] = t;
      }
    for (int q = 0; q < 3; q++) { /* G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 */
      __m512 s = _mm512_add_ps(g[q], g[6 + q]);
      r[0][q] = g[q];
      r[1][q] = _mm512_mul_ps(half, _mm512_add_ps(s, g[3 + q]));
      r[2][q] = _mm512_mul_ps(half, _mm512_sub_ps(s, g[3 + q]));
      r[3][q] = g[6 + q];
    }
    for (int a = 0; a < 4; a++) { /* (G g) G^T: the same along each row */
      __m512 s = _mm512_add_ps(r[a][0], r[a][2]);
      __m512 c[4] = {r[a][0], _mm512_mul_ps(half, _mm512_add_ps(s, r[a][1])),
                     _mm512_mul_ps(half, _mm512_sub_ps(s, r[a][1])), r[a][2]};
      for (int b = 0; b < 4; b++) _mm512_mask_storeu_ps(u + (4 * a + b) * us + p, m, c[b]);
    }
  }
}

/* Fills b's tables for tiles [t0, t0 + nt). */
static void block_tables(const wino_job *j, wino_block *b, int64_t t0, int64_t nt) {
  b->nv = (nt + 15) / 16, b->np = (nt + 31) / 32;
  op_wino_tables(j->g, t0, nt, 16, &b->tab);
}

/* Lanes 0, 2, 4, ... of the 32 floats lo:hi. */
static inline __m512 evens(__m512 lo, __m512 hi) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(lo, even, hi);
}

/* The 16 lanes at p + rb[l / R] + 2 (l % R) (R = 8, 4 or 2: runs of R
 * tiles, each run's 2 R floats one masked load), lanes outside m 0 and
 * their floats never read. Lane l's float is float 2 l of the runs' loads
 * laid end to end. */
static inline __m512 read_runs(const float *p, const int32_t *rb, int R, __mmask16 m) {
  uint32_t mm = _pdep_u32(m, 0x55555555u); /* lane l -> float 2 l */
  __m512 lo, hi;
  if (R == 8) {
    lo = _mm512_maskz_loadu_ps((__mmask16)mm, p + rb[0]);
    hi = _mm512_maskz_loadu_ps((__mmask16)(mm >> 16), p + rb[1]);
  } else if (R == 4) {
    __m256 q[4];
    for (int r = 0; r < 4; r++) q[r] = _mm256_maskz_loadu_ps((__mmask8)(mm >> 8 * r), p + rb[r]);
    lo = _mm512_insertf32x8(_mm512_castps256_ps512(q[0]), q[1], 1);
    hi = _mm512_insertf32x8(_mm512_castps256_ps512(q[2]), q[3], 1);
  } else {
    __m128 q[8];
    for (int r = 0; r < 8; r++) q[r] = _mm_maskz_loadu_ps((__mmask8)(mm >> 4 * r & 15), p + rb[r]);
    __m512 a = _mm512_castps128_ps512(q[0]), c = _mm512_castps128_ps512(q[4]);
    a = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(a, q[1], 1), q[2], 2), q[3], 3);
    c = _mm512_insertf32x4(_mm512_insertf32x4(_mm512_insertf32x4(c, q[5], 1), q[6], 2), q[7], 3);
    lo = a, hi = c;
  }
  return evens(lo, hi);
}

/* b->v = B^T d B for every channel and tile of the block (0 in lanes past
 * it), d the tile's 4x4 input patch (0 in the padding). */
static void transform_input(const wino_job *j, wino_block *b) {
  const win_geom *g = j->g;
  int64_t C = g->C, HW = g->H * g->W, nv = b->nv, pan = b->np * C * NR;
  for (int64_t c = 0; c < C; c++) {
    const float *xc = j->x + c * HW;
    for (int64_t v = 0; v < nv; v++) {
      __m512 d[16], r[16];
      int R = b->tab.runs[v];
      const int32_t *rb = b->tab.rin + v * 8;
      __m512i ib = _mm512_loadu_si512(b->tab.ib + v * 16);
      for (int e = 0; e < 16; e++) {
        __mmask16 m = b->tab.imk[e * nv + v];
        int32_t off = (int32_t)(e / 4 * g->W + e % 4);
        d[e] = !m      ? _mm512_setzero_ps()
               : R > 1 ? read_runs(xc + off, rb, R, m)
                       : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                                  _mm512_add_epi32(ib, _mm512_set1_epi32(off)),
                                                  xc, 4);
      }
      for (int q = 0; q < 4; q++) { /* B^T d, column q */
        r[q] = _mm512_sub_ps(d[q], d[8 + q]);
        r[4 + q] = _mm512_add_ps(d[4 + q], d[8 + q]);
        r[8 + q] = _mm512_sub_ps(d[8 + q], d[4 + q]);
        r[12 + q] = _mm512_sub_ps(d[4 + q], d[12 + q]);
      }
      float *dst = b->v + (v / 2) * C * NR + c * NR + (v % 2) * 16;
      for (int a = 0; a < 4; a++) { /* (B^T d) B, row a */
        const __m512 *ra = r + 4 * a;
        _mm512_store_ps(dst + (4 * a + 0) * pan, _mm512_sub_ps(ra[0], ra[2]));
        _mm512_store_ps(dst + (4 * a + 1) * pan, _mm512_add_ps(ra[1], ra[2]));
        _mm512_store_ps(dst + (4 * a + 2) * pan, _mm512_sub_ps(ra[2], ra[1]));
        _mm512_store_ps(dst + (4 * a + 3) * pan, _mm512_sub_ps(ra[1], ra[3]));
      }
    }
    if (nv % 2) /* the last panel's second half: no tiles */
      for (int xi = 0; xi < XI; xi++)
        _mm512_store_ps(b->v + xi * pan + (nv / 2) * C * NR + c * NR + 16, _mm512_setzero_ps());
  }
}

/* dst[i][xi][32] (rows i < mr, XI NR floats apart) = sum over k < C of
 * a[i][k] bp[k][32]: the AVX-512 conv tile (simd512.h). Not
 * inlined: inside the block loop GCC kept the 8 row pointers in vector
 * registers and on the stack. */
static __attribute__((noinline)) void gemm_tile(const float *const a[MR], const float *bp,
                                                int64_t C, float *dst, int mr) {
  __m512 acc[MR][2];
  op_tile8x32_ps(a, bp, C, acc);
  for (int i = 0; i < mr; i++) {
    _mm512_store_ps(dst + i * XI * NR, acc[i][0]);
    _mm512_store_ps(dst + i * XI * NR + 16, acc[i][1]);
  }
}

/* m[jp][i][xi][32] = sum over c of uc[xi us + i C + c] v[xi][jp][c][32]
 * for the rows i < mr (rows past mr read row mr - 1) of a row block's
 * transformed weights uc (points us floats apart). */
static void gemm_rows(const wino_job *j, const wino_block *b, const float *uc, int64_t us,
                      int mr) {
  int64_t C = j->g->C;
  for (int xi = 0; xi < XI; xi++) {
    const float *a[MR];
    for (int i = 0; i < MR; i++) a[i] = uc + xi * us + (i < mr ? i : mr - 1) * C;
    if (j->cold_u && xi + 1 < XI) op_wino_prefetch(uc + (xi + 1) * us, C, mr);
    for (int64_t jp = 0; jp < b->np; jp++)
      gemm_tile(a, b->v + (xi * b->np + jp) * C * NR, C, b->m + (jp * MR * XI + xi) * NR, mr);
  }
}

/* One output value vector y of channel ch at tile output e = (dy, dx) of
 * the block's vector v: the epilogue, then the scatter into out. */
static inline void put(const wino_job *j, const wino_block *b, int64_t v, int e, int64_t ch,
                       __m512 y, __m512 s, __m512 t) {
  const conv_epilogue *ep = j->ep;
  __mmask16 m = b->tab.omk[e * b->nv + v];
  if (!m) return;
  if (ep->scale) y = _mm512_mul_ps(y, s);
  if (ep->shift) y = _mm512_add_ps(y, t);
  __m512i idx = _mm512_add_epi32(
      _mm512_loadu_si512(b->tab.ob + v * 16),
      _mm512_set1_epi32((int32_t)(ch * j->L + e / 2 * j->g->OW + e % 2)));
  if (ep->residual)
    y = _mm512_add_ps(
        y, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, (const float *)ep->residual, 4));
  if (ep->relu) y = _mm512_max_ps(_mm512_setzero_ps(), y); /* NaN stays */
  _mm512_mask_i32scatter_ps(j->out, m, idx, y, 4);
}

/* Outputs row dy of the channel ch's tiles in vector v of a block whose
 * runs are R > 1 tiles: y0, y1 its columns dx = 0, 1 (the scale and shift
 * applied), interleaved so that each run's 2 R outputs are one masked
 * store, with the residual and relu on the way. */
static inline void put_runs(const wino_job *j, const wino_block *b, int64_t v, int dy,
                            int64_t ch, __m512 y0, __m512 y1) {
  const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                        15, 31);
  const conv_epilogue *ep = j->ep;
  __m512 z[2] = {_mm512_permutex2var_ps(y0, ilo, y1), _mm512_permutex2var_ps(y0, ihi, y1)};
  uint32_t zm = _pdep_u32(b->tab.omk[(2 * dy) * b->nv + v], 0x55555555u) |
                _pdep_u32(b->tab.omk[(2 * dy + 1) * b->nv + v], 0xaaaaaaaau);
  int64_t off = ch * j->L + dy * j->g->OW;
  const float *res = ep->residual ? (const float *)ep->residual + off : NULL;
  float *o = j->out + off;
  const int32_t *rb = b->tab.rout + v * 8;
  int R = b->tab.runs[v];
  if (R == 8) {
    for (int q = 0; q < 2; q++) {
      __mmask16 m = (__mmask16)(zm >> 16 * q);
      if (!m) continue;
      __m512 val = z[q];
      if (res) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(m, res + rb[q]));
      if (ep->relu) val = _mm512_max_ps(_mm512_setzero_ps(), val); /* NaN stays */
      _mm512_mask_storeu_ps(o + rb[q], m, val);
    }
  } else if (R == 4) {
    for (int q = 0; q < 4; q++) {
      __mmask8 m = (__mmask8)(zm >> 8 * q);
      if (!m) continue;
      __m256 val = q % 2 ? _mm512_extractf32x8_ps(z[q / 2], 1)
                         : _mm512_castps512_ps256(z[q / 2]);
      if (res) val = _mm256_add_ps(val, _mm256_maskz_loadu_ps(m, res + rb[q]));
      if (ep->relu) val = _mm256_max_ps(_mm256_setzero_ps(), val);
      _mm256_mask_storeu_ps(o + rb[q], m, val);
    }
  } else {
    for (int q = 0; q < 8; q++) {
      __mmask8 m = (__mmask8)(zm >> 4 * q & 15);
      if (!m) continue;
      __m128 val;
      switch (q % 4) {
      case 0: val = _mm512_castps512_ps128(z[q / 4]); break;
      case 1: val = _mm512_extractf32x4_ps(z[q / 4], 1); break;
      case 2: val = _mm512_extractf32x4_ps(z[q / 4], 2); break;
      default: val = _mm512_extractf32x4_ps(z[q / 4], 3); break;
      }
      if (res) val = _mm_add_ps(val, _mm_maskz_loadu_ps(m, res + rb[q]));
      if (ep->relu) val = _mm_max_ps(_mm_setzero_ps(), val);
      _mm_mask_storeu_ps(o + rb[q], m, val);
    }
  }
}

/* The outputs of rows [o0, o0 + mr) from b->m: Y = A^T m A per tile. */
static void transform_output(const wino_job *j, const wino_block *b, int64_t o0, int mr) {
  const conv_epilogue *ep = j->ep;
  for (int64_t v = 0; v < b->nv; v++)
    for (int i = 0; i < mr; i++) {
      const float *src = b->m + ((v / 2) * MR * XI + i * XI) * NR + (v % 2) * 16;
      __m512 t0[4], t1[4];
      for (int q = 0; q < 4; q++) { /* A^T m, column q */
        __m512 m0 = _mm512_load_ps(src + q * NR), m1 = _mm512_load_ps(src + (4 + q) * NR);
        __m512 m2 = _mm512_load_ps(src + (8 + q) * NR), m3 = _mm512_load_ps(src + (12 + q) * NR);
        t0[q] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
        t1[q] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
      }
      int64_t ch = o0 + i;
      __m512 s = _mm512_set1_ps(ep->scale ? ((const float *)ep->scale)[ch] : 1.0f);
      __m512 t = _mm512_set1_ps(ep->shift ? ((const float *)ep->shift)[ch] : 0.0f);
      __m512 y[4] = {_mm512_add_ps(_mm512_add_ps(t0[0], t0[1]), t0[2]),
                     _mm512_sub_ps(_mm512_sub_ps(t0[1], t0[2]), t0[3]),
                     _mm512_add_ps(_mm512_add_ps(t1[0], t1[1]), t1[2]),
                     _mm512_sub_ps(_mm512_sub_ps(t1[1], t1[2]), t1[3])};
      if (b->tab.runs[v] > 1) {
        for (int e = 0; e < 4; e++) {
          if (ep->scale) y[e] = _mm512_mul_ps(y[e], s);
          if (ep->shift) y[e] = _mm512_add_ps(y[e], t);
        }
        put_runs(j, b, v, 0, ch, y[0], y[1]);
        put_runs(j, b, v, 1, ch, y[2], y[3]);
      } else {
        for (int e = 0; e < 4; e++) put(j, b, v, e, ch, y[e], s, t);
      }
    }
}

/* One thread's scratch for blocks of up to nc tiles, laid out in p (NULL:
 * only its bytes). Returns the bytes. */
static size_t block_scratch(int64_t C, int64_t nc, char *p, wino_block *b) {
  int64_t nv = (nc + 15) / 16, np = (nc + 31) / 32;
  size_t pan = (size_t)(XI * np * C * NR) * sizeof(float);
  size_t mb = (size_t)(np * MR * XI * NR) * sizeof(float);
  size_t ub = (size_t)(XI * MR * C) * sizeof(float);
  size_t tabs = op_wino_tab_bytes(nv, 16);
  size_t all = pan + mb + ub + tabs;
  if (!p) return all;
  b->v = (float *)p;
  b->m = (float *)(p + pan);
  b->uc = (float *)(p + pan + mb);
  op_wino_tab_at(&b->tab, p + pan + mb + ub, nv, 16);
  return all;
}

/* The shared weights u [XI][O][C] for the kernels [p0, p1). */
static void weights_shared(const op_wino_run *j, int64_t p0, int64_t p1, float *u) {
  transform_weights(j, 0, p0, p1, j->g->O * j->g->C, u);
}

static size_t scratch_bytes(int64_t C, int64_t nc) {
  return 64 * ((sizeof(wino_block) + 63) / 64) + block_scratch(C, nc, NULL, NULL);
}

/* A thread's block, laid out at the start of its scratch. */
static wino_block *scratch_block(const op_wino_run *j, char *scratch) {
  wino_block *b = (wino_block *)scratch;
  block_scratch(j->g->C, j->nc, scratch + 64 * ((sizeof *b + 63) / 64), b);
  return b;
}

/* A block's tiles [t0, t0 + nt): its tables and transformed input. */
static void prepare(const op_wino_run *j, char *scratch, int64_t t0, int64_t nt) {
  wino_block *b = scratch_block(j, scratch);
  block_tables(j, b, t0, nt);
  transform_input(j, b);
}

/* The block's outputs of channels [o0, o0 + mr): the GEMMs, then the
 * output transform. */
static void rows(const op_wino_run *j, char *scratch, int64_t o0, int mr, const float *u) {
  wino_block *b = (wino_block *)scratch;
  int64_t C = j->g->C;
  if (u) {
    gemm_rows(j, b, u + o0 * C, j->g->O * C, mr);
  } else {
    transform_weights(j, o0, 0, mr * C, MR * C, b->uc);
    gemm_rows(j, b, b->uc, MR * C, mr);
  }
  transform_output(j, b, o0, mr);
}

static const op_wino_level level = {.kgroup = 16, .mr = MR, .panel_bytes = PANEL_BYTES,
                                    .scratch_bytes = scratch_bytes, .weights = weights_shared,
                                    .prepare = prepare, .rows = rows};
static const conv_epilogue no_epilogue = {0};

static int winograd(const win_geom *g, const float *x, const float *w, bool flipped,
                    const conv_epilogue *ep, float *out) {
  if (core_cpu_level() != CORE_CPU_AVX512 || !op_conv_winograd_applies(g)) return 0;
  return op_wino_drive(&level, g, x, w, flipped, ep ? ep : &no_epilogue, out);
}

int op_conv_winograd_avx512(const win_geom *g, const float *x, const float *w,
                            const conv_epilogue *ep, float *out) {
  return winograd(g, x, w, false, ep, out);
}

int op_conv_winograd_avx512_flipped(const win_geom *g, const float *x, const float *w,
                                    float *out) {
  return winograd(g, x, w, true, NULL, out);
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
