/* tests/exec/test_randgraph_findings.c: regression tests for what the
 * random-graph differential fuzzer (fuzz/fuzz_exec.c, the property test
 * in test_randgraph.c) found: each is a small graph whose jit result
 * differed from eager, with the values checked by hand. */
#include "test.h"

#include "kiln.h"
#include "ops/op.h"

static kiln_value T(kiln_tensor *t) { return (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t}; }

/* A DifferentiableGraph gave every output a grad_fn when any input
 * required grad: here y = leaky_relu(a) came out requires_grad although
 * only b requires grad (eager: y does not), so backward from y "worked". */
TEST(randgraph_diffgraph_output_without_grad_input_does_not_require_grad) {
  static const char *text = "graph(%a : Tensor, %b : Tensor):\n"
                            "  %c : float = prim::Constant[value=0.25]()\n"
                            "  %y : Tensor = aten::leaky_relu(%a, %c)\n"
                            "  %z : Tensor = aten::tanh(%b)\n"
                            "  %w : Tensor = aten::mul(%z, %b)\n"
                            "  return (%y, %w)\n";
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  float av[2] = {-2, 4}, bv[2] = {0, 0.5f};
  int64_t shape[1] = {2};
  for (int call = 0; f && call < 3; call++) { /* profiling, optimizing, optimized */
    kiln_scope_begin();
    kiln_tensor *a = kiln_from_data(av, 1, shape, KILN_DTYPE_F32);
    kiln_tensor *b = kiln_from_data(bv, 1, shape, KILN_DTYPE_F32);
    kiln_set_requires_grad(b, true);
    kiln_value in[2] = {T(a), T(b)}, out[2];
    CHECK_EQ_INT(kiln_function_call(f, in, 2, out, 2), 2);
    float y[2] = {0};
    kiln_tensor_copy_to(out[0].t, y, KILN_DTYPE_F32);
    CHECK_NEAR(y[0], -0.5, 0);
    CHECK_NEAR(y[1], 4, 0);
    CHECK_MSG(!kiln_requires_grad(out[0].t), "call %d: y requires grad", call + 1);
    CHECK_MSG(kiln_requires_grad(out[1].t), "call %d: w does not require grad", call + 1);
    kiln_tensor *ly = kiln_sum(out[0].t, NULL, 0, false);
    CHECK(kiln_backward(ly, NULL) < 0); /* as eager: y has no grad_fn */
    /* d/db sum(tanh(b) * b) = tanh(b) + b (1 - tanh(b)^2) */
    CHECK(kiln_backward(kiln_sum(out[1].t, NULL, 0, false), NULL) == 0);
    float gb[2] = {0};
    kiln_tensor_copy_to(kiln_tensor_grad(b), gb, KILN_DTYPE_F32);
    double t = tanh(0.5);
    CHECK_NEAR(gb[0], 0, 1e-6);
    CHECK_NEAR(gb[1], t + 0.5 * (1 - t * t), 1e-5);
    kiln_scope_end();
  }
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}

/* Functionalization turned sigmoid_ of a bool tensor into sigmoid, whose
 * float result cannot be written into bool self: eager refuses it, the
 * profiling call refused it, and the optimized call 2 ran it. */
TEST(randgraph_inplace_float_op_on_bool_fails_in_every_call) {
  static const char *text = "graph(%x : Tensor):\n"
                            "  %y : Tensor = aten::logical_not(%x)\n"
                            "  %z : Tensor = aten::sigmoid_(%y)\n"
                            "  return (%z)\n";
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  bool xv[3] = {true, false, true};
  int64_t shape[1] = {3};
  kiln_tensor *x = kiln_from_data(xv, 1, shape, KILN_DTYPE_BOOL);
  for (int call = 0; f && call < 3; call++) {
    kiln_value in[1] = {T(x)}, out[1];
    kiln_clear_error();
    CHECK_MSG(kiln_function_call(f, in, 1, out, 1) < 0, "call %d ran", call + 1);
    CHECK_STR_CONTAINS(kiln_last_error(), "can't be cast");
  }
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}

/* A DifferentiableGraph output made from an input that requires grad
 * through a bool value (to(to(x * w, bool), float)) came out requires_grad
 * after the optimizing call (fuzz_exec), while eager's does not: a bool
 * tensor cannot require grad, so nothing after it does either. */
TEST(randgraph_diffgraph_output_through_a_bool_value_does_not_require_grad) {
  static const char *text = "graph(%x : Tensor, %w : Tensor):\n"
                            "  %b : int = prim::Constant[value=11]()\n"
                            "  %f : int = prim::Constant[value=6]()\n"
                            "  %no : bool = prim::Constant[value=0]()\n"
                            "  %none : NoneType = prim::Constant()\n"
                            "  %m : Tensor = aten::mul(%x, %w)\n"
                            "  %t : Tensor = aten::to(%m, %b, %no, %no, %none)\n"
                            "  %y : Tensor = aten::to(%t, %f, %no, %no, %none)\n"
                            "  %z : Tensor = aten::mul(%m, %m)\n"
                            "  return (%y, %z)\n";
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  float xv[3] = {0, 2, -1}, wv[3] = {1, 0.5f, 2};
  int64_t shape[1] = {3};
  for (int call = 0; f && call < 3; call++) { /* profiling, optimizing, optimized */
    kiln_scope_begin();
    kiln_tensor *x = kiln_from_data(xv, 1, shape, KILN_DTYPE_F32);
    kiln_tensor *w = kiln_from_data(wv, 1, shape, KILN_DTYPE_F32);
    kiln_set_requires_grad(x, true);
    kiln_value in[2] = {T(x), T(w)}, out[2];
    CHECK_EQ_INT(kiln_function_call(f, in, 2, out, 2), 2);
    float y[3] = {0}, z[3] = {0};
    kiln_tensor_copy_to(out[0].t, y, KILN_DTYPE_F32);
    kiln_tensor_copy_to(out[1].t, z, KILN_DTYPE_F32);
    CHECK_NEAR(y[0], 0, 0); /* x * w = 0, 1, -2: nonzero is true */
    CHECK_NEAR(y[1], 1, 0);
    CHECK_NEAR(y[2], 1, 0);
    CHECK_NEAR(z[2], 4, 0);
    CHECK_MSG(!kiln_requires_grad(out[0].t), "call %d: y requires grad", call + 1);
    CHECK_MSG(kiln_requires_grad(out[1].t), "call %d: z does not require grad", call + 1);
    kiln_scope_end();
  }
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}

/* u = t.add_(b) (kept in place: b is bool), then t.relu_() made
 * functional, then u.sigmoid_(): u is t's memory, so r (t after relu_)
 * sees sigmoid_'s write. Functionalization turned relu_ into relu and
 * redirected t's later uses only, so the optimized call returned relu's
 * value without sigmoid (fuzz_exec, once a value could be written twice). */
TEST(randgraph_functionalize_keeps_a_write_through_an_earlier_alias) {
  static const char *text = "graph(%x : Tensor, %b : Tensor):\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %t : Tensor = aten::neg(%x)\n"
                            "  %m : Tensor = aten::ne(%b, %x)\n"
                            "  %u : Tensor = aten::add_(%t, %m, %one)\n"
                            "  %r : Tensor = aten::relu_(%t)\n"
                            "  %s : Tensor = aten::sigmoid_(%u)\n"
                            "  return (%r)\n";
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  float xv[2] = {-1, 0.5f}, bv[2] = {0, 0.5f};
  int64_t shape[1] = {2};
  for (int call = 0; f && call < 4; call++) { /* profiling, optimizing, optimized, no grad */
    kiln_scope_begin();
    kiln_tensor *x = kiln_from_data(xv, 1, shape, KILN_DTYPE_F32);
    kiln_tensor *b = kiln_from_data(bv, 1, shape, KILN_DTYPE_F32);
    if (call < 3) kiln_set_requires_grad(x, true);
    kiln_value in[2] = {T(x), T(b)}, out[1];
    CHECK_EQ_INT(kiln_function_call(f, in, 2, out, 1), 1);
    float r[2] = {0};
    kiln_tensor_copy_to(out[0].t, r, KILN_DTYPE_F32);
    /* t = -x + (b != x) = [2, -0.5]; relu: [2, 0]; sigmoid: */
    CHECK_MSG(fabs(r[0] - 1 / (1 + exp(-2.0))) < 1e-6, "call %d: r[0] %g", call + 1, r[0]);
    CHECK_MSG(fabs(r[1] - 0.5) < 1e-6, "call %d: r[1] %g", call + 1, r[1]);
    kiln_scope_end();
  }
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}

/* relu_ of an expand that repeats an element (t [1] expanded to [3]): eager
 * wrote it (three elements, one memory location), lazy refused it; now
 * eager and every jit call refuse it with PyTorch's message, while fill_
 * and zero_, which PyTorch allows there, still write the one element. */
TEST(randgraph_inplace_write_to_a_repeating_expand_fails_in_every_mode) {
  static const char *text = "graph(%x : Tensor):\n"
                            "  %three : int = prim::Constant[value=3]()\n"
                            "  %s : int[] = prim::ListConstruct(%three)\n"
                            "  %no : bool = prim::Constant[value=0]()\n"
                            "  %t : Tensor = aten::neg(%x)\n"
                            "  %e : Tensor = aten::expand(%t, %s, %no)\n"
                            "  %y : Tensor = aten::relu_(%e)\n"
                            "  return (%y)\n";
  static const char *overlap = "more than one element of the written-to tensor refers to a single memory location";
  kiln_scope_begin();
  float xv[1] = {-2};
  int64_t one[1] = {1}, three[1] = {3};
  kiln_tensor *x = kiln_from_data(xv, 1, one, KILN_DTYPE_F32);
  kiln_tensor *e = kiln_expand(kiln_neg(x), 1, three);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(e)}, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), overlap);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_FILL), (op_val[]){OPV_T(e), OPV_F(5)}, 2) == e);
  float ev[3] = {0};
  kiln_tensor_copy_to(e, ev, KILN_DTYPE_F32);
  CHECK_NEAR(ev[0], 5, 0);
  CHECK_NEAR(ev[2], 5, 0);
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  for (int call = 0; f && call < 3; call++) {
    kiln_value in[1] = {T(x)}, out[1];
    kiln_clear_error();
    CHECK_MSG(kiln_function_call(f, in, 1, out, 1) < 0, "call %d ran", call + 1);
    CHECK_STR_CONTAINS(kiln_last_error(), overlap);
  }
  kiln_tensor *lx = kiln_to_lazy(x);
  kiln_tensor *le = kiln_expand(kiln_neg(lx), 1, three);
  kiln_clear_error();
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(le)}, 1) == NULL);
  CHECK(kiln_last_error()[0] != 0);
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}

/* t.to(float) of a float t is t itself; zero_ through it wrote t in eager
 * mode, and lazy recording refused it (a write through a lazy view made by
 * aten::to): now lazy rebinds t too, and both read zeros. */
TEST(randgraph_lazy_write_through_a_same_dtype_to_writes_its_base) {
  kiln_scope_begin();
  float xv[2] = {1, -2};
  int64_t shape[1] = {2};
  for (int lazy = 0; lazy < 2; lazy++) {
    kiln_tensor *x = kiln_from_data(xv, 1, shape, KILN_DTYPE_F32);
    if (lazy) x = kiln_to_lazy(x);
    kiln_tensor *t = kiln_neg(x);
    kiln_tensor *v = kiln_to_dtype(t, KILN_DTYPE_F32);
    kiln_tensor *z = op_call1(KILN_OP_INPLACE(KILN_OP_ZERO), (op_val[]){OPV_T(v)}, 1);
    CHECK_MSG(z == v, "lazy %d: %s", lazy, kiln_last_error());
    kiln_tensor *s = kiln_add(t, kiln_scalar(3.0, KILN_DTYPE_F32)); /* t read after the write */
    if (lazy) CHECK(kiln_mark_step() == 0);
    float tv[2] = {9, 9}, sv[2] = {9, 9};
    kiln_tensor *tc = lazy ? kiln_to_cpu(t) : t, *sc = lazy && s ? kiln_to_cpu(s) : s;
    CHECK(tc && kiln_tensor_copy_to(tc, tv, KILN_DTYPE_F32) == 0);
    CHECK(sc && kiln_tensor_copy_to(sc, sv, KILN_DTYPE_F32) == 0);
    CHECK_MSG(tv[0] == 0 && tv[1] == 0, "lazy %d: t = %g %g", lazy, tv[0], tv[1]);
    CHECK_MSG(sv[0] == 3 && sv[1] == 3, "lazy %d: t + 3 = %g %g", lazy, sv[0], sv[1]);
  }
  kiln_scope_end();
}

/* b = x * 2 (x needs no grad), b[1].mul_(w) with w requiring grad: the jit
 * ran it and eager refused it, with the CopySlices message calling the
 * view one of "a tensor without history" (the random-graph sweep's seed
 * 29211; fuzz_exec after ~17K runs). Now eager records it as PyTorch:
 * CopySlices on b (Note [Views without history] in src/autograd/views.c).
 * By hand: b = [[2, 4], [30, 48]], y = b * b, d sum(y)/dw = 2 b[1] v_old =
 * 2 [30, 48] [6, 8] = [360, 768], in every mode (lazy too: Note [Lazy
 * views and autograd] in src/lazy/views.c). */
TEST(randgraph_write_to_a_view_without_history_with_grad_as_pytorch) {
  static const char *text = "graph(%x : Tensor, %w : Tensor):\n"
                            "  %two : float = prim::Constant[value=2.]()\n"
                            "  %zero : int = prim::Constant[value=0]()\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %b : Tensor = aten::mul(%x, %two)\n"
                            "  %v : Tensor = aten::select(%b, %zero, %one)\n"
                            "  %u : Tensor = aten::mul_(%v, %w)\n"
                            "  %y : Tensor = aten::mul(%b, %b)\n"
                            "  return (%y)\n";
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  float xv[4] = {1, 2, 3, 4}, wv[2] = {5, 6}, want_y[4] = {4, 16, 900, 2304}, want_g[2] = {360, 768};
  int64_t xs[2] = {2, 2}, ws[1] = {2};
  for (int call = 0; call < 5; call++) { /* eager, jit 1-3, lazy */
    kiln_scope_begin();
    kiln_tensor *x = kiln_from_data(xv, 2, xs, KILN_DTYPE_F32);
    kiln_tensor *w = kiln_from_data(wv, 1, ws, KILN_DTYPE_F32);
    if (call == 4) x = kiln_to_lazy(x), w = kiln_to_lazy(w);
    kiln_set_requires_grad(w, true);
    kiln_tensor *y = NULL;
    kiln_clear_error();
    if (call == 0 || call == 4) {
      kiln_tensor *b = kiln_mul_scalar(x, 2.0), *v = kiln_select(b, 0, 1);
      if (kiln_mul_(v, w) == 0) y = kiln_mul(b, b);
    } else if (f) {
      kiln_value in[2] = {T(x), T(w)}, out[1];
      if (kiln_function_call(f, in, 2, out, 1) == 1) y = out[0].t;
    }
    CHECK_MSG(y != NULL, "call %d: %s", call, kiln_last_error());
    CHECK(y && kiln_backward(kiln_sum(y, NULL, 0, false), NULL) == 0);
    if (call == 4) CHECK(kiln_mark_step() == 0);
    float yv[4] = {0}, gv[2] = {0};
    if (y) kiln_tensor_copy_to(call == 4 ? kiln_to_cpu(y) : y, yv, KILN_DTYPE_F32);
    for (int i = 0; i < 4; i++) CHECK_MSG(yv[i] == want_y[i], "call %d: y[%d] = %g", call, i, yv[i]);
    kiln_tensor *gw = kiln_tensor_grad(w);
    if (gw && call == 4) gw = kiln_to_cpu(gw);
    CHECK_MSG(gw != NULL, "call %d: no gradient of w", call);
    if (gw) kiln_tensor_copy_to(gw, gv, KILN_DTYPE_F32);
    for (int i = 0; i < 2; i++) CHECK_MSG(gv[i] == want_g[i], "call %d: dw[%d] = %g", call, i, gv[i]);
    kiln_scope_end();
  }
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}
