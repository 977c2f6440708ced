/* tests/lazy/test_lazy_anomaly.c: anomaly mode for lazy tensors
 * (src/exec/lazy_anomaly.c): a step whose results hold NaN/Inf fails
 * naming the op and the graph node that made the first one, forward or
 * backward, and leaves its tensors pending; without anomaly mode the same
 * step runs and gives the NaN. */
#include "test.h"

#include "kiln.h"

TEST(lazy_anomaly_names_the_forward_op_and_node) {
  kiln_scope_begin();
  float xv[3] = {1, -1, 2};
  int64_t shape[1] = {3};
  kiln_tensor *x = kiln_to_lazy(kiln_from_data(xv, 1, shape, KILN_DTYPE_F32));
  kiln_tensor *a = kiln_neg(x);  /* -1, 1, -2: finite */
  kiln_tensor *b = kiln_log(a);  /* NaN, 0, NaN: the first NaN */
  kiln_tensor *c = kiln_add(b, b);
  CHECK(c != NULL);
  kiln_set_anomaly_enabled(true);
  CHECK(kiln_mark_step() < 0);
  kiln_set_anomaly_enabled(false);
  const char *e = kiln_last_error();
  CHECK_STR_CONTAINS(e, "anomaly: aten::log made the first NaN or Inf");
  /* the node, as the pending graph's text numbers it: x %0, neg %1, log %2 */
  CHECK_STR_CONTAINS(e, "aten::log(%1)");
  CHECK_STR_CONTAINS(e, "%2 = [");
  test_note("%s", e);
  char *text = kiln_lazy_tensors_text(&c, 1);
  CHECK_STR_CONTAINS(text, "%2 = [");
  CHECK_STR_CONTAINS(text, "aten::log(%1)");
  kiln_free(text);
  /* nothing was applied: the step runs again without anomaly mode */
  CHECK(kiln_mark_step() == 0);
  float cv[3] = {0};
  CHECK(kiln_tensor_copy_to(kiln_to_cpu(c), cv, KILN_DTYPE_F32) == 0);
  CHECK(isnan(cv[0]) && isnan(cv[2]));
  CHECK_NEAR(cv[1], 0, 0);
  kiln_scope_end();
}

TEST(lazy_anomaly_names_a_backward_op) {
  kiln_scope_begin();
  float xv[2] = {0, 4};
  int64_t shape[1] = {2};
  kiln_tensor *x = kiln_to_lazy(kiln_from_data(xv, 1, shape, KILN_DTYPE_F32));
  kiln_set_requires_grad(x, true);
  /* sqrt(0) = 0 is finite; its derivative 1 / (2 sqrt(0)) is not */
  kiln_tensor *y = kiln_sum(kiln_sqrt(x), NULL, 0, false);
  CHECK(kiln_backward(y, NULL) == 0); /* recorded, not run */
  kiln_set_anomaly_enabled(true);
  CHECK(kiln_mark_step() < 0);
  kiln_set_anomaly_enabled(false);
  CHECK_STR_CONTAINS(kiln_last_error(), "made the first NaN or Inf of the lazy step");
  CHECK_STR_CONTAINS(kiln_last_error(), "its inputs are finite");
  test_note("%s", kiln_last_error());
  CHECK(kiln_mark_step() == 0);
  float g[2] = {0};
  CHECK(kiln_tensor_copy_to(kiln_to_cpu(kiln_tensor_grad(x)), g, KILN_DTYPE_F32) == 0);
  CHECK(isinf(g[0]));
  CHECK_NEAR(g[1], 0.25, 1e-6); /* 1 / (2 sqrt(4)) */
  kiln_scope_end();
}

TEST(lazy_anomaly_finite_step_runs) {
  kiln_scope_begin();
  float xv[2] = {1, 2};
  int64_t shape[1] = {2};
  kiln_tensor *x = kiln_to_lazy(kiln_from_data(xv, 1, shape, KILN_DTYPE_F32));
  kiln_tensor *y = kiln_exp(x);
  kiln_set_anomaly_enabled(true);
  CHECK(kiln_mark_step() == 0);
  kiln_set_anomaly_enabled(false);
  float yv[2] = {0};
  CHECK(kiln_tensor_copy_to(kiln_to_cpu(y), yv, KILN_DTYPE_F32) == 0);
  CHECK_NEAR(yv[1], exp(2.0), 1e-5);
  kiln_scope_end();
}
