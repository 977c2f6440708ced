/* src/ops/copy.c: copies and conversions: contiguous, clone, to (dtype),
 * detach, zeros_like, ones_like, and in-place copy_/fill (not recorded by
 * autograd). One strided-copy routine serves them all. */
#include <omp.h>
#include <string.h>

#include "op.h"

#define COPY_PARALLEL_BYTES (256 << 10) /* contiguous copies split over threads from here */

/* Rows [r0, r1) of the copy below: a row is dst's last dim, src read with
 * the broadcast strides sstr. */
static void copy_rows(kiln_tensor *dst, const kiln_tensor *src, const int64_t *sstr, int64_t r0,
                      int64_t r1) {
  int nd = dst->ndim, last = nd - 1;
  size_t des = kiln_dtype_size(dst->dtype), ses = kiln_dtype_size(src->dtype);
  char *d = core_data(dst);
  const char *s = core_data(src);
  int64_t w = dst->shape[last], dst_s = dst->strides[last], src_s = sstr[last];
  int64_t idx[KILN_MAX_DIMS] = {0}, doff = 0, soff = 0, q = r0;
  for (int i = last - 1; i >= 0; i--) { /* row r0's index and offsets */
    idx[i] = q % dst->shape[i];
    q /= dst->shape[i];
    doff += idx[i] * dst->strides[i];
    soff += idx[i] * sstr[i];
  }
  for (int64_t r = r0; r < r1; r++) {
    char *dp = d + doff * (int64_t)des;
    const char *sp = s + soff * (int64_t)ses;
    if (dst->dtype != src->dtype) { /* Note [Conversions] */
      if (dst_s == 1)
        core_convert_run(dp, dst->dtype, sp, src->dtype, src_s, w);
      else
        for (int64_t j = 0; j < w; j++)
          core_convert_run(dp + j * dst_s * (int64_t)des, dst->dtype,
                           sp + j * src_s * (int64_t)ses, src->dtype, 1, 1);
    } else if (dst_s == 1 && src_s == 1) {
      memcpy(dp, sp, (size_t)w * des);
    } else if (des == 4) {
      uint32_t *o = (uint32_t *)dp;
      const uint32_t *q4 = (const uint32_t *)sp;
      for (int64_t j = 0; j < w; j++) o[j * dst_s] = q4[j * src_s];
    } else if (des == 8) {
      uint64_t *o = (uint64_t *)dp;
      const uint64_t *q8 = (const uint64_t *)sp;
      for (int64_t j = 0; j < w; j++) o[j * dst_s] = q8[j * src_s];
    } else {
      for (int64_t j = 0; j < w; j++)
        memcpy(dp + j * dst_s * (int64_t)des, sp + j * src_s * (int64_t)ses, des);
    }
    for (int i = last - 1; i >= 0; i--) { /* the next row's offsets */
      idx[i]++;
      doff += dst->strides[i];
      soff += sstr[i];
      if (idx[i] < dst->shape[i]) break;
      doff -= idx[i] * dst->strides[i];
      soff -= idx[i] * sstr[i];
      idx[i] = 0;
    }
  }
}

/* dst[i] = src[i] over dst's shape; src broadcast to it (strides 0 where
 * src has size 1 or is missing a leading dim). Converts dtypes. int64 to
 * int64 copies exactly (no round trip through double). */
void op_copy_into(kiln_tensor *dst, const kiln_tensor *src) {
  int nd = dst->ndim;
  int64_t n = core_numel(nd, dst->shape);
  int64_t sstr[KILN_MAX_DIMS];
  size_t des = kiln_dtype_size(dst->dtype);
  char *d = core_data(dst);
  const char *s = core_data(src);
  if (n == 0) return;
  if (dst->dtype == src->dtype && core_is_contiguous(dst) && core_is_contiguous(src) &&
      core_numel(src->ndim, src->shape) == n) {
    /* a large copy in 64-byte-aligned chunks, one per thread (a lazy
     * step's batch going to the device: 400 KB, about 2x faster on two;
     * one thread keeps one memcpy, which streams a large copy itself) */
    size_t bytes = (size_t)n * des;
    int64_t parts = bytes >= COPY_PARALLEL_BYTES && !omp_in_parallel() ? omp_get_max_threads() : 1;
    size_t chunk = (bytes / (size_t)parts + 63) / 64 * 64;
#pragma omp parallel for schedule(static) if (parts > 1)
    for (int64_t p = 0; p < parts; p++) {
      size_t lo = (size_t)p * chunk, hi = lo + chunk < bytes ? lo + chunk : bytes;
      if (lo < hi) memcpy(d + lo, s + lo, hi - lo);
    }
    return;
  }
  for (int i = 0; i < nd; i++) {
    int si = i - (nd - src->ndim);
    sstr[i] = (si < 0 || src->shape[si] == 1) ? 0 : src->strides[si];
  }
  if (nd == 0) {
    if (dst->dtype == src->dtype) memcpy(d, s, des);
    else core_convert_run(d, dst->dtype, s, src->dtype, 1, 1);
    return;
  }
  /* rows along the last dim (a broadcast bias, a transpose's columns),
   * typed loops, not an element-sized memcpy per element; a large copy's
   * rows are split over the threads (a transformer's head split and
   * merge, its chunk and cat: 1-3 MB each, which one thread copied while
   * the other waited) */
  int64_t rows = n / dst->shape[nd - 1];
  size_t bytes = (size_t)n * des;
  int64_t parts = bytes >= COPY_PARALLEL_BYTES && rows > 1 && !omp_in_parallel()
                      ? omp_get_max_threads()
                      : 1;
  if (parts > rows) parts = rows;
#pragma omp parallel for schedule(static) if (parts > 1)
  for (int64_t p = 0; p < parts; p++)
    copy_rows(dst, src, sstr, rows * p / parts, rows * (p + 1) / parts);
}

/* ScalarType codes as TorchScript prints them. */
int op_dtype_from_code(int64_t code, kiln_dtype *out) {
  switch (code) {
  case 0: *out = KILN_DTYPE_U8; return 0;
  case 1: *out = KILN_DTYPE_I8; return 0;
  case 2: *out = KILN_DTYPE_I16; return 0;
  case 3: *out = KILN_DTYPE_I32; return 0;
  case 4: *out = KILN_DTYPE_I64; return 0;
  case 5: *out = KILN_DTYPE_F16; return 0;
  case 6: *out = KILN_DTYPE_F32; return 0;
  case 7: *out = KILN_DTYPE_F64; return 0;
  case 11: *out = KILN_DTYPE_BOOL; return 0;
  case 15: *out = KILN_DTYPE_BF16; return 0;
  default:
    return core_error(KILN_ERR_UNSUPPORTED,
                      "dtype code %lld is not supported (kiln has 0 Byte, 1 Char, 2 Short, "
                      "3 Int, 4 Long, 5 Half, 6 Float, 7 Double, 11 Bool, 15 BFloat16)",
                      (long long)code);
  }
}

int op_dtype_code(kiln_dtype dt) {
  static const int codes[KILN_DTYPE_COUNT] = {6, 7, 4, 11, 3, 2, 1, 0, 5, 15};
  return codes[dt];
}

/* ---- contiguous ---------------------------------------------------------- */
int op_contiguous_infer(const op_val *a, int n, op_meta *o, int m) {
  if (op_arg_tensor("aten::contiguous", &a[0], NULL, NULL) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  return 1;
}
int op_contiguous_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *t = a[0].t;
  if (core_is_contiguous(t)) {
    o[0] = core_tensor_view(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
    return o[0] ? 0 : KILN_ERR_NOMEM;
  }
  o[0] = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (!o[0]) return KILN_ERR_NOMEM;
  op_copy_into(o[0], t);
  return 0;
}
int op_contiguous_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = g->grads[0];
  return 0;
}

/* ---- clone ------------------------------------------------------------------ */
int op_clone_infer(const op_val *a, int n, op_meta *o, int m) {
  if (op_arg_tensor("aten::clone", &a[0], NULL, NULL) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  return 1;
}
int op_clone_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  op_copy_into(o[0], a[0].t);
  return 0;
}
int op_clone_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = g->grads[0];
  return 0;
}

/* ---- to (dtype) ---------------------------------------------------------------- */
int op_to_infer(const op_val *a, int n, op_meta *o, int m) {
  kiln_dtype dt = KILN_DTYPE_F32;
  if (op_arg_tensor("aten::to", &a[0], NULL, NULL) < 0) return -1;
  if (a[1].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "aten::to: dtype must be a ScalarType code");
  if (op_dtype_from_code(a[1].i, &dt) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  o[0].dtype = dt;
  return 1;
}
int op_to_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *t = a[0].t;
  kiln_dtype dt = KILN_DTYPE_F32;
  op_dtype_from_code(a[1].i, &dt);
  bool copy = a[3].tag == OP_VAL_BOOL && a[3].b;
  if (dt == t->dtype && !copy) {
    o[0] = core_tensor_view(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
    return o[0] ? 0 : KILN_ERR_NOMEM;
  }
  o[0] = core_tensor_new(t->ndim, t->shape, dt);
  if (!o[0]) return KILN_ERR_NOMEM;
  op_copy_into(o[0], t);
  return 0;
}
int op_to_grad(op_grad_ctx *g) {
  if (g->needs[0]) g->grad_in[0] = kiln_to_dtype(g->grads[0], g->args[0].t->dtype);
  return 0;
}

/* ---- detach ------------------------------------------------------------------ */
int op_detach_infer(const op_val *a, int n, op_meta *o, int m) {
  if (op_arg_tensor("aten::detach", &a[0], NULL, NULL) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  return 1;
}
int op_detach_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *t = a[0].t;
  o[0] = core_tensor_view(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
  return o[0] ? 0 : KILN_ERR_NOMEM;
}

/* ---- zeros_like / ones_like ------------------------------------------------------ */
static int like_infer(const char *fn, const op_val *a, op_meta *o) {
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0) return -1;
  op_meta_of(a[0].t, &o[0]);
  if (a[1].tag == OP_VAL_INT) {
    kiln_dtype dt = KILN_DTYPE_F32;
    if (op_dtype_from_code(a[1].i, &dt) < 0) return -1;
    o[0].dtype = dt;
  }
  return 1;
}
int op_zeros_like_infer(const op_val *a, int n, op_meta *o, int m) {
  return like_infer("aten::zeros_like", a, o);
}
int op_zeros_like_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  memset(core_data(o[0]), 0, o[0]->storage->nbytes);
  return 0;
}
int op_ones_like_infer(const op_val *a, int n, op_meta *o, int m) {
  return like_infer("aten::ones_like", a, o);
}
int op_ones_like_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  int64_t k = kiln_tensor_numel(o[0]);
  char *d = core_data(o[0]);
  size_t es = kiln_dtype_size(o[0]->dtype);
  for (int64_t i = 0; i < k; i++) core_store_double(d + i * (int64_t)es, o[0]->dtype, 1.0);
  return 0;
}

/* ---- public API ------------------------------------------------------------------ */
kiln_tensor *kiln_contiguous(kiln_tensor *t) {
  return op_call1(KILN_OP_CONTIGUOUS, (op_val[]){OPV_T(t), OPV_I(0)}, 2);
}
kiln_tensor *kiln_clone(kiln_tensor *t) {
  return op_call1(KILN_OP_CLONE, (op_val[]){OPV_T(t), OPV_NONE}, 2);
}
kiln_tensor *kiln_to_dtype(kiln_tensor *t, kiln_dtype dt) {
  if ((unsigned)dt >= KILN_DTYPE_COUNT) {
    core_error(KILN_ERR_INVALID, "aten::to: invalid dtype %d", (int)dt);
    return NULL;
  }
  return op_call1(KILN_OP_TO, (op_val[]){OPV_T(t), OPV_I(op_dtype_code(dt)), OPV_B(false),
                                         OPV_B(false), OPV_NONE},
                  5);
}
kiln_tensor *kiln_detach(kiln_tensor *t) {
  return op_call1(KILN_OP_DETACH, (op_val[]){OPV_T(t)}, 1);
}

kiln_status kiln_copy_(kiln_tensor *dst, const kiln_tensor *src) {
  char a[160], b[160];
  int nd;
  int64_t shape[KILN_MAX_DIMS];
  if (!dst || !src) return core_error(KILN_ERR_INVALID, "copy_: NULL argument");
  if (op_grad_enabled && dst->requires_grad && op_is_leaf_hook && op_is_leaf_hook(dst))
    return core_error(KILN_ERR_INVALID,
                      "copy_: %s is a leaf that requires grad; update it under no_grad",
                      core_tensor_desc(dst, a, sizeof a));
  if ((dst->device == CORE_DEVICE_LAZY || src->device == CORE_DEVICE_LAZY) && op_lazy_copy_hook)
    return op_lazy_copy_hook(dst, src);
  if (op_broadcast_shapes("copy_", dst->ndim, dst->shape, src->ndim, src->shape, &nd,
                          shape) < 0 ||
      nd != dst->ndim || memcmp(shape, dst->shape, (size_t)nd * sizeof *shape))
    return core_error(KILN_ERR_INVALID, "copy_: source %s cannot be broadcast to %s",
                      core_tensor_desc(src, a, sizeof a), core_tensor_desc(dst, b, sizeof b));
  if (!core_data(dst) || (!core_data(src) && kiln_tensor_numel(src)))
    return core_error(KILN_ERR_STATE, "copy_: tensor has no data on this device");
  op_copy_into(dst, src);
  core_bump_version(dst);
  return KILN_OK;
}
