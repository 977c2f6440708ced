/* tests/ops/test_index.c: index_select, index_add, embedding, gather,
 * scatter_add: PyTorch golden values (golden_shape.h), non-contiguous
 * inputs, dtypes, errors (bad dtypes, shapes, out-of-range indices), and
 * samples for the table-driven gradcheck. */
#include "golden_shape.h"
#include "sample.h"
#include "test.h"

static const int64_t S34[2] = {3, 4};

/* ---- samples -------------------------------------------------------------- */

OP_SAMPLE(INDEX_SELECT, dim1_repeats) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_T(sample_index(g, 1, (int64_t[]){5}, 3));
  s->n_args = 3;
}
OP_SAMPLE(INDEX_SELECT, dim0) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){4, 2, 3}));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_T(sample_index(g, 1, (int64_t[]){3}, 4));
  s->n_args = 3;
}
OP_SAMPLE(INDEX_ADD, alpha) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(-1);
  s->args[2] = OPV_T(sample_index(g, 1, (int64_t[]){5}, 4));
  s->args[3] = OPV_T(sample_transposed(g, (int64_t[]){3, 5}));
  s->args[4] = OPV_F(-1.5);
  s->n_args = 5;
}
/* The padding row still appears in the forward but gets no gradient, so a
 * finite-difference check must not index it: indices stay below 4. The
 * padding row's zero gradient is checked against PyTorch below. */
OP_SAMPLE(EMBEDDING, padding) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){5, 3}));
  s->args[1] = OPV_T(sample_index(g, 2, (int64_t[]){2, 4}, 4));
  s->args[2] = OPV_I(4);
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_B(false);
  s->n_args = 5;
}
OP_SAMPLE(EMBEDDING, plain) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){4, 2}));
  s->args[1] = OPV_T(sample_index(g, 1, (int64_t[]){6}, 4));
  s->args[2] = OPV_I(-1);
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_B(false);
  s->n_args = 5;
}
OP_SAMPLE(GATHER, dim1) {
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_T(sample_index(g, 2, (int64_t[]){2, 6}, 4)); /* smaller in dim 0 */
  s->args[3] = OPV_B(false);
  s->n_args = 4;
}
OP_SAMPLE(GATHER, dim0_3d) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){3, 2, 3}));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_T(sample_index(g, 3, (int64_t[]){4, 2, 2}, 3));
  s->args[3] = OPV_B(false);
  s->n_args = 4;
}
OP_SAMPLE(SCATTER_ADD, src_larger) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_T(sample_index(g, 2, (int64_t[]){2, 3}, 3));
  s->args[3] = OPV_T(sample_transposed(g, (int64_t[]){3, 4})); /* [3, 4] > index [2, 3] */
  s->n_args = 4;
}
OP_SAMPLE(SCATTER_ADD, dim1) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){2, 5}));
  s->args[1] = OPV_I(-1);
  s->args[2] = OPV_T(sample_index(g, 2, (int64_t[]){2, 7}, 5));
  s->args[3] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 7}));
  s->n_args = 4;
}

/* ---- helpers ------------------------------------------------------------------ */

static kiln_tensor *x34(void) { return kiln_from_data(golden_x34, 2, S34, KILN_DTYPE_F64); }

static kiln_tensor *idx(const int64_t *v, int ndim, const int64_t *shape) {
  return kiln_from_data(v, ndim, shape, KILN_DTYPE_I64);
}

static void check_values(const kiln_tensor *t, const double *want, int64_t n, const char *what) {
  CHECK_MSG(t && kiln_tensor_numel(t) == n, "%s: wrong numel (%s)", what,
            t ? "" : kiln_last_error());
  for (int64_t i = 0; t && i < n && i < kiln_tensor_numel(t); i++)
    CHECK_MSG(core_get_flat(t, i) == want[i], "%s: element %lld: %g != %g", what, (long long)i,
              core_get_flat(t, i), want[i]);
}

/* ---- values ----------------------------------------------------------------------- */

TEST(index_select_values) {
  kiln_scope_begin();
  kiln_tensor *x = x34();
  kiln_tensor *r = kiln_index_select(x, 0, idx(golden_is_index, 1, (int64_t[]){3}));
  CHECK(r && r->shape[0] == 3 && r->shape[1] == 4);
  check_values(r, golden_index_select_d0, 12, "index_select dim 0");
  /* the same from a non-contiguous self: x = t(t(x)) copy laid out transposed */
  kiln_tensor *xt = kiln_t(kiln_contiguous(kiln_t(x)));
  CHECK(!kiln_tensor_is_contiguous(xt));
  r = kiln_index_select(xt, -1, idx(golden_is_index, 1, (int64_t[]){4}));
  CHECK(r && r->shape[0] == 3 && r->shape[1] == 4);
  check_values(r, golden_index_select_d1, 12, "index_select dim 1");
  /* 0-d index, 0-d self */
  int64_t one = 1;
  r = kiln_index_select(x, 1, idx(&one, 0, NULL));
  CHECK(r && r->ndim == 2 && r->shape[1] == 1);
  CHECK_NEAR(core_get_flat(r, 2), 6.0, 0);
  int64_t zero = 0;
  r = kiln_index_select(kiln_scalar(2.5, KILN_DTYPE_F32), 0, idx(&zero, 1, (int64_t[]){1}));
  CHECK(r && r->ndim == 0 && kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  /* int64 and bool self */
  kiln_tensor *bi = kiln_ge(x, kiln_scalar(1.0, KILN_DTYPE_F64));
  r = kiln_index_select(bi, 0, idx(golden_is_index, 1, (int64_t[]){3}));
  CHECK(r && kiln_tensor_dtype(r) == KILN_DTYPE_BOOL);
  if (r) CHECK_NEAR(core_get_flat(r, 1), 1.0, 0); /* x[2][1] = 6 */
  kiln_scope_end();
}

TEST(index_add_values) {
  kiln_scope_begin();
  kiln_tensor *src = kiln_from_data(golden_ia_src, 2, (int64_t[]){3, 3}, KILN_DTYPE_F64);
  kiln_tensor *r = kiln_t(src); /* transposed source: same values as t(t(src)) */
  r = op_call1(KILN_OP_INDEX_ADD,
               (op_val[]){OPV_T(x34()), OPV_I(1), OPV_T(idx(golden_ia_index, 1, (int64_t[]){3})),
                          OPV_T(kiln_t(kiln_contiguous(r))), OPV_I(-2)},
               5);
  check_values(r, golden_index_add, 12, "index_add alpha -2");
  kiln_tensor *xi = kiln_view(kiln_arange(0, 12, 1, KILN_DTYPE_I64), 2, S34);
  int64_t ii[2] = {1, 1};
  kiln_tensor *fives = kiln_full(2, (int64_t[]){2, 4}, 5, KILN_DTYPE_I64);
  r = op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(xi), OPV_I(0), OPV_T(idx(ii, 1, (int64_t[]){2})),
                                             OPV_T(fives), OPV_I(3)},
               5);
  CHECK(r && kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  for (int i = 0; r && i < 12; i++) CHECK_EQ_INT(((int64_t *)kiln_tensor_data(r))[i], golden_index_add_i64[i]);
  /* self is not modified */
  CHECK_NEAR(core_get_flat(xi, 4), 4, 0);
  kiln_scope_end();
}

TEST(index_gather_scatter_values) {
  kiln_scope_begin();
  kiln_tensor *x = x34();
  kiln_tensor *r = kiln_gather(x, 1, idx(golden_gather_index_d1, 2, (int64_t[]){3, 2}));
  CHECK(r && r->shape[0] == 3 && r->shape[1] == 2);
  check_values(r, golden_gather_d1, 6, "gather dim 1");
  kiln_tensor *xt = kiln_t(kiln_contiguous(kiln_t(x)));
  r = kiln_gather(xt, 0, idx(golden_gather_index_d0, 2, (int64_t[]){2, 4}));
  check_values(r, golden_gather_d0, 8, "gather dim 0, strided self");
  /* index smaller than self in the other dim */
  int64_t i2[2] = {3, 1};
  r = kiln_gather(x, 1, idx(i2, 2, (int64_t[]){1, 2}));
  CHECK(r && r->shape[0] == 1 && r->shape[1] == 2);
  if (r) CHECK(core_get_flat(r, 0) == 3.5 && core_get_flat(r, 1) == -1.0);

  kiln_tensor *src = kiln_from_data(golden_sa_src, 2, (int64_t[]){2, 4}, KILN_DTYPE_F64);
  r = op_call1(KILN_OP_SCATTER_ADD, (op_val[]){OPV_T(xt), OPV_I(0),
                                               OPV_T(idx(golden_sa_index, 2, (int64_t[]){2, 3})),
                                               OPV_T(src)},
               4);
  CHECK(r && r->shape[0] == 3 && r->shape[1] == 4);
  check_values(r, golden_scatter_add, 12, "scatter_add, src larger than index");
  check_values(x, golden_x34, 12, "self untouched");
  kiln_scope_end();
}

TEST(index_embedding_values_and_padding_grad) {
  kiln_scope_begin();
  kiln_tensor *w = x34();
  kiln_set_requires_grad(w, true);
  kiln_tensor *ix = idx(golden_emb_index, 2, (int64_t[]){2, 3});
  kiln_tensor *r = op_call1(KILN_OP_EMBEDDING, (op_val[]){OPV_T(w), OPV_T(ix), OPV_I(2),
                                                          OPV_B(false), OPV_B(false)},
                            5);
  CHECK(r && r->ndim == 3 && r->shape[0] == 2 && r->shape[1] == 3 && r->shape[2] == 4);
  check_values(r, golden_embedding, 24, "embedding");
  kiln_tensor *g = kiln_from_data(golden_emb_g, 3, (int64_t[]){2, 3, 4}, KILN_DTYPE_F64);
  CHECK(kiln_backward(r, g) == KILN_OK);
  check_values(kiln_tensor_grad(w), golden_embedding_grad_pad2, 12, "embedding grad, padding 2");
  /* public API: 0-d indices give one row */
  int64_t one = 1;
  r = kiln_embedding(kiln_detach(w), idx(&one, 0, NULL));
  CHECK(r && r->ndim == 1 && r->shape[0] == 4);
  if (r) CHECK_NEAR(core_get_flat(r, 0), 4.0, 0);
  kiln_scope_end();
}

/* ---- errors ---------------------------------------------------------------------------- */

TEST(index_errors) {
  kiln_scope_begin();
  kiln_tensor *x = x34();
  int64_t bad[2] = {1, 5}, neg[1] = {-1}, ok2[2] = {0, 1};
  kiln_tensor *fi = kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_F32);
  CHECK(kiln_index_select(x, 0, fi) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::index_select: index_select(): Expected dtype int64 for index, got Float[2]");
  CHECK(kiln_index_select(x, 0, idx(bad, 2, (int64_t[]){1, 2})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "Index is supposed to be a vector");
  CHECK(kiln_index_select(x, 0, idx(bad, 1, (int64_t[]){2})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::index_select: index 5 is out of bounds for dimension 0 with size 3");
  CHECK(kiln_index_select(x, 1, idx(neg, 1, (int64_t[]){1})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "index -1 is out of bounds for dimension 1 with size 4");
  CHECK(kiln_index_select(x, 2, idx(ok2, 1, (int64_t[]){2})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::index_select: dim 2 out of range");

  kiln_tensor *src = kiln_ones(2, (int64_t[]){2, 4}, KILN_DTYPE_F64);
  op_val ia[5] = {OPV_T(x), OPV_I(0), OPV_T(idx(bad, 1, (int64_t[]){2})), OPV_T(src), OPV_I(1)};
  CHECK(op_call1(KILN_OP_INDEX_ADD, ia, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::index_add: index 5 is out of bounds");
  ia[2] = OPV_T(idx(ok2, 1, (int64_t[]){1}));
  CHECK(op_call1(KILN_OP_INDEX_ADD, ia, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "Number of indices (1) should be equal to source.size(dim): (2), for dim: 0");
  ia[2] = OPV_T(idx(ok2, 1, (int64_t[]){2}));
  ia[3] = OPV_T(kiln_ones(2, (int64_t[]){2, 4}, KILN_DTYPE_F32));
  CHECK(op_call1(KILN_OP_INDEX_ADD, ia, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "self (Double[3, 4]) and source (Float[2, 4]) must have the same scalar type");
  ia[3] = OPV_T(kiln_ones(2, (int64_t[]){2, 3}, KILN_DTYPE_F64));
  CHECK(op_call1(KILN_OP_INDEX_ADD, ia, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "must have the same size in every dim but 0");
  kiln_tensor *xi = kiln_zeros(2, S34, KILN_DTYPE_I64);
  op_val ib[5] = {OPV_T(xi), OPV_I(0), OPV_T(idx(ok2, 1, (int64_t[]){2})),
                  OPV_T(kiln_zeros(2, (int64_t[]){2, 4}, KILN_DTYPE_I64)), OPV_F(0.5)};
  CHECK(op_call1(KILN_OP_INDEX_ADD, ib, 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "alpha must not be a floating point number");

  CHECK(kiln_gather(x, 1, idx(bad, 2, (int64_t[]){1, 2})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::gather: index 5 is out of bounds for dimension 1 with size 4");
  CHECK(kiln_gather(x, 1, idx(ok2, 1, (int64_t[]){2})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "Index tensor must have the same number of dimensions as input tensor");
  int64_t z8[8] = {0};
  CHECK(kiln_gather(x, 1, idx(z8, 2, (int64_t[]){4, 1})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "Size does not match at dimension 0 expected index [4, 1] to be smaller "
                     "than self [3, 4] apart from dimension 1");
  CHECK(kiln_gather(x, 1, kiln_zeros(2, (int64_t[]){1, 1}, KILN_DTYPE_BOOL)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "gather(): Expected dtype int64 for index, got Bool[1, 1]");

  op_val sa[4] = {OPV_T(x), OPV_I(0), OPV_T(idx(z8, 2, (int64_t[]){1, 3})),
                  OPV_T(kiln_ones(2, (int64_t[]){1, 2}, KILN_DTYPE_F64))};
  CHECK(op_call1(KILN_OP_SCATTER_ADD, sa, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "Expected index [1, 3] to be smaller than self [3, 4] apart from dimension "
                     "0 and to be smaller size than src [1, 2]");
  sa[3] = OPV_T(kiln_ones(2, (int64_t[]){1, 3}, KILN_DTYPE_F32));
  CHECK(op_call1(KILN_OP_SCATTER_ADD, sa, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "scatter(): Expected self.dtype to be equal to src.dtype");
  sa[2] = OPV_T(idx(bad, 2, (int64_t[]){1, 2}));
  sa[3] = OPV_T(kiln_ones(2, (int64_t[]){1, 2}, KILN_DTYPE_F64));
  CHECK(op_call1(KILN_OP_SCATTER_ADD, sa, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::scatter_add: index 5 is out of bounds for dimension 0 with size 3");

  CHECK(kiln_embedding(x, idx(bad, 1, (int64_t[]){2})) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::embedding: index 5 is out of bounds");
  CHECK_STR_CONTAINS(kiln_last_error(), "index out of range in self");
  CHECK(kiln_embedding(x, fi) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "Expected tensor for argument #1 'indices' to have one of the following "
                     "scalar types: Long; but got Float[2] instead");
  CHECK(kiln_embedding(kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32), idx(ok2, 1, (int64_t[]){2})) ==
        NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "'weight' must be 2-D, got Float[3]");
  CHECK(op_call1(KILN_OP_EMBEDDING, (op_val[]){OPV_T(x), OPV_T(idx(ok2, 1, (int64_t[]){2})),
                                               OPV_I(-1), OPV_B(true), OPV_B(false)},
                 5) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "scale_grad_by_freq=True is not supported");
  kiln_scope_end();
}

/* ---- gradients ------------------------------------------------------------------------------- */

TEST(index_select_grad_accumulates_repeats) {
  kiln_scope_begin();
  kiln_tensor *x = x34();
  kiln_set_requires_grad(x, true);
  kiln_tensor *r = kiln_index_select(x, 0, idx(golden_is_index, 1, (int64_t[]){4}));
  CHECK(kiln_backward(r, kiln_ones(2, (int64_t[]){4, 4}, KILN_DTYPE_F64)) == KILN_OK);
  kiln_tensor *gx = kiln_tensor_grad(x);
  double want[12] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2}; /* row 2 picked twice */
  check_values(gx, want, 12, "index_select grad");
  kiln_scope_end();
}

/* Double backward: gather's gradient scatter_add(zeros, g) is differentiable
 * in g with gradient gather(u). */
TEST(index_gather_double_backward) {
  kiln_scope_begin();
  kiln_tensor *x = x34();
  kiln_set_requires_grad(x, true);
  kiln_tensor *ix = idx(golden_gather_index_d1, 2, (int64_t[]){3, 2});
  kiln_tensor *out = kiln_gather(x, 1, ix);
  double vv[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *v = kiln_from_data(vv, 2, (int64_t[]){3, 2}, KILN_DTYPE_F64);
  kiln_set_requires_grad(v, true);
  kiln_tensor *gx = NULL;
  kiln_backward_opts o = {.create_graph = true};
  CHECK(kiln_grad(&out, &v, 1, &x, 1, &o, &gx) == KILN_OK);
  double want[12] = {2, 0, 0, 1, 0, 3 + 4, 0, 0, 5, 0, 6, 0};
  for (int i = 0; gx && i < 12; i++) CHECK_NEAR(core_get_flat(gx, i), want[i], 0);
  kiln_tensor *u = kiln_from_data(golden_x34, 2, S34, KILN_DTYPE_F64);
  kiln_tensor *gv = NULL;
  CHECK(gx && kiln_grad(&gx, &u, 1, &v, 1, NULL, &gv) == KILN_OK);
  check_values(gv, golden_gather_d1, 6, "d<scatter_add(v), u>/dv = gather(u)");
  kiln_scope_end();
}

/* Every allocation of the index kernels failing in turn (see
 * join_out_of_memory). */
TEST(index_out_of_memory) {
  kiln_tensor *xt = kiln_zeros(2, (int64_t[]){4, 3}, KILN_DTYPE_F64);
  kiln_tensor *x = kiln_t(xt); /* [3, 4] non-contiguous */
  int64_t iv[6] = {0, 2, 1, 1, 0, 3};
  kiln_tensor *ix1 = kiln_from_data(iv, 1, (int64_t[]){3}, KILN_DTYPE_I64);
  kiln_tensor *ix2 = kiln_from_data(iv, 2, (int64_t[]){3, 2}, KILN_DTYPE_I64);
  kiln_tensor *src = kiln_ones(2, (int64_t[]){3, 4}, KILN_DTYPE_F64);
  int failures = 0;
  for (int op = 0; op < 5; op++)
    for (long k = 1;; k++) {
      core_alloc_fail_at(k);
      kiln_tensor *r = NULL;
      if (op == 0) r = kiln_index_select(x, 1, ix1);
      else if (op == 1) r = kiln_gather(x, 1, ix2);
      else if (op == 2) r = kiln_embedding(x, ix2);
      else if (op == 3)
        r = op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(x), OPV_I(0), OPV_T(ix1), OPV_T(src),
                                                   OPV_I(1)},
                     5);
      else
        r = op_call1(KILN_OP_SCATTER_ADD, (op_val[]){OPV_T(x), OPV_I(1), OPV_T(ix2), OPV_T(src)},
                     4);
      long made = core_alloc_fail_at(0);
      if (!r) failures++;
      kiln_release(r);
      if (made < k) break;
    }
  CHECK(failures > 0);
  kiln_release(src);
  kiln_release(ix2);
  kiln_release(ix1);
  kiln_release(x);
  kiln_release(xt);
}
