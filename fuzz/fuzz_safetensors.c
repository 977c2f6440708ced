/* fuzz/fuzz_safetensors.c: libFuzzer target for safetensors parsing from
 * memory. Any input must either fail with a message or give tensors whose
 * names, data and metadata can all be read. Run with `make fuzz` (FUZZ_OOM=1:
 * fuzz_oom.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_oom.h"

static int fuzz_one(const uint8_t *data, size_t size) {
  kiln_safetensors *st = kiln_safetensors_load_buffer(data, size, "fuzz.safetensors");
  if (!st) {
    if (!kiln_last_error()[0]) abort();
    return -1;
  }
  kiln_scope_begin();
  for (int i = 0; i < kiln_safetensors_n_tensors(st); i++) {
    const char *name = kiln_safetensors_name(st, i);
    kiln_tensor *t = kiln_safetensors_tensor(st, i);
    if (!name || !t || kiln_safetensors_find(st, name) == NULL) {
      if (!fuzz_oom) abort();
      continue;
    }
    if (kiln_tensor_dtype(t) != KILN_DTYPE_BOOL) kiln_sum(t, NULL, 0, false);
  }
  (void)kiln_safetensors_metadata(st, "format");
  kiln_scope_end();
  kiln_safetensors_free(st);
  return 0;
}
