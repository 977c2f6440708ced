/* fuzz/fuzz_exec.c: libFuzzer target for the profiling executor over
 * random graphs, with a differential oracle. The input is the random
 * stream of tests/exec/randgraph.c, which builds a well-typed random op
 * program (elementwise ops, reductions, matmul, view and shape ops, cat,
 * in-place ops; f32/f64/int64/bool inputs with broadcast, 0- and 1-sized
 * dims, random requires_grad) and runs it eager, jit (profiling,
 * optimized, fallback calls) and lazy; abort() when they disagree (the
 * message and the graph go to stderr), so the fuzzer reports it. Single
 * allocations above 64 MiB fail. Run with `make fuzz` (FUZZ_OOM=1:
 * fuzz_oom.h; with an allocation failing, the modes may well disagree, so
 * only a failure without a message is a finding then).
 *
 * Leaks are checked after every input (LeakSanitizer's recoverable check;
 * KILN_FUZZ_LEAK_EACH=0 turns it off): libFuzzer's own check runs only
 * after an input that made more allocations than it freed, with the
 * allocations of that re-run ignored, so it reports a leak of an earlier
 * input (one that also freed a cache entry) against a later one. Here the
 * input that leaked is the one saved. */
#include <sanitizer/lsan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "exec/randgraph.c"
#include "fuzz_oom.h"

static int fuzz_one(const uint8_t *data, size_t size) {
  static char msg[16384];
  static int leak_each = -1;
  if (leak_each < 0) {
    const char *e = getenv("KILN_FUZZ_LEAK_EACH");
    leak_each = !e || *e != '0';
  }
  rg_rand r = {.data = data, .size = size};
  core_alloc_limit((size_t)64 << 20);
  int rc = rg_run(&r, 12, msg, sizeof msg);
  core_alloc_limit(0);
  if (rc == RG_MISMATCH && (!fuzz_oom || strstr(msg, "without a message"))) {
    fprintf(stderr, "fuzz_exec: %s\n", msg);
    abort();
  }
  if (leak_each && __lsan_do_recoverable_leak_check()) {
    fprintf(stderr, "fuzz_exec: this input leaked (LeakSanitizer's report above)\n");
    abort();
  }
  return 0;
}
