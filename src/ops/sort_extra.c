/* src/ops/sort_extra.c: the rest of OpInfo's sort family (issue #16):
 * nanmedian, mode, bucketize, searchsorted, _unique2, unique_dim and
 * unique_consecutive. A non-differentiable pass over each slice's values
 * (read as float64, or int64 for integer tensors, on the CPU: a lazy input
 * is synced, as sort.c does) picks indices; values are gathered from the
 * input with aten::gather, so nanmedian's and mode's derivatives come from
 * gather. bucketize, searchsorted and unique have no derivative (PyTorch
 * has none). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* x's values along dim moved last, as a contiguous float64 CPU tensor
 * (detached; a 0-d x stays 0-d). */
static kiln_tensor *rows_f64(kiln_tensor *x, int dim) {
  kiln_tensor *c = kiln_tensor_is_lazy(x) ? kiln_to_cpu(x) : x;
  c = c ? kiln_detach(c) : NULL;
  if (c && x->ndim) c = kiln_transpose(c, dim, x->ndim - 1);
  return c ? kiln_contiguous(kiln_to_dtype(c, KILN_DTYPE_F64)) : NULL;
}
static int dim_arg(const char *fn, const op_val *v, kiln_tensor *x, int64_t dflt) {
  return core_wrap_dim(fn, v->tag == OP_VAL_INT ? v->i : dflt, x->ndim);
}
static bool flag(const op_val *v, bool dflt) { return v->tag == OP_VAL_BOOL ? v->b : dflt; }

typedef struct iv {
  double v;
  int64_t i;
} iv;
/* pick(row, n, scratch of n entries) -> the chosen index of one slice */
typedef int64_t (*pick_fn)(const double *row, int64_t n, iv *scratch);

/* One index per slice of x along dim (keepdim shape), as gather wants it. */
static kiln_tensor *pick_index(kiln_tensor *x, int dim, pick_fn pick) {
  kiln_no_grad_begin();
  kiln_tensor *v = rows_f64(x, dim), *ix = NULL;
  if (!v) goto done;
  int64_t n = v->ndim ? v->shape[v->ndim - 1] : 1, total = core_numel(v->ndim, v->shape);
  iv *scratch = core_alloc((size_t)(n ? n : 1) * sizeof *scratch);
  if (!scratch) goto done;
  int64_t sh[KILN_MAX_DIMS];
  memcpy(sh, v->shape, sizeof(int64_t) * (size_t)v->ndim);
  if (v->ndim) sh[v->ndim - 1] = 1;
  ix = kiln_zeros(v->ndim, sh, KILN_DTYPE_I64);
  if (ix) {
    const double *vd = core_data(v);
    int64_t *id = core_data(ix);
    for (int64_t r = 0; n > 0 && r < total / n; r++) id[r] = pick(vd + r * n, n, scratch);
    if (x->ndim) ix = kiln_contiguous(kiln_transpose(ix, dim, x->ndim - 1));
  }
  core_free(scratch);
done:
  kiln_no_grad_end();
  return ix;
}

/* by value (NaN last), then by index */
static int cmp_iv(const void *pa, const void *pb) {
  const iv *a = pa, *b = pb;
  bool na = isnan(a->v), nb = isnan(b->v);
  if (na || nb) {
    if (na != nb) return na ? 1 : -1;
  } else if (a->v != b->v) {
    return a->v < b->v ? -1 : 1;
  }
  return a->i < b->i ? -1 : a->i > b->i;
}
static iv *sorted_row(const double *row, int64_t n, iv *s) {
  for (int64_t i = 0; i < n; i++) s[i] = (iv){row[i], i};
  qsort(s, (size_t)n, sizeof *s, cmp_iv);
  return s;
}

/* nanmedian: the lower median of the non-NaN values; NaN (the first NaN's
 * index) when all are NaN */
static int64_t pick_nanmedian(const double *row, int64_t n, iv *scratch) {
  iv *s = sorted_row(row, n, scratch);
  int64_t k = 0;
  while (k < n && !isnan(s[k].v)) k++;
  return k ? s[(k - 1) / 2].i : s[0].i;
}
/* mode: the most frequent value (the smallest of equally frequent ones),
 * at its last index, as PyTorch's CPU kernel */
static int64_t pick_mode(const double *row, int64_t n, iv *scratch) {
  iv *s = sorted_row(row, n, scratch);
  int64_t best = s[0].i, best_n = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j + 1 < n && (s[j + 1].v == s[i].v || (isnan(s[j + 1].v) && isnan(s[i].v)))) j++;
    if (j - i + 1 > best_n) {
      best_n = j - i + 1;
      best = s[j].i;
    }
    i = j + 1;
  }
  return best;
}

static int select_dim(const char *fn, kiln_tensor *x, int dim, bool keepdim, pick_fn pick,
                      kiln_tensor **outs, int max) {
  int64_t len = x->ndim ? x->shape[dim] : 1;
  if (len == 0)
    return core_error(KILN_ERR_INVALID, "%s: cannot compute %s of an empty dim", fn, fn + 6);
  kiln_tensor *ix = pick_index(x, dim, pick);
  if (!ix) return op_failed_status();
  kiln_tensor *v = x->ndim ? kiln_gather(x, dim, ix) : kiln_clone(x);
  if (v && x->ndim && !keepdim) {
    v = kiln_squeeze_dim(v, dim);
    ix = kiln_squeeze_dim(ix, dim);
  }
  if (ix && !x->ndim) ix = kiln_reshape(ix, 0, NULL);
  return op_out2(v, ix, outs, max);
}
int op_nanmedian_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *o[2];
  int rc = op_arg_tensor("aten::nanmedian", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t flat = -1;
  kiln_tensor *f = kiln_reshape(x, 1, &flat);
  if (!f) return op_failed_status();
  rc = select_dim("aten::nanmedian", f, 0, false, pick_nanmedian, o, 2);
  return rc < 0 ? rc : op_out1(o[0], outs);
}
int op_nanmedian_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::nanmedian", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg("aten::nanmedian", &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  return select_dim("aten::nanmedian", x, dim, flag(&a[2], false), pick_nanmedian, outs, max);
}
int op_mode_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::mode", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg("aten::mode", &a[1], x, -1);
  if (dim < 0) return KILN_ERR_INVALID;
  return select_dim("aten::mode", x, dim, flag(&a[2], false), pick_mode, outs, max);
}

/* ---- bucketize, searchsorted ---------------------------------------------------------- */
/* the first i in [0, n) with b[i] > v (right) or b[i] >= v (left), else n;
 * NaN is above everything */
static int64_t bound(const double *b, int64_t n, double v, bool right) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    double m = b[mid];
    bool go_right = isnan(v) ? !isnan(m) || right : isnan(m) ? false : right ? m <= v : m < v;
    if (go_right) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
/* values v searched in seq's last dim: seq 1-d, or seq's leading dims
 * equal to v's */
static kiln_tensor *search(const char *fn, kiln_tensor *seq, kiln_tensor *v, bool right,
                           bool int32) {
  char d1[64], d2[64];
  if (int32)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: out_int32=True is not supported (kiln has no "
                      "int32 tensors)", fn), NULL;
  if (seq->ndim == 0)
    return core_error(KILN_ERR_INVALID, "%s: boundaries tensor should be 1 dimension or the "
                      "first N-1 dimensions of boundaries tensor and input value tensor must "
                      "match, but we got boundaries tensor %s", fn,
                      core_tensor_desc(seq, d1, sizeof d1)), NULL;
  bool one = seq->ndim == 1;
  if (!one && (seq->ndim != v->ndim ||
               memcmp(seq->shape, v->shape, sizeof(int64_t) * (size_t)(v->ndim - 1))))
    return core_error(KILN_ERR_INVALID, "%s: boundaries tensor should be 1 dimension or the "
                      "first N-1 dimensions of boundaries tensor and input value tensor must "
                      "match, but we got boundaries tensor %s and input value tensor %s", fn,
                      core_tensor_desc(seq, d1, sizeof d1), core_tensor_desc(v, d2, sizeof d2)),
           NULL;
  kiln_no_grad_begin();
  kiln_tensor *s = rows_f64(seq, seq->ndim - 1), *vv = rows_f64(v, v->ndim ? v->ndim - 1 : 0);
  kiln_tensor *r = s && vv ? kiln_zeros(v->ndim, v->shape, KILN_DTYPE_I64) : NULL;
  if (r) {
    int64_t n = seq->shape[seq->ndim - 1], nv = core_numel(v->ndim, v->shape);
    int64_t row = v->ndim ? v->shape[v->ndim - 1] : 1;
    const double *sd = core_data(s), *vd = core_data(vv);
    int64_t *rd = core_data(r);
    for (int64_t i = 0; i < nv; i++)
      rd[i] = bound(sd + (one || row == 0 ? 0 : i / row * n), n, vd[i], right);
  }
  kiln_no_grad_end();
  return r;
}
static bool side_right(const char *fn, const op_val *right, const op_val *side, int *err) {
  bool r = flag(right, false);
  *err = 0;
  if (side->tag == OP_VAL_STR) {
    if (strcmp(side->s, "left") && strcmp(side->s, "right"))
      *err = core_error(KILN_ERR_INVALID, "%s: side can only be 'left' or 'right' but got '%s'",
                        fn, side->s);
    else if (r && !strcmp(side->s, "left"))
      *err = core_error(KILN_ERR_INVALID, "%s: side and right can't be set to opposites, got "
                        "side of left while right was True", fn);
    else r = !strcmp(side->s, "right");
  }
  return r;
}
/* bucketize(self, boundaries, *, out_int32=False, right=False) */
int op_bucketize_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::bucketize";
  kiln_tensor *x, *b;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "boundaries", &b)) < 0)
    return rc;
  if (b->ndim != 1)
    return core_error(KILN_ERR_INVALID, "%s: boundaries tensor must be 1 dimension, but got "
                      "dim(%d)", fn, b->ndim);
  return op_out1(search(fn, b, x, flag(&a[3], false), flag(&a[2], false)), outs);
}
/* searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter) */
int op_searchsorted_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::searchsorted";
  kiln_tensor *s, *x, *sorter = n > 5 ? op_opt_tensor(&a[5]) : NULL;
  int rc, err;
  if ((rc = op_arg_tensor(fn, &a[0], "sorted_sequence", &s)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "self", &x)) < 0)
    return rc;
  bool right = side_right(fn, &a[3], &a[4], &err);
  if (err < 0) return err;
  if (sorter) {
    if (sorter->dtype != KILN_DTYPE_I64 || sorter->ndim != s->ndim ||
        memcmp(sorter->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim))
      return core_error(KILN_ERR_INVALID, "%s: sorter must be a long tensor of the sorted "
                        "sequence's shape", fn);
    s = s->ndim ? kiln_gather(s, s->ndim - 1, sorter) : s;
    if (!s) return op_failed_status();
  }
  return op_out1(search(fn, s, x, right, flag(&a[2], false)), outs);
}

/* ---- unique ------------------------------------------------------------------------------ */
/* The unique values of x flattened (sorted, or consecutive runs), each
 * element's index into them (x's shape) and their counts. */
static int unique_flat(const char *fn, kiln_tensor *x, bool consecutive, bool want_inv,
                       bool want_counts, kiln_tensor **outs, int max) {
  if (max < 3) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs, need 3", fn, max);
  int64_t flat = -1, n = core_numel(x->ndim, x->shape);
  kiln_no_grad_begin();
  kiln_tensor *f = kiln_reshape(x, 1, &flat), *v = f ? rows_f64(f, 0) : NULL;
  kiln_tensor *inv = v ? kiln_zeros(x->ndim, x->shape, KILN_DTYPE_I64) : NULL;
  kiln_tensor *first = inv ? kiln_zeros(1, &n, KILN_DTYPE_I64) : NULL;
  kiln_tensor *cnt = first ? kiln_zeros(1, &n, KILN_DTYPE_I64) : NULL;
  iv *s = NULL;
  int rc = 0;
  if (!cnt || (n && !(s = core_alloc((size_t)n * sizeof *s)))) {
    rc = op_failed_status(); /* core_alloc said out of memory */
    goto done;
  }
  const double *vd = core_data(v);
  int64_t *id = core_data(inv), *fd = core_data(first), *cd = core_data(cnt), k = 0;
  for (int64_t i = 0; i < n; i++) s[i] = (iv){vd[i], i};
  if (!consecutive && n) qsort(s, (size_t)n, sizeof *s, cmp_iv);
  for (int64_t i = 0; i < n; i++) {
    bool same = i && s[i].v == s[i - 1].v; /* NaNs stay apart, as PyTorch's */
    if (!same) fd[k++] = s[i].i;
    id[s[i].i] = k - 1;
    cd[k - 1]++;
  }
  kiln_tensor *ix = kiln_narrow(first, 0, 0, k);
  kiln_no_grad_end();
  kiln_tensor *vals = ix ? kiln_index_select(f, 0, kiln_contiguous(ix)) : NULL;
  kiln_no_grad_begin();
  int64_t zero = 0;
  outs[0] = vals ? kiln_detach(vals) : NULL;
  outs[1] = want_inv ? inv : kiln_zeros(1, &zero, KILN_DTYPE_I64);
  outs[2] = want_counts ? kiln_contiguous(kiln_narrow(cnt, 0, 0, k)) : kiln_zeros(1, &zero, KILN_DTYPE_I64);
  rc = outs[0] && outs[1] && outs[2] ? 3 : op_failed_status();
done:
  core_free(s);
  kiln_no_grad_end();
  return rc;
}

/* The unique slices of x along dim (lexicographic order of their values,
 * or consecutive runs). */
typedef struct slice_ctx {
  const double *v;
  int64_t w;
} slice_ctx;
static int cmp_slice(const void *pa, const void *pb, void *ud) {
  const slice_ctx *c = ud;
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  for (int64_t j = 0; j < c->w; j++) {
    double x = c->v[a * c->w + j], y = c->v[b * c->w + j];
    if (x != y) return x < y ? -1 : 1;
  }
  return a < b ? -1 : a > b;
}
static int unique_slices(const char *fn, kiln_tensor *x, int dim, bool consecutive, bool want_inv,
                         bool want_counts, kiln_tensor **outs, int max) {
  if (max < 3) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs, need 3", fn, max);
  int64_t len = x->shape[dim], w = len ? core_numel(x->ndim, x->shape) / len : 0;
  int rc = 0;
  kiln_no_grad_begin();
  kiln_tensor *m = kiln_contiguous(kiln_transpose(kiln_detach(x), 0, dim));
  int64_t sh2[2] = {len, w};
  kiln_tensor *v = m ? rows_f64(kiln_reshape(m, 2, sh2), 1) : NULL;
  kiln_tensor *inv = v ? kiln_zeros(1, &len, KILN_DTYPE_I64) : NULL;
  kiln_tensor *first = inv ? kiln_zeros(1, &len, KILN_DTYPE_I64) : NULL;
  kiln_tensor *cnt = first ? kiln_zeros(1, &len, KILN_DTYPE_I64) : NULL;
  int64_t *ord = cnt ? core_alloc((size_t)(len ? len : 1) * sizeof *ord) : NULL;
  if (!ord) {
    rc = op_failed_status(); /* core_alloc said out of memory */
    goto done;
  }
  slice_ctx c = {core_data(v), w};
  for (int64_t i = 0; i < len; i++) ord[i] = i;
  if (!consecutive && len) qsort_r(ord, (size_t)len, sizeof *ord, cmp_slice, &c);
  int64_t *id = core_data(inv), *fd = core_data(first), *cd = core_data(cnt), k = 0;
  for (int64_t i = 0; i < len; i++) {
    bool same = i > 0;
    for (int64_t j = 0; j < w && same; j++) same = c.v[ord[i] * w + j] == c.v[ord[i - 1] * w + j];
    if (!same) fd[k++] = ord[i];
    id[ord[i]] = k - 1;
    cd[k - 1]++;
  }
  kiln_tensor *ix = kiln_contiguous(kiln_narrow(first, 0, 0, k));
  int64_t zero = 0;
  outs[0] = ix ? kiln_index_select(kiln_detach(x), dim, ix) : NULL;
  outs[1] = want_inv ? inv : kiln_zeros(1, &zero, KILN_DTYPE_I64);
  outs[2] = want_counts ? kiln_contiguous(kiln_narrow(cnt, 0, 0, k)) : kiln_zeros(1, &zero, KILN_DTYPE_I64);
  rc = outs[0] && outs[1] && outs[2] ? 3 : op_failed_status();
done:
  core_free(ord);
  kiln_no_grad_end();
  return rc;
}

/* _unique2(self, sorted=True, return_inverse=False, return_counts=False):
 * the values are always sorted (PyTorch's CPU order for sorted=False is
 * its hash set's) */
int op_unique2_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::_unique2", &a[0], "self", &x);
  if (rc < 0) return rc;
  return unique_flat("aten::_unique2", x, false, flag(&a[2], false), flag(&a[3], false), outs, max);
}
/* unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False) */
int op_unique_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::unique_dim", &a[0], "self", &x);
  if (rc < 0) return rc;
  int dim = dim_arg("aten::unique_dim", &a[1], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  if (!x->ndim) return core_error(KILN_ERR_INVALID, "aten::unique_dim: a 0-d tensor has no dim");
  return unique_slices("aten::unique_dim", x, dim, false, flag(&a[3], false), flag(&a[4], false),
                       outs, max);
}
/* unique_consecutive(self, return_inverse=False, return_counts=False, dim=None) */
int op_unique_consecutive_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::unique_consecutive";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (a[3].tag != OP_VAL_INT || !x->ndim)
    return unique_flat(fn, x, true, flag(&a[1], false), flag(&a[2], false), outs, max);
  int dim = dim_arg(fn, &a[3], x, 0);
  if (dim < 0) return KILN_ERR_INVALID;
  return unique_slices(fn, x, dim, true, flag(&a[1], false), flag(&a[2], false), outs, max);
}
