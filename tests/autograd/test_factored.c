/* tests/autograd/test_factored.c: Note [Factored weight gradients]: a
 * scripted recurrent loop's weight gradient reaches its leaf as factors,
 * multiplied once for all steps, and equals eager autograd's; a weight
 * that is not a leaf, kiln_grad (which captures), retain_graph run twice,
 * and a float32 loop all give the eager gradients too. */
#include "test.h"

#include "autograd/autograd.h"
#include "kiln.h"

/* h_{t+1} = tanh(x_t + h_t @ w^T), returns the last h */
static const char *RNN =
    "graph(%x : Tensor,\n"
    "      %h0 : Tensor,\n"
    "      %w : Tensor):\n"
    "  %none : NoneType = prim::Constant()\n"
    "  %true : bool = prim::Constant[value=1]()\n"
    "  %zero : int = prim::Constant[value=0]()\n"
    "  %one : int = prim::Constant[value=1]()\n"
    "  %xs : Tensor[] = aten::unbind(%x, %zero)\n"
    "  %n : int = aten::len(%xs)\n"
    "  %h : Tensor = prim::Loop(%n, %true, %h0)\n"
    "    block0(%t : int, %hc : Tensor):\n"
    "      %xt : Tensor = aten::__getitem__(%xs, %t)\n"
    "      %p : Tensor = aten::linear(%hc, %w, %none)\n"
    "      %a : Tensor = aten::add(%xt, %p, %one)\n"
    "      %hn : Tensor = aten::tanh(%a)\n"
    "      -> (%true, %hn)\n"
    "  return (%h)\n";

enum { NT = 6, B = 5, H = 7 };

static kiln_value T(kiln_tensor *t) { return (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t}; }

static kiln_tensor *rnn_eager(kiln_tensor *x, kiln_tensor *h, kiln_tensor *w) {
  for (int64_t t = 0; t < x->shape[0]; t++)
    h = kiln_tanh(kiln_add(kiln_select(x, 0, t), kiln_linear(h, w, NULL)));
  return h;
}

static double max_diff(kiln_tensor *a, kiln_tensor *b) {
  double v = 0;
  if (!a || !b) return INFINITY;
  kiln_item(kiln_amax(kiln_abs(kiln_sub(kiln_to_dtype(a, KILN_DTYPE_F64),
                                        kiln_to_dtype(b, KILN_DTYPE_F64))),
                      NULL, 0, false),
            &v);
  return v;
}

static kiln_function *rnn_fn(void) {
  kiln_graph *g = kiln_graph_parse(RNN, strlen(RNN));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  kiln_graph_free(g);
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  return f;
}

/* jit w.grad after backward of sum(h) on the third call (profiled, then
 * optimized), against eager's gradient of the same loss */
static void check_loop(kiln_dtype dt, double tol) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(5);
  const int64_t sx[3] = {NT, B, H}, sh[2] = {B, H}, sw[2] = {H, H};
  kiln_tensor *x = kiln_randn(3, sx, dt, g), *h0 = kiln_randn(2, sh, dt, g);
  kiln_tensor *w = kiln_mul_scalar(kiln_randn(2, sw, dt, g), 0.4);
  kiln_set_requires_grad(w, true);
  kiln_function *f = rnn_fn();
  kiln_value in[3] = {T(x), T(h0), T(w)}, out[1];
  long joined = 0;
  for (int call = 0; call < 3 && f; call++) {
    kiln_tensor_set_grad(w, NULL);
    CHECK_MSG(kiln_function_call(f, in, 3, out, 1) == 1, "%s", kiln_last_error());
    joined = ag_factors_joined();
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
  }
  /* the last backward multiplied the NT steps' pairs in one product */
  CHECK_MSG(ag_factors_joined() == joined + 1, "joined %ld -> %ld", joined, ag_factors_joined());
  kiln_tensor *we = kiln_detach(w);
  kiln_set_requires_grad(we, true);
  kiln_tensor *loss = kiln_sum(rnn_eager(x, h0, we), NULL, 0, false), *ge = NULL;
  CHECK(kiln_grad(&loss, NULL, 1, &we, 1, NULL, &ge) == KILN_OK);
  double d = max_diff(kiln_tensor_grad(w), ge);
  CHECK_MSG(d <= tol, "w.grad differs from eager by %g", d);
  /* kiln_grad captures w's gradient: no factors, same values */
  if (f) {
    CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
    kiln_tensor *s = kiln_sum(out[0].t, NULL, 0, false), *gj = NULL;
    CHECK(kiln_grad(&s, NULL, 1, &w, 1, NULL, &gj) == KILN_OK);
    d = max_diff(gj, ge);
    CHECK_MSG(d <= tol, "kiln_grad differs from eager by %g", d);
    /* retain_graph, twice: each backward accumulates the whole gradient */
    kiln_tensor_set_grad(w, NULL);
    CHECK(kiln_function_call(f, in, 3, out, 1) == 1);
    s = kiln_sum(out[0].t, NULL, 0, false);
    kiln_backward_opts o = {.retain_graph = true};
    CHECK(kiln_backward_ex(&s, NULL, 1, &o) == KILN_OK);
    CHECK(kiln_backward_ex(&s, NULL, 1, &o) == KILN_OK);
    d = max_diff(kiln_tensor_grad(w), kiln_mul_scalar(ge, 2.0));
    CHECK_MSG(d <= 2 * tol, "two backwards differ from twice eager by %g", d);
    /* a weight that is not a leaf (w * 1 feeds the loop): plain products */
    kiln_tensor_set_grad(w, NULL);
    kiln_value in2[3] = {T(x), T(h0), T(kiln_mul_scalar(w, 1.0))};
    CHECK(kiln_function_call(f, in2, 3, out, 1) == 1);
    CHECK(kiln_backward(kiln_sum(out[0].t, NULL, 0, false), NULL) == KILN_OK);
    d = max_diff(kiln_tensor_grad(w), ge);
    CHECK_MSG(d <= tol, "non-leaf weight: differs from eager by %g", d);
  }
  kiln_function_free(f);
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(factored_loop_weight_grad_f64_equals_eager) { check_loop(KILN_DTYPE_F64, 1e-12); }
TEST(factored_loop_weight_grad_f32_equals_eager) { check_loop(KILN_DTYPE_F32, 2e-5); }
