/* src/ops/sgemm_avx2.c: kiln's float32 GEMM kernel for AVX2+FMA CPUs (Zen
 * 1-3, Haswell and later without AVX-512), Note [kiln sgemm] in sgemm.c.
 *
 * The same layering as the AVX-512 kernel, with BLIS's Haswell/Zen shape
 * of micro-tile: 6 rows x 16 columns of C in 12 ymm accumulators, two
 * vector loads of the packed B panel and six broadcasts of the packed A
 * panel per k (15 of the 16 ymm registers; named variables, see micro).
 * The blocking (KC = 384: a 24 KiB B panel in L1; 4% faster than 256 on
 * 1024^3, by CPU time on Zen 4) keeps the A block (144 x 384, 216 KiB) in
 * L2. Its K slices differ from the AVX-512 kernel's (256), so the two
 * kernels' sums round differently (each is one FMA per term, in k order
 * within a slice). Packing reads whole vectors: k-major rows are
 * copied, operands whose k runs along memory are transposed 8 x 8 in
 * registers; edges are zero padding in the panels and masked loads and
 * stores on C. Compiled for the AVX2 level alone (the pragma); it runs only
 * when core_cpu_level() says so. */
#include <immintrin.h>

#include "op.h"

#ifdef __clang__ /* clang has no GCC target pragma (the fuzz build, make fuzz) */
#pragma clang attribute push(__attribute__((target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt")
#endif

#include "simd256.h"

enum { MR = 6, NR = 16, KC = 384, MC = 144, NC = 2048 };
/* A panels are stored with 8-wide stores of which MR lanes count (the next
 * k's row overwrites the other two): the buffer has this much slack. */
#define A_SLACK 8

/* The first n of 8 lanes as a maskload/maskstore mask (none for n <= 0). */
static inline __m256i lanes(int64_t n) {
  static const int32_t tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256((const __m256i *)(tab + 8 - k));
}

/* Reads an 8 x 8 block whose rows j < rows are at p + j * ld, the first
 * cols of each (zero elsewhere), and transposes it: r[k] holds column k. */
static inline void load_t8(__m256 r[8], const float *p, int64_t ld, int64_t rows, int64_t cols) {
  if (rows >= 8 && cols >= 8) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(p + j * ld);
  } else {
    __m256i m = lanes(cols);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
      r[j] = j < rows ? _mm256_maskload_ps(p + j * ld, m) : _mm256_setzero_ps();
  }
  op_transpose8_ps(r);
}

/* Packs w <= NR columns of op(B) for k < kc into dst[kc][NR], zero padded:
 * element (k, j) at p[k * ld + j] (!tb) or p[j * ld + k] (tb). */
static void pack_b(float *dst, bool tb, const float *p, int64_t ld, int64_t kc, int64_t w) {
  if (!tb) {
    __m256i m0 = lanes(w), m1 = lanes(w - 8);
    for (int64_t k = 0; k < kc; k++) {
      const float *row = p + k * ld;
      if (w == NR) {
        _mm256_store_ps(dst + k * NR, _mm256_loadu_ps(row));
        _mm256_store_ps(dst + k * NR + 8, _mm256_loadu_ps(row + 8));
      } else {
        _mm256_store_ps(dst + k * NR, _mm256_maskload_ps(row, m0));
        _mm256_store_ps(dst + k * NR + 8, w > 8 ? _mm256_maskload_ps(row + 8, m1)
                                                : _mm256_setzero_ps());
      }
    }
    return;
  }
  for (int v = 0; v < NR; v += 8) {
    int64_t rows = w - v < 0 ? 0 : w - v;
    for (int64_t k = 0; k < kc; k += 8) {
      __m256 r[8];
      load_t8(r, p + v * ld + k, ld, rows, kc - k);
      int64_t nk = kc - k < 8 ? kc - k : 8;
      for (int64_t i = 0; i < nk; i++) _mm256_store_ps(dst + (k + i) * NR + v, r[i]);
    }
  }
}

/* Packs the MR-row panels of op(A) for mc rows and kc k into dst: element
 * (i, k) at A[k * lda + i] (ta) or A[i * lda + k]. */
static void pack_a(float *dst, bool ta, const float *A, int64_t lda, int64_t mc, int64_t kc) {
  for (int64_t i = 0; i < mc; i += MR) {
    int64_t h = mc - i < MR ? mc - i : MR;
    float *d = dst + i * kc;
    if (ta) {
      __m256i m = lanes(h);
      for (int64_t k = 0; k < kc; k++)
        _mm256_storeu_ps(d + k * MR, _mm256_maskload_ps(A + k * lda + i, m));
    } else {
      for (int64_t k = 0; k < kc; k += 8) {
        __m256 r[8];
        load_t8(r, A + i * lda + k, lda, h, kc - k);
        int64_t nk = kc - k < 8 ? kc - k : 8;
        for (int64_t j = 0; j < nk; j++) _mm256_storeu_ps(d + (k + j) * MR, r[j]);
      }
    }
  }
}

/* One row of the tile: c<i>0, c<i>1 += a[i] * (b0, b1). */
#define ROW_FMA(i)                                                              \
  do {                                                                          \
    __m256 ai = _mm256_broadcast_ss(a + (i));                                   \
    c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                                 \
    c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                                 \
  } while (0)

/* Row i of C = alpha * (r0, r1) + beta * row i of D, whole rows. */
static inline void put_row(float *ci, const float *di, __m256 r0, __m256 r1, __m256 va,
                           __m256 vb, bool beta) {
  r0 = _mm256_mul_ps(va, r0), r1 = _mm256_mul_ps(va, r1);
  if (beta) {
    r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(di), r0);
    r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(di + 8), r1);
  }
  _mm256_storeu_ps(ci, r0);
  _mm256_storeu_ps(ci + 8, r1);
}

/* C[mr x nr] = alpha * Apanel . Bpanel + beta * D (row i of D at d + i *
 * ldd; d may be c); beta 0 never reads D. The 12 accumulators are named
 * variables, not an array, so that they stay in registers (an array that
 * the edge code indexes by a variable is kept in memory by gcc 12). */
static void micro(int64_t kc, const float *a, const float *b, const float *d, int64_t ldd,
                  float *c, int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    ROW_FMA(0);
    ROW_FMA(1);
    ROW_FMA(2);
    ROW_FMA(3);
    ROW_FMA(4);
    ROW_FMA(5);
    a += MR;
    b += NR;
  }
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  bool be = beta != 0.0f;
  if (mr == MR && nr == NR) {
    put_row(c, d, c00, c01, va, vb, be);
    put_row(c + ldc, d + ldd, c10, c11, va, vb, be);
    put_row(c + 2 * ldc, d + 2 * ldd, c20, c21, va, vb, be);
    put_row(c + 3 * ldc, d + 3 * ldd, c30, c31, va, vb, be);
    put_row(c + 4 * ldc, d + 4 * ldd, c40, c41, va, vb, be);
    put_row(c + 5 * ldc, d + 5 * ldd, c50, c51, va, vb, be);
    return;
  }
  /* an edge tile: through memory, masked */
  float t[MR][NR] __attribute__((aligned(32)));
  _mm256_store_ps(t[0], c00), _mm256_store_ps(t[0] + 8, c01);
  _mm256_store_ps(t[1], c10), _mm256_store_ps(t[1] + 8, c11);
  _mm256_store_ps(t[2], c20), _mm256_store_ps(t[2] + 8, c21);
  _mm256_store_ps(t[3], c30), _mm256_store_ps(t[3] + 8, c31);
  _mm256_store_ps(t[4], c40), _mm256_store_ps(t[4] + 8, c41);
  _mm256_store_ps(t[5], c50), _mm256_store_ps(t[5] + 8, c51);
  __m256i m0 = lanes(nr), m1 = lanes(nr - 8);
  for (int64_t i = 0; i < mr; i++) {
    float *ci = c + i * ldc;
    const float *di = d + i * ldd;
    __m256 r0 = _mm256_mul_ps(va, _mm256_load_ps(t[i]));
    __m256 r1 = _mm256_mul_ps(va, _mm256_load_ps(t[i] + 8));
    if (be) {
      r0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(di, m0), r0);
      if (nr > 8) r1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(di + 8, m1), r1);
    }
    _mm256_maskstore_ps(ci, m0, r0);
    if (nr > 8) _mm256_maskstore_ps(ci + 8, m1, r1);
  }
}

bool op_sgemm_avx2(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   const float *D, int64_t ldd, float *C, int64_t ldc, op_gemm_epilogue ep,
                   void *ep_ctx) {
  if (!D) D = C, ldd = ldc;
  if (M <= 0 || N <= 0 || K <= 0) return false;
  int64_t nslices = (K + KC - 1) / KC, kcmax = (K + nslices - 1) / nslices;
  int64_t ncmax = N < NC ? N : NC, mcmax = M < MC ? M : MC;
  float *bp = op_sgemm_pack(1, (size_t)((ncmax + NR - 1) / NR * NR * kcmax));
  float *ap = op_sgemm_pack(0, (size_t)((mcmax + MR - 1) / MR * MR * kcmax + A_SLACK));
  if (!bp || !ap) return false;
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = N - jc < NC ? N - jc : NC;
    for (int64_t pc = 0; pc < K; pc += kcmax) {
      int64_t kc = K - pc < kcmax ? K - pc : kcmax;
      /* Note [Packed B cache]: a weight's panels may be packed already */
      float *bq = bp;
      bool ready;
      op_pack_entry *pe = op_pack_get(B, ldb, tb, jc, pc, kc, nc, 2,
                                      (size_t)((nc + NR - 1) / NR * NR * kc), &bq, &ready);
      for (int64_t j = 0; j < nc && !ready; j += NR) {
        int64_t w = nc - j < NR ? nc - j : NR;
        pack_b(bq + j * kc, tb, tb ? B + (jc + j) * ldb + pc : B + pc * ldb + jc + j, ldb, kc,
               w);
      }
      /* the first K slice adds beta D; the later ones add to C */
      float be = pc == 0 ? beta : 1.0f;
      const float *d = pc == 0 ? D : C;
      int64_t ld = pc == 0 ? ldd : ldc;
      for (int64_t ic = 0; ic < M; ic += MC) {
        int64_t mc = M - ic < MC ? M - ic : MC;
        core_poll(); /* Note [Kernel poll] */
        pack_a(ap, ta, ta ? A + pc * lda + ic : A + ic * lda + pc, lda, mc, kc);
        for (int64_t j = 0; j < nc; j += NR)
          for (int64_t i = 0; i < mc; i += MR)
            micro(kc, ap + i * kc, bq + j * kc, d + (ic + i) * ld + jc + j, ld,
                  C + (ic + i) * ldc + jc + j, ldc, mc - i < MR ? mc - i : MR,
                  nc - j < NR ? nc - j : NR, alpha, be);
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
