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
 * weights, Note [Winograd weights]) and V = B^T d B (the input). Here:
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
 * size) and op_conv_winograd is set. */
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

bool op_conv_winograd = true;

enum { MR = 8, NR = 32, XI = 16, NCMAX = 256 };
/* bytes of a block's transformed input panels (they stay in the L2) */
#define PANEL_BYTES ((size_t)256 << 10)

typedef struct wino_job {
  const win_geom *g;
  const float *x, *w;
  bool flipped; /* w is [C][O][3][3], read flipped (op_conv_winograd_avx512_flipped) */
  const conv_epilogue *ep;
  float *out;
  int64_t TH, TW, T, L, xs; /* tiles per column and row, T = N TH TW, L = OH OW */
} wino_job;

/* A block of nt tiles [t0, t0 + nt) and its lanes' tables. */
typedef struct wino_block {
  int64_t t0, nt, nv, np; /* nv = ceil(nt / 16) vectors, np = ceil(nt / 32) panels */
  __m512i *ibase;         /* [nv] input offset of patch element (0, 0), channel 0 */
  __m512i *obase;         /* [nv] output offset of tile output (0, 0), channel 0 */
  int32_t *runs;          /* [nv] R: every R lanes are R adjacent tiles of one row, or 1 */
  int32_t *rin, *rout;    /* [nv][8] the input and output offsets of each run's first lane */
  __mmask16 *imk;         /* [16][nv] lanes whose patch element (i, j) is in the image */
  __mmask16 *omk;         /* [4][nv] lanes whose output (dy, dx) exists */
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
  const win_geom *g = j->g;
  int64_t per = j->TH * j->TW;
  b->t0 = t0, b->nt = nt, b->nv = (nt + 15) / 16, b->np = (nt + 31) / 32;
  for (int64_t v = 0; v < b->nv; v++) {
    int32_t ib[16], ob[16];
    __mmask16 im[16] = {0}, om[4] = {0};
    for (int l = 0; l < 16; l++) {
      int64_t t = t0 + v * 16 + l;
      ib[l] = ob[l] = 0;
      if (t >= t0 + nt) continue; /* past the block: masked off everywhere */
      int64_t n = t / per, q = t % per, th = q / j->TW, tw = q % j->TW;
      int64_t ih = 2 * th - g->ph, iw = 2 * tw - g->pw, oh = 2 * th, ow = 2 * tw;
      ib[l] = (int32_t)(n * j->xs + ih * g->W + iw);
      ob[l] = (int32_t)(n * g->O * j->L + oh * g->OW + ow);
      for (int e = 0; e < 16; e++) {
        int64_t y = ih + e / 4, x = iw + e % 4;
        if (y >= 0 && y < g->H && x >= 0 && x < g->W) im[e] |= (__mmask16)(1u << l);
      }
      for (int e = 0; e < 4; e++)
        if (oh + e / 2 < g->OH && ow + e % 2 < g->OW) om[e] |= (__mmask16)(1u << l);
    }
    b->ibase[v] = _mm512_loadu_si512(ib);
    b->obase[v] = _mm512_loadu_si512(ob);
    /* R: each aligned group of R lanes is R adjacent tiles (inputs and
     * outputs 2 apart), lanes past the block masked off anywhere */
    int64_t nin = t0 + nt - (t0 + v * 16); /* lanes inside the block */
    int R = 8;
    for (; R > 1; R /= 2) {
      bool ok = true;
      for (int l = 0; l < 16 && l < nin && ok; l++) {
        int f = l / R * R;
        int64_t tf = t0 + v * 16 + f, tl = tf + (l - f);
        ok = tf / j->TW == tl / j->TW; /* the same tile row of the same image */
      }
      if (ok) break;
    }
    b->runs[v] = R;
    for (int r = 0; r < 8; r++) {
      b->rin[v * 8 + r] = r * R < 16 ? ib[r * R] : 0;
      b->rout[v * 8 + r] = r * R < 16 ? ob[r * R] : 0;
    }
    for (int e = 0; e < 16; e++) b->imk[e * b->nv + v] = im[e];
    for (int e = 0; e < 4; e++) b->omk[e * b->nv + v] = om[e];
  }
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
      int R = b->runs[v];
      const int32_t *rb = b->rin + v * 8;
      for (int e = 0; e < 16; e++) {
        __mmask16 m = b->imk[e * nv + v];
        int32_t off = (int32_t)(e / 4 * g->W + e % 4);
        d[e] = !m      ? _mm512_setzero_ps()
               : R > 1 ? read_runs(xc + off, rb, R, m)
                       : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                                  _mm512_add_epi32(b->ibase[v],
                                                                   _mm512_set1_epi32(off)),
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
 * a[i][k] bp[k][32]: the 8 x 32 register tile of conv_avx512.c. Not
 * inlined: inside the block loop GCC kept the 8 row pointers in vector
 * registers and on the stack. */
static __attribute__((noinline)) void gemm_tile(const float *const a[MR], const float *bp,
                                                int64_t C, float *dst, int mr) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5],
              *a6 = a[6], *a7 = a[7];
  for (int64_t k = 0; k < C; k++) {
    __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#define ROW(i, p)                                                        \
  do {                                                                   \
    __m512 ai = _mm512_set1_ps(p[k]);                                    \
    acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                      \
    acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                      \
  } while (0)
    ROW(0, a0); ROW(1, a1); ROW(2, a2); ROW(3, a3);
    ROW(4, a4); ROW(5, a5); ROW(6, a6); ROW(7, a7);
#undef ROW
    bp += NR;
  }
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
    for (int64_t jp = 0; jp < b->np; jp++)
      gemm_tile(a, b->v + (xi * b->np + jp) * C * NR, C, b->m + (jp * MR * XI + xi) * NR, mr);
  }
}

/* One output value vector y of channel ch at tile output e = (dy, dx) of
 * the block's vector v: the epilogue, then the scatter into out. */
static inline void put(const wino_job *j, const wino_block *b, int64_t v, int e, int64_t ch,
                       __m512 y, __m512 s, __m512 t) {
  const conv_epilogue *ep = j->ep;
  __mmask16 m = b->omk[e * b->nv + v];
  if (!m) return;
  if (ep->scale) y = _mm512_mul_ps(y, s);
  if (ep->shift) y = _mm512_add_ps(y, t);
  __m512i idx = _mm512_add_epi32(
      b->obase[v], _mm512_set1_epi32((int32_t)(ch * j->L + e / 2 * j->g->OW + e % 2)));
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
  uint32_t zm = _pdep_u32(b->omk[(2 * dy) * b->nv + v], 0x55555555u) |
                _pdep_u32(b->omk[(2 * dy + 1) * b->nv + v], 0xaaaaaaaau);
  int64_t off = ch * j->L + dy * j->g->OW;
  const float *res = ep->residual ? (const float *)ep->residual + off : NULL;
  float *o = j->out + off;
  const int32_t *rb = b->rout + v * 8;
  int R = b->runs[v];
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
      if (b->runs[v] > 1) {
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

/* Scratch of one thread for blocks of up to nc tiles: NULL on OOM. */
static char *block_scratch(int64_t C, int64_t nc, wino_block *b, size_t *nbytes) {
  int64_t nv = (nc + 15) / 16, np = (nc + 31) / 32;
  size_t pan = (size_t)(XI * np * C * NR) * sizeof(float);
  size_t mb = (size_t)(np * MR * XI * NR) * sizeof(float), vec = (size_t)nv * 64;
  size_t ub = (size_t)(XI * MR * C) * sizeof(float);
  size_t all = pan + mb + ub + 2 * vec + (size_t)(20 * nv) * sizeof(__mmask16) +
               (size_t)(17 * nv) * sizeof(int32_t);
  char *p = core_block_alloc(all, nbytes);
  if (!p) return NULL;
  b->v = (float *)p;
  b->m = (float *)(p + pan);
  b->uc = (float *)(p + pan + mb);
  char *q = p + pan + mb + ub;
  b->ibase = (__m512i *)q;
  b->obase = (__m512i *)(q + vec);
  b->imk = (__mmask16 *)(q + 2 * vec);
  b->omk = b->imk + 16 * nv;
  b->runs = (int32_t *)(b->omk + 4 * nv);
  b->rin = b->runs + nv;
  b->rout = b->rin + 8 * nv;
  return p;
}

/* Whether g is a conv this path computes, and at fewer multiplies. */
static bool applies(const win_geom *g, int64_t T) {
  if (!op_conv_winograd || !op_conv_implicit || g->G != 1 || g->KH != 3 || g->KW != 3 ||
      g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph > 2 || g->pw > 2 ||
      g->C < 4 || g->C > 4096)
    return false;
  int64_t P = g->N * g->OH * g->OW;
  double wino = 16.0 * (double)((T + NR - 1) / NR), direct = 9.0 * (double)((P + NR - 1) / NR);
  return wino <= 0.6 * direct;
}

static int winograd(const win_geom *g, const float *x, const float *w, bool flipped,
                    const conv_epilogue *ep, float *out) {
  if (core_cpu_level() != CORE_CPU_AVX512 || g->N <= 0 || g->OH <= 0 || g->OW <= 0) return 0;
  int64_t TH = (g->OH + 1) / 2, TW = (g->OW + 1) / 2, T = g->N * TH * TW;
  if (!applies(g, T) || !op_conv_offsets_fit(g, NR)) return 0;
  int64_t C = g->C, O = g->O, OC = O * C;
  if ((double)OC * XI > (double)INT32_MAX) return 0;
  conv_epilogue none = {0};
  wino_job j = {.g = g, .x = x, .w = w, .flipped = flipped, .ep = ep ? ep : &none, .out = out, .TH = TH, .TW = TW,
                .T = T, .L = g->OH * g->OW, .xs = C * g->H * g->W};
  int64_t nc = (int64_t)(PANEL_BYTES / ((size_t)(XI * C) * sizeof(float))) / NR * NR;
  if (nc < NR) nc = NR;
  if (nc > NCMAX) nc = NCMAX;
  double work = (double)T * (double)OC * XI;
  int nt = omp_in_parallel() || work < 64.0 * 64 * 64 ? 1 : omp_get_max_threads();
  /* Note [Winograd weights]: U_xi = G g G^T, 16 floats per 3x3 kernel,
   * is made on each call (the weights change between training steps). A
   * thread with one block transforms each row block's weights as it goes,
   * into L1; with more, they are transformed once into u [XI][O][C],
   * shared (each thread redoing them per block cost 20% at resnet18's 8x8
   * stage; writing u, 4 MiB at its 4x4 stage, cost more than the
   * transform when each thread has one block). */
  int64_t units = (T + NR - 1) / NR, per = (units + nt - 1) / nt, ub = nc / NR;
  size_t ubytes = 0;
  float *u = NULL;
  if ((per + ub - 1) / ub > 1) {
    u = core_block_alloc((size_t)(XI * OC) * sizeof(float), &ubytes);
    if (!u) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for Winograd weights");
  }
  int failed = 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    if (u) {
      int64_t nq = (OC + 15) / 16; /* 16-kernel groups */
#pragma omp for schedule(static)
      for (int64_t q = 0; q < nq; q++)
        transform_weights(&j, 0, q * 16, q * 16 + 16 < OC ? q * 16 + 16 : OC, OC, u);
    }
    wino_block b;
    size_t nbytes = 0;
    char *mem = block_scratch(C, nc, &b, &nbytes);
    if (!mem) {
#pragma omp atomic write
      failed = 1;
    }
    conv_share sh = op_conv_share(T, NR, nc, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t i = 0; mem && i < sh.nb; i++) {
      core_poll(); /* Note [Kernel poll] */
      int64_t t0, ntl;
      op_conv_share_block(&sh, T, NR, i, &t0, &ntl);
      block_tables(&j, &b, t0, ntl);
      transform_input(&j, &b);
      for (int64_t o0 = 0; o0 < O; o0 += MR) {
        int mr = (int)(O - o0 < MR ? O - o0 : MR);
        if (u) {
          gemm_rows(&j, &b, u + o0 * C, OC, mr);
        } else {
          transform_weights(&j, o0, 0, mr * C, MR * C, b.uc);
          gemm_rows(&j, &b, b.uc, MR * C, mr);
        }
        transform_output(&j, &b, o0, mr);
      }
    }
    if (mem) core_block_free(mem, nbytes);
  }
  if (u) core_block_free(u, ubytes);
  if (failed) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for Winograd panels");
  return 1;
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
