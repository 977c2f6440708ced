/* src/ops/gemm.c: the one place kiln calls BLAS GEMM, and how it threads.
 *
 * Note [BLAS threads]: OpenBLAS's pthreads build runs a thread pool of its
 * own beside OpenMP's; on two cores the two pools spin against each other
 * (PyTorch with 2 OpenMP + 2 OpenBLAS threads is 3-5x slower than with one).
 * So kiln keeps OpenBLAS single-threaded (set once, at first use) and
 * threads large products itself: the rows (or columns) of C are split
 * across the OpenMP threads, each calling single-threaded GEMM on its
 * slice. Inside an existing parallel region (a batch loop) GEMM just runs.
 * One pool, no oversubscription, and two threads still give ~2x. */
#include <cblas.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

#include "op.h"

void openblas_set_num_threads(int n);

static atomic_int blas_single;

static void ensure_single(void) {
  if (!atomic_load(&blas_single)) {
    openblas_set_num_threads(1);
    atomic_store(&blas_single, 1);
  }
}

/* y = alpha * op(X) v + beta * y through GEMV: X stored row-major with
 * leading dimension ldx, rows x cols as stored. */
static void gemv(kiln_dtype dt, bool trans, int64_t rows, int64_t cols, double alpha,
                 const void *X, int64_t ldx, const void *v, int64_t incv, double beta, void *y,
                 int64_t incy) {
  enum CBLAS_TRANSPOSE t = trans ? CblasTrans : CblasNoTrans;
  if (dt == KILN_DTYPE_F32)
    cblas_sgemv(CblasRowMajor, t, (int)rows, (int)cols, (float)alpha, X, (int)ldx, v, (int)incv,
                (float)beta, y, (int)incy);
  else
    cblas_dgemv(CblasRowMajor, t, (int)rows, (int)cols, alpha, X, (int)ldx, v, (int)incv, beta,
                y, (int)incy);
}

/* C[M, N] = D for an addend D (a pass before BLAS, which adds only C). */
static void addend_to_c(kiln_dtype dt, const op_gemm_addend *d, int64_t M, int64_t N, void *C,
                        int64_t ldc) {
  if (d->data == C && d->rs == ldc && (d->cs == 1 || N == 1)) return;
  size_t es = kiln_dtype_size(dt);
  if (d->cs == 1 || N == 1) { /* rows along memory (a bias row, a matrix): one copy each */
    for (int64_t i = 0; i < M; i++)
      memcpy((char *)C + (size_t)(i * ldc) * es, (const char *)d->data + (size_t)(i * d->rs) * es,
             (size_t)N * es);
    return;
  }
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      int64_t s = i * d->rs + j * d->cs;
      if (dt == KILN_DTYPE_F32) ((float *)C)[i * ldc + j] = ((const float *)d->data)[s];
      else ((double *)C)[i * ldc + j] = ((const double *)d->data)[s];
    }
}

/* Note [Block epilogue]: an epilogue (addmm + ReLU/GELU, a relu's
 * backward mask: Note [Threshold epilogue]) runs on C's rows while they
 * are in cache. kiln's sgemm calls it on each block of C (MC rows x NC
 * columns at most) right after that block's last K slice; BLAS and GEMV
 * have no such hook, so there it runs on the whole slice after the call.
 * Applied to the whole slice afterwards, the transformer's 1024 x 2048
 * ReLU read each thread's 4 MB half of C back from memory. The gain is
 * partial: a block of 144 rows x 1024 columns (590 KB) shares L2 with
 * its 1 MB of packed B panels, and `perf` of the lazy transformer step
 * put memmove (mostly the epilogue's row copies) at 2.2% of the samples
 * after, 2.6% before. */
static void call(kiln_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                 const void *A, int64_t lda, const void *B, int64_t ldb, double beta,
                 const op_gemm_addend *add, void *C, int64_t ldc, op_gemm_epilogue ep,
                 void *ep_ctx) {
  if (add && beta != 0) {
    /* kiln's sgemm reads a row-contiguous addend itself; otherwise it is
     * copied into C (this slice, while it is about to be in cache) */
    bool direct = OP_SGEMM_NATIVE && dt == KILN_DTYPE_F32 && M > 1 && N > 1 && K > 0 &&
                  add->cs == 1;
    if (direct && op_sgemm_native(ta, tb, M, N, K, (float)alpha, A, lda, B, ldb, (float)beta,
                                  add->data, add->rs, C, ldc, ep, ep_ctx))
      return;
    addend_to_c(dt, add, M, N, C, ldc);
  }
  /* Note [GEMV]: with one row (batch-1 inference) or one column, GEMM
   * would pack the whole other matrix on every call; GEMV streams it once. */
  if (M == 1 && K > 0) {
    /* C[0, :] = op(B)^T-ish: y[N] = op(B)[K, N]^T x[K] */
    int64_t incx = ta ? lda : 1;
    if (!tb) gemv(dt, true, K, N, alpha, B, ldb, A, incx, beta, C, 1);
    else gemv(dt, false, N, K, alpha, B, ldb, A, incx, beta, C, 1);
    goto done;
  }
  if (N == 1 && K > 0) {
    /* C[:, 0] = op(A)[M, K] b[K] */
    int64_t incb = tb ? 1 : ldb;
    if (!ta) gemv(dt, false, M, K, alpha, A, lda, B, incb, beta, C, ldc);
    else gemv(dt, true, K, M, alpha, A, lda, B, incb, beta, C, ldc);
    goto done;
  }
  if (dt == KILN_DTYPE_F32 && op_sgemm_native(ta, tb, M, N, K, (float)alpha, A, lda, B, ldb,
                                              (float)beta, NULL, 0, C, ldc, ep, ep_ctx))
    return;
  {
    enum CBLAS_TRANSPOSE a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
    if (dt == KILN_DTYPE_F32)
      cblas_sgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, (float)alpha, A, (int)lda, B,
                  (int)ldb, (float)beta, C, (int)ldc);
    else
      cblas_dgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, alpha, A, (int)lda, B,
                  (int)ldb, beta, C, (int)ldc);
  }
done: /* no block hook here: the whole slice (Note [Block epilogue]) */
  if (ep) ep(C, M, N, ldc, ep_ctx);
}

/* Below this many multiply-adds a product runs on one thread. */
#define GEMM_PARALLEL_MIN (64 * 64 * 64)
/* Note [Threaded GEMV]: a product with one row or one column (batch-1
 * inference: Note [GEMV]) streams its matrix once, a load per
 * multiply-add, so it is bound by the cache it streams from, not by the
 * FMAs GEMM_PARALLEL_MIN counts. From 256 x 256 (256 KB of float32
 * weights) it is split into column (or row) slices like a GEMM: each core
 * streams its half of the weights, from its own L2, where they stay
 * between calls (the MLP's 784 -> 256 -> 256 weights, 1.07 MB, did not
 * fit one core's 1 MB L2). mlp_infer_b1 at 2 threads on the Zen 4 host:
 * 15.0-16.1 us -> 10.3-10.9 us (eager and jit, 3 alternating runs); 78% of
 * it had been OpenBLAS's sgemv. Splitting the 256 x 256 layer too was
 * 0-10% faster than leaving it on one thread. */
#define GEMV_PARALLEL_MIN (256 * 256)

void op_gemm(kiln_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
             const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
             int64_t ldc) {
  op_gemm_ep(dt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, NULL, NULL);
}

void op_gemm_ep(kiln_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                const void *A, int64_t lda, const void *B, int64_t ldb, double beta,
                const op_gemm_addend *add, void *C, int64_t ldc, op_gemm_epilogue ep,
                void *ep_ctx) {
  ensure_single();
  int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  bool gemv = (M == 1 || N == 1) && M * N * K >= GEMV_PARALLEL_MIN; /* Note [Threaded GEMV] */
  if (nt < 2 || (M * N * K < GEMM_PARALLEL_MIN && !gemv) || (M < 32 && N < 32)) {
    call(dt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, add, C, ldc, ep, ep_ctx);
    return;
  }
  size_t es = kiln_dtype_size(dt);
  bool by_rows = M >= N;
  int64_t len = by_rows ? M : N;
  /* slices a whole number of the kernel's panels long (kiln's sgemm: 12
   * rows or 32 columns at AVX-512, 6 or 16 at AVX2; OpenBLAS's Haswell
   * kernels: 16), so no thread runs a partial panel in the middle of C */
  int64_t unit = dt != KILN_DTYPE_F32 ? 16 : op_sgemm_panel(by_rows);
  int64_t chunk = ((len + nt - 1) / nt + unit - 1) / unit * unit;
  op_pack_src src = op_pack_src_swap(NULL); /* Note [Packed B cache]: the caller's B */
  op_pack_src_swap(&src);
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int t = 0; t < nt; t++) {
    int64_t s0 = (int64_t)t * chunk, s1 = s0 + chunk < len ? s0 + chunk : len;
    if (s0 >= s1) continue;
    op_pack_src prev = op_pack_src_swap(&src); /* each worker reads its own slice of B */
    if (by_rows) {
      /* rows [s0, s1) of C come from rows [s0, s1) of op(A) */
      const char *a = (const char *)A + (size_t)(ta ? s0 : s0 * lda) * es;
      char *c = (char *)C + (size_t)(s0 * ldc) * es;
      op_gemm_addend d = add ? (op_gemm_addend){(const char *)add->data + (size_t)(s0 * add->rs) * es,
                                                add->rs, add->cs}
                             : (op_gemm_addend){0};
      call(dt, ta, tb, s1 - s0, N, K, alpha, a, lda, B, ldb, beta, add ? &d : NULL, c, ldc, ep,
           ep_ctx); /* Note [Block epilogue] */
    } else {
      /* columns [s0, s1) of C come from columns [s0, s1) of op(B) */
      const char *b = (const char *)B + (size_t)(tb ? s0 * ldb : s0) * es;
      char *c = (char *)C + (size_t)s0 * es;
      op_gemm_addend d = add ? (op_gemm_addend){(const char *)add->data + (size_t)(s0 * add->cs) * es,
                                                add->rs, add->cs}
                             : (op_gemm_addend){0};
      call(dt, ta, tb, M, s1 - s0, K, alpha, A, lda, b, ldb, beta, add ? &d : NULL, c, ldc, ep,
           ep_ctx);
    }
    op_pack_src_swap(&prev);
  }
}
