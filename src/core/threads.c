/* src/core/threads.c: how many threads kiln's parallel regions use, and how
 * idle OpenMP workers wait between regions.
 *
 * Note [Thread waits]: libgomp's idle workers spin for about 300,000 pause
 * instructions (a few ms) at every barrier before they sleep on a futex,
 * unless OMP_WAIT_POLICY or GOMP_SPINCOUNT says otherwise. On a machine
 * whose cores are shared, that spinning takes the core from whoever shares
 * it, and the scheduler then runs the worker late when the next region
 * needs it: the MLP step went from 1.5 to 6 ms beside one busy process, and
 * to hundreds of ms with 8 jobs on 2 cores (Note [Busy machine] in
 * bench/work_models.c). A bounded spin (KILN_SPINCOUNT pauses) and then
 * sleeping avoids both, with the thread count adapted to the cores other
 * processes leave (Note [Busy cores] below, which also says why the spin
 * is long). Measured in an earlier session with 10-16 jobs on the 2 cores
 * (busy_machine, MLP step at 2 threads, before the adaptation): spin
 * counts 0 and 100 and OMP_WAIT_POLICY=PASSIVE alike (2-9 ms), 1000 2-3x
 * slower (every region then left each worker burning ~20 us beside the
 * other jobs), libgomp's default up to 100x slower (50-380 ms).
 *
 * libgomp reads those variables once, in its own initialiser, which runs
 * before any of a program's constructors: a constructor's setenv is too
 * late, and a .preinit_array function, which runs earlier, runs before libc
 * has set up environ (its setenv is lost). So a program linked with kiln's
 * static library re-executes itself once, from .preinit_array, before any
 * initialiser of any library has run (nothing has happened yet that the
 * exec could lose), with GOMP_SPINCOUNT=KILN_SPINCOUNT added to its
 * environment, when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set.
 * Setting either (to any value) keeps the environment as it is, as does
 * KILN_OMP_ENV=keep; a setuid program, one under valgrind, a failed exec
 * (no /proc) and a shared-library build (no .preinit_array in a DSO) keep
 * libgomp's default.
 *
 * Thread count: never more threads than the cores the process may use
 * (its affinity mask, and its cgroup's CPU quota rounded up, which libgomp
 * does not read); KILN_NUM_THREADS, else OMP_NUM_THREADS, else that count.
 * Applied at load time to the main thread (omp_set_num_threads), and by
 * kiln_set_num_threads to the calling thread.
 *
 * Note [Busy cores]: how long to spin is a trade no constant wins. On an
 * idle machine (AMD EPYC, 2 cores, MLP step at 2 threads) a spin count of
 * 100 made the step 2.5 ms, 30,000 made it 1.2-1.5 ms (the worker is awake
 * for the next region); beside one busy process the same 30,000 made it
 * 5-8 ms, 4x its quiet time, where 100 kept it at its quiet time. So kiln
 * spins long (KILN_SPINCOUNT, wait_policy.c) and does not ask a busy
 * machine for its cores: before an op runs, at most every 20 ms, the
 * calling thread reads the number of runnable tasks (/proc/loadavg),
 * subtracts this process's own (/proc/self/task/N/stat in state R: its
 * spinning workers are runnable too), and runs its parallel regions on
 * the cores left over: min(the count asked for, available cores - other
 * runnable tasks), at least 1. A worker not asked for sleeps once its spin
 * ends, so nothing of kiln's spins beside the other process. The count
 * asked for (kiln_set_num_threads, KILN_NUM_THREADS, OMP_NUM_THREADS) stays
 * what kiln_get_num_threads returns; KILN_ADAPT_THREADS=0 turns the
 * adaptation off (the count asked for is then always used). The count goes
 * down only when three checks in a row (40 ms) say so, and this process's runnable
 * tasks are counted before and after /proc/loadavg is read, so a worker
 * that stops spinning in between, or a process that ran for a moment, does
 * not change it on an idle machine. Results depend on the thread count
 * (GEMMs and reductions split over threads round differently), so beside
 * busy processes a run may round differently from a quiet one; set
 * KILN_ADAPT_THREADS=0 (make test does) for runs that must repeat bit for
 * bit whatever the load. */
#include <dirent.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"


/* ---- how many threads ---------------------------------------------------- */
int core_quota_cores(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  long long n = (quota + period - 1) / period;
  return n > 1 << 20 ? 1 << 20 : (int)n;
}

/* The first two numbers of a file ("max" reads as -1), or 0 numbers. */
static int read_pair(const char *path, long long *a, long long *b) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char w[32] = {0};
  int n = fscanf(f, "%31s %lld", w, b);
  fclose(f);
  if (n < 1) return 0;
  *a = !strcmp(w, "max") ? -1 : atoll(w);
  return n;
}

/* The cgroup CPU quota in cores (rounded up), 0 when there is none. */
static int cgroup_cores(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  char line[4096], path[4200];
  int cores = 0;
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = 0;
    const char *ctrl = c1 + 1, *cg = c2 + 1;
    long long q = 0, p = 0;
    if (!*ctrl) { /* v2: "0::/path" */
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", cg);
      if (read_pair(path, &q, &p) < 2) continue;
    } else if (strstr(ctrl, "cpu") && !strstr(ctrl, "cpuset")) { /* v1: "N:cpu,cpuacct:/path" */
      long long unused;
      snprintf(path, sizeof path, "/sys/fs/cgroup/cpu%s/cpu.cfs_quota_us", cg);
      if (read_pair(path, &q, &unused) < 1) continue;
      snprintf(path, sizeof path, "/sys/fs/cgroup/cpu%s/cpu.cfs_period_us", cg);
      if (read_pair(path, &p, &unused) < 1) continue;
    } else {
      continue;
    }
    int n = core_quota_cores(q, p);
    if (n > 0 && (cores == 0 || n < cores)) cores = n;
  }
  if (f) fclose(f);
  return cores;
}

int core_available_cores(void) {
  static atomic_int cores; /* threads racing here compute the same */
  if (cores) return cores;
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) n = 1;
  int q = cgroup_cores();
  int c = q > 0 && q < n ? q : n;
  cores = c;
  return c;
}

/* ---- the count asked for, and the count in use (Note [Busy cores]) -------- */
static _Thread_local int wanted;  /* asked for on this thread; 0: not yet read */
static _Thread_local int applied; /* what omp_set_num_threads last got here */
static _Thread_local long long next_check_ms;
static _Thread_local int lower_seen; /* a lower count the last checks saw, 0: none */
static _Thread_local int lower_runs; /* how many checks in a row saw it */
#define LOWER_CHECKS 3
static atomic_int adapt = -1; /* -1 until KILN_ADAPT_THREADS is read */

static int wanted_here(void) {
  if (!wanted) wanted = applied = omp_get_max_threads();
  return wanted;
}

kiln_status kiln_set_num_threads(int n) {
  if (n < 1) return core_error(KILN_ERR_INVALID, "kiln_set_num_threads: %d threads", n);
  int max = core_available_cores();
  wanted = applied = n < max ? n : max;
  omp_set_num_threads(wanted);
  next_check_ms = 0; /* the next op looks at the machine again */
  lower_seen = lower_runs = 0;
  return KILN_OK;
}

int kiln_get_num_threads(void) { return wanted_here(); }

int core_threads_in_use(void) { return omp_get_max_threads(); }

int core_threads_for(int wanted_n, int cores, int others) {
  int n = cores - (others > 0 ? others : 0);
  if (n > wanted_n) n = wanted_n;
  return n < 1 ? 1 : n;
}

bool core_threads_set_adaptive(bool on) {
  int old = atomic_exchange(&adapt, on ? 1 : 0);
  if (!on && wanted && applied != wanted) omp_set_num_threads(applied = wanted);
  next_check_ms = 0;
  return old != 0;
}

/* This process's tasks in state R, -1 if /proc cannot say. */
static int own_runnable(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int ours = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], st[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *t = fopen(path, "r");
    if (!t) continue;
    size_t n = fread(st, 1, sizeof st - 1, t);
    fclose(t);
    st[n] = 0;
    char *p = strrchr(st, ')'); /* the name may hold spaces and ')' */
    if (p && p[1] == ' ' && p[2] == 'R') ours++;
  }
  closedir(d);
  return ours;
}

/* The runnable tasks of other processes: /proc/loadavg's "R/T" less this
 * process's tasks in state R, counted before and after it (a worker that
 * stops spinning in between would otherwise count as another process's).
 * -1 if /proc cannot say. */
static int others_runnable(void) {
  int before = own_runnable();
  char buf[256];
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f || before < 0) {
    if (f) fclose(f);
    return -1;
  }
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = 0;
  int running = 0, after = own_runnable();
  if (sscanf(buf, "%*s %*s %*s %d/", &running) != 1 || after < 0) return -1;
  int ours = before > after ? before : after;
  return running > ours ? running - ours : 0;
}

void core_threads_adapt(void) {
  if (adapt < 0) {
    const char *v = getenv("KILN_ADAPT_THREADS");
    int on = !(v && !strcmp(v, "0"));
    int expected = -1;
    atomic_compare_exchange_strong(&adapt, &expected, on);
  }
  if (!adapt) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  if (now < next_check_ms) return;
  next_check_ms = now + 20;
  if (omp_in_parallel()) return; /* a nested call: the region's count is set */
  int w = wanted_here();
  if (w <= 1) return;
  int others = others_runnable();
  if (others < 0) return;
  int n = core_threads_for(w, core_available_cores(), others);
  /* fewer threads only when LOWER_CHECKS checks in a row (20 ms apart)
   * say so: a process that ran for a moment does not change the count */
  if (n < applied) {
    if (n != lower_seen) {
      lower_seen = n;
      lower_runs = 0;
    }
    if (++lower_runs < LOWER_CHECKS) return;
  }
  lower_seen = lower_runs = 0;
  if (n != applied) omp_set_num_threads(applied = n);
}

/* KILN_NUM_THREADS, the cap: at load time, for the main thread. */
__attribute__((constructor)) static void threads_ctor(void) {
  const char *v = getenv("KILN_NUM_THREADS");
  int n = v && *v ? atoi(v) : 0;
  if (n < 1) n = omp_get_max_threads();
  int max = core_available_cores();
  wanted = applied = n < max ? n : max;
  omp_set_num_threads(wanted);
}
