/* tests/autograd/test_oom_sweep.c: allocation-failure sweeps (issue #20).
 * At every allocation N of an eager MLP training step (forward, loss,
 * backward, SGD step with momentum) the Nth allocation fails: the step
 * must either succeed with exactly the gradients and parameters of a step
 * that never failed, or fail with an error; after a failure in forward or
 * backward (before the optimizer has touched anything) a retry must give
 * exactly the values of a run that never failed. Under `make test SAN=1`
 * ASan checks every point for use-after-free and leaks. SWEEP_K=N in the
 * environment starts the sweep at N (to debug one point). */
#include <stdlib.h>

#include "core/core.h"
#include "test.h"

typedef struct mlp_run {
  kiln_generator *g;
  kiln_nn_module *m;
  kiln_optim *o;
} mlp_run;

static void run_new(mlp_run *r) {
  r->g = kiln_generator_new(3);
  r->m = kiln_nn_model_new("mlp", r->g);
  kiln_optim_opts oo = {.kind = KILN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
  r->o = kiln_optim_new(r->m, &oo);
}

static void run_free(mlp_run *r) {
  kiln_optim_free(r->o);
  kiln_nn_module_free(r->m);
  kiln_generator_free(r->g);
}

/* Forward + backward on a fixed batch; stage says how far it got (0
 * forward failed, 1 backward failed, 2 grads done). */
static int fwd_bwd(mlp_run *r, int *stage) {
  *stage = 0;
  kiln_scope_begin();
  kiln_generator *dg = kiln_generator_new(11);
  kiln_tensor *x = dg ? kiln_randn(4, (int64_t[]){8, 1, 28, 28}, KILN_DTYPE_F32, dg) : NULL;
  kiln_tensor *y = kiln_arange(0, 8, 1, KILN_DTYPE_I64);
  kiln_tensor *out = x && y ? kiln_nn_module_forward(r->m, x) : NULL;
  kiln_tensor *loss = out ? kiln_cross_entropy(out, y, KILN_REDUCTION_MEAN) : NULL;
  int rc = loss ? 0 : -1;
  if (rc == 0) {
    *stage = 1;
    rc = kiln_backward(loss, NULL);
    if (rc == 0) *stage = 2;
  }
  kiln_generator_free(dg);
  kiln_scope_end();
  return rc;
}

/* Flat copy of every parameter and its grad (NULL grad: NaN marks). */
static double *snapshot(const kiln_nn_module *m, int64_t *n) {
  int64_t total = 0;
  for (int i = 0; i < kiln_nn_module_n_params(m); i++)
    total += 2 * kiln_tensor_numel(kiln_nn_module_param(m, i));
  double *s = malloc((size_t)total * sizeof *s);
  int64_t k = 0;
  for (int i = 0; s && i < kiln_nn_module_n_params(m); i++) {
    kiln_tensor *p = kiln_nn_module_param(m, i), *gr = kiln_tensor_grad(p);
    for (int64_t j = 0; j < kiln_tensor_numel(p); j++) {
      s[k++] = core_get_flat(p, j);
      s[k++] = gr ? core_get_flat(gr, j) : NAN;
    }
  }
  *n = total;
  return s;
}

static bool same(const double *a, const double *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i])))) return false;
  return true;
}

TEST(oom_sweep_eager_mlp_step) {
  /* the reference: a step that never failed */
  mlp_run ref;
  run_new(&ref);
  int stage;
  CHECK(fwd_bwd(&ref, &stage) == 0);
  int64_t n_grad = 0, n_step = 0;
  double *want_grad = snapshot(ref.m, &n_grad);
  CHECK(kiln_optim_step(ref.o) == 0);
  double *want_step = snapshot(ref.m, &n_step);
  run_free(&ref);
  int hit = 0, failed = 0, retried = 0;
  for (long k = getenv("SWEEP_K") ? atol(getenv("SWEEP_K")) : 1; k < 100000; k++) {
    mlp_run r;
    run_new(&r);
    core_alloc_fail_at(k);
    int rc = fwd_bwd(&r, &stage);
    if (rc == 0) rc = kiln_optim_step(r.o);
    long made = core_alloc_fail_at(0);
    bool was_hit = made >= k;
    int64_t n;
    if (rc == 0) {
      double *got = snapshot(r.m, &n);
      CHECK_MSG(n == n_step && same(got, want_step, n),
                "allocation %ld %s but the step succeeded with other values", k,
                was_hit ? "failed" : "did not fail");
      free(got);
    } else {
      failed++;
      CHECK_MSG(was_hit, "the step failed without an allocation failure: %s", kiln_last_error());
      CHECK_MSG(kiln_last_error()[0] != 0, "allocation %ld: an error without a message", k);
      if (stage < 2) { /* nothing was updated yet: a retry equals the reference */
        kiln_optim_zero_grad(r.o);
        if (fwd_bwd(&r, &stage) == 0 && kiln_optim_step(r.o) == 0) {
          double *got = snapshot(r.m, &n);
          CHECK_MSG(n == n_step && same(got, want_step, n),
                    "allocation %ld: the retry after the failure gave other values", k);
          free(got);
          retried++;
        } else {
          test_fail(__FILE__, __LINE__, "allocation %ld: the retry failed: %s", k,
                    kiln_last_error());
        }
      }
    }
    hit += was_hit;
    run_free(&r);
    if (!was_hit) break;
  }
  test_note("%d failure points, %d steps failed, %d retried", hit, failed, retried);
  CHECK(hit > 50);
  free(want_grad);
  free(want_step);
}
