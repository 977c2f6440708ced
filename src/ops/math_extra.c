/* src/ops/math_extra.c: math ops written as decompositions with the
 * public API (their derivatives come free): trapezoid rules, fftshift,
 * diag_embed/diagflat, meshgrid, cartesian_prod, block_diag, vecdot,
 * multi_dot, cross, vander, cov/corrcoef, renorm, combinations, and the
 * tril/triu_indices factories, isin. Argument errors name the op, as PyTorch's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

static int tensor(const char *fn, const op_val *a, const char *name, kiln_tensor **x) {
  return op_arg_tensor(fn, a, name, x);
}
static int tensors(const char *fn, const op_val *a, kiln_tensor *const **v, int *n) {
  if (a->tag != OP_VAL_TENSORS)
    return core_error(KILN_ERR_INVALID, "%s: expected a list of tensors", fn);
  *v = a->ts.v;
  *n = a->ts.n;
  return 0;
}
static kiln_tensor *floated(kiln_tensor *x) {
  return x && !core_dtype_is_floating(x->dtype) ? kiln_to_dtype(x, KILN_DTYPE_F32) : x;
}

/* ---- trapezoid rules ---------------------------------------------------------- */
/* trapezoid(y, dx, dim) = dx (sum y - (y_0 + y_last) / 2) along dim */
static int trapezoid(const char *fn, const op_val *a, kiln_tensor **outs) {
  kiln_tensor *y;
  int rc = tensor(fn, &a[0], "y", &y);
  if (rc < 0) return rc;
  double dx = op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 1.0;
  int d = core_wrap_dim(fn, a[2].tag == OP_VAL_INT ? a[2].i : -1, y->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  if (!(y = floated(y))) return op_failed_status(); /* the conversion failed (OOM) */
  int64_t dd = d, len = y->shape[d];
  if (len == 0) return op_out1(kiln_sum(kiln_mul_scalar(y, 0.0), &dd, 1, false), outs);
  kiln_tensor *ends = kiln_add(kiln_select(y, d, 0), kiln_select(y, d, len - 1));
  kiln_tensor *s = kiln_sub(kiln_sum(y, &dd, 1, false), kiln_mul_scalar(ends, 0.5));
  return op_out1(kiln_mul_scalar(s, dx), outs);
}
int op_trapz_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return trapezoid("aten::trapz", a, outs);
}
int op_trapezoid_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return trapezoid("aten::trapezoid", a, outs);
}
/* cumulative_trapezoid(y, dx, dim) = dx cumsum((y[1:] + y[:-1]) / 2) */
int op_cumulative_trapezoid_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::cumulative_trapezoid";
  kiln_tensor *y;
  int rc = tensor(fn, &a[0], "y", &y);
  if (rc < 0) return rc;
  double dx = op_val_is_num(&a[1]) ? op_val_num(&a[1]) : 1.0;
  int d = core_wrap_dim(fn, a[2].tag == OP_VAL_INT ? a[2].i : -1, y->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  if (!(y = floated(y))) return op_failed_status();
  int64_t len = y->shape[d];
  kiln_tensor *m = len > 0 ? kiln_add(kiln_narrow(y, d, 1, len - 1), kiln_narrow(y, d, 0, len - 1))
                           : kiln_clone(y);
  kiln_tensor *c = m ? op_call1(KILN_OP_CUMSUM, (op_val[]){OPV_T(m), OPV_I(d), OPV_NONE}, 3) : NULL;
  return op_out1(c ? kiln_mul_scalar(c, 0.5 * dx) : NULL, outs);
}

/* ---- shifts and diagonals --------------------------------------------------------- */
/* fftshift rolls each dim by n / 2, ifftshift by -(n / 2); dim None: all */
static int fftshift(const char *fn, const op_val *a, int sign, kiln_tensor **outs) {
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t dims[KILN_MAX_DIMS], shifts[KILN_MAX_DIMS];
  int nd = 0;
  if (a[1].tag == OP_VAL_INT || a[1].tag == OP_VAL_INTS) {
    int k = a[1].tag == OP_VAL_INT ? 1 : a[1].ints.n;
    if (k > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "%s: too many dims", fn);
    for (int i = 0; i < k; i++) {
      int d = core_wrap_dim(fn, a[1].tag == OP_VAL_INT ? a[1].i : a[1].ints.v[i], x->ndim);
      if (d < 0) return KILN_ERR_INVALID;
      dims[nd++] = d;
    }
  } else {
    for (int d = 0; d < x->ndim; d++) dims[nd++] = d;
  }
  if (nd == 0) return op_out1(kiln_clone(x), outs);
  for (int i = 0; i < nd; i++) shifts[i] = sign > 0 ? x->shape[dims[i]] / 2 : -(x->shape[dims[i]] / 2);
  return op_out1(op_call1(KILN_OP_ROLL, (op_val[]){OPV_T(x), OPV_INTS(shifts, nd), OPV_INTS(dims, nd)}, 3),
                 outs);
}
int op_fft_fftshift_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return fftshift("aten::fft_fftshift", a, 1, outs);
}
int op_fft_ifftshift_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return fftshift("aten::fft_ifftshift", a, -1, outs);
}

/* x[..., n] -> [..., n + |k|, n + |k|] with x on diagonal k: x[..., :, None]
 * times the identity, padded, its last two dims moved to dim1 and dim2 */
static kiln_tensor *diag_embed(const char *fn, kiln_tensor *x, int64_t k, int64_t dim1, int64_t dim2) {
  if (!x) return NULL; /* diagflat's reshape failed (out of memory): its error stands */
  if (x->ndim < 1) {
    core_error(KILN_ERR_INVALID, "%s: expected a tensor of at least 1 dimension", fn);
    return NULL;
  }
  int d1 = core_wrap_dim(fn, dim1, x->ndim + 1), d2 = core_wrap_dim(fn, dim2, x->ndim + 1);
  if (d1 < 0 || d2 < 0) return NULL;
  if (d1 == d2) {
    core_error(KILN_ERR_INVALID, "%s: diagonal dimensions cannot be identical %lld, %lld", fn,
               (long long)dim1, (long long)dim2);
    return NULL;
  }
  int64_t n = x->shape[x->ndim - 1];
  kiln_tensor *eye = op_call1(KILN_OP_EYE, (op_val[]){OPV_I(n), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE}, 5);
  if (!eye) return NULL;
  kiln_tensor *m;
  if (x->dtype == KILN_DTYPE_BOOL)
    m = op_call1(KILN_OP_LOGICAL_AND, (op_val[]){OPV_T(kiln_unsqueeze(x, x->ndim)), OPV_T(eye)}, 2);
  else
    m = kiln_mul(kiln_unsqueeze(x, x->ndim), kiln_to_dtype(eye, x->dtype));
  int64_t ak = k < 0 ? -k : k;
  if (m && ak) {
    int64_t pad[4] = {k > 0 ? ak : 0, k > 0 ? 0 : ak, k > 0 ? 0 : ak, k > 0 ? ak : 0};
    m = op_call1(KILN_OP_CONSTANT_PAD_ND, (op_val[]){OPV_T(m), OPV_INTS(pad, 4), OPV_I(0)}, 3);
  }
  if (!m) return NULL;
  int64_t src[2] = {m->ndim - 2, m->ndim - 1}, dst[2] = {d1, d2};
  return op_call1(KILN_OP_MOVEDIM, (op_val[]){OPV_T(m), OPV_INTS(src, 2), OPV_INTS(dst, 2)}, 3);
}
int op_diag_embed_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::diag_embed", &a[0], "self", &x);
  if (rc < 0) return rc;
  return op_out1(diag_embed("aten::diag_embed", x, a[1].tag == OP_VAL_INT ? a[1].i : 0,
                            a[2].tag == OP_VAL_INT ? a[2].i : -2, a[3].tag == OP_VAL_INT ? a[3].i : -1),
                 outs);
}
int op_diagflat_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::diagflat", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t all = kiln_tensor_numel(x);
  return op_out1(diag_embed("aten::diagflat", kiln_reshape(x, 1, &all),
                            a[1].tag == OP_VAL_INT ? a[1].i : 0, 0, 1),
                 outs);
}

/* ---- grids and blocks --------------------------------------------------------------- */
/* meshgrid: every 0-d or 1-d tensor viewed along its own dim and
 * expanded; 'xy' swaps the first two dims */
static int meshgrid(const char *fn, kiln_tensor *const *ts, int n, bool xy, kiln_tensor **outs, int max) {
  if (n < 1) return core_error(KILN_ERR_INVALID, "%s: expects a non-empty TensorList", fn);
  if (n > KILN_MAX_DIMS || n > max) return core_error(KILN_ERR_INVALID, "%s: too many tensors", fn);
  int64_t shape[KILN_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (ts[i]->ndim > 1)
      return core_error(KILN_ERR_INVALID, "%s: Expected 0D or 1D tensor in the tensor list but got: %d-d",
                        fn, ts[i]->ndim);
    if (ts[i]->dtype != ts[0]->dtype)
      return core_error(KILN_ERR_INVALID, "%s: expects all tensors to have the same dtype", fn);
    shape[i] = kiln_tensor_numel(ts[i]);
  }
  bool swap = xy && n >= 2;
  if (swap) {
    int64_t t = shape[0];
    shape[0] = shape[1];
    shape[1] = t;
  }
  for (int i = 0; i < n; i++) {
    int64_t v[KILN_MAX_DIMS];
    int at = swap && i < 2 ? 1 - i : i;
    for (int d = 0; d < n; d++) v[d] = d == at ? shape[d] : 1;
    outs[i] = kiln_expand(kiln_reshape(ts[i], n, v), n, shape);
    if (!outs[i]) return KILN_ERR_INVALID;
  }
  return n;
}
int op_meshgrid_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::meshgrid";
  kiln_tensor *const *ts = NULL;
  int k = 0, rc = tensors(fn, &a[0], &ts, &k);
  if (rc < 0) return rc;
  bool xy = false;
  if (a[1].tag == OP_VAL_STR) {
    if (strcmp(a[1].s, "xy") == 0) xy = true;
    else if (strcmp(a[1].s, "ij") != 0)
      return core_error(KILN_ERR_INVALID, "%s: indexing must be one of \"xy\" or \"ij\", but received: %s",
                        fn, a[1].s);
  }
  return meshgrid(fn, ts, k, xy, outs, max);
}
/* cartesian_prod: the flattened 'ij' meshgrid stacked as columns */
int op_cartesian_prod_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::cartesian_prod";
  kiln_tensor *const *ts = NULL;
  int k = 0, rc = tensors(fn, &a[0], &ts, &k);
  if (rc < 0) return rc;
  for (int i = 0; i < k; i++)
    if (ts[i]->ndim != 1)
      return core_error(KILN_ERR_INVALID, "%s: Expect a 1D vector, but got shape %dD", fn, ts[i]->ndim);
  if (k == 1) return op_out1(kiln_expand(ts[0], 1, ts[0]->shape), outs);
  kiln_tensor *g[KILN_MAX_DIMS];
  if ((rc = meshgrid(fn, ts, k, false, g, KILN_MAX_DIMS)) < 0) return rc;
  for (int i = 0; i < k; i++) {
    int64_t all = kiln_tensor_numel(g[i]);
    if (!(g[i] = kiln_reshape(g[i], 1, &all))) return KILN_ERR_INVALID;
  }
  return op_out1(kiln_stack(g, k, 1), outs);
}
/* block_diag: each block (0-d as 1x1, 1-d as one row) padded to the full
 * width at its column offset, the rows concatenated */
int op_block_diag_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::block_diag";
  kiln_tensor *const *ts = NULL;
  int k = 0, rc = tensors(fn, &a[0], &ts, &k);
  if (rc < 0) return rc;
  if (k == 0) return op_out1(kiln_zeros(2, (int64_t[]){1, 0}, KILN_DTYPE_F32), outs);
  kiln_dtype dt = ts[0]->dtype;
  int64_t cols = 0;
  kiln_tensor **b = calloc((size_t)k, sizeof *b);
  if (!b) return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
  for (int i = 0; i < k; i++) {
    kiln_tensor *t = ts[i];
    if (t->ndim > 2) {
      free(b);
      return core_error(KILN_ERR_INVALID, "%s: Input tensors must have 2 or fewer dimensions. Input %d has %d dimensions",
                        fn, i, t->ndim);
    }
    dt = kiln_promote_types(dt, t->dtype);
    int64_t r = t->ndim == 2 ? t->shape[0] : 1, c = t->ndim == 2 ? t->shape[1] : t->ndim == 1 ? t->shape[0] : 1;
    b[i] = kiln_reshape(t, 2, (int64_t[]){r, c});
    cols += c;
  }
  int64_t at = 0;
  for (int i = 0; i < k && b[i]; i++) {
    int64_t c = b[i]->shape[1];
    int64_t pad[4] = {at, cols - at - c, 0, 0};
    b[i] = op_call1(KILN_OP_CONSTANT_PAD_ND,
                    (op_val[]){OPV_T(kiln_to_dtype(b[i], dt)), OPV_INTS(pad, 4), OPV_I(0)}, 3);
    at += c;
  }
  bool ok = true;
  for (int i = 0; i < k; i++) ok = ok && b[i];
  kiln_tensor *r = ok ? kiln_cat(b, k, 0) : NULL;
  free(b);
  return op_out1(r, outs);
}

/* ---- products ------------------------------------------------------------------- */
int op_linalg_vecdot_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_vecdot";
  kiln_tensor *x, *y;
  int rc;
  if ((rc = tensor(fn, &a[0], "x", &x)) < 0 || (rc = tensor(fn, &a[1], "y", &y)) < 0) return rc;
  kiln_tensor *p = kiln_mul(x, y);
  if (!p) return KILN_ERR_INVALID;
  int d = core_wrap_dim(fn, a[2].tag == OP_VAL_INT ? a[2].i : -1, p->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  int64_t dd = d;
  return op_out1(kiln_sum(p, &dd, 1, false), outs);
}
/* multi_dot: matmul from the left (1-d ends as row / column vectors) */
int op_linalg_multi_dot_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_multi_dot";
  kiln_tensor *const *ts = NULL;
  int k = 0, rc = tensors(fn, &a[0], &ts, &k);
  if (rc < 0) return rc;
  if (k < 2) return core_error(KILN_ERR_INVALID, "%s: expected at least 2 tensors but got %d", fn, k);
  for (int i = 0; i < k; i++) {
    int want = (i == 0 || i == k - 1) ? 0 : 2;
    if ((want == 2 && ts[i]->ndim != 2) || (want == 0 && ts[i]->ndim != 1 && ts[i]->ndim != 2))
      return core_error(KILN_ERR_INVALID, "%s: tensor %d must be 2D%s but got %dD", fn, i,
                        want ? "" : " or 1D", ts[i]->ndim);
  }
  kiln_tensor *r = ts[0];
  for (int i = 1; i < k && r; i++) r = kiln_matmul(r, ts[i]);
  return op_out1(r, outs);
}
/* cross product along dim (size 3): c_i = x_j y_k - x_k y_j */
static int cross(const char *fn, kiln_tensor *x, kiln_tensor *y, const op_val *dim, bool first3,
                 kiln_tensor **outs) {
  /* both expanded to the broadcast shape, in the promoted dtype */
  int nd = x->ndim > y->ndim ? x->ndim : y->ndim;
  int64_t sh[KILN_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    int ix = i - (nd - x->ndim), iy = i - (nd - y->ndim);
    int64_t sx = ix >= 0 ? x->shape[ix] : 1, sy = iy >= 0 ? y->shape[iy] : 1;
    if (sx != sy && sx != 1 && sy != 1)
      return core_error(KILN_ERR_INVALID, "%s: the shapes of self and other cannot be broadcast", fn);
    sh[i] = sx == 1 ? sy : sx;
  }
  kiln_dtype dt = kiln_promote_types(x->dtype, y->dtype);
  kiln_tensor *bx = kiln_expand(kiln_to_dtype(x, dt), nd, sh), *by = kiln_expand(kiln_to_dtype(y, dt), nd, sh);
  if (!bx || !by) return KILN_ERR_INVALID;
  int d = -1;
  if (dim->tag == OP_VAL_INT) d = core_wrap_dim(fn, dim->i, bx->ndim);
  else if (first3)
    for (int i = 0; i < bx->ndim && d < 0; i++)
      if (bx->shape[i] == 3) d = i;
  if (d < 0 || bx->shape[d] != 3)
    return core_error(KILN_ERR_INVALID, "%s: inputs dimension %d must have length 3", fn, d);
  kiln_tensor *c[3];
  for (int i = 0; i < 3; i++) {
    int j = (i + 1) % 3, l = (i + 2) % 3;
    c[i] = kiln_sub(kiln_mul(kiln_narrow(bx, d, j, 1), kiln_narrow(by, d, l, 1)),
                    kiln_mul(kiln_narrow(bx, d, l, 1), kiln_narrow(by, d, j, 1)));
    if (!c[i]) return KILN_ERR_INVALID;
  }
  return op_out1(kiln_cat(c, 3, d), outs);
}
int op_cross_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc;
  if ((rc = tensor("aten::cross", &a[0], "self", &x)) < 0 || (rc = tensor("aten::cross", &a[1], "other", &y)) < 0)
    return rc;
  return cross("aten::cross", x, y, &a[2], true, outs);
}
int op_linalg_cross_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc;
  if ((rc = tensor("aten::linalg_cross", &a[0], "self", &x)) < 0 ||
      (rc = tensor("aten::linalg_cross", &a[1], "other", &y)) < 0)
    return rc;
  op_val d = a[2].tag == OP_VAL_INT ? a[2] : OPV_I(-1);
  return cross("aten::linalg_cross", x, y, &d, false, outs);
}
/* vander(x, N)[..., j] = x^j: the running product of [1, x, x, ...] */
int op_linalg_vander_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_vander";
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "x", &x);
  if (rc < 0) return rc;
  if (x->ndim == 0) x = kiln_reshape(x, 1, (int64_t[]){1}); /* a 0-d x is one point */
  if (!x) return KILN_ERR_INVALID;
  if (x->dtype == KILN_DTYPE_BOOL) return core_error(KILN_ERR_INVALID, "%s: bool tensors are not supported", fn);
  int64_t N = a[1].tag == OP_VAL_INT ? a[1].i : x->shape[x->ndim - 1];
  if (N < 2) return core_error(KILN_ERR_INVALID, "%s: N must be greater than 1", fn);
  int64_t sh[KILN_MAX_DIMS];
  memcpy(sh, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  sh[x->ndim] = N - 1;
  kiln_tensor *xs = kiln_expand(kiln_unsqueeze(x, x->ndim), x->ndim + 1, sh);
  sh[x->ndim] = 1;
  kiln_tensor *parts[2] = {kiln_ones(x->ndim + 1, sh, x->dtype), xs};
  kiln_tensor *c = parts[0] && xs ? kiln_cat(parts, 2, x->ndim) : NULL;
  return op_out1(c ? op_call1(KILN_OP_CUMPROD, (op_val[]){OPV_T(c), OPV_I(x->ndim), OPV_NONE}, 3) : NULL,
                 outs);
}

/* ---- statistics --------------------------------------------------------------- */
/* cov(x [vars, obs] or [obs]) = (x - mean) (x - mean)^T / (N - correction);
 * no observation weights */
static kiln_tensor *cov(const char *fn, kiln_tensor *x, int64_t correction) {
  if (x->ndim > 2) {
    core_error(KILN_ERR_INVALID, "%s: expected input to have two or fewer dimensions but got an input with %d dimensions",
               fn, x->ndim);
    return NULL;
  }
  kiln_tensor *m = floated(x->ndim < 2 ? kiln_reshape(x, 2, (int64_t[]){1, kiln_tensor_numel(x)}) : x);
  if (!m) return NULL;
  int64_t obs = m->shape[1], last = 1;
  kiln_tensor *c = kiln_sub(m, kiln_mean(m, &last, 1, true));
  kiln_tensor *r = c ? kiln_div_scalar(kiln_matmul(c, kiln_t(c)), (double)(obs - correction)) : NULL;
  /* squeezed, as PyTorch's: one variable gives a 0-d result */
  if (!r) return NULL;
  int64_t sq[2];
  int ns = 0;
  for (int i = 0; i < r->ndim; i++)
    if (r->shape[i] != 1) sq[ns++] = r->shape[i];
  return kiln_reshape(r, ns, sq);
}
int op_cov_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::cov";
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (a[2].tag != OP_VAL_NONE || a[3].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "%s: fweights and aweights are not supported", fn);
  return op_out1(cov(fn, x, a[1].tag == OP_VAL_INT ? a[1].i : 1), outs);
}
/* corrcoef = cov / (sd_i sd_j), clipped to [-1, 1] */
int op_corrcoef_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::corrcoef";
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  kiln_tensor *c = cov(fn, x, 1);
  if (!c) return KILN_ERR_INVALID;
  if (c->ndim == 0) return op_out1(kiln_div(c, c), outs);
  kiln_tensor *d = op_call1(KILN_OP_DIAGONAL, (op_val[]){OPV_T(c), OPV_I(0), OPV_I(0), OPV_I(1)}, 4);
  kiln_tensor *sd = d ? kiln_sqrt(d) : NULL;
  kiln_tensor *r = sd ? kiln_div(kiln_div(c, kiln_unsqueeze(sd, 1)), kiln_unsqueeze(sd, 0)) : NULL;
  return op_out1(r ? kiln_clamp(r, -1.0, 1.0) : NULL, outs);
}
/* renorm: each slice along dim with p-norm above maxnorm scaled to
 * maxnorm (PyTorch's factor maxnorm / (norm + 1e-7)) */
int op_renorm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::renorm";
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  double p = op_val_num(&a[1]), mx = op_val_num(&a[3]);
  if (!(p > 0)) return core_error(KILN_ERR_INVALID, "%s: non-positive-norm not supported", fn);
  if (mx < 0) return core_error(KILN_ERR_INVALID, "%s: non-negative maxnorm expected", fn);
  int64_t dim;
  if ((rc = op_arg_int(fn, &a[2], "dim", &dim)) < 0) return rc;
  int d = core_wrap_dim(fn, dim, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  int64_t others[KILN_MAX_DIMS];
  int no = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != d) others[no++] = i;
  kiln_tensor *nrm = op_call1(KILN_OP_VECTOR_NORM, (op_val[]){OPV_T(x), OPV_F(p), OPV_INTS(others, no),
                                                              OPV_B(true), OPV_NONE}, 5);
  if (!nrm) return KILN_ERR_INVALID;
  kiln_tensor *f = kiln_where(kiln_gt(nrm, kiln_scalar(mx, nrm->dtype)),
                              kiln_div(kiln_scalar(mx, nrm->dtype), kiln_add_scalar(nrm, 1e-7)),
                              kiln_scalar(1.0, nrm->dtype));
  return op_out1(f ? kiln_mul(x, f) : NULL, outs);
}

/* ---- index enumerations ---------------------------------------------------------- */
/* combinations(x, r, with_replacement): the r-tuples of x's elements in
 * lexicographic index order, one row each ([0] for r = 0, as PyTorch) */
int op_combinations_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::combinations";
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim != 1)
    return core_error(KILN_ERR_INVALID, "%s: Expect a 1D vector, but got shape %dD", fn, x->ndim);
  int64_t r = a[1].tag == OP_VAL_INT ? a[1].i : 2, len = x->shape[0];
  bool rep = a[2].tag == OP_VAL_BOOL && a[2].b;
  if (r < 0) return core_error(KILN_ERR_INVALID, "%s: Expect a non-negative number, but got %lld", fn, (long long)r);
  if (r == 0) return op_out1(kiln_zeros(1, (int64_t[]){0}, x->dtype), outs);
  if (r > 16) return core_error(KILN_ERR_INVALID, "%s: r = %lld is too large", fn, (long long)r);
  /* count, then list, the non-decreasing (rep) or increasing index tuples */
  int64_t idx[16], rows = 0, cap = 0;
  int64_t *buf = NULL;
  for (int pass = 0; pass < 2; pass++) {
    int64_t k = 0;
    for (int j = 0; j < r; j++) idx[j] = rep ? 0 : j;
    while (len > 0 && idx[r - 1] < len && (rep || r <= len)) {
      if (pass) memcpy(buf + k * r, idx, sizeof(int64_t) * (size_t)r);
      k++;
      int j = (int)r - 1;
      while (j >= 0 && idx[j] == (rep ? len - 1 : len - r + j)) j--;
      if (j < 0) break;
      idx[j]++;
      for (int l = j + 1; l < r; l++) idx[l] = rep ? idx[j] : idx[l - 1] + 1;
    }
    if (pass == 0) {
      rows = k;
      cap = rows * r;
      if (!(buf = malloc(sizeof(int64_t) * (size_t)(cap ? cap : 1))))
        return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
    }
  }
  kiln_tensor *cols[16];
  bool ok = true;
  for (int j = 0; j < r; j++) {
    int64_t *col = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1));
    if (!col) {
      ok = false;
      break;
    }
    for (int64_t i = 0; i < rows; i++) col[i] = buf[i * r + j];
    kiln_tensor *it = kiln_from_data(col, 1, &rows, KILN_DTYPE_I64);
    free(col);
    cols[j] = it ? kiln_index_select(x, 0, it) : NULL;
    ok = ok && cols[j];
  }
  free(buf);
  return op_out1(ok ? kiln_stack(cols, (int)r, 1) : NULL, outs);
}

/* tril_indices / triu_indices(row, col, offset): [2, N] int64 coordinates,
 * row-major */
static int tri_indices(const char *fn, const op_val *a, bool lower, kiln_tensor **outs) {
  int64_t row, col, off = a[2].tag == OP_VAL_INT ? a[2].i : 0;
  int rc;
  if ((rc = op_arg_int(fn, &a[0], "row", &row)) < 0 || (rc = op_arg_int(fn, &a[1], "col", &col)) < 0)
    return rc;
  if (row < 0 || col < 0)
    return core_error(KILN_ERR_INVALID, "%s: row and col must be non-negative, got %lld and %lld", fn,
                      (long long)row, (long long)col);
  if (a[3].tag == OP_VAL_INT) {
    kiln_dtype d;
    if (op_dtype_from_code(a[3].i, &d) < 0) return KILN_ERR_INVALID;
    if (d != KILN_DTYPE_I64) return core_error(KILN_ERR_INVALID, "%s: only int64 indices are supported", fn);
  }
  int64_t cnt = 0;
  for (int64_t i = 0; i < row; i++)
    for (int64_t j = 0; j < col; j++) cnt += lower ? (j - i <= off) : (j - i >= off);
  int64_t *v = malloc(sizeof(int64_t) * (size_t)(2 * cnt + 1));
  if (!v) return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
  int64_t k = 0;
  for (int64_t i = 0; i < row; i++)
    for (int64_t j = 0; j < col; j++)
      if (lower ? (j - i <= off) : (j - i >= off)) {
        v[k] = i;
        v[cnt + k] = j;
        k++;
      }
  kiln_tensor *t = kiln_from_data(v, 2, (int64_t[]){2, cnt}, KILN_DTYPE_I64);
  free(v);
  return op_out1(t, outs);
}
int op_tril_indices_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return tri_indices("aten::tril_indices", a, true, outs);
}
int op_triu_indices_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return tri_indices("aten::triu_indices", a, false, outs);
}

/* isin(elements, test_elements, assume_unique, invert): each element
 * compared with every test element (any over the flattened tests) */
int op_isin_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::isin";
  kiln_tensor *e, *t;
  int rc;
  if ((rc = tensor(fn, &a[0], "elements", &e)) < 0 || (rc = tensor(fn, &a[1], "test_elements", &t)) < 0)
    return rc;
  bool inv = a[3].tag == OP_VAL_BOOL && a[3].b;
  int64_t m = kiln_tensor_numel(t);
  kiln_tensor *eq = kiln_eq(kiln_unsqueeze(e, e->ndim), kiln_reshape(t, 1, &m));
  kiln_tensor *r = eq ? op_call1(KILN_OP_ANY_DIM, (op_val[]){OPV_T(eq), OPV_I(-1), OPV_B(false)}, 3) : NULL;
  if (r && inv) r = op_call1(KILN_OP_LOGICAL_NOT, (op_val[]){OPV_T(r)}, 1);
  return op_out1(r, outs);
}
