/* tests/core/test_cache.c: the storage cache (Note [Storage cache]): a
 * repeated training step allocates no new tensor memory. */
#include "core/core.h"
#include "test.h"

static void step(kiln_tensor *w1, kiln_tensor *w2, kiln_tensor *x, kiln_tensor *y) {
  kiln_scope_begin();
  kiln_tensor *h = kiln_relu(kiln_linear(x, w1, NULL));
  kiln_tensor *loss = kiln_cross_entropy(kiln_linear(h, w2, NULL), y, KILN_REDUCTION_MEAN);
  kiln_backward(loss, NULL);
  kiln_no_grad_begin();
  kiln_copy_(w1, kiln_sub(w1, kiln_mul_scalar(kiln_tensor_grad(w1), 0.1)));
  kiln_copy_(w2, kiln_sub(w2, kiln_mul_scalar(kiln_tensor_grad(w2), 0.1)));
  kiln_no_grad_end();
  kiln_tensor_set_grad(w1, NULL);
  kiln_tensor_set_grad(w2, NULL);
  kiln_scope_end();
}

TEST(cache_steady_state_step_mallocs_no_tensors) {
#if defined(__SANITIZE_ADDRESS__)
  test_note("skipped: sanitizer builds bypass the cache");
  return;
#endif
  kiln_generator *g = kiln_generator_new(1);
  kiln_scope_begin();
  kiln_tensor *w1 = kiln_randn(2, (int64_t[]){16, 8}, KILN_DTYPE_F32, g);
  kiln_tensor *w2 = kiln_randn(2, (int64_t[]){4, 16}, KILN_DTYPE_F32, g);
  kiln_tensor *x = kiln_randn(2, (int64_t[]){32, 8}, KILN_DTYPE_F32, g);
  kiln_tensor *y = kiln_zeros(1, (int64_t[]){32}, KILN_DTYPE_I64);
  kiln_set_requires_grad(w1, true);
  kiln_set_requires_grad(w2, true);
  step(w1, w2, x, y);
  step(w1, w2, x, y);
  int64_t h0, m0, h1, m1;
  size_t b;
  core_cache_stats(&h0, &m0, &b);
  step(w1, w2, x, y);
  core_cache_stats(&h1, &m1, &b);
  CHECK_EQ_INT(m1 - m0, 0);
  CHECK(h1 - h0 > 20);
  test_note("%lld tensors from the cache, %lld new", (long long)(h1 - h0), (long long)(m1 - m0));
  kiln_scope_end();
  kiln_generator_free(g);
}
