/* tests/nn/test_models.c: the imported-model corpus (tests/data/models, from
 * scripts/gen_models.py with PyTorch 1.13 + torchvision 0.14): each model
 * loads with its weights and, in eager, jit (1 and 5 calls) and lazy mode,
 * in eval and training mode, gives PyTorch's outputs, parameter gradients
 * (where the goldens hold them) and updated buffers; a model needing ops
 * kiln lacks is reported with their names (test_note). Also the one-line
 * errors of bad exports. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "ir/ir.h"
#include "kiln.h"
#include "ops/op.h"
#include "../ops/compare.h"
#include "test.h"

#define DIR "tests/data/models/"

static const char *const models[] = {
    "mlp", "cnn", "resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1",
    "shufflenet_v2_x0_5", "densenet121", "efficientnet_b0", "vgg11_bn", "transformer_encoder",
    "transformer_encoder_seq_first", "multihead_attention", "gpt2_block", "lstm", "gru",
    "rnn_stack", "lstm_gru_bidirectional", "rnn_cells",
    "text_classifier", "audio_conv1d", "unet_block", "vae", "batchnorm2d_train", "layernorm",
    "groupnorm"};
enum { N_MODELS = sizeof models / sizeof *models };

/* The node kinds of the golden's "ops" list kiln has neither as an op nor
 * as a builtin, comma-separated into buf; "" if none. */
static void missing_ops(kiln_safetensors *gold, char *buf, size_t n) {
  buf[0] = 0;
  const char *s = kiln_safetensors_metadata(gold, "ops");
  json_t *j = s ? json_loads(s, 0, NULL) : NULL;
  size_t i, k = 0;
  json_t *v;
  json_array_foreach(j, i, v) {
    const char *name = json_string_value(v);
    if (!name || strcmp(name, "prim::GetAttr") == 0 || strcmp(name, "prim::SetAttr") == 0)
      continue;
    if (op_find(name) >= 0 || ir_prim_find(name) >= 0) continue;
    k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s%s", k ? ", " : "", name);
  }
  json_decref(j);
}

typedef struct run_cfg {
  kiln_nn_mode mode;
  int calls;
  const char *label;
} run_cfg;

static const run_cfg cfgs[] = {
    {KILN_NN_EAGER, 1, "eager"}, {KILN_NN_JIT, 1, "jit/1"}, {KILN_NN_JIT, 5, "jit/5"},
    {KILN_NN_LAZY, 1, "lazy"}};

/* Runs one model in one configuration and training flag; 0 if everything
 * the goldens hold matched, else a message in why. */
static int check_model(const char *name, kiln_safetensors *gold, const run_cfg *c, bool training,
                       char *why, size_t n) {
  char ir[256], w[256];
  snprintf(ir, sizeof ir, DIR "%s.ir", name);
  snprintf(w, sizeof w, DIR "%s.safetensors", name);
  kiln_model_opts o;
  kiln_model_opts_default(&o);
  o.mode = c->mode;
  o.training = training;
  kiln_model *m = kiln_model_load(ir, w, &o);
  if (!m) {
    snprintf(why, n, "load: %s", kiln_last_error());
    return -1;
  }
  const char *mode = training && kiln_safetensors_find(gold, "train.output.0") ? "train" : "eval";
  bool lazy = c->mode == KILN_NN_LAZY;
  int rc = 0, n_in = kiln_model_n_inputs(m);
  kiln_value in[8], out[16];
  kiln_scope_begin();
  for (int i = 0; i < n_in && i < 8; i++) {
    char key[32];
    snprintf(key, sizeof key, "input.%d", i);
    kiln_tensor *t = kiln_clone(kiln_safetensors_find(gold, key));
    in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = lazy ? kiln_to_lazy(t) : t};
  }
  int k = 0;
  for (int call = 0; call < c->calls && k >= 0; call++) {
    k = kiln_model_call(m, in, n_in, out, 16);
  }
  if (k < 0) {
    snprintf(why, n, "call: %s", kiln_last_error());
    rc = -1;
    goto done;
  }
  /* loss = sum(out_k * seed_k), backward */
  kiln_tensor *loss = NULL;
  for (int i = 0; i < k; i++) {
    char key[32];
    snprintf(key, sizeof key, "seed.%d", i);
    kiln_tensor *s = kiln_safetensors_find(gold, key);
    if (out[i].kind != KILN_VALUE_TENSOR || !s) continue;
    kiln_tensor *t = kiln_sum(kiln_mul(out[i].t, lazy ? kiln_to_lazy(s) : s), NULL, 0, false);
    loss = loss ? kiln_add(loss, t) : t;
  }
  bool grads = false;
  char key[300];
  snprintf(key, sizeof key, "%s.grad.", mode);
  for (int i = 0; i < kiln_safetensors_n_tensors(gold); i++)
    grads |= strncmp(kiln_safetensors_name(gold, i), key, strlen(key)) == 0;
  if (grads && loss && kiln_backward(loss, NULL) < 0) {
    snprintf(why, n, "backward: %s", kiln_last_error());
    rc = -1;
    goto done;
  }
  if (lazy && kiln_mark_step() < 0) {
    snprintf(why, n, "mark_step: %s", kiln_last_error());
    rc = -1;
    goto done;
  }
  for (int i = 0; i < k && rc == 0; i++) {
    snprintf(key, sizeof key, "%s.output.%d", mode, i);
    char w2[200];
    if (out[i].kind == KILN_VALUE_TENSOR &&
        !test_close_to(out[i].t, kiln_safetensors_find(gold, key), 1e-4, 1e-5, 1e-2, w2,
                       sizeof w2)) {
      snprintf(why, n, "output %d: %s", i, w2);
      rc = -1;
    }
  }
  for (int i = 0; grads && i < kiln_model_n_tensors(m) && rc == 0; i++) {
    if (!kiln_model_tensor_is_param(m, i)) continue;
    snprintf(key, sizeof key, "%s.grad.%s", mode, kiln_model_tensor_name(m, i));
    kiln_tensor *want = kiln_safetensors_find(gold, key), *p = kiln_model_tensor(m, i);
    kiln_tensor *g = kiln_tensor_grad(p);
    kiln_tensor *zero = kiln_zeros(kiln_tensor_ndim(p), kiln_tensor_shape(p), KILN_DTYPE_F32);
    char w2[200];
    if (want && !test_close_to(g ? g : zero, want, 1e-3, 1e-4, 1e-2, w2, sizeof w2)) {
      snprintf(why, n, "grad of %s: %s", kiln_model_tensor_name(m, i), w2);
      rc = -1;
    }
  }
  if (training && c->calls == 1)
    for (int i = 0; i < kiln_model_n_tensors(m) && rc == 0; i++) {
      snprintf(key, sizeof key, "train.buffer.%s", kiln_model_tensor_name(m, i));
      kiln_tensor *want = kiln_safetensors_find(gold, key);
      char w2[200];
      if (want && !test_close_to(kiln_model_tensor(m, i), want, 1e-4, 1e-5, 1e-2, w2, sizeof w2)) {
        snprintf(why, n, "buffer %s: %s", kiln_model_tensor_name(m, i), w2);
        rc = -1;
      }
    }
done:
  kiln_scope_end();
  kiln_model_free(m);
  return rc;
}

TEST(models_corpus_match_pytorch) {
  int running = 0;
  char lacking[8192] = "";
  size_t nl = 0;
  for (int mi = 0; mi < N_MODELS; mi++) {
    char gp[256], missing[2048], why[1024];
    snprintf(gp, sizeof gp, DIR "%s.golden.safetensors", models[mi]);
    kiln_safetensors *gold = kiln_safetensors_load(gp);
    CHECK(gold != NULL);
    if (!gold) continue;
    missing_ops(gold, missing, sizeof missing);
    if (missing[0]) {
      /* not yet runnable: loading must fail and name one of the missing ops */
      char ir[256], w[256];
      snprintf(ir, sizeof ir, DIR "%s.ir", models[mi]);
      snprintf(w, sizeof w, DIR "%s.safetensors", models[mi]);
      kiln_model *m = kiln_model_load(ir, w, NULL);
      CHECK(m == NULL);
      kiln_model_free(m);
      fprintf(stderr, "     not yet runnable: %s needs %s\n", models[mi], missing);
      nl += (size_t)snprintf(lacking + nl, nl < sizeof lacking ? sizeof lacking - nl : 0,
                             "%s%s", nl ? ", " : "", models[mi]);
      kiln_safetensors_free(gold);
      continue;
    }
    bool all = true;
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
      for (int tr = 0; tr < 2; tr++)
        if (check_model(models[mi], gold, &cfgs[c], tr, why, sizeof why) < 0) {
          test_fail(__FILE__, __LINE__, "%s (%s, %s): %s", models[mi], cfgs[c].label,
                    tr ? "train" : "eval", why);
          all = false;
        }
    running += all;
    kiln_safetensors_free(gold);
  }
  test_note("%d of %d exported models run in eager, jit (1 and 5 calls) and lazy mode, eval "
            "and train, equal to PyTorch%s%s%s",
            running, N_MODELS, lacking[0] ? " (not yet: " : "", lacking, lacking[0] ? ")" : "");
  /* every model of the corpus runs: one that stops running is a regression */
  CHECK_EQ_INT(running, N_MODELS);
}

/* Eval mode under no_grad, where PyTorch's transformer layers take their
 * fast path (the fused kernels, src/ops/attention.c): outputs equal the
 * goldens' nograd.output.<k> in every configuration. */
TEST(models_eval_no_grad_fast_path) {
  int n = 0;
  for (int mi = 0; mi < N_MODELS; mi++) {
    char gp[256], ir[256], w[256], why[256], key[64];
    snprintf(gp, sizeof gp, DIR "%s.golden.safetensors", models[mi]);
    kiln_safetensors *gold = kiln_safetensors_load(gp);
    if (!gold || !kiln_safetensors_find(gold, "nograd.output.0")) {
      kiln_safetensors_free(gold);
      continue;
    }
    snprintf(ir, sizeof ir, DIR "%s.ir", models[mi]);
    snprintf(w, sizeof w, DIR "%s.safetensors", models[mi]);
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
      kiln_model_opts o;
      kiln_model_opts_default(&o);
      o.mode = cfgs[c].mode;
      o.training = 0;
      kiln_model *m = kiln_model_load(ir, w, &o);
      CHECK_MSG(m != NULL, "%s: %s", models[mi], kiln_last_error());
      if (!m) continue;
      kiln_scope_begin();
      kiln_value in[8], out[16];
      int n_in = kiln_model_n_inputs(m), k = 0;
      for (int i = 0; i < n_in && i < 8; i++) {
        snprintf(key, sizeof key, "input.%d", i);
        kiln_tensor *t = kiln_clone(kiln_safetensors_find(gold, key));
        in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR,
                             .t = cfgs[c].mode == KILN_NN_LAZY ? kiln_to_lazy(t) : t};
      }
      kiln_no_grad_begin();
      for (int call = 0; call < cfgs[c].calls && k >= 0; call++)
        k = kiln_model_call(m, in, n_in, out, 16);
      kiln_no_grad_end();
      CHECK_MSG(k > 0, "%s (%s): %s", models[mi], cfgs[c].label, kiln_last_error());
      if (cfgs[c].mode == KILN_NN_LAZY) kiln_mark_step();
      for (int i = 0; i < k; i++) {
        snprintf(key, sizeof key, "nograd.output.%d", i);
        kiln_tensor *want = kiln_safetensors_find(gold, key);
        CHECK_MSG(!want || (out[i].kind == KILN_VALUE_TENSOR &&
                            test_close_to(out[i].t, want, 1e-4, 1e-5, 1e-2, why, sizeof why)),
                  "%s (%s, no_grad) output %d: %s", models[mi], cfgs[c].label, i, why);
      }
      kiln_scope_end();
      kiln_model_free(m);
    }
    n++;
    kiln_safetensors_free(gold);
  }
  test_note("%d models with fused-kernel fast paths, eval under no_grad", n);
  CHECK(n >= 2);
}

/* ---- hand-written module graphs and bad exports ------------------------------ */

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* GetAttr chains through a submodule: a tensor, a float and a None from the
 * metadata, in every mode. */
TEST(models_bind_chains_and_metadata_values) {
  char tmp[] = "/tmp/kiln-bind-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  char ir[300], w[300];
  snprintf(ir, sizeof ir, "%s/m.ir", tmp);
  snprintf(w, sizeof w, "%s/m.safetensors", tmp);
  write_file(ir, "graph(%self : __torch__.M,\n"
                 "      %x.1 : Tensor):\n"
                 "  %sub : __torch__.Sub = prim::GetAttr[name=\"sub\"](%self)\n"
                 "  %s : float = prim::GetAttr[name=\"scale\"](%sub)\n"
                 "  %n : int[] = prim::GetAttr[name=\"dims\"](%sub)\n"
                 "  %w : Tensor = prim::GetAttr[name=\"w\"](%sub) # a comment\n"
                 "  %b : Tensor? = prim::GetAttr[name=\"b\"](%sub)\n"
                 "  %y : Tensor = aten::mul(%x.1, %s), scope: __module.sub # m.py:3:0\n"
                 "  %z : Tensor = aten::mul(%y, %w)\n"
                 "  %k : bool = prim::Constant[value=0]()\n"
                 "  %t : Tensor = aten::sum(%z, %n, %k, %b)\n"
                 "  return (%t)\n");
  kiln_scope_begin();
  kiln_tensor *wt = kiln_from_data((float[]){3, 4}, 1, (int64_t[]){2}, KILN_DTYPE_F32);
  const char *names[] = {"sub.w"}, *keys[] = {"attr:sub.scale", "attr:sub.b", "attr:sub.dims"},
             *vals[] = {"2.5", "null", "[0]"};
  CHECK(kiln_safetensors_save(w, 1, names, &wt, 3, keys, vals) == 0);
  for (int mode = 0; mode < 3; mode++) {
    kiln_model_opts o;
    kiln_model_opts_default(&o);
    o.mode = (kiln_nn_mode)mode;
    kiln_model *m = kiln_model_load(ir, w, &o);
    CHECK_MSG(m != NULL, "%s", kiln_last_error());
    if (!m) continue;
    CHECK_EQ_INT(kiln_model_n_tensors(m), 1);
    CHECK(kiln_model_tensor_is_param(m, 0));
    kiln_tensor *x = kiln_from_data((float[]){1, 2}, 1, (int64_t[]){2}, KILN_DTYPE_F32);
    kiln_value in = {.kind = KILN_VALUE_TENSOR, .t = mode == 2 ? kiln_to_lazy(x) : x}, out[2];
    CHECK_EQ_INT(kiln_model_call(m, &in, 1, out, 2), 1);
    double v = 0;
    CHECK(kiln_item(out[0].t, &v) == 0);
    CHECK_NEAR(v, 2.5 * 3 + 5.0 * 4, 1e-6); /* sum([1, 2] * 2.5 * [3, 4]) */
    kiln_model_free(m);
  }
  kiln_scope_end();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  CHECK(system(cmd) == 0);
}

/* prim::SetAttr on a tensor: later GetAttrs read the new value and it is
 * written back into the model's tensors (and so into a saved file). */
TEST(models_setattr_writes_back) {
  char tmp[] = "/tmp/kiln-setattr-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  char ir[300], w[300], saved[300];
  snprintf(ir, sizeof ir, "%s/m.ir", tmp);
  snprintf(w, sizeof w, "%s/m.safetensors", tmp);
  snprintf(saved, sizeof saved, "%s/saved.safetensors", tmp);
  /* what torch.jit.script prints for: self.count = self.count + x;
   * return self.count * x */
  write_file(ir, "graph(%self : __torch__.Counter,\n"
                 "      %x.1 : Tensor):\n"
                 "  %2 : int = prim::Constant[value=1]()\n"
                 "  %count : Tensor = prim::GetAttr[name=\"count\"](%self)\n"
                 "  %5 : Tensor = aten::add(%count, %x.1, %2)\n"
                 "   = prim::SetAttr[name=\"count\"](%self, %5)\n"
                 "  %count.1 : Tensor = prim::GetAttr[name=\"count\"](%self)\n"
                 "  %8 : Tensor = aten::mul(%count.1, %x.1)\n"
                 "  return (%8)\n"
                 "# kiln: class __torch__.Counter\n"
                 "# kiln: tensor count Float [1] buffer\n");
  kiln_scope_begin();
  kiln_tensor *c0 = kiln_from_data((float[]){2}, 1, (int64_t[]){1}, KILN_DTYPE_F32);
  const char *names[] = {"count"}, *keys[] = {"kiln.class"}, *vals[] = {"__torch__.Counter"};
  CHECK(kiln_safetensors_save(w, 1, names, &c0, 1, keys, vals) == 0);
  for (int mode = 0; mode < 3; mode++) {
    kiln_model_opts o;
    kiln_model_opts_default(&o);
    o.mode = (kiln_nn_mode)mode;
    kiln_model *m = kiln_model_load(ir, w, &o);
    CHECK_MSG(m != NULL, "%s", kiln_last_error());
    if (!m) continue;
    CHECK(!kiln_model_tensor_is_param(m, 0));
    kiln_tensor *x = kiln_from_data((float[]){3}, 1, (int64_t[]){1}, KILN_DTYPE_F32);
    kiln_value in = {.kind = KILN_VALUE_TENSOR, .t = mode == 2 ? kiln_to_lazy(x) : x}, out[1];
    double want[3] = {15, 24, 33}; /* count 5, 8, 11 times x = 3 */
    for (int call = 0; call < 3; call++) {
      CHECK_EQ_INT(kiln_model_call(m, &in, 1, out, 1), 1);
      if (mode == 2) CHECK(kiln_mark_step() == 0);
      double v = 0, c = 0;
      CHECK(kiln_item(out[0].t, &v) == 0);
      CHECK(kiln_item(kiln_model_find(m, "count"), &c) == 0);
      CHECK_NEAR(v, want[call], 1e-6);
      CHECK_NEAR(c, want[call] / 3, 1e-6);
    }
    CHECK(kiln_model_save(m, saved) == 0);
    kiln_safetensors *st = kiln_safetensors_load(saved);
    double c = 0;
    CHECK(st && kiln_item(kiln_safetensors_find(st, "count"), &c) == 0 && c == 11);
    CHECK(st && kiln_safetensors_metadata(st, "kiln.class") != NULL);
    kiln_safetensors_free(st);
    /* a checkpoint holds the buffer beside the parameters and loads it back */
    char ck[320];
    snprintf(ck, sizeof ck, "%s/ck.safetensors", tmp);
    kiln_checkpoint_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.model, sizeof info.model, "graph");
    CHECK(kiln_checkpoint_save(ck, kiln_model_module(m), NULL, &info) == 0);
    kiln_model *m2 = kiln_model_load(ir, w, NULL);
    CHECK(m2 && kiln_checkpoint_load(ck, kiln_model_module(m2), NULL, NULL) == 0);
    c = 0;
    CHECK(m2 && kiln_item(kiln_model_find(m2, "count"), &c) == 0 && c == 11);
    kiln_model_free(m2);
    kiln_model_free(m);
  }
  kiln_scope_end();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  CHECK(system(cmd) == 0);
}

/* Writes the MLP's weights to path with entry `drop` left out and, if
 * replace is not NULL, entry `drop` replaced by it. */
static int write_mlp_weights(const char *path, const char *drop, kiln_tensor *replace) {
  kiln_safetensors *st = kiln_safetensors_load(DIR "mlp.safetensors");
  if (!st) return -1;
  const char *names[16], *keys[64], *vals[64];
  kiln_tensor *ts[16];
  int n = 0, nm = 0;
  for (int i = 0; i < kiln_safetensors_n_tensors(st) && n < 16; i++) {
    const char *name = kiln_safetensors_name(st, i);
    if (strcmp(name, drop) == 0 && !replace) continue;
    names[n] = name;
    ts[n++] = strcmp(name, drop) == 0 ? replace : kiln_safetensors_tensor(st, i);
  }
  const char *mk[] = {"kiln.class", "kiln.parameters", "kiln.example", "kiln.format"};
  for (int i = 0; i < 4; i++)
    if (kiln_safetensors_metadata(st, mk[i])) {
      keys[nm] = mk[i];
      vals[nm++] = kiln_safetensors_metadata(st, mk[i]);
    }
  int rc = kiln_safetensors_save(path, n, names, ts, nm, keys, vals);
  kiln_safetensors_free(st);
  return rc;
}

static void expect_load_error(const char *ir, const char *w, const char *what) {
  kiln_model *m = kiln_model_load(ir, w, NULL);
  CHECK(m == NULL);
  kiln_model_free(m);
  const char *e = kiln_last_error();
  CHECK_MSG(strstr(e, what) != NULL, "\"%s\" does not contain \"%s\"", e, what);
  CHECK_MSG(strchr(e, '\n') == NULL, "not one line: \"%s\"", e);
}

TEST(models_bad_exports_one_line_errors) {
  char tmp[] = "/tmp/kiln-badexp-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  char w[300], ir[300];
  snprintf(w, sizeof w, "%s/w.safetensors", tmp);
  kiln_scope_begin();
  /* an entry missing */
  CHECK(write_mlp_weights(w, "fc3.bias", NULL) == 0);
  expect_load_error(DIR "mlp.ir", w, "have no entry 'fc3.bias' (the graph 'tests/data/models/"
                                     "mlp.ir' expects Float [10])");
  /* another shape */
  CHECK(write_mlp_weights(w, "fc3.bias", kiln_zeros(1, (int64_t[]){11}, KILN_DTYPE_F32)) == 0);
  expect_load_error(DIR "mlp.ir", w, "'fc3.bias' has shape [11], the graph "
                                     "'tests/data/models/mlp.ir' expects [10]");
  /* another dtype */
  CHECK(write_mlp_weights(w, "fc3.bias", kiln_zeros(1, (int64_t[]){10}, KILN_DTYPE_I64)) == 0);
  expect_load_error(DIR "mlp.ir", w, "'fc3.bias' is Long, the graph 'tests/data/models/mlp.ir' "
                                     "expects Float");
  /* another model's weights */
  expect_load_error(DIR "mlp.ir", DIR "cnn.safetensors", "are for __torch__.CNN, but the graph "
                                                         "'tests/data/models/mlp.ir' is "
                                                         "__torch__.MLP");
  /* a truncated file */
  {
    FILE *in = fopen(DIR "mlp.safetensors", "rb"), *out = fopen(w, "wb");
    CHECK(in && out);
    char buf[4096];
    size_t k = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (out) fwrite(buf, 1, k, out);
    if (in) fclose(in);
    if (out) fclose(out);
    expect_load_error(DIR "mlp.ir", w, "w.safetensors");
  }
  /* a GetAttr of a kind kiln does not bind */
  snprintf(ir, sizeof ir, "%s/dict.ir", tmp);
  write_file(ir, "graph(%self : __torch__.M,\n"
                 "      %x.1 : Tensor):\n"
                 "  %d : Dict(str, Tensor) = prim::GetAttr[name=\"table\"](%self)\n"
                 "  return (%x.1)\n");
  CHECK(write_mlp_weights(w, "", NULL) == 0);
  expect_load_error(ir, w, "prim::GetAttr of table has type Dict(str, Tensor), which kiln does "
                           "not bind");
  /* a graph that was not inlined */
  write_file(ir, "graph(%self : __torch__.M,\n"
                 "      %x.1 : Tensor):\n"
                 "  %fc : __torch__.L = prim::GetAttr[name=\"fc\"](%self)\n"
                 "  %y : Tensor = prim::CallMethod[name=\"forward\"](%fc, %x.1)\n"
                 "  return (%y)\n");
  expect_load_error(ir, w, "was the graph inlined?");
  kiln_scope_end();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  CHECK(system(cmd) == 0);
}

/* `kiln run GRAPH --weights W` in each mode gives the golden outputs and
 * --save-weights writes a loadable file; a bad weights file fails with one
 * line on stderr. Needs $KILN_BIN (make test sets it). */
TEST(models_kiln_run_weights) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    test_note("skipped: no $KILN_BIN");
    return;
  }
  char tmp[] = "/tmp/kiln-runw-XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  kiln_safetensors *gold = kiln_safetensors_load(DIR "mlp.golden.safetensors");
  CHECK(gold != NULL);
  if (!gold) return;
  char x[300], cmd[2048], out[300], saved[300];
  snprintf(x, sizeof x, "%s/x.npy", tmp);
  CHECK(kiln_npy_save(x, kiln_safetensors_find(gold, "input.0")) == 0);
  const char *modes[] = {"eager", "jit", "lazy"};
  for (int i = 0; i < 3; i++) {
    snprintf(saved, sizeof saved, "%s/saved.safetensors", tmp);
    snprintf(cmd, sizeof cmd,
             "%s run " DIR "mlp.ir --weights " DIR "mlp.safetensors %s --mode %s --runs 2 "
             "--out %s/o --save-weights %s",
             bin, x, modes[i], tmp, saved);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
    snprintf(out, sizeof out, "%s/o/out0.npy", tmp);
    kiln_scope_begin();
    kiln_tensor *got = kiln_npy_load(out);
    char why[200];
    kiln_tensor *want = kiln_safetensors_find(gold, "eval.output.0");
    CHECK_MSG(test_close_to(got, want, 1e-4, 1e-5, 1e-2, why, sizeof why), "%s: %s", modes[i], why);
    kiln_scope_end();
    kiln_model *m = kiln_model_load(DIR "mlp.ir", saved, NULL);
    CHECK_MSG(m != NULL, "%s", kiln_last_error());
    kiln_model_free(m);
  }
  snprintf(cmd, sizeof cmd,
           "%s run " DIR "mlp.ir --weights " DIR "cnn.safetensors %s --out %s/o 2> %s/err; "
           "test $? -ne 0 && test $(wc -l < %s/err) -eq 1 && grep -q 'are for __torch__.CNN' %s/err",
           bin, x, tmp, tmp, tmp, tmp);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  kiln_safetensors_free(gold);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  CHECK(system(cmd) == 0);
}
