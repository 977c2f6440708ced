/* tests/exec/test_exec_oom_sweep.c: allocation-failure sweep of the
 * profiling executor (issue #20). A small MLP graph with requires-grad
 * weights goes through kiln_function_new, a profiling call and its
 * backward, then an optimized call (a DifferentiableGraph with a fused
 * group) and its backward, with the Nth allocation failing, for every N:
 * each call succeeds with the values of a run that never failed or fails
 * with an error; after a failure, calls on the same function (grads reset)
 * give exactly the reference's values. Under `make test SAN=1` ASan checks
 * every point for use-after-free and leaks. SWEEP_K=N in the environment
 * starts the sweep at N (to debug one point). */
#include <math.h>
#include <stdlib.h>

#include "core/core.h"
#include "test.h"

static const char *MLP = "graph(%x : Tensor,\n"
                         "      %w1 : Tensor,\n"
                         "      %b1 : Tensor,\n"
                         "      %w2 : Tensor,\n"
                         "      %b2 : Tensor):\n"
                         "  %one : int = prim::Constant[value=1]()\n"
                         "  %h0 : Tensor = aten::matmul(%x, %w1)\n"
                         "  %h1 : Tensor = aten::add(%h0, %b1, %one)\n"
                         "  %h2 : Tensor = aten::relu(%h1)\n"
                         "  %o0 : Tensor = aten::matmul(%h2, %w2)\n"
                         "  %o1 : Tensor = aten::add(%o0, %b2, %one)\n"
                         "  %o2 : Tensor = aten::tanh(%o1)\n"
                         "  %o3 : Tensor = aten::mul(%o2, %o2)\n"
                         "  return (%o3)\n";

#define N_W 4
#define N_CALLS 2

typedef struct run_vals {
  double v[N_CALLS][1024];
  int n[N_CALLS];
} run_vals;

static kiln_value T(kiln_tensor *t) { return (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t}; }

/* out's values then each weight's grad (NaN: none) appended to v. */
static int flatten(kiln_tensor *out, kiln_tensor *const *w, double *v) {
  int k = 0;
  for (int64_t i = 0; i < kiln_tensor_numel(out); i++) v[k++] = core_get_flat(out, i);
  for (int j = 0; j < N_W; j++) {
    kiln_tensor *g = kiln_tensor_grad(w[j]);
    for (int64_t i = 0; i < kiln_tensor_numel(w[j]); i++) v[k++] = g ? core_get_flat(g, i) : NAN;
  }
  return k;
}

/* One call and the backward of sum(out); 0 or the failed status. */
static int call_once(kiln_function *f, kiln_tensor *x, kiln_tensor *const *w, double *v, int *n) {
  kiln_scope_begin();
  for (int j = 0; j < N_W; j++) kiln_tensor_set_grad(w[j], NULL);
  kiln_value in[5] = {T(x), T(w[0]), T(w[1]), T(w[2]), T(w[3])}, out[1] = {{0}};
  int rc = kiln_function_call(f, in, 5, out, 1) == 1 ? 0 : -1;
  if (rc == 0 && out[0].kind != KILN_VALUE_TENSOR) rc = -1;
  kiln_tensor *s = rc == 0 ? kiln_sum(out[0].t, NULL, 0, false) : NULL;
  if (rc == 0) rc = s ? kiln_backward(s, NULL) : -1;
  if (rc == 0) *n = flatten(out[0].t, w, v);
  kiln_scope_end();
  return rc < 0 ? rc : 0;
}

static bool close_to(const double *a, const double *b, int n) {
  for (int i = 0; i < n; i++)
    if (!(fabs(a[i] - b[i]) <= 1e-5 * (1 + fabs(b[i])) || (isnan(a[i]) && isnan(b[i]))))
      return false;
  return true;
}

TEST(oom_sweep_profiling_executor_mlp) {
  kiln_generator *gen = kiln_generator_new(7);
  kiln_scope_begin();
  int64_t sx[2] = {4, 6}, s1[2] = {6, 8}, s2[2] = {8, 3}, n1 = 8, n2 = 3;
  kiln_tensor *x = kiln_keep(kiln_randn(2, sx, KILN_DTYPE_F32, gen)), *w[N_W];
  w[0] = kiln_keep(kiln_randn(2, s1, KILN_DTYPE_F32, gen));
  w[1] = kiln_keep(kiln_randn(1, &n1, KILN_DTYPE_F32, gen));
  w[2] = kiln_keep(kiln_randn(2, s2, KILN_DTYPE_F32, gen));
  w[3] = kiln_keep(kiln_randn(1, &n2, KILN_DTYPE_F32, gen));
  for (int j = 0; j < N_W; j++) kiln_set_requires_grad(w[j], true);
  kiln_scope_end();
  kiln_graph *g = kiln_graph_parse(MLP, strlen(MLP));
  CHECK_MSG(g, "parse: %s", kiln_last_error());
  /* the reference: calls that never failed */
  static run_vals ref, got;
  kiln_function *f = kiln_function_new(g);
  CHECK(f);
  for (int c = 0; f && c < N_CALLS; c++) CHECK(call_once(f, x, w, ref.v[c], &ref.n[c]) == 0);
  kiln_function_stats st;
  kiln_function_get_stats(f, &st);
  CHECK_EQ_INT(st.profiling_runs, 1);
  CHECK_EQ_INT(st.optimizations, 1);
  kiln_function_free(f);
  int hit = 0, failed = 0, retried = 0;
  for (long k = getenv("SWEEP_K") ? atol(getenv("SWEEP_K")) : 1; g && k < 1000000; k++) {
    core_alloc_fail_at(k);
    int rc = 0, c = 0;
    f = kiln_function_new(g);
    if (!f) rc = -1;
    for (; rc == 0 && c < N_CALLS; c++) rc = call_once(f, x, w, got.v[c], &got.n[c]);
    long made = core_alloc_fail_at(0);
    bool was_hit = made >= k;
    if (rc == 0) {
      for (int i = 0; i < N_CALLS; i++)
        CHECK_MSG(got.n[i] == ref.n[i] && close_to(got.v[i], ref.v[i], ref.n[i]),
                  "allocation %ld %s but call %d succeeded with other values", k,
                  was_hit ? "failed" : "did not fail", i + 1);
    } else {
      failed++;
      CHECK_MSG(was_hit, "allocation %ld: failed without an allocation failure: %s", k,
                kiln_last_error());
      CHECK_MSG(strstr(kiln_last_error(), "out of memory"), "allocation %ld: not said: %s", k,
                kiln_last_error());
      if (f) { /* the same function, called again, gives the reference's values */
        int i;
        for (i = 0; i < N_CALLS; i++) {
          if (call_once(f, x, w, got.v[i], &got.n[i]) < 0) {
            test_fail(__FILE__, __LINE__, "allocation %ld: retry call %d failed: %s", k, i + 1,
                      kiln_last_error());
            break;
          }
          CHECK_MSG(got.n[i] == ref.n[N_CALLS - 1] &&
                        close_to(got.v[i], ref.v[N_CALLS - 1], ref.n[N_CALLS - 1]),
                    "allocation %ld (call %d): retry call %d gave other values", k, c, i + 1);
        }
        retried += i == N_CALLS;
      }
    }
    kiln_function_free(f);
    hit += was_hit;
    if (!was_hit) break;
  }
  test_note("%d failure points, %d failed, %d retried", hit, failed, retried);
  CHECK(hit > 100);
  kiln_graph_free(g);
  kiln_release(x);
  for (int j = 0; j < N_W; j++) kiln_release(w[j]);
  kiln_generator_free(gen);
}
