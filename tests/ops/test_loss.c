/* tests/ops/test_loss.c: nll_loss, cross_entropy, mse_loss: PyTorch golden
 * values and gradients, ignore_index, errors, and gradcheck samples. */
#include "golden_reduce.h"
#include "sample.h"
#include "test.h"

static const int64_t S43[2] = {4, 3}, S4[1] = {4}, S34[2] = {3, 4};

OP_SAMPLE(NLL_LOSS, mean) {
  s->args[0] = OPV_T(sample_randn(g, 2, S43));
  s->args[1] = OPV_T(sample_index(g, 1, S4, 3));
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(1);
  s->args[4] = OPV_I(-100);
  s->n_args = 5;
}
OP_SAMPLE(NLL_LOSS, none_ignore) {
  kiln_tensor *t = kiln_from_data((int64_t[]){2, 0, 1, 0}, 1, S4, KILN_DTYPE_I64);
  s->args[0] = OPV_T(sample_transposed(g, S43));
  s->args[1] = OPV_T(t);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(0);
  s->args[4] = OPV_I(0);
  s->n_args = 5;
}
OP_SAMPLE(NLL_LOSS, sum_1d) {
  s->args[0] = OPV_T(sample_randn(g, 1, S4));
  s->args[1] = OPV_T(kiln_scalar(2, KILN_DTYPE_I64));
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(2);
  s->args[4] = OPV_I(-100);
  s->n_args = 5;
}
OP_SAMPLE(NLL_LOSS, mean_ignore) {
  kiln_tensor *t = kiln_from_data((int64_t[]){1, 1, 2, 0}, 1, S4, KILN_DTYPE_I64);
  s->args[0] = OPV_T(sample_randn(g, 2, S43));
  s->args[1] = OPV_T(t);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(1);
  s->args[4] = OPV_I(1);
  s->n_args = 5;
}
OP_SAMPLE(CROSS_ENTROPY, mean) {
  s->args[0] = OPV_T(sample_randn(g, 2, S43));
  s->args[1] = OPV_T(sample_index(g, 1, S4, 3));
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(1);
  s->args[4] = OPV_I(-100);
  s->args[5] = OPV_F(0.0);
  s->n_args = 6;
}
OP_SAMPLE(CROSS_ENTROPY, none_transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S43));
  s->args[1] = OPV_T(sample_index(g, 1, S4, 3));
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(0);
  s->args[4] = OPV_I(-100);
  s->args[5] = OPV_F(0.0);
  s->n_args = 6;
}
OP_SAMPLE(CROSS_ENTROPY, sum_1d) {
  s->args[0] = OPV_T(sample_randn(g, 1, S4));
  s->args[1] = OPV_T(kiln_scalar(3, KILN_DTYPE_I64));
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(2);
  s->args[4] = OPV_I(-100);
  s->args[5] = OPV_F(0.0);
  s->n_args = 6;
}
OP_SAMPLE(MSE_LOSS, mean) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 2, S34));
  s->args[2] = OPV_I(1);
  s->n_args = 3;
}
OP_SAMPLE(MSE_LOSS, none_transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_T(sample_randn(g, 2, S34));
  s->args[2] = OPV_I(0);
  s->n_args = 3;
}
OP_SAMPLE(MSE_LOSS, sum) {
  s->args[0] = OPV_T(sample_randn(g, 1, S4));
  s->args[1] = OPV_T(sample_randn(g, 1, S4));
  s->args[2] = OPV_I(2);
  s->n_args = 3;
}

static kiln_tensor *run_loss(const golden_loss_case *k, kiln_tensor *x, kiln_tensor *t) {
  op_val args[6];
  switch (k->kind) {
  case 0:
    args[0] = OPV_T(x), args[1] = OPV_T(t), args[2] = OPV_NONE;
    args[3] = OPV_I(k->reduction), args[4] = OPV_I(k->ignore_index);
    return op_call1(KILN_OP_NLL_LOSS, args, 5);
  case 1:
    args[0] = OPV_T(x), args[1] = OPV_T(t), args[2] = OPV_NONE;
    args[3] = OPV_I(k->reduction), args[4] = OPV_I(k->ignore_index), args[5] = OPV_F(0);
    return op_call1(KILN_OP_CROSS_ENTROPY, args, 6);
  default:
    return kiln_mse_loss(x, t, (kiln_reduction)k->reduction);
  }
}

TEST(loss_golden) {
  kiln_scope_begin();
  for (int c = 0; c < GOLDEN_LOSS_N; c++) {
    const golden_loss_case *k = &golden_loss[c];
    kiln_tensor *x = kiln_from_data(k->x, k->ndim, k->shape, KILN_DTYPE_F64);
    kiln_tensor *t = kiln_from_data(k->t, k->kind == 2 ? k->ndim : k->t_ndim, k->shape,
                                    KILN_DTYPE_F64);
    if (k->kind != 2) t = kiln_to_dtype(t, KILN_DTYPE_I64);
    kiln_set_requires_grad(x, true);
    kiln_tensor *y = run_loss(k, x, t);
    sample_check_vals(k->name, y, k->y, k->n_y, 1e-12);
    if (!y) continue;
    kiln_tensor *gy = kiln_from_data(k->g, y->ndim, y->shape, KILN_DTYPE_F64);
    kiln_tensor *gx = NULL;
    CHECK(kiln_grad(&y, &gy, 1, &x, 1, NULL, &gx) == KILN_OK);
    sample_check_vals(k->name, gx, k->gx, kiln_tensor_numel(x), 1e-12);
  }
  kiln_scope_end();
}

TEST(loss_values_by_hand) {
  kiln_scope_begin();
  /* nll: -logp[target], ignored rows count neither in the sum nor the mean */
  float lp[6] = {-1, -2, -3, -4, -5, -6};
  kiln_tensor *x = kiln_from_data(lp, 2, (int64_t[]){2, 3}, KILN_DTYPE_F32);
  kiln_tensor *t = kiln_from_data((int64_t[]){2, -100}, 1, (int64_t[]){2}, KILN_DTYPE_I64);
  double m3[1] = {3}, none[2] = {3, 0};
  sample_check_vals("nll mean ignore", kiln_nll_loss(x, t, KILN_REDUCTION_MEAN), m3, 1, 0);
  sample_check_vals("nll none ignore", kiln_nll_loss(x, t, KILN_REDUCTION_NONE), none, 2, 0);
  kiln_tensor *t2 = kiln_from_data((int64_t[]){0, 1}, 1, (int64_t[]){2}, KILN_DTYPE_I64);
  double s6[1] = {6}, m35[1] = {3};
  sample_check_vals("nll sum", kiln_nll_loss(x, t2, KILN_REDUCTION_SUM), s6, 1, 0);
  sample_check_vals("nll mean", kiln_nll_loss(x, t2, KILN_REDUCTION_MEAN), m35, 1, 0);
  kiln_tensor *l = kiln_nll_loss(x, t2, KILN_REDUCTION_MEAN);
  CHECK(l && kiln_tensor_dtype(l) == KILN_DTYPE_F32 && kiln_tensor_ndim(l) == 0);
  /* all targets ignored: mean is NaN (0/0), as in PyTorch */
  kiln_tensor *tall = kiln_full(1, (int64_t[]){2}, -100, KILN_DTYPE_I64);
  double nan1[1] = {NAN};
  sample_check_vals("nll all ignored", kiln_nll_loss(x, tall, KILN_REDUCTION_MEAN), nan1, 1, 0);
  /* cross entropy of uniform logits is log(C) */
  kiln_tensor *u = kiln_zeros(2, (int64_t[]){5, 7}, KILN_DTYPE_F32);
  kiln_tensor *tu = kiln_from_data((int64_t[]){0, 6, 3, 2, 1}, 1, (int64_t[]){5}, KILN_DTYPE_I64);
  double l7[1] = {log(7.0)};
  sample_check_vals("ce uniform", kiln_cross_entropy(u, tu, KILN_REDUCTION_MEAN), l7, 1, 1e-6);
  /* mse */
  double a[3] = {1, 2, 3}, b[3] = {1, 0, 6};
  kiln_tensor *ta = kiln_from_data(a, 1, (int64_t[]){3}, KILN_DTYPE_F64);
  kiln_tensor *tb = kiln_from_data(b, 1, (int64_t[]){3}, KILN_DTYPE_F64);
  double mse_m[1] = {13.0 / 3}, mse_s[1] = {13}, mse_n[3] = {0, 4, 9};
  sample_check_vals("mse mean", kiln_mse_loss(ta, tb, KILN_REDUCTION_MEAN), mse_m, 1, 1e-15);
  sample_check_vals("mse sum", kiln_mse_loss(ta, tb, KILN_REDUCTION_SUM), mse_s, 1, 0);
  sample_check_vals("mse none", kiln_mse_loss(ta, tb, KILN_REDUCTION_NONE), mse_n, 3, 0);
  kiln_scope_end();
}

TEST(loss_errors) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_zeros(2, S43, KILN_DTYPE_F32);
  kiln_tensor *t = kiln_from_data((int64_t[]){0, 1, 3, 2}, 1, S4, KILN_DTYPE_I64);
  CHECK(kiln_nll_loss(x, t, KILN_REDUCTION_MEAN) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::nll_loss_nd: target 3 is out of bounds for 3 classes");
  kiln_tensor *tn = kiln_from_data((int64_t[]){0, -1, 1, 2}, 1, S4, KILN_DTYPE_I64);
  CHECK(kiln_cross_entropy(x, tn, KILN_REDUCTION_SUM) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "target -1 is out of bounds");
  kiln_tensor *t3 = kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_I64);
  CHECK(kiln_nll_loss(x, t3, KILN_REDUCTION_MEAN) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected a target of shape [4]");
  kiln_tensor *tf = kiln_zeros(1, S4, KILN_DTYPE_F32);
  CHECK(kiln_cross_entropy(x, tf, KILN_REDUCTION_MEAN) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected a target of dtype Long, got Float[4]");
  kiln_tensor *ok = kiln_zeros(1, S4, KILN_DTYPE_I64);
  kiln_tensor *w = kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32);
  CHECK(op_call1(KILN_OP_NLL_LOSS, (op_val[]){OPV_T(x), OPV_T(ok), OPV_T(w), OPV_I(1), OPV_I(-100)}, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "class weights are not supported");
  CHECK(op_call1(KILN_OP_CROSS_ENTROPY, (op_val[]){OPV_T(x), OPV_T(ok), OPV_NONE, OPV_I(1), OPV_I(-100), OPV_F(0.1)}, 6) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::cross_entropy_loss: label_smoothing=0.1 is not supported");
  CHECK(op_call1(KILN_OP_NLL_LOSS, (op_val[]){OPV_T(x), OPV_T(ok), OPV_NONE, OPV_I(3), OPV_I(-100)}, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "reduction must be 0 (none), 1 (mean) or 2 (sum), got 3");
  CHECK(kiln_mse_loss(x, x, (kiln_reduction)5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mse_loss: reduction must be");
  kiln_tensor *x3 = kiln_zeros(3, (int64_t[]){2, 3, 4}, KILN_DTYPE_F32);
  CHECK(kiln_cross_entropy(x3, ok, KILN_REDUCTION_MEAN) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "only [N, C] or [C] inputs are supported");
  CHECK(kiln_mse_loss(x, kiln_zeros(1, (int64_t[]){4}, KILN_DTYPE_F32), KILN_REDUCTION_MEAN) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot be broadcast");
  kiln_scope_end();
}

/* Outside any scope the decompositions leak nothing (checked under ASan). */
TEST(loss_no_scope_ownership) {
  double v[12] = {0};
  kiln_tensor *x = kiln_from_data(v, 2, S43, KILN_DTYPE_F64);
  kiln_tensor *t = kiln_zeros(1, S4, KILN_DTYPE_I64);
  kiln_set_requires_grad(x, true);
  kiln_tensor *l = kiln_cross_entropy(x, t, KILN_REDUCTION_MEAN);
  CHECK(l != NULL);
  if (l) CHECK(kiln_backward(l, NULL) == KILN_OK);
  kiln_tensor *gx = kiln_tensor_grad(x);
  CHECK(gx != NULL);
  if (gx) CHECK_NEAR(core_get_flat(gx, 0), (1.0 / 3 - 1) / 4, 1e-12);
  kiln_tensor *m = kiln_mse_loss(x, x, KILN_REDUCTION_SUM);
  CHECK(m != NULL);
  kiln_release(m);
  kiln_release(l);
  kiln_release(t);
  kiln_release(x);
}
