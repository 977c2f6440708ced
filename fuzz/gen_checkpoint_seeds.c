/* fuzz/gen_checkpoint_seeds.c: writes the seeds of fuzz_checkpoint into
 * the directory given (committed as fuzz/seeds/checkpoint/): checkpoints
 * of the target's small module (fc 4->3) with Adam state after one step
 * and without an optimizer, a plain state_dict, a cut-down "mlp"-named
 * state_dict (its tensors named as the mlp's but tiny), and truncations.
 * Build and run against the release library:
 *   cc -Iinclude -Isrc fuzz/gen_checkpoint_seeds.c build/libkiln.a \
 *      -lopenblas -ljansson -lz -lm -lpthread -ldl -fopenmp -o /tmp/gen && /tmp/gen fuzz/seeds/checkpoint */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static void die(void) {
  fprintf(stderr, "gen_checkpoint_seeds: %s\n", kiln_last_error());
  exit(1);
}

/* Copies the first n bytes of src to dst. */
static void truncate_copy(const char *src, const char *dst, long n) {
  FILE *f = fopen(src, "rb"), *g = fopen(dst, "wb");
  if (!f || !g) exit(1);
  for (long i = 0; i < n; i++) {
    int c = fgetc(f);
    if (c == EOF) break;
    fputc(c, g);
  }
  fclose(f);
  fclose(g);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char p[4][512], q[512];
  for (int i = 0; i < 4; i++) snprintf(p[i], sizeof p[i], "%s/seed%d.ckpt", argv[1], i);
  kiln_generator *g = kiln_generator_new(7);
  kiln_nn_module *m = kiln_nn_module_new();
  kiln_nn_layer *fc = m ? kiln_nn_linear_new(m, "fc", 4, 3, true, g) : NULL;
  kiln_optim_opts a = {.kind = KILN_OPTIM_ADAM, .lr = 1e-3};
  kiln_optim *o = fc ? kiln_optim_new(m, &a) : NULL;
  if (!o) die();
  kiln_scope_begin();
  kiln_tensor *x = kiln_randn(2, (int64_t[]){2, 4}, KILN_DTYPE_F32, g);
  kiln_tensor *loss = x ? kiln_sum(kiln_nn_forward(fc, x), NULL, 0, false) : NULL;
  if (!loss || kiln_backward(loss, NULL) < 0 || kiln_optim_step(o) < 0) die();
  kiln_scope_end();
  kiln_checkpoint_info info = {.lr = 1e-3, .step = 1, .epoch = 0, .batch = 1,
                               .rng = {1, 2, 3, 4}};
  if (kiln_checkpoint_save(p[0], m, o, &info) < 0) die();
  if (kiln_checkpoint_save(p[1], m, NULL, &info) < 0) die();
  /* plain state_dicts: no metadata */
  kiln_tensor *ts[6];
  const char *names[6] = {"fc.weight", "fc.bias"};
  ts[0] = kiln_nn_module_find_param(m, "fc.weight");
  ts[1] = kiln_nn_module_find_param(m, "fc.bias");
  if (kiln_safetensors_save(p[2], 2, names, ts, 0, NULL, NULL) < 0) die();
  kiln_scope_begin();
  const char *mn[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
  int64_t shp[6][2] = {{2, 3}, {2}, {2, 2}, {2}, {1, 2}, {1}};
  for (int i = 0; i < 6; i++)
    if (!(ts[i] = kiln_randn(i % 2 ? 1 : 2, shp[i], KILN_DTYPE_F32, g))) die();
  if (kiln_safetensors_save(p[3], 6, mn, ts, 0, NULL, NULL) < 0) die();
  kiln_scope_end();
  long cuts[3] = {8, 100, 300};
  for (int i = 0; i < 3; i++) {
    snprintf(q, sizeof q, "%s/trunc%ld.ckpt", argv[1], cuts[i]);
    truncate_copy(p[0], q, cuts[i]);
  }
  kiln_optim_free(o);
  kiln_nn_module_free(m);
  kiln_generator_free(g);
  return 0;
}
