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
  kiln_tensor *y = op_call1(KILN_OP_RELU_, (op_val[]){OPV_T(x)}, 1);
  CHECK(y == x);
  CHECK_NEAR(core_get_flat(x, 1), 0, 0);
  kiln_tensor *w = kiln_clone(x);
  kiln_set_requires_grad(w, true);
  CHECK(op_call1(KILN_OP_RELU_, (op_val[]){OPV_T(w)}, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "in-place");
  kiln_scope_end();
}
