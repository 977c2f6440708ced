/* tests/passes/test_mutation.c: graphs that write tensors in place
 * (Note [Alias analysis]): passes keep what a write means — dead-code
 * elimination keeps a write to an input, CSE does not merge reads across a
 * write, in-place ops in eval mode run — in the interpreter (--runs 1) and
 * the optimized plan (--runs 5). Expected values are PyTorch 1.13's. */
#include "harness.h"

static kiln_function *fn_of(const char *text) {
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "parse: %s", kiln_last_error());
  if (!g) return NULL;
  kiln_function *f = kiln_function_new(g);
  CHECK_MSG(f != NULL, "function: %s", kiln_last_error());
  kiln_graph_free(g);
  return f;
}

static kiln_tensor *vec(const float *v, int64_t n) {
  return kiln_from_data(v, 1, &n, KILN_DTYPE_F32);
}

/* Calls a fresh function on fresh copies of the inputs `runs` times (the
 * inputs made anew each call) and checks output 0 of the last call. */
static void expect_out(const char *what, const char *text, const float *const *ins, int n_in,
                       int64_t n, const float *want, int runs) {
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  kiln_value in[4], out[4];
  int k = -1;
  for (int r = 0; r < runs && f; r++) {
    for (int i = 0; i < n_in; i++) in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = vec(ins[i], n)};
    k = kiln_function_call(f, in, n_in, out, 4);
    CHECK_MSG(k >= 1, "%s: call %d: %s", what, r, kiln_last_error());
    if (k < 1) break;
  }
  if (k >= 1) {
    const float *o = kiln_tensor_data(out[0].t);
    for (int64_t i = 0; i < n; i++)
      CHECK_MSG(o[i] == want[i], "%s (runs %d): out[%lld] = %g, want %g", what, runs, (long long)i,
                o[i], want[i]);
  }
  kiln_function_free(f);
  kiln_scope_end();
}

/* Issue #15, reproduction 1: DCE removed the relu_ of a returned input. */
TEST(mutation_dce_keeps_relu__of_returned_input) {
  const char *text = "graph(%x : Tensor):\n"
                     "  %2 : Tensor = aten::relu_(%x)\n"
                     "  return (%x)\n";
  const float x[] = {-1, 2, -3}, want[] = {0, 2, 0};
  for (int runs = 1; runs <= 5; runs += 4)
    expect_out("relu_ dce", text, (const float *const[]){x}, 1, 3, want, runs);
  ir_graph *g = th_parse(text);
  CHECK(g && pass_dce(g) == 0);
  char *t = g ? th_print(g) : NULL;
  CHECK_STR_CONTAINS(t, "aten::relu_(%x)");
  core_free(t);
  ir_graph_free(g);
}

/* Issue #15, reproduction 2: CSE merged %b into %a across the add_. */
TEST(mutation_cse_never_merges_across_add_) {
  const char *text = "graph(%x : Tensor, %y : Tensor):\n"
                     "  %1 : int = prim::Constant[value=1]()\n"
                     "  %a : Tensor = aten::mul(%x, %y)\n"
                     "  %2 : Tensor = aten::add_(%x, %y, %1)\n"
                     "  %b : Tensor = aten::mul(%x, %y)\n"
                     "  %c : Tensor = aten::sub(%b, %a, %1)\n"
                     "  return (%c)\n";
  const float x[] = {1, 2, 3}, y[] = {1, 1, 1}, want[] = {1, 1, 1};
  for (int runs = 1; runs <= 5; runs += 4)
    expect_out("add_ cse", text, (const float *const[]){x, y}, 2, 3, want, runs);
  ir_graph *g = th_parse(text);
  CHECK(g && pass_cse(g) == 0);
  ir_graph_free(g);
}

/* Issue #15, reproduction 3: dropout_ in eval mode called a NULL infer. */
TEST(mutation_dropout__eval_is_identity) {
  const char *text = "graph(%x : Tensor):\n"
                     "  %p : float = prim::Constant[value=0.5]()\n"
                     "  %f : bool = prim::Constant[value=0]()\n"
                     "  %2 : Tensor = aten::dropout_(%x, %p, %f)\n"
                     "  return (%2)\n";
  const float x[] = {-1, 2, -3};
  for (int runs = 1; runs <= 5; runs += 4)
    expect_out("dropout_ eval", text, (const float *const[]){x}, 1, 3, x, runs);
}

/* Note [Alias analysis]: views share their base's set, fresh results do
 * not, graph inputs are external, writers are found from the schemas. */
TEST(mutation_alias_sets_and_moves) {
  ir_graph *g = th_parse("graph(%x : Tensor, %y : Tensor):\n"
                         "  %0 : int = prim::Constant[value=0]()\n"
                         "  %1 : int = prim::Constant[value=1]()\n"
                         "  %t : Tensor = aten::mul(%x, %y)\n"
                         "  %v : Tensor = aten::select(%t, %0, %0)\n"
                         "  %w : Tensor = aten::relu(%t)\n"
                         "  %n : Tensor = aten::neg(%y)\n"
                         "  %u : Tensor = aten::add_(%v, %1, %1)\n"
                         "  %m : Tensor = aten::mul(%t, %n)\n"
                         "  return (%m, %w, %u)\n");
  pass_alias *a = g ? pass_alias_new(g) : NULL;
  CHECK(a != NULL);
  if (a) {
    ir_value *x = ir_graph_find_value(g, "x"), *y = ir_graph_find_value(g, "y");
    ir_value *t = ir_graph_find_value(g, "t"), *v = ir_graph_find_value(g, "v");
    ir_value *w = ir_graph_find_value(g, "w"), *u = ir_graph_find_value(g, "u");
    ir_value *n = ir_graph_find_value(g, "n"), *m = ir_graph_find_value(g, "m");
    CHECK(pass_alias_may_alias(a, t, v) && pass_alias_may_alias(a, v, u));
    CHECK(!pass_alias_may_alias(a, t, w) && !pass_alias_may_alias(a, t, x));
    CHECK(pass_alias_may_alias(a, x, y) && pass_alias_is_external(a, x));
    CHECK(!pass_alias_is_external(a, t));
    CHECK(pass_alias_is_written(a, t) && !pass_alias_is_written(a, w) && !pass_alias_is_written(a, n));
    CHECK(pass_alias_writes(u->node) && !pass_alias_writes(m->node));
    CHECK(pass_alias_input_written(u->node, 0) && !pass_alias_input_written(u->node, 1));
    /* relu reads t: it cannot move below the add_, nor the mul above it;
     * neg(y) can move anywhere after y */
    CHECK(pass_alias_conflict(a, w->node, u->node));
    CHECK(!pass_alias_could_move_before(a, m->node, u->node));
    CHECK(pass_alias_could_move_before(a, n->node, t->node));
    CHECK(!pass_alias_could_move_before(a, m->node, n->node)); /* reads %n */
    CHECK(pass_alias_has_writers(a, w->node) && !pass_alias_has_writers(a, n->node));
  }
  pass_alias_free(a);
  ir_graph_free(g);
}

/* Note [DCE and writes]: a write to a temporary nothing reads goes (with
 * its producer); one a later live node reads stays. */
TEST(mutation_dce_writes_to_temporaries) {
  th_expect("dce dead write", pass_dce,
            "graph(%x : Float(3)):\n"
            "  %t : Float(3) = aten::neg(%x)\n"
            "  %u : Float(3) = aten::relu_(%t)\n"
            "  return (%x)\n",
            "graph(%x : Float(3)):\n"
            "  return (%x)\n",
            2);
  th_expect("dce live write", pass_dce,
            "graph(%x : Float(3)):\n"
            "  %t : Float(3) = aten::neg(%x)\n"
            "  %u : Float(3) = aten::relu_(%t)\n"
            "  %z : Float(3) = aten::exp(%t)\n"
            "  return (%z)\n",
            "graph(%x : Float(3)):\n"
            "  %t : Float(3) = aten::neg(%x)\n"
            "  %u : Float(3) = aten::relu_(%t)\n"
            "  %z : Float(3) = aten::exp(%t)\n"
            "  return (%z)\n",
            0);
}

/* x * 1 -> x would make the relu_ write x: not when y is written */
TEST(mutation_peephole_never_looks_through_a_written_value) {
  const char *text = "graph(%x : Float(3)):\n"
                     "  %1 : int = prim::Constant[value=1]()\n"
                     "  %y : Float(3) = aten::mul(%x, %1)\n"
                     "  %u : Float(3) = aten::relu_(%y)\n"
                     "  return (%x, %y)\n";
  th_expect("peephole written", pass_peephole, text, text, 0);
  const float x[] = {-1, 2, -3};
  for (int runs = 1; runs <= 5; runs += 4)
    expect_out("peephole written", text, (const float *const[]){x}, 1, 3, x, runs);
}

/* Note [Functionalization]: nn.Linear + nn.ReLU(inplace=True) twice; the
 * optimized plan's DifferentiableGraph holds functional relus (pinned). */
TEST(mutation_functionalized_relu__in_differentiable_graph) {
  const char *text = "graph(%x : Tensor, %w : Tensor, %b : Tensor):\n"
                     "  %h : Tensor = aten::linear(%x, %w, %b)\n"
                     "  %r : Tensor = aten::relu_(%h)\n"
                     "  %o : Tensor = aten::linear(%r, %w, %b)\n"
                     "  %s : Tensor = aten::relu_(%o)\n"
                     "  return (%s)\n";
  const char *want =
      "graph(%x : Float(2, 3, requires_grad=0, device=cpu),\n"
      "      %w : Float(3, 3, requires_grad=1, device=cpu),\n"
      "      %b : Float(3, requires_grad=1, device=cpu)):\n"
      "  %18 : Float(2, 3, requires_grad=0, device=cpu), %19 : Float(3, 3, requires_grad=1, "
      "device=cpu), %20 : Float(3, requires_grad=1, device=cpu), %21 : bool = "
      "prim::RequiresGradCheck[types=[Tensor(requires_grad=0), Tensor(requires_grad=1), "
      "Tensor(requires_grad=1)]](%x, %w, %b)\n"
      "  %22 : Float(2, 3, requires_grad=1, device=cpu) = prim::If(%21)\n"
      "    block0():\n"
      "      %24 : Float(2, 3, requires_grad=1, device=cpu) = prim::DifferentiableGraph_0(%18, "
      "%19, %20)\n"
      "      -> (%24)\n"
      "    block1():\n"
      "      %23 : Float(2, 3, requires_grad=1, device=cpu) = prim::FallbackGraph_1(%x, %w, %b)\n"
      "      -> (%23)\n"
      "  return (%22)\n"
      "with prim::DifferentiableGraph_0 = graph(%x : Float(2, 3, requires_grad=0, device=cpu),\n"
      "      %w : Float(3, 3, requires_grad=1, device=cpu),\n"
      "      %b : Float(3, requires_grad=1, device=cpu)):\n"
      "  %h : Float(2, 3, requires_grad=1, device=cpu) = aten::linear(%x, %w, %b)\n"
      "  %4 : Float(2, 3, requires_grad=1, device=cpu) = aten::relu(%h)\n"
      "  %o : Float(2, 3, requires_grad=1, device=cpu) = aten::linear(%4, %w, %b)\n"
      "  %6 : Float(2, 3, requires_grad=1, device=cpu) = aten::relu(%o)\n"
      "  return (%6)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  int64_t xs[2] = {2, 3}, ws[2] = {3, 3}, bs[1] = {3};
  kiln_generator *gen = kiln_generator_new(5);
  kiln_value in[3] = {{.kind = KILN_VALUE_TENSOR, .t = kiln_randn(2, xs, KILN_DTYPE_F32, gen)},
                      {.kind = KILN_VALUE_TENSOR, .t = kiln_randn(2, ws, KILN_DTYPE_F32, gen)},
                      {.kind = KILN_VALUE_TENSOR, .t = kiln_randn(1, bs, KILN_DTYPE_F32, gen)}};
  kiln_generator_free(gen);
  kiln_set_requires_grad(in[1].t, true);
  kiln_set_requires_grad(in[2].t, true);
  kiln_value out[1];
  for (int r = 0; r < 3 && f; r++) CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
  char *g = f ? kiln_function_last_optimized_graph(f) : NULL;
  CHECK_MSG(g && strncmp(g, want, strlen(want)) == 0, "optimized graph:\n%s", g ? g : "(none)");
  kiln_free(g);
  kiln_function_free(f);
  kiln_scope_end();
}

/* Note [Functionalization]: which in-place ops become functional. */
static void expect_functionalized(const char *what, const char *text, int changes,
                                  const char *has, const char *lacks) {
  ir_graph *g = th_parse(text), *orig = th_parse(text);
  int rc = g ? pass_functionalize(g) : -1;
  CHECK_MSG(rc == changes, "%s: %d rewrites, want %d", what, rc, changes);
  CHECK(g && ir_graph_verify(g) == 0);
  char *t = g ? th_print(g) : NULL;
  CHECK_MSG(t && strstr(t, has), "%s: no '%s' in\n%s", what, has, t ? t : "");
  if (lacks) CHECK_MSG(t && !strstr(t, lacks), "%s: '%s' in\n%s", what, lacks, t ? t : "");
  if (g && orig) th_check_same_random(what, orig, g, 3);
  core_free(t);
  ir_graph_free(g);
  ir_graph_free(orig);
}

TEST(mutation_functionalize_rules) {
  expect_functionalized("chain", "graph(%x : Float(3), %y : Float(3)):\n"
                                 "  %1 : int = prim::Constant[value=1]()\n"
                                 "  %t : Float(3) = aten::mul(%x, %y)\n"
                                 "  %u : Float(3) = aten::relu_(%t)\n"
                                 "  %w : Float(3) = aten::add_(%t, %y, %1)\n"
                                 "  %z : Float(3) = aten::exp(%t)\n"
                                 "  return (%z, %u)\n",
                        2, "aten::relu(%t)", "_(");
  /* the written value itself is returned: the return reads the new value */
  expect_functionalized("returned", "graph(%x : Float(3)):\n"
                                    "  %t : Float(3) = aten::neg(%x)\n"
                                    "  %u : Float(3) = aten::relu_(%t)\n"
                                    "  return (%t)\n",
                        1, "aten::relu(%t)", "return (%t)");
  /* a view of %t must see the write: stays */
  expect_functionalized("view", "graph(%x : Float(2, 3)):\n"
                                "  %0 : int = prim::Constant[value=0]()\n"
                                "  %t : Float(2, 3) = aten::neg(%x)\n"
                                "  %v : Float(3) = aten::select(%t, %0, %0)\n"
                                "  %u : Float(2, 3) = aten::relu_(%t)\n"
                                "  %z : Float(3) = aten::exp(%v)\n"
                                "  return (%z)\n",
                        0, "aten::relu_(%t)", NULL);
  /* the caller's tensor: stays */
  expect_functionalized("input", "graph(%x : Float(3)):\n"
                                 "  %u : Float(3) = aten::relu_(%x)\n"
                                 "  return (%u)\n",
                        0, "aten::relu_(%x)", NULL);
  /* other would broadcast self up (an error in place): stays */
  expect_functionalized("broadcast", "graph(%x : Float(1), %y : Float(3)):\n"
                                     "  %t : Float(1) = aten::neg(%x)\n"
                                     "  %u : Float(1) = aten::mul_(%t, %y)\n"
                                     "  return (%u)\n",
                        0, "aten::mul_(%t, %y)", NULL);
  /* inside an If branch, on a value of the enclosing block: stays; the
   * later write in the outer block becomes functional */
  expect_functionalized("if", "graph(%x : Float(3), %c : bool):\n"
                              "  %1 : int = prim::Constant[value=1]()\n"
                              "  %t : Float(3) = aten::neg(%x)\n"
                              "   = prim::If(%c)\n"
                              "    block0():\n"
                              "      %u : Float(3) = aten::relu_(%t)\n"
                              "      -> ()\n"
                              "    block1():\n"
                              "      -> ()\n"
                              "  %w : Float(3) = aten::add_(%t, %1, %1)\n"
                              "  return (%w)\n",
                        1, "aten::relu_(%t)", "aten::add_");
}

/* Issue #15, no fixed limits: a DifferentiableGraph with 70 outputs hands
 * out all of them (it returned None past 64), with their gradients. */
TEST(mutation_differentiable_graph_with_70_outputs) {
  enum { N = 70 };
  core_strbuf b = {0};
  core_strbuf_printf(&b, "graph(");
  for (int i = 0; i < N; i++) core_strbuf_printf(&b, "%s%%x%d : Tensor", i ? ", " : "", i);
  core_strbuf_printf(&b, "):\n");
  for (int i = 0; i < N; i++)
    core_strbuf_printf(&b, "  %%a%d : Tensor = aten::mul(%%x%d, %%x%d)\n  %%b%d : Tensor = aten::tanh(%%a%d)\n",
                       i, i, i, i, i);
  core_strbuf_printf(&b, "  return (");
  for (int i = 0; i < N; i++) core_strbuf_printf(&b, "%s%%b%d", i ? ", " : "", i);
  core_strbuf_printf(&b, ")\n");
  CHECK(!b.oom);
  kiln_scope_begin();
  kiln_function *f = b.p ? fn_of(b.p) : NULL;
  kiln_value in[N], out[N];
  int64_t s[1] = {2};
  for (int i = 0; i < N; i++) {
    double v[2] = {0.01 * i, -0.02 * i};
    in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_from_data(v, 1, s, KILN_DTYPE_F64)};
    kiln_set_requires_grad(in[i].t, true);
  }
  kiln_function_stats st = {0};
  for (int r = 0; r < 3 && f; r++) {
    CHECK_EQ_INT(kiln_function_call(f, in, N, out, N), N);
    for (int i = 0; i < N; i++) {
      CHECK_MSG(out[i].kind == KILN_VALUE_TENSOR && out[i].t, "call %d: output %d missing", r, i);
      if (out[i].kind != KILN_VALUE_TENSOR || !out[i].t) continue;
      CHECK_NEAR(core_get_flat(out[i].t, 1), tanh(0.0004 * i * i), 1e-15);
    }
  }
  if (f) kiln_function_get_stats(f, &st);
  CHECK(st.optimizations == 1 && st.guard_passes >= 1);
  kiln_tensor *roots[N], *seeds[N];
  for (int i = 0; i < N; i++) {
    roots[i] = out[i].t;
    seeds[i] = kiln_ones(1, s, KILN_DTYPE_F64);
  }
  CHECK(kiln_backward_ex(roots, seeds, N, NULL) == 0);
  for (int i = 0; i < N; i++) {
    kiln_tensor *gx = kiln_tensor_grad(in[i].t);
    double x = -0.02 * i, t = tanh(x * x);
    CHECK_MSG(gx && fabs(core_get_flat(gx, 1) - 2 * x * (1 - t * t)) < 1e-12, "grad %d", i);
  }
  kiln_function_free(f);
  kiln_scope_end();
  core_free(b.p);
}

/* In-place forms derived for the OpInfo branch's ops (OPF_HAS_INPLACE):
 * masked_fill_ resolves to its overload by the value's type, floor_ and
 * elu_ write their input; values worked out by hand (elu(-1) = e^-1 - 1). */
TEST(mutation_derived_inplace_forms_of_new_ops) {
  static const char *mf_scalar =
      "graph(%x : Tensor, %m : Tensor):\n"
      "  %v : float = prim::Constant[value=5.]()\n"
      "  %b : Tensor = aten::gt(%m, %v)\n"
      "  %2 : Tensor = aten::masked_fill_(%x, %b, %v)\n"
      "  return (%x)\n";
  static const char *mf_tensor =
      "graph(%x : Tensor, %m : Tensor):\n"
      "  %v : float = prim::Constant[value=5.]()\n"
      "  %b : Tensor = aten::gt(%m, %v)\n"
      "  %n : NoneType = prim::Constant()\n"
      "  %t : Tensor = aten::mul(%m, %v)\n"
      "  %s : Tensor = aten::sum(%t, %n)\n"
      "  %2 : Tensor = aten::masked_fill_(%x, %b, %s)\n"
      "  return (%x)\n";
  static const char *floor_elu =
      "graph(%x : Tensor, %m : Tensor):\n"
      "  %1 : Tensor = aten::floor_(%x)\n"
      "  %a : float = prim::Constant[value=1.]()\n"
      "  %2 : Tensor = aten::elu_(%x, %a, %a, %a)\n"
      "  return (%x)\n";
  const float x[3] = {1.5f, -0.5f, 2.0f}, m[3] = {9.0f, 0.0f, 6.0f};
  const float *ins[2] = {x, m};
  const float want_s[3] = {5.0f, -0.5f, 5.0f};
  const float want_e[3] = {1.0f, expf(-1.0f) - 1.0f, 2.0f};
  for (int runs = 1; runs <= 5; runs += 4) {
    expect_out("masked_fill_ scalar", mf_scalar, ins, 2, 3, want_s, runs);
    expect_out("floor_ then elu_", floor_elu, ins, 2, 3, want_e, runs);
  }
  /* the Tensor overload: value = sum(m * 5) = 75 */
  kiln_graph *g = kiln_graph_parse(mf_tensor, strlen(mf_tensor));
  CHECK_MSG(g != NULL, "parse: %s", kiln_last_error());
  kiln_graph_free(g);
  const float want_t[3] = {75.0f, -0.5f, 75.0f};
  expect_out("masked_fill_ tensor", mf_tensor, ins, 2, 3, want_t, 1);
}
