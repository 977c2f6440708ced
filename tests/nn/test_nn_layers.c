/* tests/nn/test_nn_layers.c: modules and layers (names, initialisation
 * bounds, forwards against PyTorch's values or plain C), optimizers
 * against torch.optim over three steps, schedules, and the optimizer step
 * recorded lazily without recompiling when the learning rate changes. */
#include <stdlib.h>

#include "golden_nn.h"
#include "test.h"
#include "kiln.h"

static void check_values(kiln_tensor *t, const double *want, int64_t n, double tol,
                         const char *what) {
  CHECK_MSG(t && kiln_tensor_numel(t) == n, "%s: %s", what, t ? "wrong size" : kiln_last_error());
  if (!t || kiln_tensor_numel(t) != n) return;
  double *v = malloc((size_t)n * sizeof *v);
  kiln_tensor_copy_to(t, v, KILN_DTYPE_F64);
  for (int64_t i = 0; i < n; i++)
    CHECK_MSG(fabs(v[i] - want[i]) <= tol * (1 + fabs(want[i])), "%s[%lld]: %.12g != %.12g",
              what, (long long)i, v[i], want[i]);
  free(v);
}

static kiln_tensor *f64(const double *v, int ndim, const int64_t *shape) {
  return kiln_from_data(v, ndim, shape, KILN_DTYPE_F64);
}

TEST(nn_module_names_and_init_bounds) {
  kiln_generator *g = kiln_generator_new(1);
  kiln_nn_module *m = kiln_nn_module_new();
  kiln_scope_begin();
  CHECK(kiln_nn_linear_new(m, "fc", 100, 30, true, g) != NULL);
  CHECK(kiln_nn_conv2d_new(m, "conv", 3, 8, 5, 1, 2, g) != NULL);
  CHECK(kiln_nn_lstm_new(m, "rnn", 7, 9, g) != NULL);
  CHECK(kiln_nn_embedding_new(m, "emb", 50, 4, g) != NULL);
  CHECK(kiln_nn_layer_norm_new(m, "ln", 30, 1e-5) != NULL);
  CHECK(kiln_nn_dropout_new(m, "drop", 0.5, g) != NULL);
  const char *names[] = {"fc.weight", "fc.bias", "conv.weight", "conv.bias",
                         "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0",
                         "rnn.bias_hh_l0", "emb.weight", "ln.weight", "ln.bias"};
  CHECK_EQ_INT(kiln_nn_module_n_params(m), 11);
  for (int i = 0; i < 11 && i < kiln_nn_module_n_params(m); i++) {
    CHECK(strcmp(kiln_nn_module_param_name(m, i), names[i]) == 0);
    CHECK(kiln_requires_grad(kiln_nn_module_param(m, i)));
  }
  CHECK(kiln_nn_module_find_param(m, "rnn.weight_hh_l0") == kiln_nn_module_param(m, 5));
  CHECK(kiln_nn_module_find_param(m, "nope") == NULL);
  CHECK_EQ_INT(kiln_nn_module_numel(m), 3000 + 30 + 600 + 8 + 4 * 9 * 7 + 4 * 9 * 9 + 72 + 200 + 60);
  /* bounds: 1/sqrt(fan_in), and the values fill the range */
  struct { int i; double bound; } b[] = {{0, 0.1}, {1, 0.1}, {2, 1 / sqrt(75.0)}, {3, 1 / sqrt(75.0)},
                                         {4, 1 / 3.0}, {7, 1 / 3.0}};
  for (int k = 0; k < 6; k++) {
    kiln_tensor *p = kiln_nn_module_param(m, b[k].i);
    double lo = kiln_item(kiln_amin(p, NULL, 0, false), &lo) == 0 ? lo : 0;
    double hi = kiln_item(kiln_amax(p, NULL, 0, false), &hi) == 0 ? hi : 0;
    CHECK_MSG(lo >= -b[k].bound && hi <= b[k].bound, "%s: [%g, %g] outside +-%g", names[b[k].i],
              lo, hi, b[k].bound);
    CHECK_MSG(hi - lo > b[k].bound, "%s: [%g, %g] barely spread", names[b[k].i], lo, hi);
  }
  double one;
  CHECK(kiln_item(kiln_mean(kiln_nn_module_param(m, 9), NULL, 0, false), &one) == 0);
  CHECK_NEAR(one, 1.0, 0);
  /* errors */
  CHECK(kiln_nn_linear_new(m, "fc", 3, 3, true, g) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "already has a layer 'fc'");
  CHECK(kiln_nn_linear_new(m, "x", 0, 3, true, g) == NULL);
  CHECK(kiln_nn_module_add_param(m, "fc.weight", kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_F32)) < 0);
  CHECK(kiln_nn_module_add_param(m, "idx", kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_I64)) < 0);
  kiln_scope_end();
  kiln_nn_module_free(m);
  kiln_generator_free(g);
}

TEST(nn_init_kaiming_xavier) {
  kiln_generator *g = kiln_generator_new(2);
  kiln_scope_begin();
  kiln_tensor *w = kiln_empty(2, (int64_t[]){200, 300}, KILN_DTYPE_F32);
  double lo, hi, var;
  CHECK(kiln_nn_init_kaiming_uniform_(w, 0, g) == KILN_OK);
  double bound = sqrt(6.0 / 300);
  kiln_item(kiln_amin(w, NULL, 0, false), &lo);
  kiln_item(kiln_amax(w, NULL, 0, false), &hi);
  kiln_item(kiln_var(w, NULL, 0, 0, false), &var);
  CHECK(lo >= -bound && hi <= bound && hi > 0.99 * bound && lo < -0.99 * bound);
  CHECK_NEAR(var, bound * bound / 3, 0.02 * bound * bound / 3); /* U(-b, b) has variance b^2/3 */
  CHECK(kiln_nn_init_xavier_uniform_(w, 2.0, g) == KILN_OK);
  bound = 2.0 * sqrt(6.0 / 500);
  kiln_item(kiln_amax(w, NULL, 0, false), &hi);
  CHECK(hi <= bound && hi > 0.99 * bound);
  CHECK(kiln_nn_init_xavier_uniform_(kiln_empty(1, (int64_t[]){5}, KILN_DTYPE_F32), 1, g) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "at least 2 dims");
  /* seeded: same seed, same values */
  kiln_tensor *a = kiln_empty(1, (int64_t[]){8}, KILN_DTYPE_F32), *b = kiln_empty(1, (int64_t[]){8}, KILN_DTYPE_F32);
  kiln_generator_seed(g, 9);
  kiln_nn_init_uniform_(a, -1, 1, g);
  kiln_generator_seed(g, 9);
  kiln_nn_init_uniform_(b, -1, 1, g);
  CHECK(memcmp(kiln_tensor_data(a), kiln_tensor_data(b), 32) == 0);
  kiln_scope_end();
  kiln_generator_free(g);
}

TEST(nn_lstm_cell_matches_torch) {
  kiln_scope_begin();
  kiln_tensor *x = f64(golden_lstm_x, 2, (int64_t[]){2, 3});
  kiln_tensor *h = f64(golden_lstm_h, 2, (int64_t[]){2, 4});
  kiln_tensor *c = f64(golden_lstm_c, 2, (int64_t[]){2, 4});
  kiln_tensor *wi = f64(golden_lstm_w_ih, 2, (int64_t[]){16, 3});
  kiln_tensor *wh = f64(golden_lstm_w_hh, 2, (int64_t[]){16, 4});
  kiln_tensor *bi = f64(golden_lstm_b_ih, 1, (int64_t[]){16});
  kiln_tensor *bh = f64(golden_lstm_b_hh, 1, (int64_t[]){16});
  kiln_tensor *h1 = NULL, *c1 = NULL;
  CHECK(kiln_nn_lstm_cell(x, h, c, wi, wh, bi, bh, &h1, &c1) == KILN_OK);
  check_values(h1, golden_lstm_h1, 8, 1e-12, "h1");
  check_values(c1, golden_lstm_c1, 8, 1e-12, "c1");
  kiln_scope_end();
}

TEST(nn_lstm_layer_runs_the_cell_over_time) {
  kiln_generator *g = kiln_generator_new(3);
  kiln_nn_module *m = kiln_nn_module_new();
  kiln_nn_layer *l = kiln_nn_lstm_new(m, "lstm", 3, 4, g);
  kiln_scope_begin();
  kiln_tensor *x = kiln_randn(3, (int64_t[]){2, 5, 3}, KILN_DTYPE_F32, g);
  kiln_tensor *hT = NULL, *cT = NULL;
  kiln_tensor *seq = kiln_nn_lstm_forward(l, x, NULL, NULL, &hT, &cT);
  CHECK(seq && kiln_tensor_ndim(seq) == 3 && kiln_tensor_size(seq, 1) == 5 && kiln_tensor_size(seq, 2) == 4);
  kiln_tensor *h = kiln_zeros(2, (int64_t[]){2, 4}, KILN_DTYPE_F32), *c = h;
  for (int t = 0; t < 5; t++) {
    kiln_tensor *hn, *cn;
    CHECK(kiln_nn_lstm_cell(kiln_select(x, 1, t), h, c, kiln_nn_module_param(m, 0),
                            kiln_nn_module_param(m, 1), kiln_nn_module_param(m, 2),
                            kiln_nn_module_param(m, 3), &hn, &cn) == KILN_OK);
    h = hn;
    c = cn;
    double a[8], b[8];
    kiln_tensor_copy_to(kiln_select(seq, 1, t), a, KILN_DTYPE_F64);
    kiln_tensor_copy_to(h, b, KILN_DTYPE_F64);
    for (int k = 0; k < 8; k++) CHECK_NEAR(a[k], b[k], 1e-6);
  }
  double a[8], b[8];
  kiln_tensor_copy_to(cT, a, KILN_DTYPE_F64);
  kiln_tensor_copy_to(c, b, KILN_DTYPE_F64);
  for (int k = 0; k < 8; k++) CHECK_NEAR(a[k], b[k], 1e-6);
  kiln_tensor *last = kiln_nn_forward(l, x);
  kiln_tensor_copy_to(last, a, KILN_DTYPE_F64);
  kiln_tensor_copy_to(hT, b, KILN_DTYPE_F64);
  for (int k = 0; k < 8; k++) CHECK_NEAR(a[k], b[k], 0);
  /* gradients reach every parameter */
  CHECK(kiln_backward(kiln_sum(last, NULL, 0, false), NULL) == KILN_OK);
  for (int i = 0; i < 4; i++) CHECK(kiln_tensor_grad(kiln_nn_module_param(m, i)) != NULL);
  kiln_scope_end();
  kiln_nn_module_free(m);
  kiln_generator_free(g);
}

TEST(nn_layer_norm_matches_torch) {
  kiln_scope_begin();
  kiln_tensor *x = f64(golden_ln_x, 2, (int64_t[]){3, 5});
  kiln_tensor *y = kiln_nn_layer_norm(x, 1, f64(golden_ln_w, 1, (int64_t[]){5}),
                                      f64(golden_ln_b, 1, (int64_t[]){5}), 1e-5);
  check_values(y, golden_ln_y, 15, 1e-10, "layer_norm");
  CHECK(kiln_nn_layer_norm(x, 3, NULL, NULL, 1e-5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "normalise over 3 dims of a 2-d tensor");
  /* the layer: weight 1, bias 0 -> each row has mean 0 and variance ~1 */
  kiln_nn_module *m = kiln_nn_module_new();
  kiln_nn_layer *l = kiln_nn_layer_norm_new(m, "ln", 5, 1e-5);
  kiln_tensor *z = kiln_nn_forward(l, kiln_to_dtype(x, KILN_DTYPE_F32));
  double mu, var;
  kiln_item(kiln_mean(kiln_select(z, 0, 1), NULL, 0, false), &mu);
  kiln_item(kiln_var(kiln_select(z, 0, 1), NULL, 0, 0, false), &var);
  CHECK_NEAR(mu, 0, 1e-6);
  CHECK_NEAR(var, 1, 1e-3);
  kiln_scope_end();
  kiln_nn_module_free(m);
}

TEST(nn_linear_conv_embedding_dropout_layers) {
  kiln_generator *g = kiln_generator_new(4);
  kiln_nn_module *m = kiln_nn_module_new();
  kiln_nn_layer *fc = kiln_nn_linear_new(m, "fc", 3, 2, true, g);
  kiln_nn_layer *cv = kiln_nn_conv2d_new(m, "cv", 1, 2, 3, 1, 1, g);
  kiln_nn_layer *em = kiln_nn_embedding_new(m, "em", 5, 3, g);
  kiln_nn_layer *dr = kiln_nn_dropout_new(m, "dr", 0.5, g);
  CHECK(kiln_nn_dropout_new(m, "bad", 1.0, g) == NULL);
  kiln_scope_begin();
  /* linear in plain C */
  float xs[6] = {1, 2, 3, -1, 0.5f, 2}, w[6], b[2], y[4];
  kiln_tensor *x = kiln_from_data(xs, 2, (int64_t[]){2, 3}, KILN_DTYPE_F32);
  kiln_tensor_copy_to(kiln_nn_module_param(m, 0), w, KILN_DTYPE_F32);
  kiln_tensor_copy_to(kiln_nn_module_param(m, 1), b, KILN_DTYPE_F32);
  kiln_tensor_copy_to(kiln_nn_forward(fc, x), y, KILN_DTYPE_F32);
  for (int i = 0; i < 2; i++)
    for (int o = 0; o < 2; o++) {
      double s = b[o];
      for (int k = 0; k < 3; k++) s += (double)xs[i * 3 + k] * w[o * 3 + k];
      CHECK_NEAR(y[i * 2 + o], s, 1e-5);
    }
  /* conv with padding 1 keeps the size */
  kiln_tensor *img = kiln_randn(4, (int64_t[]){2, 1, 6, 6}, KILN_DTYPE_F32, g);
  kiln_tensor *out = kiln_nn_forward(cv, img);
  CHECK(out && kiln_tensor_size(out, 1) == 2 && kiln_tensor_size(out, 2) == 6);
  /* embedding picks rows */
  int64_t idx[3] = {4, 0, 4};
  kiln_tensor *e = kiln_nn_forward(em, kiln_from_data(idx, 1, (int64_t[]){3}, KILN_DTYPE_I64));
  float ev[9], wv[15];
  kiln_tensor_copy_to(e, ev, KILN_DTYPE_F32);
  kiln_tensor_copy_to(kiln_nn_module_param(m, 4), wv, KILN_DTYPE_F32);
  CHECK(memcmp(ev, wv + 12, 12) == 0 && memcmp(ev + 3, wv, 12) == 0);
  /* dropout: training zeroes about half and scales by 2; eval is identity */
  kiln_tensor *ones = kiln_ones(1, (int64_t[]){1000}, KILN_DTYPE_F32);
  double s;
  kiln_item(kiln_sum(kiln_nn_forward(dr, ones), NULL, 0, false), &s);
  CHECK(s > 800 && s < 1200);
  kiln_nn_module_set_training(m, false);
  kiln_item(kiln_sum(kiln_nn_forward(dr, ones), NULL, 0, false), &s);
  CHECK_NEAR(s, 1000, 0);
  kiln_scope_end();
  kiln_nn_module_free(m);
  kiln_generator_free(g);
}

TEST(nn_models_forward_shapes) {
  const char *archs[3] = {"mlp", "cnn", "lstm"};
  kiln_generator *g = kiln_generator_new(5);
  for (int a = 0; a < 3; a++) {
    kiln_nn_module *m = kiln_nn_model_new(archs[a], g);
    CHECK(m && strcmp(kiln_nn_module_arch(m), archs[a]) == 0);
    kiln_scope_begin();
    kiln_tensor *y = kiln_nn_module_forward(m, kiln_randn(4, (int64_t[]){3, 1, 28, 28}, KILN_DTYPE_F32, g));
    CHECK_MSG(y && kiln_tensor_ndim(y) == 2 && kiln_tensor_size(y, 0) == 3 &&
                  kiln_tensor_size(y, 1) == 10,
              "%s: %s", archs[a], kiln_last_error());
    CHECK(kiln_nn_model_ir(archs[a]) != NULL);
    kiln_scope_end();
    kiln_nn_module_free(m);
  }
  CHECK(kiln_nn_model_new("vgg", g) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "unknown model 'vgg'");
  kiln_nn_module *m = kiln_nn_module_new();
  CHECK(kiln_nn_module_forward(m, NULL) == NULL);
  kiln_nn_module_free(m);
  kiln_generator_free(g);
}

/* The IR of each model, run as a kiln_function, equals the eager forward. */
TEST(nn_model_ir_equals_eager_forward) {
  const char *archs[3] = {"mlp", "cnn", "lstm"};
  kiln_generator *g = kiln_generator_new(6);
  for (int a = 0; a < 3; a++) {
    kiln_nn_module *m = kiln_nn_model_new(archs[a], g);
    const char *ir = kiln_nn_model_ir(archs[a]);
    kiln_graph *gr = kiln_graph_parse(ir, strlen(ir));
    kiln_function *f = gr ? kiln_function_new(gr) : NULL;
    CHECK_MSG(f != NULL, "%s: %s", archs[a], kiln_last_error());
    kiln_scope_begin();
    kiln_tensor *x = kiln_randn(4, (int64_t[]){2, 1, 28, 28}, KILN_DTYPE_F32, g);
    kiln_value in[16], out[1];
    int n = 0;
    if (a == 0) in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_reshape(x, 2, (int64_t[]){2, 784})};
    if (a == 1) in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = x};
    if (a == 2) {
      kiln_tensor *z = kiln_zeros(2, (int64_t[]){2, 128}, KILN_DTYPE_F32);
      in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_reshape(x, 3, (int64_t[]){2, 28, 28})};
      in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = z};
      in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = z};
    }
    for (int i = 0; i < kiln_nn_module_n_params(m); i++)
      in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_nn_module_param(m, i)};
    for (int run = 0; f && run < 3; run++) { /* profiling run, then optimized */
      int k = kiln_function_call(f, in, n, out, 1);
      CHECK_MSG(k == 1, "%s run %d: %s", archs[a], run, kiln_last_error());
      if (k != 1) break;
      kiln_tensor *ye = kiln_nn_module_forward(m, x);
      float va[20], vb[20];
      kiln_tensor_copy_to(out[0].t, va, KILN_DTYPE_F32);
      kiln_tensor_copy_to(ye, vb, KILN_DTYPE_F32);
      for (int i = 0; i < 20; i++) CHECK_NEAR(va[i], vb[i], 1e-5);
    }
    kiln_scope_end();
    kiln_function_free(f);
    kiln_graph_free(gr);
    kiln_nn_module_free(m);
  }
  kiln_generator_free(g);
}

TEST(nn_optimizers_match_torch) {
  int n_cases = (int)(sizeof golden_optim / sizeof golden_optim[0]);
  for (int c = 0; c < n_cases; c++) {
    kiln_nn_module *m = kiln_nn_module_new();
    kiln_scope_begin();
    kiln_tensor *p = kiln_clone(kiln_from_data(golden_p0, 2, (int64_t[]){2, 3}, KILN_DTYPE_F64));
    CHECK(kiln_nn_module_add_param(m, "w", p) == KILN_OK);
    kiln_optim_opts o = {.kind = (kiln_optim_kind)golden_optim[c].kind,
                         .lr = golden_optim[c].lr,
                         .momentum = golden_optim[c].momentum,
                         .nesterov = golden_optim[c].nesterov,
                         .weight_decay = golden_optim[c].weight_decay};
    kiln_optim *opt = kiln_optim_new(m, &o);
    CHECK_MSG(opt != NULL, "%s: %s", golden_optim[c].name, kiln_last_error());
    for (int s = 0; opt && s < 3; s++) {
      CHECK(kiln_tensor_set_grad(p, f64(golden_grads[s], 2, (int64_t[]){2, 3})) == KILN_OK);
      CHECK(kiln_optim_step(opt) == KILN_OK);
      CHECK(kiln_optim_zero_grad(opt) == KILN_OK);
      CHECK(kiln_tensor_grad(p) == NULL);
      char what[64];
      snprintf(what, sizeof what, "%s step %d", golden_optim[c].name, s + 1);
      check_values(p, golden_optim[c].after[s], 6, 1e-12, what);
    }
    CHECK_EQ_INT(kiln_optim_steps(opt), 3);
    kiln_scope_end();
    kiln_optim_free(opt);
    kiln_nn_module_free(m);
  }
}

TEST(nn_optimizer_state_and_errors) {
  kiln_nn_module *m = kiln_nn_model_new("mlp", NULL);
  kiln_optim_opts o = {.kind = KILN_OPTIM_ADAM, .lr = 1e-3};
  kiln_optim *a = kiln_optim_new(m, &o);
  CHECK_EQ_INT(kiln_optim_n_state(a), 12);
  CHECK(strcmp(kiln_optim_state_name(a, 1), "fc1.weight.exp_avg_sq") == 0);
  CHECK(strcmp(kiln_optim_name(a), "adam") == 0);
  kiln_optim_free(a);
  o = (kiln_optim_opts){.kind = KILN_OPTIM_SGD, .lr = 0.1};
  a = kiln_optim_new(m, &o);
  CHECK_EQ_INT(kiln_optim_n_state(a), 0); /* plain SGD keeps no buffers */
  CHECK(kiln_optim_step(a) == KILN_OK);   /* no grads: nothing to do */
  kiln_optim_free(a);
  o.nesterov = true;
  CHECK(kiln_optim_new(m, &o) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "Nesterov needs SGD with momentum > 0");
  o = (kiln_optim_opts){.kind = KILN_OPTIM_SGD, .lr = -1};
  CHECK(kiln_optim_new(m, &o) == NULL);
  o = (kiln_optim_opts){.kind = KILN_OPTIM_ADAM, .beta1 = 1.0};
  CHECK(kiln_optim_new(m, &o) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "betas (1, 0.999) must be in [0, 1)");
  kiln_nn_module_free(m);
}

TEST(nn_lr_schedules_match_torch) {
  for (int t = 0; t < 7; t++) CHECK_NEAR(kiln_optim_lr_step(0.1, t, 2, 0.5), golden_lr_step[t], 1e-15);
  for (int t = 0; t < 6; t++)
    CHECK_NEAR(kiln_optim_lr_cosine(0.1, 0.01, t, 5), golden_lr_cosine[t], 1e-12);
  CHECK_NEAR(kiln_optim_lr_cosine(0.1, 0.01, 9, 5), 0.01, 1e-15); /* clamped at t_max */
}

/* Lazy: the whole optimizer step records; new learning rates compile nothing. */
TEST(nn_optimizer_lazy_equals_eager_without_recompiles) {
  kiln_optim_kind kinds[2] = {KILN_OPTIM_SGD, KILN_OPTIM_ADAMW};
  for (int k = 0; k < 2; k++) {
    kiln_generator *ge = kiln_generator_new(7), *gl = kiln_generator_new(7);
    kiln_nn_module *me = kiln_nn_model_new("mlp", ge), *ml = kiln_nn_model_new("mlp", gl);
    kiln_optim_opts o = {.kind = kinds[k], .lr = 0.05, .momentum = 0.9, .weight_decay = 0.01};
    kiln_optim *oe = kiln_optim_new(me, &o), *ol = kiln_optim_new(ml, &o);
    CHECK(kiln_nn_module_to_lazy(ml) == KILN_OK);
    CHECK(kiln_optim_to_lazy(ol) == KILN_OK);
    CHECK(kiln_tensor_is_lazy(kiln_nn_module_param(ml, 0)) && kiln_tensor_is_lazy(kiln_optim_state(ol, 0)));
    kiln_mark_step();
    int64_t uncached[4] = {0};
    for (int s = 0; s < 4; s++) {
      kiln_optim_set_lr(oe, 0.05 / (s + 1));
      kiln_optim_set_lr(ol, 0.05 / (s + 1));
      kiln_scope_begin();
      kiln_tensor *x = kiln_randn(4, (int64_t[]){8, 1, 28, 28}, KILN_DTYPE_F32, ge);
      int64_t yv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      kiln_tensor *y = kiln_from_data(yv, 1, (int64_t[]){8}, KILN_DTYPE_I64);
      kiln_tensor *le = kiln_cross_entropy(kiln_nn_module_forward(me, x), y, KILN_REDUCTION_MEAN);
      kiln_tensor *ll = kiln_cross_entropy(kiln_nn_module_forward(ml, kiln_to_lazy(x)),
                                           kiln_to_lazy(y), KILN_REDUCTION_MEAN);
      CHECK(kiln_backward(le, NULL) == KILN_OK && kiln_backward(ll, NULL) == KILN_OK);
      CHECK(kiln_optim_step(oe) == KILN_OK && kiln_optim_step(ol) == KILN_OK);
      kiln_optim_zero_grad(oe);
      kiln_optim_zero_grad(ol);
      CHECK(kiln_mark_step() == KILN_OK);
      uncached[s] = kiln_lazy_counter("UncachedCompile");
      double a, b;
      kiln_item(le, &a);
      kiln_item(ll, &b);
      CHECK_NEAR(a, b, 1e-5 * (1 + fabs(a)));
      kiln_scope_end();
    }
    CHECK_MSG(uncached[3] == uncached[1], "compiled %lld graphs after step 2",
              (long long)(uncached[3] - uncached[1]));
    kiln_scope_begin();
    for (int i = 0; i < kiln_nn_module_n_params(me); i++) {
      kiln_tensor *pe = kiln_nn_module_param(me, i), *pl = kiln_to_cpu(kiln_nn_module_param(ml, i));
      double d;
      kiln_item(kiln_amax(kiln_abs(kiln_sub(pe, pl)), NULL, 0, false), &d);
      CHECK_MSG(d < 1e-5, "%s differs by %g", kiln_nn_module_param_name(me, i), d);
    }
    kiln_scope_end();
    kiln_optim_free(oe);
    kiln_optim_free(ol);
    kiln_nn_module_free(me);
    kiln_nn_module_free(ml);
    kiln_generator_free(ge);
    kiln_generator_free(gl);
  }
}
