/* bench/work_models.c: model workloads written with kiln ops.
 *
 * MLP 784-256-256-10 with ReLU, batch 128, cross-entropy, SGD with
 * momentum 0.9 (lr 0.01, grads set to none after each step, as PyTorch's
 * zero_grad(set_to_none=True)): one training step eagerly, with the forward
 * as a kiln_function (loss, backward and SGD eager), and lazily (inputs
 * copied to the lazy device, the whole step recorded, one mark_step).
 * Batch-1 inference (no grad) eagerly and through a kiln_function.
 *
 * LSTM, input 64, hidden 256, 32 time steps, batch 32, x time-major
 * [T, B, I], h0 = c0 = 0, one bias (b_ih + b_hh folded), loss = sum of the
 * last hidden state: forward + backward eagerly, as the IR graph with a
 * prim::Loop over time (what torch.jit.script prints for the cell loop),
 * and lazily (one mark_step per step).
 *
 * In lazy mode the step runs inside a scope that ends before mark_step,
 * so only what a Python loop would keep alive (parameters, momentum
 * buffers, grads, the loss) is synced. */
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* ---- MLP ---------------------------------------------------------------------------- */

#define MLP_B 128
#define MLP_LR 0.01
#define MLP_MOMENTUM 0.9

/* print(torch.jit.script(f).graph) for
 *   def f(x, w1, b1, w2, b2, w3, b3):
 *       h = torch.relu(F.linear(x, w1, b1)); h = torch.relu(F.linear(h, w2, b2))
 *       return F.linear(h, w3, b3) */
static const char *MLP_IR =
    "graph(%x.1 : Tensor,\n"
    "      %w1.1 : Tensor,\n"
    "      %b1.1 : Tensor,\n"
    "      %w2.1 : Tensor,\n"
    "      %b2.1 : Tensor,\n"
    "      %w3.1 : Tensor,\n"
    "      %b3.1 : Tensor):\n"
    "  %10 : Tensor = aten::linear(%x.1, %w1.1, %b1.1)\n"
    "  %h.1 : Tensor = aten::relu(%10)\n"
    "  %15 : Tensor = aten::linear(%h.1, %w2.1, %b2.1)\n"
    "  %h.5 : Tensor = aten::relu(%15)\n"
    "  %20 : Tensor = aten::linear(%h.5, %w3.1, %b3.1)\n"
    "  return (%20)\n";

typedef struct mlp {
  kiln_tensor *p[6];   /* w1 b1 w2 b2 w3 b3: leaves requiring grad */
  kiln_tensor *buf[6]; /* momentum buffers */
  kiln_tensor *x, *y;  /* CPU batch: x [B, 784] float32, y [B] int64 */
  kiln_function *f;    /* jit modes */
  bool lazy;
} mlp;

static mlp M;

/* U(-bound, bound) of the given shape (a new reference, or NULL). */
static kiln_tensor *uniform(int ndim, const int64_t *shape, double bound, kiln_generator *g) {
  kiln_tensor *r = kiln_rand(ndim, shape, KILN_DTYPE_F32, g);
  kiln_tensor *s = r ? kiln_mul_scalar(r, 2 * bound) : NULL;
  kiln_tensor *u = s ? kiln_sub_scalar(s, bound) : NULL;
  kiln_release(r);
  kiln_release(s);
  return u;
}

/* A new reference to a kiln_function of ir, or NULL. */
static kiln_function *function_of(const char *ir) {
  kiln_graph *g = kiln_graph_parse(ir, strlen(ir));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  kiln_graph_free(g);
  return f;
}

/* Labels in [0, 10) from a fixed LCG, as int64. */
static kiln_tensor *labels(int64_t n) {
  int64_t v[MLP_B];
  uint64_t s = 12345;
  for (int64_t i = 0; i < n && i < MLP_B; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (int64_t)((s >> 33) % 10);
  }
  return kiln_from_data(v, 1, &n, KILN_DTYPE_I64);
}

static int mlp_setup(int64_t batch, bool lazy, bool jit) {
  static const int64_t shapes[6][2] = {{256, 784}, {256, 0}, {256, 256},
                                       {256, 0},   {10, 256}, {10, 0}};
  static const double fan_in[6] = {784, 784, 256, 256, 256, 256};
  kiln_generator *g = kiln_generator_new(7);
  int rc = -1;
  memset(&M, 0, sizeof M);
  M.lazy = lazy;
  for (int i = 0; i < 6; i++) {
    int nd = shapes[i][1] ? 2 : 1;
    kiln_tensor *p = uniform(nd, shapes[i], 1 / sqrt(fan_in[i]), g);
    kiln_tensor *z = kiln_zeros(nd, shapes[i], KILN_DTYPE_F32);
    M.p[i] = lazy && p ? kiln_to_lazy(p) : kiln_retain(p);
    M.buf[i] = lazy && z ? kiln_to_lazy(z) : kiln_retain(z);
    kiln_release(p);
    kiln_release(z);
    if (!M.p[i] || !M.buf[i] || kiln_set_requires_grad(M.p[i], true) < 0) goto out;
  }
  int64_t sx[2] = {batch, 784};
  M.x = kiln_randn(2, sx, KILN_DTYPE_F32, g);
  M.y = labels(batch);
  if (!M.x || !M.y) goto out;
  if (jit && !(M.f = function_of(MLP_IR))) goto out;
  rc = lazy ? kiln_mark_step() : 0;
out:
  kiln_generator_free(g);
  return rc;
}

static void mlp_teardown(void) {
  bench_print_function(M.f);
  for (int i = 0; i < 6; i++) {
    kiln_release(M.p[i]);
    kiln_release(M.buf[i]);
  }
  kiln_release(M.x);
  kiln_release(M.y);
  kiln_function_free(M.f);
  if (M.lazy) kiln_mark_step();
  memset(&M, 0, sizeof M);
}

/* The logits for x (inside the caller's scope), eagerly or through M.f. */
static kiln_tensor *mlp_forward(kiln_tensor *x) {
  if (M.f) {
    kiln_value in[7], out[1];
    in[0] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = x};
    for (int i = 0; i < 6; i++) in[i + 1] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = M.p[i]};
    return kiln_function_call(M.f, in, 7, out, 1) == 1 ? out[0].t : NULL;
  }
  kiln_tensor *h = kiln_relu(kiln_linear(x, M.p[0], M.p[1]));
  h = kiln_relu(kiln_linear(h, M.p[2], M.p[3]));
  return kiln_linear(h, M.p[4], M.p[5]);
}

/* SGD with momentum under no_grad (inside the caller's scope); grads to none. */
static int mlp_sgd(void) {
  int rc = 0;
  kiln_no_grad_begin();
  for (int i = 0; i < 6 && rc == 0; i++) {
    kiln_tensor *g = kiln_tensor_grad(M.p[i]);
    if (!g) rc = -1;
    /* torch.optim.SGD's update: buf.mul_(momentum).add_(g); p.add_(buf, alpha=-lr) */
    if (rc == 0) rc = kiln_mul_scalar_(M.buf[i], MLP_MOMENTUM);
    if (rc == 0) rc = kiln_add_(M.buf[i], g, 1.0);
    if (rc == 0) rc = kiln_add_(M.p[i], M.buf[i], -MLP_LR);
    kiln_tensor_set_grad(M.p[i], NULL);
  }
  kiln_no_grad_end();
  return rc;
}

static double run_mlp_step(int iters) {
  double t0 = bench_now();
  for (int k = 0; k < iters; k++) {
    kiln_tensor *loss = NULL;
    int rc = -1;
    kiln_scope_begin();
    kiln_tensor *x = M.lazy ? kiln_to_lazy(M.x) : M.x, *y = M.lazy ? kiln_to_lazy(M.y) : M.y;
    kiln_tensor *logits = x && y ? mlp_forward(x) : NULL;
    loss = logits ? kiln_cross_entropy(logits, y, KILN_REDUCTION_MEAN) : NULL;
    if (loss && kiln_backward(loss, NULL) == KILN_OK) rc = mlp_sgd();
    kiln_keep(loss);
    kiln_scope_end();
    if (rc == 0 && M.lazy) rc = kiln_mark_step();
    kiln_release(loss);
    if (rc < 0) return bench_fail("mlp_step", "a training step");
  }
  return bench_now() - t0;
}

static double run_mlp_infer(int iters) {
  double t0 = bench_now();
  kiln_no_grad_begin();
  for (int k = 0; k < iters; k++) {
    kiln_scope_begin();
    kiln_tensor *logits = mlp_forward(M.x);
    kiln_scope_end();
    if (!logits) {
      kiln_no_grad_end();
      return bench_fail("mlp_infer_b1", "the forward");
    }
  }
  kiln_no_grad_end();
  return bench_now() - t0;
}

static int setup_mlp_eager(void) { return mlp_setup(MLP_B, false, false); }
static int setup_mlp_jit(void) { return mlp_setup(MLP_B, false, true); }
static int setup_mlp_lazy(void) { return mlp_setup(MLP_B, true, false); }
static int setup_mlp_b1_eager(void) { return mlp_setup(1, false, false); }
static int setup_mlp_b1_jit(void) { return mlp_setup(1, false, true); }

/* ---- LSTM --------------------------------------------------------------------------- */

#define LSTM_T 32
#define LSTM_B 32
#define LSTM_I 64
#define LSTM_H 256

/* print(torch.jit.script(f).graph) (inlined) for
 *   def f(x, h, c, w_ih, w_hh, b):
 *       xs = F.linear(x, w_ih, b).unbind(0)
 *       for t in range(len(xs)):
 *           gates = xs[t] + F.linear(h, w_hh)
 *           i, f, g, o = gates.chunk(4, 1)
 *           c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
 *           h = torch.sigmoid(o) * torch.tanh(c)
 *       return h */
static const char *LSTM_IR =
    "graph(%x.1 : Tensor,\n"
    "      %h.1 : Tensor,\n"
    "      %c.1 : Tensor,\n"
    "      %w_ih.1 : Tensor,\n"
    "      %w_hh.1 : Tensor,\n"
    "      %b.1 : Tensor):\n"
    "  %23 : NoneType = prim::Constant()\n"
    "  %16 : bool = prim::Constant[value=1]()\n"
    "  %10 : int = prim::Constant[value=0]()\n"
    "  %28 : int = prim::Constant[value=4]()\n"
    "  %29 : int = prim::Constant[value=1]()\n"
    "  %9 : Tensor = aten::linear(%x.1, %w_ih.1, %b.1)\n"
    "  %xs.1 : Tensor[] = aten::unbind(%9, %10)\n"
    "  %13 : int = aten::len(%xs.1)\n"
    "  %h : Tensor, %c : Tensor = prim::Loop(%13, %16, %h.1, %c.1)\n"
    "    block0(%t.1 : int, %h.11 : Tensor, %c.11 : Tensor):\n"
    "      %20 : Tensor = aten::__getitem__(%xs.1, %t.1)\n"
    "      %24 : Tensor = aten::linear(%h.11, %w_hh.1, %23)\n"
    "      %gates.1 : Tensor = aten::add(%20, %24, %29)\n"
    "      %30 : Tensor[] = aten::chunk(%gates.1, %28, %29)\n"
    "      %i.1 : Tensor, %f.1 : Tensor, %g.1 : Tensor, %o.1 : Tensor = prim::ListUnpack(%30)\n"
    "      %36 : Tensor = aten::sigmoid(%f.1)\n"
    "      %38 : Tensor = aten::mul(%36, %c.11)\n"
    "      %40 : Tensor = aten::sigmoid(%i.1)\n"
    "      %42 : Tensor = aten::tanh(%g.1)\n"
    "      %43 : Tensor = aten::mul(%40, %42)\n"
    "      %c.5 : Tensor = aten::add(%38, %43, %29)\n"
    "      %48 : Tensor = aten::sigmoid(%o.1)\n"
    "      %50 : Tensor = aten::tanh(%c.5)\n"
    "      %h.5 : Tensor = aten::mul(%48, %50)\n"
    "      -> (%16, %h.5, %c.5)\n"
    "  return (%h)\n";

typedef struct lstm {
  kiln_tensor *p[3];  /* w_ih [4H, I], w_hh [4H, H], b [4H] */
  kiln_tensor *x;     /* CPU [T, B, I] */
  kiln_tensor *h0, *c0;
  kiln_function *f;
  bool lazy;
} lstm;

static lstm L;

static int lstm_setup(bool lazy, bool jit) {
  const int64_t shapes[3][2] = {{4 * LSTM_H, LSTM_I}, {4 * LSTM_H, LSTM_H}, {4 * LSTM_H, 0}};
  const int64_t sx[3] = {LSTM_T, LSTM_B, LSTM_I}, sh[2] = {LSTM_B, LSTM_H};
  kiln_generator *g = kiln_generator_new(8);
  int rc = -1;
  memset(&L, 0, sizeof L);
  L.lazy = lazy;
  for (int i = 0; i < 3; i++) {
    kiln_tensor *p = uniform(shapes[i][1] ? 2 : 1, shapes[i], 1 / sqrt(LSTM_H), g);
    L.p[i] = lazy && p ? kiln_to_lazy(p) : kiln_retain(p);
    kiln_release(p);
    if (!L.p[i] || kiln_set_requires_grad(L.p[i], true) < 0) goto out;
  }
  L.x = kiln_randn(3, sx, KILN_DTYPE_F32, g);
  kiln_tensor *h = kiln_zeros(2, sh, KILN_DTYPE_F32), *c = kiln_zeros(2, sh, KILN_DTYPE_F32);
  L.h0 = lazy && h ? kiln_to_lazy(h) : kiln_retain(h);
  L.c0 = lazy && c ? kiln_to_lazy(c) : kiln_retain(c);
  kiln_release(h);
  kiln_release(c);
  if (!L.x || !L.h0 || !L.c0) goto out;
  if (jit && !(L.f = function_of(LSTM_IR))) goto out;
  rc = lazy ? kiln_mark_step() : 0;
out:
  kiln_generator_free(g);
  return rc;
}

static void lstm_teardown(void) {
  bench_print_function(L.f);
  for (int i = 0; i < 3; i++) kiln_release(L.p[i]);
  kiln_release(L.x);
  kiln_release(L.h0);
  kiln_release(L.c0);
  kiln_function_free(L.f);
  if (L.lazy) kiln_mark_step();
  memset(&L, 0, sizeof L);
}

/* The last hidden state (inside the caller's scope), or NULL. */
static kiln_tensor *lstm_forward(kiln_tensor *x) {
  if (L.f) {
    kiln_value in[6] = {{.kind = KILN_VALUE_TENSOR, .t = x},
                        {.kind = KILN_VALUE_TENSOR, .t = L.h0},
                        {.kind = KILN_VALUE_TENSOR, .t = L.c0},
                        {.kind = KILN_VALUE_TENSOR, .t = L.p[0]},
                        {.kind = KILN_VALUE_TENSOR, .t = L.p[1]},
                        {.kind = KILN_VALUE_TENSOR, .t = L.p[2]}},
               out[1];
    return kiln_function_call(L.f, in, 6, out, 1) == 1 ? out[0].t : NULL;
  }
  kiln_tensor *h = L.h0, *c = L.c0, *xs[LSTM_T];
  if (kiln_unbind(kiln_linear(x, L.p[0], L.p[2]), 0, xs, LSTM_T) != LSTM_T) return NULL;
  for (int64_t t = 0; t < LSTM_T && h && c; t++) {
    kiln_tensor *gates = kiln_add(xs[t], kiln_linear(h, L.p[1], NULL));
    kiln_tensor *q[4];
    if (!gates || kiln_chunk(gates, 4, 1, q, 4) != 4) return NULL;
    c = kiln_add(kiln_mul(kiln_sigmoid(q[1]), c), kiln_mul(kiln_sigmoid(q[0]), kiln_tanh(q[2])));
    h = kiln_mul(kiln_sigmoid(q[3]), kiln_tanh(c));
  }
  return h;
}

static double run_lstm_step(int iters) {
  double t0 = bench_now();
  for (int k = 0; k < iters; k++) {
    for (int i = 0; i < 3; i++) kiln_tensor_set_grad(L.p[i], NULL);
    int rc = -1;
    kiln_scope_begin();
    kiln_tensor *x = L.lazy ? kiln_to_lazy(L.x) : L.x;
    kiln_tensor *h = x ? lstm_forward(x) : NULL;
    kiln_tensor *loss = h ? kiln_sum(h, NULL, 0, false) : NULL;
    if (loss) rc = kiln_backward(loss, NULL);
    kiln_keep(loss);
    kiln_scope_end();
    if (rc == 0 && L.lazy) rc = kiln_mark_step();
    kiln_release(loss);
    if (rc < 0) return bench_fail("lstm_step", "forward + backward");
  }
  return bench_now() - t0;
}

static int setup_lstm_eager(void) { return lstm_setup(false, false); }
static int setup_lstm_jit(void) { return lstm_setup(false, true); }
static int setup_lstm_lazy(void) { return lstm_setup(true, false); }

/* ---- busy machine ------------------------------------------------------------------- */
/* Note [Busy machine]: the MLP training step (eager) while another process
 * keeps one core busy, against the same step on a quiet machine, measured
 * back to back in one process (busy_machine_quiet, then busy_machine). The
 * competitor is a spin loop the workload forks in its setup and kills in
 * its teardown; its CPU time counts as the workload's own in the
 * contention guard (bench_spinner_pid). The ratio busy / quiet shows
 * whether idle workers spinning, or a thread waiting on a core it shares,
 * multiply the step's time (Note [Thread waits] in src/core/threads.c). */
int bench_spinner_pid;

static void stop_spinner(void) {
  if (bench_spinner_pid > 0) {
    kill(bench_spinner_pid, SIGKILL);
    waitpid(bench_spinner_pid, NULL, 0);
  }
  bench_spinner_pid = 0;
}

static int setup_busy(void) {
  if (mlp_setup(MLP_B, false, false) < 0) return -1;
  pid_t p = fork();
  if (p < 0) return -1;
  if (p == 0) { /* the competitor: spins until killed (or its parent dies) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (volatile unsigned long x = 0;; x++) {
    }
  }
  bench_spinner_pid = p;
  usleep(50000); /* let it start */
  return 0;
}

static void teardown_busy(void) {
  stop_spinner();
  mlp_teardown();
}

/* ---- list --------------------------------------------------------------------------- */

static const bench_workload models[] = {
    {"mlp_step_eager", "ms", BENCH_TIME, 1e3, 0, 5, 0, setup_mlp_eager, run_mlp_step,
     mlp_teardown},
    {"mlp_step_jit", "ms", BENCH_TIME, 1e3, 0, 5, 0, setup_mlp_jit, run_mlp_step, mlp_teardown},
    {"mlp_step_lazy", "ms", BENCH_TIME, 1e3, 0, 5, 0, setup_mlp_lazy, run_mlp_step,
     mlp_teardown},
    {"mlp_infer_b1_eager", "us", BENCH_TIME, 1e6, 0, 20, 0, setup_mlp_b1_eager, run_mlp_infer,
     mlp_teardown},
    {"mlp_infer_b1_jit", "us", BENCH_TIME, 1e6, 0, 20, 0, setup_mlp_b1_jit, run_mlp_infer,
     mlp_teardown},
    {"lstm_step_eager", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_lstm_eager, run_lstm_step,
     lstm_teardown},
    {"lstm_step_jit", "ms", BENCH_TIME, 1e3, 0, 4, 0, setup_lstm_jit, run_lstm_step,
     lstm_teardown},
    {"lstm_step_lazy", "ms", BENCH_TIME, 1e3, 0, 3, 0, setup_lstm_lazy, run_lstm_step,
     lstm_teardown},
    {"busy_machine_quiet", "ms", BENCH_TIME, 1e3, 0, 5, 0, setup_mlp_eager, run_mlp_step,
     mlp_teardown},
    {"busy_machine", "ms", BENCH_TIME, 1e3, 0, 5, 0, setup_busy, run_mlp_step, teardown_busy},
};

const bench_workload *bench_model_workloads(int *n) {
  *n = (int)(sizeof models / sizeof *models);
  return models;
}
