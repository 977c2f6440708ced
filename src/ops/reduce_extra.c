/* src/ops/reduce_extra.c: reductions written as decompositions into the
 * table's reductions and elementwise ops: min (all, dim), argmin, any/all,
 * count_nonzero, prod, std, var/std without dims and with `correction`,
 * var_mean/std_mean, logsumexp, nansum/nanmean, aminmax. Their
 * derivatives come from the ops they are made of. */
#include <math.h>
#include <string.h>

#include "op.h"

static int tensor(const char *fn, const op_val *a, kiln_tensor **t) {
  return op_arg_tensor(fn, a, "self", t);
}

/* The dims of an int[1]? argument (None or [] = all); returns the count. */
static int dims_of(const op_val *v, int64_t *dims) {
  if (v->tag == OP_VAL_INT) {
    dims[0] = v->i;
    return 1;
  }
  if (v->tag != OP_VAL_INTS) return 0;
  int n = v->ints.n < KILN_MAX_DIMS ? v->ints.n : KILN_MAX_DIMS;
  memcpy(dims, v->ints.v, (size_t)n * sizeof *dims);
  return n;
}

static bool flag(const op_val *v) { return v->tag == OP_VAL_BOOL && v->b; }

/* x != 0 as bool */
static kiln_tensor *nonzero_mask(kiln_tensor *x) {
  return op_call1(KILN_OP_NE, (op_val[]){OPV_T(x), OPV_I(0)}, 2);
}

/* ---- min ------------------------------------------------------------------------ */
int op_min_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  static const int64_t none[1] = {0};
  return op_out1(op_call1(KILN_OP_AMIN, (op_val[]){a[0], OPV_INTS(none, 0), OPV_B(false)}, 3), outs);
}
/* argmin = argmax of the negation (bool and int64 via int64) */
static kiln_tensor *negated(kiln_tensor *x) {
  if (x->dtype == KILN_DTYPE_BOOL) x = kiln_to_dtype(x, KILN_DTYPE_I64);
  return x ? kiln_neg(x) : NULL;
}
int op_argmin_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::argmin", &a[0], &x);
  if (rc < 0) return rc;
  kiln_no_grad_begin();
  kiln_tensor *nx = negated(x);
  kiln_no_grad_end();
  if (!nx) return KILN_ERR_INVALID;
  return op_out1(op_call1(KILN_OP_ARGMAX, (op_val[]){OPV_T(nx), a[1], a[2]}, 3), outs);
}
/* min.dim: (amin over dim, argmin over dim) */
int op_min_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::min", &a[0], &x);
  if (rc < 0) return rc;
  if (a[1].tag != OP_VAL_INT) return core_error(KILN_ERR_INVALID, "aten::min: dim must be an int");
  kiln_no_grad_begin();
  kiln_tensor *nx = negated(x);
  kiln_tensor *ix = nx ? op_call1(KILN_OP_ARGMAX, (op_val[]){OPV_T(nx), a[1], a[2]}, 3) : NULL;
  kiln_no_grad_end();
  if (!ix) return KILN_ERR_INVALID;
  kiln_tensor *v = op_call1(KILN_OP_GATHER,
                            (op_val[]){OPV_T(x), a[1],
                                       OPV_T(flag(&a[2]) ? ix : kiln_unsqueeze(ix, (int)a[1].i)),
                                       OPV_B(false)},
                            4);
  if (v && !flag(&a[2])) v = kiln_squeeze_dim(v, (int)a[1].i);
  return op_out2(v, ix, outs, max);
}
/* aminmax(self, *, dim=None, keepdim=False) -> (min, max) */
int op_aminmax_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(&a[1], dims);
  if (a[1].tag == OP_VAL_NONE && flag(&a[2])) {
    kiln_tensor *x = a[0].t;
    nd = x->ndim;
    for (int i = 0; i < nd; i++) dims[i] = i;
  }
  kiln_tensor *lo = op_call1(KILN_OP_AMIN, (op_val[]){a[0], OPV_INTS(dims, nd), a[2]}, 3);
  kiln_tensor *hi = lo ? op_call1(KILN_OP_AMAX, (op_val[]){a[0], OPV_INTS(dims, nd), a[2]}, 3)
                       : NULL;
  return op_out2(lo, hi, outs, max);
}

/* ---- any / all / count_nonzero --------------------------------------------------- */
/* any = count of nonzeros > 0, all = count of zeros == 0: Bool results,
 * but Byte for a Byte input (PyTorch 1.13's legacy uint8 any/all); the
 * narrow dtypes run as they are (NW_SAME: ne, sum and gt take them) */
static kiln_tensor *count(kiln_tensor *mask, const int64_t *dims, int nd, bool keepdim) {
  return op_call1(KILN_OP_SUM, (op_val[]){OPV_T(mask), nd ? OPV_INTS(dims, nd) : OPV_NONE,
                                          OPV_B(keepdim), OPV_NONE},
                  4);
}
static int any_all(const char *fn, const op_val *a, const op_val *dim, const op_val *keep,
                   bool all, kiln_tensor **outs) {
  kiln_tensor *x;
  int rc = tensor(fn, a, &x);
  if (rc < 0) return rc;
  int64_t d[1];
  int nd = 0;
  if (dim && dim->tag == OP_VAL_INT) {
    if (core_wrap_dim(fn, dim->i, x->ndim) < 0) return KILN_ERR_INVALID;
    d[0] = dim->i;
    nd = 1;
  }
  kiln_tensor *m = nonzero_mask(x);
  if (m && all) m = op_call1(KILN_OP_LOGICAL_NOT, (op_val[]){OPV_T(m)}, 1);
  kiln_tensor *c = m ? count(m, d, nd, keep && flag(keep)) : NULL;
  if (!c) return KILN_ERR_INVALID;
  kiln_tensor *r = op_call1(all ? KILN_OP_EQ : KILN_OP_GT, (op_val[]){OPV_T(c), OPV_I(0)}, 2);
  if (r && x->dtype == KILN_DTYPE_U8)
    r = op_call1(KILN_OP_TO, (op_val[]){OPV_T(r), OPV_I(op_dtype_code(KILN_DTYPE_U8)),
                                      OPV_B(false), OPV_B(false), OPV_NONE}, 5);
  return op_out1(r, outs);
}
int op_any_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return any_all("aten::any", &a[0], NULL, NULL, false, outs);
}
int op_any_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return any_all("aten::any", &a[0], &a[1], &a[2], false, outs);
}
int op_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return any_all("aten::all", &a[0], NULL, NULL, true, outs);
}
int op_all_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return any_all("aten::all", &a[0], &a[1], &a[2], true, outs);
}
/* count_nonzero(self, int? dim) and count_nonzero.dim_IntList(self, int[] dim) */
int op_count_nonzero_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::count_nonzero", &a[0], &x);
  if (rc < 0) return rc;
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(&a[1], dims);
  kiln_tensor *m = nonzero_mask(x);
  return op_out1(m ? count(m, dims, nd, false) : NULL, outs);
}
int op_count_nonzero_dims_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_count_nonzero_decompose(a, n, outs, max);
}

/* ---- prod ------------------------------------------------------------------------- */
/* product along dim by halving: the two halves multiply (an odd middle
 * element carries over), log2(n) multiplications in all */
static kiln_tensor *prod_dim(kiln_tensor *x, int dim, bool keepdim) {
  while (x && x->shape[dim] > 1) {
    int64_t len = x->shape[dim], h = len / 2;
    kiln_tensor *p = kiln_mul(kiln_narrow(x, dim, 0, h), kiln_narrow(x, dim, len - h, h));
    if (p && len % 2) p = kiln_cat((kiln_tensor *[]){p, kiln_narrow(x, dim, h, 1)}, 2, dim);
    x = p;
  }
  if (!x) return NULL;
  if (x->shape[dim] == 0) {
    int64_t sh[KILN_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[dim] = 1;
    x = kiln_full(x->ndim, sh, 1.0, x->dtype);
  }
  return keepdim || !x ? x : kiln_squeeze_dim(x, dim);
}
static kiln_tensor *prod_cast(kiln_tensor *x, const op_val *dt) {
  kiln_dtype d = x->dtype == KILN_DTYPE_BOOL ? KILN_DTYPE_I64 : x->dtype;
  if (dt->tag == OP_VAL_INT && op_dtype_from_code(dt->i, &d) < 0) return NULL;
  return d == x->dtype ? x : kiln_to_dtype(x, d);
}
int op_prod_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::prod", &a[0], &x);
  if (rc < 0) return rc;
  x = prod_cast(x, &a[1]);
  int64_t flat = -1;
  x = x ? kiln_reshape(x, 1, &flat) : NULL;
  return op_out1(x ? prod_dim(x, 0, false) : NULL, outs);
}
int op_prod_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::prod", &a[0], &x);
  if (rc < 0) return rc;
  if (a[1].tag != OP_VAL_INT) return core_error(KILN_ERR_INVALID, "aten::prod: dim must be an int");
  int dim = core_wrap_dim("aten::prod", a[1].i, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  x = prod_cast(x, &a[3]);
  if (x && x->ndim == 0) return op_out1(kiln_clone(x), outs);
  return op_out1(x ? prod_dim(x, dim, flag(&a[2])) : NULL, outs);
}

/* ---- var / std forms ---------------------------------------------------------------- */
static kiln_tensor *var_of(const op_val *self, const op_val *dim, int64_t corr, bool keep) {
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(dim, dims);
  return op_call1(KILN_OP_VAR, (op_val[]){*self, nd ? OPV_INTS(dims, nd) : OPV_NONE,
                                          OPV_B(corr != 0), OPV_B(keep)},
                  4);
}
/* correction other than 0/1: var * (n - 1) / (n - c) over the reduced count */
static kiln_tensor *var_corr(const op_val *self, const op_val *dim, const op_val *corr, bool keep) {
  int64_t c = corr->tag == OP_VAL_NONE ? 1 : (int64_t)op_val_num(corr);
  if (c == 0 || c == 1) return var_of(self, dim, c, keep);
  kiln_tensor *x = self->t;
  int64_t dims[KILN_MAX_DIMS], cnt = 1;
  int nd = dims_of(dim, dims);
  if (!nd) cnt = core_numel(x->ndim, x->shape);
  for (int i = 0; i < nd; i++) {
    int d = core_wrap_dim("aten::var", dims[i], x->ndim);
    if (d < 0) return NULL;
    cnt *= x->ndim ? x->shape[d] : 1;
  }
  kiln_tensor *v = var_of(self, dim, 0, keep);
  double den = (double)(cnt - c);
  return v ? kiln_mul_scalar(v, den > 0 ? (double)cnt / den : INFINITY) : NULL;
}
int op_var_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(var_of(&a[0], &OPV_NONE, a[1].tag == OP_VAL_BOOL ? a[1].b : 1, false), outs);
}
int op_var_corr_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(var_corr(&a[0], &a[1], &a[2], flag(&a[3])), outs);
}
int op_std_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *v = var_of(&a[0], &a[1], a[2].tag == OP_VAL_BOOL ? a[2].b : 1, flag(&a[3]));
  return op_out1(v ? kiln_sqrt(v) : NULL, outs);
}
int op_std_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *v = var_of(&a[0], &OPV_NONE, a[1].tag == OP_VAL_BOOL ? a[1].b : 1, false);
  return op_out1(v ? kiln_sqrt(v) : NULL, outs);
}
int op_std_corr_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *v = var_corr(&a[0], &a[1], &a[2], flag(&a[3]));
  return op_out1(v ? kiln_sqrt(v) : NULL, outs);
}
static kiln_tensor *mean_of(const op_val *self, const op_val *dim, bool keep) {
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(dim, dims);
  return op_call1(KILN_OP_MEAN, (op_val[]){*self, nd ? OPV_INTS(dims, nd) : OPV_NONE,
                                           OPV_B(keep), OPV_NONE},
                  4);
}
int op_var_mean_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *v = var_corr(&a[0], &a[1], &a[2], flag(&a[3]));
  return op_out2(v, v ? mean_of(&a[0], &a[1], flag(&a[3])) : NULL, outs, max);
}
int op_std_mean_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *v = var_corr(&a[0], &a[1], &a[2], flag(&a[3]));
  return op_out2(v ? kiln_sqrt(v) : NULL, v ? mean_of(&a[0], &a[1], flag(&a[3])) : NULL, outs, max);
}

/* ---- logsumexp, nansum, nanmean --------------------------------------------------- */
/* log(sum(e^(x - m))) + m, m the max (0 where it is infinite), held
 * constant (its gradient terms cancel) */
int op_logsumexp_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::logsumexp", &a[0], &x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating(x->dtype)) x = kiln_to_dtype(x, KILN_DTYPE_F32);
  int64_t dims[KILN_MAX_DIMS];
  int nd = dims_of(&a[1], dims);
  if (!x) return KILN_ERR_INVALID;
  if (x->ndim == 0) return op_out1(kiln_mul_scalar(x, 1.0), outs);
  kiln_no_grad_begin();
  kiln_tensor *m = kiln_amax(kiln_detach(x), dims, nd, true);
  if (m) {
    kiln_tensor *inf = op_call1(KILN_OP_ISINF, (op_val[]){OPV_T(m)}, 1);
    m = inf ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(inf), OPV_F(0), OPV_T(m)}, 3) : NULL;
  }
  kiln_no_grad_end();
  if (!m) return KILN_ERR_INVALID;
  kiln_tensor *s = kiln_sum(kiln_exp(kiln_sub(x, m)), dims, nd, true);
  kiln_tensor *r = s ? kiln_add(kiln_log(s), m) : NULL;
  if (r && !flag(&a[2])) {
    int64_t keep[KILN_MAX_DIMS];
    int k = 0;
    uint32_t mask = 0;
    for (int i = 0; i < nd; i++) {
      int d = core_wrap_dim("aten::logsumexp", dims[i], x->ndim);
      if (d < 0) return KILN_ERR_INVALID;
      mask |= 1u << d;
    }
    for (int i = 0; i < x->ndim; i++)
      if (!(mask & (1u << i))) keep[k++] = x->shape[i];
    r = kiln_reshape(r, k, keep);
  }
  return op_out1(r, outs);
}
int op_nansum_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::nansum", &a[0], &x);
  if (rc < 0) return rc;
  kiln_tensor *nan = op_call1(KILN_OP_ISNAN, (op_val[]){OPV_T(x)}, 1);
  kiln_tensor *z = nan ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(nan), OPV_I(0), OPV_T(x)}, 3)
                       : NULL;
  return op_out1(z ? op_call1(KILN_OP_SUM, (op_val[]){OPV_T(z), a[1], a[2], a[3]}, 4) : NULL, outs);
}
int op_nanmean_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::nanmean", &a[0], &x);
  if (rc < 0) return rc;
  kiln_tensor *nan = op_call1(KILN_OP_ISNAN, (op_val[]){OPV_T(x)}, 1);
  kiln_tensor *z = nan ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(nan), OPV_I(0), OPV_T(x)}, 3)
                       : NULL;
  kiln_tensor *s = z ? op_call1(KILN_OP_SUM, (op_val[]){OPV_T(z), a[1], a[2], a[3]}, 4) : NULL;
  kiln_tensor *ok = nan ? op_call1(KILN_OP_LOGICAL_NOT, (op_val[]){OPV_T(nan)}, 1) : NULL;
  kiln_tensor *c = ok ? op_call1(KILN_OP_SUM, (op_val[]){OPV_T(ok), a[1], a[2], OPV_NONE}, 4)
                      : NULL;
  return op_out1(s && c ? kiln_div(s, c) : NULL, outs);
}
int op_var_mean_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_var_mean_decompose(a, n, outs, max);
}
int op_std_mean_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_std_mean_decompose(a, n, outs, max);
}
