/* src/autograd/factored.c: weight gradients that reach a leaf's
 * AccumulateGrad as factors (x, y), meaning x^T @ y, and are multiplied
 * once, all together.
 *
 * Note [Factored weight gradients]: a loop that multiplies by a weight W
 * at every step (an RNN's h @ W_hh^T) gets one gradient contribution per
 * step, dgates_t^T @ h_t: with a batch of 32 that is T products with K =
 * 32 (a poor GEMM: each writes, and the engine then adds, a whole
 * [4H, H] matrix), where ATen's LSTM does one product with K = T * 32. A
 * DifferentiableGraph's backward whose gradient for an input is
 * mm(t(x), y) returns x and y instead (pass_factor_grads); when that
 * gradient goes to a leaf's AccumulateGrad in a plain backward, the
 * engine keeps the pairs (ag_accumulate_factored) and, when the
 * AccumulateGrad runs (after its last contributor: Note [Order]),
 * multiplies cat(x_1..x_T)^T @ cat(y_1..y_T) in one GEMM and adds that to
 * whatever arrived as plain tensors. One pair is multiplied as it was, so
 * a product met once gives the same bits as before; several are summed in
 * a different order than T separate products were (float rounding only).
 * The pairs held are bounded (FACTOR_ROWS rows): past that they are
 * multiplied into the buffer and collection starts again. Nothing is
 * found by op name of a model: any graph whose weight gradient is such a
 * product qualifies. */
#include <stdatomic.h>

#include "autograd.h"

static _Atomic long n_joined; /* products of several pairs (ag_factors_joined) */

long ag_factors_joined(void) { return atomic_load_explicit(&n_joined, memory_order_relaxed); }

void ag_factors_drop(ag_node *n) {
  for (int i = 0; i < n->n_factors; i++) {
    kiln_release(n->fx[i]);
    kiln_release(n->fy[i]);
  }
  core_free(n->fx);
  core_free(n->fy);
  n->fx = n->fy = NULL;
  n->n_factors = n->cap_factors = 0;
  n->factor_rows = 0;
}

int ag_factors_add(ag_node *n, kiln_tensor *x, kiln_tensor *y) {
  if (n->n_factors == n->cap_factors) {
    int cap = n->cap_factors ? n->cap_factors * 2 : 16;
    kiln_tensor **fx = core_realloc(n->fx, (size_t)cap * sizeof *fx);
    if (!fx) return KILN_ERR_NOMEM;
    n->fx = fx;
    kiln_tensor **fy = core_realloc(n->fy, (size_t)cap * sizeof *fy);
    if (!fy) return KILN_ERR_NOMEM;
    n->fy = fy;
    n->cap_factors = cap;
  }
  n->fx[n->n_factors] = kiln_retain(x);
  n->fy[n->n_factors++] = kiln_retain(y);
  n->factor_rows += x->shape[0];
  return 0;
}

kiln_tensor *ag_factors_take(ag_node *n) {
  kiln_tensor *r = NULL;
  if (n->n_factors == 1) {
    r = kiln_mm(kiln_t(n->fx[0]), n->fy[0]);
  } else if (n->n_factors > 1) {
    atomic_fetch_add_explicit(&n_joined, 1, memory_order_relaxed);
    kiln_tensor *x = kiln_cat(n->fx, n->n_factors, 0);
    kiln_tensor *y = x ? kiln_cat(n->fy, n->n_factors, 0) : NULL;
    r = y ? kiln_mm(kiln_t(x), y) : NULL;
  }
  ag_factors_drop(n);
  return r;
}
