/* src/ops/special_fn.h: scalar special functions in double precision
 * (Bessel, Airy, normal distribution, incomplete gamma, Hurwitz zeta,
 * orthogonal polynomials), shared by the elementwise tiles of
 * src/ops/special.c and src/ops/special_poly.c. Pure functions of their
 * arguments; NaN outside the domain, as PyTorch's. */
#ifndef KILN_OPS_SPECIAL_FN_H
#define KILN_OPS_SPECIAL_FN_H

#include <stdint.h>

/* exp(-|x|) I_nu(x) and exp(x) K_nu(x), nu = 0 or 1 */
double op_sp_ie(int nu, double x);
double op_sp_ke(int nu, double x);
double op_sp_i(int nu, double x);
double op_sp_k(int nu, double x);
double op_sp_airy_ai(double x);
double op_sp_ndtri(double p);
double op_sp_log_ndtr(double x);
double op_sp_erfcx(double x);
double op_sp_igamma(double a, double x);
double op_sp_igammac(double a, double x);
double op_sp_zeta(double s, double q);

#endif
