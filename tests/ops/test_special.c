/* tests/ops/test_special.c: the special functions of src/ops/special.c
 * and special_poly.c: values at points with known closed forms or
 * reference values (DLMF; Ai from PyTorch 1.13 in float64), edge cases, and gradcheck
 * samples for the differentiable ones (values against PyTorch come from
 * tests/ops/test_opinfo.c). */
#include <math.h>

#include "sample.h"
#include "test.h"

static const int64_t S23[2] = {2, 3}, S3[1] = {3};

/* op(x) on a float64 vector */
static kiln_tensor *ap1(int op, int n, const double *x) {
  int64_t s = n;
  kiln_tensor *t = kiln_from_data(x, 1, &s, KILN_DTYPE_F64);
  return op_call1(op, (op_val[]){OPV_T(t)}, 1);
}
static kiln_tensor *ap2(int op, int n, const double *x, const double *y) {
  int64_t s = n;
  kiln_tensor *a = kiln_from_data(x, 1, &s, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(y, 1, &s, KILN_DTYPE_F64);
  return op_call1(op, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
static double at(kiln_tensor *t, int i) { return ((const double *)kiln_tensor_data(t))[i]; }

TEST(special_bessel_values) {
  kiln_scope_begin();
  const double x[4] = {0, 1, 2.5, 10};
  kiln_tensor *i0 = ap1(KILN_OP_I0, 4, x), *k1 = ap1(KILN_OP_SPECIAL_MODIFIED_BESSEL_K1, 4, x);
  CHECK(i0 && k1);
  /* I0(1) = 1.2660658777520082, I0(10) = 2815.716628466254 (DLMF 10.25) */
  CHECK(at(i0, 0) == 1.0);
  CHECK(fabs(at(i0, 1) - 1.2660658777520082) < 1e-13);
  CHECK(fabs(at(i0, 3) / 2815.716628466254 - 1) < 1e-13);
  /* K1(0) = inf, K1(1) = 0.6019072301972346, K1(10) = 1.864877345382558e-05 */
  CHECK(isinf(at(k1, 0)));
  CHECK(fabs(at(k1, 1) - 0.6019072301972346) < 1e-13);
  CHECK(fabs(at(k1, 3) / 1.864877345382558e-05 - 1) < 1e-12);
  const double neg[1] = {-1};
  CHECK(isnan(at(ap1(KILN_OP_SPECIAL_MODIFIED_BESSEL_K0, 1, neg), 0)));
  /* I1 is odd: I1(-2.5) = -2.5167162452886984 */
  const double m25[1] = {-2.5};
  CHECK(fabs(at(ap1(KILN_OP_SPECIAL_I1, 1, m25), 0) + 2.5167162452886984) < 1e-13);
  kiln_scope_end();
}

TEST(special_airy_normal_values) {
  kiln_scope_begin();
  /* Ai(0) = 1 / (3^(2/3) Gamma(2/3)), Ai(-10) = 0.04024123848644196,
   * Ai(8) = 4.692207616099224e-08 (series, both asymptotic branches) */
  const double x[3] = {0, -10, 8};
  kiln_tensor *ai = ap1(KILN_OP_SPECIAL_AIRY_AI, 3, x);
  CHECK(ai);
  CHECK(fabs(at(ai, 0) - 0.3550280538878172) < 1e-15);
  CHECK(fabs(at(ai, 1) - 0.04024123848644196) < 1e-12);
  CHECK(fabs(at(ai, 2) / 4.692207616099224e-08 - 1) < 1e-10);
  /* ndtri(ndtr(x)) = x, and log_ndtr(-20) = log(Phi(-20)) = -203.91715537109727 */
  const double p[3] = {1e-20, 0.3, 0.975};
  kiln_tensor *q = ap1(KILN_OP_SPECIAL_NDTRI, 3, p);
  CHECK(q);
  CHECK(fabs(at(q, 2) - 1.959963984540054) < 1e-12);
  kiln_tensor *back = op_call1(KILN_OP_SPECIAL_NDTR, (op_val[]){OPV_T(q)}, 1);
  CHECK(fabs(at(back, 0) / 1e-20 - 1) < 1e-9 && fabs(at(back, 1) - 0.3) < 1e-15);
  const double m20[1] = {-20};
  CHECK(fabs(at(ap1(KILN_OP_SPECIAL_LOG_NDTR, 1, m20), 0) + 203.91715537109727) < 1e-10);
  /* erfcx(30) = 0.018795888861416751 (the asymptotic branch) */
  const double x30[1] = {30};
  CHECK(fabs(at(ap1(KILN_OP_SPECIAL_ERFCX, 1, x30), 0) / 0.018795888861416751 - 1) < 1e-12);
  kiln_scope_end();
}

TEST(special_gamma_zeta_poly_values) {
  kiln_scope_begin();
  /* P(1, x) = 1 - e^-x; Q(0.5, x) = erfc(sqrt x); zeta(2, 1) = pi^2 / 6 */
  const double a[2] = {1, 0.5}, x[2] = {2, 3};
  kiln_tensor *p = ap2(KILN_OP_IGAMMA, 2, a, x), *q = ap2(KILN_OP_IGAMMAC, 2, a, x);
  CHECK(fabs(at(p, 0) - (1 - exp(-2))) < 1e-15);
  CHECK(fabs(at(q, 1) - erfc(sqrt(3))) < 1e-15);
  const double s[2] = {2, 0.5}, one[2] = {1, 1};
  kiln_tensor *z = ap2(KILN_OP_SPECIAL_ZETA, 2, s, one);
  CHECK(fabs(at(z, 0) - M_PI * M_PI / 6) < 1e-14);
  CHECK(isnan(at(z, 1)));
  /* T_3(x) = 4x^3 - 3x, T_9 by the cos form; H_3 = 8x^3 - 12x; P_2 = (3x^2 - 1)/2;
   * L_2 = (x^2 - 4x + 2)/2; U_2 = 4x^2 - 1; n < 0 gives 0 */
  const double xs[3] = {0.3, 0.3, 0.3}, n3[3] = {3, 9, -1};
  kiln_tensor *t = ap2(KILN_OP_SPECIAL_CHEBYSHEV_POLYNOMIAL_T, 3, xs, n3);
  CHECK(fabs(at(t, 0) - (4 * 0.027 - 0.9)) < 1e-15);
  CHECK(fabs(at(t, 1) - cos(9 * acos(0.3))) < 1e-15);
  CHECK(at(t, 2) == 0);
  const double xh[1] = {1.5}, nh[1] = {3}, n2[1] = {2};
  CHECK(fabs(at(ap2(KILN_OP_SPECIAL_HERMITE_POLYNOMIAL_H, 1, xh, nh), 0) - (8 * 3.375 - 18)) < 1e-13);
  CHECK(fabs(at(ap2(KILN_OP_SPECIAL_LEGENDRE_POLYNOMIAL_P, 1, xh, n2), 0) - (3 * 2.25 - 1) / 2) < 1e-14);
  CHECK(fabs(at(ap2(KILN_OP_SPECIAL_LAGUERRE_POLYNOMIAL_L, 1, xh, n2), 0) - (2.25 - 6 + 2) / 2) < 1e-14);
  CHECK(fabs(at(ap2(KILN_OP_SPECIAL_CHEBYSHEV_POLYNOMIAL_U, 1, xh, n2), 0) - (4 * 2.25 - 1)) < 1e-14);
  /* gcd / lcm of int64, signs dropped */
  int64_t sh = 3, ga[3] = {12, -18, 0}, gb[3] = {18, 12, 5};
  kiln_tensor *ia = kiln_from_data(ga, 1, &sh, KILN_DTYPE_I64), *ib = kiln_from_data(gb, 1, &sh, KILN_DTYPE_I64);
  kiln_tensor *gg = op_call1(KILN_OP_GCD, (op_val[]){OPV_T(ia), OPV_T(ib)}, 2);
  kiln_tensor *ll = op_call1(KILN_OP_LCM, (op_val[]){OPV_T(ia), OPV_T(ib)}, 2);
  CHECK(gg && ll);
  const int64_t *pg = kiln_tensor_data(gg), *pl = kiln_tensor_data(ll);
  CHECK(pg[0] == 6 && pg[1] == 6 && pg[2] == 5);
  CHECK(pl[0] == 36 && pl[1] == 36 && pl[2] == 0);
  /* float tensors are refused: gcd is integer-only */
  CHECK(op_call1(KILN_OP_GCD, (op_val[]){OPV_T(kiln_from_data(xs, 1, &sh, KILN_DTYPE_F64)),
                                          OPV_T(kiln_from_data(xs, 1, &sh, KILN_DTYPE_F64))},
                  2) == NULL);
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------- */
#define SU(ENUM, lo, hi)                                                        \
  OP_SAMPLE(ENUM, uniform) {                                                    \
    s->args[0] = OPV_T(sample_uniform(g, 2, S23, lo, hi));                      \
    s->n_args = 1;                                                              \
  }
SU(I0, -3, 3)
SU(SPECIAL_I0E, 0.2, 3)
SU(SPECIAL_I1, -3, 3)
SU(SPECIAL_I1E, 0.2, 3)
SU(SPECIAL_NDTR, -3, 3)
SU(SPECIAL_NDTRI, 0.05, 0.95)
SU(SPECIAL_LOG_NDTR, -3, 3)
SU(SPECIAL_ERFCX, -2, 3)
SU(SPECIAL_ENTR, 0.2, 3)
OP_SAMPLE(SPECIAL_XLOG1PY, broadcast) {
  s->args[0] = OPV_T(sample_uniform(g, 2, S23, -2, 2));
  s->args[1] = OPV_T(sample_uniform(g, 1, S3, 0.5, 2));
  s->n_args = 2;
}
