/* src/ops/sgemm.c: kiln's own float32 GEMM: the dispatch between its
 * kernels by CPU level, their packing buffers, and the AVX-512 kernel.
 *
 * Note [kiln sgemm]: OpenBLAS picks its kernels from OPENBLAS_CORETYPE, and
 * where that names an AVX2 core (this machine's environment says Haswell)
 * an AVX-512 CPU runs GEMM at half its width. kiln's own kernels, one per
 * CPU level (Note [CPU levels]): this file's for AVX-512, sgemm_avx2.c's
 * for AVX2+FMA, do the float32 products op_gemm hands them; everything else
 * (float64, GEMV, tiny products, the baseline level) stays with OpenBLAS.
 *
 * It is the textbook layering (Goto; BLIS): for each NC-wide column block
 * of C and KC-deep slice of K, op(B) is packed into NR-wide panels laid out
 * k-major ([kc][NR], zero padded), then for each MC-tall row block op(A) is
 * packed into MR-tall panels ([kc][MR]); the micro-kernel keeps an MR x NR
 * tile of C in 24 zmm registers and runs the kc rank-1 updates: two vector
 * loads of B and MR broadcasts of A per k. The B panel (kc x NR) stays in
 * L1 while the micro-kernel walks down the A block in L2. Packing reads
 * each layout with whole vectors: rows of a k-major operand are copied,
 * and an operand whose k runs along memory is transposed 16 x 16 in
 * registers. Edges are handled by masks on C and zero padding in the
 * panels, so every k loop is the same full-width loop.
 *
 * The first K slice adds the caller's beta times D, an addend that may be
 * C itself or another matrix (addmm's self, a broadcast bias row), so no
 * pass copies it into C first; beta 0 never reads it, so NaNs there do not
 * propagate, as BLAS. Later slices add to C. Threading is op_gemm's
 * (Note [BLAS threads]): each thread calls this on its own slice of C.
 * The AVX-512 code is compiled for that level alone (the pragma below);
 * it runs only when core_cpu_level() says the CPU has it. */
#include "op.h"

#include <immintrin.h>

/* Per-thread packing buffers, grown once and kept for the thread's life
 * (a step calls GEMM dozens of times; a fresh buffer would page-fault every
 * call): at most NC x KC floats (2 MiB) for B and MC x KC (144 KiB) for A. */
static _Thread_local float *pack_a, *pack_b;
static _Thread_local size_t cap_a, cap_b;

static float *grow(float **buf, size_t *cap, size_t n) {
  if (n <= *cap) return *buf;
  core_free_aligned(*buf);
  *buf = core_alloc_aligned(n * sizeof(float));
  *cap = *buf ? n : 0;
  core_thread_arm(); /* freed when the thread exits: Note [Thread exit] */
  return *buf;
}

static void release_packs(void) {
  core_free_aligned(pack_a);
  core_free_aligned(pack_b);
  pack_a = pack_b = NULL;
  cap_a = cap_b = 0;
}

__attribute__((constructor)) static void sgemm_ctor(void) { core_thread_on_exit(release_packs); }

float *op_sgemm_pack(int which, size_t n) {
  return which ? grow(&pack_b, &cap_b, n) : grow(&pack_a, &cap_a, n);
}

/* ---- the AVX-512 kernel ----------------------------------------------------- */
#ifdef __clang__ /* clang has no GCC target pragma (the fuzz build, make fuzz) */
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl",                        \
                  "avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt") /* CORE_TARGET_AVX512 */
#endif

#include "simd512.h"

enum { MR = 12, NR = 32, KC = 256, MC = 144, NC = 2048 };
#define PANEL ((__mmask16)((1u << MR) - 1)) /* the MR lanes of an A panel row */

/* The first n of 16 lanes (none for n <= 0). */
static inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Pack w columns (w <= width) of a k-major operand (element (k, j) at
 * p[k * ld + j]) for k < kc into dst[kc][width], zero padded. */
static void pack_kmajor(float *dst, int width, const float *p, int64_t ld, int64_t kc,
                        int64_t w) {
  for (int64_t k = 0; k < kc; k++)
    for (int v = 0; v < width; v += 16) {
      __mmask16 m = tail_mask(w - v);
      _mm512_store_ps(dst + k * width + v, _mm512_maskz_loadu_ps(m, p + k * ld + v));
    }
}

/* Pack w columns of an operand whose k runs along memory (element (k, j)
 * at p[j * ld + k]) into dst[kc][width], zero padded: 16 x 16 blocks are
 * read as rows and transposed in registers. */
static void pack_transposed(float *dst, int width, const float *p, int64_t ld, int64_t kc,
                            int64_t w) {
  for (int v = 0; v < width; v += 16) {
    int64_t wj = w - v < 16 ? (w - v > 0 ? w - v : 0) : 16;
    for (int64_t k = 0; k < kc; k += 16) {
      __mmask16 mk = tail_mask(kc - k);
      const float *row = p + v * ld + k;
      __m512 r[16];
      if (wj == 16 && kc - k >= 16) { /* the common, full block */
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(row + j * ld);
      } else {
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
          r[j] = j < wj ? _mm512_maskz_loadu_ps(mk, row + j * ld) : _mm512_setzero_ps();
      }
      op_transpose16_ps(r);
      float *d = dst + k * width + v;
      if (kc - k >= 16) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) _mm512_store_ps(d + i * width, r[i]);
      } else {
        for (int64_t i = 0; i < kc - k; i++) _mm512_store_ps(d + i * width, r[i]);
      }
    }
  }
}

/* Pack the MR-row panels of op(A)[rows, k] for mc rows and kc k. */
static void pack_a_block(float *dst, bool ta, const float *A, int64_t lda, int64_t mc,
                         int64_t kc) {
  for (int64_t i = 0; i < mc; i += MR) {
    int64_t h = mc - i < MR ? mc - i : MR;
    float *d = dst + i * kc;
    if (ta) {
      __mmask16 m = tail_mask(h);
      for (int64_t k = 0; k < kc; k++)
        _mm512_mask_storeu_ps(d + k * MR, PANEL, _mm512_maskz_loadu_ps(m, A + k * lda + i));
    } else {
      /* rows along memory: transpose through a 16-wide scratch panel */
      float tmp[16 * KC] __attribute__((aligned(64)));
      pack_transposed(tmp, 16, A + i * lda, lda, kc, h);
      for (int64_t k = 0; k < kc; k++)
        _mm512_mask_storeu_ps(d + k * MR, PANEL, _mm512_load_ps(tmp + k * 16));
    }
  }
}

/* C[mr x nr] (masked by m0, m1) = alpha * acc + beta * D (row i of D at
 * d + i * ldd; d may be c). Unrolled over constant rows, so the
 * accumulators stay in registers instead of a stack copy per call (5% of
 * attention's 64 x 64 x 64 products, whose K slices are 64 long). */
static inline __attribute__((always_inline)) void
store_tile(__m512 acc[MR][2], const float *d, int64_t ldd, float *c, int64_t ldc, int mr,
           __mmask16 m0, __mmask16 m1, float alpha, float beta) {
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    if (i >= mr) break;
    float *ci = c + i * ldc;
    const float *di = d + i * ldd;
    __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, di), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, di + 16), r1);
    }
    _mm512_mask_storeu_ps(ci, m0, r0);
    _mm512_mask_storeu_ps(ci + 16, m1, r1);
  }
}

/* Note [C prefetch]: the tile's rows of C are fetched into L1 as the
 * micro-kernel starts, so the kc rank-1 updates hide the misses that its
 * stores (and beta's loads) would otherwise wait for at the end: C is
 * usually a fresh output or a slice last touched a K slice ago, far out
 * of L1. Two lines a row cover the 32 floats of NR (three when c is not
 * 64-byte aligned: the middle one comes with the loads). 5-7% off the
 * transformer step's GEMMs at one thread. */
static inline void prefetch_c(const float *c, int64_t ldc, int mr) {
  for (int i = 0; i < mr; i++) {
    __builtin_prefetch(c + i * ldc, 0, 3);
    __builtin_prefetch(c + i * ldc + NR - 1, 0, 3);
  }
}

/* C[mr x nr] (masked by m0, m1) = alpha * Apanel . Bpanel + beta * D
 * (row i of D at d + i * ldd; d may be c), for mr <= rows, a constant of
 * each caller below: Note [Partial panels]. */
static inline __attribute__((always_inline)) void
micro_rows(int rows, int64_t kc, const float *a, const float *b, const float *d, int64_t ldd,
           float *c, int64_t ldc, int mr, __mmask16 m0, __mmask16 m1, float alpha, float beta) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  prefetch_c(c, ldc, mr); /* Note [C prefetch] */
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < rows; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += NR;
  }
  store_tile(acc, d, ldd, c, ldc, mr, m0, m1, alpha, beta);
}

/* Note [Partial panels]: a last A panel of mr < MR rows (M = 64 in
 * attention's per-head products: five full panels and one of 4 rows; M =
 * 256: 21 and one of 4) ran all 12 rows' FMAs over its zero padding,
 * 11% of a 64 x 64 x 64 product. Panels of up to 4 or 8 rows run a
 * kernel of that many rows instead; each row's sum is the same, in the
 * same order, so results do not change. */
static void micro(int64_t kc, const float *a, const float *b, const float *d, int64_t ldd,
                  float *c, int64_t ldc, int mr, __mmask16 m0, __mmask16 m1, float alpha,
                  float beta) {
  if (mr > 8) micro_rows(MR, kc, a, b, d, ldd, c, ldc, mr, m0, m1, alpha, beta);
  else if (mr > 4) micro_rows(8, kc, a, b, d, ldd, c, ldc, mr, m0, m1, alpha, beta);
  else micro_rows(4, kc, a, b, d, ldd, c, ldc, mr, m0, m1, alpha, beta);
}

/* Note [Direct A panels]: a row-major op(A) (k along memory) must be
 * transposed to be packed, about 0.4 cycles a float, and the packed block
 * pays off only over the column panels that reuse it. Attention's
 * products p @ v and ds @ k ([128, 128] @ [128, 32]: one 32-wide panel)
 * spent as long packing A as multiplying. With few column panels (or a
 * short K slice) the full MR-row panels are read where A lies: per k, one
 * broadcast from each of the 12 rows (the same loads as from a packed
 * panel; the rows' cache lines serve 16 consecutive k). A last partial
 * panel is still packed (its zero rows). Same sums in the same order as
 * micro, so the results are identical to the packed path's. Up to 8
 * column panels (256 columns of a thread's slice) reading A where it lies
 * is faster, at 1 thread on the Zen 4 host, M = 128: K = 784 with B
 * transposed, N = 128 / 192 / 256: 106 / 106 / 105 GFLOP/s against
 * packed 89 / 100 / 95-100; K = 256, N = 256: 110 against 98; at 12
 * panels the two are within noise (N = 384: 100 against 102). The MLP's
 * forward x @ W^T (N = 256 split over 2 threads: 4 panels each) went from
 * 172 to 188 GFLOP/s at 2 threads (3 alternating runs). */
static void micro_direct(int64_t kc, const float *a, int64_t lda, const float *b, const float *d,
                         int64_t ldd, float *c, int64_t ldc, __mmask16 m0, __mmask16 m1,
                         float alpha, float beta) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const float *p0 = a, *p1 = a + 3 * lda, *p2 = a + 6 * lda, *p3 = a + 9 * lda;
  prefetch_c(c, ldc, MR); /* Note [C prefetch] */
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#define ROW(i, p, s)                                                     \
  do {                                                                   \
    __m512 ai = _mm512_set1_ps(p[(s) * lda]);                            \
    acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);                      \
    acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);                      \
  } while (0)
    ROW(0, p0, 0); ROW(1, p0, 1); ROW(2, p0, 2);
    ROW(3, p1, 0); ROW(4, p1, 1); ROW(5, p1, 2);
    ROW(6, p2, 0); ROW(7, p2, 1); ROW(8, p2, 2);
    ROW(9, p3, 0); ROW(10, p3, 1); ROW(11, p3, 2);
#undef ROW
    p0++, p1++, p2++, p3++;
    b += NR;
  }
  store_tile(acc, d, ldd, c, ldc, MR, m0, m1, alpha, beta);
}

static bool sgemm_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         const float *D, int64_t ldd, float *C, int64_t ldc, op_gemm_epilogue ep,
                         void *ep_ctx) {
  int64_t nslices = (K + KC - 1) / KC, kcmax = (K + nslices - 1) / nslices;
  int64_t ncmax = N < NC ? N : NC, mcmax = M < MC ? M : MC;
  float *bp = op_sgemm_pack(1, (size_t)((ncmax + NR - 1) / NR * NR * kcmax));
  float *ap = op_sgemm_pack(0, (size_t)((mcmax + MR - 1) / MR * MR * kcmax));
  if (!bp || !ap) return false;
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = N - jc < NC ? N - jc : NC;
    for (int64_t pc = 0; pc < K; pc += kcmax) {
      int64_t kc = K - pc < kcmax ? K - pc : kcmax;
      /* Note [Packed B cache]: a weight's panels may be packed already */
      float *bq = bp;
      bool ready;
      op_pack_entry *pe = op_pack_get(B, ldb, tb, jc, pc, kc, nc, 512,
                                      (size_t)((nc + NR - 1) / NR * NR * kc), &bq, &ready);
      for (int64_t j = 0; j < nc && !ready; j += NR) {
        int64_t w = nc - j < NR ? nc - j : NR;
        if (tb) pack_transposed(bq + j * kc, NR, B + (jc + j) * ldb + pc, ldb, kc, w);
        else pack_kmajor(bq + j * kc, NR, B + pc * ldb + jc + j, ldb, kc, w);
      }
      /* the first K slice adds beta D; the later ones add to C */
      float be = pc == 0 ? beta : 1.0f;
      const float *d = pc == 0 ? D : C;
      int64_t ld = pc == 0 ? ldd : ldc;
      /* Note [Direct A panels] */
      bool direct = !ta && (nc <= 8 * NR || kc <= 64);
      for (int64_t ic = 0; ic < M; ic += MC) {
        int64_t mc = M - ic < MC ? M - ic : MC, full = direct ? mc / MR * MR : 0;
        core_poll(); /* Note [Kernel poll] */
        if (mc > full) /* the panels not read directly */
          pack_a_block(ap, ta, ta ? A + pc * lda + ic : A + (ic + full) * lda + pc, lda,
                       mc - full, kc);
        for (int64_t j = 0; j < nc; j += NR) {
          __mmask16 m0 = tail_mask(nc - j), m1 = nc - j > 16 ? tail_mask(nc - j - 16) : 0;
          for (int64_t i = 0; i < mc; i += MR) {
            const float *di = d + (ic + i) * ld + jc + j;
            float *ci = C + (ic + i) * ldc + jc + j;
            if (i < full)
              micro_direct(kc, A + (ic + i) * lda + pc, lda, bq + j * kc, di, ld, ci, ldc, m0, m1,
                           alpha, be);
            else
              micro(kc, ap + (i - full) * kc, bq + j * kc, di, ld, ci, ldc,
                    (int)(mc - i < MR ? mc - i : MR), m0, m1, alpha, be);
          }
        }
        if (ep && pc + kc >= K) /* Note [Block epilogue]: the block is done */
          ep(C + ic * ldc + jc, mc, nc, ldc, ep_ctx);
      }
      op_pack_put(pe);
    }
  }
  return true;
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* ---- dispatch ---------------------------------------------------------------- */
bool op_sgemm_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     const float *D, int64_t ldd, float *C, int64_t ldc, op_gemm_epilogue ep,
                     void *ep_ctx) {
  if (!D) D = C, ldd = ldc;
  if (M <= 0 || N <= 0 || K <= 0) return false;
  switch (core_cpu_level()) {
  case CORE_CPU_AVX512:
    return sgemm_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, D, ldd, C, ldc, ep, ep_ctx);
  case CORE_CPU_AVX2:
    return op_sgemm_avx2(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, D, ldd, C, ldc, ep,
                         ep_ctx);
  default: return false;
  }
}

int op_sgemm_panel(bool rows) {
  switch (core_cpu_level()) {
  case CORE_CPU_AVX512: return rows ? MR : NR;
  case CORE_CPU_AVX2: return rows ? 6 : 16; /* sgemm_avx2.c's MR, NR */
  default: return 16;
  }
}
