/* tests/ops/compare.c: golden-tensor comparison shared by the tests
 * (compare.h). */
#include "compare.h"

#include <math.h>
#include <stdio.h>

bool test_close_to(kiln_tensor *got, kiln_tensor *want, double rtol, double atol, double scale,
                   char *why, size_t n) {
  if (!got || !want) {
    snprintf(why, n, "missing");
    return false;
  }
  int64_t k = kiln_tensor_numel(want);
  if (kiln_tensor_numel(got) != k) {
    snprintf(why, n, "%lld elements, PyTorch %lld", (long long)kiln_tensor_numel(got),
             (long long)k);
    return false;
  }
  kiln_scope_begin();
  kiln_tensor *a = kiln_contiguous(kiln_to_dtype(kiln_to_cpu(got), KILN_DTYPE_F64));
  kiln_tensor *b = kiln_contiguous(kiln_to_dtype(want, KILN_DTYPE_F64));
  bool ok = a && b;
  if (!ok) snprintf(why, n, "conversion failed: %s", kiln_last_error());
  const double *pa = ok ? kiln_tensor_data(a) : NULL, *pb = ok ? kiln_tensor_data(b) : NULL;
  double big = 0;
  for (int64_t i = 0; ok && i < k; i++) big = fmax(big, fabs(pb[i]));
  for (int64_t i = 0; ok && i < k; i++)
    if (!(fabs(pa[i] - pb[i]) <= atol + rtol * (fabs(pb[i]) + scale * big)) &&
        !(isinf(pa[i]) && pa[i] == pb[i])) {
      snprintf(why, n, "element %lld: %.8g, PyTorch %.8g", (long long)i, pa[i], pb[i]);
      ok = false;
    }
  kiln_scope_end();
  return ok;
}
