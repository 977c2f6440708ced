/* tests/core/test_cpu.c: choosing the CPU level (Note [CPU levels]): the
 * detected level against /proc/cpuinfo's flags, the set-level hook's
 * refusal to go above the CPU, and KILN_CPU through the kiln binary
 * (kiln --version names the level; a level above the CPU or a bad name
 * warns and keeps the CPU's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

/* Whether /proc/cpuinfo's first flags line lists every flag named. */
static bool has_flags(const char *const *names, int n) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[8192];
  bool found = false, all = false;
  while (f && !found && fgets(line, sizeof line, f))
    if (!strncmp(line, "flags", 5)) {
      found = all = true;
      for (int i = 0; i < n; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, " %s", names[i]);
        char *p = strstr(line, pat);
        all = all && p && (p[strlen(pat)] == ' ' || p[strlen(pat)] == '\n');
      }
    }
  if (f) fclose(f);
  return all;
}

TEST(cpu_level_detected_from_cpuinfo) {
  static const char *const v3[] = {"avx2", "fma", "bmi1", "bmi2", "f16c", "popcnt"};
  static const char *const v4[] = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};
  int want = !has_flags(v3, 6) ? CORE_CPU_BASELINE
             : !has_flags(v4, 5) ? CORE_CPU_AVX2
                                 : CORE_CPU_AVX512;
  CHECK_EQ_INT(core_cpu_max_level(), want);
  CHECK(core_cpu_level() <= core_cpu_max_level());
  CHECK(!strcmp(kiln_cpu_level(), core_cpu_level_name(core_cpu_level())));
  int saved = core_cpu_level();
  if (core_cpu_max_level() < CORE_CPU_AVX512) {
    CHECK(core_cpu_set_level(core_cpu_max_level() + 1) < 0);
    CHECK_STR_CONTAINS(kiln_last_error(), "above this CPU");
    CHECK_EQ_INT(core_cpu_level(), saved);
  }
  CHECK(core_cpu_set_level(7) < 0);
  CHECK_EQ_INT(core_cpu_set_level(CORE_CPU_BASELINE), saved);
  CHECK_EQ_INT(core_cpu_level(), CORE_CPU_BASELINE);
  core_cpu_set_level(saved);
  test_note("this CPU: %s", core_cpu_level_name(want));
}

/* `KILN_CPU=value kiln --version`: stdout and stderr together in out. */
static bool run_version(const char *value, char *out, size_t cap) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) return false;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "KILN_CPU='%s' '%s' --version 2>&1", value, bin);
  FILE *p = popen(cmd, "r");
  if (!p) return false;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  return pclose(p) == 0;
}

TEST(cpu_level_forced_by_kiln_cpu) {
  char out[1024];
  const char *max = core_cpu_level_name(core_cpu_max_level());
  if (!getenv("KILN_BIN")) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set to the kiln binary (make test sets it)");
    return;
  }
  for (int l = 0; l <= core_cpu_max_level(); l++) {
    CHECK(run_version(core_cpu_level_name(l), out, sizeof out));
    char want[64];
    snprintf(want, sizeof want, "(cpu level %s)", core_cpu_level_name(l));
    CHECK_STR_CONTAINS(out, want);
    CHECK(!strstr(out, "KILN_CPU=")); /* no warning */
  }
  CHECK(run_version("avx9000", out, sizeof out));
  CHECK_STR_CONTAINS(out, "is not baseline, avx2 or avx512");
  char want[64];
  snprintf(want, sizeof want, "(cpu level %s)", max);
  CHECK_STR_CONTAINS(out, want);
  if (core_cpu_max_level() < CORE_CPU_AVX512) {
    CHECK(run_version("avx512", out, sizeof out));
    CHECK_STR_CONTAINS(out, "supports only up to");
    CHECK_STR_CONTAINS(out, want);
  }
}
