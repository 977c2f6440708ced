/* src/ops/reduce_more.c: more reductions, as decompositions into the
 * table's ops: quantile/nanquantile (sort, gather, lerp: Sorting.cpp's
 * quantile_compute), histc (the linear-interpolation binning of
 * HistogramKernel.cpp, as index_add), bincount (index_add), and the norm
 * overloads torch.norm's scripted body prints (with dtype, and the out=
 * forms, which write their result into out). Derivatives come from the
 * ops they are made of; histc and bincount are not differentiable. */
#include <math.h>
#include <string.h>

#include "op.h"

static bool flag(const op_val *v) { return v->tag == OP_VAL_BOOL && v->b; }

/* ---- quantile / nanquantile ----------------------------------------------------- */

typedef enum { Q_LINEAR, Q_LOWER, Q_HIGHER, Q_MIDPOINT, Q_NEAREST } q_mode;

static int q_mode_of(const char *fn, const op_val *v, q_mode *m) {
  static const char *const names[] = {"linear", "lower", "higher", "midpoint", "nearest"};
  const char *s = v->tag == OP_VAL_STR ? v->s : "linear";
  for (int i = 0; i < 5; i++)
    if (strcmp(s, names[i]) == 0) {
      *m = (q_mode)i;
      return 0;
    }
  return core_error(KILN_ERR_INVALID, "%s: quantile() interpolation must be one of linear, lower, "
                    "higher, midpoint or nearest. Found '%s'", fn, s);
}

/* q as a tensor in x's dtype (a float argument becomes 0-d), checked */
static kiln_tensor *q_tensor(const char *fn, const op_val *v, kiln_tensor *x) {
  if (v->tag == OP_VAL_TENSOR) {
    kiln_tensor *q = v->t;
    if (q->ndim > 1) {
      core_error(KILN_ERR_INVALID, "%s: quantile() q must be a scalar or 1D tensor", fn);
      return NULL;
    }
    if (q->dtype != x->dtype) {
      core_error(KILN_ERR_INVALID, "%s: quantile() q tensor must be same dtype as the input tensor", fn);
      return NULL;
    }
    if (q->device != CORE_DEVICE_LAZY) {
      for (int64_t i = 0; i < core_numel(q->ndim, q->shape); i++) {
        double e = core_get_flat(q, i);
        if (!(e >= 0 && e <= 1)) {
          core_error(KILN_ERR_INVALID, "%s: quantile() q values must be in the range [0, 1]", fn);
          return NULL;
        }
      }
    }
    return q;
  }
  if (!op_val_is_num(v)) {
    core_error(KILN_ERR_INVALID, "%s: expected a float or a tensor for 'q'", fn);
    return NULL;
  }
  double e = op_val_num(v);
  if (!(e >= 0 && e <= 1)) {
    core_error(KILN_ERR_INVALID, "%s: quantile() q must be in the range [0, 1] but got %g", fn, e);
    return NULL;
  }
  return kiln_scalar(e, x->dtype);
}

/* quantile(self, q, dim=None, keepdim=False, *, interpolation): the
 * reduced dim moved last and sorted (NaN sorts last); rank q (n - 1), or
 * q (count of non-NaN - 1) ignoring NaN (a row with a NaN takes its last
 * value, NaN, unless NaN is ignored); values at the ranks below and
 * above, interpolated. Result shape: q's (0 or 1 dim), then the reduced
 * shape. */
static int quantile(const char *fn, const op_val *a, bool ignore_nan, kiln_tensor **outs) {
  kiln_tensor *x;
  char d[64];
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->dtype != KILN_DTYPE_F32 && x->dtype != KILN_DTYPE_F64)
    return core_error(KILN_ERR_INVALID, "%s: quantile() input tensor must be either float or double "
                      "dtype, got %s", fn, core_tensor_desc(x, d, sizeof d));
  if (core_numel(x->ndim, x->shape) == 0)
    return core_error(KILN_ERR_INVALID, "%s: quantile() input tensor must be non-empty", fn);
  q_mode mode = Q_LINEAR;
  if ((rc = q_mode_of(fn, &a[4], &mode)) < 0) return rc;
  kiln_tensor *q = q_tensor(fn, &a[1], x);
  if (!q) return KILN_ERR_INVALID;
  bool keep = flag(&a[3]), has_dim = a[2].tag == OP_VAL_INT && x->ndim > 0;
  int nd = x->ndim, dim = 0;
  if (a[2].tag == OP_VAL_INT && (dim = core_wrap_dim(fn, a[2].i, nd ? nd : 1)) < 0) return KILN_ERR_INVALID;
  int64_t n = has_dim ? x->shape[dim] : core_numel(nd, x->shape);
  kiln_tensor *xs = has_dim ? op_call1(KILN_OP_MOVEDIM_INT, (op_val[]){OPV_T(x), OPV_I(dim), OPV_I(-1)}, 3)
                            : kiln_reshape(x, 1, &n);
  kiln_tensor *srt[2];
  if (!xs || (rc = op_call(KILN_OP_SORT, (op_val[]){OPV_T(xs), OPV_I(-1), OPV_B(false)}, 3, srt, 2)) < 0)
    return op_failed_status();
  kiln_tensor *s = srt[0];
  int64_t nq = core_numel(q->ndim, q->shape);
  kiln_tensor *q1 = kiln_reshape(q, 1, &nq); /* [Q]: broadcasts along the last dim */
  kiln_tensor *ranks;
  if (ignore_nan) {
    kiln_tensor *ok = op_call1(KILN_OP_LOGICAL_NOT, (op_val[]){OPV_T(op_call1(KILN_OP_ISNAN,
                                                   (op_val[]){OPV_T(s)}, 1))}, 1);
    int64_t last = -1;
    kiln_tensor *cnt = ok ? kiln_sum(kiln_to_dtype(ok, KILN_DTYPE_I64), &last, 1, true) : NULL;
    ranks = cnt ? kiln_mul(q1, kiln_sub_scalar(cnt, 1)) : NULL;
    kiln_tensor *neg = ranks ? op_call1(KILN_OP_LT, (op_val[]){OPV_T(ranks), OPV_I(0)}, 2) : NULL;
    ranks = neg ? kiln_where(neg, kiln_scalar(0, x->dtype), ranks) : NULL;
  } else {
    kiln_tensor *lastv = kiln_narrow(s, s->ndim - 1, n - 1, 1);
    kiln_tensor *nan = lastv ? op_call1(KILN_OP_ISNAN, (op_val[]){OPV_T(lastv)}, 1) : NULL;
    ranks = nan ? kiln_where(nan, kiln_scalar((double)(n - 1), x->dtype), kiln_mul_scalar(q1, (double)(n - 1)))
                : NULL;
  }
  if (ranks) { /* every row has its own ranks: [..., Q] */
    int64_t sh[KILN_MAX_DIMS];
    memcpy(sh, s->shape, sizeof(int64_t) * (size_t)s->ndim);
    sh[s->ndim - 1] = nq;
    ranks = kiln_contiguous(kiln_expand(ranks, s->ndim, sh));
  }
  if (ranks && mode == Q_LOWER) ranks = op_call1(KILN_OP_FLOOR, (op_val[]){OPV_T(ranks)}, 1);
  if (ranks && mode == Q_HIGHER) ranks = op_call1(KILN_OP_CEIL, (op_val[]){OPV_T(ranks)}, 1);
  if (ranks && mode == Q_NEAREST) ranks = op_call1(KILN_OP_ROUND, (op_val[]){OPV_T(ranks)}, 1);
  kiln_tensor *below = ranks ? kiln_to_dtype(ranks, KILN_DTYPE_I64) : NULL;
  kiln_tensor *v = below ? kiln_gather(s, s->ndim - 1, below) : NULL;
  if (v && (mode == Q_LINEAR || mode == Q_MIDPOINT)) {
    kiln_tensor *above = kiln_to_dtype(op_call1(KILN_OP_CEIL, (op_val[]){OPV_T(ranks)}, 1), KILN_DTYPE_I64);
    kiln_tensor *va = above ? kiln_gather(s, s->ndim - 1, above) : NULL;
    kiln_tensor *w = mode == Q_MIDPOINT ? kiln_full(ranks->ndim, ranks->shape, 0.5, x->dtype)
                                        : kiln_sub(ranks, kiln_to_dtype(below, x->dtype));
    v = va && w ? op_call1(KILN_OP_LERP_T, (op_val[]){OPV_T(v), OPV_T(va), OPV_T(w)}, 3) : NULL;
  }
  /* [R..., Q] -> [Q, R...], the reduced dim kept as 1 when keepdim */
  v = v ? op_call1(KILN_OP_MOVEDIM_INT, (op_val[]){OPV_T(v), OPV_I(-1), OPV_I(0)}, 3) : NULL;
  if (v && keep) {
    if (has_dim) {
      v = kiln_unsqueeze(v, 1 + dim);
    } else {
      int64_t sh[KILN_MAX_DIMS + 1];
      sh[0] = nq;
      for (int i = 0; i < nd; i++) sh[1 + i] = 1;
      v = kiln_reshape(v, nd + 1, sh);
    }
  }
  if (v && q->ndim == 0) v = kiln_select(v, 0, 0);
  return op_out1(v, outs);
}

int op_quantile_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return quantile("aten::quantile", a, false, outs);
}
int op_quantile_scalar_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return quantile("aten::quantile", a, false, outs);
}
int op_nanquantile_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return quantile("aten::nanquantile", a, true, outs);
}
int op_nanquantile_scalar_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return quantile("aten::nanquantile", a, true, outs);
}

/* ---- histc, bincount ------------------------------------------------------------ */

/* *v = the value of one-element t, syncing a lazy one; < 0 (error set)
 * when t is NULL (a failed reduction) or cannot be read (a lazy one whose
 * sync failed). */
static int item(kiln_tensor *t, double *v) {
  if (!t) return op_failed_status();
  int rc = kiln_item(t, v);
  return rc < 0 ? rc : 0;
}

/* histc(self, bins=100, min=0, max=0): min == max takes the data's range
 * (widened by 1 each side when that is one value); bin = (x - min) bins /
 * (max - min) in self's dtype, x == max in the last bin, x outside
 * [min, max] (and NaN) in none: counts added with index_add. */
int op_histc_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::histc";
  kiln_tensor *x;
  char d[64];
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "%s: \"histogram_cpu\" not implemented for %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  int64_t bins = a[1].tag == OP_VAL_INT ? a[1].i : 100;
  if (bins <= 0) return core_error(KILN_ERR_INVALID, "%s: bins must be > 0, but got %lld for dimension 0",
                                   fn, (long long)bins);
  double lo = op_val_is_num(&a[2]) ? op_val_num(&a[2]) : 0, hi = op_val_is_num(&a[3]) ? op_val_num(&a[3]) : 0;
  if (lo == hi && core_numel(x->ndim, x->shape) > 0) {
    kiln_no_grad_begin();
    rc = item(kiln_amin(x, NULL, 0, false), &lo);
    if (rc == 0) rc = item(kiln_amax(x, NULL, 0, false), &hi);
    kiln_no_grad_end();
    if (rc < 0) return rc; /* not a NaN range: the reduction's error */
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  if (!isfinite(lo) || !isfinite(hi))
    return core_error(KILN_ERR_INVALID, "%s: torch.histc: range of [%g, %g] is not finite", fn, lo, hi);
  if (!(lo < hi)) return core_error(KILN_ERR_INVALID, "%s: torch.histc: max must be larger than min", fn);
  if (x->dtype == KILN_DTYPE_F32) { /* the edges are in self's dtype */
    lo = (float)lo;
    hi = (float)hi;
  }
  kiln_no_grad_begin();
  int64_t m = core_numel(x->ndim, x->shape);
  kiln_tensor *flat = kiln_reshape(kiln_detach(x), 1, &m);
  kiln_tensor *ge = flat ? op_call1(KILN_OP_GE, (op_val[]){OPV_T(flat), OPV_F(lo)}, 2) : NULL;
  kiln_tensor *le = flat ? op_call1(KILN_OP_LE, (op_val[]){OPV_T(flat), OPV_F(hi)}, 2) : NULL;
  kiln_tensor *in = ge && le ? op_call1(KILN_OP_LOGICAL_AND, (op_val[]){OPV_T(ge), OPV_T(le)}, 2) : NULL;
  double span = x->dtype == KILN_DTYPE_F32 ? (double)(float)(hi - lo) : hi - lo;
  kiln_tensor *pos = in ? kiln_div_scalar(kiln_mul_scalar(kiln_sub_scalar(flat, lo), (double)bins), span) : NULL;
  pos = pos ? op_call1(KILN_OP_TRUNC, (op_val[]){OPV_T(kiln_where(in, pos, kiln_scalar(0, x->dtype)))}, 1) : NULL;
  pos = pos ? kiln_to_dtype(kiln_clamp(pos, 0, (double)(bins - 1)), KILN_DTYPE_I64) : NULL;
  kiln_tensor *h = pos ? kiln_zeros(1, &bins, x->dtype) : NULL;
  h = h ? op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(h), OPV_I(0), OPV_T(pos),
                                                OPV_T(kiln_to_dtype(in, x->dtype)), OPV_I(1)}, 5) : NULL;
  kiln_no_grad_end();
  return op_out1(h, outs);
}

/* bincount(self, weights=None, minlength=0): counts (or summed weights:
 * float32 weights give float32, others float64) of each value of a 1-d
 * non-negative integer tensor, max(max + 1, minlength) of them; reads the
 * maximum (syncing a lazy input) */
int op_bincount_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::bincount";
  kiln_tensor *x, *w = op_opt_tensor(&a[1]);
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t minlength = a[2].tag == OP_VAL_INT ? a[2].i : 0;
  if (minlength < 0) return core_error(KILN_ERR_INVALID, "%s: minlength should be >= 0", fn);
  if (x->ndim != 1 || x->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: bincount only supports 1-d non-negative integral inputs.", fn);
  if (w && (w->ndim != 1 || w->shape[0] != x->shape[0]))
    return core_error(KILN_ERR_INVALID, "%s: weights should be 1-d and have the same length as input", fn);
  kiln_dtype dt = !w ? KILN_DTYPE_I64 : w->dtype == KILN_DTYPE_F32 ? KILN_DTYPE_F32 : KILN_DTYPE_F64;
  int64_t len = minlength;
  kiln_no_grad_begin();
  if (x->shape[0] > 0) {
    double lo = 0, hi = 0;
    rc = item(kiln_amin(x, NULL, 0, false), &lo);
    if (rc == 0) rc = item(kiln_amax(x, NULL, 0, false), &hi);
    if (rc < 0) {
      kiln_no_grad_end();
      return rc;
    }
    if (lo < 0) {
      kiln_no_grad_end();
      return core_error(KILN_ERR_INVALID, "%s: bincount only supports 1-d non-negative integral inputs.", fn);
    }
    if ((int64_t)hi + 1 > len) len = (int64_t)hi + 1;
  }
  kiln_tensor *src = w ? kiln_to_dtype(kiln_detach(w), dt) : kiln_ones(1, x->shape, dt);
  kiln_tensor *h = src ? kiln_zeros(1, &len, dt) : NULL;
  h = h ? op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(h), OPV_I(0), OPV_T(x), OPV_T(src), OPV_I(1)}, 5)
        : NULL;
  kiln_no_grad_end();
  return op_out1(h, outs);
}

/* ---- norm overloads ------------------------------------------------------------- */

/* norm.ScalarOpt_dim in dtype (self converted first) */
static kiln_tensor *norm_in(const op_val *a, const op_val *dtype) {
  kiln_tensor *x;
  if (op_arg_tensor("aten::norm", &a[0], "self", &x) < 0) return NULL;
  if (dtype && dtype->tag == OP_VAL_INT) {
    kiln_dtype dt;
    if (op_dtype_from_code(dtype->i, &dt) < 0) return NULL;
    if (!core_dtype_is_floating(dt)) {
      core_error(KILN_ERR_INVALID, "aten::norm: dtype should be floating point, but got %s", kiln_dtype_name(dt));
      return NULL;
    }
    x = kiln_to_dtype(x, dt);
  }
  return x ? op_call1(KILN_OP_NORM_DIM, (op_val[]){OPV_T(x), a[1], a[2], a[3]}, 4) : NULL;
}

/* An out= form's result r written into out (of r's shape and dtype: kiln
 * does not resize out=), which is returned; as PyTorch, no autograd. */
static int write_out(const char *fn, kiln_tensor *r, const op_val *o, kiln_tensor **outs) {
  kiln_tensor *out;
  char d1[64], d2[64];
  if (!r) return op_failed_status();
  int rc = op_arg_tensor(fn, o, "out", &out);
  if (rc < 0) return rc;
  if (kiln_is_grad_enabled() && (kiln_requires_grad(r) || kiln_requires_grad(out)))
    return core_error(KILN_ERR_INVALID, "%s: functions with out=... arguments don't support automatic "
                      "differentiation, but one of the arguments requires grad.", fn);
  if (out->dtype != r->dtype || out->ndim != r->ndim ||
      memcmp(out->shape, r->shape, sizeof(int64_t) * (size_t)r->ndim) != 0)
    return core_error(KILN_ERR_INVALID, "%s: out= tensor %s cannot hold the result %s (kiln does not resize "
                      "out= tensors)", fn, core_tensor_desc(out, d1, sizeof d1), core_tensor_desc(r, d2, sizeof d2));
  if ((rc = kiln_copy_(out, r)) < 0) return rc;
  outs[0] = core_autorelease(kiln_retain(out));
  return outs[0] ? 1 : KILN_ERR_NOMEM;
}

int op_norm_dim_dtype_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(norm_in(a, &a[4]), outs);
}
int op_norm_out_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return write_out("aten::norm", norm_in(a, NULL), &a[4], outs);
}
int op_norm_dtype_out_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return write_out("aten::norm", norm_in(a, &a[4]), &a[5], outs);
}

/* ---- frobenius_norm, nuclear_norm -------------------------------------------------- */

/* frobenius_norm.dim(self, dim, keepdim): the 2-norm over dim (all when []) */
static kiln_tensor *frobenius(const op_val *a) {
  return op_call1(KILN_OP_NORM_DIM, (op_val[]){a[0], OPV_F(2), a[1], a[2]}, 4);
}
int op_frobenius_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(frobenius(a), outs);
}
int op_frobenius_norm_out_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return write_out("aten::frobenius_norm", frobenius(a), &a[3], outs);
}

/* nuclear_norm: the sum of the singular values of the matrices in dims
 * (the last two of a 2-d self when dim is NULL), moved last */
static kiln_tensor *nuclear(const op_val *self, const op_val *dim, const op_val *keepdim) {
  const char *fn = "aten::nuclear_norm";
  kiln_tensor *x;
  if (op_arg_tensor(fn, self, "self", &x) < 0) return NULL;
  int64_t d0 = 0, d1 = 1;
  if (!dim) {
    if (x->ndim != 2) {
      core_error(KILN_ERR_INVALID, "%s: Expected a tensor with 2 dimensions, but got a tensor with %d dimension%s "
                 "instead.", fn, x->ndim, x->ndim == 1 ? "" : "s");
      return NULL;
    }
  } else {
    if (dim->tag != OP_VAL_INTS || dim->ints.n != 2) {
      core_error(KILN_ERR_INVALID, "%s: dim must be a list of 2 ints", fn);
      return NULL;
    }
    d0 = core_wrap_dim(fn, dim->ints.v[0], x->ndim);
    d1 = core_wrap_dim(fn, dim->ints.v[1], x->ndim);
    if (d0 < 0 || d1 < 0) return NULL;
    if (d0 == d1) {
      core_error(KILN_ERR_INVALID, "%s: dims must be different, got %lld and %lld", fn, (long long)d0, (long long)d1);
      return NULL;
    }
  }
  int64_t src[2] = {d0, d1}, dst[2] = {-2, -1};
  kiln_tensor *m = op_call1(KILN_OP_MOVEDIM, (op_val[]){OPV_T(x), OPV_INTS(src, 2), OPV_INTS(dst, 2)}, 3);
  kiln_tensor *s = m ? op_call1(KILN_OP_LINALG_SVDVALS, (op_val[]){OPV_T(m), OPV_NONE}, 2) : NULL;
  int64_t last = -1;
  kiln_tensor *r = s ? kiln_sum(s, &last, 1, false) : NULL;
  if (r && flag(keepdim)) {
    r = kiln_unsqueeze(r, (int)(d0 < d1 ? d0 : d1));
    r = r ? kiln_unsqueeze(r, (int)(d0 < d1 ? d1 : d0)) : NULL;
  }
  return r;
}
int op_nuclear_norm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(nuclear(&a[0], NULL, &a[1]), outs);
}
int op_nuclear_norm_out_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return write_out("aten::nuclear_norm", nuclear(&a[0], NULL, &a[1]), &a[2], outs);
}
int op_nuclear_norm_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(nuclear(&a[0], &a[1], &a[2]), outs);
}
int op_nuclear_norm_dim_out_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return write_out("aten::nuclear_norm", nuclear(&a[0], &a[1], &a[2]), &a[3], outs);
}
