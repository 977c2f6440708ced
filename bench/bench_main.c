/* bench/bench_main.c: the benchmark driver behind `kiln bench` and `make
 * bench` (bench/bench_kiln.c is its stand-alone main).
 *
 *   kiln bench [--json] [--filter SUBSTR] [--threads N] [--runs N]
 *              [--min-time SECONDS] [--no-guard] [--verbose] [--list]
 *
 * Each workload (the bench/work_ files) is set up, warmed up, sized so that one
 * repetition takes about --min-time seconds (default 0.2), and repeated
 * --runs times (default 7, at least 5); the table (or with --json one
 * object per line, {"name", "unit", "median", "min", "max", "runs"}) gives
 * the median, min and max of the per-iteration value.
 *
 * Contention guard (Linux): a repetition during which other processes (or
 * the hypervisor, as steal time) used more than 5% of the machine's CPU
 * time is thrown away and repeated, up to 3 times; a result that still
 * contains a contended repetition is flagged ("*" in the table,
 * "contended": K in JSON). --no-guard turns this off.
 *
 * Threads: --threads N sets both kiln's OpenMP threads and OpenBLAS's
 * pool (the pthreads build keeps its own; kiln's GEMMs set it to 1 and
 * split products over OpenMP threads). How idle threads wait is left to
 * the environment (Note [Bench threads]). */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tools/commands.h"
#include "bench.h"

#define MAX_RUNS 64
#define GUARD_RETRIES 3

/* KILN_BENCH_CLOCK=cpu times by the process's CPU time instead of the
 * wall clock (on a loaded machine; meaningful at one thread, with
 * --no-guard; bench/torch_anchor.py reads the same variable). */
double bench_now(void) {
  static int cpu = -1;
  if (cpu < 0) {
    const char *e = getenv("KILN_BENCH_CLOCK");
    cpu = e && !strcmp(e, "cpu");
  }
  struct timespec ts;
  clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool bench_verbose;
const char *bench_current = "";

void bench_print_function(const kiln_function *f) {
  const char *name = bench_current;
  if (!bench_verbose || !f) return;
  kiln_function_stats st;
  kiln_function_get_stats(f, &st);
  fprintf(stderr,
          "bench: %s: profiling_runs %lld, optimizations %lld, guard passes %lld, failures "
          "%lld, fallback calls %lld\n",
          name, (long long)st.profiling_runs, (long long)st.optimizations,
          (long long)st.guard_passes, (long long)st.guard_failures, (long long)st.fallback_calls);
  for (int i = 0; i < kiln_function_n_guard_failure_reasons(f) && i < 5; i++)
    fprintf(stderr, "bench: %s: guard failure: %s\n", name,
            kiln_function_guard_failure_reason(f, i));
  if (getenv("KILN_BENCH_GRAPHS")) {
    char *g = kiln_function_last_optimized_graph(f);
    if (g) fprintf(stderr, "%s\n", g);
    kiln_free(g);
  }
}

double bench_fail(const char *name, const char *what) {
  fprintf(stderr, "bench: %s: %s failed: %s\n", name, what, kiln_last_error());
  return -1;
}

/* ---- contention guard ------------------------------------------------------------- */

/* CPU ticks used by everything but idle (incl. steal), and by this process. */
typedef struct ticks {
  long long busy, own;
} ticks;

/* utime + stime of process pid ("self" when 0), or -1. */
static long long proc_ticks(int pid) {
  char path[64], buf[1024];
  if (pid) snprintf(path, sizeof path, "/proc/%d/stat", pid);
  else snprintf(path, sizeof path, "/proc/self/stat");
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = 0;
  char *p = strrchr(buf, ')'); /* fields after the command name: state is field 3 */
  long long utime, stime;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &utime,
                   &stime) != 2)
    return -1;
  return utime + stime;
}

static bool read_ticks(ticks *t) {
  long long v[10] = {0};
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return false;
  int n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n < 8) return false;
  t->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; /* user nice system irq softirq steal */
  t->own = proc_ticks(0);
  long long spin = bench_spinner_pid > 0 ? proc_ticks(bench_spinner_pid) : 0;
  if (t->own < 0 || spin < 0) return false;
  t->own += spin; /* the workload's own competitor (Note [Busy machine]) */
  return true;
}

/* Whether others used more than 5% of the machine (plus 2 ticks of
 * sampling slack) between a and b, over seconds of wall time. */
static bool contended(const ticks *a, const ticks *b, double seconds) {
  static long hz, ncpu;
  if (!hz) hz = sysconf(_SC_CLK_TCK), ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  double others = (double)((b->busy - a->busy) - (b->own - a->own));
  return others > 2 + 0.05 * seconds * (double)hz * (double)ncpu;
}

/* ---- driver ----------------------------------------------------------------------- */

typedef struct bench_opts {
  bool json, guard, list;
  const char *filter;
  int threads, runs;
  double min_time;
} bench_opts;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double value_of(const bench_workload *w, double seconds, int iters) {
  if (w->kind == BENCH_TIME) return seconds / iters * w->scale;
  return w->work * iters / seconds * w->scale;
}

/* Iterations per repetition so that one takes about min_time seconds. */
static int size_iters(const bench_workload *w, double min_time) {
  int n = 1;
  for (;;) {
    double t = w->run(n);
    if (t < 0) return -1;
    if (w->max_iters && n >= w->max_iters) return w->max_iters;
    if (t >= min_time / 4 || n >= 1 << 26) {
      double k = t > 0 ? (double)n * min_time / t : (double)n;
      int it = k < 1 ? 1 : k > (double)(1 << 28) ? 1 << 28 : (int)k;
      return w->max_iters && it > w->max_iters ? w->max_iters : it;
    }
    n = t > 0 && min_time / 4 / t < 10 ? (int)(n * (min_time / 2 / t)) + 1 : n * 10;
  }
}

/* Runs one workload and prints its line; < 0 on failure. */
static int run_one(const bench_workload *w, const bench_opts *o) {
  double r[MAX_RUNS];
  int n_contended = 0, n_timed = 0, iters;
  bench_current = w->name;
  if (w->setup() < 0) {
    bench_fail(w->name, "setup");
    if (w->teardown) w->teardown();
    return -1;
  }
  if (w->run(w->warmup) < 0 || (iters = size_iters(w, o->min_time)) < 0) goto fail;
  int64_t unc0 = kiln_lazy_counter("UncachedCompile"), cac0 = kiln_lazy_counter("CachedCompile");
  for (int k = 0; k < o->runs; k++) {
    for (int attempt = 0;; attempt++) {
      ticks a, b;
      bool have = o->guard && read_ticks(&a);
      double w0 = bench_now(), t = w->run(iters);
      if (t < 0) goto fail;
      n_timed++;
      r[k] = value_of(w, t, iters);
      if (!have || !read_ticks(&b) || !contended(&a, &b, bench_now() - w0)) break;
      if (attempt == GUARD_RETRIES) {
        n_contended++;
        break;
      }
      usleep(200000); /* let the other job finish */
    }
  }
  if (bench_verbose)
    fprintf(stderr,
            "bench: %s: %d timed runs of %d iterations; lazy compiles: %lld uncached, "
            "%lld cached\n",
            w->name, n_timed, iters, (long long)(kiln_lazy_counter("UncachedCompile") - unc0),
            (long long)(kiln_lazy_counter("CachedCompile") - cac0));
  if (bench_verbose && getenv("KILN_BENCH_GRAPHS") && kiln_lazy_counter("CachedCompile") > cac0) {
    char *g = kiln_lazy_last_compiled_graph(); /* the lazy mode's graph */
    if (g) fprintf(stderr, "%s\n", g);
    kiln_free(g);
  }
  if (w->teardown) w->teardown();
  qsort(r, (size_t)o->runs, sizeof *r, cmp_double);
  double med = o->runs % 2 ? r[o->runs / 2] : (r[o->runs / 2 - 1] + r[o->runs / 2]) / 2;
  if (o->json) {
    printf("{\"name\": \"%s\", \"unit\": \"%s\", \"median\": %.6g, \"min\": %.6g, "
           "\"max\": %.6g, \"runs\": %d",
           w->name, w->unit, med, r[0], r[o->runs - 1], o->runs);
    if (n_contended) printf(", \"contended\": %d", n_contended);
    printf("}\n");
  } else {
    printf("%-28s %-8s %10.4g %10.4g %10.4g %5d%s\n", w->name, w->unit, med, r[0],
           r[o->runs - 1], o->runs, n_contended ? " *" : "");
  }
  fflush(stdout);
  return 0;
fail:
  bench_fail(w->name, "run");
  if (w->teardown) w->teardown();
  return -1;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: kiln bench [--json] [--filter SUBSTR] [--threads N] [--runs N]\n"
          "                  [--min-time SECONDS] [--no-guard] [--verbose] [--list]\n"
          "  --filter: the workload of exactly that name if there is one, else every\n"
          "            workload whose name contains SUBSTR\n"
          "  --threads: OpenMP and OpenBLAS threads (default: their own defaults)\n"
          "  --runs: repetitions, >= 5 (default 7); --min-time: seconds per repetition (0.2)\n"
          "  --no-guard: keep repetitions during which other processes used the CPU\n"
          "  --verbose: executor statistics on stderr (KILN_BENCH_GRAPHS=1: optimized and\n"
          "             lazy graphs)\n");
  return f == stdout ? 0 : 2;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){.guard = true, .runs = 7, .min_time = 0.2};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool has_val = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    if (!strcmp(a, "--json")) o->json = true;
    else if (!strcmp(a, "--list")) o->list = true;
    else if (!strcmp(a, "--no-guard")) o->guard = false;
    else if (!strcmp(a, "--verbose")) bench_verbose = true;
    else if (!strcmp(a, "--filter") && has_val) o->filter = argv[++i];
    else if (!strcmp(a, "--threads") && has_val) o->threads = atoi(argv[++i]);
    else if (!strcmp(a, "--runs") && has_val) o->runs = atoi(argv[++i]);
    else if (!strcmp(a, "--min-time") && has_val) o->min_time = atof(argv[++i]);
    else if (a[0] != '-' && !o->filter) o->filter = a; /* bench_kiln NAME, as before */
    else return -1;
  }
  if (o->runs < 5 || o->runs > MAX_RUNS || o->threads < 0 || !(o->min_time > 0)) return -1;
  return 0;
}

/* Note [Bench threads]: kiln parallelises with OpenMP (libgomp); GEMM runs
 * single-threaded OpenBLAS calls split across the OpenMP threads
 * (src/ops/gemm.c), so there is one pool and idle workers may spin (for a
 * bounded time: Note [Thread waits] in src/core/threads.c; the driver's
 * process has re-executed itself with GOMP_SPINCOUNT set, unless the
 * environment set a policy, and prints that). The
 * driver does not change how they wait: it reports OMP_WAIT_POLICY and
 * friends as it found them. Measured on the 2-vCPU VM (MLP step / LSTM
 * step at 2 threads): default spinning 1.13 / 32 ms, OMP_WAIT_POLICY=ACTIVE
 * the same, GOMP_SPINCOUNT=20000 the same, OMP_WAIT_POLICY=PASSIVE 2.3 /
 * 55 ms (every parallel region then wakes a sleeping worker through a
 * futex). Before gemm.c, when GEMM used OpenBLAS's own pthreads pool beside
 * OpenMP's, spinning workers of the two pools fought for the cores (the
 * LSTM step took 2.2 s at 2 threads against 0.1 s at 1) and PASSIVE was
 * needed, as it still is for PyTorch (scripts/bench_compare.py). */
static void print_env(const bench_opts *o) {
  static const char *vars[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY",
                               "GOMP_SPINCOUNT", "OPENBLAS_THREAD_TIMEOUT", "OMP_PROC_BIND",
                               "KILN_NATIVE_FUSION", "KILN_CC", "KILN_CPU",
                               "KILN_NUM_THREADS"};
  FILE *f = o->json ? stderr : stdout;
  fprintf(f,
          "kiln bench: %ld CPUs, cpu level %s, OpenMP threads %d, OpenBLAS threads %d (%s) "
          "| env",
          sysconf(_SC_NPROCESSORS_ONLN), kiln_cpu_level(), omp_get_max_threads(),
          openblas_get_num_threads(), openblas_get_config());
  bool any = false;
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    if (getenv(vars[i])) fprintf(f, " %s=%s", vars[i], getenv(vars[i])), any = true;
  fprintf(f, "%s\n", any ? "" : " (none set)");
}

int kiln_bench_main(int argc, char **argv) {
  typedef const bench_workload *(*list_fn)(int *);
  static const list_fn lists[] = {bench_overhead_workloads, bench_ew_workloads,
                                  bench_gemm_workloads, bench_model_workloads,
                                  bench_extra_workloads, bench_ops_workloads,
                                  bench_scale_workloads, bench_import_workloads};
  bench_opts o;
  int prc = parse_args(argc, argv, &o);
  if (prc != 0) return usage(prc > 0 ? stdout : stderr);
  if (o.threads > 0) {
    omp_set_num_threads(o.threads);
    openblas_set_num_threads(o.threads);
  }
  bool exact = false;
  for (size_t l = 0; l < sizeof lists / sizeof *lists; l++) {
    int n;
    const bench_workload *ws = lists[l](&n);
    for (int i = 0; i < n; i++) {
      if (o.list) printf("%s\n", ws[i].name);
      exact |= o.filter && !strcmp(ws[i].name, o.filter);
    }
  }
  if (o.list) return 0;
  print_env(&o);
  if (!o.json)
    printf("%-28s %-8s %10s %10s %10s %5s\n", "name", "unit", "median", "min", "max", "runs");
  fflush(stdout);
  int failed = 0;
  for (size_t l = 0; l < sizeof lists / sizeof *lists; l++) {
    int n;
    const bench_workload *ws = lists[l](&n);
    for (int i = 0; i < n; i++) {
      const char *name = ws[i].name;
      if (o.filter && (exact ? strcmp(name, o.filter) : !strstr(name, o.filter))) continue;
      kiln_clear_error();
      if (run_one(&ws[i], &o) < 0) failed++;
    }
  }
  return failed ? 1 : 0;
}
