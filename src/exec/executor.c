/* src/exec/executor.c: the profiling graph executor.
 *
 * Per call:
 *   1. while profiling runs remain, run the graph with prim::profile before
 *      every tensor use (pass_insert_profiles); each profile merges what it
 *      sees (dtype, shape, requires_grad, seen) over calls and loop
 *      iterations;
 *   2. then optimize once: pass_pipeline_optimize (src/passes/pipeline.c)
 *      specializes types from the profiles, groups differentiable nodes
 *      into DifferentiableGraphs (only if something may require grad),
 *      guards each with RequiresGradCheck + If whose else-branch is a
 *      fallback function (an executor of its own, one bailout level lower),
 *      runs CSE and DCE, and fuses; the compile hook below installs the
 *      group kinds. Each DifferentiableGraph is differentiated when it first
 *      runs with complete types (diffgraph.c);
 *   3. run the optimized plan.
 * The plan, for a graph computing tanh(x @ w + b) where x requires grad:
 *   before: %4 = aten::matmul(%x, %w); %5 = aten::add(%4, %b, %1)
 *           %6 = aten::tanh(%5); return (%6)
 *   after:  %x.2 : Float(8, 4, requires_grad=1), ..., %ok = prim::RequiresGradCheck(%x, %w, %b)
 *           %6 = prim::If(%ok)
 *             block0(): %r = prim::DifferentiableGraph_0(%x.2, %w.2, %b.2) -> (%r)
 *             block1(): %f = prim::FallbackGraph_1(%x, %w, %b) -> (%f)
 *           return (%6)
 * and with no input requiring grad (the no-grad plan) the nodes stay
 * where they are and elementwise runs become FusionGroups:
 *   after:  %4 = aten::matmul(%x, %w); %6 = prim::FusionGroup_0(%4, %b); return (%6)
 * At bailout depth 0 a function runs its graph unprofiled
 * (pass_pipeline_unprofiled). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "fusion.h"

#include "passes/pipeline.h"

void kiln_function_options_default(kiln_function_options *o) {
  o->profiling_runs = 1;
  o->bailout_depth = 20;
  o->min_subgraph_size = 2;
  o->fusion = true;
}

exec_function *exec_function_new(const ir_graph *g, const kiln_function_options *o, int depth,
                                 int level, exec_function *root) {
  exec_function *f = core_calloc(1, sizeof *f);
  if (!f) return NULL;
  if (o) f->opts = *o;
  else kiln_function_options_default(&f->opts);
  f->depth = depth;
  f->level = level;
  f->root = root ? root : f;
  f->runs_left = f->opts.profiling_runs;
  f->graph = ir_graph_clone(g);
  if (!f->graph || pass_cleanup(f->graph) < 0) {
    ir_graph_free(f->graph);
    core_free(f);
    return NULL;
  }
  return f;
}

static void free_plan(exec_function *f) {
  exec_code_free(f->opt_code);
  f->opt_code = NULL;
  ir_graph_free(f->optimized);
  f->optimized = NULL;
  for (int i = 0; i < f->n_children; i++) exec_function_free(f->children[i]);
  core_free(f->children);
  f->children = NULL;
  f->n_children = 0;
  for (int i = 0; i < f->n_diffs; i++) exec_diff_rt_free(f->diffs[i]);
  core_free(f->diffs);
  f->diffs = NULL;
  f->n_diffs = 0;
  for (int i = 0; i < f->n_guards; i++) {
    core_free(f->guards[i]->assumed);
    core_free(f->guards[i]);
  }
  core_free(f->guards);
  f->guards = NULL;
  f->n_guards = 0;
}

void exec_function_free(exec_function *f) {
  if (!f) return;
  free_plan(f);
  exec_code_free(f->profiling_code);
  exec_code_free(f->simple_code);
  ir_graph_free(f->profiled);
  ir_graph_free(f->graph);
  core_free(f->records);
  for (int i = 0; i < f->n_reasons; i++) core_free(f->reasons[i]);
  core_free(f->reasons);
  core_free(f);
}

void exec_function_note_reason(exec_function *f, const char *reason) {
  exec_function *r = f->root;
  if (r->n_reasons >= 1024) return;
  char **v = core_realloc(r->reasons, (size_t)(r->n_reasons + 1) * sizeof *v);
  if (!v) return;
  r->reasons = v;
  if ((v[r->n_reasons] = core_strdup(reason))) r->n_reasons++;
}

/* ---- profiling ---------------------------------------------------------------- */

static int p_profile(const exec_instr *x, exec_value *in, exec_value *out) {
  prof_record *r = x->k.obj;
  if (in[0].tag == EXEC_V_NONE) {
    r->seen_none = true;
  } else if (in[0].tag == EXEC_V_TENSOR) {
    const kiln_tensor *t = in[0].t;
    int rg = kiln_requires_grad(t) && kiln_is_grad_enabled();
    if (!r->seen) {
      r->seen = true;
      r->dtype = t->dtype;
      r->ndim = t->ndim;
      r->requires_grad = rg;
      for (int i = 0; i < t->ndim; i++) r->sizes[i] = t->shape[i];
    } else {
      if (r->dtype != (int)t->dtype) r->dtype = -1;
      if (r->requires_grad != rg) r->requires_grad = -1;
      if (r->ndim != t->ndim) r->ndim = -1;
      for (int i = 0; r->ndim > 0 && i < r->ndim; i++)
        if (r->sizes[i] != t->shape[i]) r->sizes[i] = -1;
    }
  }
  out[0] = exec_value_copy(&in[0]);
  return 0;
}

static int count_profiles(const ir_block *b) {
  int n = 0;
  for (const ir_node *x = b->first; x; x = x->next) {
    for (int i = 0; i < x->n_blocks; i++) n += count_profiles(x->blocks[i]);
    n += x->prim == IR_PRIM_PROFILE;
  }
  return n;
}

typedef struct compile_ctx {
  exec_function *f;
  int next_record;
  bool profiling;
} compile_ctx;

/* ---- guards and fallbacks --------------------------------------------------------- */

static int p_requires_grad_check(const exec_instr *x, exec_value *in, exec_value *out) {
  guard_rt *g = x->k.obj;
  exec_function *f = g->owner;
  bool grad_on = kiln_is_grad_enabled(), any = false, ok = true;
  char why[256] = "";
  for (int i = 0; i < g->n; i++) {
    bool rg = in[i].tag == EXEC_V_TENSOR && kiln_requires_grad(in[i].t) && grad_on;
    any |= rg;
    if (rg && !g->assumed[i] && ok) {
      ok = false;
      snprintf(why, sizeof why,
               "DifferentiableGraph_%d: input %d requires grad, but the graph assumed it "
               "does not",
               g->index, i);
    }
  }
  if (ok && !grad_on) {
    ok = false;
    snprintf(why, sizeof why, "DifferentiableGraph_%d: grad mode is off (no_grad)", g->index);
  } else if (ok && !any) {
    ok = false;
    snprintf(why, sizeof why, "DifferentiableGraph_%d: no input requires grad", g->index);
  }
  for (int i = 0; i < g->n; i++) out[i] = exec_value_copy(&in[i]);
  out[g->n] = (exec_value){.tag = EXEC_V_BOOL, .b = ok};
  if (ok) f->guard_passes++;
  else {
    f->guard_failures++;
    exec_function_note_reason(f, why);
  }
  return 0;
}

static int p_call_fallback(const exec_instr *x, exec_value *in, exec_value *out) {
  return exec_function_run((exec_function *)x->k.obj, in, out);
}

static int compile_hook(void *ud, exec_code *code, const ir_node *n, exec_instr *x) {
  compile_ctx *c = ud;
  exec_function *f = c->f;
  switch (n->prim) {
  case IR_PRIM_FUSION_GROUP: return exec_fusion_compile_hook(NULL, code, n, x);
  case IR_PRIM_PROFILE: {
    if (!c->profiling || n->n_inputs != 1) {
      x->prim = exec_prim_impl[IR_PRIM_PROFILE];
      return 0;
    }
    prof_record *r = &f->records[c->next_record++];
    r->node = (ir_node *)n;
    x->prim = p_profile;
    x->k = (exec_value){.tag = EXEC_V_OBJ, .obj = r};
    return 0;
  }
  case IR_PRIM_REQUIRES_GRAD_CHECK: {
    guard_rt *g = core_calloc(1, sizeof *g);
    guard_rt **v = core_realloc(f->guards, (size_t)(f->n_guards + 1) * sizeof *v);
    if (v) f->guards = v; /* realloc may have moved it even when g failed */
    if (!g || !v) {
      core_free(g);
      return KILN_ERR_NOMEM;
    }
    f->guards = v;
    v[f->n_guards++] = g;
    g->owner = f;
    g->n = n->n_inputs;
    g->index = f->n_diffs;
    g->assumed = core_calloc((size_t)(g->n ? g->n : 1), sizeof *g->assumed);
    if (!g->assumed) return KILN_ERR_NOMEM;
    const ir_attr *a = ir_node_attr(n, "types");
    for (int i = 0; i < g->n; i++)
      g->assumed[i] = a && a->kind == IR_ATTR_TYPES && i < a->types.n
                          ? a->types.v[i]->requires_grad != 0
                          : true;
    x->prim = p_requires_grad_check;
    x->k = (exec_value){.tag = EXEC_V_OBJ, .obj = g};
    return 0;
  }
  case IR_PRIM_DIFFERENTIABLE_GRAPH: {
    const ir_attr *a = ir_node_attr(n, "Subgraph");
    if (!a || a->kind != IR_ATTR_GRAPH)
      return core_error(KILN_ERR_INVALID, "prim::DifferentiableGraph without a Subgraph");
    diff_rt *d = exec_diff_rt_new(a->g, n, f->opts.fusion);
    diff_rt **v = d ? core_realloc(f->diffs, (size_t)(f->n_diffs + 1) * sizeof *v) : NULL;
    if (!v) {
      exec_diff_rt_free(d);
      return -1;
    }
    f->diffs = v;
    v[f->n_diffs++] = d;
    x->prim = exec_diff_rt_prim;
    x->k = (exec_value){.tag = EXEC_V_OBJ, .obj = d};
    return 0;
  }
  case IR_PRIM_FALLBACK_GRAPH: {
    const ir_attr *a = ir_node_attr(n, "Subgraph");
    if (!a || a->kind != IR_ATTR_GRAPH)
      return core_error(KILN_ERR_INVALID, "prim::FallbackGraph without a Subgraph");
    exec_function *child = exec_function_new(a->g, &f->opts, f->depth - 1, f->level + 1, f->root);
    exec_function **v = child ? core_realloc(f->children, (size_t)(f->n_children + 1) * sizeof *v)
                              : NULL;
    if (!v) {
      exec_function_free(child);
      return KILN_ERR_NOMEM;
    }
    f->children = v;
    v[f->n_children++] = child;
    x->prim = p_call_fallback;
    x->k = (exec_value){.tag = EXEC_V_OBJ, .obj = child};
    return 0;
  }
  default: return 0;
  }
}

/* ---- optimizing ------------------------------------------------------------------- */

static int write_profiles(exec_function *f) {
  for (int i = 0; i < f->n_records; i++) {
    prof_record *r = &f->records[i];
    if (!r->node) continue;
    const ir_type *t = ir_type_tensor();
    if (r->seen) {
      t = ir_type_tensor_new(f->profiled, r->dtype, r->ndim, r->ndim > 0 ? r->sizes : NULL, NULL,
                             r->requires_grad, "cpu");
      if (!t) return KILN_ERR_NOMEM;
    }
    if (ir_node_set_ty(r->node, "profiled_type", t) < 0 ||
        ir_node_set_i(r->node, "seen_none", r->seen_none) < 0)
      return KILN_ERR_NOMEM;
  }
  return 0;
}

static int optimize(exec_function *f) {
  int rc;
  if ((rc = write_profiles(f)) < 0) return rc;
  ir_graph *g = ir_graph_clone(f->profiled);
  if (!g) return KILN_ERR_NOMEM;
  /* specialize, DifferentiableGraphs and guards, CSE and DCE (Note
   * [Cleanup after specialization]), fusion: pass_pipeline_optimize */
  pass_opts po = {.fusion = f->opts.fusion, .min_subgraph_size = f->opts.min_subgraph_size};
  if ((rc = pass_pipeline_run(g, &pass_pipeline_optimize, &po)) < 0) goto fail;
  if ((rc = ir_graph_verify(g)) < 0) {
    core_error_prefix("profiling executor: the optimized graph is invalid: ");
    goto fail;
  }
  compile_ctx c = {f, 0, false};
  exec_compile_opts o = {compile_hook, &c};
  free_plan(f);
  f->optimized = g;
  f->opt_code = exec_compile(g, &o);
  if (!f->opt_code) {
    free_plan(f);
    return -1;
  }
  f->optimizations++;
  return 0;
fail:
  ir_graph_free(g);
  return rc < 0 ? rc : -1;
}

/* On failure nothing is kept: the next call starts over. */
static int start_profiling(exec_function *f) {
  int rc = 0;
  f->profiled = ir_graph_clone(f->graph);
  if (!f->profiled) return KILN_ERR_NOMEM;
  if ((rc = pass_insert_profiles(f->profiled)) < 0) goto fail;
  f->n_records = count_profiles(ir_graph_top(f->profiled));
  f->records = core_calloc((size_t)(f->n_records ? f->n_records : 1), sizeof *f->records);
  if (!f->records) {
    rc = KILN_ERR_NOMEM;
    goto fail;
  }
  compile_ctx c = {f, 0, true};
  exec_compile_opts o = {compile_hook, &c};
  f->profiling_code = exec_compile(f->profiled, &o);
  if (f->profiling_code) return 0;
  rc = -1;
fail:
  ir_graph_free(f->profiled);
  core_free(f->records);
  f->profiled = NULL;
  f->records = NULL;
  f->n_records = 0;
  return rc;
}

/* Note [Describe]: the text a user sees for "the last optimized graph": the
 * plan, then each DifferentiableGraph's traced forward and backward graphs,
 * then the fallback functions' own optimized graphs, nested. */
char *exec_function_describe(const exec_function *f) {
  if (!f->optimized) return NULL;
  char *main = ir_graph_print(f->optimized, IR_PRINT_NO_SOURCE);
  if (!main) return NULL;
  size_t cap = strlen(main) + 1024, n = 0;
  char *s = core_alloc(cap);
  if (!s) {
    core_free(main);
    return NULL;
  }
  n = (size_t)snprintf(s, cap, "%s", main);
  core_free(main);
  char *parts[64];
  int n_parts = 0;
  for (int i = 0; i < f->n_diffs && n_parts < 64; i++) parts[n_parts++] = exec_diff_rt_describe(f->diffs[i], i);
  for (int i = 0; i < f->n_children && n_parts < 64; i++) {
    char *c = exec_function_describe(f->children[i]);
    if (c) {
      size_t m = strlen(c) + 96;
      char *w = core_alloc(m);
      if (w) snprintf(w, m, "fallback function (bailout depth %d):\n%s", f->children[i]->depth, c);
      core_free(c);
      parts[n_parts++] = w;
    } else {
      char *src = ir_graph_print(f->children[i]->graph, IR_PRINT_NO_SOURCE);
      size_t m = (src ? strlen(src) : 0) + 128;
      char *w = core_alloc(m);
      if (w) snprintf(w, m, "fallback function (bailout depth %d, not yet optimized):\n%s",
                      f->children[i]->depth, src ? src : "");
      core_free(src);
      parts[n_parts++] = w;
    }
  }
  for (int i = 0; i < n_parts; i++) {
    if (!parts[i]) continue;
    size_t m = strlen(parts[i]);
    if (n + m + 2 > cap) {
      cap = (n + m + 2) * 2;
      char *s2 = core_realloc(s, cap);
      if (!s2) break;
      s = s2;
    }
    n += (size_t)snprintf(s + n, cap - n, "%s", parts[i]);
  }
  for (int i = 0; i < n_parts; i++) core_free(parts[i]);
  return s;
}

int exec_function_run(exec_function *f, const exec_value *inputs, exec_value *outputs) {
  int rc;
  if (f->level > 0) f->fallback_calls++; /* summed over levels by the stats */
  if (f->depth <= 0) {
    if (!f->simple_code) {
      /* no profiling, no specialization: the graph as it is, cleaned */
      ir_graph *g = ir_graph_clone(f->graph); /* cleaned when made */
      if (!g) return KILN_ERR_NOMEM;
      pass_opts po = {.fusion = f->opts.fusion, .min_subgraph_size = f->opts.min_subgraph_size};
      if (pass_pipeline_run(g, &pass_pipeline_unprofiled, &po) < 0) {
        ir_graph_free(g);
        return -1;
      }
      f->simple_code = exec_compile(g, &exec_fusion_compile_opts);
      ir_graph_free(g);
      if (!f->simple_code) return -1;
    }
    return exec_code_run(f->simple_code, inputs, outputs);
  }
  if (!f->opt_code) {
    if (!f->profiling_code && (rc = start_profiling(f)) < 0) return rc;
    if (f->runs_left > 0) {
      f->runs_left--;
      f->profiling_runs++;
      return exec_code_run(f->profiling_code, inputs, outputs);
    }
    if ((rc = optimize(f)) < 0) return rc;
  }
  rc = exec_code_run(f->opt_code, inputs, outputs);
  /* the text is made when asked for (Note [Describe]): printing the plan
   * after every call cost an MLP step 3% and batch-1 inference more */
  if (f->level == 0 && rc == 0) f->ran_optimized = true;
  return rc;
}

/* ---- stats -------------------------------------------------------------------------- */

static void sum_stats(const exec_function *f, kiln_function_stats *s) {
  s->profiling_runs += f->profiling_runs;
  s->optimizations += f->optimizations;
  s->guard_passes += f->guard_passes;
  s->guard_failures += f->guard_failures;
  s->fallback_calls += f->fallback_calls;
  if (f->fallback_calls && f->level > s->bailout_depth_reached) s->bailout_depth_reached = f->level;
  for (int i = 0; i < f->n_children; i++) sum_stats(f->children[i], s);
}

void exec_function_stats(const exec_function *f, kiln_function_stats *s) {
  memset(s, 0, sizeof *s);
  sum_stats(f, s);
}
