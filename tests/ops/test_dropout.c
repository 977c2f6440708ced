/* tests/ops/test_dropout.c: native_dropout and dropout: output = x * mask /
 * (1 - p) with a bool mask, p = 0 and p = 1, eval mode, determinism under a
 * seed, the generator argument, gradients, errors, and gradcheck samples. */
#include "sample.h"
#include "test.h"

static int native(kiln_tensor *x, double p, op_val train, kiln_tensor **outs) {
  return op_call(KILN_OP_NATIVE_DROPOUT, (op_val[]){OPV_T(x), OPV_F(p), train}, 3, outs, 2);
}

TEST(native_dropout_values) {
  kiln_scope_begin();
  int64_t n = 20000;
  kiln_tensor *x = kiln_arange(1, (double)n + 1, 1, KILN_DTYPE_F32);
  kiln_tensor *outs[2] = {0};
  kiln_manual_seed(5);
  CHECK_EQ_INT(native(x, 0.25, OPV_B(true), outs), 2);
  if (outs[0]) {
    CHECK(kiln_tensor_dtype(outs[0]) == KILN_DTYPE_F32);
    CHECK(kiln_tensor_dtype(outs[1]) == KILN_DTYPE_BOOL);
    const float *o = kiln_tensor_data(outs[0]);
    const bool *m = kiln_tensor_data(outs[1]);
    int64_t kept = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
      kept += m[i];
      float want = m[i] ? (float)(i + 1) * (float)(1.0 / 0.75) : 0.0f;
      bad += o[i] != want;
    }
    CHECK_EQ_INT(bad, 0);
    /* 15000 expected; 6 standard deviations is about 370 */
    CHECK_MSG(kept > 14600 && kept < 15400, "kept %lld of 20000 at p=0.25", (long long)kept);
  }
  /* the same seed gives the same mask */
  kiln_tensor *again[2] = {0};
  kiln_manual_seed(5);
  native(x, 0.25, OPV_NONE, again); /* train=None means training */
  CHECK(again[1] && !memcmp(kiln_tensor_data(again[1]), kiln_tensor_data(outs[1]), (size_t)n));
  kiln_scope_end();
}

TEST(native_dropout_edge_cases) {
  kiln_scope_begin();
  double xv[4] = {1, -2, 3, INFINITY};
  kiln_tensor *x = kiln_from_data(xv, 2, (int64_t[]){2, 2}, KILN_DTYPE_F64);
  kiln_tensor *o[2] = {0};
  /* p = 0: everything kept, unscaled */
  CHECK_EQ_INT(native(x, 0.0, OPV_B(true), o), 2);
  for (int i = 0; o[0] && i < 4; i++) {
    CHECK(core_get_flat(o[0], i) == xv[i]);
    CHECK(core_get_flat(o[1], i) == 1.0);
  }
  /* p = 1: mask all false, zeros (finite inputs) */
  CHECK_EQ_INT(native(kiln_t(x), 1.0, OPV_B(true), o), 2);
  for (int i = 0; o[0] && i < 4; i++) CHECK(core_get_flat(o[1], i) == 0.0);
  CHECK_NEAR(o[0] ? core_get_flat(o[0], 0) : 1, 0.0, 0);
  /* not training: a copy and an all-true mask */
  CHECK_EQ_INT(native(kiln_t(x), 0.5, OPV_B(false), o), 2);
  double want_t[4] = {1, 3, -2, INFINITY};
  for (int i = 0; o[0] && i < 4; i++) {
    CHECK(core_get_flat(o[0], i) == want_t[i]);
    CHECK(core_get_flat(o[1], i) == 1.0);
  }
  /* errors */
  CHECK(native(x, 1.5, OPV_B(true), o) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::native_dropout: dropout probability has to be between 0 and 1, but got 1.5");
  CHECK(native(kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_I64), 0.5, OPV_B(true), o) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::native_dropout: input must be a Float or Double tensor, got Long[3]");
  CHECK(kiln_dropout(x, -0.1, true, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::dropout: dropout probability has to be between 0 and 1");
  kiln_scope_end();
}

TEST(dropout_eval_and_generator) {
  kiln_scope_begin();
  int64_t shape[2] = {8, 16};
  kiln_tensor *x = kiln_ones(2, shape, KILN_DTYPE_F32);
  /* eval: the same tensor back */
  kiln_tensor *e = kiln_dropout(x, 0.5, false, NULL);
  CHECK(e == x);
  /* default generator: reproducible under manual_seed */
  kiln_manual_seed(77);
  kiln_tensor *a = kiln_dropout(x, 0.5, true, NULL);
  kiln_manual_seed(77);
  kiln_tensor *b = kiln_dropout(x, 0.5, true, NULL);
  CHECK(a && b && !memcmp(kiln_tensor_data(a), kiln_tensor_data(b), 128 * sizeof(float)));
  /* a private generator seeded 77 draws the same mask, advances itself
   * and leaves the default generator alone */
  uint64_t before[4], after[4], gs0[4], gs1[4];
  kiln_manual_seed(123);
  kiln_generator_get_state(kiln_default_generator(), before);
  kiln_generator *g = kiln_generator_new(0);
  kiln_generator_seed(g, 77);
  kiln_generator_get_state(g, gs0);
  kiln_tensor *c = kiln_dropout(x, 0.5, true, g);
  kiln_generator_get_state(kiln_default_generator(), after);
  kiln_generator_get_state(g, gs1);
  CHECK(c && !memcmp(kiln_tensor_data(a), kiln_tensor_data(c), 128 * sizeof(float)));
  CHECK(!memcmp(before, after, sizeof before));
  CHECK(memcmp(gs0, gs1, sizeof gs0) != 0);
  /* values are 0 or 2 */
  int bad = 0;
  for (int64_t i = 0; c && i < 128; i++) {
    float v = ((float *)kiln_tensor_data(c))[i];
    bad += v != 0.0f && v != 2.0f;
  }
  CHECK_EQ_INT(bad, 0);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* p = 0 in training is PyTorch's CPU dropout's early return (_dropout_impl):
 * the input itself, no mask drawn (the default generator stays where it
 * was), and the gradient flows through unchanged. */
TEST(dropout_p0_training_is_identity) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_full(1, (int64_t[]){16}, 1.5, KILN_DTYPE_F32);
  kiln_set_requires_grad(x, true);
  uint64_t before[4], after[4];
  kiln_manual_seed(5);
  kiln_generator_get_state(kiln_default_generator(), before);
  kiln_tensor *y = kiln_dropout(x, 0.0, true, NULL);
  kiln_generator_get_state(kiln_default_generator(), after);
  CHECK(y == x);
  CHECK(!memcmp(before, after, sizeof before));
  kiln_tensor *l = kiln_sum(kiln_mul_scalar(y, 3.0), NULL, 0, false);
  CHECK(l && kiln_backward(l, NULL) == 0);
  kiln_tensor *gx = kiln_tensor_grad(x);
  CHECK(gx != NULL);
  for (int64_t i = 0; gx && i < 16; i++) CHECK_NEAR(core_get_flat(gx, i), 3.0, 0);
  /* p > 0 still draws */
  kiln_tensor *z = kiln_dropout(x, 0.5, true, NULL);
  kiln_generator_get_state(kiln_default_generator(), after);
  CHECK(z && z != x && memcmp(before, after, sizeof before) != 0);
  kiln_scope_end();
}

TEST(dropout_backward_uses_mask) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_full(1, (int64_t[]){64}, 3.0, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_tensor *o[2] = {0};
  kiln_manual_seed(9);
  CHECK_EQ_INT(native(x, 0.2, OPV_B(true), o), 2);
  kiln_tensor *gsum = kiln_sum(o[0], NULL, 0, false);
  CHECK(gsum && kiln_backward(gsum, NULL) == 0);
  kiln_tensor *gx = kiln_tensor_grad(x);
  int bad = 0;
  for (int64_t i = 0; gx && i < 64; i++)
    bad += fabs(core_get_flat(gx, i) - core_get_flat(o[1], i) / 0.8) > 1e-15;
  CHECK(gx != NULL);
  CHECK_EQ_INT(bad, 0);
  kiln_scope_end();
}

/* ---- gradcheck samples (gradcheck reseeds the default generator per run) ---- */

OP_SAMPLE(NATIVE_DROPOUT, train) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){4, 5}));
  s->args[1] = OPV_F(0.4);
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(NATIVE_DROPOUT, eval) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){3, 2}));
  s->args[1] = OPV_F(0.4);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
OP_SAMPLE(DROPOUT, train) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 4}));
  s->args[1] = OPV_F(0.3);
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(DROPOUT, eval) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){5}));
  s->args[1] = OPV_F(0.3);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
