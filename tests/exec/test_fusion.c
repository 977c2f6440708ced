/* tests/exec/test_fusion.c: fused elementwise kernels equal unfused
 * execution for every elementwise op (table-driven, on the op samples:
 * broadcast and non-contiguous inputs), chains, training graphs show
 * FusionGroups where they should, and kernels are shape-polymorphic. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec/fusion.h"
#include "exec/fusion_cc.h"
#include "ops/sample.h"
#include "passes/autodiff.h"
#include "test.h"

/* A graph computing op(args) (and, if chain, then a second op on the
 * result): params for tensor and number operands, constants otherwise. */
static ir_graph *single_op_graph(int op, const op_val *args, int n_args, bool chain,
                                 exec_value *ins, int *n_ins) {
  ir_graph *g = ir_graph_new();
  ir_block *top = ir_graph_top(g);
  ir_node *n = ir_node_new_op(g, op);
  *n_ins = 0;
  for (int i = 0; i < n_args; i++) {
    const op_val *a = &args[i];
    ir_value *v = NULL;
    bool operand = i < op_table[op].n_operands;
    if (a->tag == OP_VAL_TENSOR) {
      v = ir_block_add_param(top, ir_type_tensor(), NULL);
      ins[(*n_ins)++] = (exec_value){.tag = EXEC_V_TENSOR, .t = a->t};
    } else if (operand && (a->tag == OP_VAL_FLOAT || a->tag == OP_VAL_INT)) {
      v = ir_block_add_param(top, a->tag == OP_VAL_FLOAT ? ir_type_float() : ir_type_int(), NULL);
      ins[(*n_ins)++] = a->tag == OP_VAL_FLOAT ? (exec_value){.tag = EXEC_V_FLOAT, .f = a->f}
                                               : (exec_value){.tag = EXEC_V_INT, .i = a->i};
    } else {
      ir_node *c = ir_node_new_prim(g, IR_PRIM_CONSTANT);
      const ir_type *t = ir_type_none();
      if (a->tag == OP_VAL_INT) ir_node_set_i(c, "value", a->i), t = ir_type_int();
      if (a->tag == OP_VAL_FLOAT) ir_node_set_f(c, "value", a->f), t = ir_type_float();
      if (a->tag == OP_VAL_BOOL) ir_node_set_i(c, "value", a->b), t = ir_type_bool();
      if (a->tag == OP_VAL_STR) ir_node_set_s(c, "value", a->s), t = ir_type_str();
      v = ir_node_add_output(c, t);
      ir_node_append(top, c);
    }
    ir_node_add_input(n, v);
  }
  ir_value *y = ir_node_add_output(n, ir_type_tensor());
  ir_node_append(top, n);
  if (chain) { /* y * y: keeps exact ops exact */
    ir_node *m = ir_node_new_op(g, KILN_OP_MUL);
    ir_node_add_input(m, y);
    ir_node_add_input(m, y);
    y = ir_node_add_output(m, ir_type_tensor());
    ir_node_append(top, m);
  }
  ir_block_add_return(top, y);
  return g;
}

/* Compiles g and runs it once: 0, or < 0 with the error set. */
static int run_once(const ir_graph *g, exec_value *in, exec_value *out) {
  exec_code *c = g ? exec_compile(g, &exec_fusion_compile_opts) : NULL;
  int rc = c ? exec_code_run(c, in, out) : -1;
  exec_code_free(c);
  return rc;
}

static exec_value TV(kiln_tensor *t) { return (exec_value){.tag = EXEC_V_TENSOR, .t = t}; }

static void compare_bitwise(const char *what, kiln_tensor *a, kiln_tensor *b) {
  CHECK_MSG(a && b, "%s: missing output (%s)", what, kiln_last_error());
  if (!a || !b) return;
  CHECK_MSG(kiln_tensor_dtype(a) == kiln_tensor_dtype(b) && kiln_tensor_ndim(a) == kiln_tensor_ndim(b),
            "%s: dtype/rank differ", what);
  int64_t n = kiln_tensor_numel(b);
  CHECK_MSG(kiln_tensor_numel(a) == n, "%s: sizes differ", what);
  for (int64_t i = 0; i < n && i < kiln_tensor_numel(a); i++) {
    double x = core_get_flat(a, i), y = core_get_flat(b, i);
    CHECK_MSG(x == y || (isnan(x) && isnan(y)), "%s[%lld]: fused %.17g unfused %.17g", what,
              (long long)i, x, y);
  }
}

/* Every fusible op in a group (and chained with mul) against unfused
 * execution; with native, every group is compiled (Note [Native kernels])
 * where it can be, and native[op] says whether one of op's was. */
static void every_op_matches(bool native_mode, bool *native) {
  int n, covered = 0;
  const sample_entry *e = sample_all(&n);
  kiln_generator *g = kiln_generator_new(12);
  bool seen[KILN_OP_COUNT] = {false};
  int prev_mode = exec_fusion_cc_set_mode(native_mode ? 2 : 0);
  for (int i = 0; i < n; i++) {
    int op = e[i].op;
    if (!(op_table[op].flags & OPF_FUSIBLE)) continue;
    for (int as_f32 = 0; as_f32 < 2; as_f32++)
      for (int chain = native_mode; chain < 2; chain++) { /* native: chained only (compiles) */
        kiln_scope_begin();
        op_sample s;
        memset(&s, 0, sizeof s);
        e[i].fn(&s, g);
        if (as_f32) /* the same values in float32 (keeps strides via permute? no: contiguous) */
          for (int a = 0; a < s.n_args; a++)
            if (s.args[a].tag == OP_VAL_TENSOR && s.args[a].t->dtype == KILN_DTYPE_F64)
              s.args[a].t = kiln_to_dtype(s.args[a].t, KILN_DTYPE_F32);
        exec_value ins[16];
        int n_ins;
        ir_graph *gr = single_op_graph(op, s.args, s.n_args, chain, ins, &n_ins);
        fused_group *fg = exec_fused_group_new(gr);
        CHECK_MSG(fg != NULL, "%s: %s", e[i].name, kiln_last_error());
        exec_value out[1] = {{0}};
        int64_t built = kiln_fused_kernels_native();
        if (fg && exec_fused_group_run(fg, ins, out) == 0) {
          if (native && kiln_fused_kernels_native() > built) native[op] = true;
          kiln_tensor *want = op_call1(op, s.args, s.n_args);
          if (want && chain) want = kiln_mul(want, want);
          char what[96];
          snprintf(what, sizeof what, "%s%s%s", e[i].name, as_f32 ? " f32" : "", chain ? " chain" : "");
          compare_bitwise(what, out[0].t, want);
        } else if (fg) {
          test_fail(__FILE__, __LINE__, "%s: fused run failed: %s", e[i].name, kiln_last_error());
        }
        exec_value_clear(&out[0]);
        exec_fused_group_free(fg);
        ir_graph_free(gr);
        kiln_scope_end();
      }
    seen[op] = true;
  }
  /* ops without gradcheck samples (comparisons): a broadcast transposed
   * tensor against a row, and a one-element operand */
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    if (!(op_table[op].flags & OPF_FUSIBLE) || seen[op] || op_table[op].n_operands != 2 ||
        op_table[op].n_args != 2)
      continue;
    for (int variant = 0; variant < 2; variant++) {
      kiln_scope_begin();
      kiln_tensor *a = kiln_t(kiln_randn(2, (int64_t[]){3, 4}, KILN_DTYPE_F32, g));
      kiln_tensor *b = variant ? kiln_scalar(0.25, KILN_DTYPE_F32)
                               : kiln_randn(1, (int64_t[]){3}, KILN_DTYPE_F32, g);
      /* equal values somewhere, so eq/ne/le/ge see ties */
      kiln_copy_(kiln_select(a, 0, 1), variant ? b : kiln_detach(b));
      op_val args[2] = {OPV_T(a), OPV_T(b)};
      exec_value ins[16];
      int n_ins;
      ir_graph *gr = single_op_graph(op, args, 2, variant, ins, &n_ins);
      fused_group *fg = exec_fused_group_new(gr);
      exec_value out[1] = {{0}};
      int64_t built = kiln_fused_kernels_native();
      CHECK(fg && exec_fused_group_run(fg, ins, out) == 0);
      if (native && kiln_fused_kernels_native() > built) native[op] = true;
      kiln_tensor *want = op_call1(op, args, 2);
      if (want && variant) want = kiln_mul(want, want);
      if (out[0].tag == EXEC_V_TENSOR) compare_bitwise(op_table[op].name, out[0].t, want);
      exec_value_clear(&out[0]);
      exec_fused_group_free(fg);
      ir_graph_free(gr);
      kiln_scope_end();
    }
    seen[op] = true;
  }
  for (int op = 0; op < KILN_OP_COUNT; op++)
    if (op_table[op].flags & OPF_FUSIBLE) {
      CHECK_MSG(seen[op], "%s is fusible but no sample exercised it fused", op_table[op].name);
      covered += seen[op];
    }
  exec_fusion_cc_set_mode(prev_mode);
  kiln_generator_free(g);
  test_note("%d fusible ops checked fused", covered);
}

TEST(fusion_every_elementwise_op_matches_unfused) { every_op_matches(false, NULL); }

/* The same with native kernels: their values equal the ops' one at a time,
 * bit for bit (each is compiled from the tiles' own expressions with the
 * library's floating-point flags), on broadcast and strided samples. */
TEST(fusion_native_kernels_match_unfused) {
  bool native[KILN_OP_COUNT] = {false};
  int64_t failures = exec_fusion_native_failures();
  every_op_matches(true, native);
  CHECK_MSG(exec_fusion_native_failures() == failures, "%lld native kernels failed to build",
            (long long)(exec_fusion_native_failures() - failures));
  /* every fusible op with tile text (tile.h) ran in a native kernel for
   * some sample; only gelu (two forms chosen per tile) has none */
  int n_native = 0;
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    if (!(op_table[op].flags & OPF_FUSIBLE)) continue;
    bool has_text = op_tile_text(op, KILN_DTYPE_F32) || op_tile_text(op, KILN_DTYPE_F64);
    CHECK_MSG(native[op] == has_text, "%s: %s", op_table[op].name,
              has_text ? "has tile text but no native kernel ran" : "ran natively without text?");
    n_native += native[op];
  }
  CHECK_MSG(n_native >= 31, "only %d ops have native kernels", n_native);
  test_note("%d ops ran in native kernels (%lld kernels built)", n_native,
            (long long)kiln_fused_kernels_native());
}

TEST(fusion_comparisons_and_broadcast_chain) {
  /* non-differentiable ops (comparisons) with a broadcast scalar tensor */
  static const char *text = "graph(%x : Tensor,\n"
                            "      %a : Tensor):\n"
                            "  %z : float = prim::Constant[value=0.]()\n"
                            "  %m : Tensor = aten::gt(%x, %z)\n"
                            "  %n : Tensor = aten::lt(%x, %a)\n"
                            "  %k : Tensor = aten::eq(%m, %n)\n"
                            "  return (%k)\n";
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(text, strlen(text));
  CHECK(g && pass_fuse(g) == 1);
  char *t = ir_graph_print(g, IR_PRINT_NO_SOURCE);
  CHECK_STR_CONTAINS(t, "prim::FusionGroup_0(%x, %a)");
  core_free(t);
  kiln_generator *gen = kiln_generator_new(3);
  int64_t sx[2] = {37, 5}, sa[1] = {5};
  kiln_tensor *x = kiln_t(kiln_randn(2, (int64_t[]){5, 37}, KILN_DTYPE_F32, gen));
  kiln_tensor *a = kiln_randn(1, sa, KILN_DTYPE_F32, gen);
  (void)sx;
  exec_code *c = exec_compile(g, &exec_fusion_compile_opts);
  exec_value in[2] = {{.tag = EXEC_V_TENSOR, .t = x}, {.tag = EXEC_V_TENSOR, .t = a}}, out[1] = {{0}};
  CHECK(c && exec_code_run(c, in, out) == 0);
  kiln_tensor *want = kiln_eq(kiln_gt(x, kiln_zeros(0, NULL, KILN_DTYPE_F32)), kiln_lt(x, a));
  compare_bitwise("comparisons", out[0].t, want);
  exec_value_clear(&out[0]);
  exec_code_free(c);
  ir_graph_free(g);
  kiln_generator_free(gen);
  kiln_scope_end();
}

static const char *TRAIN = "graph(%x : Tensor,\n"
                           "      %w : Tensor,\n"
                           "      %b : Tensor):\n"
                           "  %one : int = prim::Constant[value=1]()\n"
                           "  %z : float = prim::Constant[value=0.]()\n"
                           "  %h : Tensor = aten::mm(%x, %w)\n"
                           "  %h2 : Tensor = aten::add(%h, %b, %one)\n"
                           "  %y : Tensor = aten::sigmoid(%h2)\n"
                           "  %m : Tensor = aten::gt(%x, %z)\n"
                           "  %n : Tensor = aten::lt(%x, %z)\n"
                           "  %k : Tensor = aten::ne(%m, %n)\n"
                           "  return (%y, %k)\n";

TEST(fusion_in_training_graphs_and_shape_polymorphic) {
  kiln_scope_begin();
  kiln_graph *gr = kiln_graph_parse(TRAIN, strlen(TRAIN));
  kiln_function *f = gr ? kiln_function_new(gr) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  kiln_generator *g = kiln_generator_new(5);
  int64_t sw[2] = {3, 4}, sb = 4;
  kiln_tensor *w = kiln_randn(2, sw, KILN_DTYPE_F32, g), *b = kiln_randn(1, &sb, KILN_DTYPE_F32, g);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(b, true);
  int64_t k0 = 0;
  for (int call = 0; call < 6 && f; call++) {
    int64_t sx[2] = {call < 4 ? 8 : 16 + call, 3};
    kiln_tensor *x = kiln_randn(2, sx, KILN_DTYPE_F32, g);
    kiln_value in[3] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = w},
                        {.kind = KILN_VALUE_TENSOR, .t = b}},
               out[2];
    kiln_tensor_set_grad(w, NULL);
    CHECK(kiln_function_call(f, in, 3, out, 2) == 2);
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    /* values and gradients equal eager */
    kiln_tensor *we = kiln_detach(w);
    kiln_set_requires_grad(we, true);
    kiln_tensor *ye = kiln_sigmoid(kiln_add(kiln_mm(x, we), b));
    kiln_tensor *s = kiln_sum(ye, NULL, 0, false), *ge;
    kiln_grad(&s, NULL, 1, &we, 1, NULL, &ge);
    for (int64_t i = 0; i < kiln_tensor_numel(ye); i++)
      CHECK_NEAR(core_get_flat(out[0].t, i), core_get_flat(ye, i), 1e-6);
    for (int64_t i = 0; i < 12; i++)
      CHECK_NEAR(core_get_flat(kiln_tensor_grad(w), i), core_get_flat(ge, i), 1e-5);
    if (call == 3) k0 = kiln_fused_kernels_compiled();
  }
  if (f) {
    /* new batch sizes (calls 4, 5) built no new fused kernel */
    CHECK_EQ_INT(kiln_fused_kernels_compiled(), k0);
    char *t = kiln_function_last_optimized_graph(f);
    /* non-differentiable region at the top level */
    CHECK_STR_CONTAINS(t, "prim::FusionGroup_");
    const char *fwd = t ? strstr(t, "forward:") : NULL, *bwd = t ? strstr(t, "backward (") : NULL;
    CHECK(fwd && bwd);
    /* inside the forward and inside the backward graph */
    CHECK(fwd && bwd && strstr(fwd, "prim::FusionGroup") && strstr(fwd, "prim::FusionGroup") < bwd);
    CHECK(bwd && strstr(bwd, "prim::FusionGroup"));
    kiln_free(t);
  }
  kiln_function_free(f);
  kiln_graph_free(gr);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Note [Horizontal fusion]: independent ops with the same profiled shape
 * join one group; at run time the group still gives exactly the unfused
 * values and shapes when the inputs' shapes differ from the profile (an
 * output narrower than the index space sends it down the unfused path). */
TEST(fusion_horizontal_same_shape) {
  static const char *text = "graph(%x : Float(4, 3, device=cpu),\n"
                            "      %y : Float(4, 3, device=cpu)):\n"
                            "  %a : Float(4, 3, device=cpu) = aten::sigmoid(%x)\n"
                            "  %b : Float(4, 3, device=cpu) = aten::tanh(%y)\n"
                            "  %c : Float(4, 3, device=cpu) = aten::mul(%a, %b)\n"
                            "  return (%a, %b, %c)\n";
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(text, strlen(text));
  CHECK(g && pass_fuse(g) == 1);
  char *t = g ? ir_graph_print(g, IR_PRINT_NO_SOURCE) : NULL;
  CHECK_STR_CONTAINS(t, "= prim::FusionGroup_0(%x, %y)");
  core_free(t);
  exec_code *c = g ? exec_compile(g, &exec_fusion_compile_opts) : NULL;
  kiln_generator *gen = kiln_generator_new(4);
  const int64_t shapes[3][2][2] = {{{4, 3}, {4, 3}}, {{4, 3}, {1, 3}}, {{1, 3}, {5, 3}}};
  for (int k = 0; k < 3 && c; k++) {
    kiln_tensor *x = kiln_randn(2, shapes[k][0], KILN_DTYPE_F32, gen);
    kiln_tensor *y = kiln_randn(2, shapes[k][1], KILN_DTYPE_F32, gen);
    exec_value in[2] = {{.tag = EXEC_V_TENSOR, .t = x}, {.tag = EXEC_V_TENSOR, .t = y}};
    exec_value out[3] = {{0}};
    CHECK_MSG(exec_code_run(c, in, out) == 0, "shapes %d: %s", k, kiln_last_error());
    kiln_tensor *a = kiln_sigmoid(x), *b = kiln_tanh(y), *want[3] = {a, b, kiln_mul(a, b)};
    for (int o = 0; o < 3; o++) {
      CHECK_MSG(out[o].tag == EXEC_V_TENSOR && kiln_tensor_ndim(out[o].t) == 2 &&
                    kiln_tensor_size(out[o].t, 0) == kiln_tensor_size(want[o], 0),
                "shapes %d output %d", k, o);
      if (out[o].tag == EXEC_V_TENSOR) compare_bitwise("horizontal", out[o].t, want[o]);
      exec_value_clear(&out[o]);
    }
  }
  exec_code_free(c);
  ir_graph_free(g);
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* Note [Run-time attributes]: add's alpha as a graph input (lazy tensors
 * record -lr as data) fuses, and each call uses its own alpha, not the one
 * of the call that built the cached kernel. */
TEST(fusion_alpha_read_per_call) {
  static const char *text = "graph(%x : Float(3, device=cpu),\n"
                            "      %y : Float(3, device=cpu),\n"
                            "      %alpha : float):\n"
                            "  %m : Float(3, device=cpu) = aten::mul(%x, %y)\n"
                            "  %r : Float(3, device=cpu) = aten::add(%x, %m, %alpha)\n"
                            "  return (%r)\n";
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(text, strlen(text));
  CHECK(g && pass_fuse(g) == 1);
  char *t = g ? ir_graph_print(g, IR_PRINT_NO_SOURCE) : NULL;
  CHECK_STR_CONTAINS(t, "= prim::FusionGroup_0(%x, %y, %alpha)");
  core_free(t);
  exec_code *c = g ? exec_compile(g, &exec_fusion_compile_opts) : NULL;
  float xv[3] = {1, 2, 3}, yv[3] = {4, 5, 6};
  double alphas[3] = {0.5, -2, 3};
  int64_t n = 3;
  kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_F32);
  kiln_tensor *y = kiln_from_data(yv, 1, &n, KILN_DTYPE_F32);
  for (int k = 0; k < 3 && c; k++) {
    exec_value in[3] = {{.tag = EXEC_V_TENSOR, .t = x}, {.tag = EXEC_V_TENSOR, .t = y},
                        {.tag = EXEC_V_FLOAT, .f = alphas[k]}};
    exec_value out[1] = {{0}};
    CHECK(exec_code_run(c, in, out) == 0);
    for (int i = 0; out[0].tag == EXEC_V_TENSOR && i < 3; i++) /* x + alpha * x * y */
      CHECK_NEAR(core_get_flat(out[0].t, i), xv[i] + alphas[k] * xv[i] * yv[i], 0);
    exec_value_clear(&out[0]);
  }
  exec_code_free(c);
  ir_graph_free(g);
  kiln_scope_end();
}

/* Note [Sinking]: a producer far above its consumer moves down and fuses
 * with it, but never past an in-place op that writes what it reads. */
TEST(fusion_sinks_producers_but_not_past_writes) {
  static const char *far = "graph(%x : Float(3, device=cpu),\n"
                           "      %y : Float(3, device=cpu)):\n"
                           "  %a : Float(3, device=cpu) = aten::mul(%x, %x)\n"
                           "  %s : Float(device=cpu) = aten::sum(%y, %none)\n"
                           "  %c : Float(3, device=cpu) = aten::add(%a, %s, %one)\n"
                           "  return (%c)\n";
  static const char *write = "graph(%x : Float(3, device=cpu),\n"
                             "      %y : Float(3, device=cpu)):\n"
                             "  %a : Float(3, device=cpu) = aten::mul(%x, %x)\n"
                             "  %r : Float(3, device=cpu) = aten::relu_(%x)\n"
                             "  %c : Float(3, device=cpu) = aten::add(%a, %y, %one)\n"
                             "  return (%c, %r)\n";
  const char *texts[2] = {far, write};
  kiln_scope_begin();
  for (int k = 0; k < 2; k++) {
    char text[1024];
    /* the constants first (the sketches above name them) */
    const char *body = strstr(texts[k], "):\n") + 3;
    snprintf(text, sizeof text, "%.*s  %%none : NoneType = prim::Constant()\n"
                                "  %%one : int = prim::Constant[value=1]()\n%s",
             (int)(body - texts[k]), texts[k], body);
    ir_graph *g = ir_graph_parse(text, strlen(text));
    CHECK_MSG(g != NULL, "%s", kiln_last_error());
    if (!g) continue;
    int made = pass_fuse(g);
    char *t = ir_graph_print(g, IR_PRINT_NO_SOURCE);
    if (k == 0) {
      CHECK(made == 1);
      CHECK_STR_CONTAINS(t, "= prim::FusionGroup_0(%x, %s)");
    } else {
      CHECK(made == 0); /* mul stays above relu_ */
      CHECK(t && strstr(t, "aten::mul") < strstr(t, "aten::relu_"));
    }
    core_free(t);
    float xv[3] = {-1, 2, -3}, yv[3] = {10, 20, 30};
    int64_t n = 3;
    kiln_tensor *x = kiln_from_data(xv, 1, &n, KILN_DTYPE_F32);
    kiln_tensor *y = kiln_from_data(yv, 1, &n, KILN_DTYPE_F32);
    exec_value in[2] = {TV(x), TV(y)}, out[2] = {{0}};
    CHECK(run_once(g, in, out) == 0);
    for (int i = 0; out[0].tag == EXEC_V_TENSOR && i < 3; i++) /* x*x computed before relu_ */
      CHECK_NEAR(core_get_flat(out[0].t, i), xv[i] * xv[i] + (k == 0 ? 60 : yv[i]), 0);
    exec_value_clear(&out[0]);
    exec_value_clear(&out[1]);
    ir_graph_free(g);
  }
  kiln_scope_end();
}

/* Note [Add epilogue]: add(x, mm(a, b)) becomes addmm(x, a, b) when the
 * types say no broadcasting is involved; a broadcast add stays. */
TEST(fusion_add_epilogue_becomes_addmm) {
  static const char *text = "graph(%x : Float(4, 5, device=cpu),\n"
                            "      %a : Float(4, 3, device=cpu),\n"
                            "      %b : Float(3, 5, device=cpu),\n"
                            "      %v : Float(5, device=cpu)):\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %m : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
                            "  %y : Float(4, 5, device=cpu) = aten::add(%x, %m, %one)\n"
                            "  %m2 : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
                            "  %z : Float(4, 5, device=cpu) = aten::add(%m2, %v, %one)\n"
                            "  return (%y, %z)\n";
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(text, strlen(text));
  CHECK(g && pass_gemm_epilogue(g) == 0); /* that pass: activations only */
  CHECK(g && pass_add_epilogue(g, false) == 1);
  char *t = g ? ir_graph_print(g, IR_PRINT_NO_SOURCE) : NULL;
  CHECK_STR_CONTAINS(t, "Float(4, 5, device=cpu) = aten::addmm(%x, %a, %b, %one, %one)");
  CHECK_STR_CONTAINS(t, "aten::add(%m2, %v, %one)");
  core_free(t);
  kiln_generator *gen = kiln_generator_new(8);
  kiln_tensor *x = kiln_randn(2, (int64_t[]){4, 5}, KILN_DTYPE_F32, gen);
  kiln_tensor *a = kiln_randn(2, (int64_t[]){4, 3}, KILN_DTYPE_F32, gen);
  kiln_tensor *b = kiln_randn(2, (int64_t[]){3, 5}, KILN_DTYPE_F32, gen);
  kiln_tensor *v = kiln_randn(1, (int64_t[]){5}, KILN_DTYPE_F32, gen);
  exec_value in[4] = {TV(x), TV(a), TV(b), TV(v)}, out[2] = {{0}};
  CHECK(run_once(g, in, out) == 0);
  if (out[0].tag == EXEC_V_TENSOR && out[1].tag == EXEC_V_TENSOR) {
    compare_bitwise("add epilogue", out[0].t, kiln_add(x, kiln_mm(a, b)));
    compare_bitwise("broadcast add", out[1].t, kiln_add(kiln_mm(a, b), v));
  }
  exec_value_clear(&out[0]);
  exec_value_clear(&out[1]);
  ir_graph_free(g);
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* Note [Add epilogue], scaled: add(mul(y, s), mm(a, b)) takes s as addmm's
 * beta when s cannot be 0: a constant 0.5 always, a number input only in
 * a lazy graph (numbers_nonzero). Values as unfused, to rounding (one FMA
 * instead of a multiply and an add). */
TEST(fusion_add_epilogue_takes_the_scale) {
  static const char *text = "graph(%y : Float(4, 5, device=cpu),\n"
                            "      %a : Float(4, 3, device=cpu),\n"
                            "      %b : Float(3, 5, device=cpu),\n"
                            "      %s : float):\n"
                            "  %one : int = prim::Constant[value=1]()\n"
                            "  %h : float = prim::Constant[value=0.5]()\n"
                            "  %m : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
                            "  %x : Float(4, 5, device=cpu) = aten::mul(%y, %h)\n"
                            "  %r : Float(4, 5, device=cpu) = aten::add(%x, %m, %one)\n"
                            "  %m2 : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
                            "  %x2 : Float(4, 5, device=cpu) = aten::mul(%y, %s)\n"
                            "  %r2 : Float(4, 5, device=cpu) = aten::add(%m2, %x2, %one)\n"
                            "  return (%r, %r2)\n";
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(9);
  kiln_tensor *y = kiln_randn(2, (int64_t[]){4, 5}, KILN_DTYPE_F32, gen);
  kiln_tensor *a = kiln_randn(2, (int64_t[]){4, 3}, KILN_DTYPE_F32, gen);
  kiln_tensor *b = kiln_randn(2, (int64_t[]){3, 5}, KILN_DTYPE_F32, gen);
  kiln_tensor *want[2] = {kiln_add(kiln_mul_scalar(y, 0.5), kiln_mm(a, b)),
                          kiln_add(kiln_mm(a, b), kiln_mul_scalar(y, 0.75))};
  for (int lazy = 0; lazy < 2; lazy++) {
    ir_graph *g = ir_graph_parse(text, strlen(text));
    CHECK(g && pass_add_epilogue(g, lazy) == 2);
    char *t = g ? ir_graph_print(g, IR_PRINT_NO_SOURCE) : NULL;
    CHECK_STR_CONTAINS(t, "aten::addmm(%y, %a, %b, %h, %one)");
    if (lazy) CHECK_STR_CONTAINS(t, "aten::addmm(%y, %a, %b, %s, %one)");
    else /* %s may be 0 at run time: the plain epilogue only */
      CHECK_STR_CONTAINS(t, "= aten::mul(%y, %s)\n  %13 : Float(4, 5, device=cpu) = "
                            "aten::addmm(%x2, %a, %b, %one, %one)");
    core_free(t);
    exec_value in[4] = {TV(y), TV(a), TV(b), {.tag = EXEC_V_FLOAT, .f = 0.75}}, out[2] = {{0}};
    CHECK(run_once(g, in, out) == 0);
    for (int o = 0; o < 2; o++)
      for (int i = 0; out[o].tag == EXEC_V_TENSOR && i < 20; i++)
        CHECK_NEAR(core_get_flat(out[o].t, i), core_get_flat(want[o], i),
                   1e-6 * (1 + fabs(core_get_flat(want[o], i))));
    exec_value_clear(&out[0]);
    exec_value_clear(&out[1]);
    ir_graph_free(g);
  }
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* Note [GEMM at its product's place]: the momentum addmm runs where the mm
 * was (before the tanh between them) when its addend and beta are defined
 * before the mm; an addend made after the mm, or a write between the two,
 * keeps it at the add. Values as unfused in every case. */
static const char *place_graph(int which) {
  switch (which) {
  case 0: /* %y is an input: the addmm goes to the mm's place */
    return "graph(%y : Float(4, 5, device=cpu), %a : Float(4, 3, device=cpu),\n"
           "      %b : Float(3, 5, device=cpu), %s : float):\n"
           "  %one : int = prim::Constant[value=1]()\n"
           "  %m : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
           "  %t : Float(4, 3, device=cpu) = aten::tanh(%a)\n"
           "  %x : Float(4, 5, device=cpu) = aten::mul(%y, %s)\n"
           "  %r : Float(4, 5, device=cpu) = aten::add(%x, %m, %one)\n"
           "  return (%r, %t)\n";
  case 1: /* the addend is made after the mm: the add's place */
    return "graph(%y : Float(4, 5, device=cpu), %a : Float(4, 3, device=cpu),\n"
           "      %b : Float(3, 5, device=cpu), %s : float):\n"
           "  %one : int = prim::Constant[value=1]()\n"
           "  %m : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
           "  %t : Float(4, 3, device=cpu) = aten::tanh(%a)\n"
           "  %e : Float(4, 5, device=cpu) = aten::exp(%y)\n"
           "  %x : Float(4, 5, device=cpu) = aten::mul(%e, %s)\n"
           "  %r : Float(4, 5, device=cpu) = aten::add(%x, %m, %one)\n"
           "  return (%r, %t)\n";
  default: /* a write between the two: the add's place */
    return "graph(%y : Float(4, 5, device=cpu), %a : Float(4, 3, device=cpu),\n"
           "      %b : Float(3, 5, device=cpu), %s : float):\n"
           "  %one : int = prim::Constant[value=1]()\n"
           "  %m : Float(4, 5, device=cpu) = aten::mm(%a, %b)\n"
           "  %t : Float(4, 5, device=cpu) = aten::relu_(%y)\n"
           "  %x : Float(4, 5, device=cpu) = aten::mul(%y, %s)\n"
           "  %r : Float(4, 5, device=cpu) = aten::add(%x, %m, %one)\n"
           "  return (%r, %t)\n";
  }
}

TEST(fusion_add_epilogue_takes_the_products_place) {
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(10);
  kiln_tensor *y = kiln_randn(2, (int64_t[]){4, 5}, KILN_DTYPE_F32, gen);
  kiln_tensor *a = kiln_randn(2, (int64_t[]){4, 3}, KILN_DTYPE_F32, gen);
  kiln_tensor *b = kiln_randn(2, (int64_t[]){3, 5}, KILN_DTYPE_F32, gen);
  for (int which = 0; which < 3; which++) {
    const char *text = place_graph(which);
    ir_graph *g = ir_graph_parse(text, strlen(text));
    CHECK(g && pass_add_epilogue(g, true) == 1);
    char *t = g ? ir_graph_print(g, IR_PRINT_NO_SOURCE) : NULL;
    const char *am = t ? strstr(t, "aten::addmm(") : NULL;
    const char *mid = t ? strstr(t, which == 2 ? "aten::relu_(" : "aten::tanh(") : NULL;
    CHECK(am && mid);
    if (am && mid) CHECK(which == 0 ? am < mid : am > mid);
    if (which == 0) CHECK(t && !strstr(t, "aten::mul("));
    core_free(t);
    kiln_tensor *yc = kiln_clone(y); /* relu_ writes it */
    exec_value in[4] = {TV(yc), TV(a), TV(b), {.tag = EXEC_V_FLOAT, .f = 0.75}}, out[2] = {{0}};
    kiln_tensor *base = which == 1 ? kiln_exp(y) : which == 2 ? kiln_relu(y) : y;
    kiln_tensor *want = kiln_add(kiln_mul_scalar(base, 0.75), kiln_mm(a, b));
    CHECK(run_once(g, in, out) == 0);
    for (int i = 0; out[0].tag == EXEC_V_TENSOR && i < 20; i++)
      CHECK_NEAR(core_get_flat(out[0].t, i), core_get_flat(want, i),
                 1e-6 * (1 + fabs(core_get_flat(want, i))));
    exec_value_clear(&out[0]);
    exec_value_clear(&out[1]);
    ir_graph_free(g);
  }
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* Horizontal fusion can gather more inputs than the fused executor takes
 * (64): 40 independent adds of distinct pairs, one shape, 80 inputs. The
 * group must still give the right values (it runs unfused). */
TEST(fusion_many_inputs_still_run) {
  enum { N = 40 };
  char text[16384];
  size_t k = 0;
#define EMIT(...) k += (size_t)snprintf(text + k, sizeof text - k, __VA_ARGS__)
  EMIT("graph(");
  for (int i = 0; i < 2 * N; i++) EMIT("%s%%x%d : Float(3, device=cpu)", i ? ",\n      " : "", i);
  EMIT("):\n  %%one : int = prim::Constant[value=1]()\n");
  for (int i = 0; i < N; i++)
    EMIT("  %%y%d : Float(3, device=cpu) = aten::add(%%x%d, %%x%d, %%one)\n", i, 2 * i, 2 * i + 1);
  EMIT("  return (");
  for (int i = 0; i < N; i++) EMIT("%s%%y%d", i ? ", " : "", i);
  EMIT(")\n");
#undef EMIT
  CHECK(k < sizeof text);
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "%s", kiln_last_error());
  if (g) pass_fuse(g);
  exec_value in[2 * N], out[N];
  memset(out, 0, sizeof out);
  for (int i = 0; i < 2 * N; i++) {
    float v[3] = {(float)i, 1.0f, -(float)i};
    int64_t n = 3;
    in[i] = TV(kiln_from_data(v, 1, &n, KILN_DTYPE_F32));
  }
  CHECK_MSG(run_once(g, in, out) == 0, "%s", kiln_last_error());
  for (int i = 0; i < N; i++) {
    CHECK(out[i].tag == EXEC_V_TENSOR);
    if (out[i].tag == EXEC_V_TENSOR) {
      CHECK_NEAR(core_get_flat(out[i].t, 0), 4 * i + 1, 0);
      CHECK_NEAR(core_get_flat(out[i].t, 1), 2, 0);
    }
    exec_value_clear(&out[i]);
  }
  ir_graph_free(g);
  kiln_scope_end();
}

/* y = x*a + b*x*x - 0.5 (the arithmetic chain), fused, as a group. */
static fused_group *arith_group(double c) {
  char text[512];
  snprintf(text, sizeof text,
           "graph(%%x : Tensor, %%a : Tensor, %%b : Tensor):\n"
           "  %%one : int = prim::Constant[value=1]()\n"
           "  %%c : float = prim::Constant[value=%.17g]()\n"
           "  %%1 : Tensor = aten::mul(%%x, %%a)\n"
           "  %%2 : Tensor = aten::mul(%%b, %%x)\n"
           "  %%3 : Tensor = aten::mul(%%2, %%x)\n"
           "  %%4 : Tensor = aten::add(%%1, %%3, %%one)\n"
           "  %%5 : Tensor = aten::sub(%%4, %%c, %%one)\n"
           "  return (%%5)\n",
           c);
  ir_graph *g = ir_graph_parse(text, strlen(text));
  fused_group *f = g ? exec_fused_group_new(g) : NULL;
  ir_graph_free(g);
  return f;
}

/* Runs f on x (a = 1.5, b = -0.25) in the given native mode; a new
 * reference the caller releases. */
static kiln_tensor *run_arith(fused_group *f, kiln_tensor *x, int mode) {
  int prev = exec_fusion_cc_set_mode(mode);
  kiln_dtype dt = kiln_tensor_dtype(x);
  exec_value in[3] = {TV(x), TV(kiln_scalar(1.5, dt)), TV(kiln_scalar(-0.25, dt))};
  exec_value out[1] = {{0}};
  int rc = f ? exec_fused_group_run(f, in, out) : -1;
  exec_fusion_cc_set_mode(prev);
  CHECK_MSG(rc == 0, "arith group: %s", kiln_last_error());
  return rc == 0 ? out[0].t : NULL;
}

/* The expected value of one element, rounded as the ops round. */
static float arith_ref(float x, float c) {
  float t = fmaf(1.0f, (-0.25f * x) * x, x * 1.5f);
  return fmaf(-1.0f, c, t);
}

/* A kernel is compiled natively once its runs have covered FUSION_CC_WORK
 * elements, and then serves every batch size. */
TEST(fusion_native_kernel_built_once_after_enough_work) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(21);
  fused_group *f = arith_group(0.375); /* a constant no other test uses: a new kernel */
  int64_t sizes[4] = {1000, FUSION_CC_WORK - 50000, 70001, 90017};
  int64_t native_after[4] = {0, 0, 1, 1}; /* the third run crosses the threshold */
  int64_t native0 = kiln_fused_kernels_native(), built0 = kiln_fused_kernels_compiled();
  for (int k = 0; k < 4; k++) {
    kiln_tensor *x = kiln_randn(1, &sizes[k], KILN_DTYPE_F32, g);
    kiln_tensor *y = run_arith(f, x, 1);
    CHECK_MSG(kiln_fused_kernels_native() - native0 == native_after[k],
              "run %d: %lld native kernels", k, (long long)(kiln_fused_kernels_native() - native0));
    if (y) {
      const float *px = kiln_tensor_data(x), *py = kiln_tensor_data(y);
      int64_t bad = 0;
      for (int64_t i = 0; i < sizes[k]; i++) bad += py[i] != arith_ref(px[i], 0.375f);
      CHECK_MSG(bad == 0, "run %d: %lld elements differ", k, (long long)bad);
    }
    kiln_release(y);
  }
  /* one kernel for every size: batch size does not recompile */
  CHECK_EQ_INT(kiln_fused_kernels_compiled() - built0, 1);
  exec_fused_group_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Building a new kernel with the Nth allocation failing, for every N until
 * a run meets no failure: each run fails with an error or gives the
 * values; a later run after a failure gives them too (the failed build left
 * no half-made kernel in the cache). kernel_build once wrote through the
 * NULL of its first failed allocation (found by `make fuzz FUZZ_OOM=1`). */
TEST(fusion_kernel_build_survives_every_allocation_failure) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(23);
  int64_t n = 37;
  kiln_tensor *x = kiln_randn(1, &n, KILN_DTYPE_F32, g);
  exec_value in[3] = {TV(x), TV(kiln_scalar(1.5, KILN_DTYPE_F32)),
                      TV(kiln_scalar(-0.25, KILN_DTYPE_F32))};
  int prev = exec_fusion_cc_set_mode(0);
  fused_group *f = arith_group(0.3125); /* a constant no other test uses: a new kernel */
  CHECK(f != NULL);
  int failed = 0, ok = 0;
  for (long at = 1; f && at < 10000; at++) {
    long before = core_alloc_failures();
    core_alloc_fail_at(at);
    exec_value out[1] = {{0}};
    int rc = exec_fused_group_run(f, in, out);
    core_alloc_fail_at(0);
    bool hit = core_alloc_failures() != before;
    if (rc < 0) {
      CHECK_MSG(hit, "at %ld: failed without an allocation failing: %s", at, kiln_last_error());
      CHECK_MSG(kiln_last_error()[0] != 0, "at %ld: failed with no error", at);
      failed++;
    } else {
      const float *px = kiln_tensor_data(x), *py = kiln_tensor_data(out[0].t);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) bad += py[i] != arith_ref(px[i], 0.3125f);
      CHECK_MSG(bad == 0, "at %ld: %lld elements differ", at, (long long)bad);
      kiln_release(out[0].t);
      ok++;
      if (!hit) break;
    }
  }
  CHECK_MSG(failed > 0 && ok > 0, "%d failed runs, %d good ones", failed, ok);
  exec_fusion_cc_set_mode(prev);
  exec_fused_group_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Outputs larger than the last-level cache go through the streaming-store
 * loop (Note [Native stores]), with a tail that is not a whole block. */
TEST(fusion_native_streaming_kernel_matches_tiles) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(22);
  fused_group *f = arith_group(0.4375);
  for (int dbl = 0; dbl < 2; dbl++) {
    kiln_dtype dt = dbl ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
    int64_t n = exec_fusion_llc_bytes() / (dbl ? 8 : 4) + 1037;
    kiln_tensor *x = kiln_randn(1, &n, dt, g);
    kiln_tensor *tiles = run_arith(f, x, 0), *native = run_arith(f, x, 2);
    CHECK(tiles && native);
    if (tiles && native) {
      const char *a = kiln_tensor_data(tiles), *b = kiln_tensor_data(native);
      size_t es = dbl ? 8 : 4;
      int64_t bad = 0, wrong = 0;
      for (int64_t i = 0; i < n; i++) bad += memcmp(a + i * es, b + i * es, es) != 0;
      if (!dbl)
        for (int64_t i = 0; i < n; i++)
          wrong +=
              ((const float *)a)[i] != arith_ref(((const float *)kiln_tensor_data(x))[i], 0.4375f);
      CHECK_MSG(bad == 0 && wrong == 0, "%s: %lld differ from the tiles, %lld from the reference",
                dbl ? "float64" : "float32", (long long)bad, (long long)wrong);
    }
    kiln_release(tiles);
    kiln_release(native);
  }
  exec_fused_group_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Without a compiler the group runs its tile kernels: same values, the
 * failure counted, no error left behind; a source the compiler rejects
 * fails with its message. */
TEST(fusion_native_falls_back_without_compiler) {
  kiln_scope_begin();
  const char *old = getenv("KILN_CC");
  char *saved = old ? strdup(old) : NULL;
  setenv("KILN_CC", "/nonexistent/kiln-no-cc", 1);
  int64_t n = 70001, native0 = kiln_fused_kernels_native(), fail0 = exec_fusion_native_failures();
  kiln_generator *g = kiln_generator_new(23);
  kiln_tensor *x = kiln_randn(1, &n, KILN_DTYPE_F32, g);
  fused_group *f = arith_group(0.625);
  kiln_tensor *y = run_arith(f, x, 2);
  CHECK(y != NULL);
  CHECK(kiln_fused_kernels_native() == native0);
  CHECK_EQ_INT(exec_fusion_native_failures() - fail0, 1);
  if (y) {
    const float *px = kiln_tensor_data(x), *py = kiln_tensor_data(y);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += py[i] != arith_ref(px[i], 0.625f);
    CHECK_EQ_INT(bad, 0);
  }
  kiln_release(y);
  if (saved)
    setenv("KILN_CC", saved, 1);
  else
    unsetenv("KILN_CC");
  free(saved);
  int prev = exec_fusion_cc_set_mode(2);
  fusion_cc_kernel *k = exec_fusion_cc_compile("this is not C\n");
  CHECK(k == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "native fusion:");
  CHECK_STR_CONTAINS(kiln_last_error(), "error");
  exec_fusion_cc_free(k);
  exec_fusion_cc_set_mode(0);
  CHECK(exec_fusion_cc_compile("void kiln_fused(void) {}\n") == NULL); /* off: never compiles */
  CHECK_STR_CONTAINS(kiln_last_error(), "off");
  exec_fusion_cc_set_mode(prev);
  kiln_clear_error();
  exec_fused_group_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* The one file in dir whose name ends with suffix, into path; false if none. */
static bool kept_file(const char *dir, const char *suffix, char *path, size_t cap) {
  DIR *d = opendir(dir);
  bool found = false;
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t n = strlen(e->d_name), m = strlen(suffix);
    if (n > m && !strcmp(e->d_name + n - m, suffix) && !strstr(e->d_name, ".tmp")) {
      snprintf(path, cap, "%s/%s", dir, e->d_name);
      found = true;
    }
  }
  if (d) closedir(d);
  return found;
}

/* Replaces the file at path (a new file renamed over it: the old one may be
 * mapped by a loaded kernel, and truncating a mapped library faults). */
static void overwrite(const char *path, const char *text) {
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s.new", path);
  FILE *f = fopen(tmp, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
  }
}

/* Note [Kernel files]: a compiled kernel is kept and a later compile of the
 * same source loads it without the compiler; a file that will not load is
 * rebuilt, and one whose source differs is never loaded. */
TEST(fusion_native_kernel_files) {
  char dir[] = "/tmp/kiln-test-kernels-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  /* "no compiler": PATH without one (KILN_CC is part of a file's key) */
  const char *old_path = getenv("PATH"), *old_dir = getenv("KILN_CACHE_DIR");
  char *saved_path = old_path ? strdup(old_path) : NULL,
       *saved_dir = old_dir ? strdup(old_dir) : NULL;
  unsetenv("KILN_CC");
  setenv("KILN_CACHE_DIR", dir, 1);
  int prev = exec_fusion_cc_set_mode(2);
  fusion_cc_step st = {op_tile_text(KILN_OP_MUL, KILN_DTYPE_F32),
                       {-1, -1, -1},
                       {0, 1, -1},
                       {0},
                       {"float", "float", NULL}};
  int out_step = 0;
  char *src = exec_fusion_cc_source(&st, 1, &out_step, 1);
  CHECK(src != NULL);
  int64_t loaded0 = exec_fusion_cc_files_loaded();
  fusion_cc_kernel *k1 = src ? exec_fusion_cc_compile(src) : NULL;
  CHECK_MSG(k1 != NULL, "compile: %s", kiln_last_error());
  char so[600] = "", c[600] = "";
  CHECK(kept_file(dir, ".so", so, sizeof so) && kept_file(dir, ".c", c, sizeof c));
  /* without a compiler, from the file */
  setenv("PATH", "/nonexistent", 1);
  fusion_cc_kernel *k2 = src ? exec_fusion_cc_compile(src) : NULL;
  CHECK_MSG(k2 != NULL, "load: %s", kiln_last_error());
  CHECK_EQ_INT(exec_fusion_cc_files_loaded() - loaded0, 1);
  if (k2) {
    float x[37], y[37], z[37];
    for (int i = 0; i < 37; i++) x[i] = 0.5f * (float)i - 3.0f, y[i] = 1.25f - 0.1f * (float)i;
    const void *in[2] = {x, y};
    void *out[1] = {z};
    op_attrs at[1] = {{{0}}};
    exec_fusion_cc_fn(k2)(out, in, 37, at);
    for (int i = 0; i < 37; i++) CHECK(z[i] == x[i] * y[i]);
  }
  /* a file that will not load: removed, and with no compiler, no kernel
   * (unloaded first: dlopen would find a loaded library by its path) */
  exec_fusion_cc_free(k1);
  exec_fusion_cc_free(k2);
  overwrite(so, "not a shared object");
  exec_fusion_cc_set_mode(2);
  CHECK(exec_fusion_cc_compile(src) == NULL);
  CHECK(access(so, F_OK) != 0);
  /* with the compiler back it is rebuilt and kept again */
  setenv("PATH", saved_path ? saved_path : "/usr/bin:/bin", 1);
  exec_fusion_cc_set_mode(2);
  fusion_cc_kernel *k3 = exec_fusion_cc_compile(src);
  CHECK_MSG(k3 != NULL, "rebuild: %s", kiln_last_error());
  CHECK(access(so, F_OK) == 0);
  /* a kept source that differs (a hash collision, a stale file): not used */
  overwrite(c, "/* some other kernel */\n");
  setenv("PATH", "/nonexistent", 1);
  exec_fusion_cc_set_mode(2);
  int64_t loaded1 = exec_fusion_cc_files_loaded();
  CHECK(exec_fusion_cc_compile(src) == NULL);
  CHECK(exec_fusion_cc_files_loaded() == loaded1);
  setenv("PATH", saved_path ? saved_path : "/usr/bin:/bin", 1);
  if (saved_dir)
    setenv("KILN_CACHE_DIR", saved_dir, 1);
  else
    unsetenv("KILN_CACHE_DIR");
  exec_fusion_cc_set_mode(prev);
  kiln_clear_error();
  exec_fusion_cc_free(k3);
  core_free(src);
  unlink(so);
  unlink(c);
  rmdir(dir);
  free(saved_path);
  free(saved_dir);
}

/* A dimensioned one-element input of another dtype (an int64 [1] times a
 * float32 vector): the tile executor spreads it in the step's compute
 * dtype, while a native kernel reads it as an array of its own dtype. */
TEST(fusion_native_one_element_input_of_another_dtype) {
  kiln_scope_begin();
  static const char *text = "graph(%x : Tensor, %c : Tensor):\n"
                            "  %y : Tensor = aten::mul(%x, %c)\n"
                            "  %z : Tensor = aten::mul(%y, %x)\n"
                            "  return (%z)\n";
  ir_graph *g = ir_graph_parse(text, strlen(text));
  fused_group *f = g ? exec_fused_group_new(g) : NULL;
  CHECK(f != NULL);
  int64_t n = 1000, one = 1, three = 3;
  kiln_generator *gen = kiln_generator_new(24);
  kiln_tensor *x = kiln_randn(1, &n, KILN_DTYPE_F32, gen);
  kiln_tensor *c = kiln_from_data(&three, 1, &one, KILN_DTYPE_I64);
  for (int mode = 0; mode <= 2; mode += 2) {
    int prev = exec_fusion_cc_set_mode(mode);
    exec_value in[2] = {TV(x), TV(c)}, out[1] = {{0}};
    CHECK(f && exec_fused_group_run(f, in, out) == 0);
    exec_fusion_cc_set_mode(prev);
    if (out[0].tag == EXEC_V_TENSOR) {
      const float *px = kiln_tensor_data(x), *py = kiln_tensor_data(out[0].t);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) bad += py[i] != (px[i] * 3.0f) * px[i];
      CHECK_MSG(bad == 0, "mode %d: %lld elements differ", mode, (long long)bad);
    }
    exec_value_clear(&out[0]);
  }
  exec_fused_group_free(f);
  ir_graph_free(g);
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* Random chains (ops with tile text and no attributes, inputs of every
 * dtype and of shapes [n], [1], [] and a broadcast [m, 1] against [n]):
 * a native kernel gives exactly the tile executor's values, or both fail
 * alike. A property test for what the per-op samples do not reach
 * (another dtype's one-element input was such a case). */
TEST(fusion_native_random_chains_match_tiles) {
  int ops[KILN_OP_COUNT], n_ops = 0;
  for (int op = 0; op < KILN_OP_COUNT; op++)
    if ((op_table[op].flags & OPF_FUSIBLE) && op_table[op].n_args == op_table[op].n_operands &&
        op_tile_text(op, KILN_DTYPE_F32))
      ops[n_ops++] = op;
  CHECK(n_ops >= 20);
  uint64_t r = 0x9e3779b97f4a7c15ull;
#define RND(k) ((int)((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (k))
  kiln_generator *gen = kiln_generator_new(25);
  int compared = 0, native_runs = 0;
  for (int trial = 0; trial < 100; trial++) {
    kiln_scope_begin();
    /* inputs */
    int n_in = 2 + RND(2);
    exec_value in[3];
    for (int i = 0; i < n_in; i++) {
      static const int64_t shapes[4][2] = {{6, 7}, {1, 0}, {0, 0}, {6, 1}};
      int sh = RND(4);
      int nd = sh == 0 || sh == 3 ? 2 : sh == 1 ? 1 : 0;
      kiln_tensor *t = kiln_mul_scalar(kiln_randn(nd, shapes[sh], KILN_DTYPE_F64, gen), 3.0);
      int dt = RND(4);
      if (dt == KILN_DTYPE_BOOL)
        t = kiln_gt(t, kiln_scalar(0.0, KILN_DTYPE_F64));
      else
        t = kiln_to_dtype(t, (kiln_dtype)dt);
      in[i] = TV(t);
    }
    /* a chain: each step reads inputs or earlier steps */
    char text[2048];
    int len = 0, n_steps = 2 + RND(4);
    len += snprintf(text + len, sizeof text - (size_t)len, "graph(");
    for (int i = 0; i < n_in; i++)
      len += snprintf(text + len, sizeof text - (size_t)len, "%s%%i%d : Tensor", i ? ", " : "", i);
    len += snprintf(text + len, sizeof text - (size_t)len, "):\n");
    for (int s = 0; s < n_steps; s++) {
      int op = ops[RND(n_ops)];
      len += snprintf(text + len, sizeof text - (size_t)len, "  %%s%d : Tensor = %s(", s,
                      op_table[op].name);
      for (int a = 0; a < op_table[op].n_operands; a++) {
        int pick = RND(n_in + s);
        len += snprintf(text + len, sizeof text - (size_t)len, "%s%%%c%d", a ? ", " : "",
                        pick < n_in ? 'i' : 's', pick < n_in ? pick : pick - n_in);
      }
      len += snprintf(text + len, sizeof text - (size_t)len, ")\n");
    }
    snprintf(text + len, sizeof text - (size_t)len, "  return (%%s%d)\n", n_steps - 1);
    ir_graph *g = ir_graph_parse(text, strlen(text));
    fused_group *f = g ? exec_fused_group_new(g) : NULL;
    CHECK_MSG(f != NULL, "%s: %s", text, kiln_last_error());
    exec_value out[2][1] = {{{0}}, {{0}}};
    int rc[2];
    int64_t native0 = kiln_fused_kernels_native();
    for (int m = 0; m < 2; m++) {
      int prev = exec_fusion_cc_set_mode(m ? 2 : 0);
      rc[m] = f ? exec_fused_group_run(f, in, out[m]) : -1;
      exec_fusion_cc_set_mode(prev);
      kiln_clear_error();
    }
    native_runs += kiln_fused_kernels_native() > native0;
    CHECK_MSG((rc[0] == 0) == (rc[1] == 0), "%s: tiles %d, native %d", text, rc[0], rc[1]);
    if (rc[0] == 0 && rc[1] == 0 && out[0][0].tag == EXEC_V_TENSOR &&
        out[1][0].tag == EXEC_V_TENSOR) {
      compare_bitwise(text, out[1][0].t, out[0][0].t);
      compared++;
    }
    exec_value_clear(&out[0][0]);
    exec_value_clear(&out[1][0]);
    exec_fused_group_free(f);
    ir_graph_free(g);
    kiln_scope_end();
  }
#undef RND
  kiln_generator_free(gen);
  CHECK_MSG(compared >= 50 && native_runs >= 25, "%d chains compared, %d native", compared,
            native_runs);
  test_note("%d random chains compared, %d with a new native kernel", compared, native_runs);
}
