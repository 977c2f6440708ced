/* tests/ops/test_oom_scope.c: an op whose output cannot be registered with
 * the open scope (the scope's list cannot grow) fails with an error and
 * returns no tensor: it used to return the tensor the scope had already
 * released (a use-after-free). */
#include "core/core.h"
#include "test.h"

/* Calls f at every allocation-failure point k (until a call makes no
 * failing allocation) with the scope's list just full, so that
 * registering the output needs it to grow; a call that hit its failure
 * must return NULL with an out-of-memory error. Returns the points hit. */
static int sweep_full_scope(kiln_tensor *(*f)(kiln_tensor *, kiln_tensor *), bool grad) {
  int hit = 0;
  for (long k = 1; k < 100; k++) {
    kiln_scope_begin();
    int64_t sh[1] = {3};
    kiln_tensor *a = kiln_full(1, sh, 2.0, KILN_DTYPE_F32);
    kiln_tensor *b = kiln_full(1, sh, 5.0, KILN_DTYPE_F32);
    if (grad) kiln_set_requires_grad(a, true);
    /* 2 tensors so far; fill the first 64-entry block to its last slot */
    for (int i = 2; i < 64; i++) kiln_scalar(i, KILN_DTYPE_F32);
    core_alloc_fail_at(k);
    kiln_tensor *r = f(a, b);
    long made = core_alloc_fail_at(0);
    bool failed = made >= k;
    if (failed) {
      hit++;
      CHECK_MSG(r == NULL, "allocation %ld failed but the op returned a tensor", k);
      CHECK_STR_CONTAINS(kiln_last_error(), "out of memory");
    } else {
      CHECK(r != NULL);
      if (r) CHECK_NEAR(core_get_flat(r, 2), f == kiln_add ? 7.0 : 10.0, 0);
    }
    kiln_scope_end();
    if (!failed) break;
  }
  return hit;
}

TEST(op_output_unregistered_in_a_full_scope_is_an_error) {
  CHECK(sweep_full_scope(kiln_add, false) >= 2);
  CHECK(sweep_full_scope(kiln_mul, true) >= 2);
}
