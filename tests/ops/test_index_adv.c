/* tests/ops/test_index_adv.c: advanced indexing (src/ops/index_adv.c):
 * x[idx] and x[:, idx] = v by hand, gradients of aten::index (repeated
 * indices accumulate) and of index_put_ on a non-leaf (for self and
 * values) against central finite differences in float64, and PyTorch's
 * error messages. Values against PyTorch: tests/data/mutation (index_*). */
#include "ops/op.h"
#include "../autograd/fd_grads.h"
#include "test.h"

static kiln_tensor *arange_f64(int ndim, const int64_t *shape) {
  return kiln_reshape(kiln_arange(0, (double)core_numel(ndim, shape), 1, KILN_DTYPE_F64), ndim, shape);
}
static kiln_tensor *longs(int n, const int64_t *v) {
  int64_t s[1] = {n};
  return kiln_from_data(v, 1, s, KILN_DTYPE_I64);
}
static kiln_tensor *adv_index(kiln_tensor *x, kiln_tensor *const *ix, int n) {
  return op_call1(KILN_OP_INDEX, (op_val[]){OPV_T(x), OPV_TS(ix, n)}, 2);
}
static kiln_tensor *index_put_(kiln_tensor *x, kiln_tensor *const *ix, int n, kiln_tensor *v,
                               bool acc) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_INDEX_PUT),
                  (op_val[]){OPV_T(x), OPV_TS(ix, n), OPV_T(v), OPV_B(acc)}, 4);
}

TEST(index_adv_values_by_hand) {
  kiln_scope_begin();
  int64_t s[2] = {3, 4};
  kiln_tensor *x = arange_f64(2, s); /* x[i][j] = 4i + j */
  /* x[:, [3, -4]] (a None entry keeps dim 0) */
  kiln_tensor *ix[2] = {NULL, longs(2, (int64_t[]){3, -4})};
  kiln_tensor *r = adv_index(x, ix, 2);
  CHECK(r && r->ndim == 2 && r->shape[0] == 3 && r->shape[1] == 2);
  static const double want[6] = {3, 0, 7, 4, 11, 8};
  for (int i = 0; r && i < 6; i++) CHECK(core_get_flat(r, i) == want[i]);
  /* x[[2, 0], [1, 1]]: both dims indexed, pairs */
  kiln_tensor *iy[2] = {longs(2, (int64_t[]){2, 0}), longs(2, (int64_t[]){1, 1})};
  r = adv_index(x, iy, 2);
  CHECK(r && r->ndim == 1 && core_get_flat(r, 0) == 9 && core_get_flat(r, 1) == 1);
  /* x[x > 9] */
  kiln_tensor *m = kiln_gt(x, kiln_scalar(9, KILN_DTYPE_F64));
  r = adv_index(x, &m, 1);
  CHECK(r && r->ndim == 1 && r->shape[0] == 2 && core_get_flat(r, 0) == 10 &&
        core_get_flat(r, 1) == 11);
  /* x[:, [0, 2]] = -1 (a 0-d value broadcasts) */
  kiln_tensor *iz[2] = {NULL, longs(2, (int64_t[]){0, 2})};
  CHECK(index_put_(x, iz, 2, kiln_scalar(-1, KILN_DTYPE_F64), false) == x);
  for (int i = 0; i < 12; i++)
    CHECK(core_get_flat(x, i) == ((i % 4 == 0 || i % 4 == 2) ? -1 : i));
  /* accumulate adds repeated indices: x[[1, 1]] += [1, 1, 1, 1] twice */
  kiln_tensor *ia[1] = {longs(2, (int64_t[]){1, 1})};
  CHECK(index_put_(x, ia, 1, kiln_full(1, (int64_t[]){4}, 1, KILN_DTYPE_F64), true) == x);
  CHECK(core_get_flat(x, 5) == 7 && core_get_flat(x, 4) == 1 && core_get_flat(x, 0) == -1);
  kiln_scope_end();
}

static kiln_tensor *total(kiln_tensor *t) { return kiln_sum(t, NULL, 0, false); }

/* sum(sin(x[[2, 0, 2]] * x[:, [1, 1, 3]]^T-ish)): index with repeats, and a None entry */
static kiln_tensor *gathered(kiln_tensor *const *p) {
  kiln_tensor *a[1] = {longs(3, (int64_t[]){2, 0, 2})};
  kiln_tensor *b[2] = {NULL, longs(3, (int64_t[]){1, 1, -1})};
  kiln_tensor *r = adv_index(p[0], a, 1), *c = adv_index(p[0], b, 2);
  return total(kiln_sin(kiln_mul(kiln_matmul(r, c), kiln_scalar(0.3, KILN_DTYPE_F64))));
}

TEST(index_adv_grad_of_index) {
  kiln_scope_begin();
  int64_t s[2] = {3, 3};
  kiln_tensor *p[1] = {test_randn_f64(2, s, 21)};
  test_fd_check_grads("index", gathered, p, 1);
  kiln_scope_end();
}

/* h = x * 2; h[:, [2, 0]] = v * v; h[[1]] += x[0]; sum(h * sin(h)) */
static kiln_tensor *put(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_mul_scalar(p[0], 2.0);
  kiln_tensor *a[2] = {NULL, longs(2, (int64_t[]){2, 0})}, *b[1] = {longs(1, (int64_t[]){1})};
  if (!index_put_(h, a, 2, kiln_mul(p[1], p[1]), false)) return NULL;
  if (!index_put_(h, b, 1, kiln_select(p[0], 0, 0), true)) return NULL;
  return total(kiln_mul(h, kiln_sin(h)));
}

TEST(index_adv_grad_of_index_put__on_a_non_leaf) {
  kiln_scope_begin();
  int64_t xs[2] = {3, 4}, vs[2] = {3, 2};
  kiln_tensor *p[2] = {test_randn_f64(2, xs, 22), test_randn_f64(2, vs, 23)};
  test_fd_check_grads("index_put_", put, p, 2);
  kiln_scope_end();
}

TEST(index_adv_errors) {
  kiln_scope_begin();
  int64_t s[2] = {3, 4};
  kiln_tensor *x = arange_f64(2, s);
  kiln_tensor *i3[3] = {longs(1, (int64_t[]){0}), longs(1, (int64_t[]){0}), longs(1, (int64_t[]){0})};
  CHECK(adv_index(x, i3, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "too many indices for tensor of dimension 2");
  kiln_tensor *oob[1] = {longs(1, (int64_t[]){3})};
  CHECK(adv_index(x, oob, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "index 3 is out of bounds for dimension 0 with size 3");
  kiln_tensor *fl[1] = {kiln_scalar(1, KILN_DTYPE_F64)};
  CHECK(adv_index(x, fl, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "tensors used as indices must be long or bool tensors");
  kiln_tensor *m[1] = {kiln_full(1, (int64_t[]){4}, 1, KILN_DTYPE_BOOL)};
  CHECK(adv_index(x, m, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "The shape of the mask");
  kiln_tensor *ok[1] = {longs(2, (int64_t[]){0, 1})};
  CHECK(index_put_(x, ok, 1, kiln_scalar(1, KILN_DTYPE_F32), false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "Index put requires the source and destination dtypes match");
  CHECK(index_put_(x, ok, 1, kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F64), false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "shape mismatch: value tensor");
  /* nothing was written by the failed calls */
  for (int i = 0; i < 12; i++) CHECK(core_get_flat(x, i) == i);
  kiln_scope_end();
}
