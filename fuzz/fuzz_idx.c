/* fuzz/fuzz_idx.c: libFuzzer target for IDX (MNIST) files, plain or
 * gzipped. The reader takes a path, so each input is written to a scratch
 * file first. Any input must either fail with a message or give a tensor
 * whose every element can be read. Run with `make fuzz` (FUZZ_OOM=1:
 * fuzz_oom.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_oom.h"

static int fuzz_one(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/kiln-fuzz-idx-%ld", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  kiln_scope_begin();
  kiln_tensor *t = kiln_data_idx_load(path, KILN_DTYPE_F32);
  if (!t) {
    if (!kiln_last_error()[0]) abort();
  } else if (!kiln_sum(t, NULL, 0, false) && !fuzz_oom) {
    abort();
  }
  kiln_scope_end();
  unlink(path);
  return t ? 0 : -1;
}
