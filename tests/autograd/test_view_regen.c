/* tests/autograd/test_view_regen.c: a view made before an in-place write
 * to its base, or through another view of it, backpropagates through the
 * write (Note [View regeneration] in src/autograd/views.c): gradients equal
 * central finite differences in float64; a saved view that lost its base
 * fails with a clear error instead of a wrong gradient; writing an expand
 * that repeats elements is an error, as in PyTorch. */
#include "fd_grads.h"
#include "ops/op.h"
#include "test.h"

static kiln_tensor *add_(kiln_tensor *t, kiln_tensor *o) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_ADD), (op_val[]){OPV_T(t), OPV_T(o), OPV_I(1)}, 3);
}
static kiln_tensor *mul_(kiln_tensor *t, kiln_tensor *o) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_MUL), (op_val[]){OPV_T(t), OPV_T(o)}, 2);
}
static kiln_tensor *total(kiln_tensor *t) { return kiln_sum(t, NULL, 0, false); }

/* h = x * 2 (2x3); v1 = h.t(); v2 = h[1]; v2 *= y; v3 = h[:, 1:3]
 * (overlapping v1 and v2); v3 += x[0, 1:3]; h += x; then v1, v2, v3
 * read (each made before some of the writes) */
static kiln_tensor *sibling_writes(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_mul_scalar(p[0], 2.0);
  kiln_tensor *v1 = kiln_t(h), *v2 = kiln_select(h, 0, 1), *v3 = kiln_narrow(h, 1, 1, 2);
  if (!mul_(v2, p[1])) return NULL;
  if (!add_(v3, kiln_narrow(kiln_select(p[0], 0, 0), 0, 1, 2))) return NULL;
  if (!add_(h, p[0])) return NULL;
  kiln_tensor *a = total(kiln_mul(v1, kiln_sin(v1)));
  return kiln_add(a, kiln_add(total(kiln_mul(v2, v2)), total(kiln_mul(v3, v3))));
}

TEST(view_regen_grad_through_sibling_and_base_writes) {
  kiln_scope_begin();
  int64_t s[2] = {2, 3}, ys[1] = {3};
  kiln_tensor *p[2] = {test_randn_f64(2, s, 21), test_randn_f64(1, ys, 22)};
  test_fd_check_grads("a view made before writes of its base", sibling_writes, p, 2);
  kiln_scope_end();
}

/* the same view written twice: the second write reaches the base too */
static kiln_tensor *view_written_twice(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_mul_scalar(p[0], 2.0), *v = kiln_select(h, 0, 0);
  if (!mul_(v, p[1])) return NULL;
  if (!add_(v, kiln_select(p[0], 0, 1))) return NULL;
  return kiln_add(total(kiln_mul(h, kiln_sin(h))), total(kiln_mul(v, v)));
}

TEST(view_regen_view_written_twice_writes_its_base) {
  kiln_scope_begin();
  int64_t s[2] = {2, 3}, ys[1] = {3};
  kiln_tensor *p[2] = {test_randn_f64(2, s, 23), test_randn_f64(1, ys, 24)};
  test_fd_check_grads("a view written twice", view_written_twice, p, 2);
  kiln_scope_end();
}

/* hand-computed: b = x * 1; v1 = b.t(); b[1] *= 3; d sum(v1 * v1) / dx =
 * 2 x on row 0 and 18 x on row 1 (the stale history gave 6 x) */
TEST(view_regen_grad_by_hand) {
  kiln_scope_begin();
  double xv[4] = {1, 2, 3, 4};
  int64_t s[2] = {2, 2};
  kiln_tensor *x = kiln_from_data(xv, 2, s, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_tensor *b = kiln_mul_scalar(x, 1.0), *v1 = kiln_t(b);
  CHECK(kiln_mul_scalar_(kiln_select(b, 0, 1), 3.0) == 0);
  kiln_tensor *sq = kiln_mul(v1, v1);
  CHECK_MSG(sq != NULL, "%s", kiln_last_error());
  CHECK_MSG(kiln_backward(total(sq), NULL) == 0, "%s", kiln_last_error());
  kiln_tensor *g = kiln_tensor_grad(x);
  CHECK(g != NULL);
  double want[4] = {2, 4, 54, 72};
  for (int i = 0; g && i < 4; i++) CHECK_NEAR(core_get_flat(g, i), want[i], 1e-12);
  kiln_scope_end();
}

/* v1 saved by a backward formula drops its base (a reference cycle
 * otherwise): once the base's history moves, using v1 is an error */
TEST(view_regen_saved_view_without_base_is_a_clear_error) {
  kiln_scope_begin();
  int64_t s[2] = {2, 3};
  kiln_tensor *x = test_randn_f64(2, s, 25);
  kiln_set_requires_grad(x, true);
  kiln_tensor *h = kiln_mul_scalar(x, 2.0), *v1 = kiln_t(h);
  CHECK(kiln_mul(v1, v1) != NULL); /* saves v1 */
  CHECK(kiln_mul(v1, kiln_sin(v1)) != NULL); /* before the write: fine */
  CHECK(mul_(kiln_select(h, 0, 1), kiln_select(x, 0, 0)) != NULL);
  CHECK(kiln_mul_scalar(v1, 2.0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot regenerate its history");
  /* without autograd it is an ordinary read */
  kiln_no_grad_begin();
  CHECK(kiln_mul_scalar(v1, 2.0) != NULL);
  kiln_no_grad_end();
  kiln_scope_end();
}

/* PyTorch refuses an in-place write to a tensor whose elements share
 * memory (an expand that repeats them), in every mode: the random-graph
 * oracle found eager writing it while lazy refused */
TEST(inplace_write_to_repeating_expand_is_an_error) {
  kiln_scope_begin();
  float xv[3] = {1, -2, 3};
  int64_t s3[1] = {3}, s23[2] = {2, 3};
  kiln_tensor *x = kiln_from_data(xv, 1, s3, KILN_DTYPE_F32), *e = kiln_expand(x, 2, s23);
  CHECK(kiln_mul_scalar_(e, 2.0) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "more than one element of the written-to tensor");
  CHECK(core_get_flat(x, 0) == 1); /* unwritten */
  CHECK(kiln_mul_scalar_(kiln_expand(kiln_to_lazy(x), 2, s23), 2.0) < 0); /* lazy too */
  kiln_scope_end();
}
