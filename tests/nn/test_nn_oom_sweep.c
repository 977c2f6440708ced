/* tests/nn/test_nn_oom_sweep.c: allocation-failure sweep of a checkpoint
 * save and load (issue #20): at every allocation N the save either writes
 * the checkpoint or fails with an error leaving the old file as it was; the
 * load either restores exactly the saved values or fails with an error
 * leaving the model as it was; a retry after a failure succeeds. */
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "nn/nn.h"
#include "test.h"

static double *params_of(const kiln_nn_module *m, int64_t *n) {
  int64_t total = 0, k = 0;
  for (int i = 0; i < kiln_nn_module_n_params(m); i++)
    total += kiln_tensor_numel(kiln_nn_module_param(m, i));
  double *s = malloc((size_t)total * sizeof *s);
  for (int i = 0; s && i < kiln_nn_module_n_params(m); i++) {
    kiln_tensor *p = kiln_nn_module_param(m, i);
    for (int64_t j = 0; j < kiln_tensor_numel(p); j++) s[k++] = core_get_flat(p, j);
  }
  *n = total;
  return s;
}

TEST(oom_sweep_checkpoint_save_and_load) {
  char dir[] = "/tmp/kiln-ckoom-XXXXXX", path[128], old_path[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  snprintf(old_path, sizeof old_path, "%s/old.safetensors", dir);
  kiln_generator *g1 = kiln_generator_new(1), *g2 = kiln_generator_new(2);
  kiln_nn_module *a = kiln_nn_model_new("mlp", g1), *b = kiln_nn_model_new("mlp", g2);
  kiln_checkpoint_info info = {.model = "mlp", .lr = 0.1, .step = 3};
  /* the file to be replaced holds b's values */
  CHECK(kiln_checkpoint_save(old_path, b, NULL, &info) == 0);
  size_t old_len = 0;
  char *old_bytes = test_read_file(old_path, &old_len);
  int64_t n_a, n_b, n;
  double *va = params_of(a, &n_a), *vb = params_of(b, &n_b);
  int hit = 0;
  for (long k = 1; k < 100000; k++) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cp %s %s", old_path, path);
    CHECK(system(cmd) == 0);
    core_alloc_fail_at(k);
    int rc = kiln_checkpoint_save(path, a, NULL, &info);
    long made = core_alloc_fail_at(0);
    size_t len = 0;
    char *now = test_read_file(path, &len);
    if (rc < 0) {
      CHECK_MSG(made >= k, "save failed without a failed allocation: %s", kiln_last_error());
      CHECK_MSG(now && len == old_len && !memcmp(now, old_bytes, len),
                "allocation %ld: a failed save changed the file", k);
      CHECK(kiln_checkpoint_save(path, a, NULL, &info) == 0); /* retry */
    }
    free(now);
    hit += made >= k;
    if (made < k) break;
  }
  int save_hit = hit;
  CHECK(hit > 5);
  /* path now holds a's values; load it into b at every failure point */
  hit = 0;
  for (long k = 1; k < 100000; k++) {
    CHECK(kiln_checkpoint_load(old_path, b, NULL, NULL) == 0); /* b as it was */
    core_alloc_fail_at(k);
    int rc = kiln_checkpoint_load(path, b, NULL, NULL);
    long made = core_alloc_fail_at(0);
    double *vn = params_of(b, &n);
    if (rc == 0) {
      CHECK_MSG(n == n_a && !memcmp(vn, va, (size_t)n * sizeof *vn),
                "allocation %ld: the load succeeded with other values", k);
    } else {
      CHECK_MSG(made >= k, "load failed without a failed allocation: %s", kiln_last_error());
      CHECK_MSG(n == n_b && !memcmp(vn, vb, (size_t)n * sizeof *vn),
                "allocation %ld: a failed load changed the model", k);
    }
    free(vn);
    hit += made >= k;
    if (made < k) break;
  }
  test_note("%d save and %d load failure points", save_hit, hit);
  CHECK(hit > 5);
  free(va), free(vb), free(old_bytes);
  kiln_nn_module_free(a), kiln_nn_module_free(b);
  kiln_generator_free(g1), kiln_generator_free(g2);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}
