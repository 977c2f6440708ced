/* tests/autograd/fd_grads.c: gradients of a float64 loss checked against
 * central finite differences, and seeded float64 normal tensors: shared by
 * the in-place autograd and advanced-indexing tests (fd_grads.h). */
#include <math.h>

#include "core/core.h"
#include "fd_grads.h"
#include "test.h"

void test_fd_check_grads(const char *what, test_loss_fn f, kiln_tensor *const *p, int n) {
  kiln_scope_begin();
  for (int k = 0; k < n; k++) CHECK(kiln_set_requires_grad(p[k], true) == 0);
  kiln_tensor *l = f(p);
  CHECK_MSG(l != NULL, "%s: forward: %s", what, kiln_last_error());
  kiln_tensor *g[4] = {0};
  int rc = l ? kiln_grad(&l, NULL, 1, p, n, NULL, g) : -1;
  CHECK_MSG(rc == 0, "%s: grad: %s", what, kiln_last_error());
  kiln_no_grad_begin();
  for (int k = 0; k < n && rc == 0; k++) {
    double *d = kiln_tensor_data(p[k]);
    for (int64_t i = 0; i < kiln_tensor_numel(p[k]); i++) {
      double keep = d[i];
      d[i] = keep + 1e-6;
      double up = core_get_flat(f(p), 0);
      d[i] = keep - 1e-6;
      double dn = core_get_flat(f(p), 0);
      d[i] = keep;
      double fd = (up - dn) / 2e-6, got = g[k] ? core_get_flat(g[k], i) : 0;
      CHECK_MSG(fabs(got - fd) <= 1e-6 * (1 + fabs(fd)), "%s: d/dp%d[%lld] = %.10g, fd %.10g",
                what, k, (long long)i, got, fd);
    }
  }
  kiln_no_grad_end();
  for (int k = 0; k < n; k++) kiln_set_requires_grad(p[k], false);
  kiln_scope_end();
}

kiln_tensor *test_randn_f64(int ndim, const int64_t *shape, uint64_t seed) {
  kiln_generator *gen = kiln_generator_new(seed);
  kiln_tensor *t = kiln_randn(ndim, shape, KILN_DTYPE_F64, gen);
  kiln_generator_free(gen);
  return t;
}
