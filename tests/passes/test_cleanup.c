/* tests/passes/test_cleanup.c: the cleanup pipeline (fixpoint of
 * constant folding, peepholes, CSE and DCE) on hand-written graphs and on
 * the TorchScript corpus (tests/data/ir), checked against the interpreter;
 * pass_run by name; KILN_JIT_LOG for passes and pipelines, KILN_LOG. */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "passes/pipeline.h"

TEST(pass_cleanup_header_example) {
  th_expect("cleanup example", pass_cleanup,
            "graph(%x : Float(2)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %a : Float(2) = aten::mul(%x, %1)\n"
            "  %b : Float(2) = aten::relu(%a)\n"
            "  %c : Float(2) = aten::relu(%x)\n"
            "  %d : Float(2) = aten::add(%b, %c, %1)\n"
            "  return (%d)\n",
            "graph(%x : Float(2)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %b : Float(2) = aten::relu(%x)\n"
            "  %d : Float(2) = aten::add(%b, %b, %1)\n"
            "  return (%d)\n",
            -1);
}

TEST(pass_cleanup_composite) {
  /* sizes fold into a constant condition, the If inlines, the view's size
   * list becomes a constant, x * 1 and the duplicate tanh go, and so does
   * everything dead */
  th_expect("cleanup composite", pass_cleanup,
            "graph(%x : Double(4, 3),\n"
            "      %w : Double(3, 2)):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %n : int = aten::size(%x, %0)\n"
            "  %c : bool = aten::gt(%n, %1)\n"
            "  %y : Tensor = prim::If(%c)\n"
            "    block0():\n"
            "      %mm : Double(4, 2) = aten::mm(%x, %w)\n"
            "      %one : Double(4, 2) = aten::mul(%mm, %1)\n"
            "      -> (%one)\n"
            "    block1():\n"
            "      -> (%x)\n"
            "  %t1 : Tensor = aten::tanh(%y)\n"
            "  %t2 : Tensor = aten::tanh(%y)\n"
            "  %s : Tensor = aten::add(%t1, %t2, %1)\n"
            "  %sz : int[] = prim::ListConstruct(%m1)\n"
            "  %v : Tensor = aten::view(%s, %sz)\n"
            "  %unused : Tensor = aten::exp(%v)\n"
            "  return (%v)\n",
            "graph(%x : Double(4, 3),\n"
            "      %w : Double(3, 2)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %mm : Double(4, 2) = aten::mm(%x, %w)\n"
            "  %t1 : Tensor = aten::tanh(%mm)\n"
            "  %s : Tensor = aten::add(%t1, %t1, %1)\n"
            "  %18 : int[] = prim::Constant[value=[-1]]()\n"
            "  %v : Tensor = aten::view(%s, %18)\n"
            "  return (%v)\n",
            -1);
}

TEST(pass_cleanup_semantics_loops_and_ints) {
  /* int arithmetic in a loop, a branch on an input, list sizes: compared
   * with the interpreter on random inputs */
  static const char *text =
      "graph(%x : Float(3, 4),\n"
      "      %n : int,\n"
      "      %flag : bool):\n"
      "  %t : bool = prim::Constant[value=1]()\n"
      "  %0 : int = prim::Constant[value=0]()\n"
      "  %1 : int = prim::Constant[value=1]()\n"
      "  %2 : int = prim::Constant[value=2]()\n"
      "  %h : float = prim::Constant[value=0.5]()\n"
      "  %f1 : float = prim::Constant[value=1.]()\n"
      "  %m1 : int = prim::Constant[value=-1]()\n"
      "  %k : int = aten::mul(%2, %2)\n"
      "  %y : Float(3, 4), %cnt : int = prim::Loop(%n, %t, %x, %0)\n"
      "    block0(%i : int, %acc : Float(3, 4), %c : int):\n"
      "      %r : int = aten::remainder(%i, %2)\n"
      "      %e : bool = aten::eq(%r, %0)\n"
      "      %a2 : Float(3, 4) = prim::If(%e)\n"
      "        block0():\n"
      "          %p : Float(3, 4) = aten::mul(%acc, %h)\n"
      "          %q : Float(3, 4) = aten::mul(%p, %f1)\n"
      "          -> (%q)\n"
      "        block1():\n"
      "          %p2 : Float(3, 4) = aten::mul(%acc, %h)\n"
      "          %q2 : Float(3, 4) = aten::add(%p2, %x, %1)\n"
      "          -> (%q2)\n"
      "      %c2 : int = aten::add(%c, %k)\n"
      "      -> (%t, %a2, %c2)\n"
      "  %z : Float(3, 4) = prim::If(%flag)\n"
      "    block0():\n"
      "      %s : int = aten::size(%y, %1)\n"
      "      %sf : float = aten::Float(%s)\n"
      "      %z1 : Float(3, 4) = aten::mul(%y, %sf)\n"
      "      -> (%z1)\n"
      "    block1():\n"
      "      %z2 : Float(3, 4) = aten::sub(%y, %0, %1)\n"
      "      -> (%z2)\n"
      "  %sz : int[] = aten::size(%z)\n"
      "  %last : int = aten::__getitem__(%sz, %m1)\n"
      "  %out : (Tensor, int, int) = prim::TupleConstruct(%z, %cnt, %last)\n"
      "  return (%out)\n";
  ir_graph *a = th_parse(text);
  ir_graph *b = a ? ir_graph_clone(a) : NULL;
  int rc = b ? pass_cleanup(b) : -1;
  CHECK_MSG(rc > 0, "cleanup: %d", rc);
  CHECK(b && ir_graph_verify(b) == 0);
  char *after = b ? th_print(b) : NULL;
  /* %k, the size query, Float(), the list and __getitem__ folded; x * 1.0
   * gone; y - 0 gone; the duplicate acc * 0.5 stays (sibling blocks) */
  CHECK(after && !strstr(after, "aten::size") && !strstr(after, "aten::Float") &&
        !strstr(after, "__getitem__") && !strstr(after, "aten::sub"));
  CHECK_STR_CONTAINS(after, "prim::Constant[value=4]()");
  CHECK_STR_CONTAINS(after, "%c2 : int = aten::add(%c, %");
  core_free(after);
  if (a && b) {
    kiln_generator *gen = kiln_generator_new(7);
    for (int r = 0; r < 8; r++) {
      exec_value in[3];
      if (!th_random_inputs(a, gen, in)) break;
      in[1].i = r % 4; /* trip counts 0..3 */
      in[2].b = r & 1;
      CHECK_MSG(th_check_same("cleanup semantics", a, b, in), "run %d failed: %s", r,
                kiln_last_error());
      for (int i = 0; i < 3; i++) exec_value_clear(&in[i]);
    }
    kiln_generator_free(gen);
  }
  ir_graph_free(a);
  ir_graph_free(b);
}

TEST(pass_run_by_name) {
  static const char *text = "graph(%x : Float(2)):\n"
                            "  %a : Float(2) = aten::relu(%x)\n"
                            "  %b : Float(2) = aten::relu(%x)\n"
                            "  return (%a)\n";
  ir_graph *g = th_parse(text);
  if (!g) return;
  CHECK_EQ_INT(pass_run(g, "constant_fold"), 0);
  CHECK_EQ_INT(pass_run(g, "peephole"), 0);
  CHECK_EQ_INT(pass_run(g, "dce"), 1);
  CHECK_EQ_INT(pass_run(g, "cse"), 0);
  CHECK_EQ_INT(pass_run(g, "cleanup"), 0);
  CHECK(pass_run(g, "fuse_everything") == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "pass_run: unknown pass 'fuse_everything'");
  CHECK(pass_run(g, NULL) == KILN_ERR_INVALID);
  ir_graph_free(g);
}

/* Runs fn with stderr going to a temporary file; returns what was written
 * (malloc'd). */
static char *capture_stderr(void (*fn)(void *), void *ud) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  if (!tmp) return NULL;
  int saved = dup(fileno(stderr));
  dup2(fileno(tmp), fileno(stderr));
  fn(ud);
  fflush(stderr);
  dup2(saved, fileno(stderr));
  close(saved);
  long n = ftell(tmp);
  char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
  rewind(tmp);
  size_t got = s && n > 0 ? fread(s, 1, (size_t)n, tmp) : 0;
  if (s) s[got] = 0;
  fclose(tmp);
  return s;
}

static void run_cleanup(void *g) { pass_cleanup(g); }

static void run_diff_forward(void *g) {
  pass_opts o = {.fusion = true, .min_subgraph_size = 2};
  pass_pipeline_run(g, &pass_pipeline_diff_forward, &o);
}

/* Note [Pass logging] for pipelines: one runner logs a pipeline before and
 * after, and each step it names; nested pipelines under their own name;
 * KILN_LOG is parsed by the same rule (Note [Log variables]). */
TEST(pass_pipeline_logs_steps_and_pipelines) {
  char *old = getenv("KILN_JIT_LOG") ? strdup(getenv("KILN_JIT_LOG")) : NULL;
  ir_graph *g = th_parse("graph(%x : Float(4)):\n"
                         "  %a : Float(4) = aten::relu(%x)\n"
                         "  %b : Float(4) = aten::relu(%x)\n"
                         "  %c : Float(4) = aten::sigmoid(%a)\n"
                         "  %d : Float(4) = aten::tanh(%c)\n"
                         "  return (%d)\n");
  if (g) {
    setenv("KILN_JIT_LOG", "diff_forward, fuse,cleanup", 1);
    char *out = capture_stderr(run_diff_forward, g);
    CHECK_STR_CONTAINS(out, "[kiln-jit] before diff_forward:\ngraph(%x : Float(4)):\n"
                            "  %a : Float(4) = aten::relu(%x)\n  %b : Float(4)");
    CHECK_STR_CONTAINS(out, "[kiln-jit] after cleanup:\n");
    CHECK_STR_CONTAINS(out, "[kiln-jit] after fuse:\n");
    CHECK_STR_CONTAINS(out, "prim::FusionGroup");
    CHECK_STR_CONTAINS(out, "[kiln-jit] after diff_forward:\n");
    CHECK_STR_CONTAINS(out, "[kiln-jit] before cleanup:\n");
    CHECK(out && !strstr(out, "after dce") && !strstr(out, "after gemm_epilogue"));
    /* the order: cleanup's end, then fuse, then the pipeline's end */
    const char *c = out ? strstr(out, "after cleanup") : NULL, *f = c ? strstr(c, "after fuse") : NULL;
    CHECK(f && strstr(f, "after diff_forward"));
    free(out);
  }
  ir_graph_free(g);
  setenv("KILN_LOG", " recompiles ,other", 1);
  CHECK(core_log_enabled("KILN_LOG", "recompiles") && core_log_enabled("KILN_LOG", "other"));
  CHECK(!core_log_enabled("KILN_LOG", "recompile") && !core_log_enabled("KILN_JIT_LOG_X", "a"));
  unsetenv("KILN_LOG");
  if (old) {
    setenv("KILN_JIT_LOG", old, 1);
    free(old);
  } else {
    unsetenv("KILN_JIT_LOG");
  }
}

TEST(pass_log_env) {
  char *old = getenv("KILN_JIT_LOG") ? strdup(getenv("KILN_JIT_LOG")) : NULL;
  unsetenv("KILN_JIT_LOG");
  CHECK(!pass_log_enabled("dce"));
  setenv("KILN_JIT_LOG", "cse, dce", 1);
  CHECK(pass_log_enabled("dce") && pass_log_enabled("cse"));
  CHECK(!pass_log_enabled("peephole") && !pass_log_enabled("dc") && !pass_log_enabled("c"));
  setenv("KILN_JIT_LOG", "constant_fold", 1);
  CHECK(pass_log_enabled("constant_fold") && !pass_log_enabled("constant"));
  setenv("KILN_JIT_LOG", "all", 1);
  CHECK(pass_log_enabled("anything"));
  setenv("KILN_JIT_LOG", "", 1);
  CHECK(!pass_log_enabled("dce"));

  ir_graph *g = th_parse("graph(%x : Float(2)):\n"
                         "  %a : Float(2) = aten::relu(%x)\n"
                         "  %b : Float(2) = aten::relu(%x)\n"
                         "  return (%a)\n");
  if (g) {
    setenv("KILN_JIT_LOG", "dce,cleanup", 1);
    char *out = capture_stderr(run_cleanup, g);
    CHECK_STR_CONTAINS(out, "[kiln-jit] after dce:\ngraph(%x : Float(2)):\n"
                            "  %a : Float(2) = aten::relu(%x)\n  return (%a)\n");
    CHECK_STR_CONTAINS(out, "[kiln-jit] after cleanup:\ngraph(");
    CHECK(out && !strstr(out, "after cse") && !strstr(out, "after peephole"));
    free(out);
    unsetenv("KILN_JIT_LOG");
    out = capture_stderr(run_cleanup, g);
    CHECK(out && out[0] == 0);
    free(out);
  }
  ir_graph_free(g);
  if (old) {
    setenv("KILN_JIT_LOG", old, 1);
    free(old);
  }
}

/* ---- the corpus ------------------------------------------------------------------------ */

#define CORPUS "tests/data/ir/"

/* The corpus inputs of graph `name`: in<k>.npy for tensors, the literal
 * from meta.json's "args" otherwise. false if something is missing. */
static bool corpus_inputs(const char *name, const ir_graph *g, exec_value *in) {
  char path[512];
  const ir_block *top = ir_graph_top(g);
  int n = ir_block_n_params(top);
  snprintf(path, sizeof path, CORPUS "%s/meta.json", name);
  json_t *meta = json_load_file(path, 0, NULL);
  json_t *args = meta ? json_object_get(meta, "args") : NULL;
  bool ok = args && json_is_array(args) && (int)json_array_size(args) == n;
  for (int k = 0; k < n; k++) in[k] = EXEC_NONE;
  for (int k = 0; ok && k < n; k++) {
    const ir_type *t = ir_block_param(top, k)->type;
    const char *lit = json_string_value(json_array_get(args, (size_t)k));
    if (!lit) {
      ok = false;
    } else if (t->kind == IR_TYPE_TENSOR) {
      snprintf(path, sizeof path, CORPUS "%s/%s", name, lit);
      kiln_tensor *x = kiln_npy_load(path);
      in[k] = (exec_value){.tag = x ? EXEC_V_TENSOR : EXEC_V_NONE, .t = x};
      ok = x != NULL;
    } else if (t->kind == IR_TYPE_INT) {
      in[k] = (exec_value){.tag = EXEC_V_INT, .i = strtoll(lit, NULL, 10)};
    } else if (t->kind == IR_TYPE_FLOAT) {
      in[k] = (exec_value){.tag = EXEC_V_FLOAT, .f = strtod(lit, NULL)};
    } else if (t->kind == IR_TYPE_BOOL) {
      in[k] = (exec_value){.tag = EXEC_V_BOOL, .b = strcmp(lit, "true") == 0 ||
                                                   strcmp(lit, "True") == 0 || strcmp(lit, "1") == 0};
    } else {
      ok = false;
    }
  }
  json_decref(meta);
  if (!ok)
    for (int k = 0; k < n; k++) exec_value_clear(&in[k]);
  return ok;
}

/* Gives every tensor input of g the complete type of its corpus input. */
static void specialize_inputs(ir_graph *g, const exec_value *in) {
  ir_block *top = ir_graph_top(g);
  for (int k = 0; k < ir_block_n_params(top); k++) {
    if (in[k].tag != EXEC_V_TENSOR) continue;
    const kiln_tensor *x = in[k].t;
    const ir_type *t = ir_type_tensor_new(g, x->dtype, x->ndim, x->shape, NULL, -1, "cpu");
    if (t) ir_block_param(top, k)->type = t;
  }
}

/* Each pass alone, then the pipeline: the graph verifies after each.
 * Returns the number of changes. */
static int passes_keep_valid(const char *name, ir_graph *g) {
  static const char *const names[] = {"constant_fold", "peephole", "cse", "dce", "cleanup"};
  int total = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    int rc = pass_run(g, names[i]);
    CHECK_MSG(rc >= 0, "%s: %s: %s", name, names[i], kiln_last_error());
    CHECK_MSG(ir_graph_verify(g) == 0, "%s: after %s: %s", name, names[i], kiln_last_error());
    total += rc > 0 ? rc : 0;
  }
  /* a second cleanup finds nothing left to do */
  CHECK_MSG(pass_cleanup(g) == 0, "%s: cleanup is not at a fixpoint", name);
  char *text = th_print(g);
  ir_graph *again = text ? ir_graph_parse(text, strlen(text)) : NULL;
  CHECK_MSG(again != NULL, "%s: the cleaned graph does not parse: %s", name, kiln_last_error());
  ir_graph_free(again);
  core_free(text);
  return total;
}

TEST(pass_cleanup_corpus) {
  DIR *d = opendir(CORPUS);
  if (!d) {
    test_note("no " CORPUS ": skipped");
    return;
  }
  int n_graphs = 0, n_ran = 0, n_changed = 0, n_changed_typed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l <= 3 || l > 100 || strcmp(e->d_name + l - 3, ".ir") != 0) continue;
    char name[128], path[512];
    memcpy(name, e->d_name, l - 3);
    name[l - 3] = 0;
    snprintf(path, sizeof path, CORPUS "%.200s", e->d_name);
    char *text = test_read_file(path, NULL);
    ir_graph *orig = text ? ir_graph_parse(text, strlen(text)) : NULL;
    free(text);
    if (!orig) continue; /* the corpus test reports graphs that do not parse */
    n_graphs++;
    ir_graph *plain = ir_graph_clone(orig), *typed = ir_graph_clone(orig);
    exec_value in[32];
    bool have_inputs = ir_block_n_params(ir_graph_top(orig)) <= 32 && corpus_inputs(name, orig, in);
    if (have_inputs) specialize_inputs(typed, in);
    n_changed += passes_keep_valid(name, plain) > 0;
    n_changed_typed += passes_keep_valid(name, typed) > 0;
    if (have_inputs) {
      char what[200];
      snprintf(what, sizeof what, "corpus %s (cleanup)", name);
      if (th_check_same(what, orig, plain, in)) n_ran++;
      snprintf(what, sizeof what, "corpus %s (typed cleanup)", name);
      th_check_same(what, orig, typed, in);
      for (int k = 0; k < ir_block_n_params(ir_graph_top(orig)); k++) exec_value_clear(&in[k]);
    }
    ir_graph_free(orig);
    ir_graph_free(plain);
    ir_graph_free(typed);
  }
  closedir(d);
  test_note("%d corpus graphs, %d compared with the interpreter; cleanup changed %d as "
            "printed, %d with input types from their inputs",
            n_graphs, n_ran, n_changed, n_changed_typed);
}

/* Every allocation a pass makes may fail: the pass then returns < 0 and
 * leaves a valid graph (and, under SAN, leaks nothing). */
TEST(pass_cleanup_out_of_memory) {
  static const char *text =
      "graph(%x : Float(2, 3),\n"
      "      %c : bool,\n"
      "      %n : int):\n"
      "  %t : bool = prim::Constant[value=1]()\n"
      "  %0 : int = prim::Constant[value=0]()\n"
      "  %1 : int = prim::Constant[value=1]()\n"
      "  %s : int = aten::size(%x, %0)\n"
      "  %k : int = aten::mul(%s, %1)\n"
      "  %l : int[] = prim::ListConstruct(%k, %1)\n"
      "  %a : Float(2, 3) = aten::mul(%x, %1)\n"
      "  %b : Float(2, 3) = aten::relu(%a)\n"
      "  %b2 : Float(2, 3) = aten::relu(%x)\n"
      "  %y : Float(2, 3), %u : int = prim::Loop(%n, %t, %b, %k)\n"
      "    block0(%i : int, %acc : Float(2, 3), %kk : int):\n"
      "      %e : Float(2, 3) = aten::exp(%acc)\n"
      "      %kk2 : int = aten::add(%kk, %1)\n"
      "      -> (%t, %e, %kk2)\n"
      "  %z : Float(2, 3) = prim::If(%t)\n"
      "    block0():\n"
      "      %p : Float(2, 3) = aten::add(%y, %b2, %1)\n"
      "      -> (%p)\n"
      "    block1():\n"
      "      -> (%y)\n"
      "  %tu : (Tensor, int[]) = prim::TupleConstruct(%z, %l)\n"
      "  %q : Tensor, %r : int[] = prim::TupleUnpack(%tu)\n"
      "  %w : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      -> (%q)\n"
      "    block1():\n"
      "      -> (%x)\n"
      "  return (%w, %r)\n";
  static int (*const passes[])(ir_graph *) = {pass_constant_fold, pass_peephole, pass_cse,
                                              pass_dce, pass_cleanup};
  ir_graph *orig = th_parse(text);
  if (!orig) return;
  for (size_t p = 0; p < sizeof passes / sizeof *passes; p++) {
    int failures = 0;
    long allocs = 0;
    for (long k = 1; k < 100000; k++) {
      ir_graph *g = ir_graph_clone(orig);
      if (!g) break;
      core_alloc_fail_at(k);
      int rc = passes[p](g);
      long made = core_alloc_fail_at(0);
      if (k == 1) allocs = made;
      CHECK_MSG(ir_graph_verify(g) == 0, "pass %zu, failing allocation %ld: %s", p, k,
                kiln_last_error());
      if (rc < 0) {
        failures++;
        CHECK(rc == KILN_ERR_NOMEM);
      }
      ir_graph_free(g);
      if (made < k) { /* the k-th allocation never came: the pass is done */
        CHECK_MSG(rc >= 0, "pass %zu: %d", p, rc);
        break;
      }
    }
    CHECK_MSG(allocs == 0 || failures > 0, "pass %zu never failed", p);
  }
  ir_graph_free(orig);
}
