/* src/core/cpu.c: choosing the instruction-set level of the hot kernels at
 * first use (Note [CPU levels] in cpu.h). */
#include <cpuid.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

int core_cpu_current = -1;

static const char *const names[CORE_CPU_LEVELS] = {"baseline", "avx2", "avx512"};

const char *core_cpu_level_name(int level) {
  return level >= 0 && level < CORE_CPU_LEVELS ? names[level] : "?";
}

/* F16C by cpuid leaf 1: clang 14's __builtin_cpu_supports has no "f16c"
 * (the libFuzzer build, make fuzz, is clang's). */
static bool has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

int core_cpu_max_level(void) {
  static atomic_int max = -1; /* threads racing here compute the same */
  if (max >= 0) return max;
  __builtin_cpu_init();
  /* libgcc's checks include the OS's support (XCR0) for the ymm/zmm state */
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
            has_f16c() && __builtin_cpu_supports("popcnt");
  bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl");
  int level = v4 ? CORE_CPU_AVX512 : v3 ? CORE_CPU_AVX2 : CORE_CPU_BASELINE;
  max = level;
  return level;
}

int core_cpu_init(void) {
  int max = core_cpu_max_level(), level = max;
  const char *env = getenv("KILN_CPU");
  if (env && *env) {
    int want = -1;
    for (int i = 0; i < CORE_CPU_LEVELS; i++)
      if (!strcmp(env, names[i])) want = i;
    if (want < 0)
      fprintf(stderr, "kiln: KILN_CPU=%s is not baseline, avx2 or avx512; using %s\n", env,
              names[max]);
    else if (want > max)
      fprintf(stderr, "kiln: KILN_CPU=%s: this CPU supports only up to %s; using %s\n", env,
              names[max], names[max]);
    else
      level = want;
  }
  int expect = -1; /* concurrent first uses agree: the first one's choice stays */
  __atomic_compare_exchange_n(&core_cpu_current, &expect, level, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
  return __atomic_load_n(&core_cpu_current, __ATOMIC_RELAXED);
}

int core_cpu_set_level(int level) {
  int prev = core_cpu_level();
  if (level < 0 || level > core_cpu_max_level())
    return core_error(KILN_ERR_UNSUPPORTED, "core_cpu_set_level: %s is above this CPU's %s",
                      core_cpu_level_name(level), names[core_cpu_max_level()]);
  __atomic_store_n(&core_cpu_current, level, __ATOMIC_RELAXED);
  return prev;
}

const char *kiln_cpu_level(void) { return names[core_cpu_level()]; }
