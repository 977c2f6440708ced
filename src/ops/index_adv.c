/* src/ops/index_adv.c: advanced indexing (issue #15): aten::index
 * (x[idx], x[mask], x[:, idx], None entries in the Tensor?[] list) and
 * aten::index_put (x[idx] = v, accumulate=True adds; its in-place form
 * index_put_ is derived), plus aten::tensor (the 0-d value TorchScript
 * builds for `x[idx] = 2.0`). Each decomposes into permute, reshape,
 * index_select, index_add and where, so autograd (gradients for self and
 * values), lazy tensors and the JIT come from those ops.
 *
 * Note [Advanced indexing]: as PyTorch. The list's entries walk self's
 * dims: None keeps a dim, a long tensor indexes one, a bool
 * mask of k dims indexes k (its nonzero() coordinates, one long tensor
 * per dim; the mask's values are read, syncing a lazy mask). The index
 * tensors broadcast to a shape B; the indexed dims, taken in order, become
 * one linear index into self permuted to [indexed dims, other dims] and
 * reshaped to [K, other dims]. The result is [B, other dims], with B moved
 * to where the first indexed dim was when the indexed dims are adjacent
 * (no None between them), at the front otherwise. */
#include <string.h>

#include "op.h"

typedef struct adv_index {
  int m;                          /* indexed dims */
  int dims[KILN_MAX_DIMS];        /* which, in order */
  kiln_tensor *idx[KILN_MAX_DIMS]; /* a long index per indexed dim */
  int nb;                         /* the broadcast index shape B */
  int64_t b[KILN_MAX_DIMS];
  int front;                      /* where B goes in the result: first dim, or 0 */
  kiln_tensor *lin;               /* the linear index, numel(B) long values, 1-d */
} adv_index;

/* The coordinates of mask's true elements, one 1-d long tensor per dim
 * (into out[0..mask->ndim)). */
static int mask_coords(const char *fn, kiln_tensor *mask, kiln_tensor **out) {
  kiln_tensor *m = mask;
  if (m->device == CORE_DEVICE_LAZY) {
    if (!core_lazy_materialize_hook || !(m = core_lazy_materialize_hook(m)))
      return core_error(KILN_ERR_INVALID, "%s: cannot read the lazy mask", fn);
    m = core_autorelease(m);
  }
  m = kiln_contiguous(kiln_to_dtype(m, KILN_DTYPE_BOOL));
  if (!m) return -1;
  int64_t n = core_numel(m->ndim, m->shape), cnt = 0;
  const bool *p = kiln_tensor_data(m);
  for (int64_t i = 0; i < n; i++) cnt += p[i];
  int64_t *buf = NULL;
  size_t bytes;
  if (__builtin_mul_overflow((size_t)cnt, (size_t)(m->ndim ? m->ndim : 1) * sizeof(int64_t), &bytes) ||
      !(buf = core_alloc(bytes ? bytes : 1)))
    return core_error(KILN_ERR_NOMEM, "%s: out of memory for %lld mask coordinates", fn, (long long)cnt);
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!p[i]) continue;
    int64_t r = i;
    for (int d = m->ndim - 1; d >= 0; d--) {
      buf[(size_t)d * (size_t)cnt + (size_t)k] = r % m->shape[d];
      r /= m->shape[d];
    }
    k++;
  }
  int rc = 0;
  for (int d = 0; d < m->ndim && rc == 0; d++)
    if (!(out[d] = kiln_from_data(buf + (size_t)d * (size_t)cnt, 1, &cnt, KILN_DTYPE_I64))) rc = -1;
  core_free(buf);
  return rc;
}

/* An index tensor's out-of-range values (CPU tensors only: a lazy index
 * is checked by index_select's kernel on the linear index). */
static int check_range(const char *fn, kiln_tensor *ix, int dim, int64_t size) {
  if (ix->device == CORE_DEVICE_LAZY) return 0;
  kiln_tensor *c = kiln_contiguous(ix);
  if (!c) return -1;
  const int64_t *p = kiln_tensor_data(c);
  int64_t n = core_numel(c->ndim, c->shape);
  for (int64_t i = 0; i < n; i++)
    if (p[i] < -size || p[i] >= size)
      return core_error(KILN_ERR_INVALID, "%s: index %lld is out of bounds for dimension %d with size %lld",
                        fn, (long long)p[i], dim, (long long)size);
  return 0;
}

/* Parses indices against x into ai (Note [Advanced indexing]). */
static int parse(const char *fn, kiln_tensor *x, const op_val *list, adv_index *ai) {
  char d[64];
  memset(ai, 0, sizeof *ai);
  if (list->tag == OP_VAL_TENSOR) return parse(fn, x, &OPV_TS(&list->t, 1), ai);
  if (list->tag != OP_VAL_TENSORS)
    return core_error(KILN_ERR_INVALID, "%s: expected a list of index tensors, got %s", fn,
                      op_val_desc(list, d, sizeof d));
  int dim = 0, last = -1;
  bool adjacent = true;
  for (int i = 0; i < list->ts.n; i++) {
    kiln_tensor *t = list->ts.v[i];
    if (!t) {
      dim++;
      continue;
    }
    bool mask = t->dtype == KILN_DTYPE_BOOL;
    int k = mask ? t->ndim : 1;
    if (dim + k > x->ndim)
      return core_error(KILN_ERR_INVALID, "%s: too many indices for tensor of dimension %d", fn,
                        x->ndim);
    if (last >= 0 && last != dim) adjacent = false;
    if (mask) {
      if (t->ndim == 0)
        return core_error(KILN_ERR_UNSUPPORTED, "%s: a 0-d bool index is not supported", fn);
      for (int j = 0; j < k; j++)
        if (t->shape[j] != x->shape[dim + j])
          return core_error(KILN_ERR_INVALID, "%s: The shape of the mask %s at index %d does not "
                            "match the shape of the indexed tensor %s at index %d", fn,
                            core_tensor_desc(t, d, sizeof d), j,
                            core_tensor_desc(x, (char[64]){0}, 64), dim + j);
      if (mask_coords(fn, t, ai->idx + ai->m) < 0) return -1;
    } else if (t->dtype != KILN_DTYPE_I64) {
      return core_error(KILN_ERR_INVALID, "%s: tensors used as indices must be long or bool "
                        "tensors, got %s", fn, core_tensor_desc(t, d, sizeof d));
    } else {
      ai->idx[ai->m] = t;
      if (check_range(fn, ai->idx[ai->m], dim, x->shape[dim]) < 0) return -1;
    }
    for (int j = 0; j < k; j++) ai->dims[ai->m++] = dim + j;
    dim += k;
    last = dim;
  }
  if (ai->m == 0) return core_error(KILN_ERR_INVALID, "%s: no index tensor in the list", fn);
  ai->front = adjacent ? ai->dims[0] : 0;
  /* broadcast the index tensors to B */
  ai->nb = ai->idx[0]->ndim;
  memcpy(ai->b, ai->idx[0]->shape, (size_t)ai->nb * sizeof *ai->b);
  for (int j = 1; j < ai->m; j++)
    if (op_broadcast_shapes(fn, ai->nb, ai->b, ai->idx[j]->ndim, ai->idx[j]->shape, &ai->nb, ai->b) < 0)
      return -1;
  /* linear = sum_j wrap(idx_j) * stride_j over the indexed dims */
  kiln_tensor *lin = NULL;
  int64_t stride = 1;
  for (int j = ai->m - 1; j >= 0; j--) {
    int64_t size = x->shape[ai->dims[j]];
    kiln_tensor *ix = ai->idx[j];
    kiln_tensor *neg = op_call1(KILN_OP_LT, (op_val[]){OPV_T(ix), OPV_I(0)}, 2);
    kiln_tensor *up = op_call1(KILN_OP_ADD, (op_val[]){OPV_T(ix), OPV_I(size), OPV_I(1)}, 3);
    kiln_tensor *w = neg && up ? kiln_where(neg, up, ix) : NULL;
    kiln_tensor *s = w ? op_call1(KILN_OP_MUL, (op_val[]){OPV_T(w), OPV_I(stride)}, 2) : NULL;
    lin = !s ? NULL : lin ? op_call1(KILN_OP_ADD, (op_val[]){OPV_T(lin), OPV_T(s), OPV_I(1)}, 3) : s;
    if (!lin) return -1;
    if (__builtin_mul_overflow(stride, size, &stride))
      return core_error(KILN_ERR_INVALID, "%s: indexed dims too large", fn);
  }
  int64_t flat = -1;
  lin = kiln_expand(lin, ai->nb, ai->b);
  ai->lin = lin ? kiln_reshape(lin, 1, &flat) : NULL;
  return ai->lin ? 0 : -1;
}

/* x permuted to [indexed dims, other dims] and reshaped to [K, other dims]
 * (rest/nrest: the other dims' sizes). */
static kiln_tensor *gathered_view(kiln_tensor *x, const adv_index *ai, int64_t *rest, int *nrest) {
  int64_t perm[KILN_MAX_DIMS], sh[KILN_MAX_DIMS];
  bool used[KILN_MAX_DIMS] = {0};
  int k = 0;
  int64_t K = 1;
  for (int j = 0; j < ai->m; j++) {
    perm[k++] = ai->dims[j];
    used[ai->dims[j]] = true;
    K *= x->shape[ai->dims[j]];
  }
  *nrest = 0;
  for (int i = 0; i < x->ndim; i++)
    if (!used[i]) {
      perm[k++] = i;
      rest[(*nrest)++] = x->shape[i];
    }
  sh[0] = K;
  memcpy(sh + 1, rest, (size_t)*nrest * sizeof *sh);
  kiln_tensor *p = kiln_permute(x, x->ndim, perm);
  return p ? kiln_reshape(p, 1 + *nrest, sh) : NULL;
}

/* The permutation from [B, other dims] to the result's order (B at front). */
static void result_perm(const adv_index *ai, int nrest, int64_t *perm) {
  int k = 0;
  for (int i = 0; i < ai->front; i++) perm[k++] = ai->nb + i;
  for (int i = 0; i < ai->nb; i++) perm[k++] = i;
  for (int i = ai->front; i < nrest; i++) perm[k++] = ai->nb + i;
}

int op_index_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::index";
  kiln_tensor *x;
  adv_index ai;
  int64_t rest[KILN_MAX_DIMS], sh[KILN_MAX_DIMS], perm[KILN_MAX_DIMS];
  int nrest, rc;
  (void)n, (void)max;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &x)) < 0) return rc;
  if (parse(fn, x, &a[1], &ai) < 0) return op_failed_status();
  if (ai.nb + x->ndim - ai.m > KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: the result has more than %d dims", fn, KILN_MAX_DIMS);
  kiln_tensor *g = gathered_view(x, &ai, rest, &nrest);
  kiln_tensor *s = g ? kiln_index_select(g, 0, ai.lin) : NULL;
  memcpy(sh, ai.b, (size_t)ai.nb * sizeof *sh);
  memcpy(sh + ai.nb, rest, (size_t)nrest * sizeof *sh);
  kiln_tensor *r = s ? kiln_reshape(s, ai.nb + nrest, sh) : NULL;
  if (r && ai.front) {
    result_perm(&ai, nrest, perm);
    r = kiln_permute(r, ai.nb + nrest, perm);
  }
  return op_out1(r, outs);
}

/* index_put(self, indices, values, accumulate): self with values written
 * (or, accumulating, added) where self[indices] reads */
int op_index_put_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::index_put";
  kiln_tensor *x, *v;
  adv_index ai;
  int64_t rest[KILN_MAX_DIMS], sh[KILN_MAX_DIMS], perm[KILN_MAX_DIMS], inv[KILN_MAX_DIMS];
  int nrest, rc;
  char d[2][64];
  (void)n, (void)max;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[2], "values", &v)) < 0)
    return rc;
  bool acc = a[3].tag == OP_VAL_BOOL ? a[3].b : a[3].tag == OP_VAL_INT ? a[3].i != 0 : false;
  if (v->dtype != x->dtype)
    return core_error(KILN_ERR_INVALID, "%s: Index put requires the source and destination dtypes "
                      "match, got %s for the destination and %s for the source.", fn,
                      kiln_dtype_name(x->dtype), kiln_dtype_name(v->dtype));
  if (parse(fn, x, &a[1], &ai) < 0) return op_failed_status();
  if (ai.nb + x->ndim - ai.m > KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: the indexed shape has more than %d dims", fn, KILN_MAX_DIMS);
  kiln_tensor *g = gathered_view(x, &ai, rest, &nrest);
  if (!g) return op_failed_status();
  /* values broadcast to the shape of self[indices], then to [B, rest] */
  int nr = ai.nb + nrest;
  result_perm(&ai, nrest, perm);
  for (int i = 0; i < nr; i++) {
    int64_t p = perm[i];
    sh[i] = p < ai.nb ? ai.b[p] : rest[p - ai.nb];
    inv[p] = i;
  }
  int nd = nr;
  int64_t bs[KILN_MAX_DIMS];
  if (op_broadcast_shapes(fn, v->ndim, v->shape, nr, sh, &nd, bs) < 0 || nd != nr ||
      memcmp(bs, sh, (size_t)nr * sizeof *sh))
    return core_error(KILN_ERR_INVALID, "%s: shape mismatch: value tensor %s cannot be broadcast "
                      "to indexing result of shape %s", fn, core_tensor_desc(v, d[0], sizeof d[0]),
                      core_shape_str(nr, sh, d[1], sizeof d[1]));
  kiln_tensor *ve = kiln_expand(v, nr, sh);
  if (ve && ai.front) ve = kiln_permute(ve, nr, inv);
  int64_t vs[KILN_MAX_DIMS];
  vs[0] = core_numel(ai.nb, ai.b);
  memcpy(vs + 1, rest, (size_t)nrest * sizeof *vs);
  kiln_tensor *vr = ve ? kiln_reshape(ve, 1 + nrest, vs) : NULL;
  if (!vr) return op_failed_status();
  if (x->dtype == KILN_DTYPE_BOOL) { /* index_add has no bool kernel: in int64, cast back */
    g = kiln_to_dtype(g, KILN_DTYPE_I64);
    vr = kiln_to_dtype(vr, KILN_DTYPE_I64);
    if (!g || !vr) return op_failed_status();
  }
  kiln_tensor *y = acc ? op_call1(KILN_OP_INDEX_ADD,
                                  (op_val[]){OPV_T(g), OPV_I(0), OPV_T(ai.lin), OPV_T(vr), OPV_I(1)}, 5)
                       : op_call1(KILN_OP_INDEX_COPY,
                                  (op_val[]){OPV_T(g), OPV_I(0), OPV_T(ai.lin), OPV_T(vr)}, 4);
  if (!y) return op_failed_status();
  /* back to self's layout: [indexed dims, other dims] -> self's dims */
  int64_t ps[KILN_MAX_DIMS], back[KILN_MAX_DIMS];
  bool used[KILN_MAX_DIMS] = {0};
  int k = 0;
  for (int j = 0; j < ai.m; j++) {
    used[ai.dims[j]] = true;
    back[ai.dims[j]] = k;
    ps[k++] = x->shape[ai.dims[j]];
  }
  for (int i = 0; i < x->ndim; i++)
    if (!used[i]) {
      back[i] = k;
      ps[k++] = x->shape[i];
    }
  if (x->dtype == KILN_DTYPE_BOOL && !(y = kiln_to_dtype(y, KILN_DTYPE_BOOL))) return op_failed_status();
  kiln_tensor *r = kiln_reshape(y, x->ndim, ps);
  r = r ? kiln_permute(r, x->ndim, back) : NULL;
  return op_out1(r ? kiln_contiguous(r) : NULL, outs);
}

/* tensor(t, dtype, device, requires_grad): a 0-d tensor holding the
 * number t (float32 for a float, int64 for an int, bool for a bool), or
 * a 1-d one of an int list (torch.tensor([2, -1, 0]) as an index) */
static int tensor_of(const op_val *a, kiln_tensor **outs) {
  const char *fn = "aten::tensor";
  if (!op_val_is_num(&a[0]) && a[0].tag != OP_VAL_INTS)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: data must be a number or a list of ints", fn);
  kiln_dtype dt = a[0].tag == OP_VAL_BOOL  ? KILN_DTYPE_BOOL
                  : a[0].tag == OP_VAL_INT || a[0].tag == OP_VAL_INTS ? KILN_DTYPE_I64
                                           : KILN_DTYPE_F32;
  if (a[1].tag == OP_VAL_INT && op_dtype_from_code(a[1].i, &dt) < 0) return KILN_ERR_INVALID;
  if (a[1].tag != OP_VAL_INT && a[1].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "%s: dtype must be a ScalarType", fn);
  if (a[2].tag == OP_VAL_STR && strcmp(a[2].s, "cpu") != 0)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: device '%s' (kiln runs on the CPU)", fn, a[2].s);
  kiln_tensor *t;
  if (a[0].tag == OP_VAL_INTS) {
    int64_t len = a[0].ints.n;
    t = kiln_from_data(a[0].ints.v, 1, &len, KILN_DTYPE_I64);
    if (t && dt != KILN_DTYPE_I64) t = kiln_to_dtype(t, dt);
  } else {
    t = kiln_scalar(op_val_num(&a[0]), dt);
  }
  if (t && a[3].tag == OP_VAL_BOOL && a[3].b && kiln_set_requires_grad(t, true) < 0) t = NULL;
  return op_out1(t, outs);
}
int op_tensor_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n, (void)max;
  return tensor_of(a, outs);
}
int op_tensor_list_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n, (void)max;
  return tensor_of(a, outs);
}
