/* tests/nn/test_optim_oom.c: an out-of-memory inside an optimizer step
 * says out of memory (issue #20: it was reported as "aten::add_: operand 1
 * must be a tensor or a number, got None", Note [Missing operand] in
 * src/ops/dispatch.c), for SGD with momentum, Nesterov and weight decay,
 * and Adam(W), at every allocation of the step. */
#include <stdlib.h>

#include "core/core.h"
#include "nn/nn.h"
#include "test.h"

static int sweep(const kiln_optim_opts *oo, int *n_hit) {
  kiln_generator *g = kiln_generator_new(4);
  kiln_nn_module *m = kiln_nn_module_new();
  CHECK(kiln_nn_linear_new(m, "fc", 5, 3, true, g) != NULL);
  kiln_optim *o = kiln_optim_new(m, oo);
  CHECK(o != NULL);
  int bad = 0;
  *n_hit = 0;
  for (long k = 1; o && k < 100000; k++) {
    kiln_scope_begin();
    for (int i = 0; i < kiln_nn_module_n_params(m); i++) {
      kiln_tensor *p = kiln_nn_module_param(m, i);
      kiln_tensor *gr = kiln_full(p->ndim, p->shape, 0.25, KILN_DTYPE_F32);
      CHECK(kiln_tensor_set_grad(p, gr) == KILN_OK);
    }
    core_alloc_fail_at(k);
    int rc = kiln_optim_step(o);
    long made = core_alloc_fail_at(0);
    kiln_scope_end();
    if (rc < 0) {
      CHECK_MSG(made >= k, "the step failed without a failed allocation: %s", kiln_last_error());
      if (!strstr(kiln_last_error(), "out of memory") || rc != KILN_ERR_NOMEM) {
        if (bad++ < 3)
          test_fail(__FILE__, __LINE__, "allocation %ld: status %d, \"%s\"", k, rc,
                    kiln_last_error());
      }
    }
    if (made < k) break;
    (*n_hit)++;
  }
  kiln_optim_free(o);
  kiln_nn_module_free(m);
  kiln_generator_free(g);
  return bad;
}

TEST(optim_out_of_memory_says_out_of_memory) {
  kiln_optim_opts sgd = {.kind = KILN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .nesterov = true,
                         .weight_decay = 0.01};
  kiln_optim_opts adam = {.kind = KILN_OPTIM_ADAMW, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999,
                          .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim_opts adam2 = adam;
  adam2.kind = KILN_OPTIM_ADAM;
  int h1, h2, h3;
  nn_sgd_fused_enabled = false; /* the ops' allocations (Note [Fused SGD]) */
  CHECK_EQ_INT(sweep(&sgd, &h1), 0);
  nn_sgd_fused_enabled = true;
  CHECK_EQ_INT(sweep(&adam, &h2), 0);
  CHECK_EQ_INT(sweep(&adam2, &h3), 0);
  CHECK(h1 > 5 && h2 > 10 && h3 > 10);
  test_note("%d SGD, %d AdamW, %d Adam failure points", h1, h2, h3);
}
