/* tests/exec/test_resnet_block.c: a ResNet basic block (conv, batch norm
 * in training mode with running statistics, relu_, `out += identity`), the
 * TorchScript IR PyTorch 1.13 scripted (tests/data/resnet_block, made by
 * scripts/golden/resnet_block.py), trained 3 SGD steps: the loss, every
 * parameter, running statistic and num_batches_tracked equal PyTorch's
 * after each step, in three modes: interpreted op by op (eager), the
 * profiling executor's optimized plan (jit), and on lazy tensors. */
#include <stdlib.h>

#include "test.h"

#include "kiln.h"

#define DIR "tests/data/resnet_block/"
#define N_STATE 12
#define LR 0.1

static const char *const NAMES[N_STATE] = {
    "conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
    "bn1.num_batches_tracked", "conv2.weight", "bn2.weight", "bn2.bias", "bn2.running_mean",
    "bn2.running_var", "bn2.num_batches_tracked"};
static const bool PARAM[N_STATE] = {1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0};

static kiln_tensor *load(const char *fmt, const char *a, int b) {
  char p[256];
  if (a) snprintf(p, sizeof p, fmt, b, a);
  else snprintf(p, sizeof p, fmt, b);
  kiln_tensor *t = kiln_npy_load(p);
  CHECK_MSG(t != NULL, "%s: %s", p, kiln_last_error());
  return t;
}

static bool near(kiln_tensor *got, kiln_tensor *want, double tol, char *why, size_t n) {
  kiln_tensor *g = kiln_to_cpu(got);
  if (!g || !want || kiln_tensor_numel(g) != kiln_tensor_numel(want)) {
    snprintf(why, n, "missing or wrong size");
    return false;
  }
  kiln_tensor *a = kiln_contiguous(kiln_to_dtype(g, KILN_DTYPE_F64));
  kiln_tensor *b = kiln_contiguous(kiln_to_dtype(want, KILN_DTYPE_F64));
  const double *pa = kiln_tensor_data(a), *pb = kiln_tensor_data(b);
  for (int64_t i = 0; i < kiln_tensor_numel(b); i++)
    if (!(fabs(pa[i] - pb[i]) <= tol * (1 + fabs(pb[i])))) {
      snprintf(why, n, "element %lld: %.8g vs PyTorch %.8g", (long long)i, pa[i], pb[i]);
      return false;
    }
  return true;
}

typedef enum { EAGER, JIT, LAZY } mode;

static void train(mode md) {
  static const char *const mode_names[3] = {"eager", "jit", "lazy"};
  const char *mn = mode_names[md];
  size_t len = 0;
  char *text = test_read_file(DIR "block.ir", &len);
  CHECK(text != NULL);
  kiln_graph *g = text ? kiln_graph_parse(text, len) : NULL;
  free(text);
  CHECK_MSG(g != NULL, "parse: %s", kiln_last_error());
  kiln_function_options o;
  kiln_function_options_default(&o);
  if (md == EAGER) o.profiling_runs = 100; /* every call interprets the graph op by op */
  kiln_function *f = g ? kiln_function_new_ex(g, &o) : NULL;
  kiln_graph_free(g);
  CHECK_MSG(f != NULL, "function: %s", kiln_last_error());
  if (!f) return;
  kiln_tensor *x = load(DIR "x.npy", NULL, 0), *state[N_STATE];
  for (int i = 0; i < N_STATE; i++) {
    state[i] = load(DIR "init_%2$s.npy", NAMES[i], 0);
    if (md == LAZY) state[i] = kiln_to_lazy(state[i]);
    if (PARAM[i]) kiln_set_requires_grad(state[i], true);
  }
  if (md == LAZY) x = kiln_to_lazy(x);
  for (int step = 1; step <= 3; step++) {
    kiln_scope_begin();
    kiln_value in[1 + N_STATE], out[1];
    in[0] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = x};
    for (int i = 0; i < N_STATE; i++) in[1 + i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = state[i]};
    int k = kiln_function_call(f, in, 1 + N_STATE, out, 1);
    CHECK_MSG(k == 1, "%s step %d: %s", mn, step, kiln_last_error());
    if (k != 1) {
      kiln_scope_end();
      break;
    }
    CHECK_MSG(kiln_backward(out[0].t, NULL) == 0, "%s step %d: backward: %s", mn, step,
              kiln_last_error());
    kiln_no_grad_begin();
    for (int i = 0; i < N_STATE; i++) {
      if (!PARAM[i]) continue;
      kiln_tensor *gr = kiln_tensor_grad(state[i]);
      CHECK_MSG(gr != NULL, "%s step %d: no grad for %s", mn, step, NAMES[i]);
      if (gr) CHECK(kiln_add_(state[i], gr, -LR) == 0);
      kiln_tensor_set_grad(state[i], NULL);
    }
    kiln_no_grad_end();
    if (md == LAZY) CHECK(kiln_mark_step() == 0);
    char why[200];
    kiln_tensor *want = load(DIR "step%d_loss.npy", NULL, step);
    CHECK_MSG(near(out[0].t, want, 1e-5, why, sizeof why), "%s step %d: loss: %s", mn, step, why);
    for (int i = 0; i < N_STATE; i++) {
      want = load(DIR "step%d_%s.npy", NAMES[i], step);
      CHECK_MSG(near(state[i], want, 2e-5, why, sizeof why), "%s step %d: %s: %s", mn, step,
                NAMES[i], why);
    }
    kiln_scope_end();
  }
  kiln_function_free(f);
}

TEST(resnet_block_trains_as_pytorch_eager) {
  kiln_scope_begin();
  train(EAGER);
  kiln_scope_end();
}

TEST(resnet_block_trains_as_pytorch_jit) {
  kiln_scope_begin();
  train(JIT);
  kiln_scope_end();
}

TEST(resnet_block_trains_as_pytorch_lazy) {
  kiln_scope_begin();
  train(LAZY);
  kiln_scope_end();
}
