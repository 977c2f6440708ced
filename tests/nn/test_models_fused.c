/* tests/nn/test_models_fused.c: the convolutional models of the corpus
 * (tests/data/models, PyTorch 1.13 goldens) in eval mode under no_grad,
 * where conv2d + batch norm (+ add_) (+ relu) run as one
 * aten::_conv_bn_eval kernel (Note [Conv bn fusion] in
 * src/passes/fuse_conv_bn.c) and max_pool2d computes no indices: outputs
 * equal PyTorch's eval outputs in eager, jit (1 and 5 calls) and lazy
 * mode, and resnet18's optimized graph holds the fused nodes and no batch
 * norm. (With grad, test_models.c's corpus test runs the unfused ops.) */
#include <stdio.h>
#include <string.h>

#include "kiln.h"
#include "../ops/compare.h"
#include "test.h"

#define DIR "tests/data/models/"

static const char *const cnns[] = {"resnet18",           "mobilenet_v2", "mobilenet_v3_small",
                                   "shufflenet_v2_x0_5", "densenet121",  "efficientnet_b0",
                                   "vgg11_bn",           "cnn",          "unet_block"};

static const struct {
  kiln_nn_mode mode;
  int calls;
  const char *label;
} cfgs[] = {{KILN_NN_EAGER, 1, "eager"}, {KILN_NN_JIT, 1, "jit/1"}, {KILN_NN_JIT, 5, "jit/5"},
            {KILN_NN_LAZY, 1, "lazy"}};

TEST(models_cnn_eval_no_grad_fused_equal_pytorch) {
  int ran = 0;
  for (size_t mi = 0; mi < sizeof cnns / sizeof *cnns; mi++) {
    char gp[256], ir[256], w[256], why[256], key[64];
    snprintf(gp, sizeof gp, DIR "%s.golden.safetensors", cnns[mi]);
    snprintf(ir, sizeof ir, DIR "%s.ir", cnns[mi]);
    snprintf(w, sizeof w, DIR "%s.safetensors", cnns[mi]);
    kiln_safetensors *gold = kiln_safetensors_load(gp);
    CHECK_MSG(gold && kiln_safetensors_find(gold, "eval.output.0"), "%s: no eval golden",
              cnns[mi]);
    if (!gold || !kiln_safetensors_find(gold, "eval.output.0")) {
      kiln_safetensors_free(gold);
      continue;
    }
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++) {
      kiln_model_opts o;
      kiln_model_opts_default(&o);
      o.mode = cfgs[c].mode;
      o.training = 0;
      kiln_model *m = kiln_model_load(ir, w, &o);
      CHECK_MSG(m != NULL, "%s: %s", cnns[mi], kiln_last_error());
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
      CHECK_MSG(k > 0, "%s (%s): %s", cnns[mi], cfgs[c].label, kiln_last_error());
      if (cfgs[c].mode == KILN_NN_LAZY) kiln_mark_step();
      for (int i = 0; i < k; i++) {
        snprintf(key, sizeof key, "eval.output.%d", i);
        kiln_tensor *want = kiln_safetensors_find(gold, key);
        CHECK_MSG(!want || (out[i].kind == KILN_VALUE_TENSOR &&
                            test_close_to(out[i].t, want, 1e-4, 1e-5, 1e-2, why, sizeof why)),
                  "%s (%s, no_grad) output %d: %s", cnns[mi], cfgs[c].label, i, why);
      }
      if (strcmp(cnns[mi], "resnet18") == 0 && cfgs[c].calls == 5) {
        char *g = kiln_function_last_optimized_graph(kiln_model_function(m));
        CHECK_MSG(g && strstr(g, "aten::_conv_bn_eval") && !strstr(g, "aten::batch_norm"),
                  "resnet18's optimized graph is not fused:\n%s", g ? g : "(none)");
        kiln_free(g);
      }
      kiln_scope_end();
      kiln_model_free(m);
    }
    ran++;
    kiln_safetensors_free(gold);
  }
  CHECK_EQ_INT(ran, (int)(sizeof cnns / sizeof *cnns));
}
