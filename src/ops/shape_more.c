/* src/ops/shape_more.c: more shape ops: the views unfold (Tensor.unfold:
 * sliding windows) and as_strided (any geometry over self's storage),
 * kernels that wrap self's storage as view.c's views do (Note [View
 * geometry]), with derivatives that scatter the gradient back by
 * index_add over the elements each output element reads (so double
 * backward comes free); repeat_interleave and torch.gradient as
 * decompositions. */
#include <string.h>

#include "op.h"

typedef struct sgeom {
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  int64_t strides[KILN_MAX_DIMS];
  int64_t offset; /* absolute, in elements of the storage */
} sgeom;

static int view_of(const kiln_tensor *t, const sgeom *g, kiln_tensor **out) {
  *out = core_tensor_view(t->storage, t->dtype, g->ndim, g->shape, g->strides, g->offset);
  return *out ? 0 : KILN_ERR_NOMEM;
}

static void meta_of(const kiln_tensor *t, const sgeom *g, op_meta *m) {
  m->dtype = t->dtype;
  m->ndim = g->ndim;
  memset(m->shape, 0, sizeof m->shape);
  if (g->ndim) memcpy(m->shape, g->shape, sizeof(int64_t) * (size_t)g->ndim);
}

/* The int64 tensor [numel(shape)] of base + sum_k i_k strides[k] over the
 * C-order multi-indices i of shape (the storage position each element of
 * that geometry reads); NULL with the error set. */
static kiln_tensor *positions(int nd, const int64_t *shape, const int64_t *strides, int64_t base) {
  int64_t n = core_numel(nd, shape);
  if (n < 0) {
    core_error(KILN_ERR_INVALID, "positions: too many elements");
    return NULL;
  }
  kiln_tensor *p = kiln_zeros(1, &n, KILN_DTYPE_I64);
  if (!p) return NULL;
  int64_t *v = kiln_tensor_data(p), idx[KILN_MAX_DIMS] = {0}, pos = base;
  for (int64_t i = 0; i < n; i++) {
    v[i] = pos;
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) {
        pos += strides[d];
        break;
      }
      pos -= (shape[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
  return p;
}

/* ---- unfold ---------------------------------------------------------------------- */

/* unfold(self, dimension, size, step): windows of size along dimension,
 * step apart, as a new last dim (a 0-d self is one element: [size]) */
static int unfold_geom(const op_val *a, const int64_t *strides, sgeom *g) {
  const char *fn = "aten::unfold";
  kiln_tensor *t;
  int64_t dim, size, step;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &t)) < 0 || (rc = op_arg_int(fn, &a[1], "dimension", &dim)) < 0 ||
      (rc = op_arg_int(fn, &a[2], "size", &size)) < 0 || (rc = op_arg_int(fn, &a[3], "step", &step)) < 0)
    return rc;
  int nd = t->ndim;
  int d = core_wrap_dim(fn, dim, nd ? nd : 1);
  if (d < 0) return KILN_ERR_INVALID;
  int64_t len = nd ? t->shape[d] : 1;
  if (size > len)
    return core_error(KILN_ERR_INVALID, "%s: maximum size for tensor at dimension %d is %lld but size is %lld",
                      fn, d, (long long)len, (long long)size);
  if (size < 0) return core_error(KILN_ERR_INVALID, "%s: size is %lld but must be >= 0", fn, (long long)size);
  if (step <= 0) return core_error(KILN_ERR_INVALID, "%s: step is %lld but must be > 0", fn, (long long)step);
  if (nd + 1 > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "%s: too many dims", fn);
  g->offset = t->offset;
  if (nd == 0) {
    g->ndim = 1;
    g->shape[0] = size;
    g->strides[0] = 1;
    return 0;
  }
  g->ndim = nd + 1;
  for (int i = 0; i < nd; i++) {
    g->shape[i] = t->shape[i];
    g->strides[i] = strides[i];
  }
  g->shape[d] = (len - size) / step + 1;
  g->strides[d] = strides[d] * step;
  g->shape[nd] = size;
  g->strides[nd] = strides[d];
  return 0;
}

int op_unfold_infer(const op_val *a, int n, op_meta *o, int m) {
  sgeom g;
  int rc = unfold_geom(a, a[0].tag == OP_VAL_TENSOR ? a[0].t->strides : NULL, &g);
  if (rc < 0) return rc;
  meta_of(a[0].t, &g, o);
  return 1;
}
int op_unfold_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  sgeom g;
  int rc = unfold_geom(a, a[0].t->strides, &g);
  return rc < 0 ? rc : view_of(a[0].t, &g, &o[0]);
}
/* d self = the output's gradient added back at the input elements each
 * window reads (unfold_backward): the windows over self's C-order index */
int op_unfold_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *x = g->args[0].t;
  int64_t cs[KILN_MAX_DIMS];
  core_contiguous_strides(x->ndim, x->shape, cs);
  sgeom w;
  int rc = unfold_geom(g->args, cs, &w);
  if (rc < 0) return rc;
  int64_t numel = core_numel(x->ndim, x->shape), m = core_numel(go->ndim, go->shape);
  kiln_tensor *idx = positions(w.ndim, w.shape, w.strides, 0);
  kiln_tensor *z = idx ? kiln_zeros(1, &numel, go->dtype) : NULL;
  kiln_tensor *r = z ? op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(z), OPV_I(0), OPV_T(idx),
                                                             OPV_T(kiln_reshape(go, 1, &m)), OPV_I(1)}, 5)
                     : NULL;
  return op_grad_put(g, 0, r ? kiln_reshape(r, x->ndim, x->shape) : NULL);
}

/* ---- as_strided ------------------------------------------------------------------ */

/* as_strided(self, size, stride, storage_offset=None): the geometry over
 * self's storage, its offset self's unless given; checked to stay inside
 * the storage (a lazy self, which has none, is checked against its
 * element count) */
static int as_strided_geom(const op_val *a, sgeom *g) {
  const char *fn = "aten::as_strided";
  kiln_tensor *t;
  int rc = op_arg_tensor(fn, &a[0], "self", &t);
  if (rc < 0) return rc;
  if (a[1].tag != OP_VAL_INTS || a[2].tag != OP_VAL_INTS)
    return core_error(KILN_ERR_INVALID, "%s: expected int[] size and stride", fn);
  int nd = a[1].ints.n;
  if (a[2].ints.n != nd)
    return core_error(KILN_ERR_INVALID, "%s: mismatch in length of strides and shape", fn);
  if (nd > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "%s: too many dims (%d)", fn, nd);
  int64_t off = a[3].tag == OP_VAL_INT ? a[3].i : t->offset;
  if (off < 0)
    return core_error(KILN_ERR_INVALID, "%s: Tensor: invalid storage offset %lld", fn, (long long)off);
  int64_t last = off; /* the last element read */
  bool empty = false;
  for (int i = 0; i < nd; i++) {
    int64_t s = a[1].ints.v[i], st = a[2].ints.v[i], span;
    if (s < 0) return core_error(KILN_ERR_INVALID, "%s: Trying to create tensor with negative dimension %lld",
                                 fn, (long long)s);
    if (st < 0) return core_error(KILN_ERR_INVALID, "%s: as_strided: Negative strides are not supported at the "
                                  "moment, got strides: %lld", fn, (long long)st);
    if (s == 0) empty = true;
    else if (__builtin_mul_overflow(s - 1, st, &span) || __builtin_add_overflow(last, span, &last))
      return core_error(KILN_ERR_INVALID, "%s: size and stride overflow", fn);
    g->shape[i] = s;
    g->strides[i] = st;
  }
  int64_t avail = t->storage ? (int64_t)(t->storage->nbytes / kiln_dtype_size(t->dtype))
                             : t->offset + core_numel(t->ndim, t->shape);
  if (!empty && last >= avail)
    return core_error(KILN_ERR_INVALID, "%s: setStorage: storage offset %lld, sizes and strides reading element "
                      "%lld are out of bounds for storage of size %lld", fn, (long long)off, (long long)last,
                      (long long)avail);
  g->ndim = nd;
  g->offset = off;
  return 0;
}

int op_as_strided_infer(const op_val *a, int n, op_meta *o, int m) {
  sgeom g;
  int rc = as_strided_geom(a, &g);
  if (rc < 0) return rc;
  meta_of(a[0].t, &g, o);
  return 1;
}
int op_as_strided_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  sgeom g;
  int rc = as_strided_geom(a, &g);
  return rc < 0 ? rc : view_of(a[0].t, &g, &o[0]);
}
/* d self (as_strided_backward): the output's gradient summed into the
 * storage positions it reads, then read at self's positions; an element
 * of self that self itself repeats (an expanded self) gets its share */
int op_as_strided_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *x = g->args[0].t;
  sgeom w;
  int rc = as_strided_geom(g->args, &w);
  if (rc < 0) return rc;
  int64_t nin = core_numel(x->ndim, x->shape), nout = core_numel(go->ndim, go->shape);
  kiln_tensor *pin = positions(x->ndim, x->shape, x->strides, x->offset);
  kiln_tensor *pout = positions(w.ndim, w.shape, w.strides, w.offset);
  if (!pin || !pout) return op_failed_status();
  const int64_t *vi = kiln_tensor_data(pin), *vo = kiln_tensor_data(pout);
  int64_t top = 0;
  for (int64_t i = 0; i < nin; i++) top = vi[i] > top ? vi[i] : top;
  for (int64_t i = 0; i < nout; i++) top = vo[i] > top ? vo[i] : top;
  int64_t len = top + 1;
  kiln_tensor *cnt = kiln_zeros(1, &len, KILN_DTYPE_I64);
  if (!cnt) return op_failed_status();
  int64_t *c = kiln_tensor_data(cnt);
  bool repeats = false;
  for (int64_t i = 0; i < nin; i++) repeats |= ++c[vi[i]] > 1;
  kiln_tensor *s = kiln_zeros(1, &len, go->dtype);
  s = s ? op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(s), OPV_I(0), OPV_T(pout),
                                                OPV_T(kiln_reshape(go, 1, &nout)), OPV_I(1)}, 5)
        : NULL;
  kiln_tensor *r = s ? kiln_index_select(s, 0, pin) : NULL;
  if (r && repeats) r = kiln_div(r, kiln_to_dtype(kiln_index_select(cnt, 0, pin), go->dtype));
  return op_grad_put(g, 0, r ? kiln_reshape(r, x->ndim, x->shape) : NULL);
}

/* ---- repeat_interleave ----------------------------------------------------------- */

/* x along d (flattened, d 0, when dim is None) for repeat_interleave */
static kiln_tensor *along(const char *fn, const op_val *self, const op_val *dim, int *d) {
  kiln_tensor *x;
  if (op_arg_tensor(fn, self, "self", &x) < 0) return NULL;
  if (dim->tag != OP_VAL_INT) {
    int64_t n = core_numel(x->ndim, x->shape);
    *d = 0;
    return kiln_reshape(x, 1, &n);
  }
  *d = core_wrap_dim(fn, dim->i, x->ndim ? x->ndim : 1);
  if (*d < 0) return NULL;
  return x->ndim ? x : kiln_reshape(x, 1, (int64_t[]){1});
}

/* every index along d repeated r times: x[.., i, ..] -> [.., i, r, ..] by
 * expand, merged by reshape */
static kiln_tensor *repeat_each(kiln_tensor *x, int d, int64_t r) {
  int64_t sh[KILN_MAX_DIMS];
  int nd = x->ndim;
  if (nd + 1 > KILN_MAX_DIMS) {
    core_error(KILN_ERR_INVALID, "aten::repeat_interleave: too many dims");
    return NULL;
  }
  for (int i = 0, k = 0; i < nd; i++) {
    sh[k++] = x->shape[i];
    if (i == d) sh[k++] = r;
  }
  kiln_tensor *e = kiln_expand(kiln_unsqueeze(x, d + 1), nd + 1, sh);
  memcpy(sh, x->shape, sizeof(int64_t) * (size_t)nd);
  sh[d] *= r;
  return e ? kiln_reshape(e, nd, sh) : NULL;
}

/* output_size, when given, must be the result's length */
static kiln_tensor *check_size(kiln_tensor *r, int d, const op_val *size) {
  if (r && size->tag == OP_VAL_INT && size->i != r->shape[d]) {
    core_error(KILN_ERR_INVALID, "aten::repeat_interleave: allocated size does not match required size");
    return NULL;
  }
  return r;
}

/* The int64 indices [sum(repeats)]: i repeated repeats[i] times (a 1-d
 * int64 repeats, read: syncs a lazy one); NULL with the error set */
static kiln_tensor *repeat_indices(kiln_tensor *reps) {
  const char *fn = "aten::repeat_interleave";
  if (reps->ndim != 1 || reps->dtype != KILN_DTYPE_I64) {
    core_error(KILN_ERR_INVALID, "%s: repeats has to be a 1D int64 tensor", fn);
    return NULL;
  }
  kiln_tensor *c = kiln_contiguous(kiln_to_cpu(reps));
  if (!c) return NULL;
  const int64_t *r = kiln_tensor_data(c);
  int64_t total = 0, n = c->shape[0];
  for (int64_t i = 0; i < n; i++) {
    if (r[i] < 0) {
      core_error(KILN_ERR_INVALID, "%s: repeats can not be negative", fn);
      return NULL;
    }
    if (__builtin_add_overflow(total, r[i], &total)) {
      core_error(KILN_ERR_INVALID, "%s: repeats overflow", fn);
      return NULL;
    }
  }
  kiln_tensor *idx = kiln_zeros(1, &total, KILN_DTYPE_I64);
  if (!idx) return NULL;
  int64_t *v = kiln_tensor_data(idx), k = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < r[i]; j++) v[k++] = i;
  return idx;
}

/* repeat_interleave.self_int(self, repeats, dim=None, *, output_size=None) */
int op_repeat_interleave_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::repeat_interleave";
  int64_t r;
  int d, rc = op_arg_int(fn, &a[1], "repeats", &r);
  if (rc < 0) return rc;
  if (r < 0) return core_error(KILN_ERR_INVALID, "%s: repeats can not be negative", fn);
  kiln_tensor *x = along(fn, &a[0], &a[2], &d);
  return op_out1(x ? check_size(repeat_each(x, d, r), d, &a[3]) : NULL, outs);
}
/* repeat_interleave.self_Tensor(self, repeats, dim=None, *, output_size=None):
 * one count for every index along dim (or one for all) */
int op_repeat_interleave_t_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::repeat_interleave";
  kiln_tensor *reps;
  int d, rc = op_arg_tensor(fn, &a[1], "repeats", &reps);
  if (rc < 0) return rc;
  kiln_tensor *x = along(fn, &a[0], &a[2], &d);
  if (!x) return op_failed_status();
  if (core_numel(reps->ndim, reps->shape) == 1 && reps->ndim <= 1) {
    double v;
    if (reps->dtype != KILN_DTYPE_I64 || kiln_item(reps, &v) < 0)
      return reps->dtype != KILN_DTYPE_I64 ? core_error(KILN_ERR_INVALID, "%s: repeats has to be Long tensor", fn)
                                           : op_failed_status();
    if (v < 0) return core_error(KILN_ERR_INVALID, "%s: repeats can not be negative", fn);
    return op_out1(check_size(repeat_each(x, d, (int64_t)v), d, &a[3]), outs);
  }
  if (reps->ndim != 1 || reps->shape[0] != x->shape[d])
    return core_error(KILN_ERR_INVALID, "%s: repeats must have the same size as input along dim", fn);
  kiln_tensor *idx = repeat_indices(reps);
  return op_out1(idx ? check_size(kiln_index_select(x, d, idx), d, &a[3]) : NULL, outs);
}
/* repeat_interleave.Tensor(repeats, *, output_size=None): the indices */
int op_repeat_interleave_idx_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *reps;
  int rc = op_arg_tensor("aten::repeat_interleave", &a[0], "repeats", &reps);
  if (rc < 0) return rc;
  if (reps->ndim == 0) reps = kiln_reshape(reps, 1, (int64_t[]){1});
  kiln_tensor *idx = reps ? repeat_indices(reps) : NULL;
  return op_out1(check_size(idx, 0, &a[1]), outs);
}

/* ---- gradient -------------------------------------------------------------------- */

/* torch.gradient with one uniform spacing h for the dims (all when NULL):
 * per dim, central differences (f[i+1] - f[i-1]) / h / 2 inside, and at
 * the ends one-sided differences of edge_order 1 or 2, in PyTorch's order
 * of operations (gradient_helper_float) */
static int gradient(const op_val *self, double h, const int64_t *dims, int nd, const op_val *order,
                    kiln_tensor **outs, int max) {
  const char *fn = "aten::gradient";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, self, "self", &x);
  if (rc < 0) return rc;
  int64_t eo = order->tag == OP_VAL_INT ? order->i : 1, all[KILN_MAX_DIMS];
  if (eo != 1 && eo != 2)
    return core_error(KILN_ERR_INVALID, "%s: torch.gradient only supports edge_order=1 and edge_order=2.", fn);
  if (!dims) {
    nd = x->ndim;
    for (int i = 0; i < nd; i++) all[i] = i;
    dims = all;
  }
  if (nd > max) return core_error(KILN_ERR_INVALID, "%s: room for %d outputs, need %d", fn, max, nd);
  for (int i = 0; i < nd; i++) {
    int d = core_wrap_dim(fn, dims[i], x->ndim);
    if (d < 0) return KILN_ERR_INVALID;
    int64_t len = x->shape[d];
    if (len < eo + 1)
      return core_error(KILN_ERR_INVALID, "%s: torch.gradient expected each dimension size to be at least "
                        "edge_order+1", fn);
#define SL(s, e) kiln_slice(x, d, (s) < 0 ? len + (s) : (s), (e) < 0 ? len + (e) : (e), 1)
    kiln_tensor *center = kiln_div_scalar(kiln_sub(SL(2, len), SL(0, -2)), h), *pre, *app;
    if (eo == 1) {
      pre = kiln_div_scalar(kiln_sub(SL(1, 2), SL(0, 1)), h);
      app = kiln_div_scalar(kiln_sub(SL(-1, len), SL(-2, -1)), h);
    } else {
      pre = kiln_div_scalar(kiln_sub(kiln_add(kiln_mul_scalar(SL(0, 1), -1.5), kiln_mul_scalar(SL(1, 2), 2)),
                                     kiln_mul_scalar(SL(2, 3), 0.5)), h);
      app = kiln_div_scalar(kiln_add(kiln_sub(kiln_mul_scalar(SL(-3, -2), 0.5), kiln_mul_scalar(SL(-2, -1), 2)),
                                     kiln_mul_scalar(SL(-1, len), 1.5)), h);
    }
#undef SL
    center = center ? kiln_div_scalar(center, 2) : NULL;
    if (!center || !pre || !app) return op_failed_status();
    kiln_tensor *parts[3] = {pre, center, app};
    if (!(outs[i] = kiln_cat(parts, 3, d))) return op_failed_status();
  }
  return nd;
}

static double spacing_of(const op_val *v) { return op_val_is_num(v) ? op_val_num(v) : 1.0; }

/* gradient.scalarint(self, *, spacing=None, dim=None, edge_order=1) */
int op_gradient_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  int64_t d = a[2].tag == OP_VAL_INT ? a[2].i : 0;
  return gradient(&a[0], spacing_of(&a[1]), a[2].tag == OP_VAL_INT ? &d : NULL, 1, &a[3], outs, max);
}
/* gradient.scalararray(self, *, spacing, dim, edge_order=1) */
int op_gradient_dims_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  if (a[2].tag != OP_VAL_INTS) return core_error(KILN_ERR_INVALID, "aten::gradient: expected int[] dim");
  return gradient(&a[0], spacing_of(&a[1]), a[2].ints.v, a[2].ints.n, &a[3], outs, max);
}
/* gradient.array(self, *, dim, edge_order=1) */
int op_gradient_array_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  if (a[1].tag != OP_VAL_INTS) return core_error(KILN_ERR_INVALID, "aten::gradient: expected int[] dim");
  return gradient(&a[0], 1.0, a[1].ints.v, a[1].ints.n, &a[2], outs, max);
}
