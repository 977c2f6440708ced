/* tests/autograd/test_engine_basic.c: backward through add/mul, leaves
 * accumulate across backwards, no_grad, errors. */
#include "core/core.h"
#include "test.h"

TEST(backward_mul_add) {
  kiln_scope_begin();
  double xv[3] = {1, 2, 3}, wv[3] = {4, 5, 6};
  int64_t sh[1] = {3};
  kiln_tensor *x = kiln_from_data(xv, 1, sh, KILN_DTYPE_F64);
  kiln_tensor *w = kiln_from_data(wv, 1, sh, KILN_DTYPE_F64);
  CHECK(kiln_set_requires_grad(w, true) == KILN_OK);
  /* y = w*x + w*w: dy/dw = x + 2w, gradient of ones */
  kiln_tensor *y = kiln_add(kiln_mul(w, x), kiln_mul(w, w));
  CHECK(kiln_requires_grad(y));
  CHECK(kiln_grad_fn_name(y) && strcmp(kiln_grad_fn_name(y), "aten::add") == 0);
  kiln_tensor *g = kiln_ones(1, sh, KILN_DTYPE_F64);
  CHECK(kiln_backward(y, g) == KILN_OK);
  kiln_tensor *gw = kiln_tensor_grad(w);
  CHECK(gw != NULL);
  for (int i = 0; i < 3; i++) CHECK_NEAR(core_get_flat(gw, i), xv[i] + 2 * wv[i], 1e-12);
  CHECK(kiln_tensor_grad(x) == NULL);
  /* second backward on a new graph accumulates */
  kiln_tensor *y2 = kiln_mul(w, x);
  CHECK(kiln_backward(y2, g) == KILN_OK);
  gw = kiln_tensor_grad(w);
  for (int i = 0; i < 3; i++) CHECK_NEAR(core_get_flat(gw, i), 2 * xv[i] + 2 * wv[i], 1e-12);
  /* backward through a freed graph is an error, not a crash */
  CHECK(kiln_backward(y2, g) == KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "second time");
  kiln_scope_end();
}

TEST(no_grad_records_nothing) {
  kiln_scope_begin();
  int64_t sh[1] = {2};
  kiln_tensor *w = kiln_ones(1, sh, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_no_grad_begin();
  kiln_no_grad_begin();
  kiln_tensor *y = kiln_mul(w, w);
  kiln_no_grad_end();
  CHECK(!kiln_is_grad_enabled());
  kiln_no_grad_end();
  CHECK(kiln_is_grad_enabled());
  CHECK(!kiln_requires_grad(y));
  CHECK(kiln_backward(y, NULL) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "does not require grad");
  kiln_tensor *z = kiln_mul(w, w);
  CHECK(kiln_backward(z, NULL) == KILN_ERR_INVALID); /* 2 elements, no grad given */
  CHECK_STR_CONTAINS(kiln_last_error(), "one-element");
  kiln_scope_end();
}
