/* bench/bench_main.c: kiln's benchmarks (`make bench`). Each workload is
 * warmed up once, then timed over BENCH_RUNS repetitions; the table (or,
 * with --json, one JSON object per line) gives the median, min and max.
 *
 *   bench_kiln [--json] [name-filter]
 *
 * The filter runs the workload of exactly that name if there is one, else
 * every workload whose name contains it.
 * Workloads: dispatch overhead of a 1-element add (with and without
 * autograd recording), SGEMM through kiln_mm against OpenBLAS directly, a
 * conv2d forward+backward, and a 4M-float copy (kiln_copy_ against
 * memcpy). Not part of `make test`. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln.h"

#define BENCH_RUNS 7

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One repetition returns its result in the workload's unit. */
typedef double (*bench_fn)(void);

typedef struct bench {
  const char *name, *unit;
  bench_fn fn;
} bench;

/* ---- dispatch overhead -------------------------------------------------------- */

#define ADD_OPS 200000
#define ADD_SCOPE 1000 /* the scope is ended (outputs freed) every 1000 ops */

static double add_loop(bool grad) {
  int64_t one[1] = {1};
  kiln_tensor *a = kiln_ones(1, one, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_ones(1, one, KILN_DTYPE_F32);
  if (grad) kiln_set_requires_grad(a, true);
  double t0 = now_s();
  for (int i = 0; i < ADD_OPS; i += ADD_SCOPE) {
    kiln_scope_begin();
    for (int k = 0; k < ADD_SCOPE; k++) kiln_add(a, b);
    kiln_scope_end();
  }
  double t = now_s() - t0;
  kiln_release(a);
  kiln_release(b);
  return t * 1e9 / ADD_OPS;
}
static double bench_overhead_add(void) { return add_loop(false); }
static double bench_overhead_add_grad(void) { return add_loop(true); }

/* ---- SGEMM -------------------------------------------------------------------- */

#define GEMM_N 1024
#define GEMM_REPS 8

static kiln_tensor *gemm_a, *gemm_b;

static void gemm_inputs(void) {
  if (gemm_a) return;
  int64_t s[2] = {GEMM_N, GEMM_N};
  kiln_generator *g = kiln_generator_new(1);
  gemm_a = kiln_randn(2, s, KILN_DTYPE_F32, g);
  gemm_b = kiln_randn(2, s, KILN_DTYPE_F32, g);
  kiln_generator_free(g);
}

static double gflops(double seconds) {
  return 2.0 * GEMM_N * GEMM_N * (double)GEMM_N * GEMM_REPS / seconds * 1e-9;
}

static double bench_sgemm(void) {
  gemm_inputs();
  double t0 = now_s();
  for (int i = 0; i < GEMM_REPS; i++) kiln_release(kiln_mm(gemm_a, gemm_b));
  return gflops(now_s() - t0);
}

static double bench_openblas_sgemm(void) {
  static float *c;
  gemm_inputs();
  if (!c) c = aligned_alloc(64, sizeof(float) * GEMM_N * GEMM_N);
  const float *a = kiln_tensor_data(gemm_a), *b = kiln_tensor_data(gemm_b);
  double t0 = now_s();
  for (int i = 0; i < GEMM_REPS; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_N, GEMM_N, GEMM_N, 1.0f, a,
                GEMM_N, b, GEMM_N, 0.0f, c, GEMM_N);
  return gflops(now_s() - t0);
}

/* ---- conv2d ------------------------------------------------------------------- */

/* One forward and backward (grads for input, weight, bias) of a 3x3
 * convolution, padding 1, on [64, 32, 14, 14] float32 with 64 filters: the
 * second conv layer of a small MNIST CNN. */
static kiln_tensor *conv_x, *conv_w, *conv_b;

static double bench_conv2d(void) {
  kiln_tensor *x = conv_x, *w = conv_w, *b = conv_b;
  if (!x) {
    kiln_generator *g = kiln_generator_new(2);
    x = kiln_randn(4, (int64_t[]){64, 32, 14, 14}, KILN_DTYPE_F32, g);
    w = kiln_randn(4, (int64_t[]){64, 32, 3, 3}, KILN_DTYPE_F32, g);
    b = kiln_randn(1, (int64_t[]){64}, KILN_DTYPE_F32, g);
    kiln_generator_free(g);
    kiln_set_requires_grad(x, true);
    kiln_set_requires_grad(w, true);
    kiln_set_requires_grad(b, true);
    conv_x = x, conv_w = w, conv_b = b;
  }
  const int64_t one[2] = {1, 1};
  double t0 = now_s();
  kiln_scope_begin();
  kiln_tensor *y = kiln_conv2d(x, w, b, one, one);
  kiln_backward(y, kiln_ones(4, kiln_tensor_shape(y), KILN_DTYPE_F32));
  kiln_scope_end();
  double t = now_s() - t0;
  kiln_tensor_set_grad(x, NULL);
  kiln_tensor_set_grad(w, NULL);
  kiln_tensor_set_grad(b, NULL);
  return t * 1e3;
}

/* ---- copy ----------------------------------------------------------------------- */

#define COPY_N (4 << 20)
#define COPY_REPS 20

static double copy_gbs(double seconds) {
  return 2.0 * sizeof(float) * (double)COPY_N * COPY_REPS / seconds * 1e-9; /* read + write */
}

static kiln_tensor *copy_src, *copy_dst;

static double bench_copy(void) {
  int64_t n[1] = {COPY_N};
  if (!copy_src) {
    copy_src = kiln_ones(1, n, KILN_DTYPE_F32);
    copy_dst = kiln_zeros(1, n, KILN_DTYPE_F32);
  }
  double t0 = now_s();
  for (int i = 0; i < COPY_REPS; i++) kiln_copy_(copy_dst, copy_src);
  return copy_gbs(now_s() - t0);
}

static float *src, *dst; /* memcpy_4m's buffers */

static double bench_memcpy(void) {
  if (!src) {
    src = aligned_alloc(64, sizeof(float) * COPY_N);
    dst = aligned_alloc(64, sizeof(float) * COPY_N);
    for (int i = 0; i < COPY_N; i++) src[i] = (float)i, dst[i] = 0;
  }
  double t0 = now_s();
  for (int i = 0; i < COPY_REPS; i++) {
    memcpy(dst, src, sizeof(float) * COPY_N);
    __asm__ volatile("" : : "r"(dst) : "memory"); /* keep every copy */
  }
  return copy_gbs(now_s() - t0);
}

static const bench benches[] = {
    {"overhead_add", "ns/op", bench_overhead_add},
    {"overhead_add_grad", "ns/op", bench_overhead_add_grad},
    {"sgemm_1024", "GFLOP/s", bench_sgemm},
    {"openblas_sgemm_1024", "GFLOP/s", bench_openblas_sgemm},
    {"conv2d_fwd_bwd", "ms", bench_conv2d},
    {"copy_4m", "GB/s", bench_copy},
    {"memcpy_4m", "GB/s", bench_memcpy},
};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  bool json = false;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else filter = argv[i];
  }
  bool exact = false;
  for (size_t i = 0; filter && i < sizeof benches / sizeof *benches; i++)
    exact |= !strcmp(benches[i].name, filter);
  if (!json)
    printf("%-22s %-8s %10s %10s %10s %5s\n", "name", "unit", "median", "min", "max", "runs");
  for (size_t i = 0; i < sizeof benches / sizeof *benches; i++) {
    const bench *b = &benches[i];
    double r[BENCH_RUNS];
    if (filter && (exact ? strcmp(b->name, filter) : !strstr(b->name, filter))) continue;
    b->fn(); /* warm-up */
    for (int k = 0; k < BENCH_RUNS; k++) r[k] = b->fn();
    qsort(r, BENCH_RUNS, sizeof *r, cmp_double);
    double med = r[BENCH_RUNS / 2], lo = r[0], hi = r[BENCH_RUNS - 1];
    if (json)
      printf("{\"name\": \"%s\", \"unit\": \"%s\", \"median\": %.6g, \"min\": %.6g, "
             "\"max\": %.6g, \"runs\": %d}\n",
             b->name, b->unit, med, lo, hi, BENCH_RUNS);
    else
      printf("%-22s %-8s %10.4g %10.4g %10.4g %5d\n", b->name, b->unit, med, lo, hi, BENCH_RUNS);
    fflush(stdout);
  }
  kiln_release(gemm_a);
  kiln_release(gemm_b);
  kiln_release(conv_x);
  kiln_release(conv_w);
  kiln_release(conv_b);
  kiln_release(copy_src);
  kiln_release(copy_dst);
  free(src);
  free(dst);
  return 0;
}
