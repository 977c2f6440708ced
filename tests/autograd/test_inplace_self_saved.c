/* tests/autograd/test_inplace_self_saved.c: an in-place op whose other
 * operand is self (y.mul_(y)) saved self for its backward, and self then
 * took the node as its grad_fn: node -> y -> node, a reference cycle that
 * leaked both (found by fuzz/fuzz_exec.c under LeakSanitizer). The node
 * now keeps a data alias of self, and the backward fails as PyTorch's
 * does (self was modified after it was saved). */
#include <math.h>

#include "test.h"

#include "autograd/autograd.h"
#include "core/core.h"
#include "kiln.h"

TEST(inplace_op_saving_self_makes_no_reference_cycle) {
  kiln_scope_begin();
  float xv[2] = {1, 2}, wv[4] = {1, 0, 0, 1};
  int64_t xs[2] = {1, 2}, ws[2] = {2, 2};
  kiln_tensor *x = kiln_from_data(xv, 2, xs, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_from_data(wv, 2, ws, KILN_DTYPE_F32);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_retain(kiln_matmul(x, w)); /* [1, 2], not a leaf */
  CHECK_EQ_INT(y->refcount, 2); /* ours and the scope's */
  CHECK(kiln_mul_(y, y) == 0);
  float v[2] = {0};
  kiln_tensor_copy_to(y, v, KILN_DTYPE_F32);
  CHECK_NEAR(v[0], 1, 0);
  CHECK_NEAR(v[1], 4, 0);
  CHECK_STR_CONTAINS(kiln_grad_fn_name(y), "mul");
  /* y: ours, the scope's, the scope's of the call's result; not the node's */
  CHECK_EQ_INT(y->refcount, 3);
  ag_node *n = y->ag ? y->ag->grad_fn : NULL;
  CHECK(n != NULL);
  for (int i = 0; n && i < n->n_saved; i++) CHECK_MSG(n->saved[i].t != y, "saved[%d] is y", i);
  kiln_tensor *s = kiln_sum(y, NULL, 0, false);
  CHECK(kiln_backward(s, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "modified by an inplace operation");
  kiln_scope_end();
  kiln_release(y);
}

/* The same cycle one step removed: y.mul_(cos(clamp(y))) — clamp's node
 * saved y, cos's node points at clamp's, and mul_'s node (y's new grad_fn)
 * at cos's: y -> mul -> cos -> clamp -> y (fuzz_exec, LeakSanitizer, the
 * graph `%v7 = aten::mul_(%v2, %v6)` with %v6 = cos(clamp(%v2))). Every
 * node made after y's old grad_fn that saved y now holds a data alias. */
TEST(inplace_op_whose_operand_saved_self_makes_no_reference_cycle) {
  kiln_scope_begin();
  float xv[2] = {0.5f, 2}, wv[4] = {1, 0, 0, 1};
  int64_t xs[2] = {1, 2}, ws[2] = {2, 2};
  kiln_tensor *x = kiln_from_data(xv, 2, xs, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_from_data(wv, 2, ws, KILN_DTYPE_F32);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_retain(kiln_matmul(x, w)); /* [1, 2], not a leaf */
  kiln_tensor *c = kiln_clamp(y, -1.5, 1.5);       /* saves y */
  ag_node *clamp_node = c && c->ag ? c->ag->grad_fn : NULL;
  CHECK(clamp_node != NULL);
  kiln_tensor *k = kiln_cos(c);
  CHECK(kiln_mul_(y, k) == 0);
  float v[2] = {0};
  kiln_tensor_copy_to(y, v, KILN_DTYPE_F32);
  CHECK_NEAR(v[0], 0.5 * cos(0.5), 1e-6); /* cos(clamp(y)) * y */
  CHECK_NEAR(v[1], 2 * cos(1.5), 1e-6);
  /* y: ours, the scope's, the scope's of mul_'s result; not clamp's node */
  CHECK_EQ_INT(y->refcount, 3);
  for (int i = 0; clamp_node && i < clamp_node->n_saved; i++)
    CHECK_MSG(clamp_node->saved[i].t != y, "clamp's saved[%d] is y", i);
  kiln_tensor *s = kiln_sum(y, NULL, 0, false);
  CHECK(kiln_backward(s, NULL) < 0); /* clamp saw y before mul_ wrote it */
  CHECK_STR_CONTAINS(kiln_last_error(), "modified by an inplace operation");
  kiln_scope_end();
  kiln_release(y);
}

/* The same after a rebase in between: c = clamp(y) saved y, then y.add_(x)
 * gave y a newer grad_fn, then y.mul_(cos(c)): clamp's node is older than
 * y's grad_fn before mul_, yet it saved y (y was made before both), so the
 * walk may not stop at that grad_fn's age: y -> mul -> cos -> clamp -> y
 * leaked (fuzz_exec, LeakSanitizer: indirect leaks only, a cycle). The
 * bound is the node that made y. */
TEST(inplace_op_after_a_rebase_whose_operand_saved_self_makes_no_reference_cycle) {
  kiln_scope_begin();
  float xv[2] = {0.5f, 2}, wv[4] = {1, 0, 0, 1};
  int64_t xs[2] = {1, 2}, ws[2] = {2, 2};
  kiln_tensor *x = kiln_from_data(xv, 2, xs, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_from_data(wv, 2, ws, KILN_DTYPE_F32);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_retain(kiln_matmul(x, w)); /* [1, 2], not a leaf */
  kiln_tensor *c = kiln_clamp(y, -1.5, 1.5);       /* saves y */
  ag_node *clamp_node = c && c->ag ? c->ag->grad_fn : NULL;
  CHECK(clamp_node != NULL);
  CHECK(kiln_add_(y, x, 1.0) == 0); /* y = 2 x, a newer grad_fn */
  kiln_tensor *k = kiln_cos(c);
  CHECK(kiln_mul_(y, k) == 0);
  float v[2] = {0};
  kiln_tensor_copy_to(y, v, KILN_DTYPE_F32);
  CHECK_NEAR(v[0], 1 * cos(0.5), 1e-6); /* (y + x) * cos(clamp(y)) */
  CHECK_NEAR(v[1], 4 * cos(1.5), 1e-6);
  for (int i = 0; clamp_node && i < clamp_node->n_saved; i++)
    CHECK_MSG(clamp_node->saved[i].t != y, "clamp's saved[%d] is y", i);
  CHECK_EQ_INT(y->refcount, 4); /* ours, the scope's, add_'s and mul_'s results' */
  kiln_tensor *s = kiln_sum(y, NULL, 0, false);
  CHECK(kiln_backward(s, NULL) < 0); /* clamp saw y before the writes */
  CHECK_STR_CONTAINS(kiln_last_error(), "modified by an inplace operation");
  kiln_scope_end();
  kiln_release(y);
}
