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

/* The graphs' inputs and constants, and the cell after %gates. */
#define LSTM_HEAD \
    "graph(%x.1 : Tensor,\n" \
    "      %h0.1 : Tensor,\n" \
    "      %c0.1 : Tensor,\n" \
    "      %w_ih.1 : Tensor,\n" \
    "      %w_hh.1 : Tensor,\n" \
    "      %b.1 : Tensor):\n" \
    "  %true : bool = prim::Constant[value=1]()\n" \
    "  %zero : int = prim::Constant[value=0]()\n" \
    "  %one : int = prim::Constant[value=1]()\n" \
    "  %four : int = prim::Constant[value=4]()\n" \
    "  %none : NoneType = prim::Constant()\n"
#define LSTM_CELL \
    "      %chunks : Tensor[] = aten::chunk(%gates, %four, %one)\n" \
    "      %i.1 : Tensor, %f.1 : Tensor, %gg.1 : Tensor, %o.1 : Tensor = prim::ListUnpack(%chunks)\n" \
    "      %i : Tensor = aten::sigmoid(%i.1)\n" \
    "      %f : Tensor = aten::sigmoid(%f.1)\n" \
    "      %gg : Tensor = aten::tanh(%gg.1)\n" \
    "      %o : Tensor = aten::sigmoid(%o.1)\n" \
    "      %fc : Tensor = aten::mul(%f, %c.1)\n" \
    "      %ig : Tensor = aten::mul(%i, %gg)\n" \
    "      %c.2 : Tensor = aten::add(%fc, %ig, %one)\n" \
    "      %tc : Tensor = aten::tanh(%c.2)\n" \
    "      %h.2 : Tensor = aten::mul(%o, %tc)\n" \
    "      -> (%true, %h.2, %c.2)\n" \
    "  return (%h)\n"

static const char *LSTM_LOOP =
    LSTM_HEAD
    "  %T : int = aten::size(%x.1, %zero)\n"
    "  %h : Tensor, %c : Tensor = prim::Loop(%T, %true, %h0.1, %c0.1)\n"
    "    block0(%t : int, %h.1 : Tensor, %c.1 : Tensor):\n"
    "      %xt : Tensor = aten::select(%x.1, %zero, %t)\n"
    "      %g1 : Tensor = aten::linear(%xt, %w_ih.1, %b.1)\n"
    "      %g2 : Tensor = aten::linear(%h.1, %w_hh.1, %none)\n"
    "      %gates : Tensor = aten::add(%g1, %g2, %one)\n"
    LSTM_CELL;

static kiln_tensor *lstm_eager(kiln_tensor *x, kiln_tensor *h, kiln_tensor *c, kiln_tensor *wih,
                               kiln_tensor *whh, kiln_tensor *b) {
  for (int64_t t = 0; t < kiln_tensor_size(x, 0); t++) {
    kiln_tensor *gates = kiln_add(kiln_linear(kiln_select(x, 0, t), wih, b), kiln_linear(h, whh, NULL));
    kiln_tensor *q[4];
    kiln_chunk(gates, 4, 1, q, 4);
    c = kiln_add(kiln_mul(kiln_sigmoid(q[1]), c), kiln_mul(kiln_sigmoid(q[0]), kiln_tanh(q[2])));
    h = kiln_mul(kiln_sigmoid(q[3]), kiln_tanh(c));
  }
  return h;
}

/* The input projection hoisted out of the loop, as nn.LSTM does: one GEMM
 * over all time steps, unbound into per-step views (whose gradients the
 * unbind node stacks back in one piece). */
static const char *LSTM_UNBIND =
    LSTM_HEAD
    "  %xw : Tensor = aten::linear(%x.1, %w_ih.1, %b.1)\n"
    "  %xs : Tensor[] = aten::unbind(%xw, %zero)\n"
    "  %T : int = aten::len(%xs)\n"
    "  %h : Tensor, %c : Tensor = prim::Loop(%T, %true, %h0.1, %c0.1)\n"
    "    block0(%t : int, %h.1 : Tensor, %c.1 : Tensor):\n"
    "      %g1 : Tensor = aten::__getitem__(%xs, %t)\n"
    "      %g2 : Tensor = aten::linear(%h.1, %w_hh.1, %none)\n"
    "      %gates : Tensor = aten::add(%g1, %g2, %one)\n"
    LSTM_CELL;

static void lstm_fast_path(const char *graph) {
  const int64_t NT = 5, B = 2, I = 3, H = 4;
  kiln_scope_begin();
  kiln_function *f = fn_of(graph, NULL);
  kiln_generator *g = kiln_generator_new(6);
  int64_t sx[3] = {NT, B, I}, sh[2] = {B, H}, swi[2] = {4 * H, I}, swh[2] = {4 * H, H}, sb = 4 * H;
  kiln_tensor *x = kiln_randn(3, sx, KILN_DTYPE_F64, g);
  kiln_tensor *h0 = kiln_zeros(2, sh, KILN_DTYPE_F64), *c0 = kiln_zeros(2, sh, KILN_DTYPE_F64);
  kiln_tensor *wih = kiln_mul_scalar(kiln_randn(2, swi, KILN_DTYPE_F64, g), 0.5);
  kiln_tensor *whh = kiln_mul_scalar(kiln_randn(2, swh, KILN_DTYPE_F64, g), 0.5);
  kiln_tensor *b = kiln_mul_scalar(kiln_randn(1, &sb, KILN_DTYPE_F64, g), 0.1);
  kiln_tensor *ps[3] = {wih, whh, b};
  for (int k = 0; k < 3; k++) kiln_set_requires_grad(ps[k], true);
  kiln_value in[6] = {T(x), T(h0), T(c0), T(wih), T(whh), T(b)}, out[1];
  kiln_function_stats st;
  for (int call = 1; call <= 4 && f; call++) {
    for (int k = 0; k < 3; k++) kiln_tensor_set_grad(ps[k], NULL);
    CHECK_MSG(kiln_function_call(f, in, 6, out, 1) == 1, "%s", kiln_last_error());
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    if (call == 2) {
      kiln_function_get_stats(f, &st);
      CHECK_EQ_INT(st.optimizations, 1);
    }
  }
  if (f) {
    kiln_function_get_stats(f, &st);
    CHECK_EQ_INT(st.fallback_calls, 0);
    CHECK_EQ_INT(st.guard_failures, 0);
    CHECK_MSG(st.guard_passes == 3 * NT, "guard passes %lld", (long long)st.guard_passes);
    char *text = kiln_function_last_optimized_graph(f);
    CHECK_STR_CONTAINS(text, "prim::Loop");
    CHECK_STR_CONTAINS(text, "prim::DifferentiableGraph_0");
    kiln_free(text);
    kiln_tensor *E[3];
    for (int k = 0; k < 3; k++) {
      E[k] = kiln_detach(ps[k]);
      kiln_set_requires_grad(E[k], true);
    }
    kiln_tensor *loss = kiln_sum(lstm_eager(x, h0, c0, E[0], E[1], E[2]), NULL, 0, false);
    kiln_tensor *ge[3];
    CHECK(kiln_grad(&loss, NULL, 1, E, 3, NULL, ge) == KILN_OK);
    check_close(out[0].t, lstm_eager(x, h0, c0, wih, whh, b), 1e-12, "h");
    for (int k = 0; k < 3; k++) check_close(kiln_tensor_grad(ps[k]), ge[k], 1e-10, "grad");
    /* a different number of time steps: nothing was specialized to T */
    int64_t sx2[3] = {NT + 2, B, I};
    kiln_tensor *x2 = kiln_randn(3, sx2, KILN_DTYPE_F64, g);
    in[0] = T(x2);
    CHECK(kiln_function_call(f, in, 6, out, 1) == 1);
    check_close(out[0].t, lstm_eager(x2, h0, c0, wih, whh, b), 1e-12, "h with T+2 steps");
  }
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(profiling_lstm_loop_stays_on_the_fast_path) { lstm_fast_path(LSTM_LOOP); }
TEST(profiling_lstm_unbind_loop_stays_on_the_fast_path) { lstm_fast_path(LSTM_UNBIND); }

static const char *BRANCH =
    "graph(%x : Tensor,\n"
    "      %w : Tensor,\n"
    "      %flag : bool):\n"
    "  %one : int = prim::Constant[value=1]()\n"
    "  %two : float = prim::Constant[value=2.]()\n"
    "  %y : Tensor = prim::If(%flag)\n"
    "    block0():\n"
    "      %a : Tensor = aten::mul(%x, %w)\n"
    "      %a2 : Tensor = aten::sigmoid(%a)\n"
    "      -> (%a2)\n"
    "    block1():\n"
    "      %b : Tensor = aten::sub(%x, %w, %one)\n"
    "      %b2 : Tensor = aten::mul(%b, %two)\n"
    "      %b3 : Tensor = aten::tanh(%b2)\n"
    "      -> (%b3)\n"
    "  %z : Tensor = aten::mul(%y, %w)\n"
    "  %z2 : Tensor = aten::exp(%z)\n"
    "  return (%z2)\n";

TEST(profiling_untaken_branch) {
  kiln_scope_begin();
  kiln_function *f = fn_of(BRANCH, NULL);
  int64_t n = 3;
  double xv[3] = {0.5, -1, 2}, wv[3] = {1.5, 0.25, -0.5};
  kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_F64), *w = kiln_from_data(wv, 1, &n, KILN_DTYPE_F64);
  kiln_set_requires_grad(w, true);
  kiln_value in[3] = {T(x), T(w), {.kind = KILN_VALUE_BOOL, .b = true}}, out[1];
  for (int call = 0; call < 3 && f; call++) CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
  if (f) {
    char *text = kiln_function_last_optimized_graph(f);
    /* the top-level mul+exp forms a subgraph although the else-branch was
     * never profiled; that branch's subgraph has unseen inputs, unguarded */
    CHECK_STR_CONTAINS(text, "prim::DifferentiableGraph_");
    kiln_free(text);
    /* take the other branch now */
    in[2].b = false;
    kiln_tensor_set_grad(w, NULL);
    CHECK_MSG(kiln_function_call(f, in, 3, out, 1) == 1, "%s", kiln_last_error());
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    kiln_tensor *we = kiln_detach(w);
    kiln_set_requires_grad(we, true);
    kiln_tensor *ye = kiln_exp(kiln_mul(kiln_tanh(kiln_mul_scalar(kiln_sub(x, we), 2.0)), we));
    check_close(out[0].t, ye, 1e-12, "else-branch output");
    kiln_tensor *ge;
    kiln_tensor *s = kiln_sum(ye, NULL, 0, false);
    CHECK(kiln_grad(&s, NULL, 1, &we, 1, NULL, &ge) == KILN_OK);
    check_close(kiln_tensor_grad(w), ge, 1e-10, "else-branch grad");
  }
  kiln_function_free(f);
  kiln_scope_end();
}

static const char *SCALE = "graph(%x : Tensor,\n"
                           "      %s : Scalar):\n"
                           "  %2 : Tensor = aten::mul(%x, %s)\n"
                           "  %3 : Tensor = aten::relu(%2)\n"
                           "  return (%3)\n";

TEST(profiling_int_scalar_then_float) {
  kiln_scope_begin();
  kiln_function *f = fn_of(SCALE, NULL);
  int64_t n = 3, xv[3] = {1, -2, 3};
  kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_I64);
  kiln_value in[2] = {T(x), {.kind = KILN_VALUE_INT, .i = 2}}, out[1];
  for (int call = 0; call < 3 && f; call++) CHECK(kiln_function_call(f, in, 2, out, 1) == 1);
  if (f) {
    CHECK(kiln_tensor_dtype(out[0].t) == KILN_DTYPE_I64); /* Long * int = Long */
    in[1] = (kiln_value){.kind = KILN_VALUE_FLOAT, .f = 1.5};
    CHECK(kiln_function_call(f, in, 2, out, 1) == 1);
    CHECK(kiln_tensor_dtype(out[0].t) == KILN_DTYPE_F32); /* Long * float = Float (PyTorch) */
    double v;
    kiln_item(kiln_select(out[0].t, 0, 2), &v);
    CHECK_NEAR(v, 4.5, 1e-6);
  }
  kiln_function_free(f);
  kiln_scope_end();
}

TEST(profiling_changing_shapes_is_bounded) {
  kiln_scope_begin();
  kiln_function_options o;
  kiln_function_options_default(&o);
  o.bailout_depth = 3;
  kiln_function *f = fn_of(TANH_LINEAR, &o);
  kiln_generator *g = kiln_generator_new(8);
  int64_t sw[2] = {3, 5}, sb = 5;
  kiln_tensor *w = kiln_randn(2, sw, KILN_DTYPE_F32, g), *b = kiln_randn(1, &sb, KILN_DTYPE_F32, g);
  kiln_set_requires_grad(w, true);
  for (int call = 0; call < 12 && f; call++) {
    int64_t sx[2] = {1 + call, 3};
    kiln_tensor *x = kiln_randn(2, sx, KILN_DTYPE_F32, g);
    kiln_value in[3] = {T(x), T(w), T(b)}, out[1];
    kiln_tensor_set_grad(w, NULL);
    CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    kiln_tensor *gw, *gb;
    eager_grads(x, w, b, &gw, &gb);
    check_close(kiln_tensor_grad(w), gw, 1e-4, "dw");
  }
  if (f) {
    kiln_function_stats st;
    kiln_function_get_stats(f, &st);
    CHECK(st.optimizations <= o.bailout_depth + 1);
  }
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Regression: a reshape whose size list is built at run time (from
 * aten::size) must stay outside a DifferentiableGraph: its list is not a
 * tensor input. It once joined and failed with "input 1 is not a tensor". */
TEST(profiling_runtime_size_list_stays_outside) {
  static const char *text = "graph(%x : Tensor,\n"
                            "      %w : Tensor):\n"
                            "  %zero : int = prim::Constant[value=0]()\n"
                            "  %m1 : int = prim::Constant[value=-1]()\n"
                            "  %h : Tensor = aten::mm(%x, %w)\n"
                            "  %h2 : Tensor = aten::relu(%h)\n"
                            "  %n : int = aten::size(%h2, %zero)\n"
                            "  %l : int[] = prim::ListConstruct(%n, %m1)\n"
                            "  %r : Tensor = aten::reshape(%h2, %l)\n"
                            "  %y : Tensor = aten::tanh(%r)\n"
                            "  %z : Tensor = aten::sigmoid(%y)\n"
                            "  return (%z)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text, NULL);
  kiln_generator *g = kiln_generator_new(9);
  kiln_tensor *x = kiln_randn(2, (int64_t[]){4, 3}, KILN_DTYPE_F64, g);
  kiln_tensor *w = kiln_randn(2, (int64_t[]){3, 2}, KILN_DTYPE_F64, g);
  kiln_set_requires_grad(w, true);
  kiln_value in[2] = {T(x), T(w)}, out[1];
  for (int call = 0; call < 3 && f; call++) {
    CHECK_MSG(kiln_function_call(f, in, 2, out, 1) == 1, "%s", kiln_last_error());
    kiln_tensor *want = kiln_sigmoid(kiln_tanh(kiln_relu(kiln_mm(x, w))));
    check_close(out[0].t, want, 1e-12, "output");
  }
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Regression (DenseNet's feature list): a list of tensors made among
 * differentiable nodes, read by a cat there and appended to after them,
 * must not leave the DifferentiableGraph as an output (it failed with
 * "differentiate: output 0 is not a tensor"): the reader outside gets its
 * own ListConstruct. */
TEST(profiling_list_read_after_the_group) {
  static const char *text = "graph(%x : Tensor,\n"
                            "      %w : Tensor):\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %h : Tensor = aten::mm(%x, %w)\n"
                            "  %h2 : Tensor = aten::relu(%h)\n"
                            "  %l : Tensor[] = prim::ListConstruct(%h, %h2)\n"
                            "  %c : Tensor = aten::cat(%l, %one)\n"
                            "  %y : Tensor = aten::tanh(%c)\n"
                            "  %l2 : Tensor[] = aten::append(%l, %y)\n"
                            "  %z : Tensor = aten::cat(%l, %one)\n"
                            "  return (%z)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text, NULL);
  kiln_generator *g = kiln_generator_new(9);
  kiln_tensor *x = kiln_randn(2, (int64_t[]){4, 3}, KILN_DTYPE_F64, g);
  kiln_tensor *w = kiln_randn(2, (int64_t[]){3, 2}, KILN_DTYPE_F64, g);
  kiln_set_requires_grad(w, true);
  kiln_value in[2] = {T(x), T(w)}, out[1];
  for (int call = 0; call < 3 && f; call++) {
    int k = kiln_function_call(f, in, 2, out, 1);
    CHECK_MSG(k == 1, "%s", kiln_last_error());
    if (k != 1) break;
    kiln_tensor *h = kiln_mm(x, w), *h2 = kiln_relu(h);
    kiln_tensor *y = kiln_tanh(kiln_cat((kiln_tensor *[]){h, h2}, 2, 1));
    kiln_tensor *want = kiln_cat((kiln_tensor *[]){h, h2, y}, 3, 1);
    check_close(out[0].t, want, 1e-12, "output");
  }
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* A graph that returns its input (eval-mode dropout, then * 1 which the
 * peepholes fold): the optimized function must give back x without
 * rewriting x's history (x stays a leaf), and backward through the output
 * reaches x.grad once per call. Found by fuzz/fuzz_run.c (a reference
 * cycle: x's grad_fn was the DifferentiableGraph's node, which saved x). */
TEST(profiling_output_is_the_input) {
  static const char *text = "graph(%x.1 : Tensor):\n"
                            "  %3 : bool = prim::Constant[value=0]()\n"
                            "  %2 : float = prim::Constant[value=1.]()\n"
                            "  %4 : Tensor = aten::dropout(%x.1, %2, %3)\n"
                            "  %6 : Tensor = aten::mul(%4, %2)\n"
                            "  return (%6)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text, NULL);
  int64_t shape[2] = {2, 3};
  kiln_tensor *x = kiln_ones(2, shape, KILN_DTYPE_F32);
  kiln_set_requires_grad(x, true);
  kiln_value in[1] = {T(x)}, out[1];
  for (int call = 1; call <= 3 && f; call++) {
    CHECK_MSG(kiln_function_call(f, in, 1, out, 1) == 1, "call %d: %s", call, kiln_last_error());
    CHECK_MSG(kiln_is_leaf(x), "call %d: x is no longer a leaf", call);
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    kiln_tensor *gx = kiln_tensor_grad(x);
    CHECK_MSG(gx && ((const float *)kiln_tensor_data(gx))[0] == call, "call %d: x.grad %g", call,
              gx ? ((const float *)kiln_tensor_data(gx))[0] : -1.0);
  }
  kiln_function_free(f);
  kiln_scope_end();
}
