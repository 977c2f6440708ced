/* tests/autograd/test_view_no_history.c: views of tensors without autograd
 * history (Note [Views without history] in src/autograd/views.c), as
 * PyTorch: an in-place write with an operand that requires grad, through
 * such a view or to its base, is recorded (CopySlices on the base, the
 * other views coming to require grad); detach's output is no view; a view
 * made under no_grad is refused such a write; no reference cycle is left
 * (make test SAN=1 finds leaks). Gradients are computed by hand; the same
 * programs' PyTorch answers are the mutation goldens
 * write_view_of_temp_without_grad and write_base_of_views_without_grad
 * (scripts/golden/mutation.py). The random-graph oracle found the first
 * (a sweep's seed 29211, fuzz_exec). */
#include "ops/op.h"
#include "test.h"

static kiln_tensor *add_(kiln_tensor *t, kiln_tensor *o) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_ADD), (op_val[]){OPV_T(t), OPV_T(o), OPV_I(1)}, 3);
}
static kiln_tensor *mul_(kiln_tensor *t, kiln_tensor *o) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_MUL), (op_val[]){OPV_T(t), OPV_T(o)}, 2);
}
static kiln_tensor *total(kiln_tensor *t) { return kiln_sum(t, NULL, 0, false); }
static kiln_tensor *f64(const double *v, int nd, const int64_t *shape) {
  return kiln_from_data(v, nd, shape, KILN_DTYPE_F64);
}
static void check_values(kiln_tensor *t, const double *want, int n, const char *what) {
  double got[16] = {0};
  CHECK_MSG(t && kiln_tensor_numel(t) == n && kiln_tensor_copy_to(t, got, KILN_DTYPE_F64) == 0,
            "%s: %s", what, t ? kiln_last_error() : "missing");
  for (int i = 0; i < n; i++)
    CHECK_MSG(got[i] == want[i], "%s[%d]: %.9g, want %.9g", what, i, got[i], want[i]);
}

/* z = zeros(2, 3) (no history); z[1] += w; loss = sum(z * c) +
 * 10 sum(z[1]): the write is CopySlices on z, and z[1] requires grad too,
 * so dloss/dw = c[1] + 10 = (12, 13, 14) */
TEST(view_without_history_add__is_copy_slices_on_its_base) {
  kiln_scope_begin();
  int64_t s[2] = {2, 3}, ws[1] = {3};
  double wv[3] = {1, 2, 3}, cv[6] = {1, 1, 1, 2, 3, 4};
  kiln_tensor *z = kiln_zeros(2, s, KILN_DTYPE_F64), *w = f64(wv, 1, ws), *c = f64(cv, 2, s);
  kiln_set_requires_grad(w, true);
  kiln_tensor *v = kiln_select(z, 0, 1);
  kiln_clear_error();
  CHECK_MSG(add_(v, w) == v, "add_ through a view of a tensor without history: %s",
            kiln_last_error());
  CHECK(kiln_requires_grad(z) && kiln_requires_grad(v));
  check_values(z, (double[]){0, 0, 0, 1, 2, 3}, 6, "z");
  kiln_tensor *loss = kiln_add(total(kiln_mul(z, c)), kiln_mul_scalar(total(v), 10.0));
  CHECK(kiln_backward(loss, NULL) == 0);
  check_values(kiln_tensor_grad(w), (double[]){12, 13, 14}, 3, "dloss/dw");
  kiln_scope_end();
}

/* b = [[1, 2], [3, 4]] (no history); v = b.t(); v *= y; loss = sum(b * b):
 * b = v.t() after the write, dloss/dy = 2 v_new v_old elementwise =
 * 2 [[5, 18], [14, 32]] * [[1, 3], [2, 4]] = [[10, 108], [56, 256]] */
TEST(view_without_history_mul__gradient_through_a_transpose) {
  kiln_scope_begin();
  int64_t s[2] = {2, 2};
  double bv[4] = {1, 2, 3, 4}, yv[4] = {5, 6, 7, 8};
  kiln_tensor *b = kiln_clone(f64(bv, 2, s)), *y = f64(yv, 2, s);
  kiln_set_requires_grad(y, true);
  kiln_tensor *v = kiln_t(b);
  kiln_clear_error();
  CHECK_MSG(mul_(v, y) == v, "mul_ through a transpose: %s", kiln_last_error());
  check_values(b, (double[]){5, 14, 18, 32}, 4, "b");
  CHECK(kiln_backward(total(kiln_mul(b, b)), NULL) == 0);
  check_values(kiln_tensor_grad(y), (double[]){10, 108, 56, 256}, 4, "dloss/dy");
  kiln_scope_end();
}

/* b = [1, 2, 3] (no history); v1 = b[0:2], v2 = b[1:3]; v2 += w: v1 (made
 * before, never written itself) requires grad now, as PyTorch's view of a
 * base that does; loss = sum(v1 * v1) = 1 + 12^2: dloss/dw = (2 * 12, 0) */
TEST(view_without_history_sees_a_sibling_write_and_requires_grad) {
  kiln_scope_begin();
  int64_t s[1] = {3}, ws[1] = {2};
  double bv[3] = {1, 2, 3}, wv[2] = {10, 20};
  kiln_tensor *b = kiln_clone(f64(bv, 1, s)), *w = f64(wv, 1, ws);
  kiln_set_requires_grad(w, true);
  kiln_tensor *v1 = kiln_narrow(b, 0, 0, 2), *v2 = kiln_narrow(b, 0, 1, 2);
  kiln_clear_error();
  CHECK_MSG(add_(v2, w) == v2, "add_ through a view: %s", kiln_last_error());
  CHECK_MSG(kiln_requires_grad(v1), "the sibling view does not require grad");
  check_values(v1, (double[]){1, 12}, 2, "v1");
  CHECK(kiln_backward(total(kiln_mul(v1, v1)), NULL) == 0);
  check_values(kiln_tensor_grad(w), (double[]){24, 0}, 2, "dloss/dw");
  kiln_scope_end();
}

/* b = [1, 2, 3] (no history) with a live view v = b[1:3]; b += w (kiln
 * refused it, calling b a view); then loss = sum(v * (2, 3)): v requires
 * grad, dloss/dw = (0, 2, 3) */
TEST(base_without_history_written_with_a_live_view) {
  kiln_scope_begin();
  int64_t s[1] = {3}, vs[1] = {2};
  double bv[3] = {1, 2, 3}, wv[3] = {4, 5, 6}, cv[2] = {2, 3};
  kiln_tensor *b = kiln_clone(f64(bv, 1, s)), *w = f64(wv, 1, s), *c = f64(cv, 1, vs);
  kiln_set_requires_grad(w, true);
  kiln_tensor *v = kiln_narrow(b, 0, 1, 2);
  kiln_clear_error();
  CHECK_MSG(add_(b, w) == b, "add_ to the base of a view: %s", kiln_last_error());
  CHECK(kiln_requires_grad(v));
  check_values(v, (double[]){7, 9}, 2, "v");
  CHECK(kiln_backward(total(kiln_mul(v, c)), NULL) == 0);
  check_values(kiln_tensor_grad(w), (double[]){0, 2, 3}, 3, "dloss/dw");
  kiln_scope_end();
}

/* detach's output is no view (PyTorch's non-differentiable view): writing
 * it records its own history only; the tensor it came from keeps none */
TEST(detached_tensor_written_with_grad_is_not_a_view) {
  kiln_scope_begin();
  int64_t s[1] = {2};
  double bv[2] = {1, 2}, wv[2] = {3, 5};
  kiln_tensor *b = kiln_clone(f64(bv, 1, s)), *w = f64(wv, 1, s);
  kiln_set_requires_grad(w, true);
  kiln_tensor *d = kiln_detach(b);
  kiln_clear_error();
  CHECK_MSG(mul_(d, w) == d, "mul_ of a detached tensor: %s", kiln_last_error());
  CHECK(kiln_requires_grad(d) && !kiln_requires_grad(b));
  check_values(b, (double[]){3, 10}, 2, "b (the same memory)");
  CHECK(kiln_backward(total(d), NULL) == 0);
  check_values(kiln_tensor_grad(w), (double[]){1, 2}, 2, "dloss/dw");
  kiln_scope_end();
}

/* PyTorch's rule: a view made under no_grad may not be written in place
 * with grad mode on when the write would be recorded */
TEST(view_made_under_no_grad_written_with_grad_is_an_error) {
  kiln_scope_begin();
  int64_t s[1] = {2};
  double wv[2] = {3, 5};
  kiln_tensor *b = kiln_zeros(1, s, KILN_DTYPE_F64), *w = f64(wv, 1, s);
  kiln_set_requires_grad(w, true);
  kiln_no_grad_begin();
  kiln_tensor *v = kiln_view(b, 1, s);
  kiln_no_grad_end();
  CHECK(add_(v, w) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "created in no_grad mode");
  check_values(b, (double[]){0, 0}, 2, "b (unchanged)");
  kiln_scope_end();
}

/* No reference cycle: v = b[1] (no history) saved by mul, then b += v * w:
 * b's new history holds mul's node, which holds v, which held b (the saved
 * view dropped it); the backward fails as PyTorch's (v was modified after
 * mul saved it). */
TEST(views_without_history_leave_no_reference_cycle) {
  kiln_scope_begin();
  int64_t s[2] = {2, 2}, ws[1] = {2};
  double wv[2] = {1, 2};
  kiln_tensor *b = kiln_ones(2, s, KILN_DTYPE_F64), *w = f64(wv, 1, ws);
  kiln_set_requires_grad(w, true);
  kiln_tensor *v = kiln_select(b, 0, 1);
  CHECK(add_(b, kiln_mul(v, w)) == b);
  CHECK(kiln_backward(total(b), NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "modified by an inplace operation");
  kiln_scope_end();
}

/* A view that needs no grad, saved by a backward formula, keeps its base
 * (the formula saves a data alias of it): writing it afterwards is still
 * CopySlices (kiln refused it: the saved view had dropped its base). b =
 * [1, 2]; v = b.view(2); y = v * w (saves v); v += w; loss = sum(b): dw =
 * (1, 1) (a backward through y fails on v's version, as PyTorch's). Lazy
 * too; and b.add_(v * w) with v a lazy view of b
 * leaves no reference cycle (mul's node held v, v its lazy base b, b's new
 * history mul's node: fuzz_exec's indirect leaks; make test SAN=1). */
TEST(saved_view_without_history_keeps_its_base) {
  kiln_scope_begin();
  int64_t s[1] = {2};
  double bv[2] = {1, 2}, wv[2] = {3, 5};
  for (int lazy = 0; lazy < 2; lazy++) {
    kiln_tensor *b = kiln_clone(f64(bv, 1, s)), *w = f64(wv, 1, s);
    if (lazy) b = kiln_to_lazy(b), w = kiln_to_lazy(w);
    kiln_set_requires_grad(w, true);
    kiln_tensor *v = kiln_view(b, 1, s), *y = kiln_mul(v, w);
    kiln_clear_error();
    CHECK_MSG(add_(v, w) == v, "lazy %d: add_ through a saved view: %s", lazy, kiln_last_error());
    CHECK(y && kiln_backward(total(b), NULL) == 0);
    if (lazy) CHECK(kiln_mark_step() == 0);
    kiln_tensor *g = kiln_tensor_grad(w);
    check_values(g && lazy ? kiln_to_cpu(g) : g, (double[]){1, 1}, 2, lazy ? "lazy dloss/dw" : "dloss/dw");
    kiln_tensor *b2 = kiln_clone(f64(bv, 1, s));
    if (lazy) b2 = kiln_to_lazy(b2);
    kiln_tensor *v2 = kiln_view(b2, 1, s);
    CHECK(add_(b2, kiln_mul(v2, w)) == b2);
    if (lazy) CHECK(kiln_mark_step() == 0);
  }
  kiln_scope_end();
}
