/* fuzz/fuzz_npy.c: libFuzzer target for .npy decoding from memory. Any
 * input must either fail with a message or give a tensor whose every
 * element can be read. Run with `make fuzz` (FUZZ_OOM=1: fuzz_oom.h). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_oom.h"

static int fuzz_one(const uint8_t *data, size_t size) {
  kiln_scope_begin();
  kiln_tensor *t = kiln_npy_load_buffer(data, size, "fuzz.npy");
  if (!t) {
    if (!kiln_last_error()[0]) abort();
  } else {
    kiln_tensor *s = kiln_sum(t, NULL, 0, false); /* touches every element */
    if (!s && kiln_tensor_numel(t) > 0 && kiln_tensor_dtype(t) != KILN_DTYPE_BOOL && !fuzz_oom)
      abort();
  }
  kiln_scope_end();
  return t ? 0 : -1;
}
