/* tests/autograd/test_engine.c: the engine's semantics (issue 3):
 * accumulation order (and in-place accumulation), hooks, callbacks, retain_grad, inputs=, kiln_grad,
 * version counters, retain_graph, double backward, anomaly mode. */
#include "core/core.h"
#include "test.h"

/* ---- an event log the hooks write into ------------------------------------- */
static char events[64][32];
static int n_events;

static void log_event(const char *e) {
  if (n_events < 64) snprintf(events[n_events++], sizeof events[0], "%s", e);
}

static int find_event(const char *e) {
  for (int i = 0; i < n_events; i++)
    if (strcmp(events[i], e) == 0) return i;
  return -1;
}

static int count_event(const char *e) {
  int c = 0;
  for (int i = 0; i < n_events; i++) c += strcmp(events[i], e) == 0;
  return c;
}

static kiln_tensor *hook_log(kiln_tensor *g, void *ud) {
  log_event((const char *)ud);
  return NULL;
}

static void post_acc_log(kiln_tensor *leaf, void *ud) {
  (void)leaf;
  log_event((const char *)ud);
}

static double leaf_hook_sum;
static kiln_tensor *leaf_hook_record(kiln_tensor *g, void *ud) {
  double s = 0;
  for (int64_t i = 0; i < kiln_tensor_numel(g); i++) s += core_get_flat(g, i);
  leaf_hook_sum = s;
  log_event((const char *)ud);
  return NULL;
}

static kiln_tensor *vec(const double *v, int64_t n) {
  return kiln_from_data(v, 1, &n, KILN_DTYPE_F64);
}

/* w used by k forward ops: AccumulateGrad fires once, after all of them,
 * with the summed gradient. */
static void check_uses(int k) {
  static const char *names[5] = {"a0", "a1", "a2", "a3", "a4"};
  double wv[2] = {0.5, -1.0}, cv[2] = {1, 2};
  n_events = 0;
  kiln_scope_begin();
  kiln_tensor *w = vec(wv, 2);
  kiln_set_requires_grad(w, true);
  kiln_register_hook(w, leaf_hook_record, "w-hook");
  kiln_register_post_accumulate_hook(w, post_acc_log, "acc");
  kiln_tensor *total = NULL;
  for (int i = 0; i < k; i++) {
    kiln_tensor *c = kiln_mul_scalar(vec(cv, 2), i + 1.0);
    kiln_tensor *a = kiln_mul(w, c); /* d a/d w = c * (i+1) */
    kiln_register_hook(a, hook_log, (void *)names[i]);
    total = total ? kiln_add(total, a) : a;
  }
  kiln_tensor *loss = kiln_sum(total, NULL, 0, false);
  CHECK(kiln_backward(loss, NULL) == KILN_OK);
  CHECK_EQ_INT(count_event("acc"), 1);
  CHECK_EQ_INT(count_event("w-hook"), 1);
  int acc = find_event("acc");
  for (int i = 0; i < k; i++) {
    int e = find_event(names[i]);
    CHECK_MSG(e >= 0 && e < acc, "%d uses: contributor %s at %d, AccumulateGrad at %d", k,
              names[i], e, acc);
  }
  /* one accumulated sum: sum_i (i+1) * c */
  double f = k * (k + 1) / 2.0;
  kiln_tensor *gw = kiln_tensor_grad(w);
  CHECK(gw != NULL);
  if (gw) {
    CHECK_NEAR(core_get_flat(gw, 0), f * cv[0], 1e-12);
    CHECK_NEAR(core_get_flat(gw, 1), f * cv[1], 1e-12);
  }
  CHECK_NEAR(leaf_hook_sum, f * (cv[0] + cv[1]), 1e-12);
  kiln_scope_end();
}

TEST(accumulate_once_two_uses) { check_uses(2); }
TEST(accumulate_once_five_uses) { check_uses(5); }

/* Note [In-place accumulation]: the engine adds into a buffered gradient
 * only when nothing else holds it. add's backward passes the caller's root
 * gradient G on to both uses of w as the same tensor: the second must not
 * be added into the caller's G. */
TEST(accumulation_leaves_held_gradients_alone) {
  double wv[2] = {1, 2}, gv[2] = {0.5, 0.25};
  kiln_scope_begin();
  kiln_tensor *w = vec(wv, 2);
  kiln_set_requires_grad(w, true);
  kiln_tensor *G = vec(gv, 2);
  CHECK(kiln_backward(kiln_add(w, w), G) == KILN_OK);
  kiln_tensor *gw = kiln_tensor_grad(w);
  CHECK(gw != NULL);
  for (int i = 0; gw && i < 2; i++) {
    CHECK_NEAR(core_get_flat(gw, i), 2 * gv[i], 0);
    CHECK_NEAR(core_get_flat(G, i), gv[i], 0); /* the caller's tensor is untouched */
  }
  kiln_scope_end();
}

static void cb_log(void *ud) { log_event((const char *)ud); }

static kiln_tensor *hook_queue(kiln_tensor *g, void *ud) {
  CHECK(kiln_queue_callback(cb_log, ud) == KILN_OK);
  log_event("queued");
  return NULL;
}

TEST(callbacks_run_after_all_accumulation) {
  double v[2] = {1, 2};
  n_events = 0;
  kiln_scope_begin();
  kiln_tensor *w1 = vec(v, 2), *w2 = vec(v, 2);
  kiln_set_requires_grad(w1, true);
  kiln_set_requires_grad(w2, true);
  kiln_register_post_accumulate_hook(w1, post_acc_log, "acc1");
  kiln_register_post_accumulate_hook(w2, post_acc_log, "acc2");
  kiln_tensor *a = kiln_mul(w1, w2);
  kiln_register_hook(a, hook_queue, "cb1");
  kiln_tensor *b = kiln_mul(a, w1);
  kiln_register_hook(b, hook_queue, "cb2");
  CHECK(kiln_backward(kiln_sum(b, NULL, 0, false), NULL) == KILN_OK);
  int cb1 = find_event("cb1"), cb2 = find_event("cb2");
  CHECK(cb1 >= 0 && cb2 >= 0);
  CHECK(cb2 < cb1); /* in the order queued: b's hook ran first */
  CHECK(find_event("acc1") < cb2 && find_event("acc2") < cb2);
  CHECK_EQ_INT(count_event("cb1"), 1);
  /* outside a backward: a clear error */
  CHECK(kiln_queue_callback(cb_log, "x") == KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "no backward is running");
  kiln_scope_end();
}

static kiln_tensor *hook_double(kiln_tensor *g, void *ud) { return kiln_mul_scalar(g, 2.0); }

TEST(hooks_replace_and_retain_grad) {
  double wv[3] = {1, 2, 3};
  kiln_scope_begin();
  kiln_tensor *w = vec(wv, 3);
  kiln_set_requires_grad(w, true);
  kiln_tensor *y = kiln_mul(w, w); /* dy/dw = 2w */
  CHECK(kiln_retain_grad(y) == KILN_OK);
  kiln_register_hook(y, hook_double, NULL);
  CHECK(kiln_backward(kiln_sum(y, NULL, 0, false), NULL) == KILN_OK);
  kiln_tensor *gy = kiln_tensor_grad(y), *gw = kiln_tensor_grad(w);
  CHECK(gy && gw);
  if (gy && gw)
    for (int i = 0; i < 3; i++) {
      CHECK_NEAR(core_get_flat(gy, i), 2.0, 0); /* retained after the hook */
      CHECK_NEAR(core_get_flat(gw, i), 2.0 * 2 * wv[i], 1e-12);
    }
  kiln_scope_end();
}

TEST(inputs_restriction_and_kiln_grad) {
  double av[2] = {1, 2}, bv[2] = {3, 4};
  kiln_scope_begin();
  kiln_tensor *a = vec(av, 2), *b = vec(bv, 2);
  kiln_set_requires_grad(a, true);
  kiln_set_requires_grad(b, true);
  kiln_tensor *loss = kiln_sum(kiln_mul(a, b), NULL, 0, false);
  kiln_backward_opts o = {.retain_graph = true, .inputs = &a, .n_inputs = 1};
  CHECK(kiln_backward_ex(&loss, NULL, 1, &o) == KILN_OK);
  CHECK(kiln_tensor_grad(b) == NULL);
  CHECK(kiln_tensor_grad(a) != NULL);
  if (kiln_tensor_grad(a)) CHECK_NEAR(core_get_flat(kiln_tensor_grad(a), 1), 4.0, 0);
  kiln_tensor *ins[2] = {a, b}, *gs[2] = {0};
  CHECK(kiln_grad(&loss, NULL, 1, ins, 2, NULL, gs) == KILN_OK);
  CHECK(gs[0] && gs[1]);
  if (gs[0] && gs[1]) {
    CHECK_NEAR(core_get_flat(gs[0], 0), 3.0, 0);
    CHECK_NEAR(core_get_flat(gs[1], 1), 2.0, 0);
  }
  /* .grad untouched by kiln_grad */
  CHECK(kiln_tensor_grad(b) == NULL);
  CHECK_NEAR(core_get_flat(kiln_tensor_grad(a), 1), 4.0, 0);
  kiln_scope_end();
}

TEST(inplace_on_saved_tensor_fails_backward) {
  double wv[2] = {1, 2}, xv[2] = {3, 4};
  kiln_scope_begin();
  kiln_tensor *w = vec(wv, 2), *x = vec(xv, 2);
  kiln_set_requires_grad(w, true);
  kiln_tensor *y = kiln_sum(kiln_mul(w, x), NULL, 0, false);
  CHECK(kiln_fill_(x, 0.0) == KILN_OK); /* mul saved x */
  CHECK(kiln_backward(y, NULL) == KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mul");
  CHECK_STR_CONTAINS(kiln_last_error(), "has been modified by an inplace operation");
  CHECK(kiln_tensor_grad(w) == NULL);
  kiln_scope_end();
}

TEST(retain_graph_allows_second_backward) {
  double wv[2] = {1, 2};
  kiln_scope_begin();
  kiln_tensor *w = vec(wv, 2);
  kiln_set_requires_grad(w, true);
  kiln_tensor *y = kiln_sum(kiln_mul(w, w), NULL, 0, false);
  kiln_backward_opts o = {.retain_graph = true};
  CHECK(kiln_backward_ex(&y, NULL, 1, &o) == KILN_OK);
  CHECK(kiln_backward_ex(&y, NULL, 1, NULL) == KILN_OK);
  CHECK_NEAR(core_get_flat(kiln_tensor_grad(w), 1), 2 * 2 * 2.0, 0);
  CHECK(kiln_backward(y, NULL) == KILN_ERR_STATE);
  kiln_tensor_set_grad(w, NULL); /* set to none: the next backward creates it */
  CHECK(kiln_tensor_grad(w) == NULL);
  kiln_scope_end();
}

TEST(double_backward_cubic) {
  double xv[2] = {1.5, -2};
  kiln_scope_begin();
  kiln_tensor *x = vec(xv, 2);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_sum(kiln_mul(kiln_mul(x, x), x), NULL, 0, false); /* sum x^3 */
  kiln_tensor *g1 = NULL, *g2 = NULL;
  kiln_backward_opts o = {.create_graph = true};
  CHECK(kiln_grad(&y, NULL, 1, &x, 1, &o, &g1) == KILN_OK);
  CHECK(g1 && kiln_requires_grad(g1));
  if (g1) CHECK_NEAR(core_get_flat(g1, 0), 3 * 1.5 * 1.5, 1e-12);
  kiln_tensor *s = kiln_sum(g1, NULL, 0, false);
  CHECK(kiln_grad(&s, NULL, 1, &x, 1, NULL, &g2) == KILN_OK);
  if (g2) {
    CHECK_NEAR(core_get_flat(g2, 0), 6 * 1.5, 1e-12);
    CHECK_NEAR(core_get_flat(g2, 1), 6 * -2.0, 1e-12);
  }
  kiln_scope_end();
}

TEST(anomaly_mode_names_the_op) {
  double xv[2] = {0.0, 4.0};
  kiln_scope_begin();
  kiln_set_anomaly_enabled(true);
  kiln_tensor *x = vec(xv, 2);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_sum(kiln_sqrt(x), NULL, 0, false); /* d sqrt at 0 = inf */
  CHECK(kiln_backward(y, NULL) == KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::sqrt");
  CHECK_STR_CONTAINS(kiln_last_error(), "NaN or Inf");
  kiln_set_anomaly_enabled(false);
  kiln_scope_end();
}

TEST(requires_grad_errors) {
  int64_t n = 2;
  kiln_scope_begin();
  kiln_tensor *i = kiln_zeros(1, &n, KILN_DTYPE_I64);
  CHECK(kiln_set_requires_grad(i, true) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "floating-point");
  kiln_tensor *w = kiln_ones(1, &n, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_tensor *y = kiln_mul(w, w);
  CHECK(kiln_set_requires_grad(y, false) == KILN_ERR_INVALID);
  CHECK(kiln_copy_(w, y) == KILN_ERR_INVALID); /* leaf requiring grad */
  CHECK_STR_CONTAINS(kiln_last_error(), "no_grad");
  kiln_scope_end();
}
