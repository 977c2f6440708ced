/* src/passes/pipeline.c: every pass pipeline kiln runs, as named lists,
 * and the one function that runs and logs them (pipeline.h). Each list
 * says why it differs from the others; a change of order is a change
 * here, nowhere else. */
#include <string.h>

#include "pipeline.h"

/* ---- steps: the passes with the pass_step signature --------------------------- */

static int s_fold(ir_graph *g, const pass_opts *o) { return pass_constant_fold(g); }
static int s_peephole(ir_graph *g, const pass_opts *o) { return pass_peephole(g); }
static int s_cse(ir_graph *g, const pass_opts *o) { return pass_cse(g); }
static int s_dce(ir_graph *g, const pass_opts *o) { return pass_dce(g); }
static int s_fuse_conv_bn(ir_graph *g, const pass_opts *o) { return pass_fuse_conv_bn(g); }
static int s_specialize(ir_graph *g, const pass_opts *o) { return pass_specialize_from_profiles(g); }
static int s_functionalize(ir_graph *g, const pass_opts *o) { return pass_functionalize(g); }
static int s_autodiff(ir_graph *g, const pass_opts *o) {
  return pass_create_autodiff_subgraphs(g, o->min_subgraph_size);
}
static int s_guard(ir_graph *g, const pass_opts *o) { return pass_guard_autodiff_subgraphs(g); }
static int s_gemm_epilogue(ir_graph *g, const pass_opts *o) { return pass_gemm_epilogue(g); }
/* Note [Add epilogue]: a beta taken from a number input only where numbers
 * are known nonzero (lazy graphs, Note [Special scalars]). */
static int s_add_epilogue(ir_graph *g, const pass_opts *o) { return pass_add_epilogue(g, false); }
static int s_add_epilogue_lazy(ir_graph *g, const pass_opts *o) { return pass_add_epilogue(g, true); }
static int s_fuse(ir_graph *g, const pass_opts *o) { return pass_fuse(g); }
static int s_threshold(ir_graph *g, const pass_opts *o) { return pass_threshold_epilogue(g); }
static int s_schedule(ir_graph *g, const pass_opts *o) { return pass_schedule_collectives(g); }
static int s_hoist(ir_graph *g, const pass_opts *o) { return pass_hoist_results(g); }

#define STEPS(p) (int)(sizeof p / sizeof *p), p

/* ---- the pipelines -------------------------------------------------------------- */

/* cleanup: the only place folding and peepholes run. Each pass exposes work
 * for the others (a fold makes a node dead, CSE makes a peephole match), so
 * the list repeats until a round changes nothing, at most 4 rounds. It runs
 * only where types are declared or exact: a function's graph as given
 * (exec_function_new, before any profiling), DifferentiableGraph plans
 * (traced for their shapes) and lazy graphs (recorded per shape). */
static const pass_step cleanup_steps[] = {
    {"constant_fold", s_fold, NULL, 0},
    {"peephole", s_peephole, NULL, 0},
    {"cse", s_cse, NULL, 0},
    {"dce", s_dce, NULL, 0},
    /* after DCE: a dead eval-mode If reading a conv's result is gone */
    {"fuse_conv_bn", s_fuse_conv_bn, NULL, 0},
};
const pass_pipeline pass_pipeline_cleanup = {"cleanup", 4, STEPS(cleanup_steps)};

/* optimize: the profiling executor's plan, on the profiled graph.
 * Note [Cleanup after specialization]: only CSE and DCE after
 * specialization, never the cleanup pipeline: profiled types are
 * observations, not guarantees (only requires_grad is guarded), so nothing
 * may be folded from them (aten::size of a profiled shape); folding and
 * peepholes ran on the unprofiled graph before profiling. DifferentiableGraphs
 * are made and guarded only when something may require grad; without them
 * this list is the no-grad plan. Fusion then takes what is left outside
 * DifferentiableGraphs: the no-grad path and a training graph's
 * non-differentiable regions (their groups run unfused whenever an input
 * requires grad). No add epilogue (it needs exact types: Note [Add
 * epilogue]), hence no DCE after fusion (only the add epilogue leaves a
 * dead node behind). Functionalization (Note [Functionalization]) runs
 * after specialization, which gives it the complete types it needs, and
 * before autodiff grouping, so DifferentiableGraphs form over in-place
 * code made functional. */
static const pass_step optimize_steps[] = {
    {"specialize", s_specialize, NULL, 0},
    {"functionalize", s_functionalize, NULL, 0},
    {"autodiff", s_autodiff, NULL, PASS_WHEN_GRAD},
    {"guard", s_guard, NULL, PASS_WHEN_GRAD},
    {"cse", s_cse, NULL, 0},
    {"dce", s_dce, NULL, 0},
    {"gemm_epilogue", s_gemm_epilogue, NULL, PASS_WHEN_FUSION},
    {"fuse", s_fuse, NULL, PASS_WHEN_FUSION},
};
const pass_pipeline pass_pipeline_optimize = {"optimize", 1, STEPS(optimize_steps)};

/* unprofiled: a function at bailout depth 0 runs its graph as given, which
 * the cleanup pipeline already cleaned when the function was made: no
 * profiles, so nothing to specialize and no DifferentiableGraphs (eager
 * autograd records through the ops; fusion groups run unfused when an
 * input requires grad). Only the fusion passes. */
static const pass_step unprofiled_steps[] = {
    {"gemm_epilogue", s_gemm_epilogue, NULL, PASS_WHEN_FUSION},
    {"fuse", s_fuse, NULL, PASS_WHEN_FUSION},
};
const pass_pipeline pass_pipeline_unprofiled = {"unprofiled", 1, STEPS(unprofiled_steps)};

/* diff_forward: a DifferentiableGraph plan's forward graph. Its types are
 * exact for the plan's shapes (plans are keyed by them, Note
 * [Shape-polymorphic differentiation]), so the whole cleanup applies and
 * so does the add epilogue; DCE removes the mul an add epilogue folded
 * into beta. */
static const pass_step diff_forward_steps[] = {
    {"cleanup", NULL, &pass_pipeline_cleanup, 0},
    {"gemm_epilogue", s_gemm_epilogue, NULL, PASS_WHEN_FUSION},
    {"add_epilogue", s_add_epilogue, NULL, PASS_WHEN_FUSION},
    {"fuse", s_fuse, NULL, PASS_WHEN_FUSION},
    {"dce", s_dce, NULL, PASS_WHEN_FUSION},
};
const pass_pipeline pass_pipeline_diff_forward = {"diff_forward", 1, STEPS(diff_forward_steps)};

/* diff_backward: as diff_forward without the GEMM epilogue: a backward
 * graph's GEMMs (the gradients of mm/addmm) feed sums and products, never
 * relu or gelu, so the epilogue's pattern does not occur there. */
static const pass_step diff_backward_steps[] = {
    {"cleanup", NULL, &pass_pipeline_cleanup, 0},
    {"add_epilogue", s_add_epilogue, NULL, PASS_WHEN_FUSION},
    {"fuse", s_fuse, NULL, PASS_WHEN_FUSION},
    {"dce", s_dce, NULL, PASS_WHEN_FUSION},
};
const pass_pipeline pass_pipeline_diff_backward = {"diff_backward", 1,
                                                   STEPS(diff_backward_steps)};

/* lazy: a lazy tensor graph (recorded per shape: exact types), fused
 * always (lazy mode has no fusion switch). As diff_forward, except that the
 * add epilogue may take beta from any number input: a lazy graph's number
 * inputs are never 0 (Note [Special scalars] records 0 and 1 as
 * constants). Then the updates move up to their gradients (Note
 * [Hoisting results]). Last, the all-reduces' schedule (Note [Collective
 * schedule]): after fusion, which may move nodes. */
static const pass_step lazy_steps[] = {
    {"cleanup", NULL, &pass_pipeline_cleanup, 0},
    {"gemm_epilogue", s_gemm_epilogue, NULL, 0},
    {"add_epilogue", s_add_epilogue_lazy, NULL, 0},
    {"threshold_epilogue", s_threshold, NULL, 0},
    {"fuse", s_fuse, NULL, 0},
    {"dce", s_dce, NULL, 0},
    {"hoist_results", s_hoist, NULL, 0},
    {"schedule_collectives", s_schedule, NULL, 0},
};
const pass_pipeline pass_pipeline_lazy = {"lazy", 1, STEPS(lazy_steps)};

/* ---- running ------------------------------------------------------------------------ */

int pass_pipeline_run(ir_graph *g, const pass_pipeline *p, const pass_opts *o) {
  static const pass_opts none = {false, 2};
  if (!o) o = &none;
  if (pass_log_enabled(p->name)) pass_log_graph(g, "before", p->name);
  int total = 0, grad = -1; /* PASS_WHEN_GRAD: not asked yet */
  for (int round = 0; round < p->max_rounds; round++) {
    int changes = 0;
    for (int i = 0; i < p->n_steps; i++) {
      const pass_step *s = &p->steps[i];
      if ((s->when & PASS_WHEN_FUSION) && !o->fusion) continue;
      if (s->when & PASS_WHEN_GRAD) {
        if (grad < 0) grad = pass_graph_needs_gradient(g);
        if (!grad) continue;
      }
      int rc = s->sub ? pass_pipeline_run(g, s->sub, o) : s->fn(g, o);
      if (rc < 0) return rc;
      if (!s->sub) pass_log(g, s->name);
      changes += rc;
    }
    total += changes;
    if (changes == 0) break;
  }
  pass_log(g, p->name);
  return total;
}

int pass_cleanup(ir_graph *g) { return pass_pipeline_run(g, &pass_pipeline_cleanup, NULL); }
