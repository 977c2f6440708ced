/* src/ops/sort.c: sorting and scans. One non-differentiable kernel
 * computes index permutations (a stable sort of each slice along a dim,
 * or running arg-max/min); values are then gathered with aten::gather, so
 * their derivative comes free. sort, argsort, msort, topk, kthvalue,
 * median, cummax/cummin; cumsum (a triangular matmul), cumprod (running
 * products), logcumsumexp. Lazy inputs are synced to read their values
 * (the permutation depends on them, as in PyTorch's lazy tensors). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

typedef struct sort_ctx {
  const double *v;
  bool desc;
} sort_ctx;

/* NaN sorts above everything (last ascending, first descending); ties
 * keep their order (stable). */
static int cmp_idx(const void *pa, const void *pb, void *ud) {
  const sort_ctx *c = ud;
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  double x = c->v[a], y = c->v[b];
  int r;
  bool nx = isnan(x), ny = isnan(y);
  if (nx || ny) r = nx && ny ? 0 : nx ? 1 : -1;
  else r = x < y ? -1 : x > y ? 1 : 0;
  if (c->desc) r = -r;
  return r ? r : (a < b ? -1 : a > b);
}

/* x's values along dim moved last, as a contiguous float64 CPU tensor. */
static kiln_tensor *values_last(kiln_tensor *x, int dim) {
  kiln_tensor *c = kiln_tensor_is_lazy(x) ? kiln_to_cpu(x) : x;
  if (!c) return NULL;
  c = kiln_detach(c);
  if (c && x->ndim) c = kiln_transpose(c, dim, x->ndim - 1);
  return c ? kiln_contiguous(kiln_to_dtype(c, KILN_DTYPE_F64)) : NULL;
}
/* indices [..., n] (dim last) back to x's layout */
static kiln_tensor *back(kiln_tensor *ix, kiln_tensor *x, int dim) {
  if (!ix || !x->ndim) return ix;
  return kiln_contiguous(kiln_transpose(ix, dim, x->ndim - 1));
}

/* kind 0: sort permutation; 1: running argmax (cummax); 2: running argmin */
static kiln_tensor *index_kernel(kiln_tensor *x, int dim, bool desc, int kind) {
  kiln_no_grad_begin();
  kiln_tensor *v = values_last(x, dim), *ix = NULL;
  if (!v) goto done;
  ix = kiln_zeros(v->ndim, v->shape, KILN_DTYPE_I64);
  if (!ix) goto done;
  int64_t n = v->ndim ? v->shape[v->ndim - 1] : 1, total = core_numel(v->ndim, v->shape);
  const double *vd = core_data(v);
  int64_t *id = core_data(ix);
  for (int64_t r = 0; n > 0 && r < total / n; r++) {
    const double *row = vd + r * n;
    int64_t *out = id + r * n;
    if (kind == 0) {
      for (int64_t i = 0; i < n; i++) out[i] = i;
      sort_ctx c = {row, desc};
      qsort_r(out, (size_t)n, sizeof *out, cmp_idx, &c);
    } else {
      int64_t best = 0;
      for (int64_t i = 0; i < n; i++) {
        double b = row[best], y = row[i];
        /* PyTorch: a NaN wins and stays; ties move to the later index */
        bool take = isnan(y) || (!isnan(b) && (kind == 1 ? y >= b : y <= b));
        if (take) best = i;
        out[i] = best;
      }
    }
  }
  ix = back(ix, x, dim);
done:
  kiln_no_grad_end();
  return ix;
}

static int dim_arg(const char *fn, const op_val *v, kiln_tensor *x, int64_t dflt) {
  return core_wrap_dim(fn, v->tag == OP_VAL_INT ? v->i : dflt, x->ndim);
}
static bool flag(const op_val *v, bool dflt) { return v->tag == OP_VAL_BOOL ? v->b : dflt; }

static kiln_tensor *gather(kiln_tensor *x, int dim, kiln_tensor *ix) {
  if (!ix) return NULL;
  if (x->ndim == 0) return kiln_clone(x);
  return kiln_gather(x, dim, ix);
}

static int sort_common(const char *fn, kiln_tensor *x, int dim, bool desc, kiln_tensor **outs,
                       int max) {
  if (dim < 0) return KILN_ERR_INVALID;
  kiln_tensor *ix = index_kernel(x, dim, desc, 0);
  return op_out2(gather(x, dim, ix), ix, outs, max);
}
int op_sort_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::sort", &a[0], "self", &x);
  if (rc < 0) return rc;
  return sort_common("aten::sort", x, dim_arg("aten::sort", &a[1], x, -1), flag(&a[2], false),
                     outs, max);
}
/* sort.stable(self, *, stable, dim=-1, descending=False): every sort is stable */
int op_sort_stable_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::sort", &a[0], "self", &x);
  if (rc < 0) return rc;
  return sort_common("aten::sort", x, dim_arg("aten::sort", &a[2], x, -1), flag(&a[3], false),
                     outs, max);
}
int op_argsort_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::argsort", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg("aten::argsort", &a[1], x, -1);
  if (dim < 0) return KILN_ERR_INVALID;
  return op_out1(index_kernel(x, dim, flag(&a[2], false), 0), outs);
}
int op_msort_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::msort", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = core_wrap_dim("aten::msort", 0, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  return op_out1(gather(x, dim, index_kernel(x, dim, false, 0)), outs);
}
/* topk(self, k, dim=-1, largest=True, sorted=True): the first k of a sort */
int op_topk_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::topk";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg(fn, &a[2], x, -1);
  if (dim < 0) return KILN_ERR_INVALID;
  int64_t len = x->ndim ? x->shape[dim] : 1, k = a[1].tag == OP_VAL_INT ? a[1].i : -1;
  if (k < 0 || k > len)
    return core_error(KILN_ERR_INVALID, "%s: selected index k out of range (k = %lld, size %lld)",
                      fn, (long long)k, (long long)len);
  kiln_tensor *ix = index_kernel(x, dim, flag(&a[3], true), 0);
  if (ix && x->ndim) ix = kiln_contiguous(kiln_narrow(ix, dim, 0, k));
  return op_out2(gather(x, dim, ix), ix, outs, max);
}
/* kthvalue(self, k, dim=-1, keepdim=False): the k-th smallest */
int op_kthvalue_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::kthvalue";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg(fn, &a[2], x, -1);
  if (dim < 0) return KILN_ERR_INVALID;
  int64_t len = x->ndim ? x->shape[dim] : 1, k = a[1].tag == OP_VAL_INT ? a[1].i : 0;
  if (k < 1 || k > len)
    return core_error(KILN_ERR_INVALID, "%s: kthvalue(): selected number k out of range for "
                                        "dimension %d", fn, dim);
  kiln_tensor *ix = index_kernel(x, dim, false, 0);
  if (ix && x->ndim) ix = kiln_contiguous(kiln_narrow(ix, dim, k - 1, 1));
  kiln_tensor *v = gather(x, dim, ix);
  if (v && ix && x->ndim && !flag(&a[3], false)) {
    v = kiln_squeeze_dim(v, dim);
    ix = kiln_squeeze_dim(ix, dim);
  }
  return op_out2(v, ix, outs, max);
}
/* median: the lower middle of the sorted values; NaN if any is NaN (NaN
 * sorts last, so the last element decides) */
static int median_dim(kiln_tensor *x, int dim, bool keepdim, kiln_tensor **outs, int max) {
  int64_t len = x->ndim ? x->shape[dim] : 1;
  if (len == 0)
    return core_error(KILN_ERR_INVALID, "aten::median: cannot compute median of an empty dim");
  kiln_tensor *ix = index_kernel(x, dim, false, 0);
  if (!ix) return KILN_ERR_INVALID;
  kiln_tensor *mid = x->ndim ? kiln_narrow(ix, dim, (len - 1) / 2, 1) : ix;
  kiln_tensor *last = x->ndim ? kiln_narrow(ix, dim, len - 1, 1) : ix;
  /* where the last sorted value is NaN, the median is that NaN */
  kiln_tensor *lastv = gather(x, dim, kiln_contiguous(last));
  kiln_tensor *nan = lastv ? op_call1(KILN_OP_ISNAN, (op_val[]){OPV_T(lastv)}, 1) : NULL;
  kiln_tensor *pick = nan ? kiln_where(nan, last, mid) : NULL;
  pick = pick ? kiln_contiguous(pick) : NULL;
  kiln_tensor *v = gather(x, dim, pick);
  if (v && x->ndim && !keepdim) {
    v = kiln_squeeze_dim(v, dim);
    pick = kiln_squeeze_dim(pick, dim);
  }
  return op_out2(v, pick, outs, max);
}
int op_median_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::median", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t flat = -1;
  kiln_tensor *f = kiln_reshape(x, 1, &flat), *o[2];
  if (!f) return KILN_ERR_INVALID;
  rc = median_dim(f, 0, false, o, 2);
  if (rc < 0) return rc;
  return op_out1(o[0], outs);
}
int op_median_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::median", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg("aten::median", &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  return median_dim(x, dim, flag(&a[2], false), outs, max);
}
/* cummax/cummin(self, dim) -> (values, indices) */
static int cum_ext(const char *fn, const op_val *a, int kind, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg(fn, &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  kiln_tensor *ix = index_kernel(x, dim, false, kind);
  return op_out2(gather(x, dim, ix), ix, outs, max);
}
int op_cummax_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return cum_ext("aten::cummax", a, 1, outs, max);
}
int op_cummin_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return cum_ext("aten::cummin", a, 2, outs, max);
}

/* ---- scans ----------------------------------------------------------------------------- */
/* cumsum along dim: x (dim moved last) @ U, U[i, j] = (i <= j); integers
 * and bools sum in float64 (exact below 2^53) and come back as int64 */
static kiln_tensor *cumsum(kiln_tensor *x, int dim, kiln_dtype out) {
  if (!x) return NULL; /* a failed operand (out of memory): its error stands */
  if (x->ndim == 0) return kiln_to_dtype(x, out);
  int64_t len = x->shape[dim], sh[2] = {len, len};
  kiln_dtype cd = core_dtype_is_floating(out) ? out : KILN_DTYPE_F64;
  kiln_tensor *u = kiln_zeros(2, sh, KILN_DTYPE_F64);
  if (!u) return NULL;
  double *p = kiln_tensor_data(u);
  for (int64_t i = 0; i < len; i++)
    for (int64_t j = i; j < len; j++) p[i * len + j] = 1;
  kiln_tensor *xt = kiln_transpose(kiln_to_dtype(x, cd), dim, x->ndim - 1);
  kiln_tensor *r = xt ? kiln_matmul(xt, kiln_to_dtype(u, cd)) : NULL;
  r = r ? kiln_transpose(r, dim, x->ndim - 1) : NULL;
  return r ? kiln_to_dtype(r, out) : NULL;
}
static int scan_dtype(const op_val *x, const op_val *dt, kiln_dtype *out) {
  kiln_dtype d = x->t->dtype == KILN_DTYPE_BOOL ? KILN_DTYPE_I64 : x->t->dtype;
  if (dt->tag == OP_VAL_INT && op_dtype_from_code(dt->i, &d) < 0) return KILN_ERR_INVALID;
  *out = d;
  return 0;
}
int op_cumsum_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  kiln_dtype d;
  int rc = op_arg_tensor("aten::cumsum", &a[0], "self", &x);
  if (rc < 0 || (rc = scan_dtype(&a[0], &a[2], &d)) < 0) return rc;
  int dim = dim_arg("aten::cumsum", &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  return op_out1(cumsum(x, dim, d), outs);
}
/* cumprod: running products, one slice at a time */
int op_cumprod_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  kiln_dtype d;
  int rc = op_arg_tensor("aten::cumprod", &a[0], "self", &x);
  if (rc < 0 || (rc = scan_dtype(&a[0], &a[2], &d)) < 0) return rc;
  int dim = dim_arg("aten::cumprod", &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  x = kiln_to_dtype(x, d);
  if (!x || x->ndim == 0 || x->shape[dim] <= 1) return op_out1(x ? kiln_clone(x) : NULL, outs);
  int64_t len = x->shape[dim];
  kiln_tensor **parts = core_alloc((size_t)len * sizeof *parts);
  if (!parts) return KILN_ERR_NOMEM;
  parts[0] = kiln_narrow(x, dim, 0, 1);
  int64_t i = 1;
  for (; i < len && parts[i - 1]; i++) parts[i] = kiln_mul(parts[i - 1], kiln_narrow(x, dim, i, 1));
  /* i == len with parts[len - 1] set: every part made (a failure stops
   * the loop before the rest of parts[] is written) */
  kiln_tensor *r = i == len && parts[len - 1] ? kiln_cat(parts, (int)len, dim) : NULL;
  core_free(parts);
  return op_out1(r, outs);
}
/* logcumsumexp = log(cumsum(e^(x - m))) + m, m the (finite) max, constant */
int op_logcumsumexp_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::logcumsumexp", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg("aten::logcumsumexp", &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  if (!core_dtype_is_floating(x->dtype)) x = kiln_to_dtype(x, KILN_DTYPE_F32);
  if (!x) return KILN_ERR_INVALID;
  if (x->ndim == 0 || core_numel(x->ndim, x->shape) == 0) return op_out1(kiln_mul_scalar(x, 1), outs);
  kiln_no_grad_begin();
  kiln_tensor *m = kiln_amax(kiln_detach(x), (int64_t[]){dim}, 1, true);
  kiln_tensor *inf = m ? op_call1(KILN_OP_ISINF, (op_val[]){OPV_T(m)}, 1) : NULL;
  m = inf ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(inf), OPV_F(0), OPV_T(m)}, 3) : NULL;
  kiln_no_grad_end();
  if (!m) return KILN_ERR_INVALID;
  kiln_tensor *c = cumsum(kiln_exp(kiln_sub(x, m)), dim, x->dtype);
  return op_out1(c ? kiln_add(kiln_log(c), m) : NULL, outs);
}
