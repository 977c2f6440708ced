/* examples/logreg.c: logistic regression in eager mode, the smallest
 * complete use of kiln: make data, define a model, take gradients with
 * kiln_backward, update parameters under no_grad. Scopes release every
 * temporary, so there is no kiln_release for them.
 *
 * Data: two Gaussian blobs in 10 dims (means -0.8 and +0.8 in every dim),
 * 1000 samples. Exits non-zero unless the training accuracy is > 0.95. */
#include <stdio.h>

#include "kiln.h"

enum { N = 1000, D = 10, BATCH = 100, EPOCHS = 20 };
static const double LR = 0.5;

/* Binary cross-entropy, -mean(y log p + (1 - y) log(1 - p)), with p kept
 * away from 0 and 1 so that the logs stay finite. */
static kiln_tensor *bce(kiln_tensor *p, kiln_tensor *y) {
  p = kiln_clamp(p, 1e-6, 1 - 1e-6);
  kiln_tensor *one_minus_y = kiln_add_scalar(kiln_neg(y), 1);
  kiln_tensor *one_minus_p = kiln_add_scalar(kiln_neg(p), 1);
  kiln_tensor *ll = kiln_add(kiln_mul(y, kiln_log(p)),
                             kiln_mul(one_minus_y, kiln_log(one_minus_p)));
  return kiln_neg(kiln_mean(ll, NULL, 0, false));
}

/* p -= LR * grad(p), in place and unrecorded; then clear the gradient. */
static kiln_status sgd_step(kiln_tensor *p) {
  kiln_no_grad_begin();
  kiln_status rc = kiln_copy_(p, kiln_sub_alpha(p, kiln_tensor_grad(p), LR));
  kiln_no_grad_end();
  return rc < 0 ? rc : kiln_tensor_set_grad(p, NULL);
}

/* One step on rows [i, i + BATCH) of x and y; the batch loss in *loss. */
static kiln_status train_step(kiln_tensor *x, kiln_tensor *y, kiln_tensor *w,
                              kiln_tensor *b, int i, double *loss) {
  kiln_scope_begin(); /* everything made in this step is released at its end */
  kiln_tensor *xb = kiln_narrow(x, 0, i, BATCH), *yb = kiln_narrow(y, 0, i, BATCH);
  kiln_tensor *l = bce(kiln_sigmoid(kiln_linear(xb, w, b)), yb);
  kiln_status rc = l ? kiln_item(l, loss) : KILN_ERR_INVALID;
  if (rc == KILN_OK) rc = kiln_backward(l, NULL);
  if (rc == KILN_OK) rc = sgd_step(w);
  if (rc == KILN_OK) rc = sgd_step(b);
  kiln_scope_end();
  return rc;
}

int main(void) {
  kiln_generator *gen = kiln_generator_new(42);
  double acc = 0;
  kiln_status rc = KILN_OK;
  kiln_scope_begin(); /* data and parameters live until the end */

  /* Labels y in {0, 1}; x = noise + (y - 0.5) * 1.6 in every dim. */
  kiln_tensor *half = kiln_scalar(0.5, KILN_DTYPE_F32);
  kiln_tensor *y = kiln_to_dtype(
      kiln_lt(kiln_rand(2, (int64_t[]){N, 1}, KILN_DTYPE_F32, gen), half), KILN_DTYPE_F32);
  kiln_tensor *x = kiln_add(kiln_randn(2, (int64_t[]){N, D}, KILN_DTYPE_F32, gen),
                            kiln_mul_scalar(kiln_sub_scalar(y, 0.5), 1.6));

  /* The model: p = sigmoid(x w^T + b), starting from zero. */
  kiln_tensor *w = kiln_zeros(2, (int64_t[]){1, D}, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_zeros(1, (int64_t[]){1}, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(b, true);
  if (!x) rc = KILN_ERR_INVALID;

  for (int epoch = 1; epoch <= EPOCHS && rc == KILN_OK; epoch++) {
    double sum = 0, loss = 0;
    for (int i = 0; i < N && rc == KILN_OK; i += BATCH) {
      rc = train_step(x, y, w, b, i, &loss);
      sum += loss;
    }
    if (rc == KILN_OK && (epoch == 1 || epoch % 5 == 0))
      printf("epoch %2d  loss %.4f\n", epoch, sum / (N / BATCH));
  }

  /* Accuracy: predict 1 where the logit is > 0. */
  if (rc == KILN_OK) {
    kiln_no_grad_begin();
    kiln_tensor *pred = kiln_gt(kiln_linear(x, w, b), kiln_scalar(0, KILN_DTYPE_F32));
    kiln_tensor *hit = kiln_to_dtype(kiln_eq(pred, kiln_gt(y, half)), KILN_DTYPE_F32);
    kiln_tensor *mean = kiln_mean(hit, NULL, 0, false);
    rc = mean ? kiln_item(mean, &acc) : KILN_ERR_INVALID;
    kiln_no_grad_end();
  }
  if (rc == KILN_OK) printf("training accuracy %.3f\n", acc);
  else fprintf(stderr, "logreg: %s\n", kiln_last_error());

  kiln_scope_end(); /* releases x, y, w, b and the rest */
  kiln_generator_free(gen);
  return rc == KILN_OK && acc > 0.95 ? 0 : 1;
}
