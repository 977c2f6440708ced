/* tests/core/test_cache.c: the storage cache (Note [Storage cache]): a
 * repeated training step allocates no new tensor memory; the small-object
 * cache (Note [Small-object cache]) in alloc.c; and a thread's caches freed
 * when it exits (Note [Thread exit]). */
#include <pthread.h>
#include <string.h>

#include "core/core.h"
#include "ops/op.h"
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

/* Note [Small-object cache]: recycled blocks come back zeroed from
 * core_calloc, realloc keeps the contents across classes and into and out
 * of large blocks, and a size that overflows fails cleanly. */
TEST(small_object_cache_recycles_and_reallocs) {
  unsigned char *a = core_alloc(40);
  CHECK(a != NULL);
  memset(a, 0xab, 40);
  core_free(a);
  unsigned char *z = core_calloc(5, 8); /* same class: likely the same block */
  CHECK(z != NULL);
  int nonzero = 0;
  for (int i = 0; i < 40; i++) nonzero += z[i] != 0;
  CHECK_EQ_INT(nonzero, 0);
  for (int i = 0; i < 40; i++) z[i] = (unsigned char)i;
  /* grow within the class, then across small classes, then to a large block */
  size_t sizes[] = {48, 200, 5000, 100, 7};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    z = core_realloc(z, sizes[k]);
    CHECK(z != NULL);
    if (!z) return;
    size_t keep = sizes[k] < 40 ? sizes[k] : 40;
    int bad = 0;
    for (size_t i = 0; i < keep; i++) bad += z[i] != (unsigned char)i;
    CHECK_MSG(bad == 0, "realloc to %zu lost contents", sizes[k]);
    if (sizes[k] > 40) memset(z + 40, 0xcd, sizes[k] - 40);
  }
  core_free(z);
  CHECK(core_calloc(SIZE_MAX / 2, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "out of memory");
  CHECK(core_alloc(SIZE_MAX - 4) == NULL);
  void *e = core_alloc(0); /* a valid, distinct block */
  CHECK(e != NULL);
  core_free(e);
  core_free(NULL);
}

/* Runs tensor work (a product through GEMM, temporaries released) on its
 * own thread; reports how many bytes the thread's storage cache held. */
static void *cache_worker(void *out) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(2);
  kiln_tensor *a = kiln_randn(2, (int64_t[]){200, 300}, KILN_DTYPE_F32, g);
  kiln_tensor *b = kiln_randn(2, (int64_t[]){300, 100}, KILN_DTYPE_F32, g);
  kiln_relu(kiln_mm(a, b));
  kiln_generator_free(g);
  kiln_scope_end();
  int64_t h, m;
  core_cache_stats(&h, &m, (size_t *)out);
  return NULL;
}

/* Note [Thread exit]: a thread that cached storage, small objects and GEMM
 * buffers releases them as it exits. */
TEST(thread_exit_releases_its_caches) {
  long before = core_threads_released();
  size_t held = 0;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, cache_worker, &held) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  /* the worker, and any OpenMP thread its parallel GEMM started and ended */
  long released = core_threads_released() - before;
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(held > 0); /* it did keep storage */
  CHECK(released >= 1);
#else
  /* sanitizer builds bypass the storage and small-object caches; only
   * kiln's own GEMM keeps (packing) buffers there */
  CHECK(OP_SGEMM_NATIVE ? released >= 1 : released == 0);
#endif
}
