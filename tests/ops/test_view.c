/* tests/ops/test_view.c: views (view, reshape, t, transpose, permute,
 * unsqueeze, squeeze, expand, narrow, slice, select) and slice_backward /
 * select_backward: geometry against PyTorch (golden_shape.h), aliasing,
 * errors, gradients, and samples for the table-driven gradcheck. */
#include "golden_shape.h"
#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S34[2] = {3, 4}, S234[3] = {2, 3, 4};

/* ---- samples ------------------------------------------------------------ */

OP_SAMPLE(VIEW, contiguous) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->ints[0][0] = 6;
  s->ints[0][1] = -1;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->n_args = 2;
}
OP_SAMPLE(VIEW, transposed) { /* [4, 3] with strides [1, 4] viewed as [2, 2, 3] */
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){4, 3}));
  s->ints[0][0] = 2;
  s->ints[0][1] = 2;
  s->ints[0][2] = 3;
  s->args[1] = OPV_INTS(s->ints[0], 3);
  s->n_args = 2;
}
OP_SAMPLE(RESHAPE, copy) { /* transposed: not viewable, reshape copies */
  s->args[0] = OPV_T(sample_transposed(g, S34));
  s->ints[0][0] = 12;
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->n_args = 2;
}
OP_SAMPLE(RESHAPE, view) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->ints[0][0] = 2;
  s->ints[0][1] = 1;
  s->ints[0][2] = -1;
  s->args[1] = OPV_INTS(s->ints[0], 3);
  s->n_args = 2;
}
OP_SAMPLE(T, two_d) {
  s->args[0] = OPV_T(sample_randn(g, 2, S23));
  s->n_args = 1;
}
OP_SAMPLE(T, one_d) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){5}));
  s->n_args = 1;
}
OP_SAMPLE(TRANSPOSE, negative_dims) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_I(-1);
  s->args[2] = OPV_I(0);
  s->n_args = 3;
}
OP_SAMPLE(PERMUTE, three) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->ints[0][0] = 2;
  s->ints[0][1] = 0;
  s->ints[0][2] = -2;
  s->args[1] = OPV_INTS(s->ints[0], 3);
  s->n_args = 2;
}
OP_SAMPLE(UNSQUEEZE, middle) {
  s->args[0] = OPV_T(sample_transposed(g, S23));
  s->args[1] = OPV_I(-2);
  s->n_args = 2;
}
OP_SAMPLE(SQUEEZE, all) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){1, 3, 1, 2}));
  s->args[1] = OPV_NONE;
  s->n_args = 2;
}
OP_SAMPLE(SQUEEZE, dim) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){3, 1, 2}));
  s->args[1] = OPV_I(1);
  s->n_args = 2;
}
OP_SAMPLE(EXPAND, leading_and_broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 1}));
  s->ints[0][0] = 2;
  s->ints[0][1] = -1;
  s->ints[0][2] = 4;
  s->args[1] = OPV_INTS(s->ints[0], 3);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
OP_SAMPLE(NARROW, negative_start) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){3, 5}));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_I(-4);
  s->args[3] = OPV_I(2);
  s->n_args = 4;
}
OP_SAMPLE(SLICE, step) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){7, 3}));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_I(-1);
  s->args[4] = OPV_I(2);
  s->n_args = 5;
}
OP_SAMPLE(SLICE, none_bounds) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){3, 5}));
  s->args[1] = OPV_I(-1);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_NONE;
  s->args[4] = OPV_I(3);
  s->n_args = 5;
}
OP_SAMPLE(SELECT, negative_index) {
  s->args[0] = OPV_T(sample_randn(g, 3, S234));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_I(-1);
  s->n_args = 3;
}
OP_SAMPLE(SLICE_BACKWARD, step) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->ints[0][0] = 7;
  s->ints[0][1] = 2;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_I(0);
  s->args[3] = OPV_I(1);
  s->args[4] = OPV_I(6);
  s->args[5] = OPV_I(2);
  s->n_args = 6;
}
OP_SAMPLE(SELECT_BACKWARD, middle) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){2, 4}));
  s->ints[0][0] = 2;
  s->ints[0][1] = 3;
  s->ints[0][2] = 4;
  s->args[1] = OPV_INTS(s->ints[0], 3);
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_I(-2);
  s->n_args = 4;
}

/* ---- helpers ------------------------------------------------------------------ */

static bool same_ints(const int64_t *a, const int64_t *b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i] != b[i]) return false;
  return true;
}

#define CHECK_SHAPE(t, ...)                                                     \
  do {                                                                          \
    const int64_t want_[] = {__VA_ARGS__};                                      \
    int n_ = (int)(sizeof want_ / sizeof *want_);                               \
    CHECK((t) && kiln_tensor_ndim(t) == n_ && same_ints(kiln_tensor_shape(t), want_, n_)); \
  } while (0)
#define CHECK_STRIDES(t, ...)                                                   \
  do {                                                                          \
    const int64_t want_[] = {__VA_ARGS__};                                      \
    int n_ = (int)(sizeof want_ / sizeof *want_);                               \
    CHECK((t) && kiln_tensor_ndim(t) == n_ && same_ints(kiln_tensor_strides(t), want_, n_)); \
  } while (0)

/* arange(n) as float64 of the given shape. */
static kiln_tensor *iota(int ndim, const int64_t *shape) {
  int64_t n = core_numel(ndim, shape);
  kiln_tensor *t = kiln_arange(0, (double)n, 1, KILN_DTYPE_F64);
  return kiln_view(t, ndim, shape);
}

static bool shares(const kiln_tensor *a, const kiln_tensor *b) {
  return a->storage == b->storage;
}

/* ---- view / reshape --------------------------------------------------------------- */

TEST(view_golden_strides) {
  kiln_scope_begin();
  int64_t n1000 = 1000;
  kiln_tensor *base = kiln_arange(0, 1000, 1, KILN_DTYPE_F64);
  CHECK(base && kiln_tensor_ndim(base) == 1 && kiln_tensor_shape(base)[0] == n1000);
  int n = (int)(sizeof golden_view_cases / sizeof *golden_view_cases);
  for (int c = 0; c < n; c++) {
    const golden_view_case *gc = &golden_view_cases[c];
    kiln_tensor *x = core_autorelease(
        core_tensor_view(base->storage, KILN_DTYPE_F64, gc->nd, gc->shape, gc->strides, 0));
    kiln_tensor *v = kiln_view(x, gc->tnd, gc->target);
    if (gc->ok) {
      CHECK_MSG(v != NULL, "case %d: view failed: %s", c, kiln_last_error());
      if (!v) continue;
      CHECK_MSG(v->ndim == gc->ond && same_ints(v->shape, gc->out_shape, gc->ond) &&
                    same_ints(v->strides, gc->out_strides, gc->ond),
                "case %d: shape/strides differ from PyTorch's", c);
      CHECK(shares(v, x));
    } else {
      CHECK_MSG(v == NULL, "case %d: view should fail", c);
      CHECK_STR_CONTAINS(kiln_last_error(), "aten::view: view size is not compatible");
      CHECK_STR_CONTAINS(kiln_last_error(), "Use .reshape(...) instead");
    }
    /* reshape always works: a view when possible, else a C-order copy */
    kiln_tensor *r = kiln_reshape(x, gc->tnd, gc->target);
    CHECK_MSG(r != NULL, "case %d: reshape failed: %s", c, kiln_last_error());
    if (!r) continue;
    CHECK(r->ndim == gc->ond && same_ints(r->shape, gc->out_shape, gc->ond));
    CHECK_EQ_INT(shares(r, x), gc->ok);
    if (!gc->ok) CHECK(kiln_tensor_is_contiguous(r));
    int64_t m = kiln_tensor_numel(x);
    for (int64_t i = 0; i < m; i++)
      CHECK_MSG(core_get_flat(r, i) == core_get_flat(x, i), "case %d element %lld", c,
                (long long)i);
  }
  kiln_scope_end();
}

TEST(view_aliases_and_errors) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, S34);
  kiln_tensor *v = kiln_view(x, 1, (int64_t[]){-1});
  CHECK_SHAPE(v, 12);
  CHECK(shares(v, x) && kiln_tensor_data(v) == kiln_tensor_data(x));
  ((double *)kiln_tensor_data(x))[5] = 42;
  CHECK_NEAR(core_get_flat(v, 5), 42, 0);

  CHECK(kiln_view(x, 2, (int64_t[]){2, 5}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::view: shape '[2, 5]' is invalid for input of size 12");
  CHECK(kiln_view(x, 2, (int64_t[]){-1, -1}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "only one dimension can be inferred");
  CHECK(kiln_view(x, 2, (int64_t[]){-2, 6}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "invalid shape dimension -2");
  CHECK(kiln_reshape(x, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 12}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "at most 8");
  kiln_tensor *e = kiln_zeros(2, (int64_t[]){0, 3}, KILN_DTYPE_F32);
  CHECK(kiln_reshape(e, 2, (int64_t[]){-1, 0}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot reshape tensor of 0 elements into shape [-1, 0]");
  CHECK_SHAPE(kiln_view(e, 2, (int64_t[]){3, -1}), 3, 0);
  /* 0-d <-> [1] */
  kiln_tensor *sc = kiln_scalar(7, KILN_DTYPE_I64);
  kiln_tensor *v1 = kiln_view(sc, 2, (int64_t[]){1, -1});
  CHECK_SHAPE(v1, 1, 1);
  CHECK(kiln_tensor_dtype(v1) == KILN_DTYPE_I64);
  CHECK(kiln_tensor_ndim(kiln_reshape(v1, 0, NULL)) == 0);
  kiln_scope_end();
}

TEST(view_of_lazy_shapes_only_infer) {
  /* infer alone: works on data-less tensors (what lazy/jit shape
   * propagation uses) and agrees with the kernel */
  kiln_tensor *m = core_tensor_meta(2, S34, KILN_DTYPE_F32);
  op_meta out[1];
  int64_t sh[2] = {6, -1};
  int n = op_table[KILN_OP_VIEW].infer((op_val[]){OPV_T(m), OPV_INTS(sh, 2)}, 2, out, 1);
  CHECK_EQ_INT(n, 1);
  CHECK(out[0].ndim == 2 && out[0].shape[0] == 6 && out[0].shape[1] == 2);
  CHECK(out[0].dtype == KILN_DTYPE_F32);
  kiln_release(m);
}

/* ---- transposes ----------------------------------------------------------------------- */

TEST(view_transpose_permute_t) {
  kiln_scope_begin();
  kiln_tensor *x = iota(3, S234);
  kiln_tensor *tr = kiln_transpose(x, 0, -1);
  CHECK_SHAPE(tr, 4, 3, 2);
  CHECK_STRIDES(tr, 1, 4, 12);
  CHECK(shares(tr, x) && !kiln_tensor_is_contiguous(tr));
  CHECK_NEAR(core_get_flat(tr, 1), 12, 0); /* tr[0][0][1] = x[1][0][0] */
  kiln_tensor *p = kiln_permute(x, 3, (int64_t[]){1, -1, 0});
  CHECK_SHAPE(p, 3, 4, 2);
  CHECK_STRIDES(p, 4, 1, 12);
  CHECK_NEAR(core_get_flat(p, 3), 13, 0); /* p[0][1][1] = x[1][0][1] */
  kiln_tensor *m = iota(2, S23);
  kiln_tensor *mt = kiln_t(m);
  CHECK_SHAPE(mt, 3, 2);
  CHECK_NEAR(core_get_flat(mt, 1), 3, 0);
  CHECK_SHAPE(kiln_t(kiln_arange(0, 4, 1, KILN_DTYPE_F32)), 4);
  CHECK(kiln_tensor_ndim(kiln_t(kiln_scalar(1, KILN_DTYPE_F32))) == 0);
  CHECK(kiln_tensor_ndim(kiln_transpose(kiln_scalar(1, KILN_DTYPE_F32), 0, -1)) == 0);

  CHECK(kiln_t(x) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::t: t() expects a tensor with <= 2 dimensions, but self is 3D");
  CHECK(kiln_transpose(m, 0, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::transpose: dim 2 out of range");
  CHECK(kiln_permute(x, 3, (int64_t[]){0, 0, 1}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "duplicate dims are not allowed");
  CHECK(kiln_permute(x, 2, (int64_t[]){0, 1}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "input.dim() = 3 is not equal to len(dims) = 2");
  CHECK(kiln_permute(x, 3, (int64_t[]){0, 1, 3}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "dim 3 out of range");
  kiln_scope_end();
}

TEST(view_squeeze_unsqueeze) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, S23);
  kiln_tensor *u = kiln_unsqueeze(x, 1);
  CHECK_SHAPE(u, 2, 1, 3);
  CHECK_STRIDES(u, 3, 3, 1);
  u = kiln_unsqueeze(x, -1);
  CHECK_SHAPE(u, 2, 3, 1);
  CHECK_STRIDES(u, 3, 1, 1);
  u = kiln_unsqueeze(kiln_t(x), 0); /* [1, 3, 2], stride of the new dim: 3*1 */
  CHECK_STRIDES(u, 3, 1, 3);
  CHECK_SHAPE(kiln_unsqueeze(kiln_scalar(2, KILN_DTYPE_F64), 0), 1);
  CHECK(kiln_unsqueeze(x, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::unsqueeze: dim 3 out of range");
  kiln_tensor *big = kiln_zeros(8, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 2}, KILN_DTYPE_F32);
  CHECK(kiln_unsqueeze(big, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "already has 8 dims");

  kiln_tensor *y = kiln_zeros(4, (int64_t[]){1, 3, 1, 2}, KILN_DTYPE_F32);
  kiln_tensor *sq = kiln_squeeze(y);
  CHECK_SHAPE(sq, 3, 2);
  CHECK_STRIDES(sq, 2, 1);
  CHECK_SHAPE(kiln_squeeze_dim(y, 2), 1, 3, 2);
  CHECK_SHAPE(kiln_squeeze_dim(y, 1), 1, 3, 1, 2); /* not size 1: unchanged */
  CHECK_SHAPE(kiln_squeeze_dim(y, -4), 3, 1, 2);
  CHECK(kiln_tensor_ndim(kiln_squeeze(kiln_ones(3, (int64_t[]){1, 1, 1}, KILN_DTYPE_F32))) == 0);
  CHECK(kiln_tensor_ndim(kiln_squeeze_dim(kiln_scalar(1, KILN_DTYPE_F32), 0)) == 0);
  CHECK(kiln_squeeze_dim(y, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::squeeze: dim 4 out of range");
  kiln_scope_end();
}

TEST(view_expand) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, (int64_t[]){3, 1});
  kiln_tensor *e = kiln_expand(x, 3, (int64_t[]){2, -1, 4});
  CHECK_SHAPE(e, 2, 3, 4);
  CHECK_STRIDES(e, 0, 1, 0);
  CHECK(shares(e, x));
  CHECK_NEAR(core_get_flat(e, 23), 2, 0);
  CHECK_NEAR(core_get_flat(e, 5), 1, 0);
  /* a new leading dim of size 1 gets PyTorch's stride (size*stride of the next) */
  kiln_tensor *e1 = kiln_expand(iota(2, S23), 3, (int64_t[]){1, 2, 3});
  CHECK_STRIDES(e1, 6, 3, 1);
  CHECK_STRIDES(kiln_expand(iota(2, S23), 3, (int64_t[]){4, 2, 3}), 0, 3, 1);

  CHECK(kiln_expand(iota(2, S23), 1, (int64_t[]){3}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "the number of sizes provided (1) must be greater or equal to the number "
                     "of dimensions in the tensor (2)");
  CHECK(kiln_expand(iota(2, S23), 2, (int64_t[]){2, 4}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "the expanded size of the tensor (4) must match the existing size (3) at "
                     "non-singleton dimension 1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]");
  CHECK(kiln_expand(iota(2, S23), 3, (int64_t[]){-1, 2, 3}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "isn't allowed in a leading, non-existing dimension 0");
  CHECK(kiln_expand(x, 2, (int64_t[]){3, -2}) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "invalid size -2");
  kiln_scope_end();
}

/* ---- narrow, slice, select ------------------------------------------------------------ */

TEST(view_slice_golden) {
  kiln_scope_begin();
  int n = (int)(sizeof golden_slice_cases / sizeof *golden_slice_cases);
  for (int c = 0; c < n; c++) {
    const golden_slice_case *gc = &golden_slice_cases[c];
    kiln_tensor *x = kiln_arange(0, (double)gc->size, 1, KILN_DTYPE_I64);
    op_val a[5] = {OPV_T(x), OPV_I(0),
                   gc->start == GOLDEN_SLICE_NONE ? OPV_NONE : OPV_I(gc->start),
                   gc->end == GOLDEN_SLICE_NONE ? OPV_NONE : OPV_I(gc->end), OPV_I(gc->step)};
    kiln_tensor *r = op_call1(KILN_OP_SLICE, a, 5);
    CHECK_MSG(r != NULL, "case %d: %s", c, kiln_last_error());
    if (!r) continue;
    CHECK_MSG(r->ndim == 1 && r->shape[0] == gc->n, "case %d: length %lld, want %d", c,
              (long long)r->shape[0], gc->n);
    for (int i = 0; i < gc->n && i < r->shape[0]; i++)
      CHECK_MSG(core_get_flat(r, i) == gc->want[i], "case %d element %d", c, i);
    CHECK(shares(r, x));
  }
  kiln_scope_end();
}

TEST(view_narrow_select_values_and_errors) {
  kiln_scope_begin();
  kiln_tensor *x = iota(3, S234);
  kiln_tensor *n = kiln_narrow(x, -1, -3, 2); /* x[:, :, 1:3] */
  CHECK_SHAPE(n, 2, 3, 2);
  CHECK_STRIDES(n, 12, 4, 1);
  CHECK_EQ_INT(kiln_tensor_offset(n), 1);
  CHECK_NEAR(core_get_flat(n, 3), 6, 0);
  CHECK_SHAPE(kiln_narrow(x, 1, 3, 0), 2, 0, 4); /* start == size is allowed */
  kiln_tensor *sl = kiln_slice(kiln_t(iota(2, S34)), 1, 1, 100, 2); /* [4, 3][:, 1::2] */
  CHECK_SHAPE(sl, 4, 1);
  CHECK_STRIDES(sl, 1, 8);
  CHECK_NEAR(core_get_flat(sl, 2), 6, 0);
  kiln_tensor *se = kiln_select(x, 1, -1);
  CHECK_SHAPE(se, 2, 4);
  CHECK_EQ_INT(kiln_tensor_offset(se), 8);
  CHECK_NEAR(core_get_flat(se, 5), 21, 0);
  kiln_tensor *s2 = kiln_select(kiln_select(x, 0, 1), 0, 2); /* views of views */
  CHECK_EQ_INT(kiln_tensor_offset(s2), 20);
  CHECK(kiln_tensor_ndim(kiln_select(kiln_arange(0, 3, 1, KILN_DTYPE_F32), 0, 2)) == 0);
  /* writes through the base are visible in the view */
  ((double *)kiln_tensor_data(x))[21] = -1;
  CHECK_NEAR(core_get_flat(se, 5), -1, 0);

  CHECK(kiln_narrow(x, 2, 3, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::narrow: start (3) + length (2) exceeds dimension size (4).");
  CHECK(kiln_narrow(x, 2, 5, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "start 5 out of range");
  CHECK(kiln_narrow(x, 2, 0, -1) == NULL);
  CHECK(kiln_narrow(kiln_scalar(1, KILN_DTYPE_F32), 0, 0, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "narrow() cannot be applied to a 0-dim tensor.");
  CHECK(kiln_slice(x, 0, 0, 2, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::slice: slice step must be positive");
  CHECK(kiln_slice(x, 3, 0, 2, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "dim 3 out of range");
  CHECK(kiln_select(x, 1, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "select(): index 3 out of range for tensor of size [2, 3, 4] at dimension 1");
  CHECK(kiln_select(x, 0, -3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "index -3 out of range");
  CHECK(kiln_select(kiln_scalar(1, KILN_DTYPE_F32), 0, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "select() cannot be applied to a 0-dim tensor.");
  kiln_scope_end();
}

TEST(view_bad_argument_tags) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, S23);
  CHECK(op_call1(KILN_OP_VIEW, (op_val[]){OPV_I(3), OPV_INTS(S23, 2)}, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::view: expected a tensor for 'self', got 3");
  CHECK(op_call1(KILN_OP_TRANSPOSE, (op_val[]){OPV_T(x), OPV_F(0.5), OPV_I(1)}, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected an int for 'dim0'");
  CHECK(op_call1(KILN_OP_VIEW, (op_val[]){OPV_T(x), OPV_I(6)}, 2) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected an int list for 'size'");
  kiln_scope_end();
}

/* ---- slice_backward / select_backward -------------------------------------------------- */

TEST(view_slice_select_backward_values) {
  kiln_scope_begin();
  kiln_tensor *g = iota(2, (int64_t[]){2, 2});
  g = kiln_add_scalar(g, 1); /* 1 2 / 3 4 */
  int64_t in[2] = {2, 5};
  kiln_tensor *r = op_call1(KILN_OP_SLICE_BACKWARD,
                            (op_val[]){OPV_T(g), OPV_INTS(in, 2), OPV_I(1), OPV_I(-4),
                                       OPV_I(INT64_MAX), OPV_I(2)},
                            6);
  CHECK_SHAPE(r, 2, 5);
  double want[10] = {0, 1, 0, 2, 0, 0, 3, 0, 4, 0};
  for (int i = 0; i < 10; i++) CHECK_NEAR(core_get_flat(r, i), want[i], 0);
  kiln_tensor *gs = kiln_t(g); /* non-contiguous grad: 1 3 / 2 4 */
  int64_t in3[3] = {2, 3, 2};
  r = op_call1(KILN_OP_SELECT_BACKWARD,
               (op_val[]){OPV_T(gs), OPV_INTS(in3, 3), OPV_I(1), OPV_I(-1)}, 4);
  CHECK_SHAPE(r, 2, 3, 2);
  double want3[12] = {0, 0, 0, 0, 1, 3, 0, 0, 0, 0, 2, 4};
  for (int i = 0; i < 12; i++) CHECK_NEAR(core_get_flat(r, i), want3[i], 0);
  r = op_call1(KILN_OP_SLICE_BACKWARD,
               (op_val[]){OPV_T(g), OPV_INTS(in, 2), OPV_I(1), OPV_I(0), OPV_I(3), OPV_I(1)}, 6);
  CHECK(r == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::slice_backward: grad_output Double[2, 2] does not match the sliced "
                     "shape [2, 3] of input_sizes [2, 5]");
  kiln_scope_end();
}

/* ---- gradients ------------------------------------------------------------------------------- */

TEST(view_grad_through_chain) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, S34);
  kiln_set_requires_grad(x, true);
  /* y = x.t()[1:, :].reshape(-1) (non-viewable: copies) then select */
  kiln_tensor *y = kiln_reshape(kiln_slice(kiln_t(x), 0, 1, INT64_MAX, 1), 1, (int64_t[]){-1});
  CHECK_SHAPE(y, 9);
  CHECK(y && !shares(y, x));
  kiln_tensor *z = kiln_select(y, 0, 4); /* y[4] = x.t()[2][1] = x[1][2] */
  CHECK_NEAR(core_get_flat(z, 0), 6, 0);
  CHECK(kiln_backward(z, NULL) == KILN_OK);
  kiln_tensor *gx = kiln_tensor_grad(x);
  CHECK(gx != NULL);
  for (int i = 0; gx && i < 12; i++) CHECK_NEAR(core_get_flat(gx, i), i == 6 ? 1 : 0, 0);
  kiln_scope_end();
}

/* Double backward through the backward ops: with create_graph, the
 * gradient of narrow is slice_backward(v), itself differentiable in v with
 * gradient slice(u); the same for select / select_backward. */
TEST(view_double_backward_through_backward_ops) {
  kiln_scope_begin();
  kiln_tensor *x = iota(2, S34);
  kiln_set_requires_grad(x, true);
  kiln_tensor *outs[2] = {kiln_narrow(x, 1, 1, 2), kiln_select(x, 0, -1)};
  kiln_tensor *v[2] = {kiln_full(2, (int64_t[]){3, 2}, 2.0, KILN_DTYPE_F64),
                       kiln_full(1, (int64_t[]){4}, -1.0, KILN_DTYPE_F64)};
  kiln_set_requires_grad(v[0], true);
  kiln_set_requires_grad(v[1], true);
  kiln_tensor *gx[1] = {NULL};
  kiln_backward_opts o = {.create_graph = true};
  CHECK(kiln_grad(outs, v, 2, &x, 1, &o, gx) == KILN_OK);
  CHECK(gx[0] && kiln_requires_grad(gx[0]));
  double want[12] = {0, 2, 2, 0, 0, 2, 2, 0, -1, 1, 1, -1};
  for (int i = 0; gx[0] && i < 12; i++) CHECK_NEAR(core_get_flat(gx[0], i), want[i], 0);
  /* d <gx, u> / dv = (u[:, 1:3], u[-1]) */
  kiln_tensor *u = kiln_add_scalar(iota(2, S34), 1);
  kiln_tensor *gv[2] = {NULL, NULL};
  CHECK(kiln_grad(gx, &u, 1, v, 2, NULL, gv) == KILN_OK);
  double want0[6] = {2, 3, 6, 7, 10, 11}, want1[4] = {9, 10, 11, 12};
  CHECK(gv[0] && gv[0]->shape[0] == 3 && gv[0]->shape[1] == 2);
  for (int i = 0; gv[0] && i < 6; i++) CHECK_NEAR(core_get_flat(gv[0], i), want0[i], 0);
  for (int i = 0; gv[1] && i < 4; i++) CHECK_NEAR(core_get_flat(gv[1], i), want1[i], 0);
  CHECK(gv[1] != NULL);
  kiln_scope_end();
}
