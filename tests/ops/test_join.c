/* tests/ops/test_join.c: cat, stack, chunk, split, unbind: values (with type
 * promotion and non-contiguous inputs), PyTorch's piece sizes, errors,
 * gradients (including pieces without a gradient), and samples. */
#include "golden_shape.h"
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S22[2] = {2, 2};

/* ---- samples ------------------------------------------------------------- */
/* Tensor lists live in static arrays: a sample's args must outlive the
 * sample function, and the checks run one sample at a time. */

OP_SAMPLE(CAT, dim1_mixed_layouts) {
  static kiln_tensor *ts[4];
  ts[0] = sample_randn(g, 2, S23);
  ts[1] = sample_transposed(g, S22);
  ts[2] = sample_randn(g, 1, (int64_t[]){0}); /* legacy empty: skipped */
  ts[3] = sample_randn(g, 2, (int64_t[]){2, 1});
  s->args[0] = OPV_TS(ts, 4);
  s->args[1] = OPV_I(-1);
  s->n_args = 2;
}
OP_SAMPLE(CAT, dim0) {
  static kiln_tensor *ts[4];
  ts[0] = sample_randn(g, 3, (int64_t[]){1, 2, 3});
  ts[1] = sample_randn(g, 3, (int64_t[]){3, 2, 3});
  s->args[0] = OPV_TS(ts, 2);
  s->args[1] = OPV_I(0);
  s->n_args = 2;
}
OP_SAMPLE(STACK, middle) {
  static kiln_tensor *ts[4];
  ts[0] = sample_randn(g, 2, S23);
  ts[1] = sample_transposed(g, S23);
  ts[2] = sample_randn(g, 2, S23);
  s->args[0] = OPV_TS(ts, 3);
  s->args[1] = OPV_I(1);
  s->n_args = 2;
}
OP_SAMPLE(STACK, last) {
  static kiln_tensor *ts[4];
  ts[0] = sample_randn(g, 1, (int64_t[]){4});
  ts[1] = sample_randn(g, 1, (int64_t[]){4});
  s->args[0] = OPV_TS(ts, 2);
  s->args[1] = OPV_I(-1);
  s->n_args = 2;
}
OP_SAMPLE(CHUNK, uneven) { /* 7 rows in chunks of 3: 3, 3, 1 */
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){7, 2}));
  s->args[1] = OPV_I(3);
  s->args[2] = OPV_I(0);
  s->n_args = 3;
}
OP_SAMPLE(CHUNK, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){3, 6}));
  s->args[1] = OPV_I(4); /* 6 columns: pieces of 2 -> only 3 pieces */
  s->args[2] = OPV_I(-1);
  s->n_args = 3;
}
OP_SAMPLE(SPLIT, uneven) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 5}));
  s->args[1] = OPV_I(2);
  s->args[2] = OPV_I(1);
  s->n_args = 3;
}

OP_SAMPLE(UNBIND, middle_transposed) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){4, 3}));
  s->args[1] = OPV_I(1);
  s->n_args = 2;
}
OP_SAMPLE(UNBIND, first_3d) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){3, 2, 2}));
  s->args[1] = OPV_I(0);
  s->n_args = 2;
}

/* ---- helpers ---------------------------------------------------------------- */

static kiln_tensor *iota(int ndim, const int64_t *shape, kiln_dtype dt) {
  int64_t n = core_numel(ndim, shape);
  return kiln_view(kiln_arange(0, (double)n, 1, dt), ndim, shape);
}

static void check_values(const kiln_tensor *t, const double *want, int64_t n, const char *what) {
  CHECK_MSG(t && kiln_tensor_numel(t) == n, "%s: wrong numel", what);
  for (int64_t i = 0; t && i < n && i < kiln_tensor_numel(t); i++)
    CHECK_MSG(core_get_flat(t, i) == want[i], "%s: element %lld: %g != %g", what, (long long)i,
              core_get_flat(t, i), want[i]);
}

/* ---- cat / stack ---------------------------------------------------------------- */

TEST(join_cat_promotion_and_layouts) {
  kiln_scope_begin();
  kiln_tensor *a = iota(2, S23, KILN_DTYPE_F32);
  int64_t bv[4] = {10, 11, 12, 13};
  kiln_tensor *b = kiln_from_data(bv, 2, S22, KILN_DTYPE_I64);
  CHECK(kiln_tensor_dtype(b) == KILN_DTYPE_I64);
  kiln_tensor *r = kiln_cat((kiln_tensor *[]){a, b}, 2, 1);
  CHECK(r && kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK(r && r->ndim == 2 && r->shape[0] == 2 && r->shape[1] == 5);
  check_values(r, golden_cat_f32_i64, 10, "cat f32/i64");
  /* bool + int64 -> int64; the legacy empty [0] takes part in promotion */
  kiln_tensor *bb = kiln_ones(2, S22, KILN_DTYPE_BOOL);
  kiln_tensor *e64 = kiln_zeros(1, (int64_t[]){0}, KILN_DTYPE_F64);
  r = kiln_cat((kiln_tensor *[]){bb, e64, b}, 3, 0);
  CHECK(r && kiln_tensor_dtype(r) == KILN_DTYPE_F64 && r->shape[0] == 4);
  double want_b[8] = {1, 1, 1, 1, 10, 11, 12, 13};
  check_values(r, want_b, 8, "cat bool/empty/i64");
  /* stack of f32 and a transposed f64 along a new last dim */
  kiln_tensor *c = kiln_t(iota(2, (int64_t[]){3, 2}, KILN_DTYPE_F64));
  r = kiln_stack((kiln_tensor *[]){a, c}, 2, 2);
  CHECK(r && (int)kiln_tensor_dtype(r) == GOLDEN_STACK_D2_DTYPE);
  CHECK(r && r->ndim == 3 && r->shape[0] == 2 && r->shape[1] == 3 && r->shape[2] == 2);
  check_values(r, golden_stack_d2, 12, "stack dim 2");
  /* stack along dim 0 of 0-d tensors */
  r = kiln_stack((kiln_tensor *[]){kiln_scalar(1, KILN_DTYPE_I64), kiln_scalar(2, KILN_DTYPE_I64)},
                 2, 0);
  CHECK(r && r->ndim == 1 && r->shape[0] == 2 && kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  /* only empties */
  r = kiln_cat((kiln_tensor *[]){e64, e64}, 2, 0);
  CHECK(r && r->ndim == 1 && r->shape[0] == 0);
  kiln_scope_end();
}

TEST(join_cat_large_parallel) {
  kiln_scope_begin();
  int64_t sa[2] = {300, 200}, sb[2] = {300, 57};
  kiln_tensor *a = iota(2, sa, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_t(iota(2, (int64_t[]){57, 300}, KILN_DTYPE_F32));
  CHECK(b && b->shape[0] == sb[0] && b->shape[1] == sb[1]);
  kiln_tensor *r = kiln_cat((kiln_tensor *[]){a, b}, 2, 1);
  CHECK(r && r->shape[1] == 257);
  const float *p = r ? kiln_tensor_data(r) : NULL;
  int bad = 0;
  for (int64_t i = 0; p && i < 300; i++)
    for (int64_t j = 0; j < 257; j++) {
      float want = j < 200 ? (float)(i * 200 + j) : (float)((j - 200) * 300 + i);
      bad += p[i * 257 + j] != want;
    }
  CHECK_EQ_INT(bad, 0);
  kiln_scope_end();
}

TEST(join_errors) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_zeros(2, S23, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_zeros(2, (int64_t[]){3, 3}, KILN_DTYPE_F32);
  CHECK(kiln_cat((kiln_tensor *[]){a, b}, 2, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::cat: Sizes of tensors must match except in dimension 1. Expected "
                     "size 2 but got size 3 for tensor number 1 in the list");
  CHECK(kiln_cat((kiln_tensor *[]){a, kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F32)}, 2, 0) ==
        NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "Tensors must have same number of dimensions: got 2 and 1");
  CHECK(kiln_cat((kiln_tensor *[]){a, kiln_scalar(1, KILN_DTYPE_F32)}, 2, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "zero-dimensional tensor (at position 1) cannot be concatenated");
  CHECK(kiln_cat(NULL, 0, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected a non-empty list of Tensors");
  CHECK(kiln_cat((kiln_tensor *[]){a, a}, 2, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::cat: dim 2 out of range");
  CHECK(kiln_stack((kiln_tensor *[]){a, kiln_t(a)}, 2, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "stack expects each tensor to be equal size, but got [2, 3] at entry 0 "
                     "and [3, 2] at entry 1");
  CHECK(kiln_stack(NULL, 0, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "stack expects a non-empty TensorList");
  CHECK(kiln_stack((kiln_tensor *[]){a, a}, 2, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::stack: dim 3 out of range");
  CHECK(kiln_cat((kiln_tensor *[]){a, NULL}, 2, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "NULL");

  kiln_tensor *outs[8];
  CHECK(kiln_chunk(a, 0, 0, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "chunk expects `chunks` to be greater than 0, got: 0");
  CHECK(kiln_split(a, 0, 1, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "split_size can only be 0 if dimension size is 0, but got dimension size of 3");
  CHECK(kiln_split(a, -1, 1, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "split expects split_size be non-negative, but got split_size=-1");
  CHECK(kiln_chunk(kiln_scalar(1, KILN_DTYPE_F32), 2, 0, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "chunk expects at least a 1-dimensional tensor");
  CHECK(kiln_split(kiln_zeros(1, (int64_t[]){10}, KILN_DTYPE_F32), 1, 0, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "split would make 10 pieces, but there is room for only 8");
  CHECK(kiln_chunk(a, 2, 2, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::chunk: dim 2 out of range");
  kiln_scope_end();
}

/* ---- chunk / split --------------------------------------------------------------------- */

TEST(join_chunk_split_pieces) {
  kiln_scope_begin();
  kiln_tensor *outs[8];
  kiln_tensor *x = iota(1, (int64_t[]){6}, KILN_DTYPE_F64);
  int n = kiln_chunk(x, 4, 0, outs, 8); /* PyTorch: 3 pieces of 2 */
  CHECK_EQ_INT(n, 3);
  for (int i = 0; i < n; i++) {
    CHECK(outs[i]->shape[0] == 2 && outs[i]->storage == x->storage);
    CHECK_NEAR(core_get_flat(outs[i], 1), 2 * i + 1, 0);
  }
  kiln_tensor *m = iota(2, (int64_t[]){3, 5}, KILN_DTYPE_F64);
  n = kiln_split(m, 2, -1, outs, 8); /* 2, 2, 1 columns */
  CHECK_EQ_INT(n, 3);
  int64_t want_w[3] = {2, 2, 1};
  for (int i = 0; i < n; i++) {
    CHECK(outs[i]->ndim == 2 && outs[i]->shape[0] == 3 && outs[i]->shape[1] == want_w[i]);
    CHECK_EQ_INT(kiln_tensor_offset(outs[i]), 2 * i);
    CHECK(outs[i]->strides[0] == 5 && outs[i]->strides[1] == 1);
  }
  CHECK_NEAR(core_get_flat(outs[2], 2), 14, 0);
  n = kiln_chunk(m, 1, 0, outs, 8);
  CHECK(n == 1 && outs[0]->shape[0] == 3);
  n = kiln_split(m, 10, 0, outs, 8); /* bigger than the dim: one piece */
  CHECK(n == 1 && outs[0]->shape[0] == 3);
  /* empty dims: chunk gives `chunks` empty pieces, split gives one */
  kiln_tensor *e = kiln_zeros(2, (int64_t[]){0, 2}, KILN_DTYPE_F32);
  n = kiln_chunk(e, 3, 0, outs, 8);
  CHECK_EQ_INT(n, 3);
  for (int i = 0; i < n; i++) CHECK(outs[i]->shape[0] == 0 && outs[i]->shape[1] == 2);
  CHECK_EQ_INT(kiln_split(e, 0, 0, outs, 8), 1);
  CHECK_EQ_INT(kiln_split(e, 4, 0, outs, 8), 1);
  kiln_scope_end();
}

TEST(join_unbind_views_and_grad) {
  kiln_scope_begin();
  kiln_tensor *outs[8];
  kiln_tensor *m = iota(2, (int64_t[]){3, 4}, KILN_DTYPE_F64);
  kiln_set_requires_grad(m, true);
  int n = kiln_unbind(m, -1, outs, 8); /* columns: [0 4 8], [1 5 9], ... */
  CHECK_EQ_INT(n, 4);
  for (int i = 0; i < n; i++) {
    CHECK(outs[i]->ndim == 1 && outs[i]->shape[0] == 3 && outs[i]->storage == m->storage);
    CHECK_NEAR(core_get_flat(outs[i], 2), 8 + i, 0);
  }
  /* columns 1 and 3 used (3 twice), 0 and 2 get no gradient: zeros */
  kiln_tensor *loss = kiln_sum(kiln_add(kiln_mul_scalar(outs[1], 2.0), kiln_mul(outs[3], outs[3])),
                               NULL, 0, false);
  CHECK(kiln_backward(loss, NULL) == KILN_OK);
  double want[12] = {0, 2, 0, 6, 0, 2, 0, 14, 0, 2, 0, 22};
  check_values(kiln_tensor_grad(m), want, 12, "unbind grad");
  CHECK(kiln_unbind(m, 2, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::unbind: dim 2 out of range");
  CHECK(kiln_unbind(kiln_scalar(1, KILN_DTYPE_F32), 0, outs, 8) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "tensor has no dimensions");
  CHECK(kiln_unbind(m, 0, outs, 2) < 0); /* 3 pieces, room for 2 */
  CHECK_STR_CONTAINS(kiln_last_error(), "room for only 2");
  kiln_tensor *e = kiln_zeros(2, (int64_t[]){0, 2}, KILN_DTYPE_F32);
  CHECK_EQ_INT(kiln_unbind(e, 0, outs, 8), 0);
  /* lazy: recorded as one node with a list of outputs, the same values */
  kiln_tensor *lz = kiln_to_lazy(iota(2, (int64_t[]){3, 4}, KILN_DTYPE_F64));
  n = lz ? kiln_unbind(lz, 1, outs, 8) : -1;
  CHECK_EQ_INT(n, 4);
  for (int i = 0; i < n; i++) {
    kiln_tensor *col = kiln_to_cpu(outs[i]);
    CHECK(col && kiln_tensor_ndim(col) == 1 && kiln_tensor_size(col, 0) == 3);
    for (int r = 0; col && r < 3; r++) CHECK_NEAR(core_get_flat(col, r), 4 * r + i, 0);
  }
  kiln_scope_end();
}

/* ---- gradients ----------------------------------------------------------------------------- */

TEST(join_chunk_grad_with_missing_pieces) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, (int64_t[]){5, 2}, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_tensor *outs[4];
  int n = kiln_chunk(x, 3, 0, outs, 4); /* rows 2, 2, 1 */
  CHECK_EQ_INT(n, 3);
  CHECK(kiln_requires_grad(outs[1]));
  kiln_tensor *g = kiln_full(2, (int64_t[]){2, 2}, 3.0, KILN_DTYPE_F64);
  CHECK(kiln_backward(outs[1], g) == KILN_OK); /* pieces 0 and 2 get no gradient */
  double want[10] = {0, 0, 0, 0, 3, 3, 3, 3, 0, 0};
  check_values(kiln_tensor_grad(x), want, 10, "chunk grad");
  kiln_scope_end();
}

TEST(join_cat_grad_dtypes) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_ones(2, S22, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_ones(2, (int64_t[]){1, 2}, KILN_DTYPE_F64);
  kiln_set_requires_grad(a, true);
  kiln_set_requires_grad(b, true);
  kiln_tensor *r = kiln_cat((kiln_tensor *[]){a, b}, 2, 0);
  CHECK(r && kiln_tensor_dtype(r) == KILN_DTYPE_F64);
  double gv[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *g = kiln_from_data(gv, 2, (int64_t[]){3, 2}, KILN_DTYPE_F64);
  CHECK(kiln_backward(r, g) == KILN_OK);
  kiln_tensor *ga = kiln_tensor_grad(a), *gb = kiln_tensor_grad(b);
  CHECK(ga && kiln_tensor_dtype(ga) == KILN_DTYPE_F32); /* gradients come back in each input's dtype */
  check_values(ga, gv, 4, "cat grad a");
  check_values(gb, gv + 4, 2, "cat grad b");
  kiln_scope_end();
}

/* Every allocation of cat/stack/split/reshape failing in turn: a clean
 * NULL (or negative count) with the error set, no leak, no crash (run
 * under SAN=1). Outside any scope, so results are released by hand. */
TEST(join_out_of_memory) {
  kiln_tensor *a = kiln_ones(2, S23, KILN_DTYPE_F32);
  kiln_tensor *bt = kiln_zeros(2, (int64_t[]){3, 2}, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_t(bt); /* [2, 3], non-contiguous, another dtype */
  kiln_tensor *outs[4];
  int failures = 0;
  for (int op = 0; op < 4; op++) {
    for (long k = 1;; k++) {
      core_alloc_fail_at(k);
      kiln_tensor *r = NULL;
      int n = 1;
      if (op == 0) r = kiln_cat((kiln_tensor *[]){a, b}, 2, 1);
      else if (op == 1) r = kiln_stack((kiln_tensor *[]){b, a}, 2, 0);
      else if (op == 2) r = kiln_reshape(b, 1, (int64_t[]){6});
      else n = kiln_split(b, 2, 1, outs, 4);
      long made = core_alloc_fail_at(0);
      if (op < 3) {
        if (!r) {
          failures++;
          CHECK_STR_CONTAINS(kiln_last_error(), "out of memory");
        }
        kiln_release(r);
      } else if (n > 0) {
        for (int i = 0; i < n; i++) kiln_release(outs[i]);
      } else {
        failures++;
      }
      if (made < k) break; /* the k-th allocation never happened: all paths tried */
    }
  }
  CHECK(failures > 0);
  kiln_release(b);
  kiln_release(bt);
  kiln_release(a);
}
