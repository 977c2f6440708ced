/* tests/ops/test_aliases.c: overloads and in-place variants TorchScript
 * prints: values, errors, and gradcheck samples. */
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S231[3] = {2, 3, 1}, S3[1] = {3};

OP_SAMPLE(RECIPROCAL, away_from_zero) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S23, 0.5, 2.0));
  s->n_args = 1;
}
OP_SAMPLE(SUM_ALL, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(MEAN_ALL, plain) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(MAX_ALL, distinct) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->n_args = 1;
}
OP_SAMPLE(SQUEEZE_ALL, trailing_one) {
  s->args[0] = OPV_T(sample_randn(g, 3, S231));
  s->n_args = 1;
}
OP_SAMPLE(FLATTEN, middle) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 2}));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_I(-1);
  s->n_args = 3;
}
OP_SAMPLE(BROADCAST_TENSORS, pair) {
  s->ints[0][0] = 0; /* unused: the list lives in the sample's scope */
  kiln_tensor **ts = (kiln_tensor **)kiln_tensor_data(kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_I64));
  ts[0] = sample_randn(g, 2, (int64_t[]){2, 1});
  ts[1] = sample_randn(g, 1, S3);
  s->args[0] = OPV_TS(ts, 2);
  s->n_args = 1;
}

TEST(aliases_values) {
  kiln_scope_begin();
  double v[6] = {1, -2, 3, -4, 5, 0.5};
  kiln_tensor *x = kiln_from_data(v, 2, S23, KILN_DTYPE_F64);
  kiln_tensor *s = op_call1(KILN_OP_SUM_ALL, (op_val[]){OPV_T(x), OPV_NONE}, 2);
  CHECK(s && kiln_tensor_ndim(s) == 0);
  CHECK_NEAR(core_get_flat(s, 0), 3.5, 1e-12);
  kiln_tensor *m = op_call1(KILN_OP_MAX_ALL, (op_val[]){OPV_T(x)}, 1);
  CHECK_NEAR(core_get_flat(m, 0), 5, 0);
  kiln_tensor *r = op_call1(KILN_OP_RECIPROCAL, (op_val[]){OPV_T(x)}, 1);
  CHECK_NEAR(core_get_flat(r, 5), 2.0, 0);
  kiln_tensor *f = op_call1(KILN_OP_FLATTEN, (op_val[]){OPV_T(x), OPV_I(0), OPV_I(-1)}, 3);
  CHECK(f && kiln_tensor_ndim(f) == 1 && kiln_tensor_size(f, 0) == 6);
  CHECK(op_call1(KILN_OP_FLATTEN, (op_val[]){OPV_T(x), OPV_I(1), OPV_I(0)}, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "start_dim");
  /* in place: x is modified and returned */
  kiln_tensor *y = op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(x)}, 1);
  CHECK(y == x);
  CHECK_NEAR(core_get_flat(x, 1), 0, 0);
  kiln_tensor *w = kiln_clone(x);
  kiln_set_requires_grad(w, true);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(w)}, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "in-place");
  kiln_scope_end();
}

/* add_/mul_ (Note [In place]): values written into self, broadcasting,
 * self's dtype kept, one pass when self is contiguous, the functional op
 * and a copy when another argument overlaps self differently, autograd
 * refused, lazy tensors recorded. Values computed by hand. */
TEST(aliases_add_mul_in_place) {
  kiln_scope_begin();
  double v[6] = {1, -2, 3, -4, 5, 0.5}, r[3] = {10, 20, 30};
  kiln_tensor *x = kiln_from_data(v, 2, S23, KILN_DTYPE_F64);
  kiln_tensor *row = kiln_from_data(r, 1, S3, KILN_DTYPE_F64);
  uint32_t ver = x->storage->version;
  const void *data = kiln_tensor_data(x);
  CHECK(kiln_add_(x, row, 0.5) == KILN_OK); /* x += 0.5 * [10, 20, 30] */
  double want[6] = {6, 8, 18, 1, 15, 15.5};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(x, i), want[i], 0);
  CHECK(kiln_tensor_data(x) == data && x->storage->version > ver);
  CHECK(kiln_mul_scalar_(x, 2.0) == KILN_OK);
  CHECK(kiln_mul_(x, x) == KILN_OK); /* the same view: elementwise, safe */
  CHECK_NEAR(core_get_flat(x, 0), 144, 0);
  CHECK_NEAR(core_get_flat(x, 5), 961, 0);
  /* other overlaps self shifted by one element: must read the old values */
  double w[4] = {1, 2, 3, 4};
  int64_t n4 = 4, n3 = 3;
  kiln_tensor *base = kiln_from_data(w, 1, &n4, KILN_DTYPE_F64);
  kiln_tensor *lo = kiln_narrow(base, 0, 0, 3), *hi = kiln_narrow(base, 0, 1, 3);
  CHECK(lo && hi && kiln_tensor_size(lo, 0) == n3);
  CHECK(kiln_add_(hi, lo, 1.0) == KILN_OK); /* [1, 2, 3, 4] -> [1, 3, 5, 7] */
  double wv[4] = {1, 3, 5, 7};
  for (int i = 0; i < 4; i++) CHECK_NEAR(core_get_flat(base, i), wv[i], 0);
  /* PyTorch's casting rule: an int64 self takes int results, not float
   * ones ("result type Float can't be cast to the desired output type
   * Long"); a float self takes an int64 other */
  int64_t iv[2] = {1, 2}, n2 = 2;
  kiln_tensor *xi = kiln_from_data(iv, 1, &n2, KILN_DTYPE_I64);
  CHECK(kiln_mul_(xi, xi) == KILN_OK);
  CHECK(kiln_tensor_dtype(xi) == KILN_DTYPE_I64);
  CHECK_NEAR(core_get_flat(xi, 1), 4, 0);
  CHECK(kiln_mul_scalar_(xi, 3.0) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "can't be cast to the desired output type");
  CHECK_NEAR(core_get_flat(xi, 1), 4, 0); /* untouched */
  kiln_tensor *xf = kiln_from_data((float[]){1, 2}, 1, &n2, KILN_DTYPE_F32);
  CHECK(kiln_add_(xf, xi, 2.0) == KILN_OK); /* torch: tensor([3., 10.]) */
  CHECK_NEAR(core_get_flat(xf, 0), 3, 0);
  CHECK_NEAR(core_get_flat(xf, 1), 10, 0);
  /* self cannot grow by broadcasting */
  CHECK(kiln_add_(row, x, 1.0) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "doesn't match the broadcast shape [2, 3]");
  /* autograd */
  kiln_tensor *p = kiln_clone(x);
  kiln_set_requires_grad(p, true);
  CHECK(kiln_mul_scalar_(p, 2.0) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "in-place");
  kiln_no_grad_begin();
  CHECK(kiln_mul_scalar_(p, 2.0) == KILN_OK);
  kiln_no_grad_end();
  CHECK_NEAR(core_get_flat(p, 0), 288, 0);
  /* lazy: recorded, then the same values */
  kiln_tensor *lz = kiln_to_lazy(kiln_from_data(v, 2, S23, KILN_DTYPE_F64));
  CHECK(kiln_add_(lz, kiln_to_lazy(row), 0.5) == KILN_OK);
  kiln_tensor *back = kiln_to_cpu(lz);
  for (int i = 0; back && i < 6; i++) CHECK_NEAR(core_get_flat(back, i), want[i], 0);
  kiln_scope_end();
}
