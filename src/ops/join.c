/* src/ops/join.c: joining and splitting: cat, stack (copies, with type
 * promotion across inputs) and chunk, split (views of their input). */
#include <string.h>

#include "op.h"

static int dim_arg(const char *fn, const op_val *a, int64_t *out) {
  char d[64];
  if (a->tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: expected an int for 'dim', got %s", fn,
                      op_val_desc(a, d, sizeof d));
  *out = a->i;
  return 0;
}

static int list_arg(const char *fn, const op_val *a, const char *empty_msg) {
  char d[64];
  if (a->tag != OP_VAL_TENSORS)
    return core_error(KILN_ERR_INVALID, "%s: expected a list of tensors, got %s", fn,
                      op_val_desc(a, d, sizeof d));
  if (a->ts.n <= 0 || !a->ts.v) return core_error(KILN_ERR_INVALID, "%s: %s", fn, empty_msg);
  for (int i = 0; i < a->ts.n; i++)
    if (!a->ts.v[i])
      return core_error(KILN_ERR_INVALID, "%s: tensor %d of the list is NULL", fn, i);
  return 0;
}

/* The dtype of a list of tensors: PyTorch's result_type over them. cat
 * rejects 0-d inputs and stack's inputs all have one shape, so every input
 * is in the same tier and plain promotion is result_type. */
static kiln_dtype list_dtype(kiln_tensor *const *ts, int n) {
  kiln_dtype dt = ts[0]->dtype;
  for (int i = 1; i < n; i++) dt = kiln_promote_types(dt, ts[i]->dtype);
  return dt;
}

/* Note [Legacy empty]: as in PyTorch, cat skips 1-d tensors of shape [0]
 * whatever the other inputs' shapes (they used to be the only empty
 * tensors); they still take part in type promotion. */
static bool skipped(const kiln_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* ---- cat ------------------------------------------------------------------ */

/* Checks and the result shape; *wdim gets the wrapped dim (-1 when every
 * input is skipped: the result is then the first input's shape). */
static int cat_shape(const op_val *a, op_meta *o, int *wdim) {
  const char *fn = "aten::cat";
  char d[160], e[160];
  int64_t dim = 0;
  if (list_arg(fn, &a[0], "torch.cat(): expected a non-empty list of Tensors") < 0 ||
      dim_arg(fn, &a[1], &dim) < 0)
    return -1;
  kiln_tensor *const *ts = a[0].ts.v;
  int n = a[0].ts.n, ref = -1;
  for (int i = 0; i < n; i++)
    if (ts[i]->ndim == 0)
      return core_error(KILN_ERR_INVALID,
                        "%s: zero-dimensional tensor (at position %d) cannot be concatenated",
                        fn, i);
  for (int i = 0; i < n && ref < 0; i++)
    if (!skipped(ts[i])) ref = i;
  o->dtype = list_dtype(ts, n);
  *wdim = -1;
  if (ref < 0) {
    if (core_wrap_dim(fn, dim, 1) < 0) return -1;
    o->ndim = 1;
    memset(o->shape, 0, sizeof o->shape);
    return 0;
  }
  const kiln_tensor *r = ts[ref];
  int w = core_wrap_dim(fn, dim, r->ndim);
  if (w < 0) return -1;
  op_meta_of(r, o);
  o->dtype = list_dtype(ts, n);
  o->shape[w] = 0;
  for (int i = 0; i < n; i++) {
    const kiln_tensor *t = ts[i];
    if (skipped(t)) continue;
    if (t->ndim != r->ndim)
      return core_error(KILN_ERR_INVALID,
                        "%s: Tensors must have same number of dimensions: got %d and %d "
                        "(tensor %d %s and tensor %d %s)",
                        fn, r->ndim, t->ndim, ref, core_tensor_desc(r, d, sizeof d), i,
                        core_tensor_desc(t, e, sizeof e));
    for (int k = 0; k < r->ndim; k++)
      if (k != w && t->shape[k] != r->shape[k])
        return core_error(KILN_ERR_INVALID,
                          "%s: Sizes of tensors must match except in dimension %d. Expected "
                          "size %lld but got size %lld for tensor number %d in the list "
                          "(%s vs %s, dim %d).",
                          fn, w, (long long)r->shape[k], (long long)t->shape[k], i,
                          core_tensor_desc(r, d, sizeof d), core_tensor_desc(t, e, sizeof e), k);
    o->shape[w] += t->shape[w];
  }
  *wdim = w;
  return 0;
}

/* Copies the inputs into out (contiguous) one after another along dim:
 * input i fills a slab of size[i] along dim. Each input is brought to the
 * output dtype in C order first if it is not already, so the copy is one
 * memcpy per (outer index, input): the common batch-concatenation case is
 * memory-bound, and memcpy is as fast as it gets. */
static int join_into(kiln_tensor *out, kiln_tensor *const *ts, int n, int dim,
                     const int64_t *sizes) {
  size_t es = kiln_dtype_size(out->dtype);
  int64_t outer = core_numel(dim, out->shape);
  int64_t inner = core_numel(out->ndim - dim - 1, out->shape + dim + 1);
  int64_t row = out->shape[dim] * inner, off = 0;
  char *dst = core_data(out);
  for (int i = 0; i < n; i++) {
    kiln_tensor *t = ts[i], *c = NULL;
    int64_t blk = sizes[i] * inner;
    if (blk == 0 || outer == 0) {
      off += blk;
      continue;
    }
    if (t->dtype != out->dtype || !core_is_contiguous(t)) {
      c = core_tensor_new(t->ndim, t->shape, out->dtype);
      if (!c) return KILN_ERR_NOMEM;
      op_copy_into(c, t);
      t = c;
    }
    const char *src = core_data(t);
    size_t nb = (size_t)blk * es;
#pragma omp parallel for if (outer * blk >= OP_PARALLEL_MIN && outer > 1)
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (o * row + off) * (int64_t)es, src + o * blk * (int64_t)es, nb);
    kiln_release(c);
    off += blk;
  }
  return 0;
}

int op_cat_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  return cat_shape(a, &o[0], &w) < 0 ? -1 : 1;
}

int op_cat_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  op_meta meta;
  int w, rc = 0;
  if (cat_shape(a, &meta, &w) < 0) return -1;
  if (w < 0) return 0; /* every input is an empty [0] */
  int nt = a[0].ts.n, k = 0;
  kiln_tensor **ts = core_alloc((size_t)nt * sizeof *ts);
  int64_t *sizes = core_alloc((size_t)nt * sizeof *sizes);
  if (!ts || !sizes) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < nt; i++)
    if (!skipped(a[0].ts.v[i])) {
      ts[k] = a[0].ts.v[i];
      sizes[k++] = a[0].ts.v[i]->shape[w];
    }
  rc = join_into(o[0], ts, k, w, sizes);
done:
  core_free(ts);
  core_free(sizes);
  return rc;
}

/* Input i's gradient is its slab of the gradient along dim. */
int op_cat_grad(op_grad_ctx *g) {
  op_meta meta;
  int w;
  kiln_tensor *go = g->grads[0];
  if (cat_shape(g->args, &meta, &w) < 0) return -1;
  int64_t off = 0;
  for (int i = 0; i < g->args[0].ts.n; i++) {
    const kiln_tensor *t = g->args[0].ts.v[i];
    if (w < 0 || skipped(t)) continue;
    if (g->needs[i]) g->grad_in[i] = kiln_narrow(go, w, off, t->shape[w]);
    off += t->shape[w];
  }
  return 0;
}

/* ---- stack -------------------------------------------------------------------- */

static int stack_shape(const op_val *a, op_meta *o, int *wdim) {
  const char *fn = "aten::stack";
  char d[160], e[160];
  int64_t dim = 0;
  if (list_arg(fn, &a[0], "stack expects a non-empty TensorList") < 0 ||
      dim_arg(fn, &a[1], &dim) < 0)
    return -1;
  kiln_tensor *const *ts = a[0].ts.v;
  const kiln_tensor *r = ts[0];
  int n = a[0].ts.n;
  for (int i = 1; i < n; i++)
    if (ts[i]->ndim != r->ndim ||
        memcmp(ts[i]->shape, r->shape, (size_t)r->ndim * sizeof *r->shape))
      return core_error(KILN_ERR_INVALID,
                        "%s: stack expects each tensor to be equal size, but got %s at entry "
                        "0 and %s at entry %d",
                        fn, core_shape_str(r->ndim, r->shape, d, sizeof d),
                        core_shape_str(ts[i]->ndim, ts[i]->shape, e, sizeof e), i);
  if (r->ndim >= KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: stacking %s tensors would need more than %d dims",
                      fn, core_tensor_desc(r, d, sizeof d), KILN_MAX_DIMS);
  int w = core_wrap_dim(fn, dim, r->ndim + 1);
  if (w < 0) return -1;
  o->dtype = list_dtype(ts, n);
  o->ndim = r->ndim + 1;
  memset(o->shape, 0, sizeof o->shape);
  for (int i = 0, k = 0; i < o->ndim; i++) o->shape[i] = i == w ? n : r->shape[k++];
  *wdim = w;
  return 0;
}

int op_stack_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  return stack_shape(a, &o[0], &w) < 0 ? -1 : 1;
}

int op_stack_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  op_meta meta;
  int w, rc;
  if (stack_shape(a, &meta, &w) < 0) return -1;
  int nt = a[0].ts.n;
  int64_t *sizes = core_alloc((size_t)nt * sizeof *sizes);
  if (!sizes) return KILN_ERR_NOMEM;
  for (int i = 0; i < nt; i++) sizes[i] = 1;
  rc = join_into(o[0], a[0].ts.v, nt, w, sizes);
  core_free(sizes);
  return rc;
}

int op_stack_grad(op_grad_ctx *g) {
  op_meta meta;
  int w;
  if (stack_shape(g->args, &meta, &w) < 0) return -1;
  for (int i = 0; i < g->args[0].ts.n; i++)
    if (g->needs[i]) g->grad_in[i] = kiln_select(g->grads[0], w, i);
  return 0;
}

/* ---- chunk, split ----------------------------------------------------------------- */

/* The pieces' common size along the wrapped dim, and their count. */
static int split_plan(const char *fn, const op_val *a, bool is_chunk, int *wdim,
                      int64_t *piece, int64_t *count) {
  char d[160];
  int64_t k, dim = 0;
  if (a[0].tag != OP_VAL_TENSOR || !a[0].t)
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor for 'self', got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (a[1].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: expected an int for '%s', got %s", fn,
                      is_chunk ? "chunks" : "split_size", op_val_desc(&a[1], d, sizeof d));
  if (dim_arg(fn, &a[2], &dim) < 0) return -1;
  const kiln_tensor *t = a[0].t;
  k = a[1].i;
  if (t->ndim == 0)
    return core_error(KILN_ERR_INVALID, "%s: %s expects at least a 1-dimensional tensor", fn,
                      is_chunk ? "chunk" : "split");
  if (is_chunk && k <= 0)
    return core_error(KILN_ERR_INVALID, "%s: chunk expects `chunks` to be greater than 0, got: %lld",
                      fn, (long long)k);
  if (!is_chunk && k < 0)
    return core_error(KILN_ERR_INVALID,
                      "%s: split expects split_size be non-negative, but got split_size=%lld", fn,
                      (long long)k);
  int w = core_wrap_dim(fn, dim, t->ndim);
  if (w < 0) return -1;
  int64_t size = t->shape[w];
  if (is_chunk) {
    /* chunk: ceil(size / chunks) per piece; an empty dim gives `chunks`
     * empty pieces (PyTorch's split_with_sizes case) */
    *piece = (size + k - 1) / k;
    *count = size == 0 ? k : (size + *piece - 1) / *piece;
  } else {
    if (k == 0 && size != 0)
      return core_error(KILN_ERR_INVALID,
                        "%s: split_size can only be 0 if dimension size is 0, but got "
                        "dimension size of %lld",
                        fn, (long long)size);
    *piece = k;
    *count = k == 0 ? 1 : (size + k - 1) / k;
    if (*count < 1) *count = 1;
  }
  *wdim = w;
  return 0;
}

/* Size along the dim of piece i. */
static int64_t piece_size(int64_t size, int64_t piece, int64_t i) {
  int64_t left = size - i * piece;
  return left < 0 ? 0 : left < piece ? left : piece;
}

static int split_infer(const char *fn, const op_val *a, bool is_chunk, op_meta *o, int m) {
  int w;
  int64_t piece, count;
  if (split_plan(fn, a, is_chunk, &w, &piece, &count) < 0) return -1;
  if (count > m)
    return core_error(KILN_ERR_INVALID,
                      "%s: %s would make %lld pieces, but there is room for only %d outputs",
                      fn, is_chunk ? "chunk" : "split", (long long)count, m);
  for (int64_t i = 0; i < count; i++) {
    op_meta_of(a[0].t, &o[i]);
    o[i].shape[w] = piece_size(a[0].t->shape[w], piece, i);
  }
  return (int)count;
}

static int split_cpu(const char *fn, const op_val *a, bool is_chunk, kiln_tensor **o, int m) {
  int w;
  int64_t piece, count;
  const kiln_tensor *t = a[0].t;
  int64_t shape[KILN_MAX_DIMS];
  if (split_plan(fn, a, is_chunk, &w, &piece, &count) < 0) return -1;
  if (count != m) return core_error(KILN_ERR_INVALID, "%s: expected %lld outputs, got %d", fn,
                                    (long long)count, m);
  memcpy(shape, t->shape, sizeof shape);
  for (int64_t i = 0; i < count; i++) {
    shape[w] = piece_size(t->shape[w], piece, i);
    int64_t off = shape[w] ? i * piece * t->strides[w] : 0;
    o[i] = core_tensor_view(t->storage, t->dtype, t->ndim, shape, t->strides, t->offset + off);
    if (!o[i]) return KILN_ERR_NOMEM; /* op_call releases the ones made */
  }
  return 0;
}

/* The gradient is the pieces' gradients joined back along dim; pieces that
 * got no gradient contribute zeros. */
static int split_grad(const char *fn, op_grad_ctx *g, bool is_chunk) {
  int w, rc = 0;
  int64_t piece, count;
  const kiln_tensor *t = g->args[0].t;
  int64_t shape[KILN_MAX_DIMS];
  if (!g->needs[0]) return 0;
  if (split_plan(fn, g->args, is_chunk, &w, &piece, &count) < 0) return -1;
  if (count != g->n_outs)
    return core_error(KILN_ERR_STATE, "%s: %d gradients for %lld pieces", fn, g->n_outs,
                      (long long)count);
  kiln_dtype dt = t->dtype;
  bool any = false;
  for (int i = 0; i < g->n_outs; i++)
    if (g->grads[i]) {
      dt = g->grads[i]->dtype;
      any = true;
    }
  if (!any) return 0;
  kiln_tensor **parts = core_alloc((size_t)count * sizeof *parts);
  if (!parts) return KILN_ERR_NOMEM;
  memcpy(shape, t->shape, sizeof shape);
  for (int64_t i = 0; i < count; i++) {
    shape[w] = piece_size(t->shape[w], piece, i);
    parts[i] = g->grads[i] ? g->grads[i] : kiln_zeros(t->ndim, shape, dt);
    if (!parts[i]) {
      rc = -1;
      goto done;
    }
  }
  g->grad_in[0] = kiln_cat(parts, (int)count, w);
  if (!g->grad_in[0]) rc = -1;
done:
  core_free(parts);
  return rc;
}

int op_chunk_infer(const op_val *a, int n, op_meta *o, int m) {
  return split_infer("aten::chunk", a, true, o, m);
}
int op_chunk_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return split_cpu("aten::chunk", a, true, o, m);
}
int op_chunk_grad(op_grad_ctx *g) { return split_grad("aten::chunk", g, true); }

int op_split_infer(const op_val *a, int n, op_meta *o, int m) {
  return split_infer("aten::split", a, false, o, m);
}
int op_split_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return split_cpu("aten::split", a, false, o, m);
}
int op_split_grad(op_grad_ctx *g) { return split_grad("aten::split", g, false); }

/* ---- unbind ----------------------------------------------------------------------- */

/* The wrapped dim and the number of pieces (the dim's size). */
static int unbind_plan(const op_val *a, int *wdim, int64_t *count) {
  char d[160];
  int64_t dim = 0;
  if (a[0].tag != OP_VAL_TENSOR || !a[0].t)
    return core_error(KILN_ERR_INVALID, "aten::unbind: expected a tensor for 'self', got %s",
                      op_val_desc(&a[0], d, sizeof d));
  if (dim_arg("aten::unbind", &a[1], &dim) < 0) return -1;
  if (a[0].t->ndim == 0)
    return core_error(KILN_ERR_INVALID,
                      "aten::unbind: Dimension specified as %lld but tensor has no dimensions",
                      (long long)dim);
  int w = core_wrap_dim("aten::unbind", dim, a[0].t->ndim);
  if (w < 0) return -1;
  *wdim = w;
  *count = a[0].t->shape[w];
  return 0;
}

int op_unbind_infer(const op_val *a, int n, op_meta *o, int m) {
  int w;
  int64_t count;
  if (unbind_plan(a, &w, &count) < 0) return -1;
  if (count > m)
    return core_error(KILN_ERR_INVALID,
                      "aten::unbind: would make %lld pieces, but there is room for only %d "
                      "outputs",
                      (long long)count, m);
  const kiln_tensor *t = a[0].t;
  for (int64_t i = 0; i < count; i++) {
    op_meta_of(t, &o[i]);
    o[i].ndim = t->ndim - 1;
    for (int d = w; d < t->ndim - 1; d++) o[i].shape[d] = t->shape[d + 1];
  }
  return (int)count;
}

int op_unbind_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  int w;
  int64_t count, shape[KILN_MAX_DIMS], strides[KILN_MAX_DIMS];
  const kiln_tensor *t = a[0].t;
  if (unbind_plan(a, &w, &count) < 0) return -1;
  if (count != m)
    return core_error(KILN_ERR_INVALID, "aten::unbind: expected %lld outputs, got %d",
                      (long long)count, m);
  for (int d = 0, k = 0; d < t->ndim; d++)
    if (d != w) {
      shape[k] = t->shape[d];
      strides[k++] = t->strides[d];
    }
  for (int64_t i = 0; i < count; i++) {
    o[i] = core_tensor_view(t->storage, t->dtype, t->ndim - 1, shape, strides,
                            t->offset + i * t->strides[w]);
    if (!o[i]) return KILN_ERR_NOMEM; /* op_call releases the ones made */
  }
  return 0;
}

/* The gradient is the pieces' gradients stacked back along dim (one
 * allocation, unlike a select_backward per piece); pieces that got no
 * gradient contribute zeros. */
int op_unbind_grad(op_grad_ctx *g) {
  int w, rc = 0;
  int64_t count;
  if (!g->needs[0]) return 0;
  if (unbind_plan(g->args, &w, &count) < 0) return -1;
  if (count != g->n_outs)
    return core_error(KILN_ERR_STATE, "aten::unbind: %d gradients for %lld pieces", g->n_outs,
                      (long long)count);
  const kiln_tensor *like = NULL;
  for (int i = 0; i < g->n_outs && !like; i++) like = g->grads[i];
  if (!like) return 0;
  kiln_tensor **parts = core_alloc((size_t)count * sizeof *parts);
  if (!parts) return KILN_ERR_NOMEM;
  for (int64_t i = 0; i < count; i++) {
    parts[i] = g->grads[i] ? g->grads[i] : kiln_zeros(like->ndim, like->shape, like->dtype);
    if (!parts[i]) {
      rc = -1;
      goto done;
    }
  }
  g->grad_in[0] = kiln_stack(parts, (int)count, w);
  if (!g->grad_in[0]) rc = -1;
done:
  core_free(parts);
  return rc;
}

/* ---- public API --------------------------------------------------------------------- */

/* cat/stack: a new tensor (new reference in the current scope) of the
 * promoted dtype, or NULL with the error set (empty list, mismatched
 * shapes, bad dim). */
kiln_tensor *kiln_cat(kiln_tensor *const *ts, int n, int dim) {
  return op_call1(KILN_OP_CAT, (op_val[]){OPV_TS(ts, n), OPV_I(dim)}, 2);
}
kiln_tensor *kiln_stack(kiln_tensor *const *ts, int n, int dim) {
  return op_call1(KILN_OP_STACK, (op_val[]){OPV_TS(ts, n), OPV_I(dim)}, 2);
}
/* chunk/split: views of t (new references in the current scope) written
 * to outs; returns their count, or a negative status when the arguments
 * are bad or there would be more than max_out pieces. */
int kiln_chunk(kiln_tensor *t, int chunks, int dim, kiln_tensor **outs, int max_out) {
  return op_call(KILN_OP_CHUNK, (op_val[]){OPV_T(t), OPV_I(chunks), OPV_I(dim)}, 3, outs,
                 max_out);
}
/* unbind: a view per index along dim (dropping it), as for chunk. */
int kiln_unbind(kiln_tensor *t, int dim, kiln_tensor **outs, int max_out) {
  return op_call(KILN_OP_UNBIND, (op_val[]){OPV_T(t), OPV_I(dim)}, 2, outs, max_out);
}
int kiln_split(kiln_tensor *t, int64_t split_size, int dim, kiln_tensor **outs, int max_out) {
  return op_call(KILN_OP_SPLIT, (op_val[]){OPV_T(t), OPV_I(split_size), OPV_I(dim)}, 3, outs,
                 max_out);
}
