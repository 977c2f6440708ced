/* bench/work_ew.c: the elementwise chain y = sigmoid(x*a + b) * tanh(x) +
 * 0.5*x*x over 4M float32 (a, b 0-d tensors) eagerly, through a
 * kiln_function (the IR torch.jit.script prints for it) and lazily (record
 * + mark_step per iteration); and the arithmetic-only chain y = x*a +
 * b*x*x - 0.5 through a kiln_function, in GB/s (read x, write y).
 *
 * Eager and lazy release each temporary as soon as it is used (as Python
 * drops temporaries), so a caching allocator can reuse buffers and only y
 * is live when mark_step runs. */
#include <string.h>

#include "bench.h"

#define EW_N (4 << 20)

/* print(torch.jit.script(f).graph) for
 *   def f(x, a, b): return torch.sigmoid(x * a + b) * torch.tanh(x) + 0.5 * x * x */
static const char *EW_IR =
    "graph(%x.1 : Tensor,\n"
    "      %a.1 : Tensor,\n"
    "      %b.1 : Tensor):\n"
    "  %7 : int = prim::Constant[value=1]()\n"
    "  %13 : float = prim::Constant[value=0.5]()\n"
    "  %5 : Tensor = aten::mul(%x.1, %a.1)\n"
    "  %8 : Tensor = aten::add(%5, %b.1, %7)\n"
    "  %9 : Tensor = aten::sigmoid(%8)\n"
    "  %11 : Tensor = aten::tanh(%x.1)\n"
    "  %12 : Tensor = aten::mul(%9, %11)\n"
    "  %15 : Tensor = aten::mul(%x.1, %13)\n"
    "  %17 : Tensor = aten::mul(%15, %x.1)\n"
    "  %19 : Tensor = aten::add(%12, %17, %7)\n"
    "  return (%19)\n";

/* ... for def f(x, a, b): return x * a + b * x * x - 0.5 */
static const char *ARITH_IR =
    "graph(%x.1 : Tensor,\n"
    "      %a.1 : Tensor,\n"
    "      %b.1 : Tensor):\n"
    "  %11 : int = prim::Constant[value=1]()\n"
    "  %13 : float = prim::Constant[value=0.5]()\n"
    "  %5 : Tensor = aten::mul(%x.1, %a.1)\n"
    "  %8 : Tensor = aten::mul(%b.1, %x.1)\n"
    "  %10 : Tensor = aten::mul(%8, %x.1)\n"
    "  %12 : Tensor = aten::add(%5, %10, %11)\n"
    "  %15 : Tensor = aten::sub(%12, %13, %11)\n"
    "  return (%15)\n";

static kiln_tensor *ew_x, *ew_a, *ew_b; /* CPU or lazy, per workload */
static kiln_function *ew_f;

static int ew_inputs(bool lazy) {
  int64_t n = EW_N;
  kiln_generator *g = kiln_generator_new(4);
  ew_x = kiln_randn(1, &n, KILN_DTYPE_F32, g);
  kiln_generator_free(g);
  ew_a = kiln_scalar(1.5, KILN_DTYPE_F32);
  ew_b = kiln_scalar(-0.25, KILN_DTYPE_F32);
  if (!ew_x || !ew_a || !ew_b) return -1;
  if (lazy) {
    kiln_tensor **ts[3] = {&ew_x, &ew_a, &ew_b};
    for (int i = 0; i < 3; i++) {
      kiln_tensor *l = kiln_to_lazy(*ts[i]);
      kiln_release(*ts[i]);
      *ts[i] = l;
      if (!l) return -1;
    }
    return kiln_mark_step();
  }
  return 0;
}

static int ew_function(const char *ir) {
  kiln_graph *g = kiln_graph_parse(ir, strlen(ir));
  if (!g) return -1;
  ew_f = kiln_function_new(g);
  kiln_graph_free(g);
  return ew_f ? 0 : -1;
}

static int setup_eager(void) { return ew_inputs(false); }
static int setup_lazy(void) { return ew_inputs(true); }
static int setup_jit(void) { return ew_inputs(false) < 0 ? -1 : ew_function(EW_IR); }
static int setup_arith(void) { return ew_inputs(false) < 0 ? -1 : ew_function(ARITH_IR); }

static void teardown_ew(void) {
  bench_print_function(ew_f);
  kiln_release(ew_x);
  kiln_release(ew_a);
  kiln_release(ew_b);
  kiln_function_free(ew_f);
  ew_x = ew_a = ew_b = NULL;
  ew_f = NULL;
}

/* r = op result; releases the operands listed (temporaries). */
static kiln_tensor *drop2(kiln_tensor *r, kiln_tensor *t1, kiln_tensor *t2) {
  kiln_release(t1);
  kiln_release(t2);
  return r;
}

/* y = sigmoid(x*a + b) * tanh(x) + 0.5*x*x with no scope open; a new
 * reference or NULL. */
static kiln_tensor *ew_chain(kiln_tensor *x, kiln_tensor *a, kiln_tensor *b) {
  kiln_tensor *t = kiln_mul(x, a);
  t = t ? drop2(kiln_add(t, b), t, NULL) : NULL;
  t = t ? drop2(kiln_sigmoid(t), t, NULL) : NULL;
  kiln_tensor *th = kiln_tanh(x);
  kiln_tensor *l = t && th ? kiln_mul(t, th) : NULL;
  drop2(NULL, t, th);
  kiln_tensor *h = kiln_mul_scalar(x, 0.5);
  kiln_tensor *r = h ? drop2(kiln_mul(h, x), h, NULL) : NULL;
  kiln_tensor *y = l && r ? kiln_add(l, r) : NULL;
  return drop2(y, l, r);
}

static double run_eager(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_tensor *y = ew_chain(ew_x, ew_a, ew_b);
    if (!y) return bench_fail("elementwise_4m_eager", "the chain");
    kiln_release(y);
  }
  return bench_now() - t0;
}

static double run_lazy(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_tensor *y = ew_chain(ew_x, ew_a, ew_b);
    int rc = y ? kiln_mark_step() : -1;
    kiln_release(y);
    if (rc < 0) return bench_fail("elementwise_4m_lazy", "record + mark_step");
  }
  return bench_now() - t0;
}

static double run_function(int iters) {
  kiln_value in[3] = {{.kind = KILN_VALUE_TENSOR, .t = ew_x},
                      {.kind = KILN_VALUE_TENSOR, .t = ew_a},
                      {.kind = KILN_VALUE_TENSOR, .t = ew_b}},
             out[1];
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    int n = kiln_function_call(ew_f, in, 3, out, 1);
    kiln_scope_end();
    if (n != 1) return bench_fail("elementwise (jit)", "kiln_function_call");
  }
  return bench_now() - t0;
}

#define EW_BYTES (2.0 * sizeof(float) * EW_N) /* read x, write y */

static const bench_workload ew[] = {
    {"elementwise_4m_eager", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_eager, run_eager, teardown_ew},
    {"elementwise_4m_jit", "ms", BENCH_TIME, 1e3, 0, 4, 0, setup_jit, run_function, teardown_ew},
    {"elementwise_4m_lazy", "ms", BENCH_TIME, 1e3, 0, 3, 0, setup_lazy, run_lazy, teardown_ew},
    {"elementwise_arith_4m", "GB/s", BENCH_RATE, 1e-9, EW_BYTES, 4, 0, setup_arith, run_function,
     teardown_ew},
};

const bench_workload *bench_ew_workloads(int *n) {
  *n = (int)(sizeof ew / sizeof *ew);
  return ew;
}
