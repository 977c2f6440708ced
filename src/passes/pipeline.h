/* src/passes/pipeline.h: the pass pipelines as data (pipeline.c): every
 * order in which kiln runs its passes, each a named list, run and logged
 * by pass_pipeline_run. */
#ifndef KILN_PASSES_PIPELINE_H
#define KILN_PASSES_PIPELINE_H

#include "autodiff.h"
#include "passes.h"

/* What a pipeline's conditional steps and parametrized passes read. */
typedef struct pass_opts {
  bool fusion;           /* kiln_function_options.fusion: run the fusion steps */
  int min_subgraph_size; /* kiln_function_options.min_subgraph_size (autodiff) */
} pass_opts;

/* A step runs only when every condition in its `when` holds. */
enum {
  PASS_WHEN_FUSION = 1, /* opts->fusion */
  PASS_WHEN_GRAD = 2    /* the graph needs a gradient (pass_graph_needs_gradient,
                         * asked once per run, at the first such step) */
};

typedef struct pass_pipeline pass_pipeline;

typedef struct pass_step {
  const char *name;                   /* its KILN_JIT_LOG name */
  int (*fn)(ir_graph *g, const pass_opts *o); /* NULL when sub is set */
  const pass_pipeline *sub;           /* a nested pipeline (logs under its own name) */
  unsigned when;                      /* PASS_WHEN_* */
} pass_step;

struct pass_pipeline {
  const char *name;      /* its KILN_JIT_LOG name */
  int max_rounds;        /* > 1: repeat the list until a round changes nothing */
  int n_steps;
  const pass_step *steps;
};

/* The pipelines (pipeline.c says why each differs from the others). */
extern const pass_pipeline pass_pipeline_cleanup;   /* fold, peephole, CSE, DCE to a fixpoint */
extern const pass_pipeline pass_pipeline_optimize;  /* the profiling executor's plan */
extern const pass_pipeline pass_pipeline_unprofiled; /* bailout depth 0: no profiles */
extern const pass_pipeline pass_pipeline_diff_forward;  /* a DifferentiableGraph plan's forward */
extern const pass_pipeline pass_pipeline_diff_backward; /* ... and backward graph */
extern const pass_pipeline pass_pipeline_lazy;      /* a lazy tensor graph */

/* Runs p's steps on g in order (Note [Pass logging]: the graph is printed
 * before the pipeline when KILN_JIT_LOG names it, after each step it names,
 * and after the pipeline). o may be NULL (no fusion, min size 2). Returns
 * the total number of changes the steps report, or < 0 with the error set
 * (the graph is then partly transformed; the caller discards it). */
int pass_pipeline_run(ir_graph *g, const pass_pipeline *p, const pass_opts *o);

#endif
