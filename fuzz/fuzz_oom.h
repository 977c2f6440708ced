/* fuzz/fuzz_oom.h: allocation failure combined with fuzzing (issue #20).
 * A target defines
 *   static int fuzz_one(const uint8_t *data, size_t size);
 * (< 0 when the entry point it calls failed) and includes this header,
 * which defines LLVMFuzzerTestOneInput. With KILN_FUZZ_OOM=1 in the
 * environment (`make fuzz FUZZ_OOM=1`) each input runs twice: as usual,
 * counting its allocations (M), then with allocation N failing, N = 1 +
 * (the FNV-1a hash of the input) mod M. The same input always fails at the
 * same N, so a crash reproduces from its file (with KILN_FUZZ_OOM=1);
 * inputs differ, so do their N. During the second run fuzz_oom is true:
 * a target's checks of values (round trips, lazy equal to eager) are off,
 * its checks that a failure says why stay on, and so does ASan's watch
 * for crashes, use after free and leaks; a run that fails must leave a
 * message (abort() otherwise).
 *
 * With KILN_FUZZ_OOM=all (`make fuzz-sweep`) each input instead runs once
 * per allocation it makes, with allocation N failing for every N in 1..M:
 * the sweep the random N only samples. It is meant for running a target
 * over its seed files (libFuzzer runs each file named on its command line
 * once), not for fuzzing. */
#ifndef KILN_FUZZ_OOM_H
#define KILN_FUZZ_OOM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool fuzz_oom; /* the failing run is under way */

static int fuzz_one(const uint8_t *data, size_t size);

/* Under ASan the allocator's free lists (small blocks: src/core/alloc.c;
 * storage: cache.c) must step aside (src/core/sanitizer.h), or ASan misses
 * a use after free of a reused block and LeakSanitizer sees a leak only
 * once the freed block that last pointed to it is reused (by some later
 * input). A block freed and asked for again comes back at once from a free
 * list, never from ASan's quarantine. */
static void fuzz_check_no_free_lists(void) {
  size_t bn;
  void *a = core_alloc(64);
  core_free(a);
  void *b = core_alloc(64);
  core_free(b);
  void *c = core_block_alloc(256, &bn);
  core_block_free(c, bn);
  void *d = core_block_alloc(256, &bn);
  core_block_free(d, bn);
  if ((a && a == b) || (c && c == d)) {
    fprintf(stderr, "fuzz: the allocator's free lists are on under ASan (src/core/sanitizer.h)\n");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int mode = -1;
  if (mode < 0) {
    const char *e = getenv("KILN_FUZZ_OOM");
    mode = !e || !*e || *e == '0' ? 0 : strcmp(e, "all") == 0 ? 2 : 1;
    fuzz_check_no_free_lists();
  }
  if (!mode) {
    fuzz_one(data, size);
    return 0;
  }
  core_alloc_fail_at(0);
  fuzz_one(data, size);
  long m = core_alloc_fail_at(0);
  if (m <= 0) return 0;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 0x100000001b3ull;
  long first = mode == 2 ? 1 : 1 + (long)(h % (uint64_t)m), last = mode == 2 ? m : first;
  for (long n = first; n <= last; n++) {
    kiln_clear_error();
    core_alloc_fail_at(n);
    fuzz_oom = true;
    int rc = fuzz_one(data, size);
    fuzz_oom = false;
    core_alloc_fail_at(0);
    if (rc < 0 && !kiln_last_error()[0]) { /* a failure says why */
      /* to fd 2: a target may point the stderr stream elsewhere */
      dprintf(2, "fuzz: allocation %ld of %ld failed without a message\n", n, m);
      abort();
    }
  }
  return 0;
}

#endif
