/* tests/lazy/test_lazy_training.c: whole training steps on lazy tensors,
 * pinned by counters (as PyTorch/XLA's tests pin theirs): graphs per step,
 * caching across steps, accumulation inside the backward graph, learning
 * rates and batch sizes, and equality with eager mode. */
#include <stdlib.h>

#include "lazy/lazy.h"
#include "test.h"

#define N_IN 20
#define N_HID 16
#define N_OUT 5

typedef struct mlp {
  kiln_tensor *p[6];   /* w1 b1 w2 b2 w3 b3 (kept) */
  kiln_tensor *buf[6]; /* momentum buffers (kept) */
} mlp;

static void mlp_init(mlp *m, bool lazy, uint64_t seed) {
  static const int64_t shapes[6][2] = {{N_HID, N_IN}, {N_HID, 0}, {N_HID, N_HID},
                                       {N_HID, 0},    {N_OUT, N_HID}, {N_OUT, 0}};
  kiln_generator *g = kiln_generator_new(seed);
  kiln_scope_begin();
  for (int i = 0; i < 6; i++) {
    int nd = shapes[i][1] ? 2 : 1;
    kiln_tensor *t = kiln_mul_scalar(kiln_randn(nd, shapes[i], KILN_DTYPE_F32, g), 0.3);
    kiln_tensor *z = kiln_zeros(nd, shapes[i], KILN_DTYPE_F32);
    m->p[i] = kiln_keep(lazy ? kiln_to_lazy(t) : kiln_clone(t));
    m->buf[i] = kiln_keep(lazy ? kiln_to_lazy(z) : z);
    kiln_set_requires_grad(m->p[i], true);
  }
  kiln_scope_end();
  kiln_generator_free(g);
}

static void mlp_free(mlp *m) {
  for (int i = 0; i < 6; i++) {
    kiln_release(m->p[i]);
    kiln_release(m->buf[i]);
  }
}

static kiln_tensor *mlp_loss(mlp *m, kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor *h = kiln_relu(kiln_linear(x, m->p[0], m->p[1]));
  h = kiln_relu(kiln_linear(h, m->p[2], m->p[3]));
  return kiln_cross_entropy(kiln_linear(h, m->p[4], m->p[5]), y, KILN_REDUCTION_MEAN);
}

/* SGD with momentum; grads set to none afterwards (zero_grad default). */
static void sgd_step(mlp *m, double lr, double momentum) {
  kiln_no_grad_begin();
  for (int i = 0; i < 6; i++) {
    kiln_tensor *g = kiln_tensor_grad(m->p[i]);
    kiln_copy_(m->buf[i], kiln_add(kiln_mul_scalar(m->buf[i], momentum), g));
    kiln_copy_(m->p[i], kiln_sub(m->p[i], kiln_mul_scalar(m->buf[i], lr)));
    kiln_tensor_set_grad(m->p[i], NULL);
  }
  kiln_no_grad_end();
}

static void batch(kiln_generator *g, int64_t b, kiln_tensor **x, kiln_tensor **y) {
  int64_t sx[2] = {b, N_IN};
  *x = kiln_randn(2, sx, KILN_DTYPE_F32, g);
  *y = kiln_zeros(1, &b, KILN_DTYPE_I64);
  for (int64_t i = 0; i < b; i++)
    ((int64_t *)kiln_tensor_data(*y))[i] = (int64_t)(core_rand_u64(g) % N_OUT);
}

static int64_t ctr(const char *n) { return kiln_lazy_counter(n); }

TEST(lazy_mlp_three_graphs_per_step) {
  mlp m;
  kiln_generator *g = kiln_generator_new(21);
  mlp_init(&m, true, 1);
  kiln_mark_step();
  kiln_lazy_metrics_reset();
  for (int step = 1; step <= 4; step++) {
    int64_t u0 = ctr("UncachedCompile"), c0 = ctr("CachedCompile"), e0 = ctr("ExecuteGraph"),
            m0 = ctr("MarkStep");
    kiln_scope_begin();
    kiln_tensor *x, *y;
    batch(g, 8, &x, &y);
    kiln_tensor *loss = mlp_loss(&m, kiln_to_lazy(x), kiln_to_lazy(y));
    kiln_mark_step();
    CHECK(kiln_backward(loss, NULL) == KILN_OK);
    kiln_mark_step();
    sgd_step(&m, 0.1, 0.9);
    kiln_mark_step();
    kiln_scope_end();
    if (step == 1) {
      CHECK_EQ_INT(ctr("UncachedCompile") - u0, 3);
    } else {
      CHECK_MSG(ctr("UncachedCompile") - u0 == 0, "step %d compiled %lld graphs", step,
                (long long)(ctr("UncachedCompile") - u0));
      CHECK_EQ_INT(ctr("CachedCompile") - c0, 3);
    }
    CHECK_EQ_INT(ctr("ExecuteGraph") - e0, 3);
    CHECK_EQ_INT(ctr("MarkStep") - m0, 3);
  }
  mlp_free(&m);
  kiln_generator_free(g);
}

TEST(lazy_mlp_one_graph_per_step_equals_eager) {
  mlp ml, me;
  kiln_generator *gl = kiln_generator_new(5), *ge = kiln_generator_new(5);
  mlp_init(&ml, true, 2);
  mlp_init(&me, false, 2);
  kiln_mark_step();
  kiln_lazy_metrics_reset();
  for (int step = 1; step <= 5; step++) {
    int64_t u0 = ctr("UncachedCompile"), e0 = ctr("ExecuteGraph");
    kiln_scope_begin();
    kiln_tensor *x, *y, *xe, *ye;
    batch(gl, 8, &x, &y);
    batch(ge, 8, &xe, &ye);
    kiln_tensor *loss = mlp_loss(&ml, kiln_to_lazy(x), kiln_to_lazy(y));
    kiln_tensor *loss_e = mlp_loss(&me, xe, ye);
    CHECK(kiln_backward(loss, NULL) == KILN_OK);
    CHECK(kiln_backward(loss_e, NULL) == KILN_OK);
    sgd_step(&ml, 0.05, 0.9);
    sgd_step(&me, 0.05, 0.9);
    kiln_tensor *keep = kiln_keep(loss);
    kiln_mark_step();
    CHECK_EQ_INT(ctr("ExecuteGraph") - e0, 1);
    if (step > 1) CHECK_EQ_INT(ctr("UncachedCompile") - u0, 0);
    double l = 0, le = 0;
    kiln_item(keep, &l);
    kiln_item(loss_e, &le);
    CHECK_NEAR(l, le, 1e-5);
    CHECK_EQ_INT(ctr("ExecuteGraph") - e0, 1); /* reading the synced loss runs nothing */
    kiln_release(keep);
    kiln_scope_end();
  }
  for (int i = 0; i < 6; i++) {
    kiln_scope_begin();
    kiln_tensor *a = kiln_to_cpu(ml.p[i]);
    for (int64_t k = 0; k < kiln_tensor_numel(a); k++)
      CHECK_NEAR(core_get_flat(a, k), core_get_flat(me.p[i], k), 1e-5);
    kiln_scope_end();
  }
  mlp_free(&ml);
  mlp_free(&me);
  kiln_generator_free(gl);
  kiln_generator_free(ge);
}

/* Does an "aten::mul(" line of the IR text read a 0-d device_data node? */
static bool mul_by_scalar_data(const char *text) {
  bool scalar[512] = {false};
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    int id;
    if (sscanf(l, " %%%d = [", &id) != 1 || id < 0 || id >= 512) continue;
    const char *eol = strchr(l, '\n');
    size_t len = eol ? (size_t)(eol - l) : strlen(l);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), l);
    if (strstr(line, "[]] lazy_tensors::device_data(")) scalar[id] = true;
    const char *m = strstr(line, "aten::mul(");
    if (!m) continue;
    for (const char *p = m; (p = strchr(p, '%')) != NULL; p++) {
      int ref = atoi(p + 1);
      if (ref >= 0 && ref < 512 && scalar[ref]) return true;
    }
  }
  return false;
}

TEST(lazy_grads_accumulate_inside_the_backward_graph) {
  mlp m;
  kiln_generator *g = kiln_generator_new(8);
  mlp_init(&m, true, 3);
  kiln_mark_step();
  kiln_scope_begin();
  kiln_tensor *x, *y;
  batch(g, 4, &x, &y);
  kiln_tensor *lx = kiln_to_lazy(x), *ly = kiln_to_lazy(y);
  CHECK(kiln_backward(mlp_loss(&m, lx, ly), NULL) == KILN_OK);
  CHECK(kiln_backward(mlp_loss(&m, lx, ly), NULL) == KILN_OK); /* accumulate */
  kiln_tensor *gb = kiln_tensor_grad(m.p[5]);
  CHECK(gb && kiln_tensor_is_lazy(gb) && lazy_is_pending(gb));
  char *text = kiln_lazy_tensors_text(&gb, 1);
  CHECK(text != NULL);
  /* the root is the accumulation of the two backwards */
  const char *root = text ? strstr(text, "ROOT=0") : NULL;
  const char *line = root;
  while (line && line > text && line[-1] != '\n') line--;
  CHECK_MSG(line && strstr(line, "aten::add(") && strstr(line, "aten::add(") < root,
            "root is not an add:\n%s", text ? text : "");
  /* no multiplication by a scalar (a `* 1` from alpha or a seed of ones):
   * no aten::mul reads a 0-d device_data */
  CHECK(text && !mul_by_scalar_data(text));
  kiln_free(text);
  kiln_mark_step();
  int64_t e0 = ctr("ExecuteGraph");
  for (int i = 0; i < 6; i++) {
    double v;
    kiln_tensor *gi = kiln_tensor_grad(m.p[i]);
    CHECK(gi && !lazy_is_pending(gi));
    CHECK(kiln_tensor_copy_to(gi, kiln_tensor_data(kiln_zeros(kiln_tensor_ndim(gi),
                                                              kiln_tensor_shape(gi),
                                                              KILN_DTYPE_F32)),
                              KILN_DTYPE_F32) == KILN_OK);
    (void)v;
  }
  CHECK_EQ_INT(ctr("ExecuteGraph"), e0); /* reading grads ran no graph */
  kiln_scope_end();
  mlp_free(&m);
  kiln_generator_free(g);
}

TEST(lazy_lr_changes_and_batch_sizes) {
  mlp m;
  kiln_generator *g = kiln_generator_new(13);
  mlp_init(&m, true, 4);
  kiln_mark_step();
  int64_t sizes[6] = {8, 8, 16, 16, 8, 4};
  int64_t uncached[6];
  kiln_lazy_metrics_reset();
  for (int step = 0; step < 6; step++) {
    kiln_scope_begin();
    kiln_tensor *x, *y;
    batch(g, sizes[step], &x, &y);
    CHECK(kiln_backward(mlp_loss(&m, kiln_to_lazy(x), kiln_to_lazy(y)), NULL) == KILN_OK);
    sgd_step(&m, 0.1 / (step + 1), 0.9); /* a new learning rate every step */
    kiln_mark_step();
    kiln_scope_end();
    uncached[step] = ctr("UncachedCompile");
  }
  CHECK_EQ_INT(uncached[0], 1);
  CHECK_EQ_INT(uncached[1], 1); /* new lr: no compile */
  CHECK_EQ_INT(uncached[2], 2); /* batch 16: one new graph */
  CHECK_EQ_INT(uncached[3], 2);
  CHECK_EQ_INT(uncached[4], 2); /* back to 8: cache hit */
  CHECK_EQ_INT(uncached[5], 3); /* batch 4 */
  CHECK(kiln_lazy_n_recompile_reasons() >= 2);
  CHECK_STR_CONTAINS(kiln_lazy_recompile_reason(0), "[8, 20] -> Float[16, 20]");
  mlp_free(&m);
  kiln_generator_free(g);
}

/* An LSTM cell unrolled over 16 steps: lazy loss and grads equal eager. */
static kiln_tensor *lstm_loss(kiln_tensor *const *xs, kiln_tensor *wih, kiln_tensor *whh,
                              kiln_tensor *b, int64_t batch_n, int64_t hid) {
  int64_t sh[2] = {batch_n, hid};
  kiln_tensor *h = kiln_zeros(2, sh, KILN_DTYPE_F32), *c = kiln_zeros(2, sh, KILN_DTYPE_F32);
  if (kiln_tensor_is_lazy(wih)) {
    h = kiln_to_lazy(h);
    c = kiln_to_lazy(c);
  }
  for (int t = 0; t < 16; t++) {
    kiln_tensor *gates = kiln_add(kiln_linear(xs[t], wih, b), kiln_linear(h, whh, NULL));
    kiln_tensor *q[4];
    kiln_chunk(gates, 4, 1, q, 4);
    kiln_tensor *i = kiln_sigmoid(q[0]), *f = kiln_sigmoid(q[1]), *gg = kiln_tanh(q[2]),
                *o = kiln_sigmoid(q[3]);
    c = kiln_add(kiln_mul(f, c), kiln_mul(i, gg));
    h = kiln_mul(o, kiln_tanh(c));
  }
  return kiln_sum(h, NULL, 0, false);
}

TEST(lazy_lstm_unrolled_equals_eager) {
  const int64_t B = 3, I = 4, H = 5;
  kiln_generator *g = kiln_generator_new(17);
  kiln_scope_begin();
  int64_t swi[2] = {4 * H, I}, swh[2] = {4 * H, H}, sb = 4 * H, sx[2] = {B, I};
  kiln_tensor *wih = kiln_mul_scalar(kiln_randn(2, swi, KILN_DTYPE_F32, g), 0.4);
  kiln_tensor *whh = kiln_mul_scalar(kiln_randn(2, swh, KILN_DTYPE_F32, g), 0.4);
  kiln_tensor *b = kiln_mul_scalar(kiln_randn(1, &sb, KILN_DTYPE_F32, g), 0.1);
  kiln_tensor *xs[16], *lxs[16];
  for (int t = 0; t < 16; t++) {
    xs[t] = kiln_randn(2, sx, KILN_DTYPE_F32, g);
    lxs[t] = kiln_to_lazy(xs[t]);
  }
  kiln_tensor *E[3] = {kiln_clone(wih), kiln_clone(whh), kiln_clone(b)};
  kiln_tensor *L[3] = {kiln_to_lazy(wih), kiln_to_lazy(whh), kiln_to_lazy(b)};
  for (int k = 0; k < 3; k++) {
    kiln_set_requires_grad(E[k], true);
    kiln_set_requires_grad(L[k], true);
  }
  kiln_tensor *le = lstm_loss(xs, E[0], E[1], E[2], B, H);
  kiln_tensor *ll = lstm_loss(lxs, L[0], L[1], L[2], B, H);
  CHECK(kiln_backward(le, NULL) == KILN_OK);
  CHECK(kiln_backward(ll, NULL) == KILN_OK);
  kiln_mark_step();
  double a = 0, e = 0;
  kiln_item(ll, &a);
  kiln_item(le, &e);
  CHECK_NEAR(a, e, 1e-4);
  for (int k = 0; k < 3; k++) {
    kiln_tensor *gl = kiln_to_cpu(kiln_tensor_grad(L[k])), *gE = kiln_tensor_grad(E[k]);
    CHECK(gl && gE);
    if (!gl || !gE) continue;
    for (int64_t i = 0; i < kiln_tensor_numel(gE); i++)
      CHECK_NEAR(core_get_flat(gl, i), core_get_flat(gE, i), 1e-4);
  }
  kiln_scope_end();
  kiln_generator_free(g);
}
