/* src/ops/conv_winograd_avx2.c: conv2d's float32 forward for 3x3 stride-1
 * kernels at the AVX2 level by Winograd's F(2x2, 3x3): conv_winograd.c's
 * path (Note [Winograd F(2x2,3x3)]) with 8-lane vectors, for CPUs with
 * AVX2 and FMA but no AVX-512 (AMD Zen 1-3, Intel Haswell to Alder Lake).
 *
 * Note [Winograd at AVX2]: the same parts, fitted to 16 ymm registers and
 * no mask registers, as conv_avx2.c fits the direct tiles (Note [Implicit
 * im2col at AVX2]): panels of 16 tiles, the GEMMs on a 6 x 16 register
 * tile, a block's patch elements read as runs of adjacent tiles by
 * maskloads (one lane per tile, masks from the tables' bit sets) or else
 * gathered, outputs stored as runs by maskstores or else lane by lane,
 * the weights transformed 8 kernels at a time (8 floats of each loaded and
 * transposed, the ninth read alone). Which convolutions take it
 * (op_conv_winograd_applies) and every operation on each lane are the
 * AVX-512 level's, in the same order: each output is the same sum of the
 * same products, so the two levels give bitwise the same outputs
 * (tested). */
#include <immintrin.h>

#include "conv.h"

#ifdef __clang__ /* clang has no GCC target pragma (the fuzz build, make fuzz) */
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt") /* CORE_TARGET_AVX2 */
#endif

#include "simd256.h"

enum { MR = 6, NR = 16, VL = 8, XI = 16 };
/* bytes of a block's transformed input panels (they stay in a 512 KiB L2) */
#define PANEL_BYTES ((size_t)192 << 10)

typedef op_wino_run wino_job; /* conv.h: the convolution the block computes */

/* A block of nt tiles and its lanes' tables (op_wino_tables, 8 lanes). */
typedef struct wino_block {
  int64_t nv, np; /* nv = ceil(nt / 8) vectors, np = ceil(nt / 16) panels */
  op_wino_tab tab;
  float *v;       /* [XI][np][C][16] transformed input panels */
  float *m;       /* [np][MR][XI][16] one row block's GEMM sums */
  float *uc;      /* [XI][MR][C] one row block's transformed weights */
} wino_block;

/* The lanes of the bit set m as a vector mask (all ones where set). */
static inline __m256i bits_mask(unsigned m) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), bit), bit);
}

static inline __m128i bits_mask4(unsigned m) {
  const __m128i bit = _mm_setr_epi32(1, 2, 4, 8);
  return _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32((int)m), bit), bit);
}

/* u[xi us + p] = (G g G^T)[xi] for the kernels p in [p0, p1) of rows o0,
 * o0 + 1, ... (kernel p: out channel o0 + p / C, in channel p % C; g =
 * w[o][c]), 8 at a time: conv_winograd.c's transform_weights. */
static void transform_weights(const wino_job *j, int64_t o0, int64_t p0, int64_t p1, int64_t us,
                              float *u) {
  const __m256 half = _mm256_set1_ps(0.5f);
  int64_t C = j->g->C;
  for (int64_t p = p0; p < p1; p += 8) {
    int n = (int)(p1 - p < 8 ? p1 - p : 8);
    __m256i m = bits_mask((1u << n) - 1);
    __m256 g[9], r[4][3];
    float ninth[8] = {0};
    for (int l = 0; l < 8; l++) {
      const float *k = j->w + (o0 * C + p + l) * 9;
      g[l] = l < n ? _mm256_loadu_ps(k) : _mm256_setzero_ps(); /* floats 0..7 */
      if (l < n) ninth[l] = k[8];
    }
    op_transpose8_ps(g); /* g[e] lane l = kernel p + l's float e */
    g[8] = _mm256_loadu_ps(ninth);
    for (int q = 0; q < 3; q++) { /* G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 */
      __m256 s = _mm256_add_ps(g[q], g[6 + q]);
      r[0][q] = g[q];
      r[1][q] = _mm256_mul_ps(half, _mm256_add_ps(s, g[3 + q]));
      r[2][q] = _mm256_mul_ps(half, _mm256_sub_ps(s, g[3 + q]));
      r[3][q] = g[6 + q];
    }
    for (int a = 0; a < 4; a++) { /* (G g) G^T: the same along each row */
      __m256 s = _mm256_add_ps(r[a][0], r[a][2]);
      __m256 c[4] = {r[a][0], _mm256_mul_ps(half, _mm256_add_ps(s, r[a][1])),
                     _mm256_mul_ps(half, _mm256_sub_ps(s, r[a][1])), r[a][2]};
      for (int b = 0; b < 4; b++) _mm256_maskstore_ps(u + (4 * a + b) * us + p, m, c[b]);
    }
  }
}

/* Lanes 0, 2, 4, ... of the 16 floats lo:hi. */
static inline __m256 evens(__m256 lo, __m256 hi) {
  /* [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] -> [lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6] */
  __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* The 8 lanes at p + rb[l / R] + 2 (l % R) (R = 8, 4 or 2), lanes outside
 * m 0 and their floats never read: lane l's float is float 2 l of the
 * runs' 2 R floats laid end to end. */
static inline __m256 read_runs(const float *p, const int32_t *rb, int R, unsigned m) {
  unsigned mm = _pdep_u32(m, 0x5555u); /* lane l -> float 2 l */
  __m256 lo, hi;
  if (R == 8) {
    lo = _mm256_maskload_ps(p + rb[0], bits_mask(mm & 0xffu));
    hi = _mm256_maskload_ps(p + rb[0] + 8, bits_mask(mm >> 8));
  } else if (R == 4) {
    lo = _mm256_maskload_ps(p + rb[0], bits_mask(mm & 0xffu));
    hi = _mm256_maskload_ps(p + rb[1], bits_mask(mm >> 8));
  } else {
    __m128 q[4];
    for (int r = 0; r < 4; r++) q[r] = _mm_maskload_ps(p + rb[r], bits_mask4(mm >> 4 * r & 15));
    lo = _mm256_insertf128_ps(_mm256_castps128_ps256(q[0]), q[1], 1);
    hi = _mm256_insertf128_ps(_mm256_castps128_ps256(q[2]), q[3], 1);
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
      __m256 d[16], r[16];
      int R = b->tab.runs[v];
      const int32_t *rb = b->tab.rin + v * 8;
      __m256i ib = _mm256_loadu_si256((const __m256i *)(b->tab.ib + v * VL));
      for (int e = 0; e < 16; e++) {
        unsigned m = b->tab.imk[e * nv + v];
        int32_t off = (int32_t)(e / 4 * g->W + e % 4);
        d[e] = !m      ? _mm256_setzero_ps()
               : R > 1 ? read_runs(xc + off, rb, R, m)
                       : _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc,
                                                  _mm256_add_epi32(ib, _mm256_set1_epi32(off)),
                                                  _mm256_castsi256_ps(bits_mask(m)), 4);
      }
      for (int q = 0; q < 4; q++) { /* B^T d, column q */
        r[q] = _mm256_sub_ps(d[q], d[8 + q]);
        r[4 + q] = _mm256_add_ps(d[4 + q], d[8 + q]);
        r[8 + q] = _mm256_sub_ps(d[8 + q], d[4 + q]);
        r[12 + q] = _mm256_sub_ps(d[4 + q], d[12 + q]);
      }
      float *dst = b->v + (v / 2) * C * NR + c * NR + (v % 2) * VL;
      for (int a = 0; a < 4; a++) { /* (B^T d) B, row a */
        const __m256 *ra = r + 4 * a;
        _mm256_store_ps(dst + (4 * a + 0) * pan, _mm256_sub_ps(ra[0], ra[2]));
        _mm256_store_ps(dst + (4 * a + 1) * pan, _mm256_add_ps(ra[1], ra[2]));
        _mm256_store_ps(dst + (4 * a + 2) * pan, _mm256_sub_ps(ra[2], ra[1]));
        _mm256_store_ps(dst + (4 * a + 3) * pan, _mm256_sub_ps(ra[1], ra[3]));
      }
    }
    if (nv % 2) /* the last panel's second half: no tiles */
      for (int xi = 0; xi < XI; xi++)
        _mm256_store_ps(b->v + xi * pan + (nv / 2) * C * NR + c * NR + VL, _mm256_setzero_ps());
  }
}

/* dst[i][xi][16] (rows i < mr, XI NR floats apart) = sum over k < C of
 * a[i][k] bp[k][16]: the AVX2 kernels' 6 x 16 tile (simd256.h). Not
 * inlined (GCC spilled the row pointers inside the block loop at AVX-512). */
static __attribute__((noinline)) void gemm_tile(const float *const a[MR], const float *bp,
                                                int64_t C, float *dst, int mr) {
  __m256 acc[MR][2];
  op_tile6x16_ps(a, bp, C, acc);
  for (int i = 0; i < mr; i++) {
    _mm256_store_ps(dst + i * XI * NR, acc[i][0]);
    _mm256_store_ps(dst + i * XI * NR + VL, acc[i][1]);
  }
}

/* m[jp][i][xi][16] = sum over c of uc[xi us + i C + c] v[xi][jp][c][16]
 * for the rows i < mr (rows past mr read row mr - 1). */
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

/* The epilogue's residual and relu on one run's n (4 or 8) outputs val at
 * out + at (lanes of mask m), then the store. */
static inline void store_run8(const wino_job *j, int64_t at, __m256 val, unsigned m) {
  const conv_epilogue *ep = j->ep;
  __m256i mk = bits_mask(m);
  if (ep->residual) val = _mm256_add_ps(val, _mm256_maskload_ps((const float *)ep->residual + at, mk));
  if (ep->relu) val = _mm256_max_ps(_mm256_setzero_ps(), val); /* NaN stays */
  _mm256_maskstore_ps(j->out + at, mk, val);
}

static inline void store_run4(const wino_job *j, int64_t at, __m128 val, unsigned m) {
  const conv_epilogue *ep = j->ep;
  __m128i mk = bits_mask4(m);
  if (ep->residual) val = _mm_add_ps(val, _mm_maskload_ps((const float *)ep->residual + at, mk));
  if (ep->relu) val = _mm_max_ps(_mm_setzero_ps(), val);
  _mm_maskstore_ps(j->out + at, mk, val);
}

/* Output row dy of channel ch's tiles in vector v (runs of R > 1 tiles):
 * y0, y1 its columns dx = 0, 1 (scale and shift applied), interleaved so
 * that each run's 2 R outputs are one store. */
static void put_runs(const wino_job *j, const wino_block *b, int64_t v, int dy, int64_t ch,
                     __m256 y0, __m256 y1) {
  __m256 lo = _mm256_unpacklo_ps(y0, y1), hi = _mm256_unpackhi_ps(y0, y1);
  __m256 z0 = _mm256_permute2f128_ps(lo, hi, 0x20), z1 = _mm256_permute2f128_ps(lo, hi, 0x31);
  unsigned zm = _pdep_u32(b->tab.omk[(2 * dy) * b->nv + v], 0x5555u) |
                _pdep_u32(b->tab.omk[(2 * dy + 1) * b->nv + v], 0xaaaau);
  int64_t off = ch * j->L + dy * j->g->OW;
  const int32_t *rb = b->tab.rout + v * 8;
  int R = b->tab.runs[v];
  if (R == 8) {
    if (zm & 0xffu) store_run8(j, off + rb[0], z0, zm & 0xffu);
    if (zm >> 8) store_run8(j, off + rb[0] + 8, z1, zm >> 8);
  } else if (R == 4) {
    if (zm & 0xffu) store_run8(j, off + rb[0], z0, zm & 0xffu);
    if (zm >> 8) store_run8(j, off + rb[1], z1, zm >> 8);
  } else {
    __m128 q[4] = {_mm256_castps256_ps128(z0), _mm256_extractf128_ps(z0, 1),
                   _mm256_castps256_ps128(z1), _mm256_extractf128_ps(z1, 1)};
    for (int r = 0; r < 4; r++)
      if (zm >> 4 * r & 15) store_run4(j, off + rb[r], q[r], zm >> 4 * r & 15);
  }
}

/* Output e = (dy, dx) of channel ch's tiles in vector v (no runs), lane by
 * lane: the epilogue's residual and relu, then the stores. */
static void put_lanes(const wino_job *j, const wino_block *b, int64_t v, int e, int64_t ch,
                      __m256 y) {
  const conv_epilogue *ep = j->ep;
  unsigned m = b->tab.omk[e * b->nv + v];
  const int32_t *ob = b->tab.ob + v * VL;
  int64_t off = ch * j->L + e / 2 * j->g->OW + e % 2;
  float r[VL] = {0};
  if (ep->residual)
    for (int l = 0; l < VL; l++)
      if (m >> l & 1) r[l] = ((const float *)ep->residual)[ob[l] + off];
  if (ep->residual) y = _mm256_add_ps(y, _mm256_loadu_ps(r));
  if (ep->relu) y = _mm256_max_ps(_mm256_setzero_ps(), y);
  _mm256_storeu_ps(r, y);
  for (int l = 0; l < VL; l++)
    if (m >> l & 1) j->out[ob[l] + off] = r[l];
}

/* The outputs of rows [o0, o0 + mr) from b->m: Y = A^T m A per tile. */
static void transform_output(const wino_job *j, const wino_block *b, int64_t o0, int mr) {
  const conv_epilogue *ep = j->ep;
  for (int64_t v = 0; v < b->nv; v++)
    for (int i = 0; i < mr; i++) {
      const float *src = b->m + ((v / 2) * MR * XI + i * XI) * NR + (v % 2) * VL;
      __m256 t0[4], t1[4];
      for (int q = 0; q < 4; q++) { /* A^T m, column q */
        __m256 m0 = _mm256_load_ps(src + q * NR), m1 = _mm256_load_ps(src + (4 + q) * NR);
        __m256 m2 = _mm256_load_ps(src + (8 + q) * NR), m3 = _mm256_load_ps(src + (12 + q) * NR);
        t0[q] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        t1[q] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
      }
      int64_t ch = o0 + i;
      __m256 s = _mm256_set1_ps(ep->scale ? ((const float *)ep->scale)[ch] : 1.0f);
      __m256 t = _mm256_set1_ps(ep->shift ? ((const float *)ep->shift)[ch] : 0.0f);
      __m256 y[4] = {_mm256_add_ps(_mm256_add_ps(t0[0], t0[1]), t0[2]),
                     _mm256_sub_ps(_mm256_sub_ps(t0[1], t0[2]), t0[3]),
                     _mm256_add_ps(_mm256_add_ps(t1[0], t1[1]), t1[2]),
                     _mm256_sub_ps(_mm256_sub_ps(t1[1], t1[2]), t1[3])};
      for (int e = 0; e < 4; e++) {
        if (ep->scale) y[e] = _mm256_mul_ps(y[e], s);
        if (ep->shift) y[e] = _mm256_add_ps(y[e], t);
      }
      if (b->tab.runs[v] > 1) {
        put_runs(j, b, v, 0, ch, y[0], y[1]);
        put_runs(j, b, v, 1, ch, y[2], y[3]);
      } else {
        for (int e = 0; e < 4; e++) put_lanes(j, b, v, e, ch, y[e]);
      }
    }
}

/* One thread's scratch for blocks of up to nc tiles, laid out in p (NULL:
 * only its bytes). Returns the bytes. */
static size_t block_scratch(int64_t C, int64_t nc, char *p, wino_block *b) {
  int64_t nv = (nc + VL - 1) / VL, np = (nc + NR - 1) / NR;
  size_t pan = (size_t)(XI * np * C * NR) * sizeof(float);
  size_t mb = (size_t)(np * MR * XI * NR) * sizeof(float);
  size_t ub = (size_t)(XI * MR * C) * sizeof(float);
  size_t tabs = op_wino_tab_bytes(nv, VL);
  size_t all = pan + mb + ub + tabs;
  if (!p) return all;
  b->v = (float *)p;
  b->m = (float *)(p + pan);
  b->uc = (float *)(p + pan + mb);
  op_wino_tab_at(&b->tab, p + pan + mb + ub, nv, VL);
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
  b->nv = (nt + VL - 1) / VL, b->np = (nt + NR - 1) / NR;
  op_wino_tables(j->g, t0, nt, VL, &b->tab);
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

static const op_wino_level level = {.kgroup = 8, .mr = MR, .panel_bytes = PANEL_BYTES,
                                    .scratch_bytes = scratch_bytes, .weights = weights_shared,
                                    .prepare = prepare, .rows = rows};
static const conv_epilogue no_epilogue = {0};

int op_conv_winograd_avx2(const win_geom *g, const float *x, const float *w,
                          const conv_epilogue *ep, float *out) {
  if (core_cpu_level() != CORE_CPU_AVX2 || !op_conv_winograd_applies(g)) return 0;
  return op_wino_drive(&level, g, x, w, false, ep ? ep : &no_epilogue, out);
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
