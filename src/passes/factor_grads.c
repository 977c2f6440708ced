/* src/passes/factor_grads.c: a DifferentiableGraph backward returns its
 * weight gradients x^T @ y as the factors x and y, so the engine can
 * multiply the contributions of a whole loop at once (Note [Factored
 * weight gradients] in src/autograd/factored.c). */
#include "autodiff.h"
#include "passes.h"

/* Is v 2-d as far as its type says (an unknown rank is not taken)? */
static bool is_matrix(const ir_value *v) {
  const ir_type *t = v->type;
  return t && t->kind == IR_TYPE_TENSOR && t->ndim == 2;
}

int pass_factor_grads(pass_gradient *gr) {
  ir_block *top = ir_graph_top(gr->df);
  int n = gr->n_output_vjps, done = 0;
  if (n <= 0 || ir_block_n_returns(top) != n) return 0;
  int *of = core_alloc((size_t)n * sizeof *of);
  if (!of) return KILN_ERR_NOMEM;
  for (int i = 0; i < n; i++) of[i] = -1;
  for (int i = 0; i < n; i++) {
    ir_value *w = ir_block_return(top, i);
    ir_node *mm = w->node;
    if (mm->op != KILN_OP_MM || mm->owner != top || w->n_uses != 1) continue;
    ir_value *xt = mm->inputs[0], *y = mm->inputs[1];
    ir_node *t = xt->node;
    if (t->op != KILN_OP_T || t->owner != top || !is_matrix(t->inputs[0]) || !is_matrix(y) ||
        !is_matrix(w))
      continue;
    bool twice = false; /* the same value returned for two gradients */
    for (int j = 0; j < n && !twice; j++) twice = j != i && ir_block_return(top, j) == w;
    if (twice) continue;
    if (ir_block_add_return(top, y) < 0) goto oom;
    if (!ir_node_set_input(top->ret, i, t->inputs[0])) {
      ir_block_remove_return(top, ir_block_n_returns(top) - 1);
      goto oom;
    }
    of[i] = ir_block_n_returns(top) - 1;
    done++;
  }
  if (!done) {
    core_free(of);
    return 0;
  }
  core_free(gr->factor_of);
  gr->factor_of = of;
  if (pass_dce(gr->df) < 0) return KILN_ERR_NOMEM;
  return done;
oom:
  if (done) { /* the returns already changed stay consistent with of */
    core_free(gr->factor_of);
    gr->factor_of = of;
    return KILN_ERR_NOMEM;
  }
  core_free(of);
  return KILN_ERR_NOMEM;
}
