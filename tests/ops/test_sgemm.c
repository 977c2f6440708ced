/* tests/ops/test_sgemm.c: kiln's own float32 GEMM (Note [kiln sgemm])
 * against a double-precision loop: every transpose, shapes on and off the
 * kernel's panel, block and K-slice edges, padded leading dimensions,
 * alpha/beta (beta 0 never reads C), an addend apart from C (a matrix, a
 * bias row), a block epilogue on half the products (each element once,
 * after the last K slice: Note [Block epilogue]), the threaded split
 * through mm, and addmm's bias read as the addend through every slice. */
#include <stdlib.h>

#include "ops/op.h"
#include "test.h"

static float *filled(size_t n, unsigned *seed) {
  float *p = malloc(n * sizeof *p);
  for (size_t i = 0; p && i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

enum { ADD_C, ADD_MATRIX, ADD_ROW }; /* the addend: C itself, another matrix, a bias row */

/* Note [Block epilogue]: an epilogue that maps c to 2c + 0.25 and counts
 * how often it saw each element (each exactly once, none in the padding,
 * and only once all K slices are in: the values show it). */
typedef struct ep_seen {
  float *C;
  int64_t ldc;
  int *count;
} ep_seen;

static void ep_affine(void *C, int64_t rows, int64_t cols, int64_t ldc, void *ctx) {
  ep_seen *e = ctx;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      float *c = (float *)C + i * ldc + j;
      *c = 2 * *c + 0.25f;
      e->count[c - e->C]++;
    }
}

/* Runs one product and checks every element of C (and that the padding
 * columns beyond N are untouched). Returns the number of bad elements. */
static int check_one(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int pad, float alpha,
                     float beta, int addend, bool with_ep, unsigned *seed) {
  int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  float *A = filled((size_t)(lda * (ta ? K : M)), seed);
  float *B = filled((size_t)(ldb * (tb ? N : K)), seed);
  float *C = filled((size_t)(ldc * M), seed), *C0 = malloc((size_t)(ldc * M) * sizeof *C0);
  int64_t ldd = addend == ADD_MATRIX ? N + 1 : 0;
  float *D = addend == ADD_C ? NULL : filled((size_t)(addend == ADD_MATRIX ? ldd * M : N), seed);
  if (!A || !B || !C || !C0 || (addend != ADD_C && !D)) {
    free(A), free(B), free(C), free(C0), free(D);
    return 1;
  }
  if (beta == 0 || addend != ADD_C)
    for (int64_t i = 0; i < ldc * M; i++) C[i] = NAN; /* must not be read */
  if (beta == 0 && D)
    for (int64_t i = 0; i < (addend == ADD_MATRIX ? ldd * M : N); i++) D[i] = NAN;
  memcpy(C0, C, (size_t)(ldc * M) * sizeof *C0);
  int bad = 0;
  ep_seen seen = {C, ldc, calloc((size_t)(ldc * M), sizeof(int))};
  if (!seen.count) bad++;
  else if (!op_sgemm_native(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, D, ldd, C, ldc,
                            with_ep ? ep_affine : NULL, &seen))
    bad++;
  for (int64_t i = 0; i < M && !bad; i++)
    for (int64_t j = 0; j < ldc; j++) {
      double got = C[i * ldc + j];
      if (seen.count[i * ldc + j] != (with_ep && j < N) && bad++ < 3)
        test_fail(__FILE__, __LINE__, "epilogue saw C[%lld, %lld] %d times", (long long)i,
                  (long long)j, seen.count[i * ldc + j]);
      if (j >= N) {
        if (memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(float)) != 0 && bad++ < 3)
          test_fail(__FILE__, __LINE__, "padding C[%lld, %lld] written", (long long)i,
                    (long long)j);
        continue;
      }
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        double a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
        mag += fabs(a * b);
      }
      double add = addend == ADD_C ? C0[i * ldc + j] : D[i * ldd + j];
      double want = alpha * s + (beta != 0 ? beta * add : 0);
      double tol = 1e-6 * (fabs(alpha) * mag + fabs(beta)) + 1e-30;
      if (with_ep) { /* 2c + 0.25 rounds once more */
        want = 2 * want + 0.25;
        tol = 2 * tol + 1.2e-7 * (fabs(want) + 0.25);
      }
      if (!(fabs(got - want) <= tol) && bad++ < 3)
        test_fail(__FILE__, __LINE__,
                  "ta %d tb %d M %lld N %lld K %lld pad %d addend %d: C[%lld, %lld] = %.9g, "
                  "want %.9g",
                  ta, tb, (long long)M, (long long)N, (long long)K, pad, addend, (long long)i,
                  (long long)j, got, want);
    }
  free(A), free(B), free(C), free(C0), free(D), free(seen.count);
  return bad;
}

TEST(sgemm_native_matches_double_loop) {
  int saved = core_cpu_level(), max = core_cpu_max_level(), runs = 0, bad = 0;
  /* the baseline level declines every product, so BLAS runs them */
  float a = 1, b = 1, c = 0;
  core_cpu_set_level(CORE_CPU_BASELINE);
  CHECK(!op_sgemm_native(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, NULL, 0, &c, 1, NULL,
                         NULL));
  /* panel edges of both kernels (AVX-512: MR 12, NR 32, 16-wide transposes;
   * AVX2: MR 6, NR 16, 8-wide transposes), two and three K slices (KC 256
   * and 384), two row blocks (MC 144), two column blocks (NC 2048) */
  static const int64_t shapes[][3] = {{1, 1, 1},     {12, 32, 16},  {13, 33, 17}, {11, 31, 15},
                                      {25, 47, 257}, {150, 70, 40}, {5, 2100, 20}, {40, 16, 600},
                                      {6, 16, 8},    {7, 17, 9},    {5, 15, 7},   {2, 9, 3},
                                      {18, 8, 513},  {145, 24, 1},   {9, 20, 800},
                                      /* Note [Direct A panels]: attention's shapes, two
                                       * row blocks of direct panels over two K slices */
                                      {128, 32, 128}, {128, 128, 32}, {150, 64, 300},
                                      /* up to 8 column panels read A directly: the
                                       * MLP's x @ W^T per thread, 7 panels + a tail */
                                      {128, 256, 300}, {150, 200, 300},
                                      /* Note [Partial panels]: a last panel of 3, 4, 10
                                       * rows (attention's 64 x 64 x 64 per head) */
                                      {3, 33, 5},     {64, 64, 64},   {22, 40, 30}};
  static const float ab[][2] = {{1, 0}, {0.75f, 1}, {-1.5f, -0.5f}};
  for (int l = CORE_CPU_AVX2; l <= max; l++) {
    core_cpu_set_level(l);
    unsigned seed = 7;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int t = 0; t < 4; t++)
        for (int e = 0; e < 3; e++) { /* every alpha/beta with every addend */
          const float *p = ab[(s + (size_t)t + (size_t)e) % 3];
          int n = check_one(t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], (int)(s % 3),
                            p[0], p[1], e, (t + e) % 2 == 1, &seed);
          if (n) test_note("at level %s", core_cpu_level_name(l));
          bad += n;
          runs++;
        }
  }
  core_cpu_set_level(saved);
  CHECK_EQ_INT(bad, 0);
  test_note("%d products at levels avx2..%s", runs, core_cpu_level_name(max));
}

/* Note [Threaded GEMV]: batch-1 products from 256 x 256 are split into
 * slices at the default thread count: x @ W^T, x @ W and W @ v, each
 * against a double loop (a slice that read the wrong rows of W, or
 * wrote the wrong part of y, shows); 300 x 97 stays on one thread. */
TEST(sgemv_threaded_slices_match_double_loop) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(5);
  static const int64_t dims[][2] = {{784, 256}, {256, 256}, {300, 97}};
  for (int s = 0; s < 3; s++) {
    int64_t K = dims[s][0], N = dims[s][1];
    kiln_tensor *x = kiln_randn(2, (int64_t[]){1, K}, KILN_DTYPE_F32, g);
    kiln_tensor *w = kiln_randn(2, (int64_t[]){N, K}, KILN_DTYPE_F32, g);
    kiln_tensor *wt = kiln_contiguous(kiln_t(w));
    kiln_tensor *got[3] = {kiln_mm(x, kiln_t(w)), kiln_mm(x, wt), kiln_mm(w, kiln_t(x))};
    const float *px = core_data(x), *pw = core_data(w);
    for (int v = 0; v < 3; v++) {
      CHECK_MSG(got[v], "[%lld, %lld] variant %d: %s", (long long)K, (long long)N, v,
                kiln_last_error());
      if (!got[v]) continue;
      kiln_tensor *c = kiln_contiguous(got[v]);
      const float *pc = core_data(c);
      int bad = 0;
      for (int64_t j = 0; j < N; j++) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          want += (double)px[k] * pw[j * K + k];
          mag += fabs((double)px[k] * pw[j * K + k]);
        }
        if (!(fabs(pc[j] - want) <= 1e-6 * mag + 1e-30) && bad++ < 3)
          test_fail(__FILE__, __LINE__, "[%lld, %lld] variant %d: y[%lld] = %.9g, want %.9g",
                    (long long)K, (long long)N, v, (long long)j, pc[j], want);
      }
    }
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Through kiln_mm at the default thread count: the product is split into
 * row or column slices of whole panels (Note [BLAS threads]). */
TEST(sgemm_threaded_slices_match_double_loop) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(3);
  static const int64_t dims[][3] = {{300, 70, 90}, {70, 300, 90}, {129, 257, 64}};
  for (int s = 0; s < 3; s++) {
    int64_t M = dims[s][0], N = dims[s][1], K = dims[s][2];
    kiln_tensor *a = kiln_randn(2, (int64_t[]){K, M}, KILN_DTYPE_F32, g);
    kiln_tensor *b = kiln_randn(2, (int64_t[]){N, K}, KILN_DTYPE_F32, g);
    kiln_tensor *c = kiln_mm(kiln_t(a), kiln_t(b)); /* both operands transposed */
    CHECK_MSG(c, "mm failed: %s", kiln_last_error());
    if (!c) continue;
    const float *pa = core_data(a), *pb = core_data(b), *pc = core_data(c);
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          want += (double)pa[k * M + i] * pb[j * K + k];
          mag += fabs((double)pa[k * M + i] * pb[j * K + k]);
        }
        if (!(fabs(pc[i * N + j] - want) <= 1e-6 * mag + 1e-30) && bad++ < 3)
          test_fail(__FILE__, __LINE__, "[%lld, %lld, %lld] C[%lld, %lld] = %.9g, want %.9g",
                    (long long)M, (long long)N, (long long)K, (long long)i, (long long)j,
                    pc[i * N + j], want);
      }
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* addmm's self in every broadcast form, contiguous or not, float32 and
 * float64, large enough to split across threads: read as the GEMM's addend
 * (kiln's sgemm) or copied into C (BLAS) per slice. */
TEST(sgemm_addmm_self_forms_match_double_loop) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(5);
  const int64_t M = 150, N = 90, K = 70;
  for (int dt = 0; dt < 2; dt++) {
    kiln_dtype t = dt ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
    kiln_tensor *x = kiln_randn(2, (int64_t[]){M, K}, t, g);
    kiln_tensor *w = kiln_randn(2, (int64_t[]){K, N}, t, g);
    kiln_tensor *full = kiln_randn(2, (int64_t[]){M, N}, t, g);
    kiln_tensor *selves[6] = {
        kiln_randn(1, (int64_t[]){N}, t, g),            /* bias row */
        kiln_randn(2, (int64_t[]){1, N}, t, g),         /* [1, N] */
        kiln_randn(2, (int64_t[]){M, 1}, t, g),         /* a column: copied */
        kiln_randn(0, NULL, t, g),                      /* a scalar */
        full,                                           /* contiguous */
        kiln_t(kiln_contiguous(kiln_t(full))),          /* column-major: copied */
    };
    for (int s = 0; s < 6; s++) {
      kiln_tensor *self = selves[s];
      kiln_tensor *r = kiln_addmm(self, x, w, 0.5, -2.0);
      CHECK_MSG(r, "addmm failed: %s", kiln_last_error());
      if (!r) continue;
      int bad = 0;
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          double acc = 0, mag = 0;
          for (int64_t k = 0; k < K; k++) {
            double p = core_get_flat(x, i * K + k) * core_get_flat(w, k * N + j);
            acc += p;
            mag += fabs(p);
          }
          int64_t si = self->ndim == 2 && self->shape[0] != 1 ? i : 0;
          int64_t sj = self->ndim >= 1 && self->shape[self->ndim - 1] != 1 ? j : 0;
          int64_t cols = self->ndim >= 1 ? self->shape[self->ndim - 1] : 1;
          double sv = core_get_flat(self, si * cols + sj);
          double want = 0.5 * sv - 2.0 * acc, got = core_get_flat(r, i * N + j);
          double tol = (dt ? 1e-13 : 1e-6) * (2 * mag + fabs(sv)) + 1e-30;
          if (!(fabs(got - want) <= tol) && bad++ < 3)
            test_fail(__FILE__, __LINE__, "dtype %d self %d: [%lld, %lld] = %.9g, want %.9g", dt,
                      s, (long long)i, (long long)j, got, want);
        }
    }
  }
  kiln_generator_free(g);
  kiln_scope_end();
}
