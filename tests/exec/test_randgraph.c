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

/* Past findings of longer sweeps of the same numbering (seeds 1..30,000):
 * 29211 wrote a view of a tensor without history with an operand that
 * requires grad (eager refused it, the jit ran it; Note [Views without
 * history] in src/autograd/views.c). */
TEST(randgraph_sweep_findings_agree) {
  static char msg[16384];
  static const uint64_t seeds[] = {29211};
  for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
    rg_rand r = {.s = seeds[i] * 7919};
    int rc = rg_run(&r, 8, msg, sizeof msg);
    CHECK_MSG(rc != RG_MISMATCH, "seed %llu: %s", (unsigned long long)seeds[i], msg);
  }
}
