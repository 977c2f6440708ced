/* src/exec/executor.h: the profiling graph executor (executor.c; the
 * house's map: docs/ARCHITECTURE.md) and the DifferentiableGraph op it
 * runs. */
#ifndef KILN_EXEC_EXECUTOR_H
#define KILN_EXEC_EXECUTOR_H

#include "compile.h"
#include "passes/autodiff.h"

typedef struct exec_function exec_function;
typedef struct diff_rt diff_rt;

/* Per profile node: what it has seen so far. */
typedef struct prof_record {
  ir_node *node;        /* the profile node in the profiled graph */
  bool seen, seen_none;
  int dtype, ndim, requires_grad; /* -1 = differed (unknown) */
  int64_t sizes[KILN_MAX_DIMS];   /* -1 = differed */
} prof_record;

/* A requires-grad guard's run-time record. */
typedef struct guard_rt {
  exec_function *owner;
  int n;
  bool *assumed;        /* per guarded input */
  int index;            /* which DifferentiableGraph it guards */
} guard_rt;

struct exec_function {
  ir_graph *graph;                 /* owned: what the function computes */
  kiln_function_options opts;
  int depth;                       /* remaining bailout depth */
  int level;                       /* 0 = the user's function, 1 = its fallback, ... */
  exec_function *root;             /* the user's function (stats are summed there) */
  /* profiling */
  ir_graph *profiled;
  exec_code *profiling_code;
  prof_record *records;
  int n_records, runs_left;
  /* the optimized plan */
  ir_graph *optimized;
  exec_code *opt_code;
  exec_code *simple_code;          /* depth 0: plain interpretation */
  /* owned run-time objects of the optimized plan */
  exec_function **children;
  int n_children;
  diff_rt **diffs;
  int n_diffs;
  guard_rt **guards;
  int n_guards;
  /* counters (this level only; kiln_function_get_stats sums levels) */
  int64_t profiling_runs, optimizations, guard_passes, guard_failures, fallback_calls;
  char **reasons;                  /* at the root only */
  int n_reasons;
  bool ran_optimized;              /* at the root: a call ran the optimized plan */
};

/* A new executor over a copy of g. NULL on error. */
exec_function *exec_function_new(const ir_graph *g, const kiln_function_options *o, int depth,
                                 int level, exec_function *root);
void exec_function_free(exec_function *f);
/* Runs f once (profiling, optimizing when due). inputs borrowed; outputs
 * are new values (n = graph outputs). */
int exec_function_run(exec_function *f, const exec_value *inputs, exec_value *outputs);
/* f's counters summed with its fallbacks' (recursively). */
void exec_function_stats(const exec_function *f, kiln_function_stats *s);
/* Adds a guard-failure reason at the root. */
void exec_function_note_reason(exec_function *f, const char *reason);
/* The optimized graph text with DifferentiableGraph forward/backward
 * graphs (malloc'd), or NULL. */
char *exec_function_describe(const exec_function *f);

/* DifferentiableGraph op (diffgraph.c). `sub` is copied; assumed[i] says
 * input i is assumed to require grad (Note [Requires-grad guard]). When
 * every input type is complete, differentiates now (so the plan prints).
 * With fuse, the forward and backward graphs get FusionGroups. */
diff_rt *exec_diff_rt_new(const ir_graph *sub, const ir_node *node, bool fuse);
void exec_diff_rt_free(diff_rt *d);
int exec_diff_rt_prim(const exec_instr *x, exec_value *in, exec_value *out);
/* Text of the forward and backward graphs of the most recent plan. */
char *exec_diff_rt_describe(const diff_rt *d, int index);

#endif
