/* bench/work_micro.c: the small workloads: dispatch overhead (eager add,
 * with autograd, lazy recording), lazy mark_step of a 100-node graph
 * (cached and first-time), memory bandwidth (copy_4m), SGEMM through kiln
 * and through OpenBLAS directly, and two extras (conv2d, memcpy).
 *
 * Lazy workloads record with no scope open and release each intermediate
 * at once (as Python drops temporaries), so only the final tensor is live
 * at mark_step and becomes the graph's one output. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* ---- dispatch overhead --------------------------------------------------------- */

#define ADD_SCOPE 1000 /* the scope is ended (outputs freed) every 1000 ops */

static kiln_tensor *add_a, *add_b;

static int add_setup(bool grad, bool lazy) {
  int64_t one[1] = {1};
  add_a = kiln_ones(1, one, KILN_DTYPE_F32);
  add_b = kiln_ones(1, one, KILN_DTYPE_F32);
  if (!add_a || !add_b) return -1;
  if (lazy) {
    kiln_tensor *a = kiln_to_lazy(add_a), *b = kiln_to_lazy(add_b);
    kiln_release(add_a);
    kiln_release(add_b);
    add_a = a, add_b = b;
    if (!a || !b) return -1;
  }
  if (grad && kiln_set_requires_grad(add_a, true) < 0) return -1;
  return 0;
}
static int setup_add(void) { return add_setup(false, false); }
static int setup_add_grad(void) { return add_setup(true, false); }
static int setup_lazy_record(void) { return add_setup(false, true); }

static void teardown_add(void) {
  kiln_release(add_a);
  kiln_release(add_b);
  add_a = add_b = NULL;
}

static double run_add(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i += ADD_SCOPE) {
    kiln_scope_begin();
    int n = iters - i < ADD_SCOPE ? iters - i : ADD_SCOPE;
    for (int k = 0; k < n; k++)
      if (!kiln_add(add_a, add_b)) {
        kiln_scope_end();
        return bench_fail("overhead_add", "kiln_add");
      }
    kiln_scope_end();
  }
  return bench_now() - t0;
}

/* ---- lazy mark_step of a 100-node graph ------------------------------------------- */

#define MS_NODES 100
#define MS_NUMEL 64

static kiln_tensor *ms_x, *ms_y;
static uint64_t ms_serial; /* uncached: each graph's pattern number */

static kiln_tensor *ms_record(bool cached, uint64_t serial);

static int setup_mark_step(void) {
  int64_t n = MS_NUMEL;
  kiln_generator *g = kiln_generator_new(3);
  kiln_tensor *x = kiln_randn(1, &n, KILN_DTYPE_F32, g), *y = kiln_rand(1, &n, KILN_DTYPE_F32, g);
  kiln_generator_free(g);
  ms_x = x ? kiln_to_lazy(x) : NULL;
  ms_y = y ? kiln_to_lazy(y) : NULL;
  kiln_release(x);
  kiln_release(y);
  if (!ms_x || !ms_y || kiln_mark_step() < 0) return -1;
  kiln_tensor *t = ms_record(true, 0); /* primes the cache for the cached graph */
  int rc = t ? kiln_mark_step() : -1;
  kiln_release(t);
  return rc;
}

static void teardown_mark_step(void) {
  kiln_release(ms_x);
  kiln_release(ms_y);
  ms_x = ms_y = NULL;
}

/* Records the chain t = x; t = op_i(t, y) for 100 nodes. cached: the ops
 * alternate add and mul; otherwise node i's op is base-3 digit i of serial
 * (0 add, 1 mul, 2 sub), so every serial gives a distinct graph (the
 * alternating one is serial ~3^99, never reached). Returns the last tensor
 * (owned), NULL on error. */
static kiln_tensor *ms_record(bool cached, uint64_t serial) {
  kiln_tensor *t = kiln_retain(ms_x);
  for (int i = 0; i < MS_NODES && t; i++) {
    int op = cached ? i % 2 : (int)(serial % 3);
    serial /= 3;
    kiln_tensor *n = op == 0 ? kiln_add(t, ms_y) : op == 1 ? kiln_mul(t, ms_y) : kiln_sub(t, ms_y);
    kiln_release(t);
    t = n;
  }
  return t;
}

static double mark_step_run(int iters, bool cached, const char *name) {
  double total = 0;
  const char *ctr = cached ? "CachedCompile" : "UncachedCompile";
  int64_t c0 = kiln_lazy_counter(ctr);
  for (int k = 0; k < iters; k++) {
    kiln_tensor *t = ms_record(cached, cached ? 0 : ++ms_serial);
    if (!t) return bench_fail(name, "recording");
    double t0 = bench_now();
    int rc = kiln_mark_step();
    total += bench_now() - t0;
    kiln_release(t);
    if (rc < 0) return bench_fail(name, "kiln_mark_step");
  }
  if (kiln_lazy_counter(ctr) - c0 != iters)
    fprintf(stderr, "bench: %s: %s went up by %lld in %d mark_steps\n", name, ctr,
            (long long)(kiln_lazy_counter(ctr) - c0), iters);
  return total;
}
static double run_mark_step_cached(int iters) {
  return mark_step_run(iters, true, "lazy_mark_step_cached_100");
}
static double run_mark_step_uncached(int iters) {
  return mark_step_run(iters, false, "lazy_mark_step_uncached_100");
}

/* ---- copy ------------------------------------------------------------------------- */

#define COPY_N (4 << 20)

static kiln_tensor *copy_src, *copy_dst;

static int setup_copy(void) {
  int64_t n[1] = {COPY_N};
  copy_src = kiln_ones(1, n, KILN_DTYPE_F32);
  copy_dst = kiln_zeros(1, n, KILN_DTYPE_F32);
  return copy_src && copy_dst ? 0 : -1;
}

static void teardown_copy(void) {
  kiln_release(copy_src);
  kiln_release(copy_dst);
  copy_src = copy_dst = NULL;
}

static double run_copy(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++)
    if (kiln_copy_(copy_dst, copy_src) < 0) return bench_fail("copy_4m", "kiln_copy_");
  return bench_now() - t0;
}

static float *mc_src, *mc_dst; /* memcpy_4m's buffers */

static int setup_memcpy(void) {
  mc_src = aligned_alloc(64, sizeof(float) * COPY_N);
  mc_dst = aligned_alloc(64, sizeof(float) * COPY_N);
  if (!mc_src || !mc_dst) return -1;
  for (int i = 0; i < COPY_N; i++) mc_src[i] = (float)i, mc_dst[i] = 0;
  return 0;
}

static void teardown_memcpy(void) {
  free(mc_src);
  free(mc_dst);
  mc_src = mc_dst = NULL;
}

static double run_memcpy(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    memcpy(mc_dst, mc_src, sizeof(float) * COPY_N);
    __asm__ volatile("" : : "r"(mc_dst) : "memory"); /* keep every copy */
  }
  return bench_now() - t0;
}

/* ---- SGEMM ------------------------------------------------------------------------ */

#define GEMM_N 1024

static kiln_tensor *gemm_a, *gemm_b;
static float *gemm_c;

static int setup_gemm(void) {
  int64_t s[2] = {GEMM_N, GEMM_N};
  kiln_generator *g = kiln_generator_new(1);
  gemm_a = kiln_randn(2, s, KILN_DTYPE_F32, g);
  gemm_b = kiln_randn(2, s, KILN_DTYPE_F32, g);
  kiln_generator_free(g);
  gemm_c = aligned_alloc(64, sizeof(float) * GEMM_N * GEMM_N);
  return gemm_a && gemm_b && gemm_c ? 0 : -1;
}

static void teardown_gemm(void) {
  kiln_release(gemm_a);
  kiln_release(gemm_b);
  free(gemm_c);
  gemm_a = gemm_b = NULL;
  gemm_c = NULL;
}

static double run_sgemm(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_tensor *c = kiln_mm(gemm_a, gemm_b);
    if (!c) return bench_fail("sgemm_1024", "kiln_mm");
    kiln_release(c);
  }
  return bench_now() - t0;
}

/* OpenBLAS with its own pool at the OpenMP thread count (kiln's GEMMs set
 * it to 1 and split products themselves); restored afterwards. */
static int blas_threads_saved;

static int setup_openblas_sgemm(void) {
  blas_threads_saved = openblas_get_num_threads();
  openblas_set_num_threads(omp_get_max_threads());
  return setup_gemm();
}

static void teardown_openblas_sgemm(void) {
  teardown_gemm();
  openblas_set_num_threads(blas_threads_saved);
}

static double run_openblas_sgemm(int iters) {
  const float *a = kiln_tensor_data(gemm_a), *b = kiln_tensor_data(gemm_b);
  double t0 = bench_now();
  for (int i = 0; i < iters; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_N, GEMM_N, GEMM_N, 1.0f, a,
                GEMM_N, b, GEMM_N, 0.0f, gemm_c, GEMM_N);
  return bench_now() - t0;
}

/* ---- sgemm at the MLP's shapes ---------------------------------------------------- */
/* The first layer of the MLP step (batch 128, 784 -> 256): the forward
 * x @ W^T, and its two gradient GEMMs dY @ W (input) and dY^T @ x (weight),
 * each through kiln_mm on transposed views and through OpenBLAS directly,
 * at the same thread count as the 1024 pair. 2 * 128 * 256 * 784 flops. */
#define MLP_GFLOP (2.0 * 128 * 256 * 784)
static kiln_tensor *mlp_x, *mlp_w, *mlp_dy;
static float *mlp_c;

static int setup_mlp_gemm(void) {
  kiln_generator *g = kiln_generator_new(2);
  mlp_x = kiln_randn(2, (int64_t[]){128, 784}, KILN_DTYPE_F32, g);
  mlp_w = kiln_randn(2, (int64_t[]){256, 784}, KILN_DTYPE_F32, g);
  mlp_dy = kiln_randn(2, (int64_t[]){128, 256}, KILN_DTYPE_F32, g);
  kiln_generator_free(g);
  mlp_c = aligned_alloc(64, sizeof(float) * 256 * 784);
  return mlp_x && mlp_w && mlp_dy && mlp_c ? 0 : -1;
}

static void teardown_mlp_gemm(void) {
  kiln_release(mlp_x), kiln_release(mlp_w), kiln_release(mlp_dy);
  free(mlp_c);
  mlp_x = mlp_w = mlp_dy = NULL;
  mlp_c = NULL;
}

static int setup_openblas_mlp_gemm(void) {
  blas_threads_saved = openblas_get_num_threads();
  openblas_set_num_threads(omp_get_max_threads());
  return setup_mlp_gemm();
}

static void teardown_openblas_mlp_gemm(void) {
  teardown_mlp_gemm();
  openblas_set_num_threads(blas_threads_saved);
}

/* which: 0 x @ W^T, 1 dY @ W, 2 dY^T @ x */
static double run_mlp_gemm(int which, int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    kiln_tensor *c = which == 0   ? kiln_mm(mlp_x, kiln_t(mlp_w))
                     : which == 1 ? kiln_mm(mlp_dy, mlp_w)
                                  : kiln_mm(kiln_t(mlp_dy), mlp_x);
    kiln_scope_end();
    if (!c) return bench_fail(bench_current, "kiln_mm");
  }
  return bench_now() - t0;
}

static double run_openblas_mlp_gemm(int which, int iters) {
  const float *x = kiln_tensor_data(mlp_x), *w = kiln_tensor_data(mlp_w);
  const float *dy = kiln_tensor_data(mlp_dy);
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    if (which == 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 128, 256, 784, 1.0f, x, 784, w, 784,
                  0.0f, mlp_c, 256);
    else if (which == 1)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 128, 784, 256, 1.0f, dy, 256, w,
                  784, 0.0f, mlp_c, 784);
    else
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, 256, 784, 128, 1.0f, dy, 256, x, 784,
                  0.0f, mlp_c, 784);
  }
  return bench_now() - t0;
}

static double run_mlp_fwd(int iters) { return run_mlp_gemm(0, iters); }
static double run_mlp_dx(int iters) { return run_mlp_gemm(1, iters); }
static double run_mlp_dw(int iters) { return run_mlp_gemm(2, iters); }
static double run_openblas_mlp_fwd(int iters) { return run_openblas_mlp_gemm(0, iters); }
static double run_openblas_mlp_dx(int iters) { return run_openblas_mlp_gemm(1, iters); }
static double run_openblas_mlp_dw(int iters) { return run_openblas_mlp_gemm(2, iters); }

/* ---- conv2d ----------------------------------------------------------------------- */

/* One forward and backward (grads for input, weight, bias) of a 3x3
 * convolution, padding 1, on [64, 32, 14, 14] float32 with 64 filters: the
 * second conv layer of a small MNIST CNN. */
static kiln_tensor *conv_x, *conv_w, *conv_b;

static int setup_conv(void) {
  kiln_generator *g = kiln_generator_new(2);
  conv_x = kiln_randn(4, (int64_t[]){64, 32, 14, 14}, KILN_DTYPE_F32, g);
  conv_w = kiln_randn(4, (int64_t[]){64, 32, 3, 3}, KILN_DTYPE_F32, g);
  conv_b = kiln_randn(1, (int64_t[]){64}, KILN_DTYPE_F32, g);
  kiln_generator_free(g);
  if (!conv_x || !conv_w || !conv_b) return -1;
  kiln_set_requires_grad(conv_x, true);
  kiln_set_requires_grad(conv_w, true);
  kiln_set_requires_grad(conv_b, true);
  return 0;
}

static void teardown_conv(void) {
  kiln_release(conv_x);
  kiln_release(conv_w);
  kiln_release(conv_b);
  conv_x = conv_w = conv_b = NULL;
}

static double run_conv(int iters) {
  const int64_t one[2] = {1, 1};
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    kiln_tensor *y = kiln_conv2d(conv_x, conv_w, conv_b, one, one);
    int rc = y ? kiln_backward(y, kiln_ones(4, kiln_tensor_shape(y), KILN_DTYPE_F32)) : -1;
    kiln_scope_end();
    kiln_tensor_set_grad(conv_x, NULL);
    kiln_tensor_set_grad(conv_w, NULL);
    kiln_tensor_set_grad(conv_b, NULL);
    if (rc < 0) return bench_fail("conv2d_fwd_bwd", "conv2d");
  }
  return bench_now() - t0;
}

/* ---- lists ------------------------------------------------------------------------ */

#define GFLOP_1024 (2.0 * GEMM_N * GEMM_N * (double)GEMM_N)
#define COPY_BYTES (2.0 * sizeof(float) * COPY_N) /* read + write */

static const bench_workload overhead[] = {
    {"overhead_add", "ns/op", BENCH_TIME, 1e9, 0, 1000, 0, setup_add, run_add, teardown_add},
    {"overhead_add_grad", "ns/op", BENCH_TIME, 1e9, 0, 1000, 0, setup_add_grad, run_add,
     teardown_add},
    {"lazy_record", "ns/op", BENCH_TIME, 1e9, 0, 1000, 0, setup_lazy_record, run_add,
     teardown_add},
    {"lazy_mark_step_cached_100", "us", BENCH_TIME, 1e6, 0, 3, 0, setup_mark_step,
     run_mark_step_cached, teardown_mark_step},
    {"lazy_mark_step_uncached_100", "us", BENCH_TIME, 1e6, 0, 3, 200, setup_mark_step,
     run_mark_step_uncached, teardown_mark_step},
    {"copy_4m", "GB/s", BENCH_RATE, 1e-9, COPY_BYTES, 3, 0, setup_copy, run_copy, teardown_copy},
};

static const bench_workload gemm[] = {
    {"sgemm_1024", "GFLOP/s", BENCH_RATE, 1e-9, GFLOP_1024, 2, 0, setup_gemm, run_sgemm,
     teardown_gemm},
    {"openblas_sgemm_1024", "GFLOP/s", BENCH_RATE, 1e-9, GFLOP_1024, 2, 0, setup_openblas_sgemm,
     run_openblas_sgemm, teardown_openblas_sgemm},
    {"sgemm_mlp_fwd", "GFLOP/s", BENCH_RATE, 1e-9, MLP_GFLOP, 3, 0, setup_mlp_gemm, run_mlp_fwd,
     teardown_mlp_gemm},
    {"openblas_sgemm_mlp_fwd", "GFLOP/s", BENCH_RATE, 1e-9, MLP_GFLOP, 3, 0,
     setup_openblas_mlp_gemm, run_openblas_mlp_fwd, teardown_openblas_mlp_gemm},
    {"sgemm_mlp_dx", "GFLOP/s", BENCH_RATE, 1e-9, MLP_GFLOP, 3, 0, setup_mlp_gemm, run_mlp_dx,
     teardown_mlp_gemm},
    {"openblas_sgemm_mlp_dx", "GFLOP/s", BENCH_RATE, 1e-9, MLP_GFLOP, 3, 0,
     setup_openblas_mlp_gemm, run_openblas_mlp_dx, teardown_openblas_mlp_gemm},
    {"sgemm_mlp_dw", "GFLOP/s", BENCH_RATE, 1e-9, MLP_GFLOP, 3, 0, setup_mlp_gemm, run_mlp_dw,
     teardown_mlp_gemm},
    {"openblas_sgemm_mlp_dw", "GFLOP/s", BENCH_RATE, 1e-9, MLP_GFLOP, 3, 0,
     setup_openblas_mlp_gemm, run_openblas_mlp_dw, teardown_openblas_mlp_gemm},
};

static const bench_workload extra[] = {
    {"memcpy_4m", "GB/s", BENCH_RATE, 1e-9, COPY_BYTES, 3, 0, setup_memcpy, run_memcpy,
     teardown_memcpy},
    {"conv2d_fwd_bwd", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_conv, run_conv, teardown_conv},
};

const bench_workload *bench_overhead_workloads(int *n) {
  *n = (int)(sizeof overhead / sizeof *overhead);
  return overhead;
}
const bench_workload *bench_gemm_workloads(int *n) {
  *n = (int)(sizeof gemm / sizeof *gemm);
  return gemm;
}
const bench_workload *bench_extra_workloads(int *n) {
  *n = (int)(sizeof extra / sizeof *extra);
  return extra;
}
