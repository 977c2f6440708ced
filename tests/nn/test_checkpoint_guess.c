/* tests/nn/test_checkpoint_guess.c: reading a plain state_dict guesses its
 * built-in model from a table of the models' parameters, never by building
 * the models (issue #20: readers do work in proportion to their input; the
 * checkpoint fuzzer's 196-byte plain files took seconds each under ASan,
 * initializing mlp, cnn and lstm's 1.5 MB of random weights per read). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kiln.h"
#include "nn/nn.h"
#include "test.h"

/* A plain safetensors file (no kiln metadata) of one Float tensor per
 * name, each of the shape given; returns its path in dir. */
static void write_plain(const char *path, int n, const char *const *names, const int64_t (*shapes)[4],
                        const int *ndims) {
  kiln_scope_begin();
  kiln_tensor *ts[8];
  for (int i = 0; i < n; i++) ts[i] = kiln_zeros(ndims[i], shapes[i], KILN_DTYPE_F32);
  CHECK(kiln_safetensors_save(path, n, names, ts, 0, NULL, NULL) == KILN_OK);
  kiln_scope_end();
}

TEST(checkpoint_plain_guess_builds_no_model) {
  char dir[] = "/tmp/kiln-cg-XXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/p.safetensors", dir);
  /* two tensors: no built-in model has them, so every model is ruled out */
  const char *names[2] = {"fc.weight", "fc.bias"};
  const int64_t shapes[2][4] = {{3, 4}, {3}};
  const int nd[2] = {2, 1};
  write_plain(path, 2, names, shapes, nd);
  /* a largest allocation of 64 KiB: mlp's fc1.weight alone is 784 KiB */
  size_t old = core_alloc_limit((size_t)64 << 10);
  core_alloc_fail_at(0);
  kiln_checkpoint_info info;
  int rc = kiln_checkpoint_read_info(path, &info);
  long n_alloc = core_alloc_fail_at(0);
  core_alloc_limit(old);
  CHECK_MSG(rc == KILN_OK, "%s", kiln_last_error());
  CHECK(info.plain && info.model[0] == 0);
  /* the file's own parsing (its copy, entries, names, tensors, the name
   * index): tens of allocations; building the three models made hundreds */
  CHECK_MSG(n_alloc <= 40, "read_info made %ld allocations", n_alloc);
  /* a file with mlp's names, one shape off: ruled out by the table too */
  const char *mn[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
  const int64_t ms[6][4] = {{256, 784}, {256}, {256, 256}, {256}, {10, 256}, {11}};
  const int mnd[6] = {2, 1, 2, 1, 2, 1};
  write_plain(path, 6, mn, ms, mnd);
  core_alloc_fail_at(0);
  CHECK(kiln_checkpoint_read_info(path, &info) == KILN_OK);
  n_alloc = core_alloc_fail_at(0);
  CHECK(info.plain && info.model[0] == 0);
  CHECK_MSG(n_alloc <= 40, "read_info made %ld allocations", n_alloc);
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0);
}

TEST(checkpoint_model_param_table_matches_built_models) {
  const char *archs[3] = {"mlp", "cnn", "lstm"};
  for (int a = 0; a < 3; a++) {
    kiln_generator *g = kiln_generator_new(1);
    kiln_nn_module *m = kiln_nn_model_new(archs[a], g);
    int n = -1;
    const nn_param_spec *p = nn_model_params(archs[a], &n);
    CHECK(m != NULL && p != NULL);
    CHECK_EQ_INT(n, kiln_nn_module_n_params(m));
    for (int i = 0; p && m && i < n && i < kiln_nn_module_n_params(m); i++) {
      kiln_tensor *w = kiln_nn_module_param(m, i);
      CHECK_MSG(strcmp(p[i].name, kiln_nn_module_param_name(m, i)) == 0, "%s: %s vs %s", archs[a],
                p[i].name, kiln_nn_module_param_name(m, i));
      CHECK_EQ_INT(p[i].ndim, kiln_tensor_ndim(w));
      CHECK(kiln_tensor_dtype(w) == KILN_DTYPE_F32);
      for (int d = 0; d < p[i].ndim && d < kiln_tensor_ndim(w); d++)
        CHECK_EQ_INT(p[i].shape[d], kiln_tensor_size(w, d));
    }
    CHECK(nn_model_params("resnet", &n) == NULL);
    kiln_nn_module_free(m);
    kiln_generator_free(g);
  }
}
