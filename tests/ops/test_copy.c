/* tests/ops/test_copy.c: contiguous, clone, to (dtype), detach, zeros_like,
 * ones_like, copy_, fill_: values, aliasing, errors, and gradcheck samples. */
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3};

OP_SAMPLE(CONTIGUOUS, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_I(0);
  s->n_args = 2;
}
OP_SAMPLE(CLONE, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(TO, to_double) {
  /* float64 -> float64 copy (gradcheck works in float64) */
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->args[1] = OPV_I(7);
  s->args[2] = OPV_B(false);
  s->args[3] = OPV_B(true);
  s->args[4] = OPV_NONE;
  s->n_args = 5;
}

TEST(copy_contiguous_and_clone) {
  kiln_scope_begin();
  double v[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *a = kiln_from_data(v, 2, S23, KILN_DTYPE_F64);
  kiln_tensor *t = kiln_t(a);
  CHECK(!kiln_tensor_is_contiguous(t));
  kiln_tensor *c = kiln_contiguous(t);
  CHECK(kiln_tensor_is_contiguous(c));
  double want[6] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; i++) CHECK_NEAR(((double *)kiln_tensor_data(c))[i], want[i], 0);
  /* contiguous of a contiguous tensor shares its data; clone never does */
  CHECK(kiln_tensor_data(kiln_contiguous(a)) == kiln_tensor_data(a));
  kiln_tensor *k = kiln_clone(a);
  CHECK(kiln_tensor_data(k) != kiln_tensor_data(a));
  CHECK_NEAR(core_get_flat(k, 5), 6, 0);
  kiln_scope_end();
}

TEST(copy_to_dtype_and_detach) {
  kiln_scope_begin();
  double v[3] = {1.7, -2.2, 0};
  int64_t n = 3;
  kiln_tensor *a = kiln_from_data(v, 1, &n, KILN_DTYPE_F64);
  kiln_tensor *i = kiln_to_dtype(a, KILN_DTYPE_I64);
  CHECK(kiln_tensor_dtype(i) == KILN_DTYPE_I64);
  CHECK_EQ_INT(((int64_t *)kiln_tensor_data(i))[0], 1);
  CHECK_EQ_INT(((int64_t *)kiln_tensor_data(i))[1], -2);
  kiln_tensor *b = kiln_to_dtype(a, KILN_DTYPE_BOOL);
  CHECK(((bool *)kiln_tensor_data(b))[0] && !((bool *)kiln_tensor_data(b))[2]);
  kiln_tensor *f = kiln_to_dtype(a, KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(f, 0), 1.7f, 0);
  /* to the same dtype: the same data */
  CHECK(kiln_tensor_data(kiln_to_dtype(a, KILN_DTYPE_F64)) == kiln_tensor_data(a));
  kiln_set_requires_grad(a, true);
  kiln_tensor *d = kiln_detach(kiln_mul(a, a));
  CHECK(!kiln_requires_grad(d));
  CHECK(kiln_grad_fn_name(d) == NULL);
  /* gradient through to() comes back in the input's dtype */
  kiln_tensor *loss = kiln_sum(kiln_to_dtype(a, KILN_DTYPE_F32), NULL, 0, false);
  CHECK(kiln_backward(loss, NULL) == KILN_OK);
  CHECK(kiln_tensor_grad(a) && kiln_tensor_dtype(kiln_tensor_grad(a)) == KILN_DTYPE_F64);
  CHECK(kiln_to_dtype(a, KILN_DTYPE_COUNT) == NULL);
  kiln_scope_end();
}

TEST(copy_inplace_broadcast_and_errors) {
  kiln_scope_begin();
  kiln_tensor *dst = kiln_zeros(2, S23, KILN_DTYPE_F32);
  int64_t n3 = 3, n2 = 2;
  double row[3] = {1, 2, 3};
  kiln_tensor *src = kiln_from_data(row, 1, &n3, KILN_DTYPE_F64);
  CHECK(kiln_copy_(dst, src) == KILN_OK); /* broadcast + convert */
  CHECK_NEAR(core_get_flat(dst, 4), 2.0, 0);
  /* into a transposed view writes through to the base */
  kiln_tensor *base = kiln_zeros(2, S23, KILN_DTYPE_F64);
  kiln_tensor *tv = kiln_t(base);
  kiln_tensor *col = kiln_from_data((double[]){7, 8}, 1, &n2, KILN_DTYPE_F64);
  CHECK(kiln_copy_(tv, col) == KILN_OK);
  CHECK_NEAR(core_get_flat(base, 0), 7, 0);
  CHECK_NEAR(core_get_flat(base, 3), 8, 0);
  CHECK(kiln_copy_(dst, kiln_zeros(1, &n2, KILN_DTYPE_F32)) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot be broadcast");
  CHECK(kiln_fill_(dst, 0.5) == KILN_OK);
  CHECK_NEAR(core_get_flat(dst, 5), 0.5, 0);
  kiln_scope_end();
}

/* copy_ row by row (the broadcast bias of addmm, transposed views):
 * a [2, 1, 3] source into a [2, 4, 3] destination and into its transpose,
 * a column [4, 1] broadcast along the last dim, for 4- and 8-byte dtypes;
 * every element checked against its index arithmetic. */
TEST(copy_rows_strided_and_broadcast) {
  kiln_scope_begin();
  const kiln_dtype dts[3] = {KILN_DTYPE_F32, KILN_DTYPE_F64, KILN_DTYPE_I64};
  for (int k = 0; k < 3; k++) {
    kiln_tensor *src = kiln_view(kiln_arange(0, 6, 1, dts[k]), 3, (int64_t[]){2, 1, 3});
    kiln_tensor *dst = kiln_zeros(3, (int64_t[]){2, 4, 3}, dts[k]);
    CHECK(kiln_copy_(dst, src) == KILN_OK);
    for (int64_t i = 0; i < 24; i++) /* dst[a][b][c] = src[a][0][c] = 3a + c */
      CHECK_NEAR(core_get_flat(dst, i), 3 * (i / 12) + i % 3, 0);
    /* into a transposed view: base[c][a] = col[a][0] */
    kiln_tensor *base = kiln_zeros(2, (int64_t[]){3, 4}, dts[k]);
    kiln_tensor *col = kiln_view(kiln_arange(10, 14, 1, dts[k]), 2, (int64_t[]){4, 1});
    CHECK(kiln_copy_(kiln_t(base), col) == KILN_OK);
    for (int64_t i = 0; i < 12; i++) CHECK_NEAR(core_get_flat(base, i), 10 + i % 4, 0);
  }
  kiln_scope_end();
}

/* Float to int64 out of range (NaN, infinities, |x| >= 2^63) is undefined
 * in C; kiln gives INT64_MIN, as PyTorch on x86 does (measured:
 * torch.tensor([nan, inf, -inf, 1e30, -1e30, 3.7, -3.7, 9.3e18,
 * -9.3e18]).to(torch.int64)), through every conversion path: to(), the
 * elementwise driver's operand conversion and fill, and reductions. Found
 * by the run fuzzer (UBSan in store_any). */
TEST(copy_float_to_int64_out_of_range) {
  kiln_scope_begin();
  const double v[9] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, 3.7, -3.7, 9.3e18, -9.3e18};
  const int64_t want[9] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN,
                           3,         -3,        INT64_MIN, INT64_MIN};
  int64_t n = 9;
  for (int dt = 0; dt < 2; dt++) {
    kiln_tensor *a = kiln_to_dtype(kiln_from_data(v, 1, &n, KILN_DTYPE_F64),
                                   dt ? KILN_DTYPE_F32 : KILN_DTYPE_F64);
    kiln_tensor *i = kiln_to_dtype(a, KILN_DTYPE_I64);
    /* the driver converting an operand: int64 + float is float, so the
     * float operand is converted where an int64 result is asked for by
     * copy_ into an int64 tensor */
    kiln_tensor *z = kiln_zeros(1, &n, KILN_DTYPE_I64);
    CHECK(kiln_copy_(z, a) == KILN_OK);
    for (int k = 0; k < 9; k++) {
      CHECK_MSG(((int64_t *)kiln_tensor_data(i))[k] == want[k], "to: %g -> %lld", v[k],
                (long long)((int64_t *)kiln_tensor_data(i))[k]);
      CHECK_MSG(((int64_t *)kiln_tensor_data(z))[k] == want[k], "copy_: %g -> %lld", v[k],
                (long long)((int64_t *)kiln_tensor_data(z))[k]);
    }
  }
  kiln_scope_end();
}
