/* tests/core/test_threads.c: threads on a shared machine (Note [Thread
 * waits] in src/core/threads.c): idle workers do not spin through a pause
 * between parallel regions, kiln_set_num_threads is honoured (the threads
 * that do work in a region are counted from /proc), never above the
 * available cores, and cgroup quotas read as cores. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

static double clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One parallel region of kiln's: an elementwise product over 4M floats
 * (well above the parallel threshold). */
static bool region(kiln_tensor *a, kiln_tensor *b) {
  kiln_scope_begin();
  kiln_tensor *c = kiln_mul(a, b);
  kiln_scope_end();
  return c != NULL;
}

TEST(threads_idle_workers_sleep_between_regions) {
  kiln_scope_begin();
  int nt = kiln_get_num_threads();
  kiln_tensor *a = kiln_full(1, (int64_t[]){1 << 22}, 1.5, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_full(1, (int64_t[]){1 << 22}, 2.0, KILN_DTYPE_F32);
  CHECK(region(a, b));
  double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  struct timespec pause = {0, 200 * 1000 * 1000};
  while (nanosleep(&pause, &pause) != 0) {
  }
  double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  CHECK(region(a, b));
  CHECK_MSG(cpu < 0.1 * 0.2 * nt, "%.1f ms of CPU during a 200 ms pause at %d threads",
            cpu * 1e3, nt);
  /* the bounded spin is in place (or the user chose the policy) */
  const char *keep = getenv("KILN_OMP_ENV");
  CHECK(getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY") || (keep && !strcmp(keep, "keep")));
  test_note("%.2f ms of CPU in the pause, %d threads, GOMP_SPINCOUNT=%s", cpu * 1e3, nt,
            getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "(unset)");
  kiln_scope_end();
}

#define MAX_TASKS 256

/* utime + stime (ticks) of each of this process's threads. */
static int task_ticks(long tid[MAX_TASKS], long long ticks[MAX_TASKS]) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < MAX_TASKS) {
    if (e->d_name[0] == '.') continue;
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    char *p = strrchr(buf, ')');
    long long u, s;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &u, &s) != 2)
      continue;
    tid[n] = atol(e->d_name);
    ticks[n++] = u + s;
  }
  if (d) closedir(d);
  return n;
}

/* The number of threads that ran at least 30 ms while kiln's regions ran
 * for 300 ms of the main thread's CPU time. */
static int busy_threads(kiln_tensor *a, kiln_tensor *b) {
  long t0[MAX_TASKS], t1[MAX_TASKS];
  long long k0[MAX_TASKS], k1[MAX_TASKS];
  struct timespec settle = {0, 50 * 1000 * 1000}; /* let workers of before go to sleep */
  nanosleep(&settle, NULL);
  int n0 = task_ticks(t0, k0);
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
  while (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0 < 0.3)
    if (!region(a, b)) return -1;
  int n1 = task_ticks(t1, k1), busy = 0;
  long hz = sysconf(_SC_CLK_TCK);
  for (int i = 0; i < n1; i++) {
    long long before = 0;
    for (int j = 0; j < n0; j++)
      if (t0[j] == t1[i]) before = k0[j];
    busy += k1[i] - before >= (hz * 30 + 999) / 1000;
  }
  return busy;
}

TEST(threads_set_num_threads_honoured) {
  kiln_scope_begin();
  bool adaptive = core_threads_set_adaptive(false); /* other jobs must not lower it */
  int saved = kiln_get_num_threads(), max = core_available_cores();
  kiln_tensor *a = kiln_full(1, (int64_t[]){1 << 20}, 1.5, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_full(1, (int64_t[]){1 << 20}, 2.0, KILN_DTYPE_F32);
  CHECK(kiln_set_num_threads(0) == KILN_ERR_INVALID);
  CHECK(kiln_set_num_threads(1 << 20) == KILN_OK);
  CHECK_EQ_INT(kiln_get_num_threads(), max); /* capped to the available cores */
  CHECK(kiln_set_num_threads(1) == KILN_OK);
  CHECK_EQ_INT(kiln_get_num_threads(), 1);
  CHECK_EQ_INT(busy_threads(a, b), 1);
  if (max >= 2) {
    CHECK(kiln_set_num_threads(2) == KILN_OK);
    CHECK_EQ_INT(kiln_get_num_threads(), 2);
    CHECK_EQ_INT(busy_threads(a, b), 2);
  } else {
    test_note("one core available: only the one-thread case runs");
  }
  kiln_set_num_threads(saved);
  core_threads_set_adaptive(adaptive);
  kiln_scope_end();
}

/* Note [Busy cores]: beside as many spinning processes as there are cores,
 * kiln's regions run on the calling thread alone (its workers do no work),
 * while kiln_get_num_threads keeps the count asked for; with the
 * adaptation off the count asked for is used again. */
TEST(threads_busy_cores_are_left_to_other_processes) {
  CHECK_EQ_INT(core_threads_for(2, 2, 0), 2);
  CHECK_EQ_INT(core_threads_for(2, 2, 1), 1);
  CHECK_EQ_INT(core_threads_for(2, 2, 5), 1);
  CHECK_EQ_INT(core_threads_for(8, 16, 3), 8);
  CHECK_EQ_INT(core_threads_for(16, 16, 3), 13);
  CHECK_EQ_INT(core_threads_for(1, 4, 0), 1);
  int max = core_available_cores();
  if (max < 2) {
    test_note("one core available: only the arithmetic runs");
    return;
  }
  kiln_scope_begin();
  bool adaptive = core_threads_set_adaptive(true);
  int saved = kiln_get_num_threads();
  kiln_tensor *a = kiln_full(1, (int64_t[]){1 << 20}, 1.5, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_full(1, (int64_t[]){1 << 20}, 2.0, KILN_DTYPE_F32);
  pid_t kids[64];
  int n_kids = 0;
  for (int i = 0; i < max && i < 64; i++) {
    pid_t p = fork();
    if (p == 0) {
      for (volatile unsigned long x = 0;; x++) {
      }
    }
    if (p > 0) kids[n_kids++] = p;
  }
  struct timespec start = {0, 100 * 1000 * 1000};
  nanosleep(&start, NULL);
  CHECK(kiln_set_num_threads(max) == KILN_OK); /* looks at the machine at the next op */
  /* the count goes down after three checks 20 ms apart: at least 150 ms
   * of regions, and up to 3 s where a sanitizer build on a loaded machine
   * runs few of them (three checks need three ops 20 ms apart) */
  double t0 = clock_s(CLOCK_MONOTONIC);
  while (clock_s(CLOCK_MONOTONIC) - t0 < 0.15 ||
         (core_threads_in_use() != 1 && clock_s(CLOCK_MONOTONIC) - t0 < 3.0))
    CHECK(region(a, b));
  CHECK_EQ_INT(core_threads_in_use(), 1);
  CHECK_EQ_INT(kiln_get_num_threads(), max);
  CHECK_EQ_INT(busy_threads(a, b), 1);
  for (int i = 0; i < n_kids; i++) kill(kids[i], SIGKILL);
  for (int i = 0; i < n_kids; i++) waitpid(kids[i], NULL, 0);
  core_threads_set_adaptive(false);
  CHECK_EQ_INT(core_threads_in_use(), max);
  kiln_set_num_threads(saved);
  core_threads_set_adaptive(adaptive);
  kiln_scope_end();
}

TEST(threads_cgroup_quota_in_cores) {
  CHECK_EQ_INT(core_quota_cores(150000, 100000), 2); /* 1.5 CPUs: 2 threads */
  CHECK_EQ_INT(core_quota_cores(100000, 100000), 1);
  CHECK_EQ_INT(core_quota_cores(20000, 100000), 1);
  CHECK_EQ_INT(core_quota_cores(-1, 100000), 0); /* "max": no quota */
  CHECK_EQ_INT(core_quota_cores(400000, 0), 0);
  CHECK(core_available_cores() >= 1);
}

/* Runs cmd through the shell; its output (stdout and stderr) in out, its
 * exit status returned (-1 when it could not run). */
static int run_cmd(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* KILN_NUM_THREADS at load time and `kiln train --threads`, through the
 * kiln binary (the bench header prints the OpenMP thread count). */
TEST(threads_kiln_num_threads_and_train_option) {
  const char *bin = getenv("KILN_BIN");
  if (!bin) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set to the kiln binary (make test sets it)");
    return;
  }
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd,
           "KILN_NUM_THREADS=1 OMP_NUM_THREADS=2 '%s' bench --filter overhead_add --runs 5 "
           "--min-time 0.01 --no-guard 2>&1",
           bin);
  CHECK_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "OpenMP threads 1,");
  snprintf(cmd, sizeof cmd, "'%s' train --threads 0 2>&1", bin);
  CHECK_EQ_INT(run_cmd(cmd, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "--threads: must be at least 1, got 0");
}
