/* tests/nn/test_torch_checkpoint.c: checkpoints PyTorch reads and writes
 * (Note [PyTorch names]): tensors named as the equivalent PyTorch module
 * names them, optimizer state under "optim."; a plain safetensors
 * state_dict (no kiln metadata, as PyTorch's safetensors writes) loads,
 * with its shapes checked, is reported as plain, and evaluates exactly as
 * the kiln checkpoint of the same parameters. scripts/torch_checkpoint.py
 * checks the same against PyTorch itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln.h"
#include "test.h"

static bool has(const kiln_safetensors *st, const char *name) {
  return kiln_safetensors_find(st, name) != NULL;
}

TEST(checkpoint_tensors_have_pytorch_names) {
  char dir[] = "/tmp/kiln-tn-XXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/c.safetensors", dir);
  const char *archs[3] = {"mlp", "cnn", "lstm"};
  const char *want[3][5] = {
      {"0.weight", "0.bias", "2.weight", "4.bias", "optim.4.weight.momentum_buffer"},
      {"0.weight", "3.bias", "7.weight", "9.bias", "optim.0.weight.momentum_buffer"},
      {"lstm.weight_ih_l0", "lstm.bias_hh_l0", "fc.weight", "fc.bias",
       "optim.fc.weight.momentum_buffer"}};
  for (int a = 0; a < 3; a++) {
    kiln_generator *g = kiln_generator_new(1);
    kiln_nn_module *m = kiln_nn_model_new(archs[a], g);
    kiln_optim_opts oo = {.kind = KILN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
    kiln_optim *o = kiln_optim_new(m, &oo);
    kiln_checkpoint_info info = {.lr = 0.1};
    CHECK(kiln_checkpoint_save(path, m, o, &info) == KILN_OK);
    kiln_safetensors *st = kiln_safetensors_load(path);
    CHECK(st != NULL);
    for (int i = 0; st && i < 5; i++) CHECK_MSG(has(st, want[a][i]), "%s: no '%s'", archs[a], want[a][i]);
    CHECK(!st || !has(st, "fc1.weight"));
    kiln_safetensors_free(st);
    kiln_checkpoint_info back;
    kiln_nn_module *m2 = kiln_nn_model_new(archs[a], g);
    CHECK(kiln_checkpoint_load(path, m2, NULL, &back) == KILN_OK);
    CHECK(!back.plain);
    kiln_optim_free(o);
    kiln_nn_module_free(m);
    kiln_nn_module_free(m2);
    kiln_generator_free(g);
  }
  remove(path);
  rmdir(dir);
}

TEST(checkpoint_plain_pytorch_state_dict_loads_and_evaluates) {
  char dir[] = "/tmp/kiln-tn-XXXXXX", plain[256], ours[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(plain, sizeof plain, "%s/plain.safetensors", dir);
  snprintf(ours, sizeof ours, "%s/kiln.safetensors", dir);
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(5);
  kiln_nn_module *m = kiln_nn_model_new("mlp", g);
  const char *names[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
  kiln_tensor *ts[6];
  for (int i = 0; i < 6; i++) ts[i] = kiln_nn_module_param(m, i);
  /* what safetensors.torch.save_file(model.state_dict()) writes: no metadata */
  CHECK(kiln_safetensors_save(plain, 6, names, ts, 0, NULL, NULL) == KILN_OK);
  kiln_checkpoint_info info;
  CHECK(kiln_checkpoint_read_info(plain, &info) == KILN_OK);
  CHECK(info.plain);
  CHECK(strcmp(info.model, "mlp") == 0);
  CHECK_EQ_INT(info.step, 0);
  kiln_generator *g2 = kiln_generator_new(6);
  kiln_nn_module *fresh = kiln_nn_model_new("mlp", g2);
  CHECK(kiln_checkpoint_load(plain, fresh, NULL, &info) == KILN_OK);
  CHECK(info.plain && strcmp(info.model, "mlp") == 0);
  for (int i = 0; i < 6; i++) {
    kiln_tensor *d = kiln_sub(kiln_nn_module_param(fresh, i), ts[i]);
    double mx = 1;
    CHECK(kiln_item(kiln_amax(kiln_abs(d), NULL, 0, false), &mx) == KILN_OK);
    CHECK_MSG(mx == 0, "%s differs by %g", names[i], mx);
  }
  /* shapes checked, naming the tensor */
  kiln_tensor *t2 = kiln_narrow(ts[2], 0, 0, 255);
  kiln_tensor *bad_ts[6] = {ts[0], ts[1], kiln_contiguous(t2), ts[3], ts[4], ts[5]};
  char badp[300];
  snprintf(badp, sizeof badp, "%s/bad.safetensors", dir);
  CHECK(kiln_safetensors_save(badp, 6, names, bad_ts, 0, NULL, NULL) == KILN_OK);
  CHECK(kiln_checkpoint_load(badp, fresh, NULL, NULL) == KILN_ERR_FORMAT);
  CHECK_STR_CONTAINS(kiln_last_error(), "'2.weight' is Float[255, 256] in the file but Float[256, 256]");
  /* an extra tensor is refused, an optimizer given is left alone */
  const char *names7[7] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias",
                           "running_mean"};
  kiln_tensor *ts7[7] = {ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[5]};
  CHECK(kiln_safetensors_save(badp, 7, names7, ts7, 0, NULL, NULL) == KILN_OK);
  CHECK(kiln_checkpoint_load(badp, fresh, NULL, NULL) == KILN_ERR_FORMAT);
  CHECK_STR_CONTAINS(kiln_last_error(), "'running_mean'");
  kiln_optim_opts oo = {.kind = KILN_OPTIM_ADAM, .lr = 1e-3};
  kiln_optim *o = kiln_optim_new(fresh, &oo);
  kiln_optim_set_steps(o, 7);
  CHECK(kiln_checkpoint_load(plain, fresh, o, NULL) == KILN_OK);
  CHECK_EQ_INT(kiln_optim_steps(o), 7);
  /* evaluates as the kiln checkpoint of the same parameters */
  kiln_checkpoint_info ki = {.lr = 0.05};
  CHECK(kiln_checkpoint_save(ours, m, NULL, &ki) == KILN_OK);
  double l1 = -1, a1 = -1, l2 = -2, a2 = -2;
  kiln_data *d = kiln_data_mnist_load(kiln_data_default_dir(), false);
  if (!d) {
    test_note("evaluation skipped: no Fashion-MNIST data (%s)", kiln_last_error());
  } else {
    kiln_data_free(d);
    CHECK(kiln_nn_eval_checkpoint(plain, NULL, 300, &l1, &a1) == KILN_OK);
    CHECK(kiln_nn_eval_checkpoint(ours, NULL, 300, &l2, &a2) == KILN_OK);
    CHECK(l1 == l2 && a1 == a2 && a1 > 0);
  }
  kiln_optim_free(o);
  kiln_nn_module_free(m);
  kiln_nn_module_free(fresh);
  kiln_generator_free(g);
  kiln_generator_free(g2);
  kiln_scope_end();
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0);
}
