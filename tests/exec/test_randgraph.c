/* tests/exec/test_randgraph.c: the property test of the random-graph
 * generator (randgraph.c), without clang: 200 seeded random programs, each
 * run eager, jit (four calls: profiling, optimizing, optimized, fallback)
 * and lazy; every one must agree in all three modes or fail in all three.
 * fuzz/fuzz_exec.c runs the same oracle on fuzzer inputs. */
#include <stdio.h>

#include "exec/randgraph.h"
#include "kiln.h"
#include "test.h"

TEST(randgraph_eager_jit_lazy_agree) {
  static char msg[16384];
  int agree = 0, failed = 0, mismatched = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    rg_rand r = {.s = seed * 7919};
    int rc = rg_run(&r, 8, msg, sizeof msg);
    if (rc == RG_AGREE) agree++;
    else if (rc == RG_ALL_FAILED) failed++;
    else if (mismatched++ < 3) test_fail(__FILE__, __LINE__, "seed %llu: %s", (unsigned long long)seed, msg);
  }
  CHECK_EQ_INT(mismatched, 0);
  /* the generator makes mostly well-typed programs, and some ill-typed ones */
  CHECK(agree >= 150);
  CHECK(failed >= 1);
  test_note("%d programs agreed, %d failed in every mode", agree, failed);
}
