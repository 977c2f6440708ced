/* fuzz/fuzz_exec.c: libFuzzer target for the profiling executor over
 * random graphs, with a differential oracle. The input is the random
 * stream of tests/exec/randgraph.c, which builds a well-typed random op
 * program (elementwise ops, reductions, matmul, view and shape ops, cat,
 * in-place ops; f32/f64/int64/bool inputs with broadcast, 0- and 1-sized
 * dims, random requires_grad) and runs it eager, jit (profiling,
 * optimized, fallback calls) and lazy; abort() when they disagree (the
 * message and the graph go to stderr), so the fuzzer reports it. Single
 * allocations above 64 MiB fail. Run with `make fuzz`. */
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "exec/randgraph.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char msg[16384];
  rg_rand r = {.data = data, .size = size};
  core_alloc_limit((size_t)64 << 20);
  int rc = rg_run(&r, 12, msg, sizeof msg);
  core_alloc_limit(0);
  if (rc == RG_MISMATCH) {
    fprintf(stderr, "fuzz_exec: %s\n", msg);
    abort();
  }
  return 0;
}
