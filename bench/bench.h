/* bench/bench.h: the benchmark harness shared by the bench/ files: what a
 * workload is, the clock, and the workload lists of each bench/work_ file.
 *
 * A workload has an untimed setup, a run(iters) that performs iters
 * iterations and returns the seconds spent in its timed part (so a
 * workload can leave out what it does not measure, e.g. recording a graph
 * before timing mark_step), and an untimed teardown. The driver
 * (bench/bench_main.c) warms it up, sizes each repetition to about
 * --min-time seconds, and reports the median, min and max over the
 * repetitions of the per-iteration value. */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln.h"

typedef enum bench_kind {
  BENCH_TIME, /* value = seconds per iteration * scale (1e9 ns, 1e6 us, 1e3 ms) */
  BENCH_RATE  /* value = work * iters / seconds * scale (1e-9: GB/s, GFLOP/s) */
} bench_kind;

typedef struct bench_workload {
  const char *name, *unit;
  bench_kind kind;
  double scale;
  double work;             /* BENCH_RATE: bytes or flops per iteration */
  int warmup;              /* warm-up iterations (jit: enough to profile and optimize) */
  int max_iters;           /* cap on iterations per repetition; 0 = none */
  int (*setup)(void);      /* < 0 on failure (message in kiln_last_error) */
  double (*run)(int iters);/* seconds in the timed part; < 0 on failure */
  void (*teardown)(void);  /* frees what setup made; may be NULL */
} bench_workload;

/* --verbose: workloads print what their executor did (function stats,
 * lazy compile counters) to stderr in their teardown. */
extern bool bench_verbose;
/* The name of the workload being run (set by the driver). */
extern const char *bench_current;
/* With --verbose, prints f's stats (and with KILN_BENCH_GRAPHS=1 its
 * optimized graph) to stderr; f may be NULL. */
void bench_print_function(const kiln_function *f);

/* A process a workload runs on purpose (busy_machine's spinner, Note [Busy
 * machine] in work_models.c), 0 when none: the contention guard counts its
 * CPU time as the workload's own. */
extern int bench_spinner_pid;

/* CLOCK_MONOTONIC in seconds. */
double bench_now(void);
/* Prints "bench: <name>: <what>: <kiln_last_error()>" to stderr; returns -1. */
double bench_fail(const char *name, const char *what);

/* The workloads of each file, in the order `kiln bench` lists them: each
 * returns its array and writes its length. */
const bench_workload *bench_overhead_workloads(int *n); /* work_micro.c: overhead, lazy, copy */
const bench_workload *bench_ew_workloads(int *n);       /* work_ew.c: elementwise chains */
const bench_workload *bench_gemm_workloads(int *n);     /* work_micro.c: SGEMM */
const bench_workload *bench_model_workloads(int *n);    /* work_models.c: MLP, LSTM */
const bench_workload *bench_extra_workloads(int *n);    /* work_micro.c: memcpy, conv2d */
const bench_workload *bench_ops_workloads(int *n);      /* work_ops.c: depthwise, layer_norm, sdpa */
const bench_workload *bench_scale_workloads(int *n);    /* work_scale.c: verifier, checkpoint */
const bench_workload *bench_import_workloads(int *n);   /* work_import.c: resnet18, transformer layer */

#endif
