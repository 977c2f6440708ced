/* tests/nn/test_optim_fused.c: SGD's fused in-place step (Note [Fused SGD]
 * in src/nn/optim_fused.c) equals the ops' step bit for bit over three
 * steps (plain, momentum, Nesterov with weight decay; Float and Double
 * parameters) and allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "nn/nn.h"
#include "test.h"

/* Parameters of dtype dt and an optimizer; grads seeded per step. */
typedef struct fz_run {
  kiln_generator *g;
  kiln_nn_module *m;
  kiln_optim *o;
} fz_run;

static void fz_grads(fz_run *r, kiln_dtype dt) {
  kiln_scope_begin();
  for (int i = 0; i < kiln_nn_module_n_params(r->m); i++) {
    kiln_tensor *p = kiln_nn_module_param(r->m, i);
    CHECK(kiln_tensor_set_grad(p, kiln_randn(p->ndim, p->shape, dt, r->g)) == KILN_OK);
  }
  kiln_scope_end();
}

/* The bytes of every parameter and buffer after three steps (fused or not). */
static unsigned char *fz_steps(const kiln_optim_opts *oo, kiln_dtype dt, bool fused, size_t *n,
                               bool *no_alloc) {
  fz_run r = {kiln_generator_new(11), kiln_nn_module_new(), NULL};
  /* shapes of odd sizes, and one above the loop's parallel threshold */
  static const int64_t shapes[4][2] = {{29, 37}, {29, 1}, {300, 501}, {5, 1}};
  static const char *const names[4] = {"a.weight", "a.bias", "b.weight", "b.bias"};
  kiln_scope_begin();
  for (int i = 0; i < 4; i++)
    CHECK(kiln_nn_module_add_param(r.m, names[i],
                                   kiln_randn(shapes[i][1] == 1 ? 1 : 2, shapes[i], dt, r.g)) ==
          KILN_OK);
  kiln_scope_end();
  r.o = kiln_optim_new(r.m, oo);
  CHECK(r.o != NULL);
  nn_sgd_fused_enabled = fused;
  *no_alloc = true;
  for (int s = 0; r.o && s < 3; s++) {
    fz_grads(&r, dt);
    core_alloc_fail_at(1); /* the fused step allocates nothing */
    int rc = kiln_optim_step(r.o);
    long made = core_alloc_fail_at(0);
    if (rc != KILN_OK) {
      *no_alloc = false;
      CHECK(kiln_optim_step(r.o) == KILN_OK);
    } else if (made >= 1) {
      *no_alloc = false;
    }
  }
  nn_sgd_fused_enabled = true;
  int n_p = kiln_nn_module_n_params(r.m), n_s = r.o ? kiln_optim_n_state(r.o) : 0;
  size_t total = 0, k = 0;
  for (int i = 0; i < n_p + n_s; i++) {
    kiln_tensor *t = i < n_p ? kiln_nn_module_param(r.m, i) : kiln_optim_state(r.o, i - n_p);
    total += (size_t)kiln_tensor_numel(t) * kiln_dtype_size(t->dtype);
  }
  unsigned char *b = malloc(total);
  for (int i = 0; b && i < n_p + n_s; i++) {
    kiln_tensor *t = i < n_p ? kiln_nn_module_param(r.m, i) : kiln_optim_state(r.o, i - n_p);
    size_t sz = (size_t)kiln_tensor_numel(t) * kiln_dtype_size(t->dtype);
    memcpy(b + k, core_data(t), sz);
    k += sz;
  }
  *n = total;
  kiln_optim_free(r.o);
  kiln_nn_module_free(r.m);
  kiln_generator_free(r.g);
  return b;
}

TEST(optim_sgd_fused_equals_ops_bit_for_bit) {
  /* every combination of momentum, weight decay and Nesterov: each has a
   * loop of its own (Note [Fused SGD]) */
  kiln_optim_opts cases[6] = {
      {.kind = KILN_OPTIM_SGD, .lr = 0.1},
      {.kind = KILN_OPTIM_SGD, .lr = 0.03, .momentum = 0.9},
      {.kind = KILN_OPTIM_SGD, .lr = 0.07, .momentum = 0.8, .nesterov = true,
       .weight_decay = 0.013},
      {.kind = KILN_OPTIM_SGD, .lr = 0.05, .weight_decay = 0.02},
      {.kind = KILN_OPTIM_SGD, .lr = 0.04, .momentum = 0.7, .weight_decay = 0.011},
      {.kind = KILN_OPTIM_SGD, .lr = 0.06, .momentum = 0.85, .nesterov = true}};
  kiln_dtype dts[2] = {KILN_DTYPE_F32, KILN_DTYPE_F64};
  for (int c = 0; c < 6; c++)
    for (int d = 0; d < 2; d++) {
      size_t na, nb;
      bool fused_free, ops_free;
      unsigned char *a = fz_steps(&cases[c], dts[d], true, &na, &fused_free);
      unsigned char *b = fz_steps(&cases[c], dts[d], false, &nb, &ops_free);
      CHECK_MSG(a && b && na == nb && na > 0 && memcmp(a, b, na) == 0,
                "case %d %s: fused and ops steps differ", c, kiln_dtype_name(dts[d]));
      CHECK_MSG(fused_free, "case %d %s: the fused step allocated", c, kiln_dtype_name(dts[d]));
      CHECK_MSG(!ops_free, "case %d %s: the ops' step did not allocate (not the ops?)", c,
                kiln_dtype_name(dts[d]));
      free(a);
      free(b);
    }
}
