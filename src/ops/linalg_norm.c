/* src/ops/linalg_norm.c: torch.linalg's matrix norms and condition
 * number as decompositions (LinearAlgebra.cpp's linalg_matrix_norm,
 * linalg_norm, linalg_cond): 'fro' and ord None through vector norms,
 * 'nuc' and ord +-2 through linalg_svdvals, ord +-1 and +-inf as the max
 * (min) of column (row) sums of |A|. Derivatives come from the ops they
 * are made of (svdvals has no double backward). */
#include <math.h>
#include <string.h>

#include "op.h"

static bool flag(const op_val *v) { return v->tag == OP_VAL_BOOL && v->b; }

/* x converted to the optional dtype argument */
static kiln_tensor *in_dtype(kiln_tensor *x, const op_val *dtype) {
  if (!x || dtype->tag != OP_VAL_INT) return x;
  kiln_dtype dt;
  return op_dtype_from_code(dtype->i, &dt) < 0 ? NULL : kiln_to_dtype(x, dt);
}

/* The two matrix dims of a dim argument (default -2, -1), wrapped. */
static int matrix_dims(const char *fn, const op_val *dim, const kiln_tensor *x, int *d) {
  int64_t v[2] = {-2, -1};
  if (dim->tag == OP_VAL_INTS) {
    if (dim->ints.n != 2)
      return core_error(KILN_ERR_INVALID, "%s: dim must be a 2-tuple. Got %d dims", fn, dim->ints.n);
    v[0] = dim->ints.v[0];
    v[1] = dim->ints.v[1];
  }
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: The input tensor A must have at least 2 dimensions.", fn);
  if ((d[0] = core_wrap_dim(fn, v[0], x->ndim)) < 0 || (d[1] = core_wrap_dim(fn, v[1], x->ndim)) < 0)
    return KILN_ERR_INVALID;
  if (d[0] == d[1])
    return core_error(KILN_ERR_INVALID, "%s: dims must be different. Got (%d, %d)", fn, d[0], d[1]);
  return 0;
}

/* The singular values of the matrices in dims d (moved last), reduced
 * by f over them (sum, amax or amin), dims kept as 1 when keepdim. */
static kiln_tensor *svd_reduce(kiln_tensor *x, const int *d, bool keep, int f) {
  int64_t src[2] = {d[0], d[1]}, dst[2] = {-2, -1}, last = -1;
  kiln_tensor *m = op_call1(KILN_OP_MOVEDIM, (op_val[]){OPV_T(x), OPV_INTS(src, 2), OPV_INTS(dst, 2)}, 3);
  kiln_tensor *s = m ? op_call1(KILN_OP_LINALG_SVDVALS, (op_val[]){OPV_T(m), OPV_NONE}, 2) : NULL;
  kiln_tensor *r = !s ? NULL : f == 0 ? kiln_sum(s, &last, 1, false) : f > 0 ? kiln_amax(s, &last, 1, false)
                                                                           : kiln_amin(s, &last, 1, false);
  if (r && keep) {
    r = kiln_unsqueeze(r, d[0] < d[1] ? d[0] : d[1]);
    r = r ? kiln_unsqueeze(r, d[0] < d[1] ? d[1] : d[0]) : NULL;
  }
  return r;
}

/* linalg_matrix_norm with a number ord: +-1, +-2, +-inf */
static kiln_tensor *matrix_norm_num(const char *fn, kiln_tensor *x, double ord, const op_val *dim, bool keep,
                                    const op_val *dtype) {
  int d[2];
  x = in_dtype(x, dtype);
  if (!x || matrix_dims(fn, dim, x, d) < 0) return NULL;
  double ab = fabs(ord);
  if (ab == 2) return svd_reduce(x, d, keep, ord > 0 ? 1 : -1);
  if (ab != 1 && !isinf(ab)) {
    core_error(KILN_ERR_INVALID, "%s: Order %g not supported.", fn, ord);
    return NULL;
  }
  if (isinf(ab)) { /* the inf norm is the 1 norm of the transpose */
    int t = d[0];
    d[0] = d[1];
    d[1] = t;
  }
  if (!keep && d[0] < d[1]) d[1]--;
  int64_t d0 = d[0], d1 = d[1];
  kiln_tensor *cs = op_call1(KILN_OP_VECTOR_NORM, (op_val[]){OPV_T(x), OPV_F(1), OPV_INTS(&d0, 1), OPV_B(keep),
                                                            OPV_NONE}, 5);
  if (!cs) return NULL;
  return ord > 0 ? kiln_amax(cs, &d1, 1, keep) : kiln_amin(cs, &d1, 1, keep);
}

/* linalg_matrix_norm with 'fro' or 'nuc' */
static kiln_tensor *matrix_norm_str(const char *fn, kiln_tensor *x, const char *ord, const op_val *dim, bool keep,
                                    const op_val *dtype) {
  int d[2];
  x = in_dtype(x, dtype);
  if (!x || matrix_dims(fn, dim, x, d) < 0) return NULL;
  if (strcmp(ord, "fro") == 0) {
    int64_t dd[2] = {d[0], d[1]};
    return op_call1(KILN_OP_VECTOR_NORM, (op_val[]){OPV_T(x), OPV_F(2), OPV_INTS(dd, 2), OPV_B(keep), OPV_NONE}, 5);
  }
  if (strcmp(ord, "nuc") == 0) return svd_reduce(x, d, keep, 0);
  core_error(KILN_ERR_INVALID, "%s: Invalid norm '%s' for matrices; expected 'fro' or 'nuc'", fn, ord);
  return NULL;
}

/* linalg_matrix_norm(self, Scalar ord, dim=[-2,-1], keepdim=False, *, dtype=None) */
int op_linalg_matrix_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_matrix_norm";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (!op_val_is_num(&a[1])) return core_error(KILN_ERR_INVALID, "%s: expected a number for 'ord'", fn);
  return op_out1(matrix_norm_num(fn, x, op_val_num(&a[1]), &a[2], flag(&a[3]), &a[4]), outs);
}
/* linalg_matrix_norm.str_ord(self, str ord='fro', dim=[-2,-1], keepdim=False, *, dtype=None) */
int op_linalg_matrix_norm_str_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_matrix_norm";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  return op_out1(matrix_norm_str(fn, x, a[1].tag == OP_VAL_STR ? a[1].s : "fro", &a[2], flag(&a[3]), &a[4]), outs);
}
/* linalg_norm(self, ord=None, dim=None, keepdim=False, *, dtype=None): a
 * matrix norm when ord is given and the dims are two (dim given, or a
 * 2-d self), else a vector norm (ord None is the 2-norm) */
int op_linalg_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_norm";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  bool has_ord = op_val_is_num(&a[1]), has_dim = a[2].tag == OP_VAL_INTS || a[2].tag == OP_VAL_INT;
  int nd = a[2].tag == OP_VAL_INTS ? a[2].ints.n : 1;
  if (has_dim && nd != 1 && nd != 2)
    return core_error(KILN_ERR_INVALID, "%s: linalg.norm: If dim is specified, it must be of length 1 or 2. Got "
                      "[%d dims]", fn, nd);
  if (!has_dim && has_ord && x->ndim != 1 && x->ndim != 2)
    return core_error(KILN_ERR_INVALID, "%s: linalg.norm: If dim is not specified but ord is, the input must be 1D "
                      "or 2D. Got %dD.", fn, x->ndim);
  if (has_ord && ((has_dim && nd == 2) || (!has_dim && x->ndim == 2))) {
    static const int64_t d01[2] = {0, 1};
    op_val dim = has_dim ? a[2] : OPV_INTS(d01, 2);
    return op_out1(matrix_norm_num(fn, x, op_val_num(&a[1]), &dim, flag(&a[3]), &a[4]), outs);
  }
  return op_out1(op_call1(KILN_OP_VECTOR_NORM, (op_val[]){OPV_T(x), has_ord ? a[1] : OPV_F(2), a[2], a[3], a[4]},
                          5), outs);
}
/* linalg_norm.ord_str(self, str ord, dim=None, keepdim=False, *, dtype=None) */
int op_linalg_norm_str_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_norm";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (a[2].tag != OP_VAL_INTS && x->ndim != 2)
    return core_error(KILN_ERR_INVALID, "%s: linalg.norm: If dim is not specified but ord is, the input must be 1D "
                      "or 2D. Got %dD.", fn, x->ndim);
  static const int64_t d01[2] = {0, 1};
  op_val dim = a[2].tag == OP_VAL_INTS ? a[2] : OPV_INTS(d01, 2);
  return op_out1(matrix_norm_str(fn, x, a[1].tag == OP_VAL_STR ? a[1].s : "fro", &dim, flag(&a[3]), &a[4]), outs);
}
/* linalg_cond(self, p=None): sigma_max / sigma_min for p None or 2
 * (the reverse for -2), else norm_p(A) norm_p(inv(A)) */
int op_linalg_cond_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_cond";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: The input tensor A must have at least 2 dimensions.", fn);
  double p = op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 2;
  if (fabs(p) == 2) {
    kiln_tensor *s = op_call1(KILN_OP_LINALG_SVDVALS, (op_val[]){OPV_T(x), OPV_NONE}, 2);
    if (!s) return op_failed_status();
    int64_t k = s->shape[s->ndim - 1];
    kiln_tensor *hi = kiln_select(s, s->ndim - 1, 0), *lo = kiln_select(s, s->ndim - 1, k - 1);
    return op_out1(hi && lo ? (p > 0 ? kiln_div(hi, lo) : kiln_div(lo, hi)) : NULL, outs);
  }
  static const int64_t d[2] = {-2, -1};
  op_val dim = OPV_INTS(d, 2);
  kiln_tensor *inv = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(x)}, 1);
  kiln_tensor *na = matrix_norm_num(fn, x, p, &dim, false, &(op_val){.tag = OP_VAL_NONE});
  kiln_tensor *ni = inv ? matrix_norm_num(fn, inv, p, &dim, false, &(op_val){.tag = OP_VAL_NONE}) : NULL;
  return op_out1(na && ni ? kiln_mul(na, ni) : NULL, outs);
}
/* linalg_cond.p_str(self, str p): 'fro' or 'nuc' norms of A and inv(A) */
int op_linalg_cond_str_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_cond";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  static const int64_t d[2] = {-2, -1};
  op_val dim = OPV_INTS(d, 2), none = OPV_NONE;
  const char *p = a[1].tag == OP_VAL_STR ? a[1].s : "fro";
  kiln_tensor *inv = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(x)}, 1);
  kiln_tensor *na = inv ? matrix_norm_str(fn, x, p, &dim, false, &none) : NULL;
  kiln_tensor *ni = na ? matrix_norm_str(fn, inv, p, &dim, false, &none) : NULL;
  return op_out1(na && ni ? kiln_mul(na, ni) : NULL, outs);
}

/* cdist(x1, x2, p=2, compute_mode=None): the p-norm distances of the rows
 * of x1 [.., r1, m] and x2 [.., r2, m], [.., r1, r2]. For p = 2 with
 * compute_mode 1 (or None/0 and more than 25 rows) PyTorch's
 * _euclidean_dist: [-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, clamped to
 * 1e-30, square-rooted; otherwise the norm of the broadcast differences
 * (p = 0 counts the nonzero ones: gradient zero; a NaN difference gives NaN) */
int op_cdist_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::cdist";
  kiln_tensor *x, *y;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "x1", &x)) < 0 || (rc = op_arg_tensor(fn, &a[1], "x2", &y)) < 0) return rc;
  if (x->ndim < 2 || y->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: cdist only supports at least 2D tensors, X1 got: %dD", fn,
                      x->ndim < 2 ? x->ndim : y->ndim);
  if (x->shape[x->ndim - 1] != y->shape[y->ndim - 1])
    return core_error(KILN_ERR_INVALID, "%s: X1 and X2 must have the same number of columns. X1: %lld X2: %lld", fn,
                      (long long)x->shape[x->ndim - 1], (long long)y->shape[y->ndim - 1]);
  if (!core_dtype_is_floating(x->dtype) || !core_dtype_is_floating(y->dtype))
    return core_error(KILN_ERR_INVALID, "%s: cdist only supports floating-point dtypes", fn);
  double p = op_val_is_num(&a[2]) ? op_val_num(&a[2]) : 2;
  if (p < 0) return core_error(KILN_ERR_INVALID, "%s: cdist only supports non-negative p values", fn);
  int64_t mode = a[3].tag == OP_VAL_INT ? a[3].i : 0, r1 = x->shape[x->ndim - 2], r2 = y->shape[y->ndim - 2];
  int64_t last = -1;
  if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25))) &&
      core_numel(x->ndim, x->shape) > 0 && core_numel(y->ndim, y->shape) > 0) {
    kiln_tensor *xn = kiln_sum(kiln_mul(x, x), &last, 1, true), *yn = kiln_sum(kiln_mul(y, y), &last, 1, true);
    kiln_tensor *xp = xn ? kiln_ones(xn->ndim, xn->shape, xn->dtype) : NULL;
    kiln_tensor *yp = yn ? kiln_ones(yn->ndim, yn->shape, yn->dtype) : NULL;
    if (!xp || !yp) return op_failed_status();
    kiln_tensor *xs[3] = {kiln_mul_scalar(x, -2), xn, xp}, *ys[3] = {y, yp, yn};
    if (!xs[0]) return op_failed_status();
    kiln_tensor *xc = kiln_cat(xs, 3, -1), *yc = kiln_cat(ys, 3, -1);
    kiln_tensor *r = xc && yc ? kiln_matmul(xc, kiln_transpose(yc, -2, -1)) : NULL;
    return op_out1(r ? kiln_sqrt(kiln_clamp(r, 1e-30, NAN)) : NULL, outs);
  }
  kiln_tensor *d = kiln_sub(kiln_unsqueeze(x, x->ndim - 1), kiln_unsqueeze(y, y->ndim - 2));
  if (!d) return op_failed_status();
  if (p == 0) {
    /* + 0 sign(d): differentiable (as PyTorch's), its gradient zero */
    kiln_tensor *nz = op_call1(KILN_OP_NE, (op_val[]){OPV_T(d), OPV_I(0)}, 2);
    kiln_tensor *c = nz ? kiln_add(kiln_to_dtype(nz, d->dtype), kiln_mul_scalar(kiln_sign(d), 0)) : NULL;
    return op_out1(c ? kiln_sum(c, &last, 1, false) : NULL, outs);
  }
  return op_out1(op_call1(KILN_OP_VECTOR_NORM, (op_val[]){OPV_T(d), OPV_F(p), OPV_INTS(&last, 1), OPV_B(false),
                                                         OPV_NONE}, 5), outs);
}
