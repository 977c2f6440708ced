/* tests/lazy/test_lazy_inference.c: what a lazy inference graph runs:
 * the same kernels as eager mode (Note [Values-only pooling] in
 * passes/lazy_to_ir.c), with results equal to eager's. */
#include <math.h>
#include <string.h>

#include "lazy/lazy.h"
#include "test.h"

/* max over 3x3 windows, stride 2, padding 1 of a (1, c, h, w) tensor, by
 * brute force */
static float window_max(const kiln_tensor *x, int64_t ci, int64_t oy, int64_t ox) {
  int64_t h = x->shape[2], w = x->shape[3];
  float m = -INFINITY;
  for (int64_t dy = 0; dy < 3; dy++)
    for (int64_t dx = 0; dx < 3; dx++) {
      int64_t y = oy * 2 - 1 + dy, xx = ox * 2 - 1 + dx;
      if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
      float v = (float)core_get_flat(x, (ci * h + y) * w + xx);
      if (v > m) m = v;
    }
  return m;
}

TEST(lazy_inference_pools_without_indices) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(41);
  int64_t sh[4] = {1, 3, 9, 10}, k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
  kiln_tensor *xc = kiln_randn(4, sh, KILN_DTYPE_F32, g);
  kiln_no_grad_begin();
  kiln_tensor *y = kiln_relu(kiln_max_pool2d(kiln_to_lazy(xc), k, s, p));
  kiln_tensor *yc = kiln_to_cpu(y);
  kiln_tensor *ye = kiln_relu(kiln_max_pool2d(xc, k, s, p));
  kiln_no_grad_end();
  char *t = kiln_lazy_last_compiled_graph();
  CHECK(t != NULL);
  CHECK_STR_CONTAINS(t, "aten::max_pool2d(");
  CHECK(t && !strstr(t, "max_pool2d_with_indices"));
  kiln_free(t);
  CHECK(yc && ye);
  CHECK_EQ_INT(yc->shape[2], 5);
  CHECK_EQ_INT(yc->shape[3], 5);
  for (int64_t c = 0; c < 3; c++)
    for (int64_t oy = 0; oy < 5; oy++)
      for (int64_t ox = 0; ox < 5; ox++) {
        int64_t i = (c * 5 + oy) * 5 + ox;
        float want = window_max(xc, c, oy, ox);
        CHECK_NEAR(core_get_flat(yc, i), want > 0 ? want : 0, 0);
        CHECK_NEAR(core_get_flat(yc, i), core_get_flat(ye, i), 0);
      }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* With a gradient to take, the indices are the backward's input: the
 * graph keeps max_pool2d_with_indices, and the gradient is eager's. */
TEST(lazy_training_pools_with_indices) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(42);
  int64_t sh[4] = {2, 2, 6, 7}, k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
  kiln_tensor *xc = kiln_randn(4, sh, KILN_DTYPE_F32, g);
  kiln_tensor *xe = core_autorelease(kiln_retain(xc));
  kiln_set_requires_grad(xe, true);
  kiln_tensor *xl = kiln_to_lazy(xc);
  kiln_set_requires_grad(xl, true);
  kiln_tensor *xs[2] = {xe, xl};
  for (int m = 0; m < 2; m++) {
    kiln_tensor *loss = kiln_sum(kiln_mul(kiln_max_pool2d(xs[m], k, s, p),
                                          kiln_max_pool2d(xs[m], k, s, p)), NULL, 0, false);
    CHECK(kiln_backward(loss, NULL) == KILN_OK);
  }
  kiln_tensor *gl = kiln_to_cpu(kiln_tensor_grad(xl));
  char *t = kiln_lazy_last_compiled_graph();
  CHECK_STR_CONTAINS(t, "max_pool2d_with_indices");
  kiln_free(t);
  kiln_tensor *ge = kiln_tensor_grad(xe);
  CHECK(gl && ge);
  double total = 0;
  for (int64_t i = 0; i < 2 * 2 * 6 * 7; i++) {
    CHECK_NEAR(core_get_flat(gl, i), core_get_flat(ge, i), 0);
    total += core_get_flat(gl, i);
  }
  /* d/dx sum(m^2) = 2 m at each window's argmax: the total is 2 * sum(m)
   * over the 2 * 2 * 3 * 4 windows */
  kiln_no_grad_begin();
  kiln_tensor *me = kiln_max_pool2d(xc, k, s, p);
  kiln_no_grad_end();
  double want = 0;
  for (int64_t i = 0; i < 2 * 2 * 3 * 4; i++) want += 2 * core_get_flat(me, i);
  CHECK_NEAR(total, want, 1e-4);
  kiln_generator_free(g);
  kiln_scope_end();
}
