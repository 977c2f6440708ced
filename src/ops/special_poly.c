/* src/ops/special_poly.c: the orthogonal polynomials of torch.special
 * (Chebyshev T/U/V/W and their shifted forms, Hermite H/He, Laguerre L,
 * Legendre P) as elementwise tiles of (x, n): n is truncated to an
 * integer, n < 0 gives 0. PyTorch's algorithms (aten/src/ATen/native/
 * Math.h): the three-term recurrence, or the trigonometric form for
 * large n inside (-1, 1); computed in double. No derivatives (PyTorch
 * 1.13 has none). */
#include <math.h>
#include <stdint.h>

#include "tile.h"

/* n as an integer: truncated; NaN n gives a NaN result, and n beyond
 * int64 becomes INT64_MIN (so the result is 0), what PyTorch's cast gives
 * on x86, without the undefined conversion */
static inline int64_t n_of(double b) {
  return b >= -9.2e18 && b <= 9.2e18 ? (int64_t)b : INT64_MIN;
}
#define POLY(name, fn)                                                           \
  TILE_BINARY_C(name##_f32, float, float, b != b ? NAN : (float)fn((double)a, n_of(b))) \
  TILE_BINARY_C(name##_f64, double, double, b != b ? NAN : fn(a, n_of(b)))        \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {name##_f32, name##_f64, NULL, NULL}; \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {NULL, NULL, NULL, NULL};

/* p_0 = 1, p_1 = q1, p_{k+1} = 2 y p_k - p_{k-1} (every Chebyshev kind) */
static double cheb_rec(double y, double q1, int64_t n) {
  if (n == 0) return 1;
  double p = 1, q = q1;
  for (int64_t k = 2; k <= n; k++) {
    double r = (y + y) * q - p;
    p = q;
    q = r;
  }
  return q;
}
static double sgn_n(int64_t n) { return n % 2 == 0 ? 1.0 : -1.0; }

static double cheb_t(double x, int64_t n) {
  if (n < 0) return 0;
  if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
  if (n > 6 && fabs(x) < 1) return cos((double)n * acos(x));
  return cheb_rec(x, x, n);
}
static double cheb_u(double x, int64_t n) {
  if (n < 0) return 0;
  if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? (double)(n + 1) : -(double)(n + 1);
  if (n > 8 && fabs(x) < 1) {
    double t = acos(x);
    if (sin(t) != 0) return sin((double)(n + 1) * t) / sin(t);
    return (double)(n + 1) * cos((double)(n + 1) * t) / x;
  }
  return cheb_rec(x, x + x, n);
}
static double cheb_v(double x, int64_t n) {
  if (n < 0) return 0;
  if (fabs(x) == 1) return x > 0 ? 1.0 : sgn_n(n) * (double)(2 * n + 1);
  if (n > 8 && fabs(x) < 1) {
    double t = acos(x);
    if (sin(t / 2) != 1) return cos(((double)n + 0.5) * t) / cos(t / 2);
    return sgn_n(n) * (double)(2 * n + 1);
  }
  return cheb_rec(x, x + x - 1, n);
}
static double cheb_w(double x, int64_t n) {
  if (n < 0) return 0;
  if (fabs(x) == 1) return x > 0 ? (double)(2 * n + 1) : sgn_n(n);
  if (n > 8 && fabs(x) < 1) {
    double t = acos(x);
    if (cos(t / 2) != 1) return sin(((double)n + 0.5) * t) / sin(t / 2);
    return x > 0 ? (double)(2 * n + 1) : sgn_n(n);
  }
  return cheb_rec(x, x + x + 1, n);
}
/* shifted: the kind at 2x - 1 */
static double scheb_t(double x, int64_t n) { return n < 0 ? 0 : x == 1 ? 1 : x == 0 ? sgn_n(n) : cheb_t(x + x - 1, n); }
static double scheb_u(double x, int64_t n) {
  if (n < 0) return 0;
  if (x == 1) return (double)(n + 1);
  if (x == 0) return sgn_n(n) * (double)(n + 1);
  return cheb_u(x + x - 1, n);
}
static double scheb_v(double x, int64_t n) {
  if (n < 0) return 0;
  if (x == 1) return 1;
  if (x == 0) return sgn_n(n) * (double)(2 * n + 1);
  return cheb_v(x + x - 1, n);
}
static double scheb_w(double x, int64_t n) {
  if (n < 0) return 0;
  if (x == 1) return (double)(2 * n + 1);
  if (x == 0) return sgn_n(n);
  return cheb_w(x + x - 1, n);
}
/* physicists' Hermite: H_{k+1} = 2x H_k - 2k H_{k-1} */
static double hermite_h(double x, int64_t n) {
  if (n < 0) return 0;
  if (n == 0) return 1;
  double p = 1, q = x + x;
  for (int64_t k = 1; k < n; k++) {
    double r = (x + x) * q - 2.0 * (double)k * p;
    p = q;
    q = r;
  }
  return q;
}
/* probabilists' Hermite: He_{k+1} = x He_k - k He_{k-1} */
static double hermite_he(double x, int64_t n) {
  if (n < 0) return 0;
  if (n == 0) return 1;
  double p = 1, q = x;
  for (int64_t k = 1; k < n; k++) {
    double r = x * q - (double)k * p;
    p = q;
    q = r;
  }
  return q;
}
/* Laguerre: (k + 1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1} */
static double laguerre_l(double x, int64_t n) {
  if (n < 0) return 0;
  if (fabs(x) == 0 || n == 0) return 1;
  double p = 1, q = 1 - x;
  for (int64_t k = 1; k < n; k++) {
    double r = ((double)(2 * k + 1) - x) * q - (double)k * p;
    r /= (double)(k + 1);
    p = q;
    q = r;
  }
  return q;
}
/* Legendre: (k + 1) P_{k+1} = (2k + 1) x P_k - k P_{k-1} */
static double legendre_p(double x, int64_t n) {
  if (n < 0) return 0;
  if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1.0 : -1.0;
  if (n == 0) return 1;
  double p = 1, q = x;
  for (int64_t k = 1; k < n; k++) {
    double r = ((double)(2 * k + 1) * x * q - (double)k * p) / (double)(k + 1);
    p = q;
    q = r;
  }
  return q;
}

POLY(special_chebyshev_polynomial_t, cheb_t)
POLY(special_chebyshev_polynomial_u, cheb_u)
POLY(special_chebyshev_polynomial_v, cheb_v)
POLY(special_chebyshev_polynomial_w, cheb_w)
POLY(special_shifted_chebyshev_polynomial_t, scheb_t)
POLY(special_shifted_chebyshev_polynomial_u, scheb_u)
POLY(special_shifted_chebyshev_polynomial_v, scheb_v)
POLY(special_shifted_chebyshev_polynomial_w, scheb_w)
POLY(special_hermite_polynomial_h, hermite_h)
POLY(special_hermite_polynomial_he, hermite_he)
POLY(special_laguerre_polynomial_l, laguerre_l)
POLY(special_legendre_polynomial_p, legendre_p)
