/* src/ops/softmax_backward.c: aten::_softmax_backward_data, softmax's
 * gradient dx = y * (g - sum(g * y, dim)) in one kernel, and its own
 * derivative (softmax's double backward).
 *
 * Why a kernel: written with public ops (mul, sum, sub, mul) the gradient
 * is four passes over a tensor of the scores' size and three of them
 * allocate one; attention's [B, H, T, T] scores made that about a sixth
 * of an attention step's time forward + backward (the sdpa benchmark).
 * Here each row is read twice (the dot product, then the result) while it
 * is in L1, and one tensor is written. Same formula and the same roundings
 * as the composite: the products g * y rounded to the dtype, summed in
 * double (vector lanes by the CPU level's width, as the forward's sums:
 * within rounding between levels), the sum rounded, then y * (g - s). */
#include <string.h>

#include "op.h"

#define BW_W 1024 /* columns per block when the dim is not the last */

#define DEF_SMB(SUF, T)                                                                   \
  CORE_CLONES(bw_row_##SUF, (const T *g, const T *y, T *o, int64_t n), (g, y, o, n)) {    \
    double s = 0;                                                                         \
    _Pragma("omp simd reduction(+ : s)")                                                  \
    for (int64_t j = 0; j < n; j++) s += (double)(T)(g[j] * y[j]);                        \
    T st = (T)s;                                                                          \
    _Pragma("omp simd")                                                                   \
    for (int64_t j = 0; j < n; j++) o[j] = y[j] * (g[j] - st);                            \
  }                                                                                       \
  CORE_CLONES(bw_cols_##SUF, (const T *g, const T *y, T *o, int64_t n, int64_t inner,     \
                              int64_t w), (g, y, o, n, inner, w)) {                       \
    double s[BW_W];                                                                       \
    T st[BW_W];                                                                           \
    for (int64_t k = 0; k < w; k++) s[k] = 0;                                             \
    for (int64_t j = 0; j < n; j++) {                                                     \
      const T *gj = g + j * inner, *yj = y + j * inner;                                   \
      _Pragma("omp simd")                                                                 \
      for (int64_t k = 0; k < w; k++) s[k] += (double)(T)(gj[k] * yj[k]);                 \
    }                                                                                     \
    for (int64_t k = 0; k < w; k++) st[k] = (T)s[k];                                      \
    for (int64_t j = 0; j < n; j++) {                                                     \
      const T *gj = g + j * inner, *yj = y + j * inner;                                   \
      T *oj = o + j * inner;                                                              \
      _Pragma("omp simd")                                                                 \
      for (int64_t k = 0; k < w; k++) oj[k] = yj[k] * (gj[k] - st[k]);                    \
    }                                                                                     \
  }

DEF_SMB(f32, float)
DEF_SMB(f64, double)

#define FN "aten::_softmax_backward_data"

/* _softmax_backward_data(Tensor grad_output, Tensor output, int dim,
 * ScalarType input_dtype) -> Tensor: grad_output and output of one
 * floating dtype and one shape; the result has output's shape and
 * input_dtype (a floating type). */
int op_softmax_backward_data_infer(const op_val *a, int n, op_meta *o, int m) {
  char d[160], e[160];
  kiln_dtype dt;
  if (a[0].tag != OP_VAL_TENSOR || a[1].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: expected tensors grad_output and output, got %s and %s",
                      FN, op_val_desc(&a[0], d, sizeof d), op_val_desc(&a[1], e, sizeof e));
  const kiln_tensor *g = a[0].t, *y = a[1].t;
  if (!core_dtype_is_floating(y->dtype) || g->dtype != y->dtype || g->ndim != y->ndim ||
      memcmp(g->shape, y->shape, (size_t)y->ndim * sizeof *y->shape))
    return core_error(KILN_ERR_INVALID,
                      "%s: expected grad_output and output of one floating dtype and shape, "
                      "got %s and %s",
                      FN, core_tensor_desc(g, d, sizeof d), core_tensor_desc(y, e, sizeof e));
  if (a[2].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: dim must be an int, got %s", FN,
                      op_val_desc(&a[2], d, sizeof d));
  if (core_wrap_dim(FN, a[2].i, y->ndim) < 0) return -1;
  if (a[3].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: input_dtype must be a ScalarType code, got %s", FN,
                      op_val_desc(&a[3], d, sizeof d));
  if (op_dtype_from_code(a[3].i, &dt) < 0) return -1;
  if (!core_dtype_is_floating(dt))
    return core_error(KILN_ERR_INVALID, "%s: input_dtype must be floating point, got %s", FN,
                      kiln_dtype_name(dt));
  op_meta_of(y, &o[0]);
  o[0].dtype = dt;
  return 1;
}

/* t itself when contiguous, else a contiguous copy in *own (NULL on OOM). */
static const kiln_tensor *contig(const kiln_tensor *t, kiln_tensor **own) {
  *own = NULL;
  if (core_is_contiguous(t)) return t;
  if (!(*own = core_tensor_new(t->ndim, t->shape, t->dtype))) return NULL;
  op_copy_into(*own, t);
  return *own;
}

int op_softmax_backward_data_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *go_own = NULL, *y_own = NULL, *res = NULL;
  int rc = 0;
  const kiln_tensor *g = contig(a[0].t, &go_own), *y = contig(a[1].t, &y_own);
  kiln_tensor *out = o[0];
  if (g && y && out->dtype != y->dtype) /* computed in output's dtype, then converted */
    out = res = core_tensor_new(y->ndim, y->shape, y->dtype);
  if (!g || !y || !out) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int dim = core_wrap_dim("", a[2].i, y->ndim);
  int64_t outer = 1, len = y->ndim ? y->shape[dim] : 1, inner = 1;
  for (int d = 0; d < y->ndim; d++) {
    if (d < dim) outer *= y->shape[d];
    if (d > dim) inner *= y->shape[d];
  }
  int64_t es = (int64_t)kiln_dtype_size(y->dtype), total = outer * len * inner;
  const char *gp = core_data(g), *yp = core_data(y);
  char *op = core_data(out);
  bool f32 = y->dtype == KILN_DTYPE_F32;
  if (total == 0) goto convert;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (total >= OP_PARALLEL_MIN)
    for (int64_t r = 0; r < outer; r++) {
      int64_t off = r * len * es;
      if (f32) bw_row_f32((const float *)(gp + off), (const float *)(yp + off), (float *)(op + off), len);
      else bw_row_f64((const double *)(gp + off), (const double *)(yp + off), (double *)(op + off), len);
    }
  } else {
    int64_t nb = (inner + BW_W - 1) / BW_W;
#pragma omp parallel for schedule(static) if (total >= OP_PARALLEL_MIN)
    for (int64_t it = 0; it < outer * nb; it++) {
      int64_t r = it / nb, k0 = it % nb * BW_W, w = inner - k0 < BW_W ? inner - k0 : BW_W;
      int64_t off = (r * len * inner + k0) * es;
      if (f32)
        bw_cols_f32((const float *)(gp + off), (const float *)(yp + off), (float *)(op + off), len, inner, w);
      else
        bw_cols_f64((const double *)(gp + off), (const double *)(yp + off), (double *)(op + off), len, inner, w);
    }
  }
convert:
  if (res) op_copy_into(o[0], res);
done:
  kiln_release(go_own);
  kiln_release(y_own);
  kiln_release(res);
  return rc;
}

/* With h the gradient of dx = y (g - S), S = sum(g y):
 *   d g = y (h - sum(h y))           (this op again, on h)
 *   d y = h (g - S) - g sum(h y). */
int op_softmax_backward_data_grad(op_grad_ctx *c) {
  kiln_tensor *h = c->grads[0], *g = c->args[0].t, *y = c->args[1].t;
  int64_t dim = c->args[2].i;
  if (!h) return 0;
  if (h->dtype != y->dtype && !(h = kiln_to_dtype(h, y->dtype))) return -1;
  if (c->needs[0]) {
    kiln_tensor *r = op_call1(KILN_OP_SOFTMAX_BACKWARD_DATA,
                              (op_val[]){OPV_T(h), OPV_T(y), OPV_I(dim), OPV_I(op_dtype_code(g->dtype))}, 4);
    if (op_grad_put(c, 0, r) < 0) return -1;
  }
  if (c->needs[1]) {
    kiln_tensor *s = kiln_sum(kiln_mul(g, y), &dim, 1, true);
    kiln_tensor *t = kiln_sum(kiln_mul(h, y), &dim, 1, true);
    kiln_tensor *r = s && t ? kiln_sub(kiln_mul(h, kiln_sub(g, s)), kiln_mul(g, t)) : NULL;
    if (op_grad_put(c, 1, r) < 0) return -1;
  }
  return 0;
}
