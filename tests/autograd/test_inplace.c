/* tests/autograd/test_inplace.c: autograd through in-place ops (Note
 * [In-place autograd] in src/ops/inplace.c): gradients through relu_
 * after a linear, add_ residuals, masked_fill_ before a softmax and mul_
 * on non-leaves equal central finite differences in float64; a saved
 * value modified in place, a leaf written in place and a view of a leaf
 * written under autograd fail with their messages; writes through views of a non-leaf (CopySlices) give
 * finite differences' gradients. */
#include "fd_grads.h"
#include "ops/op.h"
#include "test.h"

static kiln_tensor *relu_(kiln_tensor *t) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(t)}, 1);
}
static kiln_tensor *add_(kiln_tensor *t, kiln_tensor *o) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_ADD), (op_val[]){OPV_T(t), OPV_T(o), OPV_I(1)}, 3);
}
static kiln_tensor *mul_(kiln_tensor *t, kiln_tensor *o) {
  return op_call1(KILN_OP_INPLACE(KILN_OP_MUL), (op_val[]){OPV_T(t), OPV_T(o)}, 2);
}
static kiln_tensor *total(kiln_tensor *t) { return kiln_sum(t, NULL, 0, false); }

/* relu_(linear(x, w, b)) * c, summed (nn.Linear + nn.ReLU(inplace=True)) */
static kiln_tensor *relu_after_linear(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_linear(p[0], p[1], p[2]);
  if (!relu_(h)) return NULL;
  return total(kiln_mul(h, kiln_sin(h))); /* a non-linear use of the written h */
}

TEST(inplace_grad_relu__after_linear) {
  kiln_scope_begin();
  int64_t xs[2] = {3, 4}, ws[2] = {5, 4}, bs[1] = {5};
  kiln_tensor *p[3] = {test_randn_f64(2, xs, 1), test_randn_f64(2, ws, 2), test_randn_f64(1, bs, 3)};
  test_fd_check_grads("relu_ after linear", relu_after_linear, p, 3);
  kiln_scope_end();
}

/* out = linear(x); out += x (ResNet's residual); relu_(out); sum(out^2)
 * (relu(linear(x)) += x fails in PyTorch too: relu saved its output) */
static kiln_tensor *residual(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_linear(p[0], p[1], p[2]);
  if (!add_(h, p[0]) || !relu_(h)) return NULL;
  return total(kiln_mul(h, h));
}

TEST(inplace_grad_add__residual) {
  kiln_scope_begin();
  int64_t xs[2] = {3, 4}, ws[2] = {4, 4}, bs[1] = {4};
  kiln_tensor *p[3] = {test_randn_f64(2, xs, 4), test_randn_f64(2, ws, 5), test_randn_f64(1, bs, 6)};
  test_fd_check_grads("add_ residual", residual, p, 3);
  kiln_scope_end();
}

/* mul_'s formula reads self: the in-place op saves self's old value */
static kiln_tensor *scaled(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_mul_scalar(p[0], 3.0);
  if (!mul_(h, p[1]) || !mul_(h, kiln_sin(p[1]))) return NULL; /* h = 3xy sin(y) */
  return total(kiln_sin(h));
}

TEST(inplace_grad_mul__saves_old_self) {
  kiln_scope_begin();
  int64_t s[1] = {4};
  kiln_tensor *p[2] = {test_randn_f64(1, s, 7), test_randn_f64(1, s, 8)};
  test_fd_check_grads("mul_ chain", scaled, p, 2);
  kiln_scope_end();
}

/* scores = linear(x, w); scores.masked_fill_(mask, -inf); sum(softmax(scores) * c)
 * (an attention mask); c weighs the probabilities (their plain sum is 1) */
static kiln_tensor *masked_softmax(kiln_tensor *const *p) {
  static const bool mk[12] = {0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1};
  int64_t s[2] = {3, 4};
  kiln_tensor *m = kiln_from_data(mk, 2, s, KILN_DTYPE_BOOL);
  kiln_tensor *h = kiln_linear(p[0], p[1], NULL);
  if (!m || !h ||
      !op_call1(KILN_OP_INPLACE(KILN_OP_MASKED_FILL), (op_val[]){OPV_T(h), OPV_T(m), OPV_F(-INFINITY)}, 3))
    return NULL;
  kiln_tensor *c = kiln_sin(kiln_arange(0, 12, 1, KILN_DTYPE_F64));
  return total(kiln_mul(kiln_softmax(h, 1), kiln_reshape(c, 2, s)));
}

TEST(inplace_grad_masked_fill__before_softmax) {
  kiln_scope_begin();
  int64_t xs[2] = {3, 5}, ws[2] = {4, 5};
  kiln_tensor *p[2] = {test_randn_f64(2, xs, 12), test_randn_f64(2, ws, 13)};
  test_fd_check_grads("masked_fill_ before softmax", masked_softmax, p, 2);
  kiln_scope_end();
}

TEST(inplace_version_counter_error_names_the_op) {
  kiln_scope_begin();
  int64_t s[1] = {3};
  kiln_tensor *x = test_randn_f64(1, s, 9);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_sigmoid(x); /* saves its output */
  CHECK(mul_(y, kiln_scalar(2.0, KILN_DTYPE_F64)) == y);
  CHECK(kiln_backward(total(y), NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "one of the variables needed for gradient computation has been modified by "
                     "an inplace operation");
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::sigmoid");
  CHECK_STR_CONTAINS(kiln_last_error(), "is at version 1; expected version 0");
  kiln_scope_end();
}

TEST(inplace_on_leaf_requiring_grad_is_an_error) {
  kiln_scope_begin();
  int64_t s[1] = {3};
  kiln_tensor *x = test_randn_f64(1, s, 10);
  kiln_set_requires_grad(x, true);
  CHECK(relu_(x) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "a leaf Variable that requires grad is being used in an in-place operation.");
  kiln_no_grad_begin(); /* an optimizer's update */
  CHECK(relu_(x) == x);
  kiln_no_grad_end();
  for (int i = 0; i < 3; i++) CHECK(core_get_flat(x, i) >= 0);
  kiln_scope_end();
}

/* Note [CopySlices]: h = x * 2; h[0].clamp_(min=0); h[1].add_(x[0]);
 * w = h.t()[1:3] (a narrowed transpose); w.mul_(y); then h and w read on
 * (a view made before a later write of its base is not read again: its
 * history would be stale) */
static kiln_tensor *through_views(kiln_tensor *const *p) {
  kiln_tensor *h = kiln_mul_scalar(p[0], 2.0);
  /* clamp_, not relu_: relu_ saves its result, h[0], which the next
   * write to h modifies (PyTorch's backward fails then too: Note
   * [In-place saved result]) */
  kiln_tensor *row0 = kiln_select(h, 0, 0);
  if (!op_call1(KILN_OP_INPLACE(KILN_OP_CLAMP), (op_val[]){OPV_T(row0), OPV_F(0), OPV_NONE}, 3))
    return NULL;
  if (!add_(kiln_select(h, 0, 1), kiln_select(p[0], 0, 0))) return NULL;
  kiln_tensor *w = kiln_narrow(kiln_t(h), 0, 1, 2);
  if (!mul_(w, kiln_reshape(p[1], 2, (int64_t[]){2, 1}))) return NULL;
  return kiln_add(total(kiln_mul(h, kiln_sin(h))), total(kiln_mul(w, w)));
}

TEST(inplace_grad_through_views_copy_slices) {
  kiln_scope_begin();
  int64_t s[2] = {2, 3}, ys[1] = {2};
  kiln_tensor *p[2] = {test_randn_f64(2, s, 14), test_randn_f64(1, ys, 15)};
  test_fd_check_grads("in-place through views", through_views, p, 2);
  kiln_scope_end();
}

/* v = h[1]; h.add_(v * v): the base's new history holds the node that
 * saved its view, a reference cycle unless the saved view drops its base
 * (make test SAN=1 would find the leak); the backward fails as PyTorch's
 * (v was modified after mul saved it), and writing v is refused */
TEST(inplace_base_written_with_its_saved_view) {
  kiln_scope_begin();
  int64_t s[2] = {3, 2};
  kiln_tensor *x = test_randn_f64(2, s, 16);
  kiln_set_requires_grad(x, true);
  kiln_tensor *h = kiln_mul_scalar(x, 2.0), *v = kiln_select(h, 0, 1);
  CHECK(add_(h, kiln_mul(v, v)) == h);
  CHECK(kiln_backward(total(h), NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "modified by an inplace operation");
  CHECK(relu_(v) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "CopySlices");
  kiln_scope_end();
}

TEST(inplace_on_view_under_autograd_is_a_clear_error) {
  kiln_scope_begin();
  int64_t s[2] = {2, 3};
  kiln_tensor *x = test_randn_f64(2, s, 11);
  kiln_set_requires_grad(x, true);
  /* a view of a leaf that requires grad: PyTorch's error */
  CHECK(relu_(kiln_select(x, 0, 0)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "a view of a leaf Variable that requires grad is being used in an in-place "
                     "operation.");
  /* (a view of a tensor without history written with one that has it is
   * CopySlices: test_view_no_history.c) */
  kiln_tensor *z = kiln_zeros(2, s, KILN_DTYPE_F64);
  /* without autograd, writing through a view writes the base */
  kiln_no_grad_begin();
  CHECK(add_(kiln_select(z, 0, 1), kiln_scalar(1.0, KILN_DTYPE_F64)) != NULL);
  kiln_no_grad_end();
  CHECK(core_get_flat(z, 3) == 1 && core_get_flat(z, 0) == 0);
  kiln_scope_end();
}
