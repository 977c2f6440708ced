/* src/ops/misc_extra.c: small ops of real tensors written as
 * decompositions: conj and friends (identities for real dtypes), real,
 * isreal, angle, heaviside, sinc, dist, narrow_copy, diff, isclose,
 * logspace, mvlgamma. */
#include <math.h>
#include <string.h>

#include "op.h"

static int self(const char *fn, const op_val *a, kiln_tensor **x) {
  return op_arg_tensor(fn, a, "self", x);
}
/* a view of x itself (real tensors: conj, resolve_conj, resolve_neg, real) */
static int same(const char *fn, const op_val *a, kiln_tensor **outs) {
  kiln_tensor *x;
  int rc = self(fn, a, &x);
  return rc < 0 ? rc : op_out1(kiln_expand(x, x->ndim, x->shape), outs);
}
int op_conj_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return same("aten::conj", a, outs);
}
int op_resolve_conj_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return same("aten::resolve_conj", a, outs);
}
int op_resolve_neg_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return same("aten::resolve_neg", a, outs);
}
int op_real_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return same("aten::real", a, outs);
}
int op_conj_physical_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = self("aten::conj_physical", a, &x);
  return rc < 0 ? rc : op_out1(kiln_clone(x), outs);
}
int op_isreal_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = self("aten::isreal", a, &x);
  return rc < 0 ? rc : op_out1(kiln_full(x->ndim, x->shape, 1, KILN_DTYPE_BOOL), outs);
}
/* angle of a real: pi where x < 0, NaN where NaN, else 0 (float result) */
int op_angle_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = self("aten::angle", a, &x);
  if (rc < 0) return rc;
  kiln_tensor *f = core_dtype_is_floating(x->dtype) ? x : kiln_to_dtype(x, KILN_DTYPE_F32);
  kiln_tensor *lt = f ? op_call1(KILN_OP_LT, (op_val[]){OPV_T(f), OPV_I(0)}, 2) : NULL;
  kiln_tensor *r = lt ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(lt), OPV_F(M_PI), OPV_F(0)}, 3) : NULL;
  r = r ? kiln_to_dtype(r, f->dtype) : NULL;
  /* x * 0 keeps NaN (and the gradient, zero, flowing) */
  return op_out1(r ? kiln_add(r, kiln_mul_scalar(f, 0.0)) : NULL, outs);
}
/* heaviside(x, v) = x == 0 ? v : x > 0 */
int op_heaviside_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *v;
  int rc;
  if ((rc = self("aten::heaviside", &a[0], &x)) < 0 ||
      (rc = op_arg_tensor("aten::heaviside", &a[1], "values", &v)) < 0)
    return rc;
  if (x->dtype != v->dtype)
    return core_error(KILN_ERR_INVALID, "aten::heaviside: heaviside is not yet implemented for "
                                        "tensors with different dtypes");
  kiln_tensor *z = op_call1(KILN_OP_EQ, (op_val[]){OPV_T(x), OPV_I(0)}, 2);
  kiln_tensor *p = op_call1(KILN_OP_GT, (op_val[]){OPV_T(x), OPV_I(0)}, 2);
  kiln_tensor *r = z && p ? kiln_where(z, v, kiln_to_dtype(p, x->dtype)) : NULL;
  return op_out1(r ? kiln_to_dtype(r, x->dtype) : NULL, outs);
}
/* sinc(x) = sin(pi x) / (pi x), 1 at 0 */
int op_sinc_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = self("aten::sinc", a, &x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating(x->dtype)) x = kiln_to_dtype(x, KILN_DTYPE_F32);
  kiln_tensor *px = x ? kiln_mul_scalar(x, M_PI) : NULL;
  kiln_tensor *z = px ? op_call1(KILN_OP_EQ, (op_val[]){OPV_T(px), OPV_I(0)}, 2) : NULL;
  /* the division reads a safe denominator where x == 0 (no NaN gradient) */
  kiln_tensor *den = z ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(z), OPV_F(1), OPV_T(px)}, 3) : NULL;
  kiln_tensor *q = den ? kiln_div(kiln_sin(den), den) : NULL;
  return op_out1(q ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(z), OPV_F(1), OPV_T(q)}, 3) : NULL, outs);
}
/* dist(a, b, p) = norm(a - b, p) */
int op_dist_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc;
  if ((rc = self("aten::dist", &a[0], &x)) < 0 ||
      (rc = op_arg_tensor("aten::dist", &a[1], "other", &y)) < 0)
    return rc;
  kiln_tensor *d = kiln_sub(x, y);
  return op_out1(d ? op_call1(KILN_OP_NORM, (op_val[]){OPV_T(d), a[2]}, 2) : NULL, outs);
}
int op_narrow_copy_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *v = op_call1(KILN_OP_NARROW, a, 4);
  return op_out1(v ? kiln_clone(v) : NULL, outs);
}
/* diff(x, n, dim, prepend, append): n rounds of x[1:] - x[:-1] along dim */
int op_diff_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::diff";
  kiln_tensor *x;
  int rc = self(fn, &a[0], &x);
  if (rc < 0) return rc;
  if (x->ndim == 0)
    return core_error(KILN_ERR_INVALID, "%s: diff expects input to be at least one-dimensional", fn);
  int64_t k = a[1].tag == OP_VAL_INT ? a[1].i : 1;
  if (k < 0) return core_error(KILN_ERR_INVALID, "%s: order must be non-negative but got %lld", fn,
                               (long long)k);
  int d = core_wrap_dim(fn, a[2].tag == OP_VAL_INT ? a[2].i : -1, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  kiln_tensor *parts[3];
  int np = 0;
  if (a[3].tag == OP_VAL_TENSOR) parts[np++] = a[3].t;
  parts[np++] = x;
  if (a[4].tag == OP_VAL_TENSOR) parts[np++] = a[4].t;
  kiln_tensor *r = np > 1 ? kiln_cat(parts, np, d) : x;
  for (int64_t i = 0; i < k && r && r->shape[d] > 0; i++) {
    int64_t len = r->shape[d];
    if (r->dtype == KILN_DTYPE_BOOL)
      r = op_call1(KILN_OP_LOGICAL_XOR, (op_val[]){OPV_T(kiln_narrow(r, d, 1, len - 1)),
                                                   OPV_T(kiln_narrow(r, d, 0, len - 1))}, 2);
    else
      r = kiln_sub(kiln_narrow(r, d, 1, len - 1), kiln_narrow(r, d, 0, len - 1));
  }
  return op_out1(r == x && r ? kiln_clone(x) : r, outs);
}
/* isclose: |a - b| <= atol + rtol |b|, equal values (infinities) close,
 * NaNs close only with equal_nan */
int op_isclose_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::isclose";
  kiln_tensor *x, *y;
  int rc;
  if ((rc = self(fn, &a[0], &x)) < 0 || (rc = op_arg_tensor(fn, &a[1], "other", &y)) < 0)
    return rc;
  if (x->dtype != y->dtype)
    return core_error(KILN_ERR_INVALID, "%s: %s did not match %s", fn, kiln_dtype_name(x->dtype),
                      kiln_dtype_name(y->dtype));
  double rtol = op_val_is_num(&a[2]) ? op_val_num(&a[2]) : 1e-5,
         atol = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 1e-8;
  bool en = a[4].tag == OP_VAL_BOOL && a[4].b;
  if (rtol < 0 || atol < 0)
    return core_error(KILN_ERR_INVALID, "%s: rtol and atol must be non-negative", fn);
  kiln_no_grad_begin();
  kiln_tensor *eq = kiln_eq(x, y), *r = eq;
  if (eq && core_dtype_is_floating(x->dtype)) {
    kiln_tensor *d = kiln_abs(kiln_sub(x, y));
    kiln_tensor *tol = kiln_add_scalar(kiln_mul_scalar(kiln_abs(y), rtol), atol);
    kiln_tensor *close = d && tol ? kiln_le(d, tol) : NULL;
    kiln_tensor *fin = close ? op_call1(KILN_OP_ISFINITE, (op_val[]){OPV_T(d)}, 1) : NULL;
    kiln_tensor *c2 = fin ? op_call1(KILN_OP_LOGICAL_AND, (op_val[]){OPV_T(close), OPV_T(fin)}, 2) : NULL;
    r = c2 ? op_call1(KILN_OP_LOGICAL_OR, (op_val[]){OPV_T(eq), OPV_T(c2)}, 2) : NULL;
    if (r && en) {
      kiln_tensor *nn = op_call1(KILN_OP_LOGICAL_AND,
                                 (op_val[]){OPV_T(op_call1(KILN_OP_ISNAN, (op_val[]){OPV_T(x)}, 1)),
                                            OPV_T(op_call1(KILN_OP_ISNAN, (op_val[]){OPV_T(y)}, 1))},
                                 2);
      r = nn ? op_call1(KILN_OP_LOGICAL_OR, (op_val[]){OPV_T(r), OPV_T(nn)}, 2) : NULL;
    }
  }
  kiln_no_grad_end();
  return op_out1(r, outs);
}
/* logspace(start, end, steps, base, dtype, ...) = base ^ linspace in float64 */
int op_logspace_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *l[1];
  int rc = op_call(KILN_OP_LINSPACE, (op_val[]){a[0], a[1], a[2], OPV_I(7), OPV_NONE, OPV_NONE,
                                                OPV_NONE},
                   7, l, 1);
  if (rc < 0) return rc;
  double base = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 10;
  kiln_dtype d = KILN_DTYPE_F32;
  if (a[4].tag == OP_VAL_INT && op_dtype_from_code(a[4].i, &d) < 0) return KILN_ERR_INVALID;
  kiln_tensor *p = op_call1(KILN_OP_POW, (op_val[]){OPV_T(kiln_scalar(base, KILN_DTYPE_F64)),
                                                    OPV_T(l[0])}, 2);
  return op_out1(p ? kiln_to_dtype(p, d) : NULL, outs);
}
/* mvlgamma(x, p) = p (p - 1) / 4 log(pi) + sum_j lgamma(x - j / 2) */
int op_mvlgamma_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = self("aten::mvlgamma", &a[0], &x);
  if (rc < 0) return rc;
  int64_t p = a[1].tag == OP_VAL_INT ? a[1].i : 0;
  if (p < 1) return core_error(KILN_ERR_INVALID, "aten::mvlgamma: p has to be greater than or equal to 1");
  kiln_tensor *s = NULL;
  for (int64_t j = 0; j < p; j++) {
    kiln_tensor *t = op_call1(KILN_OP_LGAMMA, (op_val[]){OPV_T(kiln_add_scalar(x, -0.5 * (double)j))}, 1);
    if (!t) return KILN_ERR_INVALID;
    s = s ? kiln_add(s, t) : t;
  }
  return op_out1(s ? kiln_add_scalar(s, (double)(p * (p - 1)) / 4.0 * log(M_PI)) : NULL, outs);
}
