/* src/core/cpu.h: the instruction-set level kiln's hot kernels run at, and
 * the macros that compile one kernel's source once per level.
 *
 * Note [CPU levels]: the library is built for the x86-64 baseline (SSE2),
 * so a libkiln.a or kiln built on one machine runs on any x86-64. The hot
 * kernels (tiles, conversions, softmax rows, GEMM packing and micro-kernels)
 * are compiled three times from one source: for the baseline, for AVX2+FMA
 * (x86-64-v3's features) and for AVX-512 (x86-64-v4's), through gcc's
 * target attributes. CORE_CLONES writes the copies and a dispatcher that
 * picks one by core_cpu_level() on every call (a load and a branch per
 * tile of ~1000 elements: nothing next to the loop it selects). The level
 * is chosen at first use from cpuid (__builtin_cpu_supports), lowered by
 * KILN_CPU=baseline|avx2|avx512 (never raised above what the CPU has: a
 * warning, and the CPU's level is kept), and tests switch it in-process
 * with core_cpu_set_level to compare the levels' results. The kernels'
 * arithmetic is the same at every level (Note [Explicit FMA] in
 * src/ops/vmath.h: no contraction; fmaf is exact wherever it runs; no
 * reassociation), so their results are bit-identical; only GEMM, whose
 * summation order follows its blocking, differs within rounding. */
#ifndef KILN_CORE_CPU_H
#define KILN_CORE_CPU_H

#include <stdbool.h>

enum { CORE_CPU_BASELINE = 0, CORE_CPU_AVX2 = 1, CORE_CPU_AVX512 = 2, CORE_CPU_LEVELS = 3 };

/* The features of each level, as target attributes (the x86-64-v3 and v4
 * feature sets; the arch and tuning stay the build's). */
#define CORE_TARGET_AVX2 __attribute__((target("avx2,fma,bmi,bmi2,f16c,lzcnt,movbe,popcnt")))
#define CORE_TARGET_AVX512                                                              \
  __attribute__((target("avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,bmi,bmi2,f16c," \
                        "lzcnt,movbe,popcnt")))

extern int core_cpu_current; /* < 0 until chosen; read through core_cpu_level */
/* Chooses the level (cpuid, KILN_CPU) the first time; returns it. */
int core_cpu_init(void);

/* The level kernels run at now (CORE_CPU_*). Never fails. */
static inline int core_cpu_level(void) {
  int l = __atomic_load_n(&core_cpu_current, __ATOMIC_RELAXED);
  return l >= 0 ? l : core_cpu_init();
}
/* The highest level this CPU (and its OS) supports. */
int core_cpu_max_level(void);
/* Test hook: runs kernels at `level` from now on; returns the previous
 * level, or < 0 (error set) when the CPU lacks it. Not thread-safe against
 * kernels running concurrently (tests switch between parallel regions). */
int core_cpu_set_level(int level);
/* "baseline", "avx2" or "avx512"; "?" for anything else. */
const char *core_cpu_level_name(int level);

/* CORE_CLONES(name, (params), (args)) { body }: defines `static void
 * name(params)`, which runs the body compiled for the current level. The
 * body is written once, after the macro, as a function's; args names the
 * parameters in order. Static inline helpers it calls (vmath.h) are
 * inlined into each copy and compiled for its level too. */
#define CORE_CLONES(name, params, args)                                          \
  static inline __attribute__((always_inline)) void name##_body params;          \
  static void name##_l0 params { name##_body args; }                             \
  CORE_TARGET_AVX2 static void name##_l1 params { name##_body args; }            \
  CORE_TARGET_AVX512 static void name##_l2 params { name##_body args; }          \
  static void name params {                                                      \
    switch (core_cpu_level()) {                                                  \
    case CORE_CPU_AVX512: name##_l2 args; break;                                 \
    case CORE_CPU_AVX2: name##_l1 args; break;                                   \
    default: name##_l0 args; break;                                              \
    }                                                                            \
  }                                                                              \
  static inline __attribute__((always_inline)) void name##_body params

#endif
