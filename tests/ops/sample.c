/* tests/ops/sample.c: the sample registry and sample tensor makers. */
#include "sample.h"
#include "test.h"

#include <stdlib.h>

static sample_entry *entries;
static int n_entries, cap_entries;

void sample_register(int op, const char *name, sample_fn fn) {
  if (n_entries == cap_entries) {
    cap_entries = cap_entries ? cap_entries * 2 : 64;
    entries = realloc(entries, (size_t)cap_entries * sizeof *entries);
    if (!entries) abort();
  }
  entries[n_entries++] = (sample_entry){op, name, fn};
}

const sample_entry *sample_all(int *n) {
  *n = n_entries;
  return entries;
}

__attribute__((destructor)) static void sample_free(void) { free(entries); }

kiln_tensor *sample_randn(kiln_generator *g, int ndim, const int64_t *shape) {
  return kiln_randn(ndim, shape, KILN_DTYPE_F64, g);
}

kiln_tensor *sample_uniform(kiln_generator *g, int ndim, const int64_t *shape, double lo,
                            double hi) {
  kiln_tensor *t = kiln_rand(ndim, shape, KILN_DTYPE_F64, g);
  return kiln_add_scalar(kiln_mul_scalar(t, hi - lo), lo);
}

kiln_tensor *sample_transposed(kiln_generator *g, const int64_t shape[2]) {
  int64_t sh[2] = {shape[1], shape[0]};
  return kiln_t(sample_randn(g, 2, sh));
}

kiln_tensor *sample_index(kiln_generator *g, int ndim, const int64_t *shape, int64_t hi) {
  kiln_tensor *t = kiln_zeros(ndim, shape, KILN_DTYPE_I64);
  int64_t n = kiln_tensor_numel(t);
  int64_t *d = kiln_tensor_data(t);
  for (int64_t i = 0; i < n; i++) d[i] = (int64_t)(core_rand_u64(g) % (uint64_t)hi);
  return t;
}

void sample_check_vals(const char *what, kiln_tensor *t, const double *want, int64_t n,
                       double tol) {
  if (!t) {
    test_fail(__FILE__, __LINE__, "%s: NULL (%s)", what, kiln_last_error());
    return;
  }
  if (kiln_tensor_numel(t) != n) {
    test_fail(__FILE__, __LINE__, "%s: numel %lld, want %lld", what,
              (long long)kiln_tensor_numel(t), (long long)n);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = core_get_flat(t, i);
    if (!(fabs(v - want[i]) <= tol * (1 + fabs(want[i]))) && !(isnan(v) && isnan(want[i]))) {
      test_fail(__FILE__, __LINE__, "%s: element %lld: %.12g, want %.12g", what, (long long)i, v,
                want[i]);
      return;
    }
  }
}
