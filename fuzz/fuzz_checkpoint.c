/* fuzz/fuzz_checkpoint.c: libFuzzer target for checkpoint files. The
 * input is written to a private temporary file and read by
 * kiln_checkpoint_read_info, then loaded by kiln_checkpoint_load into a
 * small hand-built module (fc 4->3 with bias, Adam) and into the built-in
 * "mlp" with SGD+momentum (for odd sizes without an optimizer): each call must
 * succeed or fail with a message, never crash or trip a sanitizer.
 * Single allocations above 64 MiB fail (a header may declare a terabyte
 * tensor; that must be an error). Seeds: fuzz/gen_checkpoint_seeds.c.
 * Run with `make fuzz` (FUZZ_OOM=1: fuzz_oom.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "kiln.h"
#include "fuzz_oom.h"

static char path[64];
static int fd = -1;
static kiln_nn_module *small, *mlp;
static kiln_optim *small_opt, *mlp_opt;

static void cleanup(void) { unlink(path); }

static void setup(void) {
  snprintf(path, sizeof path, "/tmp/kiln-fuzz-ckpt-XXXXXX");
  fd = mkstemp(path);
  if (fd >= 0) atexit(cleanup);
  kiln_generator *g = kiln_generator_new(1);
  small = kiln_nn_module_new();
  if (fd < 0 || !g || !small || !kiln_nn_linear_new(small, "fc", 4, 3, true, g)) abort();
  kiln_optim_opts a = {.kind = KILN_OPTIM_ADAM, .lr = 1e-3};
  small_opt = kiln_optim_new(small, &a);
  mlp = kiln_nn_model_new("mlp", g);
  kiln_optim_opts s = {.kind = KILN_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
  mlp_opt = mlp ? kiln_optim_new(mlp, &s) : NULL;
  if (!small_opt || !mlp_opt) abort();
  kiln_generator_free(g);
}

static int check(kiln_status rc) {
  if (rc < 0 && !kiln_last_error()[0]) abort(); /* a failure must say why */
  return rc;
}

static int fuzz_one(const uint8_t *data, size_t size) {
  if (fd < 0) setup();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  core_alloc_limit((size_t)64 << 20);
  kiln_checkpoint_info info;
  int rc = check(kiln_checkpoint_read_info(path, &info));
  bool with_opt = size % 2 == 0; /* both branches of the optimizer checks */
  if (check(kiln_checkpoint_load(path, small, with_opt ? small_opt : NULL, &info)) < 0) rc = -1;
  if (check(kiln_checkpoint_load(path, mlp, with_opt ? mlp_opt : NULL, with_opt ? &info : NULL)) < 0)
    rc = -1;
  core_alloc_limit(0);
  return rc < 0 ? -1 : 0;
}
