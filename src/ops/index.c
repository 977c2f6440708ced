/* src/ops/index.c: indexing: index_select, index_add, embedding, gather,
 * scatter_add (int64 indices; an out-of-range index is an error, never an
 * out-of-bounds access).
 *
 * Note [Index layout]: the kernels work on C-order (contiguous) operands,
 * copying strided ones first, and view a tensor indexed along dim as
 * [outer, size(dim), inner]: index_select, index_add and embedding then
 * move whole inner rows (memcpy or a vectorizable add). gather and
 * scatter_add walk the index tensor in C order with an odometer. A 0-d
 * tensor is treated as [1], as PyTorch's ensure_nonempty_dim does. */
#include <string.h>

#include "op.h"

/* ---- helpers --------------------------------------------------------------- */

static int index_dtype(const char *fn, const char *what, const kiln_tensor *index) {
  char d[160];
  if (index->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: %s(): Expected dtype int64 for index, got %s", fn,
                      what, core_tensor_desc(index, d, sizeof d));
  return 0;
}

/* ensure_nonempty: the size of dim d of t, a 0-d tensor counting as [1]. */
static int64_t size_ne(const kiln_tensor *t, int d) { return t->ndim == 0 ? 1 : t->shape[d]; }
static int ndim_ne(const kiln_tensor *t) { return t->ndim == 0 ? 1 : t->ndim; }

/* t itself (retained) when it is contiguous, else a C-order copy; NULL on
 * OOM. Release the result. */
static kiln_tensor *contig(kiln_tensor *t) {
  if (core_is_contiguous(t)) return kiln_retain(t);
  kiln_tensor *c = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (c) op_copy_into(c, t);
  return c;
}

/* First index outside [0, size), or -1 when all are in range. */
static int64_t first_bad(const int64_t *idx, int64_t n, int64_t size) {
  for (int64_t i = 0; i < n; i++)
    if (idx[i] < 0 || idx[i] >= size) return i;
  return -1;
}

static int range_error(const char *fn, int64_t value, int dim, const kiln_tensor *self) {
  char d[160];
  return core_error(KILN_ERR_INVALID,
                    "%s: index %lld is out of bounds for dimension %d with size %lld (self %s): "
                    "index out of range in self",
                    fn, (long long)value, dim, (long long)size_ne(self, dim),
                    core_tensor_desc(self, d, sizeof d));
}

/* dst[k] += alpha * src[k] for k < n, in dtype dt (bool: or). */
static void add_scaled(kiln_dtype dt, void *dst, const void *src, int64_t n, double alpha) {
  switch (dt) {
  case KILN_DTYPE_F32: {
    float *restrict d = dst, a = (float)alpha;
    const float *restrict s = src;
    for (int64_t k = 0; k < n; k++) d[k] += a * s[k];
    break;
  }
  case KILN_DTYPE_F64: {
    double *restrict d = dst;
    const double *restrict s = src;
    for (int64_t k = 0; k < n; k++) d[k] += alpha * s[k];
    break;
  }
  case KILN_DTYPE_I64: {
    int64_t *restrict d = dst, a = core_f2i(alpha);
    const int64_t *restrict s = src;
    for (int64_t k = 0; k < n; k++) d[k] += a * s[k];
    break;
  }
  default: {
    bool *restrict d = dst, a = alpha != 0;
    const bool *restrict s = src;
    for (int64_t k = 0; k < n; k++) d[k] = d[k] || (a && s[k]);
    break;
  }
  }
}

/* ---- index_select ------------------------------------------------------------ */

static int index_select_check(const op_val *a, int *wdim) {
  const char *fn = "aten::index_select";
  kiln_tensor *self = NULL, *index = NULL;
  int64_t dim = 0;
  if (op_arg_tensor(fn, &a[0], "self", &self) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0 ||
      op_arg_tensor(fn, &a[2], "index", &index) < 0 || index_dtype(fn, "index_select", index) < 0)
    return -1;
  if (index->ndim > 1)
    return core_error(KILN_ERR_INVALID,
                      "%s: index_select(): Index is supposed to be a vector, got %d dims", fn,
                      index->ndim);
  if ((*wdim = core_wrap_dim(fn, dim, self->ndim)) < 0) return -1;
  if (self->ndim == 0 && kiln_tensor_numel(index) != 1)
    return core_error(KILN_ERR_INVALID,
                      "%s: index_select(): Index to scalar can have only 1 value, got %lld "
                      "value(s)",
                      fn, (long long)kiln_tensor_numel(index));
  return 0;
}

int op_index_select_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  if (index_select_check(a, &w) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  if (a[0].t->ndim) o[0].shape[w] = kiln_tensor_numel(a[2].t);
  return 1;
}

/* out[o, i, :] = self[o, index[i], :] (Note [Index layout]). */
static int take_rows(const char *fn, kiln_tensor *self, int dim, kiln_tensor *index,
                     kiln_tensor *out) {
  int rc = 0;
  kiln_tensor *s = contig(self), *ix = contig(index);
  if (!s || !ix) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int64_t n = kiln_tensor_numel(ix), size = size_ne(self, dim);
  const int64_t *idx = core_data(ix);
  int64_t bad = first_bad(idx, n, size);
  if (bad >= 0) {
    rc = range_error(fn, idx[bad], dim, self);
    goto done;
  }
  size_t es = kiln_dtype_size(self->dtype);
  int64_t outer = self->ndim ? core_numel(dim, self->shape) : 1;
  int64_t inner = self->ndim ? core_numel(self->ndim - dim - 1, self->shape + dim + 1) : 1;
  const char *src = core_data(s);
  char *dst = core_data(out);
  size_t nb = (size_t)inner * es;
  /* Single elements: fixed-size memcpy, which the compiler turns into one
   * load and store (typed copies through another type would break strict
   * aliasing) instead of a library call per element. */
#define TAKE_ELEMS(ES)                                                          \
  do {                                                                          \
    _Pragma("omp parallel for if (outer * n >= OP_PARALLEL_MIN)")                \
    for (int64_t r = 0; r < outer * n; r++)                                     \
      memcpy(dst + r * (ES), src + ((r / n) * size + idx[r % n]) * (ES), (ES));  \
  } while (0)
  if (inner == 1 && es == 8) {
    TAKE_ELEMS(8);
    goto done;
  }
  if (inner == 1 && es == 4) {
    TAKE_ELEMS(4);
    goto done;
  }
#undef TAKE_ELEMS
#pragma omp parallel for if (outer * n * inner >= OP_PARALLEL_MIN)
  for (int64_t r = 0; r < outer * n; r++) {
    int64_t o = r / n, i = r % n;
    memcpy(dst + r * (int64_t)nb, src + ((o * size + idx[i]) * inner) * (int64_t)es, nb);
  }
done:
  kiln_release(s);
  kiln_release(ix);
  return rc;
}

int op_index_select_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  int w;
  if (index_select_check(a, &w) < 0) return -1;
  return take_rows("aten::index_select", a[0].t, w, a[2].t, o[0]);
}

static kiln_tensor *index_add_call(kiln_tensor *self, int64_t dim, kiln_tensor *index,
                                   kiln_tensor *source, double alpha) {
  return op_call1(KILN_OP_INDEX_ADD, (op_val[]){OPV_T(self), OPV_I(dim), OPV_T(index),
                                                OPV_T(source), OPV_F(alpha)},
                  5);
}

/* d self = index_add(zeros(self), dim, index, g). */
int op_index_select_grad(op_grad_ctx *g) {
  const kiln_tensor *self = g->args[0].t;
  kiln_tensor *go = g->grads[0];
  if (!g->needs[0]) return 0;
  kiln_tensor *z = kiln_zeros(self->ndim, self->shape, go->dtype);
  if (!z) return -1;
  g->grad_in[0] = index_add_call(z, g->args[1].i, g->args[2].t, go, 1.0);
  return g->grad_in[0] ? 0 : -1;
}

/* ---- index_add -------------------------------------------------------------------- */

static int index_add_check(const op_val *a, int *wdim, double *alpha) {
  const char *fn = "aten::index_add";
  kiln_tensor *self = NULL, *index = NULL, *src = NULL;
  int64_t dim = 0;
  char d[160], e[160];
  if (op_arg_tensor(fn, &a[0], "self", &self) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0 ||
      op_arg_tensor(fn, &a[2], "index", &index) < 0 || op_arg_tensor(fn, &a[3], "source", &src) < 0 ||
      index_dtype(fn, "index_add_", index) < 0)
    return -1;
  if (!op_val_is_num(&a[4]))
    return core_error(KILN_ERR_INVALID, "%s: expected a number for 'alpha', got %s", fn,
                      op_val_desc(&a[4], d, sizeof d));
  *alpha = op_val_num(&a[4]);
  if (index->ndim > 1)
    return core_error(KILN_ERR_INVALID,
                      "%s: index_add_(): Index is supposed to be a vector, got %d dims", fn,
                      index->ndim);
  if (self->dtype != src->dtype)
    return core_error(KILN_ERR_INVALID,
                      "%s: index_add_(): self (%s) and source (%s) must have the same scalar "
                      "type",
                      fn, core_tensor_desc(self, d, sizeof d), core_tensor_desc(src, e, sizeof e));
  if (!core_dtype_is_floating(self->dtype) && a[4].tag == OP_VAL_FLOAT && *alpha != (double)(int64_t)*alpha)
    return core_error(KILN_ERR_INVALID,
                      "%s: For integral input tensors, argument alpha must not be a floating "
                      "point number (got %g for %s)",
                      fn, *alpha, core_tensor_desc(self, d, sizeof d));
  if ((*wdim = core_wrap_dim(fn, dim, self->ndim)) < 0) return -1;
  int nd = ndim_ne(self);
  if (ndim_ne(src) != nd)
    return core_error(KILN_ERR_INVALID,
                      "%s: source %s must have as many dims as self %s", fn,
                      core_tensor_desc(src, e, sizeof e), core_tensor_desc(self, d, sizeof d));
  if (kiln_tensor_numel(index) != size_ne(src, *wdim))
    return core_error(KILN_ERR_INVALID,
                      "%s: index_add_(): Number of indices (%lld) should be equal to "
                      "source.size(dim): (%lld), for dim: %d (source %s)",
                      fn, (long long)kiln_tensor_numel(index), (long long)size_ne(src, *wdim),
                      *wdim, core_tensor_desc(src, e, sizeof e));
  for (int k = 0; k < nd; k++)
    if (k != *wdim && size_ne(src, k) != size_ne(self, k))
      return core_error(KILN_ERR_INVALID,
                        "%s: source %s and self %s must have the same size in every dim but "
                        "%d (dim %d: %lld vs %lld)",
                        fn, core_tensor_desc(src, e, sizeof e), core_tensor_desc(self, d, sizeof d),
                        *wdim, k, (long long)size_ne(src, k), (long long)size_ne(self, k));
  return 0;
}

int op_index_add_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  double alpha;
  if (index_add_check(a, &w, &alpha) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  return 1;
}

/* out = self; out[o, index[i], :] += alpha * source[o, i, :]. Rows of
 * different o never collide, so the outer loop runs in parallel; repeated
 * indices within one o accumulate in order. */
int op_index_add_cpu(const op_val *a, int n_args, kiln_tensor **o, int m) {
  int w, rc = 0;
  double alpha;
  if (index_add_check(a, &w, &alpha) < 0) return -1;
  kiln_tensor *self = a[0].t, *out = o[0];
  kiln_tensor *s = contig(a[3].t), *ix = contig(a[2].t);
  if (!s || !ix) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int64_t n = kiln_tensor_numel(ix), size = size_ne(self, w);
  const int64_t *idx = core_data(ix);
  int64_t bad = first_bad(idx, n, size);
  if (bad >= 0) {
    rc = range_error("aten::index_add", idx[bad], w, self);
    goto done;
  }
  op_copy_into(out, self);
  if (kiln_tensor_numel(out) == 0 || n == 0) goto done;
  size_t es = kiln_dtype_size(self->dtype);
  int64_t outer = self->ndim ? core_numel(w, self->shape) : 1;
  int64_t inner = self->ndim ? core_numel(self->ndim - w - 1, self->shape + w + 1) : 1;
  char *dst = core_data(out);
  const char *src = core_data(s);
  kiln_dtype dt = self->dtype;
#pragma omp parallel for if (outer > 1 && outer * n * inner >= OP_PARALLEL_MIN)
  for (int64_t oi = 0; oi < outer; oi++)
    for (int64_t i = 0; i < n; i++)
      add_scaled(dt, dst + ((oi * size + idx[i]) * inner) * (int64_t)es,
                 src + ((oi * n + i) * inner) * (int64_t)es, inner, alpha);
done:
  kiln_release(s);
  kiln_release(ix);
  return rc;
}

/* d self = g; d source = alpha * index_select(g, dim, index). */
int op_index_add_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  const kiln_tensor *src = g->args[3].t;
  double alpha = op_val_num(&g->args[4]);
  if (g->needs[0]) g->grad_in[0] = go;
  if (g->needs[2]) {
    kiln_tensor *x = kiln_index_select(go, (int)g->args[1].i, g->args[2].t);
    if (x && alpha != 1.0) x = kiln_mul_scalar(x, alpha);
    if (x && (x->ndim != src->ndim ||
              memcmp(x->shape, src->shape, (size_t)src->ndim * sizeof *src->shape)))
      x = kiln_reshape(x, src->ndim, src->shape);
    if (!x) return -1;
    g->grad_in[2] = x;
  }
  return 0;
}

/* ---- embedding ------------------------------------------------------------------------ */

static int embedding_check(const op_val *a) {
  const char *fn = "aten::embedding";
  kiln_tensor *w = NULL, *ix = NULL;
  int64_t pad = -1;
  char d[160];
  if (op_arg_tensor(fn, &a[0], "weight", &w) < 0 || op_arg_tensor(fn, &a[1], "indices", &ix) < 0 ||
      op_arg_int(fn, &a[2], "padding_idx", &pad) < 0)
    return -1;
  if (w->ndim != 2)
    return core_error(KILN_ERR_INVALID, "%s: 'weight' must be 2-D, got %s", fn,
                      core_tensor_desc(w, d, sizeof d));
  if (ix->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID,
                      "%s: Expected tensor for argument #1 'indices' to have one of the "
                      "following scalar types: Long; but got %s instead",
                      fn, core_tensor_desc(ix, d, sizeof d));
  if (ix->ndim + 1 > KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: indices %s would give more than %d dims", fn,
                      core_tensor_desc(ix, d, sizeof d), KILN_MAX_DIMS);
  for (int k = 3; k <= 4; k++)
    if (a[k].tag != OP_VAL_BOOL || a[k].b) {
      if (a[k].tag == OP_VAL_BOOL)
        return core_error(KILN_ERR_UNSUPPORTED, "%s: %s=True is not supported", fn,
                          k == 3 ? "scale_grad_by_freq" : "sparse");
      return core_error(KILN_ERR_INVALID, "%s: expected a bool for '%s', got %s", fn,
                        k == 3 ? "scale_grad_by_freq" : "sparse",
                        op_val_desc(&a[k], d, sizeof d));
    }
  return 0;
}

int op_embedding_infer(const op_val *a, int n, op_meta *o, int m) {
  if (embedding_check(a) < 0) return -1;
  const kiln_tensor *w = a[0].t, *ix = a[1].t;
  op_meta_of(ix, &o[0]);
  o[0].dtype = w->dtype;
  o[0].shape[ix->ndim] = w->shape[1];
  o[0].ndim = ix->ndim + 1;
  return 1;
}

int op_embedding_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  if (embedding_check(a) < 0) return -1;
  /* rows of weight at the flattened indices: index_select along dim 0 */
  kiln_tensor *w = a[0].t;
  return take_rows("aten::embedding", w, 0, a[1].t, o[0]);
}

/* d weight = index_add(zeros(weight), 0, indices.flatten(), g.reshape(-1, D)),
 * with the padding row's gradient zeroed. */
int op_embedding_grad(op_grad_ctx *g) {
  const kiln_tensor *w = g->args[0].t;
  kiln_tensor *go = g->grads[0], *ix = g->args[1].t;
  int64_t pad = g->args[2].i, flat = -1, rows[2] = {-1, w->shape[1]};
  if (!g->needs[0]) return 0;
  kiln_tensor *z = kiln_zeros(2, w->shape, go->dtype);
  kiln_tensor *fi = kiln_reshape(ix, 1, &flat);
  kiln_tensor *g2 = kiln_reshape(go, 2, rows);
  if (!z || !fi || !g2) return -1;
  kiln_tensor *r = index_add_call(z, 0, fi, g2, 1.0);
  if (r && pad >= 0 && pad < w->shape[0]) {
    int64_t mshape[2] = {w->shape[0], 1};
    kiln_tensor *mask = kiln_ones(2, mshape, go->dtype);
    if (!mask) return -1;
    kiln_fill_(kiln_select(mask, 0, pad), 0.0);
    r = kiln_mul(r, mask);
  }
  g->grad_in[0] = r;
  return r ? 0 : -1;
}

/* ---- gather, scatter_add ---------------------------------------------------------------- */

/* Shape checks shared by gather (src NULL) and scatter_add. */
static int gather_scatter_check(const char *fn, const op_val *a, bool scatter, int *wdim) {
  kiln_tensor *self = NULL, *index = NULL, *src = NULL;
  int64_t dim = 0;
  char d[160], e[160], f[160];
  if (op_arg_tensor(fn, &a[0], "self", &self) < 0 || op_arg_int(fn, &a[1], "dim", &dim) < 0 ||
      op_arg_tensor(fn, &a[2], "index", &index) < 0 ||
      (scatter && op_arg_tensor(fn, &a[3], "src", &src) < 0) ||
      index_dtype(fn, scatter ? "scatter" : "gather", index) < 0)
    return -1;
  if ((*wdim = core_wrap_dim(fn, dim, self->ndim)) < 0) return -1;
  int nd = ndim_ne(self);
  if (scatter && self->dtype != src->dtype)
    return core_error(KILN_ERR_INVALID,
                      "%s: scatter(): Expected self.dtype to be equal to src.dtype (self %s, "
                      "src %s)",
                      fn, core_tensor_desc(self, d, sizeof d), core_tensor_desc(src, e, sizeof e));
  if (ndim_ne(index) != nd || (scatter && ndim_ne(src) != nd))
    return core_error(KILN_ERR_INVALID,
                      "%s: Index tensor must have the same number of dimensions as %s tensor "
                      "(index %s, self %s%s%s)",
                      fn, scatter ? "self" : "input", core_tensor_desc(index, d, sizeof d),
                      core_tensor_desc(self, e, sizeof e), scatter ? ", src " : "",
                      scatter ? core_tensor_desc(src, f, sizeof f) : "");
  for (int k = 0; k < nd; k++) {
    bool bad = (k != *wdim && size_ne(index, k) > size_ne(self, k)) ||
               (scatter && size_ne(index, k) > size_ne(src, k));
    if (!bad) continue;
    if (scatter)
      return core_error(KILN_ERR_INVALID,
                        "%s: Expected index %s to be smaller than self %s apart from dimension "
                        "%d and to be smaller size than src %s",
                        fn, core_shape_str(index->ndim, index->shape, d, sizeof d),
                        core_shape_str(self->ndim, self->shape, e, sizeof e), *wdim,
                        core_shape_str(src->ndim, src->shape, f, sizeof f));
    return core_error(KILN_ERR_INVALID,
                      "%s: Size does not match at dimension %d expected index %s to be smaller "
                      "than self %s apart from dimension %d",
                      fn, k, core_shape_str(index->ndim, index->shape, d, sizeof d),
                      core_shape_str(self->ndim, self->shape, e, sizeof e), *wdim);
  }
  return 0;
}

/* C-order strides of t's (ensure-nonempty) shape. */
static void ne_strides(const kiln_tensor *t, int nd, int64_t *st) {
  int64_t s = 1;
  for (int k = nd - 1; k >= 0; k--) {
    st[k] = s;
    s *= size_ne(t, k);
  }
}

/* Walks index (contiguous) in C order. For each position p calls
 * BODY with `p`, `so` (offset into self, dim included) and `xo` (offset
 * into src laid out with strides xst). */
#define INDEX_WALK(nd, ishape, dim, idx, n, sst, xst, BODY)                     \
  do {                                                                         \
    int64_t cnt_[KILN_MAX_DIMS] = {0}, base_ = 0, xo = 0;                      \
    for (int64_t p = 0; p < (n); p++) {                                        \
      int64_t so = base_ + (idx)[p] * (sst)[dim];                              \
      BODY;                                                                    \
      for (int k_ = (nd) - 1; k_ >= 0; k_--) {                                 \
        cnt_[k_]++;                                                            \
        if (k_ != (dim)) base_ += (sst)[k_];                                   \
        xo += (xst)[k_];                                                       \
        if (cnt_[k_] < (ishape)[k_]) break;                                    \
        if (k_ != (dim)) base_ -= cnt_[k_] * (sst)[k_];                        \
        xo -= cnt_[k_] * (xst)[k_];                                            \
        cnt_[k_] = 0;                                                          \
      }                                                                        \
    }                                                                          \
  } while (0)

/* out[p] = self[.. index[p] ..] (out contiguous, shape of index); copies
 * es bytes per element with a fixed-size memcpy (one load and store). */
static void gather_loop(size_t es, char *out, const char *self, const int64_t *idx, int64_t n,
                        int nd, const int64_t *ishape, int dim, const int64_t *sst) {
  int64_t xst[KILN_MAX_DIMS] = {0};
#define GATHER_ES(ES)                                                           \
  INDEX_WALK(nd, ishape, dim, idx, n, sst, xst, memcpy(out + p * (ES), self + so * (ES), (ES)); (void)xo)
  switch (es) {
  case 8: GATHER_ES(8); break;
  case 4: GATHER_ES(4); break;
  default: GATHER_ES(1); break;
  }
#undef GATHER_ES
}

/* out[.. index[p] ..] += src[p'] where p' is p's position in src. */
static void scatter_add_loop(kiln_dtype dt, char *out, const char *src, const int64_t *idx,
                             int64_t n, int nd, const int64_t *ishape, int dim,
                             const int64_t *sst, const int64_t *xst) {
#define SCATTER_T(T, STMT)                                                       \
  do {                                                                           \
    T *o_ = (T *)out;                                                            \
    const T *s_ = (const T *)src;                                                \
    INDEX_WALK(nd, ishape, dim, idx, n, sst, xst, STMT);                         \
  } while (0)
  switch (dt) {
  case KILN_DTYPE_F32: SCATTER_T(float, o_[so] += s_[xo]); break;
  case KILN_DTYPE_F64: SCATTER_T(double, o_[so] += s_[xo]); break;
  case KILN_DTYPE_I64: SCATTER_T(int64_t, o_[so] += s_[xo]); break;
  default: SCATTER_T(bool, o_[so] = o_[so] || s_[xo]); break;
  }
#undef SCATTER_T
}

/* Index range check of gather/scatter_add; idx contiguous. */
static int check_range(const char *fn, const int64_t *idx, int64_t n, int dim,
                       const kiln_tensor *self) {
  int64_t bad = first_bad(idx, n, size_ne(self, dim));
  return bad >= 0 ? range_error(fn, idx[bad], dim, self) : 0;
}

int op_gather_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  if (gather_scatter_check("aten::gather", a, false, &w) < 0) return -1;
  op_meta_of(a[2].t, &o[0]);
  o[0].dtype = a[0].t->dtype;
  return 1;
}

int op_gather_cpu(const op_val *a, int n_args, kiln_tensor **o, int m) {
  const char *fn = "aten::gather";
  int w, rc = 0;
  if (gather_scatter_check(fn, a, false, &w) < 0) return -1;
  kiln_tensor *self = a[0].t, *s = contig(self), *ix = contig(a[2].t);
  if (!s || !ix) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int64_t n = kiln_tensor_numel(ix), ishape[KILN_MAX_DIMS], sst[KILN_MAX_DIMS];
  int nd = ndim_ne(self);
  const int64_t *idx = core_data(ix);
  if ((rc = check_range(fn, idx, n, w, self)) < 0) goto done;
  if (n == 0) goto done;
  for (int k = 0; k < nd; k++) ishape[k] = size_ne(ix, k);
  ne_strides(self, nd, sst);
  gather_loop(kiln_dtype_size(self->dtype), core_data(o[0]), core_data(s), idx, n, nd, ishape,
              w, sst);
done:
  kiln_release(s);
  kiln_release(ix);
  return rc;
}

static kiln_tensor *scatter_add_call(kiln_tensor *self, int64_t dim, kiln_tensor *index,
                                     kiln_tensor *src) {
  return op_call1(KILN_OP_SCATTER_ADD,
                  (op_val[]){OPV_T(self), OPV_I(dim), OPV_T(index), OPV_T(src)}, 4);
}

/* d self = scatter_add(zeros(self), dim, index, g). */
int op_gather_grad(op_grad_ctx *g) {
  const kiln_tensor *self = g->args[0].t;
  kiln_tensor *go = g->grads[0];
  if (!g->needs[0]) return 0;
  kiln_tensor *z = kiln_zeros(self->ndim, self->shape, go->dtype);
  if (!z) return -1;
  g->grad_in[0] = scatter_add_call(z, g->args[1].i, g->args[2].t, go);
  return g->grad_in[0] ? 0 : -1;
}

int op_scatter_add_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  if (gather_scatter_check("aten::scatter_add", a, true, &w) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  return 1;
}

/* Serial: two positions of index may hit the same element of out. */
int op_scatter_add_cpu(const op_val *a, int n_args, kiln_tensor **o, int m) {
  const char *fn = "aten::scatter_add";
  int w, rc = 0;
  if (gather_scatter_check(fn, a, true, &w) < 0) return -1;
  kiln_tensor *self = a[0].t, *src = a[3].t, *s = contig(src), *ix = contig(a[2].t);
  if (!s || !ix) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int64_t n = kiln_tensor_numel(ix), ishape[KILN_MAX_DIMS], sst[KILN_MAX_DIMS],
          xst[KILN_MAX_DIMS];
  int nd = ndim_ne(self);
  const int64_t *idx = core_data(ix);
  if ((rc = check_range(fn, idx, n, w, self)) < 0) goto done;
  op_copy_into(o[0], self);
  if (n == 0) goto done;
  for (int k = 0; k < nd; k++) ishape[k] = size_ne(ix, k);
  ne_strides(self, nd, sst);
  ne_strides(src, nd, xst);
  scatter_add_loop(self->dtype, core_data(o[0]), core_data(s), idx, n, nd, ishape, w, sst, xst);
done:
  kiln_release(s);
  kiln_release(ix);
  return rc;
}

/* d self = g; d src = gather(g, dim, index), zero-padded from index's
 * shape up to src's (src may be larger than index in any dim; PyTorch
 * fails there, the padding is the exact gradient). */
int op_scatter_add_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0], *index = g->args[2].t;
  const kiln_tensor *src = g->args[3].t;
  if (g->needs[0]) g->grad_in[0] = go;
  if (!g->needs[2]) return 0;
  kiln_tensor *x = kiln_gather(go, (int)g->args[1].i, index);
  int nd = ndim_ne(src);
  int64_t cur[KILN_MAX_DIMS];
  for (int k = 0; k < nd; k++) cur[k] = size_ne(index, k);
  if (x && x->ndim != nd) x = kiln_reshape(x, nd, cur);
  for (int k = 0; x && k < nd; k++) {
    int64_t have = cur[k];
    if (have == size_ne(src, k)) continue;
    cur[k] = size_ne(src, k);
    x = op_call1(KILN_OP_SLICE_BACKWARD, (op_val[]){OPV_T(x), OPV_INTS(cur, nd), OPV_I(k),
                                                    OPV_I(0), OPV_I(have), OPV_I(1)},
                 6);
  }
  if (x && x->ndim != src->ndim) x = kiln_reshape(x, src->ndim, src->shape);
  if (!x) return -1;
  g->grad_in[2] = x;
  return 0;
}

/* ---- public API ------------------------------------------------------------------------- */
/* Each returns a new tensor (new reference in the current scope), or NULL
 * with the error set: non-int64 indices, mismatched shapes, a bad dim, or
 * an index out of range. */

kiln_tensor *kiln_index_select(kiln_tensor *t, int dim, kiln_tensor *index) {
  return op_call1(KILN_OP_INDEX_SELECT, (op_val[]){OPV_T(t), OPV_I(dim), OPV_T(index)}, 3);
}
kiln_tensor *kiln_embedding(kiln_tensor *weight, kiln_tensor *indices) {
  return op_call1(KILN_OP_EMBEDDING, (op_val[]){OPV_T(weight), OPV_T(indices), OPV_I(-1),
                                                OPV_B(false), OPV_B(false)},
                  5);
}
kiln_tensor *kiln_gather(kiln_tensor *t, int dim, kiln_tensor *index) {
  return op_call1(KILN_OP_GATHER, (op_val[]){OPV_T(t), OPV_I(dim), OPV_T(index), OPV_B(false)}, 4);
}
