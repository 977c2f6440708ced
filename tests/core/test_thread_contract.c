/* tests/core/test_thread_contract.c: Note [Threads] in include/kiln.h, the
 * contract for programs that use kiln from several threads at once:
 * independent eager training steps, independent jit functions (profiling,
 * optimizing and fusing at the same time) and independent lazy devices
 * (one per thread, each with its own mark_step) run on concurrent threads
 * (eager dropout drawing from each thread's own generator)
 * and give exactly the values of the same work run alone on one thread;
 * one kiln_function shared by several threads (its calls serialize) gives
 * each caller the value a lone call gives; the default generator may be
 * drawn from by several threads. These also run under `make test TSAN=1`,
 * where ThreadSanitizer checks the same runs for data races. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/fusion_cc.h"
#include "kiln.h"
#include "test.h"

#define N_IN 12
#define N_HID 10
#define N_OUT 4
#define BATCH 16
#define STEPS 4
#define N_PARAMS 4
#define MAX_OUT 512 /* floats a workload reports */

enum { EAGER, JIT, LAZY, N_KINDS };
static const char *const kind_names[N_KINDS] = {"eager", "jit", "lazy"};

typedef struct job {
  int kind;
  uint64_t seed;
  int threads;      /* OpenMP threads, as the reference run had */
  float out[MAX_OUT];
  int n_out;
  char err[256];
} job;

static void job_fail(job *j, const char *what) {
  if (!j->err[0]) snprintf(j->err, sizeof j->err, "%s: %s", what, kiln_last_error());
}

/* Appends t's values (a CPU or lazy float tensor) to j->out. */
static void report(job *j, kiln_tensor *t) {
  kiln_tensor *c = t ? kiln_contiguous(kiln_to_cpu(t)) : NULL;
  if (!c) return job_fail(j, "to_cpu");
  int64_t n = kiln_tensor_numel(c);
  if (j->n_out + n > MAX_OUT) return job_fail(j, "too many values");
  memcpy(j->out + j->n_out, kiln_tensor_data(c), (size_t)n * sizeof(float));
  j->n_out += (int)n;
}

/* ---- eager and lazy: an MLP trained by SGD ------------------------------- */
/* eager: dropout drawing from the thread's own generator g (lazy dropout
 * would draw from the shared default generator: Note [Dropout generator]) */
static kiln_tensor *mlp_loss(kiln_tensor *const *p, kiln_tensor *x, kiln_tensor *y,
                             kiln_generator *g) {
  kiln_tensor *h = kiln_relu(kiln_linear(x, p[0], p[1]));
  if (g) h = kiln_dropout(h, 0.25, true, g);
  return kiln_cross_entropy(kiln_linear(h, p[2], p[3]), y, KILN_REDUCTION_MEAN);
}

static void mlp_job(job *j, bool lazy) {
  static const int64_t shapes[N_PARAMS][2] = {{N_HID, N_IN}, {N_HID, 0}, {N_OUT, N_HID}, {N_OUT, 0}};
  kiln_generator *g = kiln_generator_new(j->seed);
  kiln_tensor *p[N_PARAMS] = {0};
  kiln_scope_begin();
  for (int i = 0; i < N_PARAMS; i++) {
    int nd = shapes[i][1] ? 2 : 1;
    kiln_tensor *t = kiln_mul_scalar(kiln_randn(nd, shapes[i], KILN_DTYPE_F32, g), 0.3);
    p[i] = kiln_keep(lazy ? kiln_to_lazy(t) : t);
    if (!p[i]) job_fail(j, "param");
    else kiln_set_requires_grad(p[i], true);
  }
  kiln_scope_end();
  for (int step = 0; step < STEPS && !j->err[0]; step++) {
    kiln_scope_begin();
    int64_t b = BATCH, sx[2] = {BATCH, N_IN};
    kiln_tensor *x = kiln_randn(2, sx, KILN_DTYPE_F32, g);
    kiln_tensor *y = kiln_zeros(1, &b, KILN_DTYPE_I64);
    for (int64_t i = 0; i < b; i++)
      ((int64_t *)kiln_tensor_data(y))[i] = (int64_t)((j->seed + 7 * (uint64_t)(i + step)) % N_OUT);
    if (lazy) {
      x = kiln_to_lazy(x);
      y = kiln_to_lazy(y);
    }
    kiln_tensor *loss = mlp_loss(p, x, y, lazy ? NULL : g);
    if (!loss || kiln_backward(loss, NULL) < 0) job_fail(j, "backward");
    kiln_no_grad_begin();
    for (int i = 0; i < N_PARAMS && !j->err[0]; i++) {
      kiln_tensor *gr = kiln_tensor_grad(p[i]);
      if (!gr || kiln_add_(p[i], gr, -0.1) < 0) job_fail(j, "sgd");
      kiln_tensor_set_grad(p[i], NULL);
    }
    kiln_no_grad_end();
    if (lazy && kiln_mark_step() < 0) job_fail(j, "mark_step");
    if (!j->err[0]) report(j, loss);
    kiln_scope_end();
  }
  kiln_scope_begin();
  for (int i = 0; i < N_PARAMS && !j->err[0]; i++) report(j, p[i]);
  kiln_scope_end();
  for (int i = 0; i < N_PARAMS; i++) kiln_release(p[i]);
  kiln_generator_free(g);
}

/* ---- jit: a function trained through its DifferentiableGraph ------------ */
static const char *FUSED = "graph(%x : Tensor,\n"
                           "      %w : Tensor,\n"
                           "      %b : Tensor):\n"
                           "  %3 : int = prim::Constant[value=1]()\n"
                           "  %4 : Tensor = aten::matmul(%x, %w)\n"
                           "  %5 : Tensor = aten::add(%4, %b, %3)\n"
                           "  %6 : Tensor = aten::tanh(%5)\n"
                           "  %7 : Tensor = aten::mul(%6, %5)\n"
                           "  %8 : Tensor = aten::sigmoid(%7)\n"
                           "  return (%8)\n";

static kiln_function *fn_new(void) {
  kiln_graph *gr = kiln_graph_parse(FUSED, strlen(FUSED));
  kiln_function *f = gr ? kiln_function_new(gr) : NULL;
  kiln_graph_free(gr);
  return f;
}

static kiln_value T(kiln_tensor *t) { return (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t}; }

static void jit_job(job *j) {
  kiln_generator *g = kiln_generator_new(j->seed);
  kiln_function *f = fn_new();
  if (!f) job_fail(j, "function");
  kiln_scope_begin();
  kiln_tensor *w = kiln_mul_scalar(kiln_randn(2, (int64_t[]){N_IN, N_OUT}, KILN_DTYPE_F32, g), 0.3);
  kiln_tensor *b = kiln_zeros(1, (int64_t[]){N_OUT}, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(b, true);
  for (int step = 0; step < STEPS + 1 && f && !j->err[0]; step++) {
    kiln_tensor *x = kiln_randn(2, (int64_t[]){BATCH, N_IN}, KILN_DTYPE_F32, g);
    kiln_value in[3] = {T(x), T(w), T(b)}, out[1];
    if (kiln_function_call(f, in, 3, out, 1) != 1) {
      job_fail(j, "call");
      break;
    }
    kiln_tensor *loss = kiln_sum(kiln_mul(out[0].t, out[0].t), NULL, 0, false);
    if (!loss || kiln_backward(loss, NULL) < 0) job_fail(j, "backward");
    kiln_no_grad_begin();
    kiln_tensor *ps[2] = {w, b};
    for (int i = 0; i < 2 && !j->err[0]; i++) {
      if (kiln_add_(ps[i], kiln_tensor_grad(ps[i]), -0.05) < 0) job_fail(j, "sgd");
      kiln_tensor_set_grad(ps[i], NULL);
    }
    kiln_no_grad_end();
    report(j, loss);
  }
  if (f) {
    kiln_function_stats s;
    kiln_function_get_stats(f, &s);
    if (s.optimizations < 1) job_fail(j, "never optimized");
  }
  report(j, w);
  report(j, b);
  kiln_scope_end();
  kiln_function_free(f);
  kiln_generator_free(g);
}

static void *run_job(void *arg) {
  job *j = arg;
  if (j->threads > 0) kiln_set_num_threads(j->threads);
  j->n_out = 0;
  j->err[0] = 0;
  if (j->kind == EAGER) mlp_job(j, false);
  else if (j->kind == LAZY) mlp_job(j, true);
  else jit_job(j);
  return NULL;
}

/* Runs jobs[0..n) on threads of their own, all at once. */
static void run_concurrently(job *jobs, int n) {
  pthread_t tid[16];
  for (int i = 0; i < n; i++) CHECK(pthread_create(&tid[i], NULL, run_job, &jobs[i]) == 0);
  for (int i = 0; i < n; i++) pthread_join(tid[i], NULL);
}

static void check_same(const job *got, const job *want) {
  const char *k = kind_names[got->kind];
  CHECK_MSG(!got->err[0], "%s seed %llu on a thread: %s", k, (unsigned long long)got->seed, got->err);
  CHECK_MSG(!want->err[0], "%s seed %llu alone: %s", k, (unsigned long long)want->seed, want->err);
  CHECK_MSG(got->n_out == want->n_out && got->n_out > 0, "%s: %d values, alone %d", k, got->n_out,
            want->n_out);
  int diff = 0;
  for (int i = 0; i < got->n_out && i < want->n_out; i++)
    if (memcmp(&got->out[i], &want->out[i], sizeof(float))) diff++;
  CHECK_MSG(diff == 0, "%s seed %llu: %d of %d values differ from the lone run", k,
            (unsigned long long)got->seed, diff, got->n_out);
}

/* Each kind twice (different seeds) on 2 * N_KINDS concurrent threads,
 * against the same jobs run one after another on this thread. */
TEST(thread_contract_independent_eager_jit_lazy) {
  enum { N = 2 * N_KINDS };
  static job want[N], got[N];
  int nt = kiln_get_num_threads();
  for (int i = 0; i < N; i++) {
    want[i] = (job){.kind = i % N_KINDS, .seed = 100 + (uint64_t)i, .threads = 0};
    run_job(&want[i]);
    got[i] = (job){.kind = i % N_KINDS, .seed = 100 + (uint64_t)i, .threads = nt};
  }
  run_concurrently(got, N);
  for (int i = 0; i < N; i++) check_same(&got[i], &want[i]);
  test_note("%d threads x (eager, jit, lazy), %d values each compared", N, want[0].n_out);
}

/* Several threads each with a lazy device of its own: the same seed on
 * every thread, so their graphs hash alike and compile at the same time;
 * each thread's counters count its own steps only. */
TEST(thread_contract_lazy_devices_per_thread) {
  enum { N = 3 };
  static job want, got[N];
  want = (job){.kind = LAZY, .seed = 7};
  kiln_lazy_metrics_reset();
  run_job(&want);
  CHECK_EQ_INT(kiln_lazy_counter("MarkStep"), STEPS);
  int nt = kiln_get_num_threads();
  for (int i = 0; i < N; i++) got[i] = (job){.kind = LAZY, .seed = 7, .threads = nt};
  run_concurrently(got, N);
  for (int i = 0; i < N; i++) check_same(&got[i], &want);
  /* the other threads' steps are not this thread's */
  CHECK_EQ_INT(kiln_lazy_counter("MarkStep"), STEPS);
}

/* ---- one function shared by several threads ------------------------------ */
typedef struct shared_call {
  kiln_function *f;
  kiln_tensor *x, *w, *b; /* read-only inputs, shared */
  float out[BATCH * N_OUT];
  int rc;
} shared_call;

static void *call_shared(void *arg) {
  shared_call *c = arg;
  c->rc = 0;
  for (int rep = 0; rep < 3 && c->rc >= 0; rep++) {
    kiln_scope_begin();
    kiln_value in[3] = {T(c->x), T(c->w), T(c->b)}, out[1];
    c->rc = kiln_function_call(c->f, in, 3, out, 1);
    kiln_tensor *o = c->rc == 1 ? kiln_contiguous(out[0].t) : NULL;
    if (o) memcpy(c->out, kiln_tensor_data(o), sizeof c->out);
    else c->rc = -1;
    kiln_scope_end();
  }
  return NULL;
}

TEST(thread_contract_one_function_shared) {
  enum { N = 4 };
  kiln_generator *g = kiln_generator_new(3);
  kiln_function *f = fn_new();
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  kiln_scope_begin();
  shared_call c[N], alone = {.f = f};
  alone.x = kiln_randn(2, (int64_t[]){BATCH, N_IN}, KILN_DTYPE_F32, g);
  alone.w = kiln_randn(2, (int64_t[]){N_IN, N_OUT}, KILN_DTYPE_F32, g);
  alone.b = kiln_randn(1, (int64_t[]){N_OUT}, KILN_DTYPE_F32, g);
  /* the reference: a separate function, called alone */
  kiln_function *f1 = fn_new();
  alone.f = f1;
  call_shared(&alone);
  CHECK_EQ_INT(alone.rc, 1);
  for (int i = 0; i < N; i++) c[i] = (shared_call){.f = f, .x = alone.x, .w = alone.w, .b = alone.b};
  pthread_t tid[N];
  for (int i = 0; i < N; i++) CHECK(pthread_create(&tid[i], NULL, call_shared, &c[i]) == 0);
  for (int i = 0; i < N; i++) pthread_join(tid[i], NULL);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(c[i].rc, 1);
    CHECK_MSG(!memcmp(c[i].out, alone.out, sizeof alone.out), "caller %d: values differ", i);
  }
  kiln_function_stats s;
  kiln_function_get_stats(f, &s);
  CHECK_EQ_INT(s.optimizations, 1); /* optimized once, by whichever call came second */
  kiln_scope_end();
  kiln_function_free(f);
  kiln_function_free(f1);
  kiln_generator_free(g);
}

/* ---- the default generator, shared --------------------------------------- */
static void *draw_default(void *arg) {
  double *sum = arg;
  *sum = 0;
  for (int i = 0; i < 50; i++) {
    kiln_scope_begin();
    double v = 0;
    kiln_tensor *t = kiln_sum(kiln_rand(1, (int64_t[]){8}, KILN_DTYPE_F64, NULL), NULL, 0, false);
    if (t && kiln_item(t, &v) == KILN_OK) *sum += v;
    kiln_scope_end();
  }
  return NULL;
}

/* Draws from the default generator interleave in some order, but every
 * draw is one of the sequence's: the total over all threads equals the
 * total of the same number of draws on one thread. */
TEST(thread_contract_default_generator_shared) {
  enum { N = 4 };
  double alone = 0, part[N], sum = 0;
  kiln_manual_seed(11);
  for (int i = 0; i < N; i++) {
    draw_default(&part[0]);
    alone += part[0];
  }
  kiln_manual_seed(11);
  pthread_t tid[N];
  for (int i = 0; i < N; i++) CHECK(pthread_create(&tid[i], NULL, draw_default, &part[i]) == 0);
  for (int i = 0; i < N; i++) {
    pthread_join(tid[i], NULL);
    sum += part[i];
  }
  CHECK_NEAR(sum, alone, 1e-9);
}

/* ---- native fused kernels compiled while other threads wait ------------- */
/* The fused kernels of FUSED are shared through the process-wide kernel
 * cache (Note [Kernel cache]); in mode 2 the first call on any thread
 * compiles each natively while the others wait on the compile, and every
 * thread's values equal the tile kernels' of a lone run. */
TEST(thread_contract_native_kernels_shared) {
  enum { N = 3 };
  static job want, got[N];
  int prev = exec_fusion_cc_set_mode(0);
  want = (job){.kind = JIT, .seed = 41};
  run_job(&want);
  exec_fusion_cc_set_mode(2);
  int64_t native0 = kiln_fused_kernels_native();
  int nt = kiln_get_num_threads();
  for (int i = 0; i < N; i++) got[i] = (job){.kind = JIT, .seed = 41, .threads = nt};
  run_concurrently(got, N);
  int64_t built = kiln_fused_kernels_native() - native0;
  exec_fusion_cc_set_mode(prev);
  for (int i = 0; i < N; i++) check_same(&got[i], &want);
  CHECK_MSG(built >= 1, "no native kernel was built (%lld)", (long long)built);
  test_note("%lld native kernels built for %d threads", (long long)built, N);
}
