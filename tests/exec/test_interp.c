/* tests/exec/test_interp.c: the interpreter on hand-written graphs: ops,
 * If, Loop with carried values, int arithmetic, lists, autograd through an
 * interpreted graph, errors naming the node. */
#include "exec/compile.h"
#include "test.h"

static const char *LOOP_IF =
    "graph(%x.1 : Tensor,\n"
    "      %n.1 : int,\n"
    "      %flag.1 : bool):\n"
    "  %3 : bool = prim::Constant[value=1]()\n"
    "  %4 : int = prim::Constant[value=1]()\n"
    "  %y : Tensor = prim::Loop(%n.1, %3, %x.1)\n"
    "    block0(%i : int, %acc.1 : Tensor):\n"
    "      %acc.2 : Tensor = aten::add(%acc.1, %x.1, %4)\n"
    "      -> (%3, %acc.2)\n"
    "  %z : Tensor = prim::If(%flag.1)\n"
    "    block0():\n"
    "      %r1 : Tensor = aten::relu(%y)\n"
    "      -> (%r1)\n"
    "    block1():\n"
    "      %r2 : Tensor = aten::neg(%y)\n"
    "      -> (%r2)\n"
    "  %k : int = aten::mul(%n.1, %n.1)\n"
    "  return (%z, %k)\n";

static kiln_function *fn_of(const char *text) {
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "parse: %s", kiln_last_error());
  if (!g) return NULL;
  kiln_function *f = kiln_function_new(g);
  CHECK_MSG(f != NULL, "function: %s", kiln_last_error());
  kiln_graph_free(g);
  return f;
}

TEST(interp_loop_if_and_ints) {
  kiln_scope_begin();
  kiln_function *f = fn_of(LOOP_IF);
  double xv[3] = {1, -2, 3};
  int64_t n = 3;
  kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_F64);
  kiln_value in[3] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_INT, .i = 4},
                      {.kind = KILN_VALUE_BOOL, .b = true}};
  kiln_value out[4];
  int k = f ? kiln_function_call(f, in, 3, out, 4) : -1;
  CHECK_EQ_INT(k, 2);
  if (k == 2) {
    /* y = x * (1 + 4) ; relu */
    CHECK_NEAR(core_get_flat(out[0].t, 0), 5, 0);
    CHECK_NEAR(core_get_flat(out[0].t, 1), 0, 0);
    CHECK_NEAR(core_get_flat(out[0].t, 2), 15, 0);
    CHECK(out[1].kind == KILN_VALUE_INT && out[1].i == 16);
  }
  in[1].i = 0;
  in[2].b = false;
  k = f ? kiln_function_call(f, in, 3, out, 4) : -1;
  CHECK_EQ_INT(k, 2);
  if (k == 2) CHECK_NEAR(core_get_flat(out[0].t, 1), 2, 0); /* -x, no iterations */
  kiln_function_free(f);
  kiln_scope_end();
}

TEST(interp_autograd_through_graph) {
  static const char *text = "graph(%x : Tensor,\n"
                            "      %w : Tensor):\n"
                            "  %2 : Tensor = aten::mm(%x, %w)\n"
                            "  %3 : Tensor = aten::tanh(%2)\n"
                            "  return (%3)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  int64_t sx[2] = {2, 3}, sw[2] = {3, 2};
  kiln_generator *g = kiln_generator_new(1);
  kiln_tensor *x = kiln_randn(2, sx, KILN_DTYPE_F64, g), *w = kiln_randn(2, sw, KILN_DTYPE_F64, g);
  kiln_set_requires_grad(w, true);
  kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = w}};
  kiln_value out[1];
  CHECK(f && kiln_function_call(f, in, 2, out, 1) == 1);
  CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
  kiln_tensor *ge = NULL;
  kiln_tensor *we = kiln_detach(w);
  kiln_set_requires_grad(we, true);
  kiln_tensor *ye = kiln_sum(kiln_tanh(kiln_mm(x, we)), NULL, 0, false);
  CHECK(kiln_grad(&ye, NULL, 1, &we, 1, NULL, &ge) == KILN_OK);
  for (int i = 0; i < 6; i++)
    CHECK_NEAR(core_get_flat(kiln_tensor_grad(w), i), core_get_flat(ge, i), 1e-12);
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(interp_errors_name_the_node) {
  static const char *text = "graph(%x : Tensor,\n"
                            "      %w : Tensor):\n"
                            "  %2 : Tensor = aten::mm(%x, %w)\n"
                            "  return (%2)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  int64_t sx[2] = {2, 3};
  kiln_tensor *x = kiln_zeros(2, sx, KILN_DTYPE_F32);
  kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = x}};
  kiln_value out[1];
  CHECK(f && kiln_function_call(f, in, 2, out, 1) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mm: shapes [2, 3] and [2, 3] cannot be multiplied");
  CHECK(f && kiln_function_call(f, in, 1, out, 1) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "takes 2 inputs");
  kiln_function_free(f);
  kiln_scope_end();
}

/* Runs c and checks that it took `buffers` tensor buffers from the caching
 * allocator (hits and misses; the sanitizer build bypasses the cache). */
static void run_counting_buffers(exec_code *c, exec_value *in, exec_value *out, int64_t buffers) {
  int64_t h0, m0, h1, m1;
  size_t bytes;
  core_cache_stats(&h0, &m0, &bytes);
  CHECK(c && exec_code_run(c, in, out) == 0);
  core_cache_stats(&h1, &m1, &bytes);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK_EQ_INT((h1 - h0) + (m1 - m0), buffers);
#else
  (void)buffers;
#endif
}

/* Note [Buffer reuse]: a dying input's buffer takes the result. */
TEST(interp_reuses_dying_buffers) {
  static const char *text = "graph(%x : Tensor):\n"
                            "  %1 : float = prim::Constant[value=2.]()\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %2 : Tensor = aten::mul(%x, %1)\n"
                            "  %3 : Tensor = aten::relu(%2)\n"
                            "  %4 : Tensor = aten::add(%3, %1, %one)\n"
                            "  return (%4)\n";
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(text, strlen(text));
  exec_code *c = g ? exec_compile(g, NULL) : NULL;
  CHECK(c != NULL);
  double xv[4] = {-1, 2, -3, 4};
  int64_t n = 4;
  kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_F64);
  exec_value in[1] = {{.tag = EXEC_V_TENSOR, .t = x}}, out[1] = {{0}};
  run_counting_buffers(c, in, out, 1); /* one buffer for three ops */
  double want[4] = {2, 6, 2, 10};
  for (int i = 0; i < 4; i++) CHECK_NEAR(core_get_flat(out[0].t, i), want[i], 0);
  CHECK_NEAR(core_get_flat(x, 0), -1, 0); /* the caller's input is untouched */
  exec_value_clear(&out[0]);
  exec_code_free(c);
  ir_graph_free(g);
  kiln_scope_end();
}

/* Note [Buffer reuse] for an OPF_SELF_OUT op: addmm accumulates into its
 * dying self's buffer, but not when self is also a factor (mat1). */
TEST(interp_addmm_reuses_dying_self) {
  static const char *texts[2] = {"graph(%s : Tensor, %a : Tensor, %b : Tensor):\n"
                                 "  %k : float = prim::Constant[value=2.]()\n"
                                 "  %one : int = prim::Constant[value=1]()\n"
                                 "  %c : Tensor = aten::mul(%s, %k)\n"
                                 "  %y : Tensor = aten::addmm(%c, %a, %b, %one, %one)\n"
                                 "  return (%y)\n",
                                 "graph(%s : Tensor, %a : Tensor, %b : Tensor):\n"
                                 "  %k : float = prim::Constant[value=2.]()\n"
                                 "  %one : int = prim::Constant[value=1]()\n"
                                 "  %c : Tensor = aten::mul(%s, %k)\n"
                                 "  %y : Tensor = aten::addmm(%c, %c, %b, %one, %one)\n"
                                 "  return (%y)\n"};
  /* c = 2s; y = c + I @ ones = c + 1, and y = c + c @ ones */
  static const double want[2][4] = {{3, 5, 7, 9}, {8, 10, 20, 22}};
  static const int64_t buffers[2] = {1, 2};
  kiln_scope_begin();
  float sv[4] = {1, 2, 3, 4}, av[4] = {1, 0, 0, 1}, bv[4] = {1, 1, 1, 1};
  int64_t sh[2] = {2, 2};
  kiln_tensor *s = kiln_from_data(sv, 2, sh, KILN_DTYPE_F32), *a = kiln_from_data(av, 2, sh, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_from_data(bv, 2, sh, KILN_DTYPE_F32);
  for (int t = 0; t < 2; t++) {
    ir_graph *g = ir_graph_parse(texts[t], strlen(texts[t]));
    exec_code *c = g ? exec_compile(g, NULL) : NULL;
    CHECK(c != NULL);
    exec_value in[3] = {{.tag = EXEC_V_TENSOR, .t = s}, {.tag = EXEC_V_TENSOR, .t = a},
                        {.tag = EXEC_V_TENSOR, .t = b}},
               out[1] = {{0}};
    run_counting_buffers(c, in, out, buffers[t]);
    for (int i = 0; out[0].t && i < 4; i++) CHECK_NEAR(core_get_flat(out[0].t, i), want[t][i], 0);
    exec_value_clear(&out[0]);
    exec_code_free(c);
    ir_graph_free(g);
  }
  CHECK_NEAR(core_get_flat(s, 3), 4, 0); /* the caller's input is untouched */
  kiln_scope_end();
}

/* More than 16 values through a ListUnpack and around a loop: a rotation of
 * 20 carried tensors, so a dropped or stale value changes the result. */
TEST(interp_many_loop_carried_values) {
  enum { N = 20 };
  char text[8192];
  size_t k = 0;
#define EMIT(...) k += (size_t)snprintf(text + k, sizeof text - k, __VA_ARGS__)
  EMIT("graph(%%x : Tensor,\n      %%n : int):\n");
  EMIT("  %%t : bool = prim::Constant[value=1]()\n  %%one : int = prim::Constant[value=1]()\n");
  EMIT("  %%k : int = prim::Constant[value=%d]()\n  %%z : int = prim::Constant[value=0]()\n", N);
  EMIT("  %%l : Tensor[] = aten::chunk(%%x, %%k, %%z)\n  ");
  for (int i = 0; i < N; i++) EMIT("%s%%p%d : Tensor", i ? ", " : "", i);
  EMIT(" = prim::ListUnpack(%%l)\n  ");
  for (int i = 0; i < N; i++) EMIT("%s%%r%d : Tensor", i ? ", " : "", i);
  EMIT(" = prim::Loop(%%n, %%t");
  for (int i = 0; i < N; i++) EMIT(", %%p%d", i);
  EMIT(")\n    block0(%%i : int");
  for (int i = 0; i < N; i++) EMIT(", %%a%d : Tensor", i);
  EMIT("):\n      %%s : Tensor = aten::add(%%a0, %%a1, %%one)\n      -> (%%t");
  for (int i = 1; i < N; i++) EMIT(", %%a%d", i);
  EMIT(", %%s)\n  return (");
  for (int i = 0; i < N; i++) EMIT("%s%%r%d", i ? ", " : "", i);
  EMIT(")\n");
#undef EMIT
  CHECK(k < sizeof text);
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  kiln_tensor *x = kiln_arange(0, N, 1, KILN_DTYPE_F64);
  double want[N];
  for (int i = 0; i < N; i++) want[i] = i;
  for (int it = 0; it < 3; it++) { /* the same rotation by hand */
    double s = want[0] + want[1];
    memmove(want, want + 1, (N - 1) * sizeof *want);
    want[N - 1] = s;
  }
  kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_INT, .i = 3}};
  kiln_value out[N];
  for (int run = 0; run < 3; run++) { /* profiled, then optimized */
    int got = f ? kiln_function_call(f, in, 2, out, N) : -1;
    CHECK_MSG(got == N, "run %d: %d outputs: %s", run, got, kiln_last_error());
    for (int i = 0; got == N && i < N; i++)
      CHECK_MSG(kiln_tensor_numel(out[i].t) == 1 && core_get_flat(out[i].t, 0) == want[i],
                "run %d: output %d is %g, want %g", run, i, core_get_flat(out[i].t, 0), want[i]);
  }
  kiln_function_free(f);
  kiln_scope_end();
}

/* Number builtins at int64's edges: max/min of ints compare exactly (not
 * through a double, where 2^63 - 1 rounds out of range), and float -> int
 * conversions that cannot fit are errors, as in Python, never C's
 * undefined behaviour (Note [Int semantics]). */
TEST(interp_int_edges) {
  kiln_scope_begin();
  kiln_function *f = fn_of("graph(%a : int, %b : int, %x : float):\n"
                           "  %m : int = prim::max(%a, %b)\n"
                           "  %n : int = prim::min(%a, %b)\n"
                           "  %c : int = aten::floor(%x)\n"
                           "  %i : int = aten::Int(%x)\n"
                           "  return (%m, %n, %c, %i)\n");
  kiln_value in[3] = {{.kind = KILN_VALUE_INT, .i = INT64_MAX},
                      {.kind = KILN_VALUE_INT, .i = INT64_MAX - 1},
                      {.kind = KILN_VALUE_FLOAT, .f = -2.5}};
  kiln_value out[4];
  int k = f ? kiln_function_call(f, in, 3, out, 4) : -1;
  CHECK_EQ_INT(k, 4);
  if (k == 4) {
    CHECK(out[0].i == INT64_MAX);
    CHECK(out[1].i == INT64_MAX - 1);
    CHECK_EQ_INT(out[2].i, -3);
    CHECK_EQ_INT(out[3].i, -2);
  }
  const double bad[3] = {1e30, -INFINITY, NAN};
  for (int j = 0; j < 3; j++) {
    in[2].f = bad[j];
    k = f ? kiln_function_call(f, in, 3, out, 4) : -1;
    CHECK_MSG(k < 0, "floor/int of %g gave a value", bad[j]);
    CHECK_STR_CONTAINS(kiln_last_error(), "cannot convert");
  }
  kiln_clear_error();
  kiln_function_free(f);
  kiln_scope_end();
}

/* list * int repeats the list (torchvision's StochasticDepth builds the
 * noise shape [N] + [1] * (ndim - 1)); a count <= 0 gives []. */
TEST(interp_list_times_int) {
  static const char *text = "graph(%x : Tensor,\n"
                            "      %n : int):\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %two : int = prim::Constant[value=2]()\n"
                            "  %l : int[] = prim::ListConstruct(%one)\n"
                            "  %r : int[] = aten::mul(%l, %n)\n"
                            "  %h : int[] = prim::ListConstruct(%two)\n"
                            "  %s : int[] = aten::add(%h, %r)\n"
                            "  %y : Tensor = aten::reshape(%x, %s)\n"
                            "  return (%y)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  double xv[2] = {1, 2};
  int64_t n = 2;
  kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_F64);
  for (int reps = -1; reps <= 3 && f; reps++) {
    kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_INT, .i = reps}};
    kiln_value out[1];
    int k = kiln_function_call(f, in, 2, out, 1);
    CHECK_MSG(k == 1, "%s", kiln_last_error());
    if (k == 1) {
      CHECK_EQ_INT(kiln_tensor_ndim(out[0].t), 1 + (reps > 0 ? reps : 0));
      CHECK_EQ_INT(kiln_tensor_shape(out[0].t)[0], 2);
    }
  }
  kiln_function_free(f);
  kiln_scope_end();
}

/* The builtins nn.MultiheadAttention / TransformerEncoderLayer graphs ask:
 * str.find (TorchScript's bounds: start and end from the end when
 * negative, end -1 the end itself), grad mode read at run time (twice, on
 * and off: never folded into a constant), no autocast, no nested tensors. */
TEST(interp_find_grad_mode_autocast_nested) {
  static const char *text = "graph(%x : Tensor,\n"
                            "      %start : int,\n"
                            "      %end : int):\n"
                            "  %s : str = prim::Constant[value=\"abcabc\"]()\n"
                            "  %sub : str = prim::Constant[value=\"bc\"]()\n"
                            "  %f : int = aten::find(%s, %sub, %start, %end)\n"
                            "  %g : bool = aten::is_grad_enabled()\n"
                            "  %a : bool = aten::is_autocast_enabled()\n"
                            "  %n : bool = prim::is_nested(%x)\n"
                            "  return (%f, %g, %a, %n)\n";
  kiln_scope_begin();
  kiln_function *f = fn_of(text);
  kiln_tensor *x = kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_F32);
  /* (start, end) -> Python's "abcabc".find("bc", start, end) with end -1 the end */
  static const int64_t cases[][3] = {{0, -1, 1}, {2, -1, 4}, {-2, -1, 4}, {0, 2, -1},
                                     {0, 3, 1},  {5, -1, -1}, {9, 20, -1}, {-9, -1, 1}};
  for (int c = 0; c < 8 && f; c++) {
    bool grad = c % 2 == 0;
    bool prev = kiln_set_grad_enabled(grad);
    kiln_value in[3] = {{.kind = KILN_VALUE_TENSOR, .t = x},
                        {.kind = KILN_VALUE_INT, .i = cases[c][0]},
                        {.kind = KILN_VALUE_INT, .i = cases[c][1]}};
    kiln_value out[4];
    int k = kiln_function_call(f, in, 3, out, 4);
    kiln_set_grad_enabled(prev);
    CHECK_MSG(k == 4, "%s", kiln_last_error());
    if (k != 4) break;
    CHECK_MSG(out[0].kind == KILN_VALUE_INT && out[0].i == cases[c][2], "find(%lld, %lld) = %lld",
              (long long)cases[c][0], (long long)cases[c][1], (long long)out[0].i);
    CHECK(out[1].kind == KILN_VALUE_BOOL && out[1].b == grad);
    CHECK(out[2].kind == KILN_VALUE_BOOL && !out[2].b);
    CHECK(out[3].kind == KILN_VALUE_BOOL && !out[3].b);
  }
  kiln_function_free(f);
  kiln_scope_end();
}
