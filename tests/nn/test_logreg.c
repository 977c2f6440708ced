/* tests/nn/test_logreg.c: logistic regression trained in eager mode, as in
 * examples/logreg.c but smaller: the public ops, kiln_backward and in-place
 * SGD under no_grad must fit two separable blobs. The accuracy is computed
 * here in plain C from the trained weights, independently of the ops. */
#include <stdlib.h>

#include "core/core.h"
#include "test.h"

enum { LR_N = 400, LR_D = 5, LR_BATCH = 50, LR_EPOCHS = 10 };

/* -mean(y log p + (1 - y) log(1 - p)), p clamped away from 0 and 1. */
static kiln_tensor *bce(kiln_tensor *p, kiln_tensor *y) {
  p = kiln_clamp(p, 1e-6, 1 - 1e-6);
  kiln_tensor *ll = kiln_add(kiln_mul(y, kiln_log(p)),
                             kiln_mul(kiln_add_scalar(kiln_neg(y), 1),
                                      kiln_log(kiln_add_scalar(kiln_neg(p), 1))));
  return kiln_neg(kiln_mean(ll, NULL, 0, false));
}

static kiln_status sgd_step(kiln_tensor *p, double lr) {
  kiln_no_grad_begin();
  kiln_status rc = kiln_copy_(p, kiln_sub_alpha(p, kiln_tensor_grad(p), lr));
  kiln_no_grad_end();
  return rc < 0 ? rc : kiln_tensor_set_grad(p, NULL);
}

/* Trains w [1, D], b [1] on x [N, D], y [N, 1]; writes the mean loss of the
 * first and last epochs. */
static kiln_status train(kiln_tensor *x, kiln_tensor *y, kiln_tensor *w, kiln_tensor *b,
                         double *first, double *last) {
  kiln_status rc = KILN_OK;
  for (int epoch = 0; epoch < LR_EPOCHS && rc == KILN_OK; epoch++) {
    double sum = 0;
    for (int i = 0; i < LR_N && rc == KILN_OK; i += LR_BATCH) {
      double l = 0;
      kiln_scope_begin();
      kiln_tensor *xb = kiln_narrow(x, 0, i, LR_BATCH), *yb = kiln_narrow(y, 0, i, LR_BATCH);
      kiln_tensor *loss = bce(kiln_sigmoid(kiln_linear(xb, w, b)), yb);
      rc = loss ? kiln_item(loss, &l) : KILN_ERR_INVALID;
      if (rc == KILN_OK) rc = kiln_backward(loss, NULL);
      if (rc == KILN_OK) rc = sgd_step(w, 0.5);
      if (rc == KILN_OK) rc = sgd_step(b, 0.5);
      kiln_scope_end();
      sum += l;
    }
    if (epoch == 0) *first = sum / (LR_N / LR_BATCH);
    *last = sum / (LR_N / LR_BATCH);
  }
  return rc;
}

TEST(logreg_trains_to_high_accuracy) {
  kiln_generator *gen = kiln_generator_new(7);
  kiln_scope_begin();
  kiln_tensor *half = kiln_scalar(0.5, KILN_DTYPE_F32);
  kiln_tensor *y = kiln_to_dtype(
      kiln_lt(kiln_rand(2, (int64_t[]){LR_N, 1}, KILN_DTYPE_F32, gen), half), KILN_DTYPE_F32);
  /* blob means -1 and +1 in every dim */
  kiln_tensor *x = kiln_add(kiln_randn(2, (int64_t[]){LR_N, LR_D}, KILN_DTYPE_F32, gen),
                            kiln_mul_scalar(kiln_sub_scalar(y, 0.5), 2.0));
  kiln_tensor *w = kiln_zeros(2, (int64_t[]){1, LR_D}, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_zeros(1, (int64_t[]){1}, KILN_DTYPE_F32);
  CHECK(kiln_set_requires_grad(w, true) == KILN_OK);
  CHECK(kiln_set_requires_grad(b, true) == KILN_OK);
  CHECK_MSG(x != NULL, "making the data: %s", kiln_last_error());
  double first = 0, last = 0;
  kiln_status rc = x ? train(x, y, w, b, &first, &last) : KILN_ERR_INVALID;
  CHECK_MSG(rc == KILN_OK, "training: %s", kiln_last_error());
  if (rc == KILN_OK) {
    CHECK_MSG(last < first && last < 0.2, "loss %g -> %g", first, last);
    /* accuracy in plain C from the data and the trained parameters */
    float *xs = malloc(sizeof(float) * LR_N * LR_D), ys[LR_N], ws[LR_D], bs[1];
    CHECK(kiln_tensor_copy_to(x, xs, KILN_DTYPE_F32) == KILN_OK);
    CHECK(kiln_tensor_copy_to(y, ys, KILN_DTYPE_F32) == KILN_OK);
    CHECK(kiln_tensor_copy_to(w, ws, KILN_DTYPE_F32) == KILN_OK);
    CHECK(kiln_tensor_copy_to(b, bs, KILN_DTYPE_F32) == KILN_OK);
    int hits = 0, ones = 0;
    for (int i = 0; i < LR_N; i++) {
      double z = bs[0];
      for (int j = 0; j < LR_D; j++) z += (double)xs[i * LR_D + j] * ws[j];
      hits += (z > 0) == (ys[i] > 0.5f);
      ones += ys[i] > 0.5f;
    }
    double acc = (double)hits / LR_N;
    CHECK(ones > LR_N / 4 && ones < 3 * LR_N / 4); /* both classes present */
    CHECK_MSG(acc > 0.95, "training accuracy %.3f", acc);
    test_note("loss %.3f -> %.3f, accuracy %.3f", first, last, acc);
    free(xs);
  }
  kiln_scope_end();
  kiln_generator_free(gen);
}
