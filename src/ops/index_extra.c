/* src/ops/index_extra.c: the rest of OpInfo's indexing family (issue
 * #16): scatter_reduce, index_reduce, masked_select, masked_scatter, put,
 * select_scatter, slice_scatter, diagonal_scatter, as_strided_scatter and
 * argwhere.
 *
 * The *_scatter ops, put and masked_scatter write src into the flattened
 * self at linear positions (aten::index_put on self.reshape(-1)): the
 * positions are a view of arange(numel) (select, slice, diagonal) or
 * computed from the sizes and strides (as_strided) or the mask's true
 * elements (read on the CPU, syncing a lazy mask, as aten::index does), so
 * the derivatives are index_put's.
 *
 * Note [Scatter reductions]: scatter_reduce (and index_reduce, which is
 * scatter_reduce with its index spread over source's shape) computes its
 * result on the CPU from the values (float64, or int64 with wrap-around;
 * bool as int64 then != 0), with per-element weights w_self, w_src equal to
 * PyTorch's derivative (derivatives.yaml: scatter_reduce_backward): sum
 * 1; mean 1/N; amax/amin 1/M among the M elements equal to the result, 0
 * elsewhere; prod the product of the other contributors; self 0 where a
 * src element lands and include_self is False, 1 where none lands. When a
 * gradient is wanted the result is
 *   r + w_self (self - self.detach()) + scatter_add(0, dim, index, w_src (src - src.detach()))
 * which is r in value and has exactly that derivative. The weights are
 * constants, so the second derivative is zero: right for sum, mean, amax
 * and amin, not for prod (the ops say OPF_NO_DOUBLE). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

static int tensor(const char *fn, const op_val *a, const char *name, kiln_tensor **t) {
  return op_arg_tensor(fn, a, name, t);
}
static bool flag(const op_val *v, bool dflt) { return v->tag == OP_VAL_BOOL ? v->b : dflt; }
static bool same_shape(const kiln_tensor *a, const kiln_tensor *b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* A contiguous, detached CPU copy of x in dtype dt (a lazy x is synced). */
static kiln_tensor *host(kiln_tensor *x, kiln_dtype dt) {
  kiln_tensor *c = kiln_tensor_is_lazy(x) ? kiln_to_cpu(x) : x;
  c = c ? kiln_detach(c) : NULL;
  return c ? kiln_contiguous(kiln_to_dtype(c, dt)) : NULL;
}

/* self.reshape(-1).index_put([lin.reshape(-1)], src.reshape(-1), acc), in self's shape */
static kiln_tensor *flat_put(kiln_tensor *x, kiln_tensor *lin, kiln_tensor *src, bool acc) {
  int64_t flat = -1;
  kiln_tensor *xf = kiln_reshape(x, 1, &flat), *lf = kiln_reshape(lin, 1, &flat);
  kiln_tensor *sc = src->dtype == x->dtype ? src : kiln_to_dtype(src, x->dtype);
  kiln_tensor *sf = sc ? kiln_reshape(sc, 1, &flat) : NULL;
  if (!xf || !lf || !sf) return NULL;
  kiln_tensor *list[1] = {lf};
  kiln_tensor *r = op_call1(KILN_OP_INDEX_PUT,
                            (op_val[]){OPV_T(xf), OPV_TS(list, 1), OPV_T(sf), OPV_B(acc)}, 4);
  return r ? kiln_reshape(r, x->ndim, x->shape) : NULL;
}
/* arange(numel(x)) in x's shape (int64) */
static kiln_tensor *positions(kiln_tensor *x) {
  kiln_tensor *a = kiln_arange(0, (double)core_numel(x->ndim, x->shape), 1, KILN_DTYPE_I64);
  return a ? kiln_reshape(a, x->ndim, x->shape) : NULL;
}
/* src written at lin (lin's shape must be src's) */
static int scatter_at(const char *fn, kiln_tensor *x, kiln_tensor *lin, kiln_tensor *src,
                      kiln_tensor **outs) {
  char d1[64], d2[64];
  if (!lin) return op_failed_status();
  if (!same_shape(lin, src))
    return core_error(KILN_ERR_INVALID, "%s: expected src to have a size equal to the slice of "
                      "self. src size = %s, slice size = %s", fn,
                      kiln_shape_str(src, d1, sizeof d1), kiln_shape_str(lin, d2, sizeof d2));
  lin = kiln_contiguous(lin);
  return op_out1(lin ? flat_put(x, lin, src, false) : NULL, outs);
}

/* ---- select/slice/diagonal/as_strided _scatter ---------------------------------------- */
int op_select_scatter_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::select_scatter";
  kiln_tensor *x, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "src", &src)) < 0)
    return rc;
  kiln_tensor *p = positions(x);
  return scatter_at(fn, x, p ? op_call1(KILN_OP_SELECT, (op_val[]){OPV_T(p), a[2], a[3]}, 3) : NULL,
                    src, outs);
}
int op_slice_scatter_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::slice_scatter";
  kiln_tensor *x, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "src", &src)) < 0)
    return rc;
  kiln_tensor *p = positions(x);
  op_val dim = a[2].tag == OP_VAL_INT ? a[2] : OPV_I(0), step = a[5].tag == OP_VAL_INT ? a[5] : OPV_I(1);
  return scatter_at(fn, x,
                    p ? op_call1(KILN_OP_SLICE, (op_val[]){OPV_T(p), dim, a[3], a[4], step}, 5) : NULL,
                    src, outs);
}
int op_diagonal_scatter_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::diagonal_scatter";
  kiln_tensor *x, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "src", &src)) < 0)
    return rc;
  kiln_tensor *p = positions(x);
  op_val off = a[2].tag == OP_VAL_INT ? a[2] : OPV_I(0), d1 = a[3].tag == OP_VAL_INT ? a[3] : OPV_I(0),
         d2 = a[4].tag == OP_VAL_INT ? a[4] : OPV_I(1);
  return scatter_at(fn, x,
                    p ? op_call1(KILN_OP_DIAGONAL, (op_val[]){OPV_T(p), off, d1, d2}, 4) : NULL,
                    src, outs);
}
/* as_strided_scatter(self, src, size, stride, storage_offset=None): self
 * taken as its contiguous storage */
int op_as_strided_scatter_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::as_strided_scatter";
  kiln_tensor *x, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "src", &src)) < 0)
    return rc;
  if (a[2].tag != OP_VAL_INTS || a[3].tag != OP_VAL_INTS || a[2].ints.n != a[3].ints.n ||
      a[2].ints.n > KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: mismatch in length of strides and shape", fn);
  int nd = a[2].ints.n;
  const int64_t *sz = a[2].ints.v, *st = a[3].ints.v;
  int64_t off = a[4].tag == OP_VAL_INT ? a[4].i : 0, total = core_numel(x->ndim, x->shape), cnt = 1;
  int64_t last = off, step; /* the last element the view reaches */
  bool bad = off < 0;
  for (int i = 0; i < nd; i++) {
    if (sz[i] < 0 || st[i] < 0)
      return core_error(KILN_ERR_INVALID, "%s: negative size or stride in dim %d", fn, i);
    if (__builtin_mul_overflow(cnt, sz[i], &cnt))
      return core_error(KILN_ERR_INVALID, "%s: size overflows", fn);
    if (sz[i] && (__builtin_mul_overflow(sz[i] - 1, st[i], &step) ||
                  __builtin_add_overflow(last, step, &last)))
      bad = true;
  }
  if (cnt && (bad || last >= total))
    return core_error(KILN_ERR_INVALID, "%s: setStorage: sizes, strides and storage offset %lld "
                      "are out of bounds for storage of %lld elements", fn, (long long)off,
                      (long long)total);
  kiln_tensor *lin = kiln_zeros(nd, sz, KILN_DTYPE_I64);
  if (!lin) return op_failed_status();
  int64_t *p = core_data(lin), idx[KILN_MAX_DIMS] = {0};
  for (int64_t k = 0; k < cnt; k++) {
    int64_t e = off;
    for (int i = 0; i < nd; i++) e += idx[i] * st[i];
    p[k] = e;
    for (int i = nd - 1; i >= 0 && ++idx[i] == sz[i]; i--) idx[i] = 0;
  }
  return scatter_at(fn, x, lin, src, outs);
}

/* ---- masks and put ----------------------------------------------------------------------- */
/* The linear positions of m's true elements (1-d int64). */
static kiln_tensor *true_positions(kiln_tensor *m) {
  kiln_tensor *h = host(m, KILN_DTYPE_BOOL);
  if (!h) return NULL;
  int64_t n = core_numel(h->ndim, h->shape), k = 0;
  const bool *p = core_data(h);
  for (int64_t i = 0; i < n; i++) k += p[i];
  kiln_tensor *r = kiln_zeros(1, &k, KILN_DTYPE_I64);
  if (!r) return NULL;
  int64_t *q = core_data(r);
  for (int64_t i = 0, j = 0; i < n; i++)
    if (p[i]) q[j++] = i;
  return r;
}
/* x and mask expanded to their broadcast shape (mask must be bool) */
static int broadcast_mask(const char *fn, kiln_tensor **x, kiln_tensor **m) {
  char d[64];
  if ((*m)->dtype != KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID, "%s: expected BoolTensor for mask, got %s", fn,
                      core_tensor_desc(*m, d, sizeof d));
  int nd;
  int64_t sh[KILN_MAX_DIMS];
  int rc = op_broadcast_shapes(fn, (*x)->ndim, (*x)->shape, (*m)->ndim, (*m)->shape, &nd, sh);
  if (rc < 0) return rc;
  *x = kiln_expand(*x, nd, sh);
  *m = kiln_expand(*m, nd, sh);
  return *x && *m ? 0 : op_failed_status();
}
int op_masked_select_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::masked_select";
  kiln_tensor *x, *m;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "mask", &m)) < 0 ||
      (rc = broadcast_mask(fn, &x, &m)) < 0)
    return rc;
  int64_t flat = -1;
  kiln_tensor *lin = true_positions(m);
  return op_out1(lin ? kiln_index_select(kiln_reshape(x, 1, &flat), 0, lin) : NULL, outs);
}
/* masked_scatter(self, mask, source): source's first k elements, in
 * order, where the k true elements of mask are */
int op_masked_scatter_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::masked_scatter";
  kiln_tensor *x, *m, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "mask", &m)) < 0 ||
      (rc = tensor(fn, &a[2], "source", &src)) < 0 || (rc = broadcast_mask(fn, &x, &m)) < 0)
    return rc;
  if (src->dtype != x->dtype)
    return core_error(KILN_ERR_INVALID, "%s: masked_scatter: expected self and source to have "
                      "same dtypes but got %s and %s", fn, kiln_dtype_name(x->dtype),
                      kiln_dtype_name(src->dtype));
  kiln_tensor *lin = true_positions(m);
  if (!lin) return op_failed_status();
  int64_t k = lin->shape[0], flat = -1;
  if (k > core_numel(src->ndim, src->shape))
    return core_error(KILN_ERR_INVALID, "%s: Number of elements of source < number of ones in "
                      "mask", fn);
  kiln_tensor *s = kiln_narrow(kiln_reshape(src, 1, &flat), 0, 0, k);
  x = x->ndim ? kiln_contiguous(x) : x;
  return op_out1(s && x ? flat_put(x, lin, s, false) : NULL, outs);
}
/* put(self, index, source, accumulate=False): self.flatten()[index] = source */
int op_put_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::put";
  kiln_tensor *x, *ix, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "index", &ix)) < 0 ||
      (rc = tensor(fn, &a[2], "source", &src)) < 0)
    return rc;
  if (ix->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: put_(): Expected a long tensor for index, but got %s",
                      fn, kiln_dtype_name(ix->dtype));
  if (src->dtype != x->dtype)
    return core_error(KILN_ERR_INVALID, "%s: put_(): self and source expected to have the same "
                      "dtype, but got self.dtype = %s and source.dtype = %s", fn,
                      kiln_dtype_name(x->dtype), kiln_dtype_name(src->dtype));
  if (core_numel(ix->ndim, ix->shape) != core_numel(src->ndim, src->shape))
    return core_error(KILN_ERR_INVALID, "%s: put_(): Expected source and index to have the same "
                      "number of elements, but got source.numel() = %lld, index.numel() = %lld",
                      fn, (long long)core_numel(src->ndim, src->shape),
                      (long long)core_numel(ix->ndim, ix->shape));
  return op_out1(flat_put(x, ix, src, flag(&a[3], false)), outs);
}
/* argwhere(self): the coordinates of the nonzero elements, [k, ndim] */
int op_argwhere_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::argwhere", &a[0], "self", &x);
  if (rc < 0) return rc;
  kiln_tensor *h = host(x, KILN_DTYPE_F64);
  if (!h) return op_failed_status();
  int64_t total = core_numel(h->ndim, h->shape), k = 0;
  const double *p = core_data(h);
  for (int64_t i = 0; i < total; i++) k += p[i] != 0;
  int64_t sh[2] = {k, x->ndim};
  kiln_tensor *r = kiln_zeros(2, sh, KILN_DTYPE_I64);
  if (!r) return op_failed_status();
  int64_t *q = core_data(r);
  for (int64_t i = 0, j = 0; i < total; i++) {
    if (p[i] == 0) continue;
    for (int64_t d = x->ndim - 1, rem = i; d >= 0; d--) {
      q[j * x->ndim + d] = rem % x->shape[d];
      rem /= x->shape[d];
    }
    j++;
  }
  return op_out1(r, outs);
}

/* ---- scatter_reduce, index_reduce (Note [Scatter reductions]) --------------------------- */
enum { RED_SUM, RED_PROD, RED_MEAN, RED_AMAX, RED_AMIN };

static int reduce_code(const char *fn, const op_val *v, bool index_reduce) {
  static const char *names[] = {"sum", "prod", "mean", "amax", "amin"};
  for (int i = index_reduce ? 1 : 0; v->tag == OP_VAL_STR && i < 5; i++)
    if (!strcmp(v->s, names[i])) return i;
  return core_error(KILN_ERR_INVALID, "%s: reduce argument must be either %s of %s", fn,
                    index_reduce ? "prod, mean, amax or amin," : "sum, prod, mean, amax or amin,",
                    v->tag == OP_VAL_STR ? v->s : "a non-string");
}

typedef struct red_plan {
  int64_t nx, nq;      /* elements of self, of index */
  int64_t *target;     /* per index element: the self element it lands on */
} red_plan;

/* target[q] = q's multi-index in index's shape with dim replaced by index[q] */
static int plan(const char *fn, kiln_tensor *x, int dim, kiln_tensor *ixh, red_plan *p) {
  p->nx = core_numel(x->ndim, x->shape);
  p->nq = core_numel(ixh->ndim, ixh->shape);
  p->target = core_alloc((size_t)(p->nq ? p->nq : 1) * sizeof(int64_t));
  if (!p->target) return KILN_ERR_NOMEM; /* core_alloc said out of memory */
  const int64_t *iv = core_data(ixh);
  int64_t idx[KILN_MAX_DIMS] = {0};
  for (int64_t q = 0; q < p->nq; q++) {
    int64_t t = 0, v = iv[q];
    if (v < 0 || v >= x->shape[dim]) {
      core_free(p->target);
      return core_error(KILN_ERR_INVALID, "%s: index %lld is out of bounds for dimension %d with "
                        "size %lld", fn, (long long)v, dim, (long long)x->shape[dim]);
    }
    for (int d = 0; d < x->ndim; d++) t = t * x->shape[d] + (d == dim ? v : idx[d]);
    p->target[q] = t;
    for (int d = ixh->ndim - 1; d >= 0 && ++idx[d] == ixh->shape[d]; d--) idx[d] = 0;
  }
  return 0;
}

/* Integer (and bool) results, wrapping as int64 does. */
static kiln_tensor *reduce_int(kiln_tensor *x, kiln_tensor *src, const red_plan *p, int red,
                               bool incl) {
  kiln_tensor *xh = host(x, KILN_DTYPE_I64), *sh = host(src, KILN_DTYPE_I64);
  kiln_tensor *r = xh ? kiln_clone(xh) : NULL;
  int64_t *cnt = core_calloc((size_t)(p->nx ? p->nx : 1), sizeof *cnt);
  if (!r || !sh || !cnt) {
    core_free(cnt);
    return NULL; /* the failed call said why */
  }
  uint64_t *rv = core_data(r);
  const int64_t *s = core_data(sh);
  for (int64_t q = 0; q < p->nq; q++) {
    int64_t t = p->target[q], v = s[q];
    if (!incl && !cnt[t]) rv[t] = (uint64_t)v;
    else if (red == RED_SUM || red == RED_MEAN) rv[t] += (uint64_t)v;
    else if (red == RED_PROD) rv[t] *= (uint64_t)v;
    else if (red == RED_AMAX) rv[t] = (int64_t)rv[t] > v ? rv[t] : (uint64_t)v;
    else rv[t] = (int64_t)rv[t] < v ? rv[t] : (uint64_t)v;
    cnt[t]++;
  }
  if (red == RED_MEAN)
    for (int64_t t = 0; t < p->nx; t++) {
      int64_t c = cnt[t] + (incl ? 1 : 0), v = (int64_t)rv[t];
      if (!cnt[t]) continue;
      int64_t qv = v / c;
      if ((v % c != 0) && ((v < 0) != (c < 0))) qv--; /* floor, as PyTorch */
      rv[t] = (uint64_t)qv;
    }
  core_free(cnt);
  return x->dtype == KILN_DTYPE_BOOL ? kiln_ne(r, kiln_scalar(0, KILN_DTYPE_I64)) : r;
}

/* Float results (in float64) and, when w_self is not NULL, the weights. */
static kiln_tensor *reduce_float(kiln_tensor *x, kiln_tensor *src, const red_plan *p, int red,
                                 bool incl, kiln_tensor **w_self, kiln_tensor **w_src) {
  kiln_tensor *xh = host(x, KILN_DTYPE_F64), *sh = host(src, KILN_DTYPE_F64);
  kiln_tensor *r = xh ? kiln_clone(xh) : NULL;
  size_t nx = (size_t)(p->nx ? p->nx : 1);
  int64_t *cnt = core_calloc(nx, sizeof *cnt), *zeros = core_calloc(nx, sizeof *zeros);
  double *nz = core_alloc(nx * sizeof *nz); /* product of the nonzero contributors */
  if (!r || !sh || !cnt || !zeros || !nz) {
    core_free(cnt), core_free(zeros), core_free(nz);
    return NULL; /* the failed call said why */
  }
  double *rv = core_data(r);
  const double *xv = core_data(xh), *s = core_data(sh);
  for (int64_t t = 0; t < p->nx; t++) {
    nz[t] = incl && xv[t] != 0 ? xv[t] : 1;
    zeros[t] = incl && xv[t] == 0;
  }
  for (int64_t q = 0; q < p->nq; q++) {
    int64_t t = p->target[q];
    double v = s[q];
    if (!incl && !cnt[t]) rv[t] = v;
    else if (red == RED_SUM || red == RED_MEAN) rv[t] += v;
    else if (red == RED_PROD) rv[t] *= v;
    else if (red == RED_AMAX) rv[t] = isnan(rv[t]) || rv[t] > v ? rv[t] : v;
    else rv[t] = isnan(rv[t]) || rv[t] < v ? rv[t] : v;
    if (v != 0) nz[t] *= v;
    else zeros[t]++;
    cnt[t]++;
  }
  if (red == RED_MEAN)
    for (int64_t t = 0; t < p->nx; t++)
      if (cnt[t]) rv[t] /= (double)(cnt[t] + (incl ? 1 : 0));
  if (w_self) {
    int64_t nq = p->nq;
    *w_self = kiln_ones(x->ndim, x->shape, KILN_DTYPE_F64);
    *w_src = kiln_ones(1, &nq, KILN_DTYPE_F64);
    if (*w_self && *w_src) {
      double *ws = core_data(*w_self), *wq = core_data(*w_src);
      double *m = core_calloc(nx, sizeof *m); /* amax/amin: how many equal the result */
      if (!m) {
        core_free(cnt), core_free(zeros), core_free(nz);
        return NULL;
      }
      for (int64_t t = 0; m && t < p->nx; t++) m[t] = incl && xv[t] == rv[t];
      for (int64_t q = 0; m && q < nq; q++) m[p->target[q]] += s[q] == rv[p->target[q]];
      /* the product of a group's elements other than one of value e */
      for (int64_t t = 0; t < p->nx; t++) {
        if (!cnt[t]) continue; /* nothing lands: the result is self */
        double e = xv[t], c = (double)(cnt[t] + (incl ? 1 : 0));
        if (!incl) ws[t] = 0;
        else if (red == RED_MEAN) ws[t] = 1 / c;
        else if (red == RED_PROD)
          ws[t] = e != 0 ? (zeros[t] ? 0 : nz[t] / e) : (zeros[t] == 1 ? nz[t] : 0);
        else if (red == RED_AMAX || red == RED_AMIN) ws[t] = m && e == rv[t] ? 1 / m[t] : 0;
      }
      for (int64_t q = 0; q < nq; q++) {
        int64_t t = p->target[q];
        double e = s[q];
        if (red == RED_MEAN) wq[q] = 1 / (double)(cnt[t] + (incl ? 1 : 0));
        else if (red == RED_PROD)
          wq[q] = e != 0 ? (zeros[t] ? 0 : nz[t] / e) : (zeros[t] == 1 ? nz[t] : 0);
        else if (red == RED_AMAX || red == RED_AMIN) wq[q] = m && e == rv[t] ? 1 / m[t] : 0;
      }
      core_free(m);
    }
  }
  core_free(cnt), core_free(zeros), core_free(nz);
  return r;
}

/* scatter_reduce on tensors of at least one dim; ix of the same ndim */
static kiln_tensor *scatter_reduce(const char *fn, kiln_tensor *x, int dim, kiln_tensor *ix,
                                   kiln_tensor *src, int red, bool incl) {
  char d1[64], d2[64];
  if (!x || !ix || !src) return NULL; /* a view that ran out of memory: its error is set */
  if (ix->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: Expected dtype int64 for index", fn), NULL;
  if (src->dtype != x->dtype)
    return core_error(KILN_ERR_INVALID, "%s: Expected self.dtype to be equal to src.dtype", fn),
           NULL;
  if (ix->ndim != x->ndim || src->ndim != x->ndim)
    return core_error(KILN_ERR_INVALID, "%s: Index tensor must have the same number of dimensions "
                      "as self tensor", fn), NULL;
  for (int d = 0; d < x->ndim; d++)
    if (ix->shape[d] > src->shape[d] || (d != dim && ix->shape[d] > x->shape[d]))
      return core_error(KILN_ERR_INVALID, "%s: Expected index %s to be smaller than self %s apart "
                        "from dimension %d and to be smaller size than src %s", fn,
                        kiln_shape_str(ix, d1, sizeof d1), kiln_shape_str(x, d2, sizeof d2), dim,
                        kiln_shape_str(src, (char[64]){0}, 64)), NULL;
  if (red == RED_MEAN && x->dtype == KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID, "%s: mean is not supported for bool tensors", fn), NULL;
  /* only src's leading block of index's shape is read */
  for (int d = 0; src && d < ix->ndim; d++)
    if (src->shape[d] != ix->shape[d]) src = kiln_narrow(src, d, 0, ix->shape[d]);
  kiln_tensor *ixh = src ? host(ix, KILN_DTYPE_I64) : NULL;
  red_plan p;
  if (!ixh || plan(fn, x, dim, ixh, &p) < 0) return NULL;
  kiln_tensor *r = NULL, *ws = NULL, *wq = NULL;
  bool grad = op_grad_enabled && core_dtype_is_floating(x->dtype) &&
              (kiln_requires_grad(x) || kiln_requires_grad(src));
  kiln_no_grad_begin();
  if (core_dtype_is_floating(x->dtype))
    r = reduce_float(x, src, &p, red, incl, grad ? &ws : NULL, grad ? &wq : NULL);
  else
    r = reduce_int(x, src, &p, red, incl);
  if (r) r = kiln_to_dtype(r, x->dtype);
  core_free(p.target);
  if (grad && ws && wq) {
    ws = kiln_to_dtype(ws, x->dtype);
    wq = kiln_to_dtype(kiln_reshape(wq, src->ndim, src->shape), x->dtype);
  }
  kiln_no_grad_end();
  if (!r || !grad) return r;
  if (!ws || !wq) return NULL;
  /* r + w_self (x - x.detach()) + scatter_add(0, dim, ix, w_src (src - src.detach())) */
  kiln_tensor *dx = kiln_mul(ws, kiln_sub(x, kiln_detach(x)));
  kiln_tensor *ds = kiln_mul(wq, kiln_sub(src, kiln_detach(src)));
  kiln_tensor *z = kiln_zeros(x->ndim, x->shape, x->dtype);
  kiln_tensor *sa = ds && z ? op_call1(KILN_OP_SCATTER_ADD,
                                       (op_val[]){OPV_T(z), OPV_I(dim), OPV_T(ix), OPV_T(ds)}, 4)
                            : NULL;
  return dx && sa ? kiln_add(kiln_add(r, dx), sa) : NULL;
}
/* 0-d tensors as 1-element vectors, and back */
static kiln_tensor *vec(kiln_tensor *t) {
  int64_t one = 1;
  return t && t->ndim == 0 ? kiln_reshape(t, 1, &one) : t;
}
int op_scatter_reduce_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::scatter_reduce";
  kiln_tensor *x, *ix, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[2], "index", &ix)) < 0 ||
      (rc = tensor(fn, &a[3], "src", &src)) < 0)
    return rc;
  int red = reduce_code(fn, &a[4], false);
  if (red < 0) return red;
  int dim = core_wrap_dim(fn, a[1].tag == OP_VAL_INT ? a[1].i : 0, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  kiln_tensor *r = scatter_reduce(fn, vec(x), dim, vec(ix), vec(src), red, flag(&a[5], true));
  return op_out1(r && x->ndim == 0 ? kiln_reshape(r, 0, NULL) : r, outs);
}
/* index_reduce(self, dim, index, source, reduce, *, include_self=True):
 * scatter_reduce with index[i] spread over source's slice i along dim */
int op_index_reduce_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::index_reduce";
  kiln_tensor *x, *ix, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[2], "index", &ix)) < 0 ||
      (rc = tensor(fn, &a[3], "source", &src)) < 0)
    return rc;
  int red = reduce_code(fn, &a[4], true);
  if (red < 0) return red;
  int dim = core_wrap_dim(fn, a[1].tag == OP_VAL_INT ? a[1].i : 0, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  kiln_tensor *xv = vec(x), *sv = vec(src);
  int64_t flat = -1, len = core_numel(ix->ndim, ix->shape);
  if (ix->ndim > 1)
    return core_error(KILN_ERR_INVALID, "%s: Index is supposed to be a vector", fn);
  if (!xv || !sv) return op_failed_status();
  if (sv->ndim != xv->ndim || sv->shape[dim] != len)
    return core_error(KILN_ERR_INVALID, "%s: Index should have the same number of elements as "
                      "dimension %d of source, and source the same number of dims as self", fn,
                      dim);
  for (int d = 0; d < xv->ndim; d++)
    if (d != dim && sv->shape[d] != xv->shape[d])
      return core_error(KILN_ERR_INVALID, "%s: source and self must match in size apart from "
                        "dimension %d", fn, dim);
  int64_t sh[KILN_MAX_DIMS];
  for (int d = 0; d < xv->ndim; d++) sh[d] = d == dim ? len : 1;
  kiln_tensor *ie = kiln_reshape(kiln_reshape(ix, 1, &flat), xv->ndim, sh);
  ie = ie ? kiln_contiguous(kiln_expand(ie, sv->ndim, sv->shape)) : NULL;
  if (!ie) return op_failed_status();
  kiln_tensor *r = scatter_reduce(fn, xv, dim, ie, sv, red, flag(&a[5], true));
  return op_out1(r && x->ndim == 0 ? kiln_reshape(r, 0, NULL) : r, outs);
}
