/* tests/nn/test_optim_atomic.c: an optimizer step is all or nothing under
 * allocation failure (issue #20: "after any failed allocation, the call
 * returns an error and no result, and everything it touched is as before").
 * At every allocation N of a step (the second one, so that every buffer
 * and the step count matter) the Nth allocation fails: the step either
 * succeeds with exactly the values of a step that never failed, or fails
 * saying out of memory with every parameter, every buffer and the step
 * count bit-identical to before; a retry then equals the never-failed
 * step. SGD (plain, momentum, Nesterov with weight decay), Adam with L2
 * decay, AdamW. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "nn/nn.h"
#include "test.h"

typedef struct opt_run {
  kiln_generator *g;
  kiln_nn_module *m;
  kiln_optim *o;
} opt_run;

/* Every parameter's grad: seeded normal numbers, different per call. */
static void set_grads(opt_run *r) {
  kiln_scope_begin();
  for (int i = 0; i < kiln_nn_module_n_params(r->m); i++) {
    kiln_tensor *p = kiln_nn_module_param(r->m, i);
    kiln_tensor *gr = kiln_randn(p->ndim, p->shape, KILN_DTYPE_F32, r->g);
    CHECK(gr && kiln_tensor_set_grad(p, gr) == KILN_OK);
  }
  kiln_scope_end();
}

/* Two linear layers, one step taken, the next step's grads set. */
static void run_new(opt_run *r, const kiln_optim_opts *oo) {
  r->g = kiln_generator_new(7);
  r->m = kiln_nn_module_new();
  CHECK(kiln_nn_linear_new(r->m, "fc1", 5, 4, true, r->g) != NULL);
  CHECK(kiln_nn_linear_new(r->m, "fc2", 4, 3, true, r->g) != NULL);
  r->o = kiln_optim_new(r->m, oo);
  CHECK(r->o != NULL);
  set_grads(r);
  CHECK(kiln_optim_step(r->o) == KILN_OK);
  set_grads(r);
}

static void run_free(opt_run *r) {
  kiln_optim_free(r->o);
  kiln_nn_module_free(r->m);
  kiln_generator_free(r->g);
}

/* The bytes of every parameter and buffer, then the step count. */
static unsigned char *snapshot(const opt_run *r, size_t *n) {
  int n_p = kiln_nn_module_n_params(r->m), n_s = kiln_optim_n_state(r->o);
  size_t total = sizeof(int64_t);
  for (int i = 0; i < n_p + n_s; i++) {
    kiln_tensor *t = i < n_p ? kiln_nn_module_param(r->m, i) : kiln_optim_state(r->o, i - n_p);
    total += (size_t)kiln_tensor_numel(t) * kiln_dtype_size(t->dtype);
  }
  unsigned char *s = malloc(total);
  size_t k = 0;
  for (int i = 0; s && i < n_p + n_s; i++) {
    kiln_tensor *t = i < n_p ? kiln_nn_module_param(r->m, i) : kiln_optim_state(r->o, i - n_p);
    CHECK(core_is_contiguous(t));
    size_t b = (size_t)kiln_tensor_numel(t) * kiln_dtype_size(t->dtype);
    memcpy(s + k, core_data(t), b);
    k += b;
  }
  int64_t steps = kiln_optim_steps(r->o);
  if (s) memcpy(s + k, &steps, sizeof steps);
  *n = total;
  return s;
}

static bool same(const unsigned char *a, size_t na, const unsigned char *b, size_t nb) {
  return a && b && na == nb && memcmp(a, b, na) == 0;
}

/* The sweep for one optimizer; returns the failure points hit. */
static int sweep(const char *what, const kiln_optim_opts *oo) {
  opt_run ref;
  size_t n_want, n_before, n;
  run_new(&ref, oo);
  unsigned char *before = snapshot(&ref, &n_before);
  CHECK(kiln_optim_step(ref.o) == KILN_OK);
  unsigned char *want = snapshot(&ref, &n_want);
  CHECK_MSG(!same(before, n_before, want, n_want), "%s: the step changed nothing", what);
  run_free(&ref);
  int hit = 0, bad = 0;
  for (long k = 1; k < 100000 && bad < 3; k++) {
    opt_run r;
    run_new(&r, oo);
    unsigned char *pre = snapshot(&r, &n);
    CHECK(same(pre, n, before, n_before)); /* the runs are deterministic */
    core_alloc_fail_at(k);
    int rc = kiln_optim_step(r.o);
    long made = core_alloc_fail_at(0);
    unsigned char *got = snapshot(&r, &n);
    if (rc == 0) {
      if (!same(got, n, want, n_want))
        bad++, test_fail(__FILE__, __LINE__, "%s: allocation %ld %s but the step gave other values",
                         what, k, made >= k ? "failed" : "did not fail");
    } else {
      if (made < k || rc != KILN_ERR_NOMEM || !strstr(kiln_last_error(), "out of memory"))
        bad++, test_fail(__FILE__, __LINE__, "%s: allocation %ld: status %d, \"%s\"", what, k, rc,
                         kiln_last_error());
      if (!same(got, n, before, n_before))
        bad++, test_fail(__FILE__, __LINE__,
                         "%s: allocation %ld failed and the step changed parameters, buffers or "
                         "the step count", what, k);
      free(got);
      CHECK(kiln_optim_step(r.o) == KILN_OK); /* the retry */
      got = snapshot(&r, &n);
      if (!same(got, n, want, n_want))
        bad++, test_fail(__FILE__, __LINE__, "%s: allocation %ld: the retry gave other values",
                         what, k);
    }
    free(pre);
    free(got);
    run_free(&r);
    if (made < k) break;
    hit++;
  }
  free(before);
  free(want);
  return hit;
}

TEST(oom_sweep_optim_step_all_or_nothing) {
  kiln_optim_opts sgd = {.kind = KILN_OPTIM_SGD, .lr = 0.1};
  kiln_optim_opts mom = {.kind = KILN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
  kiln_optim_opts nest = {.kind = KILN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9, .nesterov = true,
                          .weight_decay = 0.01};
  kiln_optim_opts adam = {.kind = KILN_OPTIM_ADAM, .lr = 0.01, .weight_decay = 0.01};
  kiln_optim_opts adamw = {.kind = KILN_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.01};
  nn_sgd_fused_enabled = false; /* the ops' allocations (Note [Fused SGD]) */
  int h1 = sweep("sgd", &sgd), h2 = sweep("sgd momentum", &mom);
  int h3 = sweep("sgd nesterov", &nest), h4 = sweep("adam", &adam), h5 = sweep("adamw", &adamw);
  nn_sgd_fused_enabled = true;
  test_note("failure points: sgd %d, momentum %d, nesterov %d, adam %d, adamw %d", h1, h2, h3, h4,
            h5);
  CHECK(h1 >= 4 && h2 >= 4 && h3 > 8 && h4 > 20 && h5 > 20);
}
