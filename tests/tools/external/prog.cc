// tests/tools/external/prog.cc: the C++ twin of prog.c: kiln.h used from
// C++ (extern "C"), built with pkg-config against an installed kiln
// (tests/tools/install_test.sh). Prints "ok" and exits 0 when the values
// are right.
#include <kiln.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main() {
  if (std::string(kiln_version()) != KILN_VERSION_STRING) return 1;
  std::vector<int64_t> shape{2, 2};
  std::vector<double> a{1, 2, 3, 4}, b{0.5, 0, 0, 2};
  kiln_scope_begin();
  kiln_tensor *x = kiln_from_data(a.data(), 2, shape.data(), KILN_DTYPE_F64);
  kiln_tensor *y = kiln_from_data(b.data(), 2, shape.data(), KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_tensor *z = kiln_sum(kiln_mm(x, y), nullptr, 0, false);  // sum(x @ y)
  double v = 0;
  if (!z || kiln_item(z, &v) < 0 || std::fabs(v - 14) > 1e-12 || kiln_backward(z, nullptr) < 0) {
    std::fprintf(stderr, "mm: %s (%g)\n", kiln_last_error(), v);
    return 1;
  }
  // x @ y = [[0.5, 4], [1.5, 8]]; d sum(x @ y) / dx[i][k] = sum_j y[k][j]: rows of y summed: 0.5, 2.
  const double *g = static_cast<const double *>(kiln_tensor_data(kiln_tensor_grad(x)));
  if (g[0] != 0.5 || g[1] != 2 || g[2] != 0.5 || g[3] != 2) return 1;
  // An error is a message, not an abort.
  if (kiln_mm(x, kiln_scalar(1, KILN_DTYPE_F64)) != nullptr || !std::strlen(kiln_last_error()))
    return 1;
  kiln_scope_end();
  std::printf("ok c++ %s\n", kiln_version());
  return 0;
}
