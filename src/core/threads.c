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
 * bench/work_models.c). A short bounded spin (KILN_SPINCOUNT pauses, a
 * few microseconds: it catches a region that follows at once) and then
 * sleeping avoids both. Measured here with 10-16 jobs on the 2 cores
 * (busy_machine, MLP step at 2 threads, alternating runs): spin counts 0
 * and 100 and OMP_WAIT_POLICY=PASSIVE alike (2-9 ms), 1000 2-3x slower
 * (5-18 ms: every region then leaves each worker burning ~20 us, more than
 * the step's own work, and the scheduler charges it to kiln), libgomp's
 * default up to 100x slower (50-380 ms). A quiet machine could not be
 * measured in that session; there sleeping costs a futex wake-up per
 * region (an earlier note measured PASSIVE at 2x the MLP step's 1.1 ms).
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
 * kiln_set_num_threads to the calling thread. */
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

kiln_status kiln_set_num_threads(int n) {
  if (n < 1) return core_error(KILN_ERR_INVALID, "kiln_set_num_threads: %d threads", n);
  int max = core_available_cores();
  omp_set_num_threads(n < max ? n : max);
  return KILN_OK;
}

int kiln_get_num_threads(void) { return omp_get_max_threads(); }

/* KILN_NUM_THREADS, the cap: at load time, for the main thread. */
__attribute__((constructor)) static void threads_ctor(void) {
  const char *v = getenv("KILN_NUM_THREADS");
  int n = v && *v ? atoi(v) : 0;
  if (n < 1) n = omp_get_max_threads();
  int max = core_available_cores();
  omp_set_num_threads(n < max ? n : max);
}
