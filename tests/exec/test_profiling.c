/* tests/exec/test_profiling.c: the profiling executor (issue 6): profiling
 * runs, DifferentiableGraphs behind requires-grad guards with fallback
 * functions, only-needed gradients equal to eager ones, eval calls, loops,
 * untaken branches, scalar types, changing shapes. */
#include "test.h"

#include <stdlib.h>

#include "kiln.h"

static kiln_function *fn_of(const char *text, const kiln_function_options *o) {
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "parse: %s", kiln_last_error());
  if (!g) return NULL;
  kiln_function *f = kiln_function_new_ex(g, o);
  CHECK_MSG(f != NULL, "function: %s", kiln_last_error());
  kiln_graph_free(g);
  return f;
}

static const char *TANH_LINEAR = "graph(%x : Tensor,\n"
                                 "      %w : Tensor,\n"
                                 "      %b : Tensor):\n"
                                 "  %3 : int = prim::Constant[value=1]()\n"
                                 "  %4 : Tensor = aten::matmul(%x, %w)\n"
                                 "  %5 : Tensor = aten::add(%4, %b, %3)\n"
                                 "  %6 : Tensor = aten::tanh(%5)\n"
                                 "  return (%6)\n";

static kiln_value T(kiln_tensor *t) { return (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t}; }

/* grads of sum(tanh(x@w+b)) by eager autograd */
static void eager_grads(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b, kiln_tensor **gw,
                        kiln_tensor **gb) {
  kiln_tensor *we = kiln_detach(w), *be = kiln_detach(b);
  kiln_set_requires_grad(we, true);
  kiln_set_requires_grad(be, true);
  kiln_tensor *y = kiln_sum(kiln_tanh(kiln_add(kiln_matmul(x, we), be)), NULL, 0, false);
  kiln_tensor *ins[2] = {we, be}, *gs[2];
  kiln_grad(&y, NULL, 1, ins, 2, NULL, gs);
  *gw = gs[0];
  *gb = gs[1];
}

static void check_close(kiln_tensor *a, kiln_tensor *b, double tol, const char *what) {
  CHECK_MSG(a && b, "%s: missing", what);
  if (!a || !b) return;
  for (int64_t i = 0; i < kiln_tensor_numel(b); i++) {
    double va, vb;
    kiln_tensor *sa = kiln_select(kiln_reshape(a, 1, (int64_t[]){-1}), 0, i);
    kiln_tensor *sb = kiln_select(kiln_reshape(b, 1, (int64_t[]){-1}), 0, i);
    kiln_item(sa, &va);
    kiln_item(sb, &vb);
    CHECK_MSG(fabs(va - vb) <= tol, "%s[%lld]: %g vs %g", what, (long long)i, va, vb);
  }
}

TEST(profiling_tanh_linear_training_then_eval) {
  kiln_scope_begin();
  kiln_function *f = fn_of(TANH_LINEAR, NULL);
  kiln_generator *g = kiln_generator_new(2);
  int64_t sx[2] = {4, 3}, sw[2] = {3, 5}, sb = 5;
  kiln_tensor *x = kiln_randn(2, sx, KILN_DTYPE_F32, g);
  kiln_tensor *w = kiln_randn(2, sw, KILN_DTYPE_F32, g), *b = kiln_randn(1, &sb, KILN_DTYPE_F32, g);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(b, true);
  kiln_value in[3] = {T(x), T(w), T(b)}, out[1];
  kiln_function_stats st;
  for (int call = 1; call <= 3 && f; call++) {
    kiln_tensor_set_grad(w, NULL);
    kiln_tensor_set_grad(b, NULL);
    CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
    CHECK(kiln_requires_grad(out[0].t));
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    kiln_tensor *gw, *gb;
    eager_grads(x, w, b, &gw, &gb);
    check_close(kiln_tensor_grad(w), gw, 1e-5, "dw");
    check_close(kiln_tensor_grad(b), gb, 1e-5, "db");
  }
  if (!f) goto out;
  kiln_function_get_stats(f, &st);
  CHECK_EQ_INT(st.profiling_runs, 1);
  CHECK_EQ_INT(st.optimizations, 1);
  CHECK_EQ_INT(st.guard_passes, 2);
  CHECK_EQ_INT(st.guard_failures, 0);
  char *text = kiln_function_last_optimized_graph(f);
  CHECK_STR_CONTAINS(text, "prim::RequiresGradCheck");
  CHECK_STR_CONTAINS(text, "prim::If");
  CHECK_STR_CONTAINS(text, "prim::DifferentiableGraph_0");
  CHECK_STR_CONTAINS(text, "prim::FallbackGraph");
  CHECK_STR_CONTAINS(text, "backward (gradients for inputs 1, 2)"); /* w, b: none for x */
  kiln_free(text);
  /* eval: nothing requires grad: the guard fails, the fallback runs */
  kiln_tensor *wd = kiln_detach(w), *bd = kiln_detach(b);
  kiln_value ev[3] = {T(x), T(wd), T(bd)};
  kiln_value o1[1], o2[1];
  CHECK(kiln_function_call(f, ev, 3, o1, 1) == 1);
  CHECK(kiln_function_call(f, ev, 3, o2, 1) == 1);
  CHECK(kiln_function_call(f, ev, 3, o2, 1) == 1);
  CHECK(!kiln_requires_grad(o2[0].t));
  check_close(o2[0].t, out[0].t, 1e-6, "eval output");
  kiln_function_get_stats(f, &st);
  CHECK_EQ_INT(st.guard_failures, 3);
  CHECK_EQ_INT(st.fallback_calls, 3);
  CHECK_EQ_INT(st.optimizations, 2); /* the fallback optimized once, on its own */
  CHECK(kiln_function_n_guard_failure_reasons(f) == 3);
  CHECK_STR_CONTAINS(kiln_function_guard_failure_reason(f, 0), "no input requires grad");
  text = kiln_function_last_optimized_graph(f);
  CHECK_STR_CONTAINS(text, "fallback function");
  kiln_free(text);
  /* no_grad: the guard fails too, and outputs never require grad */
  kiln_no_grad_begin();
  CHECK(kiln_function_call(f, in, 3, o1, 1) == 1);
  kiln_no_grad_end();
  CHECK(!kiln_requires_grad(o1[0].t));
  /* back to training: the guard passes again, no new optimization */
  CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
  kiln_function_get_stats(f, &st);
  CHECK_EQ_INT(st.optimizations, 2);
  CHECK_EQ_INT(st.guard_passes, 3);
out:
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}
