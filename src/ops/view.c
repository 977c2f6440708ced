/* src/ops/view.c: views (view, reshape, t, transpose, permute, unsqueeze,
 * squeeze, expand, narrow, slice, select) and the backward ops of the
 * slicing views (slice_backward, select_backward).
 *
 * Note [View geometry]: every view op is one function computing the
 * output's geometry (shape, strides, storage offset relative to the input)
 * from the input's geometry and the arguments, with PyTorch's checks and
 * messages. infer reads the shape of that geometry, cpu wraps it around the
 * input's storage with core_tensor_view; so the two cannot disagree, and no
 * view ever copies. */
#include <string.h>

#include "op.h"

typedef struct geom {
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  int64_t strides[KILN_MAX_DIMS];
  int64_t offset; /* added to the input's offset */
} geom;

static void geom_of(const kiln_tensor *t, geom *g) {
  g->ndim = t->ndim;
  memcpy(g->shape, t->shape, sizeof g->shape);
  memcpy(g->strides, t->strides, sizeof g->strides);
  g->offset = 0;
}

static void geom_contiguous(int ndim, const int64_t *shape, geom *g) {
  g->ndim = ndim;
  memset(g->shape, 0, sizeof g->shape);
  if (ndim) memcpy(g->shape, shape, (size_t)ndim * sizeof *shape);
  core_contiguous_strides(ndim, shape, g->strides);
  g->offset = 0;
}

/* ---- argument checks ----------------------------------------------------- */

static int ints_arg(const char *fn, const op_val *a, const char *name, int max_n) {
  char d[64];
  if (a->tag != OP_VAL_INTS || (a->ints.n > 0 && !a->ints.v))
    return core_error(KILN_ERR_INVALID, "%s: expected an int list for '%s', got %s", fn,
                      name, op_val_desc(a, d, sizeof d));
  if (a->ints.n < 0 || a->ints.n > max_n)
    return core_error(KILN_ERR_INVALID, "%s: '%s' has %d entries, at most %d are supported",
                      fn, name, a->ints.n, max_n);
  return 0;
}

/* ---- view / reshape ---------------------------------------------------------- */

/* Resolves one -1 in sizes against numel (PyTorch's infer_size). */
static int infer_size(const char *fn, int64_t numel, int n, const int64_t *sizes,
                      int64_t *out) {
  char s[160];
  int64_t prod = 1;
  int infer = -1;
  for (int i = 0; i < n; i++) {
    out[i] = sizes[i];
    if (sizes[i] == -1) {
      if (infer >= 0)
        return core_error(KILN_ERR_INVALID, "%s: only one dimension can be inferred (shape %s)",
                          fn, core_shape_str(n, sizes, s, sizeof s));
      infer = i;
    } else if (sizes[i] >= 0) {
      if (__builtin_mul_overflow(prod, sizes[i], &prod))
        return core_error(KILN_ERR_INVALID, "%s: shape %s is too large (its size overflows)",
                          fn, core_shape_str(n, sizes, s, sizeof s));
    } else {
      return core_error(KILN_ERR_INVALID, "%s: invalid shape dimension %lld in shape %s", fn,
                        (long long)sizes[i], core_shape_str(n, sizes, s, sizeof s));
    }
  }
  if (numel == prod || (infer >= 0 && prod > 0 && numel % prod == 0)) {
    if (infer >= 0) {
      if (prod == 0)
        return core_error(KILN_ERR_INVALID,
                          "%s: cannot reshape tensor of 0 elements into shape %s because "
                          "the unspecified dimension size -1 can be any value and is "
                          "ambiguous",
                          fn, core_shape_str(n, sizes, s, sizeof s));
      out[infer] = numel / prod;
    }
    return 0;
  }
  if (infer >= 0 && prod == 0)
    return core_error(KILN_ERR_INVALID,
                      "%s: cannot reshape tensor of 0 elements into shape %s because the "
                      "unspecified dimension size -1 can be any value and is ambiguous",
                      fn, core_shape_str(n, sizes, s, sizeof s));
  return core_error(KILN_ERR_INVALID, "%s: shape '%s' is invalid for input of size %lld", fn,
                    core_shape_str(n, sizes, s, sizeof s), (long long)numel);
}

/* Strides for viewing (oshape, ostride) as nshape without copying, or false
 * when no such strides exist. PyTorch's computeStride: the old dims are
 * cut into chunks that are contiguous among themselves; each chunk must be
 * covered exactly by consecutive new dims. */
static bool compute_stride(int ond, const int64_t *oshape, const int64_t *ostride, int nnd,
                           const int64_t *nshape, int64_t *nstride) {
  if (ond == 0) {
    for (int i = 0; i < nnd; i++) nstride[i] = 1;
    return true;
  }
  int64_t numel = core_numel(ond, oshape);
  if (numel == 0) {
    if (ond == nnd && !memcmp(oshape, nshape, (size_t)ond * sizeof *oshape)) {
      memcpy(nstride, ostride, (size_t)ond * sizeof *ostride);
      return true;
    }
    for (int d = nnd - 1; d >= 0; d--)
      nstride[d] = d == nnd - 1 ? 1 : (nshape[d + 1] > 1 ? nshape[d + 1] : 1) * nstride[d + 1];
    return true;
  }
  int view_d = nnd - 1;
  int64_t chunk_base = ostride[ond - 1], tensor_numel = 1, view_numel = 1;
  for (int td = ond - 1; td >= 0; td--) {
    tensor_numel *= oshape[td];
    if (td == 0 || (oshape[td - 1] != 1 && ostride[td - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
        nstride[view_d] = view_numel * chunk_base;
        view_numel *= nshape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base = ostride[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

/* The geometry of t viewed as the size argument; *viewable false when the
 * strides do not allow it (g then has contiguous strides). */
static int reshape_geom(const char *fn, const op_val *a, geom *g, bool *viewable) {
  kiln_tensor *t = NULL;
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0 || ints_arg(fn, &a[1], "size", KILN_MAX_DIMS) < 0)
    return -1;
  int64_t shape[KILN_MAX_DIMS];
  int n = a[1].ints.n;
  if (infer_size(fn, kiln_tensor_numel(t), n, a[1].ints.v, shape) < 0) return -1;
  geom_contiguous(n, shape, g);
  *viewable = compute_stride(t->ndim, t->shape, t->strides, n, shape, g->strides);
  if (!*viewable) core_contiguous_strides(n, shape, g->strides);
  return 0;
}

static int geom_view(const op_val *a, geom *g) {
  bool ok;
  char d[160], s[160];
  if (reshape_geom("aten::view", a, g, &ok) < 0) return -1;
  if (!ok)
    return core_error(KILN_ERR_INVALID,
                      "aten::view: view size is not compatible with input tensor's size and "
                      "stride (at least one dimension spans across two contiguous "
                      "subspaces): input %s with strides %s. Use .reshape(...) instead.",
                      core_tensor_desc(a[0].t, d, sizeof d),
                      core_shape_str(a[0].t->ndim, a[0].t->strides, s, sizeof s));
  return 0;
}

/* ---- transposes and dims --------------------------------------------------------- */

static void swap_dims(geom *g, int d0, int d1) {
  int64_t x = g->shape[d0];
  g->shape[d0] = g->shape[d1];
  g->shape[d1] = x;
  x = g->strides[d0];
  g->strides[d0] = g->strides[d1];
  g->strides[d1] = x;
}

static int geom_t(const op_val *a, geom *g) {
  kiln_tensor *t = NULL;
  if (op_arg_tensor("aten::t", &a[0], "self", &t) < 0) return -1;
  if (t->ndim > 2)
    return core_error(KILN_ERR_INVALID,
                      "aten::t: t() expects a tensor with <= 2 dimensions, but self is %dD",
                      t->ndim);
  geom_of(t, g);
  if (t->ndim == 2) swap_dims(g, 0, 1);
  return 0;
}

static int geom_transpose(const op_val *a, geom *g) {
  const char *fn = "aten::transpose";
  kiln_tensor *t = NULL;
  int64_t d0 = 0, d1 = 0;
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0 || op_arg_int(fn, &a[1], "dim0", &d0) < 0 ||
      op_arg_int(fn, &a[2], "dim1", &d1) < 0)
    return -1;
  int w0 = core_wrap_dim(fn, d0, t->ndim), w1 = w0 < 0 ? -1 : core_wrap_dim(fn, d1, t->ndim);
  if (w0 < 0 || w1 < 0) return -1;
  geom_of(t, g);
  if (t->ndim > 0) swap_dims(g, w0, w1);
  return 0;
}

/* Wraps a permutation's dims; NULL-free check of duplicates and length. */
static int wrap_perm(const char *fn, const kiln_tensor *t, const op_val *dims, int *perm) {
  char d[160];
  bool seen[KILN_MAX_DIMS] = {false};
  if (ints_arg(fn, dims, "dims", KILN_MAX_DIMS) < 0) return -1;
  if (dims->ints.n != t->ndim)
    return core_error(KILN_ERR_INVALID,
                      "%s: number of dimensions in the tensor input does not match the "
                      "length of the desired ordering of dimensions i.e. input.dim() = %d "
                      "is not equal to len(dims) = %d (self %s)",
                      fn, t->ndim, dims->ints.n, core_tensor_desc(t, d, sizeof d));
  for (int i = 0; i < t->ndim; i++) {
    int w = core_wrap_dim(fn, dims->ints.v[i], t->ndim);
    if (w < 0) return -1;
    if (seen[w])
      return core_error(KILN_ERR_INVALID, "%s: duplicate dims are not allowed (dims %s)", fn,
                        core_shape_str(dims->ints.n, dims->ints.v, d, sizeof d));
    seen[w] = true;
    perm[i] = w;
  }
  return 0;
}

static int geom_permute(const op_val *a, geom *g) {
  kiln_tensor *t = NULL;
  int perm[KILN_MAX_DIMS];
  if (op_arg_tensor("aten::permute", &a[0], "self", &t) < 0 || wrap_perm("aten::permute", t, &a[1], perm) < 0)
    return -1;
  g->ndim = t->ndim;
  g->offset = 0;
  for (int i = 0; i < t->ndim; i++) {
    g->shape[i] = t->shape[perm[i]];
    g->strides[i] = t->strides[perm[i]];
  }
  return 0;
}

static int geom_unsqueeze(const op_val *a, geom *g) {
  const char *fn = "aten::unsqueeze";
  kiln_tensor *t = NULL;
  int64_t dim = 0;
  char d[160];
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0) return -1;
  if (t->ndim >= KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: %s already has %d dims, the most supported", fn,
                      core_tensor_desc(t, d, sizeof d), KILN_MAX_DIMS);
  int w = core_wrap_dim(fn, dim, t->ndim + 1);
  if (w < 0) return -1;
  g->ndim = t->ndim + 1;
  g->offset = 0;
  for (int i = 0, k = 0; i < g->ndim; i++) {
    if (i == w) {
      g->shape[i] = 1;
      g->strides[i] = w >= t->ndim ? 1 : t->shape[w] * t->strides[w];
    } else {
      g->shape[i] = t->shape[k];
      g->strides[i] = t->strides[k++];
    }
  }
  return 0;
}

static int geom_squeeze(const op_val *a, geom *g) {
  const char *fn = "aten::squeeze";
  kiln_tensor *t = NULL;
  int64_t dim = 0;
  int w = -1;
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0) return -1;
  if (a[1].tag != OP_VAL_NONE) {
    if (op_arg_int(fn, &a[1], "dim", &dim) < 0) return -1;
    if ((w = core_wrap_dim(fn, dim, t->ndim)) < 0) return -1;
  }
  g->ndim = 0;
  g->offset = 0;
  for (int i = 0; i < t->ndim; i++) {
    bool drop = t->shape[i] == 1 && (a[1].tag == OP_VAL_NONE || i == w);
    if (drop) continue;
    g->shape[g->ndim] = t->shape[i];
    g->strides[g->ndim++] = t->strides[i];
  }
  return 0;
}

/* PyTorch's inferExpandGeometry: new leading dims and broadcast size-1
 * dims get stride 0; -1 keeps an existing dim. */
static int geom_expand(const op_val *a, geom *g) {
  const char *fn = "aten::expand";
  kiln_tensor *t = NULL;
  char d[160], s[160];
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0 || ints_arg(fn, &a[1], "size", KILN_MAX_DIMS) < 0) return -1;
  int n = a[1].ints.n;
  const int64_t *sz = a[1].ints.v;
  if (n < t->ndim)
    return core_error(KILN_ERR_INVALID,
                      "%s: expand(%s, size=%s): the number of sizes provided (%d) must be "
                      "greater or equal to the number of dimensions in the tensor (%d)",
                      fn, core_tensor_desc(t, d, sizeof d), core_shape_str(n, sz, s, sizeof s),
                      n, t->ndim);
  g->ndim = n;
  g->offset = 0;
  for (int i = n - 1; i >= 0; i--) {
    int td = t->ndim - (n - i);
    int64_t size = td >= 0 ? t->shape[td] : 1;
    int64_t stride = td >= 0 ? t->strides[td] : (i == n - 1 ? 1 : g->shape[i + 1] * g->strides[i + 1]);
    int64_t target = sz[i];
    if (target == -1) {
      if (td < 0)
        return core_error(KILN_ERR_INVALID,
                          "%s: the expanded size of the tensor (-1) isn't allowed in a "
                          "leading, non-existing dimension %d (target sizes %s)",
                          fn, i, core_shape_str(n, sz, s, sizeof s));
      target = size;
    }
    if (target < 0)
      return core_error(KILN_ERR_INVALID, "%s: invalid size %lld at dim %d of target sizes %s",
                        fn, (long long)target, i, core_shape_str(n, sz, s, sizeof s));
    if (size != target) {
      if (size != 1)
        return core_error(KILN_ERR_INVALID,
                          "%s: the expanded size of the tensor (%lld) must match the existing "
                          "size (%lld) at non-singleton dimension %d.  Target sizes: %s.  "
                          "Tensor sizes: %s",
                          fn, (long long)target, (long long)size, i,
                          core_shape_str(n, sz, s, sizeof s),
                          core_shape_str(t->ndim, t->shape, d, sizeof d));
      size = target;
      stride = 0;
    }
    g->shape[i] = size;
    g->strides[i] = stride;
  }
  return 0;
}

/* ---- narrow, slice, select ---------------------------------------------------- */

/* Python-style clamping of [start, end) by step along dim of `in`. */
static int slice_geom(const char *fn, const geom *in, int64_t dim, bool has_start,
                      int64_t start, bool has_end, int64_t end, int64_t step, geom *g) {
  if (in->ndim == 0)
    return core_error(KILN_ERR_INVALID, "%s: slice() cannot be applied to a 0-dim tensor.", fn);
  int w = core_wrap_dim(fn, dim, in->ndim);
  if (w < 0) return -1;
  if (step <= 0)
    return core_error(KILN_ERR_INVALID, "%s: slice step must be positive, got %lld", fn,
                      (long long)step);
  int64_t size = in->shape[w];
  int64_t s = has_start ? start : 0, e = has_end ? end : INT64_MAX;
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = s < 0 ? 0 : s > size ? size : s;
  e = e < s ? s : e > size ? size : e;
  *g = *in;
  g->offset += s * in->strides[w];
  g->shape[w] = (e - s + step - 1) / step;
  g->strides[w] *= step;
  return 0;
}

static int geom_slice(const op_val *a, geom *g) {
  const char *fn = "aten::slice";
  kiln_tensor *t = NULL;
  int64_t dim = 0, start = 0, end = 0, step = 1;
  geom in;
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0 ||
      (a[2].tag != OP_VAL_NONE && op_arg_int(fn, &a[2], "start", &start) < 0) ||
      (a[3].tag != OP_VAL_NONE && op_arg_int(fn, &a[3], "end", &end) < 0) ||
      op_arg_int(fn, &a[4], "step", &step) < 0)
    return -1;
  geom_of(t, &in);
  return slice_geom(fn, &in, dim, a[2].tag != OP_VAL_NONE, start, a[3].tag != OP_VAL_NONE, end,
                    step, g);
}

/* narrow's checks; *wdim and *wstart receive the wrapped dim and start. */
static int narrow_args(const op_val *a, kiln_tensor **t, int *wdim, int64_t *wstart,
                       int64_t *length) {
  const char *fn = "aten::narrow";
  int64_t dim = 0, start = 0;
  char d[160];
  if (op_arg_tensor(fn, &a[0], "self", t) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0 ||
      op_arg_int(fn, &a[2], "start", &start) < 0 || op_arg_int(fn, &a[3], "length", length) < 0)
    return -1;
  if ((*t)->ndim == 0)
    return core_error(KILN_ERR_INVALID, "%s: narrow() cannot be applied to a 0-dim tensor.", fn);
  if ((*wdim = core_wrap_dim(fn, dim, (*t)->ndim)) < 0) return -1;
  int64_t size = (*t)->shape[*wdim];
  if (start != size) {
    int64_t n = size > 0 ? size : 1;
    if (start < -n || start >= n)
      return core_error(KILN_ERR_INVALID,
                        "%s: start %lld out of range for dimension %d of %s (expected to be "
                        "in range of [%lld, %lld])",
                        fn, (long long)start, *wdim, core_tensor_desc(*t, d, sizeof d),
                        (long long)-n, (long long)n - 1);
    if (start < 0) start += n;
  }
  if (*length < 0 || start > size - *length)
    return core_error(KILN_ERR_INVALID,
                      "%s: start (%lld) + length (%lld) exceeds dimension size (%lld).", fn,
                      (long long)start, (long long)*length, (long long)size);
  *wstart = start;
  return 0;
}

static int geom_narrow(const op_val *a, geom *g) {
  kiln_tensor *t = NULL;
  int dim;
  int64_t start, length;
  geom in;
  if (narrow_args(a, &t, &dim, &start, &length) < 0) return -1;
  geom_of(t, &in);
  return slice_geom("aten::narrow", &in, dim, true, start, true, start + length, 1, g);
}

static int select_geom(const char *fn, const geom *in, int64_t dim, int64_t index, geom *g) {
  char s[160];
  if (in->ndim == 0)
    return core_error(KILN_ERR_INVALID, "%s: select() cannot be applied to a 0-dim tensor.", fn);
  int w = core_wrap_dim(fn, dim, in->ndim);
  if (w < 0) return -1;
  int64_t size = in->shape[w];
  if (index < -size || index >= size)
    return core_error(KILN_ERR_INVALID,
                      "%s: select(): index %lld out of range for tensor of size %s at "
                      "dimension %d",
                      fn, (long long)index, core_shape_str(in->ndim, in->shape, s, sizeof s), w);
  if (index < 0) index += size;
  g->ndim = in->ndim - 1;
  g->offset = in->offset + index * in->strides[w];
  for (int i = 0, k = 0; i < in->ndim; i++) {
    if (i == w) continue;
    g->shape[k] = in->shape[i];
    g->strides[k++] = in->strides[i];
  }
  return 0;
}

static int geom_select(const op_val *a, geom *g) {
  const char *fn = "aten::select";
  kiln_tensor *t = NULL;
  int64_t dim = 0, index = 0;
  geom in;
  if (op_arg_tensor(fn, &a[0], "self", &t) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0 ||
      op_arg_int(fn, &a[2], "index", &index) < 0)
    return -1;
  geom_of(t, &in);
  return select_geom(fn, &in, dim, index, g);
}

/* ---- the view ops' infer and cpu (Note [View geometry]) ------------------------- */

static void meta_of_geom(const kiln_tensor *t, const geom *g, op_meta *m) {
  m->dtype = t->dtype;
  m->ndim = g->ndim;
  memset(m->shape, 0, sizeof m->shape);
  if (g->ndim) memcpy(m->shape, g->shape, (size_t)g->ndim * sizeof *g->shape);
}

static int make_view(const kiln_tensor *t, const geom *g, kiln_tensor **out) {
  *out = core_tensor_view(t->storage, t->dtype, g->ndim, g->shape, g->strides,
                          t->offset + g->offset);
  return *out ? 0 : KILN_ERR_NOMEM;
}

#define VIEW_OP(name)                                                           \
  int op_##name##_infer(const op_val *a, int n, op_meta *o, int m) {            \
    geom g;                                                                     \
    if (geom_##name(a, &g) < 0) return -1;                                      \
    meta_of_geom(a[0].t, &g, &o[0]);                                            \
    return 1;                                                                   \
  }                                                                             \
  int op_##name##_cpu(const op_val *a, int n, kiln_tensor **o, int m) {         \
    geom g;                                                                     \
    if (geom_##name(a, &g) < 0) return -1;                                      \
    return make_view(a[0].t, &g, &o[0]);                                        \
  }

VIEW_OP(view)
VIEW_OP(t)
VIEW_OP(transpose)
VIEW_OP(permute)
VIEW_OP(unsqueeze)
VIEW_OP(squeeze)
VIEW_OP(expand)
VIEW_OP(narrow)
VIEW_OP(slice)
VIEW_OP(select)

/* reshape: a view when the strides allow it, else a C-order copy. */
int op_reshape_infer(const op_val *a, int n, op_meta *o, int m) {
  geom g;
  bool viewable;
  if (reshape_geom("aten::reshape", a, &g, &viewable) < 0) return -1;
  meta_of_geom(a[0].t, &g, &o[0]);
  return 1;
}

int op_reshape_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  geom g;
  bool viewable;
  kiln_tensor *t = a[0].t;
  if (reshape_geom("aten::reshape", a, &g, &viewable) < 0) return -1;
  if (viewable) return make_view(t, &g, &o[0]);
  kiln_tensor *c = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (!c) return KILN_ERR_NOMEM;
  op_copy_into(c, t);
  o[0] = core_tensor_view(c->storage, c->dtype, g.ndim, g.shape, g.strides, 0);
  kiln_release(c);
  return o[0] ? 0 : KILN_ERR_NOMEM;
}

/* ---- derivative formulas ---------------------------------------------------------- */

static kiln_tensor *reshape_to(kiln_tensor *g, const kiln_tensor *like) {
  return kiln_reshape(g, like->ndim, like->shape);
}

int op_view_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = reshape_to(g->grads[0], g->args[0].t);
  return 0;
}
int op_reshape_grad(op_grad_ctx *g) { return op_view_grad(g); }
int op_squeeze_grad(op_grad_ctx *g) { return op_view_grad(g); }

int op_unsqueeze_grad(op_grad_ctx *g) {
  if (!g->needs[0]) return 0;
  int w = core_wrap_dim("aten::unsqueeze", g->args[1].i, g->args[0].t->ndim + 1);
  if (w < 0) return -1;
  g->grad_in[0] = kiln_squeeze_dim(g->grads[0], w);
  return 0;
}

int op_t_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = kiln_t(g->grads[0]);
  return 0;
}

int op_transpose_grad(op_grad_ctx *g) {
  if (g->needs[0])
    g->grad_in[0] = kiln_transpose(g->grads[0], (int)g->args[1].i, (int)g->args[2].i);
  return 0;
}

int op_permute_grad(op_grad_ctx *g) {
  int perm[KILN_MAX_DIMS];
  int64_t inv[KILN_MAX_DIMS];
  const kiln_tensor *t = g->args[0].t;
  if (!g->needs[0]) return 0;
  if (wrap_perm("aten::permute", t, &g->args[1], perm) < 0) return -1;
  for (int i = 0; i < t->ndim; i++) inv[perm[i]] = i;
  g->grad_in[0] = kiln_permute(g->grads[0], t->ndim, inv);
  return 0;
}

int op_expand_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = op_sum_to(g->grads[0], g->args[0].t->ndim, g->args[0].t->shape);
  return 0;
}

static kiln_tensor *slice_backward(kiln_tensor *grad, const kiln_tensor *like, int64_t dim,
                                   int64_t start, int64_t end, int64_t step) {
  return op_call1(KILN_OP_SLICE_BACKWARD,
                  (op_val[]){OPV_T(grad), OPV_INTS(like->shape, like->ndim), OPV_I(dim),
                             OPV_I(start), OPV_I(end), OPV_I(step)},
                  6);
}

int op_narrow_grad(op_grad_ctx *g) {
  kiln_tensor *t = NULL;
  int dim;
  int64_t start, length;
  if (!g->needs[0]) return 0;
  if (narrow_args(g->args, &t, &dim, &start, &length) < 0) return -1;
  g->grad_in[0] = slice_backward(g->grads[0], t, dim, start, start + length, 1);
  return 0;
}

int op_slice_grad(op_grad_ctx *g) {
  const op_val *a = g->args;
  if (!g->needs[0]) return 0;
  g->grad_in[0] = slice_backward(g->grads[0], a[0].t, a[1].i,
                                 a[2].tag == OP_VAL_INT ? a[2].i : 0,
                                 a[3].tag == OP_VAL_INT ? a[3].i : INT64_MAX, a[4].i);
  return 0;
}

int op_select_grad(op_grad_ctx *g) {
  const kiln_tensor *t = g->args[0].t;
  if (!g->needs[0]) return 0;
  g->grad_in[0] = op_call1(KILN_OP_SELECT_BACKWARD,
                           (op_val[]){OPV_T(g->grads[0]), OPV_INTS(t->shape, t->ndim),
                                      g->args[1], g->args[2]},
                           4);
  return 0;
}

/* ---- slice_backward / select_backward ---------------------------------------------- */

/* The window of a zero tensor of input_sizes that the gradient fills. */
static int backward_window(const char *fn, const op_val *a, bool is_select, geom *win) {
  kiln_tensor *grad = NULL;
  int64_t dim = 0, start = 0, end = 0, step = 1;
  geom full;
  char d[160], s[160], w[160];
  if (op_arg_tensor(fn, &a[0], "self", &grad) < 0 || ints_arg(fn, &a[1], "input_sizes", KILN_MAX_DIMS) < 0 ||
      op_arg_int(fn, &a[2], "dim", &dim) < 0 || op_arg_int(fn, &a[3], is_select ? "index" : "start", &start) < 0)
    return -1;
  if (!is_select && (op_arg_int(fn, &a[4], "end", &end) < 0 || op_arg_int(fn, &a[5], "step", &step) < 0))
    return -1;
  if (core_check_shape(fn, a[1].ints.n, a[1].ints.v) < 0) return -1;
  geom_contiguous(a[1].ints.n, a[1].ints.v, &full);
  if ((is_select ? select_geom(fn, &full, dim, start, win)
                 : slice_geom(fn, &full, dim, true, start, true, end, step, win)) < 0)
    return -1;
  if (grad->ndim != win->ndim ||
      memcmp(grad->shape, win->shape, (size_t)win->ndim * sizeof *win->shape))
    return core_error(KILN_ERR_INVALID,
                      "%s: grad_output %s does not match the %s shape %s of input_sizes %s", fn,
                      core_tensor_desc(grad, d, sizeof d), is_select ? "selected" : "sliced",
                      core_shape_str(win->ndim, win->shape, w, sizeof w),
                      core_shape_str(full.ndim, full.shape, s, sizeof s));
  return 0;
}

static int backward_infer(const char *fn, const op_val *a, bool is_select, op_meta *o) {
  geom win;
  if (backward_window(fn, a, is_select, &win) < 0) return -1;
  o[0].dtype = a[0].t->dtype;
  o[0].ndim = a[1].ints.n;
  memset(o[0].shape, 0, sizeof o[0].shape);
  if (a[1].ints.n) memcpy(o[0].shape, a[1].ints.v, (size_t)a[1].ints.n * sizeof(int64_t));
  return 1;
}

/* out (fresh, contiguous) = zeros with grad copied into the window. */
static int backward_cpu(const char *fn, const op_val *a, bool is_select, kiln_tensor *out) {
  geom win;
  if (backward_window(fn, a, is_select, &win) < 0) return -1;
  memset(core_data(out), 0, (size_t)kiln_tensor_numel(out) * kiln_dtype_size(out->dtype));
  kiln_tensor *v = core_tensor_view(out->storage, out->dtype, win.ndim, win.shape, win.strides,
                                    out->offset + win.offset);
  if (!v) return KILN_ERR_NOMEM;
  op_copy_into(v, a[0].t);
  kiln_release(v);
  return 0;
}

int op_slice_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  return backward_infer("aten::slice_backward", a, false, o);
}
int op_slice_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return backward_cpu("aten::slice_backward", a, false, o[0]);
}
int op_slice_backward_grad(op_grad_ctx *g) {
  const op_val *a = g->args;
  if (g->needs[0]) g->grad_in[0] = kiln_slice(g->grads[0], (int)a[2].i, a[3].i, a[4].i, a[5].i);
  return 0;
}

int op_select_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  return backward_infer("aten::select_backward", a, true, o);
}
int op_select_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return backward_cpu("aten::select_backward", a, true, o[0]);
}
int op_select_backward_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = kiln_select(g->grads[0], (int)g->args[2].i, g->args[3].i);
  return 0;
}

/* ---- public API ---------------------------------------------------------------------- */
/* Each returns a new reference (registered with the current scope) sharing
 * t's storage, except reshape when the strides force a copy; NULL with
 * kiln_last_error() set on a bad argument. */

kiln_tensor *kiln_view(kiln_tensor *t, int ndim, const int64_t *shape) {
  return op_call1(KILN_OP_VIEW, (op_val[]){OPV_T(t), OPV_INTS(shape, ndim)}, 2);
}
kiln_tensor *kiln_reshape(kiln_tensor *t, int ndim, const int64_t *shape) {
  return op_call1(KILN_OP_RESHAPE, (op_val[]){OPV_T(t), OPV_INTS(shape, ndim)}, 2);
}
kiln_tensor *kiln_t(kiln_tensor *t) { return op_call1(KILN_OP_T, (op_val[]){OPV_T(t)}, 1); }
kiln_tensor *kiln_transpose(kiln_tensor *t, int dim0, int dim1) {
  return op_call1(KILN_OP_TRANSPOSE, (op_val[]){OPV_T(t), OPV_I(dim0), OPV_I(dim1)}, 3);
}
kiln_tensor *kiln_permute(kiln_tensor *t, int ndim, const int64_t *dims) {
  return op_call1(KILN_OP_PERMUTE, (op_val[]){OPV_T(t), OPV_INTS(dims, ndim)}, 2);
}
kiln_tensor *kiln_unsqueeze(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_UNSQUEEZE, (op_val[]){OPV_T(t), OPV_I(dim)}, 2);
}
kiln_tensor *kiln_squeeze(kiln_tensor *t) {
  return op_call1(KILN_OP_SQUEEZE, (op_val[]){OPV_T(t), OPV_NONE}, 2);
}
kiln_tensor *kiln_squeeze_dim(kiln_tensor *t, int dim) {
  return op_call1(KILN_OP_SQUEEZE, (op_val[]){OPV_T(t), OPV_I(dim)}, 2);
}
kiln_tensor *kiln_expand(kiln_tensor *t, int ndim, const int64_t *shape) {
  return op_call1(KILN_OP_EXPAND, (op_val[]){OPV_T(t), OPV_INTS(shape, ndim), OPV_B(false)}, 3);
}
kiln_tensor *kiln_narrow(kiln_tensor *t, int dim, int64_t start, int64_t length) {
  return op_call1(KILN_OP_NARROW, (op_val[]){OPV_T(t), OPV_I(dim), OPV_I(start), OPV_I(length)}, 4);
}
kiln_tensor *kiln_slice(kiln_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
  return op_call1(KILN_OP_SLICE,
                  (op_val[]){OPV_T(t), OPV_I(dim), OPV_I(start), OPV_I(end), OPV_I(step)}, 5);
}
kiln_tensor *kiln_select(kiln_tensor *t, int dim, int64_t index) {
  return op_call1(KILN_OP_SELECT, (op_val[]){OPV_T(t), OPV_I(dim), OPV_I(index)}, 3);
}
