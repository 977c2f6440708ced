/* src/nn/models.c: the three Fashion-MNIST models of `kiln train` (mlp,
 * cnn, lstm): their layers, their eager forwards, and the same forwards as
 * TorchScript IR text for the jit mode. The eager forwards apply exactly
 * the ops of the IR, in the same order, so all modes compute the same
 * values. */
#include <string.h>

#include "nn.h"

/* Note [Model IR]: printed by PyTorch 1.13 for these functions (after
 * torch._C._jit_pass_inline, with the "# file:line" comments dropped):
 *
 *   def mlp(x, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b):
 *       h = torch.relu(F.linear(x, fc1_w, fc1_b))
 *       h = torch.relu(F.linear(h, fc2_w, fc2_b))
 *       return F.linear(h, fc3_w, fc3_b)
 *   def cnn(x, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b):
 *       h = torch.max_pool2d(torch.relu(torch.conv2d(x, conv1_w, conv1_b)), [2, 2], [2, 2])
 *       h = torch.max_pool2d(torch.relu(torch.conv2d(h, conv2_w, conv2_b)), [2, 2], [2, 2])
 *       h = h.reshape(h.size(0), -1)
 *       h = torch.relu(F.linear(h, fc1_w, fc1_b))
 *       return F.linear(h, fc2_w, fc2_b)
 *   def lstm(x, h, c, w_ih, w_hh, b_ih, b_hh, fc_w, fc_b):
 *       for t in range(x.size(1)):
 *           gates = F.linear(x.select(1, t), w_ih, b_ih) + F.linear(h, w_hh, b_hh)
 *           i, f, g, o = gates.chunk(4, 1)
 *           c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
 *           h = torch.sigmoid(o) * torch.tanh(c)
 *       return F.linear(h, fc_w, fc_b)
 */
static const char ir_mlp[] =
    "graph(%x.1 : Tensor,\n"
    "      %fc1_w.1 : Tensor,\n"
    "      %fc1_b.1 : Tensor,\n"
    "      %fc2_w.1 : Tensor,\n"
    "      %fc2_b.1 : Tensor,\n"
    "      %fc3_w.1 : Tensor,\n"
    "      %fc3_b.1 : Tensor):\n"
    "  %10 : Tensor = aten::linear(%x.1, %fc1_w.1, %fc1_b.1)\n"
    "  %h.1 : Tensor = aten::relu(%10)\n"
    "  %15 : Tensor = aten::linear(%h.1, %fc2_w.1, %fc2_b.1)\n"
    "  %h.5 : Tensor = aten::relu(%15)\n"
    "  %20 : Tensor = aten::linear(%h.5, %fc3_w.1, %fc3_b.1)\n"
    "  return (%20)\n";

static const char ir_cnn[] =
    "graph(%x.1 : Tensor,\n"
    "      %conv1_w.1 : Tensor,\n"
    "      %conv1_b.1 : Tensor,\n"
    "      %conv2_w.1 : Tensor,\n"
    "      %conv2_b.1 : Tensor,\n"
    "      %fc1_w.1 : Tensor,\n"
    "      %fc1_b.1 : Tensor,\n"
    "      %fc2_w.1 : Tensor,\n"
    "      %fc2_b.1 : Tensor):\n"
    "  %46 : int = prim::Constant[value=-1]()\n"
    "  %23 : bool = prim::Constant[value=0]()\n"
    "  %15 : int = prim::Constant[value=1]()\n"
    "  %13 : int[] = prim::Constant[value=[0, 0]]()\n"
    "  %12 : int[] = prim::Constant[value=[1, 1]]()\n"
    "  %18 : int = prim::Constant[value=2]()\n"
    "  %42 : int = prim::Constant[value=0]()\n"
    "  %16 : Tensor = aten::conv2d(%x.1, %conv1_w.1, %conv1_b.1, %12, %13, %12, %15)\n"
    "  %17 : Tensor = aten::relu(%16)\n"
    "  %19 : int[] = prim::ListConstruct(%18, %18)\n"
    "  %20 : int[] = prim::ListConstruct(%18, %18)\n"
    "  %h.1 : Tensor = aten::max_pool2d(%17, %19, %20, %13, %12, %23)\n"
    "  %32 : Tensor = aten::conv2d(%h.1, %conv2_w.1, %conv2_b.1, %12, %13, %12, %15)\n"
    "  %33 : Tensor = aten::relu(%32)\n"
    "  %34 : int[] = prim::ListConstruct(%18, %18)\n"
    "  %35 : int[] = prim::ListConstruct(%18, %18)\n"
    "  %h.5 : Tensor = aten::max_pool2d(%33, %34, %35, %13, %12, %23)\n"
    "  %43 : int = aten::size(%h.5, %42)\n"
    "  %47 : int[] = prim::ListConstruct(%43, %46)\n"
    "  %h.11 : Tensor = aten::reshape(%h.5, %47)\n"
    "  %52 : Tensor = aten::linear(%h.11, %fc1_w.1, %fc1_b.1)\n"
    "  %h.15 : Tensor = aten::relu(%52)\n"
    "  %57 : Tensor = aten::linear(%h.15, %fc2_w.1, %fc2_b.1)\n"
    "  return (%57)\n";

static const char ir_lstm[] =
    "graph(%x.1 : Tensor,\n"
    "      %h.1 : Tensor,\n"
    "      %c.1 : Tensor,\n"
    "      %w_ih.1 : Tensor,\n"
    "      %w_hh.1 : Tensor,\n"
    "      %b_ih.1 : Tensor,\n"
    "      %b_hh.1 : Tensor,\n"
    "      %fc_w.1 : Tensor,\n"
    "      %fc_b.1 : Tensor):\n"
    "  %14 : bool = prim::Constant[value=1]()\n"
    "  %10 : int = prim::Constant[value=1]()\n"
    "  %29 : int = prim::Constant[value=4]()\n"
    "  %11 : int = aten::size(%x.1, %10)\n"
    "  %h : Tensor, %c : Tensor = prim::Loop(%11, %14, %h.1, %c.1)\n"
    "    block0(%t.1 : int, %h.11 : Tensor, %c.11 : Tensor):\n"
    "      %18 : Tensor = aten::select(%x.1, %10, %t.1)\n"
    "      %21 : Tensor = aten::linear(%18, %w_ih.1, %b_ih.1)\n"
    "      %25 : Tensor = aten::linear(%h.11, %w_hh.1, %b_hh.1)\n"
    "      %gates.1 : Tensor = aten::add(%21, %25, %10)\n"
    "      %30 : Tensor[] = aten::chunk(%gates.1, %29, %10)\n"
    "      %i.1 : Tensor, %f.1 : Tensor, %g.1 : Tensor, %o.1 : Tensor = prim::ListUnpack(%30)\n"
    "      %36 : Tensor = aten::sigmoid(%f.1)\n"
    "      %38 : Tensor = aten::mul(%36, %c.11)\n"
    "      %40 : Tensor = aten::sigmoid(%i.1)\n"
    "      %42 : Tensor = aten::tanh(%g.1)\n"
    "      %43 : Tensor = aten::mul(%40, %42)\n"
    "      %c.5 : Tensor = aten::add(%38, %43, %10)\n"
    "      %48 : Tensor = aten::sigmoid(%o.1)\n"
    "      %50 : Tensor = aten::tanh(%c.5)\n"
    "      %h.5 : Tensor = aten::mul(%48, %50)\n"
    "      -> (%14, %h.5, %c.5)\n"
    "  %56 : Tensor = aten::linear(%h, %fc_w.1, %fc_b.1)\n"
    "  return (%56)\n";

enum { IMG = 28, N_CLASSES = 10, LSTM_HIDDEN = 128 };

/* Runs body inside a scope and hands its result to the caller's scope. */
static kiln_tensor *finish(kiln_tensor *y) {
  if (y) kiln_keep(y);
  kiln_scope_end();
  return y ? core_autorelease(y) : NULL;
}

static kiln_tensor *mlp_forward(kiln_nn_module *m, kiln_tensor *x) {
  kiln_nn_layer **l = m->layers;
  kiln_scope_begin();
  kiln_tensor *h = kiln_reshape(x, 2, (int64_t[]){kiln_tensor_size(x, 0), IMG * IMG});
  h = kiln_relu(kiln_nn_forward(l[0], h));
  h = kiln_relu(kiln_nn_forward(l[1], h));
  return finish(kiln_nn_forward(l[2], h));
}

static kiln_tensor *cnn_forward(kiln_nn_module *m, kiln_tensor *x) {
  static const int64_t two[2] = {2, 2}, zero[2] = {0, 0};
  kiln_nn_layer **l = m->layers;
  kiln_scope_begin();
  kiln_tensor *h = kiln_max_pool2d(kiln_relu(kiln_nn_forward(l[0], x)), two, two, zero);
  h = kiln_max_pool2d(kiln_relu(kiln_nn_forward(l[1], h)), two, two, zero);
  if (h) h = kiln_reshape(h, 2, (int64_t[]){kiln_tensor_size(h, 0), -1});
  h = kiln_relu(kiln_nn_forward(l[2], h));
  return finish(kiln_nn_forward(l[3], h));
}

/* The loop of Note [Model IR]'s lstm, with h and c starting at zero. */
static kiln_tensor *lstm_forward(kiln_nn_module *m, kiln_tensor *x) {
  kiln_nn_layer *rnn = m->layers[0];
  kiln_scope_begin();
  int64_t B = kiln_tensor_size(x, 0);
  kiln_tensor *xs = kiln_reshape(x, 3, (int64_t[]){B, IMG, IMG});
  kiln_tensor *h = kiln_zeros(2, (int64_t[]){B, LSTM_HIDDEN}, KILN_DTYPE_F32);
  if (h && kiln_tensor_is_lazy(x)) h = kiln_to_lazy(h);
  kiln_tensor *c = h;
  for (int64_t t = 0; t < IMG && h && xs; t++) {
    kiln_tensor *hn = NULL, *cn = NULL;
    if (kiln_nn_lstm_cell(kiln_select(xs, 1, t), h, c, nn_layer_param(rnn, 0),
                          nn_layer_param(rnn, 1), nn_layer_param(rnn, 2),
                          nn_layer_param(rnn, 3), &hn, &cn) < 0)
      hn = NULL;
    h = hn;
    c = cn;
  }
  return finish(h ? kiln_nn_forward(m->layers[1], h) : NULL);
}

static const struct {
  const char *arch;
  const char *ir;
  nn_forward_fn forward;
} models[] = {
    {"mlp", ir_mlp, mlp_forward},
    {"cnn", ir_cnn, cnn_forward},
    {"lstm", ir_lstm, lstm_forward},
};
enum { N_MODELS = sizeof models / sizeof models[0] };

static int find_model(const char *arch) {
  for (int i = 0; arch && i < N_MODELS; i++)
    if (strcmp(models[i].arch, arch) == 0) return i;
  return -1;
}

const char *kiln_nn_model_ir(const char *arch) {
  int i = find_model(arch);
  return i < 0 ? NULL : models[i].ir;
}

/* What kiln_nn_model_new builds below, parameter by parameter
 * (checkpoint_model_param_table_matches_built_models keeps them equal). */
static const nn_param_spec mlp_params[] = {
    {"fc1.weight", 2, {256, IMG * IMG}}, {"fc1.bias", 1, {256}},
    {"fc2.weight", 2, {256, 256}},       {"fc2.bias", 1, {256}},
    {"fc3.weight", 2, {N_CLASSES, 256}}, {"fc3.bias", 1, {N_CLASSES}}};
static const nn_param_spec cnn_params[] = {
    {"conv1.weight", 4, {16, 1, 5, 5}},    {"conv1.bias", 1, {16}},
    {"conv2.weight", 4, {32, 16, 5, 5}},   {"conv2.bias", 1, {32}},
    {"fc1.weight", 2, {128, 32 * 4 * 4}},  {"fc1.bias", 1, {128}},
    {"fc2.weight", 2, {N_CLASSES, 128}},   {"fc2.bias", 1, {N_CLASSES}}};
static const nn_param_spec lstm_params[] = {
    {"lstm.weight_ih_l0", 2, {4 * LSTM_HIDDEN, IMG}},
    {"lstm.weight_hh_l0", 2, {4 * LSTM_HIDDEN, LSTM_HIDDEN}},
    {"lstm.bias_ih_l0", 1, {4 * LSTM_HIDDEN}},
    {"lstm.bias_hh_l0", 1, {4 * LSTM_HIDDEN}},
    {"fc.weight", 2, {N_CLASSES, LSTM_HIDDEN}},
    {"fc.bias", 1, {N_CLASSES}}};

const nn_param_spec *nn_model_params(const char *arch, int *n) {
  static const struct {
    const nn_param_spec *p;
    int n;
  } tab[N_MODELS] = {{mlp_params, 6}, {cnn_params, 8}, {lstm_params, 6}};
  int k = find_model(arch);
  *n = k < 0 ? 0 : tab[k].n;
  return k < 0 ? NULL : tab[k].p;
}

kiln_nn_module *kiln_nn_model_new(const char *arch, kiln_generator *gen) {
  int k = find_model(arch);
  if (k < 0) {
    core_error(KILN_ERR_INVALID, "nn_model_new: unknown model '%s' (expected mlp, cnn or lstm)",
               arch ? arch : "(null)");
    return NULL;
  }
  kiln_nn_module *m = kiln_nn_module_new();
  if (!m) return NULL;
  bool ok;
  if (k == 0) {
    ok = kiln_nn_linear_new(m, "fc1", IMG * IMG, 256, true, gen) &&
         kiln_nn_linear_new(m, "fc2", 256, 256, true, gen) &&
         kiln_nn_linear_new(m, "fc3", 256, N_CLASSES, true, gen);
  } else if (k == 1) {
    ok = kiln_nn_conv2d_new(m, "conv1", 1, 16, 5, 1, 0, gen) &&
         kiln_nn_conv2d_new(m, "conv2", 16, 32, 5, 1, 0, gen) &&
         kiln_nn_linear_new(m, "fc1", 32 * 4 * 4, 128, true, gen) &&
         kiln_nn_linear_new(m, "fc2", 128, N_CLASSES, true, gen);
  } else {
    ok = kiln_nn_lstm_new(m, "lstm", IMG, LSTM_HIDDEN, gen) &&
         kiln_nn_linear_new(m, "fc", LSTM_HIDDEN, N_CLASSES, true, gen);
  }
  if (!ok) {
    kiln_nn_module_free(m);
    return NULL;
  }
  m->arch = models[k].arch;
  m->forward = models[k].forward;
  return m;
}
