/* src/ops/shape_extra.c: shape, view and indexing ops written as
 * decompositions into the table's views, copies and index ops: expand_as,
 * view_as, reshape_as, broadcast_to, repeat, tile, split with sizes,
 * tensor_split, flip, roll, rot90, tril/triu, movedim/swapaxes, unflatten,
 * hstack/vstack/dstack/column_stack, atleast_Nd, ravel, diagonal, diag,
 * trace, masked_fill, index_fill, index_copy, take, take_along_dim,
 * scatter. Derivatives come from the ops they are made of. */
#include <string.h>

#include "op.h"

static int tensor(const char *fn, const op_val *a, const char *name, kiln_tensor **t) {
  return op_arg_tensor(fn, a, name, t);
}
/* An int[] argument (one int counts as a list of one). */
static int ints_arg(const char *fn, const op_val *v, const char *name, int *n,
                    const int64_t **p) {
  if (v->tag == OP_VAL_INT) {
    *n = 1;
    *p = &v->i;
    return 0;
  }
  if (v->tag != OP_VAL_INTS)
    return core_error(KILN_ERR_INVALID, "%s: '%s' must be a list of ints", fn, name);
  *n = v->ints.n;
  *p = v->ints.v;
  return 0;
}

/* ---- as another tensor ------------------------------------------------------------ */
/* self shaped as other by fn (expand, view or reshape). */
static int as_other(const char *name, const op_val *a, kiln_tensor **outs,
                    kiln_tensor *(*fn)(kiln_tensor *, int, const int64_t *)) {
  kiln_tensor *x, *o;
  int rc;
  if ((rc = tensor(name, &a[0], "self", &x)) < 0 || (rc = tensor(name, &a[1], "other", &o)) < 0)
    return rc;
  return op_out1(fn(x, o->ndim, o->shape), outs);
}
int op_expand_as_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return as_other("aten::expand_as", a, outs, kiln_expand);
}
int op_view_as_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return as_other("aten::view_as", a, outs, kiln_view);
}
int op_reshape_as_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return as_other("aten::reshape_as", a, outs, kiln_reshape);
}
int op_broadcast_to_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_EXPAND, (op_val[]){a[0], a[1], OPV_B(false)}, 3), outs);
}

/* ---- repeat / tile ------------------------------------------------------------------ */
/* x [s0, s1] repeated [r0, r1]: view [1, s0, 1, s1], expand [r0, s0, r1, s1],
 * reshape [r0 s0, r1 s1] */
static kiln_tensor *repeat(const char *fn, kiln_tensor *x, int nr, const int64_t *r) {
  if (nr < x->ndim) {
    core_error(KILN_ERR_INVALID, "%s: Number of dimensions of repeat dims can not be smaller "
                                 "than number of dimensions of tensor", fn);
    return NULL;
  }
  if (2 * nr > KILN_MAX_DIMS) {
    core_error(KILN_ERR_INVALID, "%s: at most %d repeat dims", fn, KILN_MAX_DIMS / 2);
    return NULL;
  }
  int64_t v[KILN_MAX_DIMS], e[KILN_MAX_DIMS], out[KILN_MAX_DIMS];
  int pad = nr - x->ndim;
  for (int i = 0; i < nr; i++) {
    if (r[i] < 0) {
      core_error(KILN_ERR_INVALID, "%s: Trying to create tensor with negative dimension %lld", fn,
                 (long long)r[i]);
      return NULL;
    }
    int64_t s = i < pad ? 1 : x->shape[i - pad];
    v[2 * i] = 1;
    v[2 * i + 1] = s;
    e[2 * i] = r[i];
    e[2 * i + 1] = s;
    out[i] = r[i] * s;
  }
  kiln_tensor *t = kiln_reshape(x, 2 * nr, v);
  t = t ? kiln_expand(t, 2 * nr, e) : NULL;
  return t ? kiln_reshape(kiln_contiguous(t), nr, out) : NULL;
}
int op_repeat_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int nr = 0;
  const int64_t *r = NULL;
  int rc;
  if ((rc = tensor("aten::repeat", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::repeat", &a[1], "repeats", &nr, &r)) < 0)
    return rc;
  return op_out1(repeat("aten::repeat", x, nr, r), outs);
}
int op_tile_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int nr = 0;
  const int64_t *r = NULL;
  int rc;
  if ((rc = tensor("aten::tile", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::tile", &a[1], "dims", &nr, &r)) < 0)
    return rc;
  int64_t full[KILN_MAX_DIMS];
  int k = nr < x->ndim ? x->ndim : nr;
  if (k > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "aten::tile: too many dims");
  for (int i = 0; i < k; i++) full[i] = i < k - nr ? 1 : r[i - (k - nr)];
  return op_out1(repeat("aten::tile", x, k, full), outs);
}

/* ---- splitting ------------------------------------------------------------------------ */
/* narrow views at the given sizes along dim */
static int split_sizes(const char *fn, kiln_tensor *x, int64_t d, int ns, const int64_t *sz,
                       kiln_tensor **outs, int max) {
  int dim = core_wrap_dim(fn, d, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  int64_t total = 0;
  for (int i = 0; i < ns; i++) {
    if (sz[i] < 0)
      return core_error(KILN_ERR_INVALID, "%s: split_sizes must be non-negative, got %lld", fn,
                        (long long)sz[i]);
    total += sz[i];
  }
  if (total != x->shape[dim])
    return core_error(KILN_ERR_INVALID, "%s: split_with_sizes expects split_sizes to sum exactly "
                      "to %lld (input tensor's size at dimension %d), but got split_sizes summing "
                      "to %lld", fn, (long long)x->shape[dim], dim, (long long)total);
  if (ns > max) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs, need %d", fn, max, ns);
  int64_t at = 0;
  for (int i = 0; i < ns; i++) {
    outs[i] = kiln_narrow(x, dim, at, sz[i]);
    if (!outs[i]) return KILN_ERR_INVALID;
    at += sz[i];
  }
  return ns;
}
int op_split_sizes_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int ns = 0;
  const int64_t *sz = NULL;
  int rc;
  if ((rc = tensor("aten::split", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::split", &a[1], "split_size", &ns, &sz)) < 0)
    return rc;
  return split_sizes("aten::split", x, a[2].tag == OP_VAL_INT ? a[2].i : 0, ns, sz, outs, max);
}
int op_split_with_sizes_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int ns = 0;
  const int64_t *sz = NULL;
  int rc;
  if ((rc = tensor("aten::split_with_sizes", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::split_with_sizes", &a[1], "split_sizes", &ns, &sz)) < 0)
    return rc;
  return split_sizes("aten::split_with_sizes", x, a[2].tag == OP_VAL_INT ? a[2].i : 0, ns, sz,
                     outs, max);
}
/* tensor_split(x, sections | indices, dim) */
static int tsplit(const char *fn, kiln_tensor *x, const op_val *spec, int64_t d, kiln_tensor **outs,
                  int max) {
  int dim = core_wrap_dim(fn, d, x->ndim);
  if (dim < 0) return KILN_ERR_INVALID;
  int64_t len = x->shape[dim], sz[OP_MAX_OUTS];
  int ns = 0;
  if (spec->tag == OP_VAL_INT) {
    int64_t k = spec->i;
    if (k <= 0 || k > OP_MAX_OUTS)
      return core_error(KILN_ERR_INVALID, "%s: number of sections must be larger than 0, got %lld",
                        fn, (long long)k);
    for (int64_t i = 0; i < k; i++) sz[ns++] = len / k + (i < len % k ? 1 : 0);
  } else if (spec->tag == OP_VAL_INTS) {
    int64_t prev = 0;
    if (spec->ints.n + 1 > OP_MAX_OUTS) return core_error(KILN_ERR_INVALID, "%s: too many indices", fn);
    for (int i = 0; i <= spec->ints.n; i++) {
      int64_t e = i < spec->ints.n ? spec->ints.v[i] : len;
      if (e < 0) e += len;
      if (e > len) e = len;
      if (e < prev) e = prev;
      sz[ns++] = e - prev;
      prev = e;
    }
  } else {
    return core_error(KILN_ERR_INVALID, "%s: expected an int or an int list", fn);
  }
  return split_sizes(fn, x, dim, ns, sz, outs, max);
}
int op_tensor_split_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::tensor_split", &a[0], "self", &x);
  if (rc < 0) return rc;
  return tsplit("aten::tensor_split", x, &a[1], a[2].tag == OP_VAL_INT ? a[2].i : 0, outs, max);
}
int op_tensor_split_ind_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_tensor_split_decompose(a, n, outs, max);
}
static int hvd_split(const char *fn, const op_val *a, int dim, int min_dims, kiln_tensor **outs,
                     int max) {
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim < min_dims)
    return core_error(KILN_ERR_INVALID, "%s: requires a tensor with at least %d dimension, but "
                                        "got a tensor with %d dimensions!", fn, min_dims, x->ndim);
  if (dim == -1) dim = x->ndim == 1 ? 0 : 1;
  if (a[1].tag == OP_VAL_INT && (a[1].i == 0 || x->shape[dim] % a[1].i))
    return core_error(KILN_ERR_INVALID, "%s: attempted to split along dimension %d, but the size "
                      "of the dimension %lld is not divisible by the split_size %lld!", fn, dim,
                      (long long)x->shape[dim], (long long)a[1].i);
  return tsplit(fn, x, &a[1], dim, outs, max);
}
int op_hsplit_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return hvd_split("aten::hsplit", a, -1, 1, outs, max);
}
int op_hsplit_ind_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return hvd_split("aten::hsplit", a, -1, 1, outs, max);
}
int op_vsplit_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return hvd_split("aten::vsplit", a, 0, 2, outs, max);
}
int op_vsplit_ind_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return hvd_split("aten::vsplit", a, 0, 2, outs, max);
}
int op_dsplit_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return hvd_split("aten::dsplit", a, 2, 3, outs, max);
}
int op_dsplit_ind_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return hvd_split("aten::dsplit", a, 2, 3, outs, max);
}

/* ---- flips and rolls -------------------------------------------------------------------- */
/* x reversed along dim: index_select with n-1 .. 0. NULL (a failed
 * step before, its error set) gives NULL: rot90 chains two. */
static kiln_tensor *flip1(kiln_tensor *x, int dim) {
  if (!x) return NULL;
  int64_t len = x->shape[dim];
  if (len <= 1) return x;
  kiln_tensor *ix = kiln_arange((double)(len - 1), -1, -1, KILN_DTYPE_I64);
  return ix ? kiln_index_select(x, dim, ix) : NULL;
}
int op_flip_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int nd = 0;
  const int64_t *dims = NULL;
  int rc;
  if ((rc = tensor("aten::flip", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::flip", &a[1], "dims", &nd, &dims)) < 0)
    return rc;
  uint32_t seen = 0;
  kiln_tensor *r = x;
  for (int i = 0; i < nd && r; i++) {
    int d = core_wrap_dim("aten::flip", dims[i], x->ndim);
    if (d < 0) return KILN_ERR_INVALID;
    if (seen & (1u << d))
      return core_error(KILN_ERR_INVALID, "aten::flip: dim %d appears multiple times in the list "
                                          "of dims", d);
    seen |= 1u << d;
    if (x->ndim) r = flip1(r, d);
  }
  return op_out1(r == x && r ? kiln_clone(x) : r, outs);
}
int op_fliplr_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::fliplr", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim < 2) return core_error(KILN_ERR_INVALID, "aten::fliplr: Input must be >= 2-d.");
  kiln_tensor *r = flip1(x, 1);
  return op_out1(r == x ? kiln_clone(x) : r, outs);
}
int op_flipud_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::flipud", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim < 1) return core_error(KILN_ERR_INVALID, "aten::flipud: Input must be >= 1-d.");
  kiln_tensor *r = flip1(x, 0);
  return op_out1(r == x ? kiln_clone(x) : r, outs);
}
/* roll along dim by s: cat(x[n - s:], x[:n - s]); NULL gives NULL (a
 * failed reshape before it, its error set) */
static kiln_tensor *roll1(kiln_tensor *x, int dim, int64_t s) {
  if (!x) return NULL;
  int64_t len = x->shape[dim];
  if (len == 0) return x;
  s = ((s % len) + len) % len;
  if (s == 0) return x;
  kiln_tensor *p[2] = {kiln_narrow(x, dim, len - s, s), kiln_narrow(x, dim, 0, len - s)};
  return p[0] && p[1] ? kiln_cat(p, 2, dim) : NULL;
}
int op_roll_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int ns = 0, nd = 0;
  const int64_t *sh = NULL, *dims = NULL;
  int rc;
  if ((rc = tensor("aten::roll", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::roll", &a[1], "shifts", &ns, &sh)) < 0 ||
      (rc = ints_arg("aten::roll", &a[2], "dims", &nd, &dims)) < 0)
    return rc;
  kiln_tensor *r;
  if (nd == 0) {
    if (ns != 1)
      return core_error(KILN_ERR_INVALID, "aten::roll: shifts and dimensions must align. "
                                          "shifts: %d, dims: 0", ns);
    int64_t flat = -1;
    r = roll1(kiln_reshape(x, 1, &flat), 0, sh[0]);
    r = r ? kiln_reshape(r, x->ndim, x->shape) : NULL;
  } else {
    if (ns != nd)
      return core_error(KILN_ERR_INVALID, "aten::roll: shifts and dimensions must align. "
                                          "shifts: %d, dims: %d", ns, nd);
    r = x;
    for (int i = 0; i < nd && r; i++) {
      int d = core_wrap_dim("aten::roll", dims[i], x->ndim);
      if (d < 0) return KILN_ERR_INVALID;
      r = roll1(r, d, sh[i]);
    }
  }
  return op_out1(r == x && r ? kiln_clone(x) : r, outs);
}
/* rot90(x, k, dims): k quarter turns from dims[0] toward dims[1] */
int op_rot90_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int nd = 0;
  const int64_t *dims = NULL;
  int rc;
  if ((rc = tensor("aten::rot90", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::rot90", &a[2], "dims", &nd, &dims)) < 0)
    return rc;
  if (nd != 2)
    return core_error(KILN_ERR_INVALID, "aten::rot90: expected total rotation dims == 2, but got "
                                        "dims = %d", nd);
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "aten::rot90: expected total dims >= 2, but got total "
                                        "dims = %d", x->ndim);
  int d0 = core_wrap_dim("aten::rot90", dims[0], x->ndim),
      d1 = core_wrap_dim("aten::rot90", dims[1], x->ndim);
  if (d0 < 0 || d1 < 0) return KILN_ERR_INVALID;
  if (d0 == d1)
    return core_error(KILN_ERR_INVALID, "aten::rot90: expected rotation dims to be different");
  int64_t k = a[1].tag == OP_VAL_INT ? ((a[1].i % 4) + 4) % 4 : 1;
  kiln_tensor *r;
  if (k == 1) r = kiln_transpose(flip1(x, d1), d0, d1);
  else if (k == 2) r = flip1(flip1(x, d0), d1);
  else if (k == 3) r = flip1(kiln_transpose(x, d0, d1), d1);
  else r = kiln_clone(x);
  return op_out1(r, outs);
}

/* ---- triangles, diagonals ---------------------------------------------------------------- */
/* keep x[..., i, j] where j - i <= k (tril) or >= k (triu) */
static int tri(const char *fn, const op_val *a, bool lower, kiln_tensor **outs) {
  kiln_tensor *x;
  int rc = tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: input tensor must have at least 2 dimensions", fn);
  int64_t k = a[1].tag == OP_VAL_INT ? a[1].i : 0;
  int64_t r = x->shape[x->ndim - 2], c = x->shape[x->ndim - 1];
  kiln_tensor *i = kiln_unsqueeze(kiln_arange(0, (double)r, 1, KILN_DTYPE_I64), 1);
  kiln_tensor *j = kiln_unsqueeze(kiln_arange(0, (double)c, 1, KILN_DTYPE_I64), 0);
  kiln_tensor *d = i && j ? kiln_sub(j, i) : NULL;
  kiln_tensor *m = d ? op_call1(lower ? KILN_OP_LE : KILN_OP_GE, (op_val[]){OPV_T(d), OPV_I(k)}, 2)
                     : NULL;
  if (!m) return KILN_ERR_INVALID;
  op_val zero = x->dtype == KILN_DTYPE_BOOL ? OPV_B(false) : OPV_I(0);
  return op_out1(op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(m), OPV_T(x), zero}, 3), outs);
}
int op_tril_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return tri("aten::tril", a, true, outs);
}
int op_triu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return tri("aten::triu", a, false, outs);
}
/* diagonal(x, offset, dim1, dim2): dims moved last, flattened, picked by
 * index i * m + i + offset (or (i - offset) * m + i); the new dim is last */
static kiln_tensor *diagonal(const char *fn, kiln_tensor *x, int64_t off, int64_t a1, int64_t a2) {
  int d1 = core_wrap_dim(fn, a1, x->ndim), d2 = core_wrap_dim(fn, a2, x->ndim);
  if (d1 < 0 || d2 < 0) return NULL;
  if (d1 == d2) {
    core_error(KILN_ERR_INVALID, "%s: diagonal dimensions cannot be identical %lld, %lld", fn,
               (long long)a1, (long long)a2);
    return NULL;
  }
  int64_t perm[KILN_MAX_DIMS], sh[KILN_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != d1 && i != d2) {
      sh[k] = x->shape[i];
      perm[k++] = i;
    }
  perm[k] = d1;
  perm[k + 1] = d2;
  int64_t r = x->shape[d1], c = x->shape[d2];
  int64_t len = off >= 0 ? (c - off < r ? c - off : r) : (r + off < c ? r + off : c);
  if (len < 0) len = 0;
  kiln_tensor *p = kiln_permute(x, x->ndim, perm);
  sh[k] = r * c;
  p = p ? kiln_reshape(p, k + 1, sh) : NULL;
  kiln_tensor *ix = kiln_zeros(1, &len, KILN_DTYPE_I64);
  if (!p || !ix) return NULL;
  int64_t *q = kiln_tensor_data(ix);
  for (int64_t i = 0; i < len; i++) q[i] = off >= 0 ? i * c + i + off : (i - off) * c + i;
  return kiln_index_select(p, k, ix);
}
int op_diagonal_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::diagonal", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim < 2)
    return core_error(KILN_ERR_INVALID, "aten::diagonal: expected a tensor of at least 2 dims");
  return op_out1(diagonal("aten::diagonal", x, a[1].i, a[2].i, a[3].i), outs);
}
int op_trace_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::trace", &a[0], "self", &x);
  if (rc < 0) return rc;
  if (x->ndim != 2) return core_error(KILN_ERR_INVALID, "aten::trace: expected a matrix");
  kiln_tensor *d = diagonal("aten::trace", x, 0, 0, 1);
  return op_out1(d ? op_call1(KILN_OP_SUM, (op_val[]){OPV_T(d), OPV_NONE, OPV_B(false), OPV_NONE}, 4)
               : NULL,
             outs);
}
/* diag: a vector becomes a matrix with it on diagonal k; a matrix gives diagonal k */
int op_diag_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::diag", &a[0], "self", &x);
  if (rc < 0) return rc;
  int64_t k = a[1].tag == OP_VAL_INT ? a[1].i : 0;
  if (x->ndim == 2) return op_out1(diagonal("aten::diag", x, k, 0, 1), outs);
  if (x->ndim != 1) return core_error(KILN_ERR_INVALID, "aten::diag: matrix or a vector expected");
  int64_t len = x->shape[0], m = len + (k < 0 ? -k : k), flat = m * m;
  /* scatter x into a flattened m x m zeros matrix with index_add */
  kiln_tensor *ix = kiln_zeros(1, &len, KILN_DTYPE_I64);
  if (!ix) return KILN_ERR_NOMEM;
  int64_t *q = kiln_tensor_data(ix);
  for (int64_t i = 0; i < len; i++) q[i] = k >= 0 ? i * m + i + k : (i - k) * m + i;
  kiln_tensor *z = kiln_zeros(1, &flat, x->dtype);
  kiln_tensor *r = z ? op_call1(KILN_OP_INDEX_ADD,
                                (op_val[]){OPV_T(z), OPV_I(0), OPV_T(ix), OPV_T(x), OPV_I(1)}, 5)
                     : NULL;
  int64_t sh[2] = {m, m};
  return op_out1(r ? kiln_reshape(r, 2, sh) : NULL, outs);
}

/* ---- moving dims --------------------------------------------------------------------------- */
static int movedim(const char *fn, kiln_tensor *x, int ns, const int64_t *src, int nd,
                   const int64_t *dst, kiln_tensor **outs) {
  if (ns != nd)
    return core_error(KILN_ERR_INVALID, "%s: Invalid source or destination dims: source (%d dims) "
                                        "should contain the same number of dims as destination "
                                        "(%d dims)", fn, ns, nd);
  int nx = x->ndim ? x->ndim : 1;
  int64_t perm[KILN_MAX_DIMS];
  bool used_src[KILN_MAX_DIMS] = {0}, used_dst[KILN_MAX_DIMS] = {0};
  for (int i = 0; i < nx; i++) perm[i] = -1;
  for (int i = 0; i < ns; i++) {
    int s = core_wrap_dim(fn, src[i], x->ndim), d = core_wrap_dim(fn, dst[i], x->ndim);
    if (s < 0 || d < 0) return KILN_ERR_INVALID;
    if (used_src[s] || used_dst[d])
      return core_error(KILN_ERR_INVALID, "%s: repeated dim in `source` or `destination`", fn);
    used_src[s] = used_dst[d] = true;
    perm[d] = s;
  }
  int next = 0;
  for (int i = 0; i < nx; i++) {
    if (perm[i] >= 0) continue;
    while (used_src[next]) next++;
    perm[i] = next++;
  }
  if (x->ndim == 0) return op_out1(kiln_expand(x, 0, NULL), outs);
  return op_out1(kiln_permute(x, x->ndim, perm), outs);
}
int op_movedim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int ns = 0, nd = 0;
  const int64_t *s = NULL, *d = NULL;
  int rc;
  if ((rc = tensor("aten::movedim", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::movedim", &a[1], "source", &ns, &s)) < 0 ||
      (rc = ints_arg("aten::movedim", &a[2], "destination", &nd, &d)) < 0)
    return rc;
  return movedim("aten::movedim", x, ns, s, nd, d, outs);
}
int op_movedim_int_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_movedim_decompose(a, n, outs, max);
}
int op_moveaxis_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_movedim_decompose(a, n, outs, max);
}
int op_moveaxis_int_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_movedim_decompose(a, n, outs, max);
}
int op_swapaxes_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_TRANSPOSE, a, 3), outs);
}
int op_swapdims_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_TRANSPOSE, a, 3), outs);
}
/* unflatten(x, dim, sizes): dim replaced by sizes (one -1 allowed) */
int op_unflatten_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int ns = 0;
  const int64_t *sz = NULL;
  int rc;
  if ((rc = tensor("aten::unflatten", &a[0], "self", &x)) < 0 ||
      (rc = ints_arg("aten::unflatten", &a[2], "sizes", &ns, &sz)) < 0)
    return rc;
  int d = core_wrap_dim("aten::unflatten", a[1].i, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  if (ns == 0) return core_error(KILN_ERR_INVALID, "aten::unflatten: sizes must be non-empty");
  if (x->ndim - 1 + ns > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "aten::unflatten: too many dims");
  int64_t sh[KILN_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < d; i++) sh[k++] = x->shape[i];
  for (int i = 0; i < ns; i++) sh[k++] = sz[i];
  for (int i = d + 1; i < x->ndim; i++) sh[k++] = x->shape[i];
  return op_out1(kiln_reshape(x, k, sh), outs);
}

/* ---- atleast, ravel, stacking ------------------------------------------------------------- */
static kiln_tensor *atleast(kiln_tensor *x, int nd) {
  if (x->ndim >= nd) return kiln_expand(x, x->ndim, x->shape);
  int64_t sh[3] = {1, 1, 1};
  if (x->ndim == 1 && nd == 2) sh[1] = x->shape[0];
  else if (x->ndim == 1 && nd == 3) sh[1] = x->shape[0];
  else if (x->ndim == 2 && nd == 3) {
    sh[0] = x->shape[0];
    sh[1] = x->shape[1];
  }
  return kiln_reshape(x, nd, sh);
}
int op_atleast_1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::atleast_1d", &a[0], "self", &x);
  return rc < 0 ? rc : op_out1(atleast(x, 1), outs);
}
int op_atleast_2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::atleast_2d", &a[0], "self", &x);
  return rc < 0 ? rc : op_out1(atleast(x, 2), outs);
}
int op_atleast_3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = tensor("aten::atleast_3d", &a[0], "self", &x);
  return rc < 0 ? rc : op_out1(atleast(x, 3), outs);
}
int op_ravel_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int64_t flat = -1;
  int rc = tensor("aten::ravel", &a[0], "self", &x);
  return rc < 0 ? rc : op_out1(kiln_reshape(x, 1, &flat), outs);
}
/* hstack: cat along 1 (0 for 1-d); vstack: atleast_2d then 0; dstack:
 * atleast_3d then 2; column_stack: 0-/1-d become columns, then 1 */
static int stack_like(const char *fn, const op_val *a, int kind, kiln_tensor **outs) {
  if (a[0].tag != OP_VAL_TENSORS || a[0].ts.n == 0)
    return core_error(KILN_ERR_INVALID, "%s: expects a non-empty TensorList", fn);
  int k = a[0].ts.n;
  kiln_tensor **ts = core_alloc((size_t)k * sizeof *ts);
  if (!ts) return KILN_ERR_NOMEM;
  int dim = 0;
  for (int i = 0; i < k; i++) {
    kiln_tensor *x = a[0].ts.v[i];
    if (kind == 0) {
      ts[i] = atleast(x, 1);
      if (a[0].ts.v[0]->ndim > 1) dim = 1;
    } else if (kind == 1) {
      ts[i] = atleast(x, 2);
    } else if (kind == 2) {
      ts[i] = atleast(x, 3);
      dim = 2;
    } else {
      int64_t sh[2] = {core_numel(x->ndim, x->shape), 1};
      ts[i] = x->ndim <= 1 ? kiln_reshape(x, 2, sh) : x;
      dim = 1;
    }
    if (!ts[i]) {
      core_free(ts);
      return KILN_ERR_INVALID;
    }
  }
  kiln_tensor *r = kiln_cat(ts, k, dim);
  core_free(ts);
  return op_out1(r, outs);
}
int op_hstack_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return stack_like("aten::hstack", a, 0, outs);
}
int op_vstack_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return stack_like("aten::vstack", a, 1, outs);
}
int op_dstack_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return stack_like("aten::dstack", a, 2, outs);
}
int op_column_stack_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return stack_like("aten::column_stack", a, 3, outs);
}

/* ---- masked and indexed writes -------------------------------------------------------------- */
/* masked_fill(x, mask, value) = where(mask, value, x) in x's dtype */
static int masked_fill(const op_val *a, kiln_tensor **outs) {
  const char *fn = "aten::masked_fill";
  kiln_tensor *x, *m;
  char d[64];
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "mask", &m)) < 0)
    return rc;
  if (m->dtype != KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID, "%s: expected BoolTensor for mask, got %s", fn,
                      core_tensor_desc(m, d, sizeof d));
  if (a[2].tag == OP_VAL_TENSOR && a[2].t->ndim != 0)
    return core_error(KILN_ERR_INVALID, "%s: only supports a 0-dimensional value tensor, but got "
                                        "tensor with %d dimension(s).", fn, a[2].t->ndim);
  if (a[2].tag != OP_VAL_TENSOR && !op_val_is_num(&a[2]))
    return core_error(KILN_ERR_INVALID, "%s: value must be a number or a 0-d tensor", fn);
  op_val v = a[2];
  if (v.tag == OP_VAL_TENSOR && v.t->dtype != x->dtype) v = OPV_T(kiln_to_dtype(v.t, x->dtype));
  kiln_tensor *r = op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(m), v, OPV_T(x)}, 3);
  if (r && r->dtype != x->dtype) r = kiln_to_dtype(r, x->dtype);
  if (r && (r->ndim != x->ndim || memcmp(r->shape, x->shape, (size_t)x->ndim * 8)))
    return core_error(KILN_ERR_INVALID, "%s: mask %s does not broadcast to self %s", fn,
                      core_tensor_desc(m, d, sizeof d), core_tensor_desc(x, (char[64]){0}, 64));
  return op_out1(r, outs);
}
int op_masked_fill_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return masked_fill(a, outs);
}
int op_masked_fill_t_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return masked_fill(a, outs);
}
/* A bool mask over dim of x, true at index: shaped to broadcast against x. */
static kiln_tensor *index_mask(kiln_tensor *x, int dim, kiln_tensor *index) {
  int64_t len = x->ndim ? x->shape[dim] : 1;
  kiln_tensor *z = kiln_zeros(1, &len, KILN_DTYPE_I64);
  int64_t flat = -1;
  kiln_tensor *ix = kiln_reshape(index, 1, &flat);
  kiln_tensor *ones = ix ? kiln_full(1, ix->shape, 1, KILN_DTYPE_I64) : NULL;
  kiln_tensor *c = ones ? op_call1(KILN_OP_INDEX_ADD,
                                   (op_val[]){OPV_T(z), OPV_I(0), OPV_T(ix), OPV_T(ones), OPV_I(1)}, 5)
                        : NULL;
  kiln_tensor *m = c ? op_call1(KILN_OP_GT, (op_val[]){OPV_T(c), OPV_I(0)}, 2) : NULL;
  if (!m || x->ndim == 0) return m ? kiln_reshape(m, 0, NULL) : NULL;
  int64_t sh[KILN_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) sh[i] = i == dim ? len : 1;
  return kiln_reshape(m, x->ndim, sh);
}
int op_index_fill_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::index_fill";
  kiln_tensor *x, *ix;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[2], "index", &ix)) < 0)
    return rc;
  int d = core_wrap_dim(fn, a[1].i, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  kiln_tensor *m = index_mask(x, d, ix);
  if (!m) return KILN_ERR_INVALID;
  return masked_fill((op_val[]){OPV_T(x), OPV_T(m), a[3]}, outs);
}
int op_index_fill_t_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_index_fill_decompose(a, n, outs, max);
}
/* index_copy(x, dim, index, source): the rows at index replaced by source */
int op_index_copy_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::index_copy";
  kiln_tensor *x, *ix, *src;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[2], "index", &ix)) < 0 ||
      (rc = tensor(fn, &a[3], "source", &src)) < 0)
    return rc;
  int d = core_wrap_dim(fn, a[1].i, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  if (x->dtype == KILN_DTYPE_BOOL && src->dtype == KILN_DTYPE_BOOL) { /* index_add has no bool */
    kiln_tensor *o[1];
    rc = op_index_copy_decompose((op_val[]){OPV_T(kiln_to_dtype(x, KILN_DTYPE_I64)), a[1], a[2],
                                            OPV_T(kiln_to_dtype(src, KILN_DTYPE_I64))}, 4, o, 1);
    return rc < 0 ? rc : op_out1(kiln_to_dtype(o[0], KILN_DTYPE_BOOL), outs);
  }
  kiln_tensor *m = index_mask(x, d, ix);
  kiln_tensor *z = m ? op_call1(KILN_OP_WHERE, (op_val[]){OPV_T(m), OPV_I(0), OPV_T(x)}, 3) : NULL;
  return op_out1(z ? op_call1(KILN_OP_INDEX_ADD,
                          (op_val[]){OPV_T(z), a[1], OPV_T(ix), OPV_T(src), OPV_I(1)}, 5)
               : NULL,
             outs);
}
/* take(x, index) = x.flatten()[index] */
int op_take_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *ix;
  int rc;
  if ((rc = tensor("aten::take", &a[0], "self", &x)) < 0 ||
      (rc = tensor("aten::take", &a[1], "index", &ix)) < 0)
    return rc;
  int64_t flat = -1;
  kiln_tensor *r = kiln_index_select(kiln_reshape(x, 1, &flat), 0, kiln_reshape(ix, 1, &flat));
  return op_out1(r ? kiln_reshape(r, ix->ndim, ix->shape) : NULL, outs);
}
/* take_along_dim(x, indices, dim): gather with x and indices broadcast
 * against each other outside dim; dim None: over the flattened tensors */
int op_take_along_dim_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::take_along_dim";
  kiln_tensor *x, *ix;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[1], "indices", &ix)) < 0)
    return rc;
  int64_t flat = -1;
  if (a[2].tag == OP_VAL_NONE)
    return op_out1(kiln_gather(kiln_reshape(x, 1, &flat), 0, kiln_reshape(ix, 1, &flat)), outs);
  if (x->ndim != ix->ndim)
    return core_error(KILN_ERR_INVALID, "%s: input and indices should have the same number of "
                                        "dimensions, but got %d and %d", fn, x->ndim, ix->ndim);
  int d = core_wrap_dim(fn, a[2].i, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  int64_t sx[KILN_MAX_DIMS], si[KILN_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) {
    int64_t p = x->shape[i], q = ix->shape[i], b = p == 1 ? q : p;
    if (i != d && p != q && p != 1 && q != 1)
      return core_error(KILN_ERR_INVALID, "%s: shapes do not broadcast at dim %d", fn, i);
    sx[i] = i == d ? p : b;
    si[i] = i == d ? q : b;
  }
  return op_out1(kiln_gather(kiln_expand(x, x->ndim, sx), d, kiln_expand(ix, ix->ndim, si)), outs);
}
/* scatter(x, dim, index, src|value): where the index hits, src's value */
static int scatter(const op_val *a, kiln_tensor **outs) {
  const char *fn = "aten::scatter";
  kiln_tensor *x, *ix;
  int rc;
  if ((rc = tensor(fn, &a[0], "self", &x)) < 0 || (rc = tensor(fn, &a[2], "index", &ix)) < 0)
    return rc;
  int d = core_wrap_dim(fn, a[1].i, x->ndim);
  if (d < 0) return KILN_ERR_INVALID;
  kiln_tensor *src = a[3].tag == OP_VAL_TENSOR ? a[3].t : NULL;
  if (!src) {
    if (!op_val_is_num(&a[3])) return core_error(KILN_ERR_INVALID, "%s: value must be a number", fn);
    src = kiln_full(ix->ndim, ix->shape, op_val_num(&a[3]), x->dtype);
  } else {
    /* only src's leading block of index's shape is read */
    for (int i = 0; src && i < ix->ndim && i < src->ndim; i++)
      src = kiln_narrow(src, i, 0, ix->shape[i]);
  }
  if (!src) return KILN_ERR_INVALID;
  kiln_no_grad_begin();
  kiln_tensor *hit = op_call1(KILN_OP_SCATTER_ADD,
                              (op_val[]){OPV_T(kiln_zeros(x->ndim, x->shape, KILN_DTYPE_F64)),
                                         OPV_I(d), OPV_T(ix),
                                         OPV_T(kiln_full(ix->ndim, ix->shape, 1, KILN_DTYPE_F64))},
                              4);
  kiln_tensor *m = hit ? op_call1(KILN_OP_GT, (op_val[]){OPV_T(hit), OPV_I(0)}, 2) : NULL;
  kiln_no_grad_end();
  if (!m) return KILN_ERR_INVALID;
  kiln_tensor *z = kiln_zeros(x->ndim, x->shape, x->dtype);
  kiln_tensor *v = z ? op_call1(KILN_OP_SCATTER_ADD,
                                (op_val[]){OPV_T(z), OPV_I(d), OPV_T(ix),
                                           OPV_T(kiln_to_dtype(src, x->dtype))},
                                4)
                     : NULL;
  return op_out1(v ? kiln_where(m, v, x) : NULL, outs);
}
int op_scatter_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return scatter(a, outs);
}
int op_scatter_value_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return scatter(a, outs);
}
