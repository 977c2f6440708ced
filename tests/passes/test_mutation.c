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
