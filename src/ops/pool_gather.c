/* src/ops/pool_gather.c: max pooling with indices in 1-d and 3-d
 * (max_pool1d_with_indices, max_pool3d(_with_indices)), adaptive max
 * pooling (1-d, 2-d, 3-d), max_unpool2d/3d, avg_pool3d and im2col
 * (F.unfold), as decompositions.
 *
 * Note [Pooling by gathering]: a max pool reads, for each output cell, K
 * input positions (its window; a shorter adaptive window repeats its first
 * position, which changes neither the max nor the first argmax). The
 * input, padded with -inf, is flattened over its spatial dims and
 * index_select picks the O*K positions ([N, C, O, K]); max over K gives
 * the values and the argmax k, and a table maps (o, k) to the unpadded
 * flat input index PyTorch returns. index_select and max give the
 * derivative. im2col gathers the same way from a zero-padded input.
 * avg_pool3d is avg_pool2d over (H, W), then over D (Note [Separable
 * pooling] in src/ops/pool.c). */
#include <math.h>
#include <string.h>

#include "op.h"

typedef struct {
  int nd;
  int64_t in[3], k[3], s[3], p[3], d[3], o[3];
  bool adaptive;
} win;

static int ints_nd(const char *fn, const char *what, const op_val *v, int nd, int64_t *out,
                   const int64_t *dflt) {
  if (v->tag == OP_VAL_INT) {
    for (int i = 0; i < nd; i++) out[i] = v->i;
    return 0;
  }
  if (v->tag == OP_VAL_INTS && (v->ints.n == nd || v->ints.n == 1)) {
    for (int i = 0; i < nd; i++) out[i] = v->ints.v[v->ints.n == 1 ? 0 : i];
    return 0;
  }
  if (dflt && (v->tag == OP_VAL_NONE || (v->tag == OP_VAL_INTS && v->ints.n == 0))) {
    memcpy(out, dflt, (size_t)nd * sizeof *out);
    return 0;
  }
  return core_error(KILN_ERR_INVALID, "%s: %s must either be a single int, or a tuple of %d ints",
                    fn, what, nd);
}

/* x as [N, C, spatial...] (an unbatched input gets N = 1); *batched says which */
static int pool_input(const char *fn, const op_val *a, int nd, kiln_tensor **x, bool *batched,
                      bool float_only) {
  char d[96];
  int rc = op_arg_tensor(fn, a, "self", x);
  if (rc < 0) return rc;
  if ((*x)->ndim != nd + 1 && (*x)->ndim != nd + 2)
    return core_error(KILN_ERR_INVALID, "%s: Expected %dD or %dD input tensor, but got %s", fn,
                      nd + 1, nd + 2, core_tensor_desc(*x, d, sizeof d));
  if (float_only && !core_dtype_is_floating((*x)->dtype))
    return core_error(KILN_ERR_INVALID, "%s: \"%s\" not implemented for %s", fn, fn + 6,
                      core_tensor_desc(*x, d, sizeof d));
  for (int i = 1; i < (*x)->ndim; i++)
    if ((*x)->shape[i] == 0)
      return core_error(KILN_ERR_INVALID, "%s: Expected input to have non-zero size for non-batch "
                                          "dimensions, but got %s", fn,
                        core_tensor_desc(*x, d, sizeof d));
  *batched = (*x)->ndim == nd + 2;
  if (!*batched && !(*x = kiln_unsqueeze(*x, 0))) return op_failed_status();
  return 0;
}

/* window geometry of a (non-adaptive) pool: PyTorch's pooling_output_shape */
static int window_geom(const char *fn, win *w, bool ceil_mode) {
  for (int i = 0; i < w->nd; i++) {
    if (w->k[i] <= 0 || w->s[i] <= 0 || w->d[i] <= 0)
      return core_error(KILN_ERR_INVALID, "%s: kernel_size, stride and dilation must be greater "
                                          "than zero", fn);
    if (w->p[i] < 0 || w->p[i] > w->k[i] / 2)
      return core_error(KILN_ERR_INVALID, "%s: pad should be at most half of kernel size, but got "
                                          "pad=%lld and kernel_size=%lld", fn, (long long)w->p[i],
                        (long long)w->k[i]);
    int64_t num = w->in[i] + 2 * w->p[i] - w->d[i] * (w->k[i] - 1) - 1;
    if (num < 0)
      return core_error(KILN_ERR_INVALID, "%s: Given input size %lld, the calculated output size "
                                          "is too small", fn, (long long)w->in[i]);
    int64_t o = (ceil_mode ? (num + w->s[i] - 1) / w->s[i] : num / w->s[i]) + 1;
    if (ceil_mode && (o - 1) * w->s[i] >= w->in[i] + w->p[i]) o--;
    w->o[i] = o;
  }
  return 0;
}

/* Positions of output cell o's k-th tap along dim i in the unpadded input
 * (-1: padding). */
static int64_t tap(const win *w, int i, int64_t o, int64_t k) {
  if (w->adaptive) {
    int64_t lo = (o * w->in[i]) / w->o[i], hi = ((o + 1) * w->in[i] + w->o[i] - 1) / w->o[i];
    return lo + (k < hi - lo ? k : 0);
  }
  int64_t j = o * w->s[i] - w->p[i] + k * w->d[i];
  return j >= 0 && j < w->in[i] ? j : -1;
}

/* Note [Pooling by gathering]: values and int64 indices of x [N, C, sp...]. */
static int max_gather(kiln_tensor *x, const win *w, kiln_tensor **vals, kiln_tensor **idx) {
  int nd = w->nd;
  int64_t O = 1, K = 1, P = 1;
  for (int i = 0; i < nd; i++) {
    if (w->adaptive) {
      int64_t km = 0;
      for (int64_t o = 0; o < w->o[i]; o++) {
        int64_t lo = (o * w->in[i]) / w->o[i], hi = ((o + 1) * w->in[i] + w->o[i] - 1) / w->o[i];
        km = hi - lo > km ? hi - lo : km;
      }
      ((win *)w)->k[i] = km;
    }
    O *= w->o[i];
    K *= w->k[i];
    P *= w->in[i];
  }
  /* a -inf cell at the end stands for every padding position */
  int64_t OK = O * K, N = x->shape[0], C = x->shape[1];
  if (OK > ((int64_t)1 << 40)) return core_error(KILN_ERR_INVALID, "pool: windows too large");
  kiln_tensor *gi = kiln_zeros(1, &OK, KILN_DTYPE_I64), *ti = kiln_zeros(1, &OK, KILN_DTYPE_I64);
  if (!gi || !ti) return op_failed_status();
  int64_t *g = kiln_tensor_data(gi), *t = kiln_tensor_data(ti);
  for (int64_t o = 0; o < O; o++) {
    int64_t oc[3] = {0, 0, 0}, r = o;
    for (int i = nd - 1; i >= 0; i--) oc[i] = r % w->o[i], r /= w->o[i];
    for (int64_t k = 0; k < K; k++) {
      int64_t kc[3] = {0, 0, 0}, q = k, flat = 0;
      for (int i = nd - 1; i >= 0; i--) kc[i] = q % w->k[i], q /= w->k[i];
      for (int i = 0; i < nd && flat >= 0; i++) {
        int64_t j = tap(w, i, oc[i], kc[i]);
        flat = j < 0 ? -1 : flat * w->in[i] + j;
      }
      g[o * K + k] = flat < 0 ? P : flat;
      t[o * K + k] = flat < 0 ? 0 : flat;
    }
  }
  int64_t s3[3] = {N, C, P}, pad[2] = {0, 1}, s4[4] = {N, C, O, K};
  kiln_tensor *xf = op_call1(KILN_OP_CONSTANT_PAD_ND,
                             (op_val[]){OPV_T(kiln_reshape(x, 3, s3)), OPV_INTS(pad, 2),
                                        OPV_F(-INFINITY)}, 3);
  kiln_tensor *sel = xf ? kiln_reshape(kiln_index_select(xf, 2, gi), 4, s4) : NULL;
  kiln_tensor *mo[2];
  int n = sel ? op_call(KILN_OP_MAX_DIM, (op_val[]){OPV_T(sel), OPV_I(3), OPV_B(false)}, 3, mo, 2)
              : -1;
  if (n < 2) return op_failed_status();
  /* the flat input index of (o, argmax k): t[o K + k] */
  int64_t s2[2] = {O, K};
  kiln_tensor *base = kiln_arange(0, (double)OK, (double)K, KILN_DTYPE_I64);
  kiln_tensor *flat = base ? kiln_add(mo[1], base) : NULL;
  kiln_tensor *ix = flat ? op_call1(KILN_OP_TAKE, (op_val[]){OPV_T(kiln_reshape(ti, 2, s2)),
                                                             OPV_T(flat)}, 2)
                         : NULL;
  int64_t sh[5] = {N, C};
  for (int i = 0; i < nd; i++) sh[2 + i] = w->o[i];
  *vals = kiln_reshape(mo[0], nd + 2, sh);
  *idx = ix ? kiln_reshape(ix, nd + 2, sh) : NULL;
  return *vals && *idx ? 0 : op_failed_status();
}

static int finish2(kiln_tensor *v, kiln_tensor *i, bool batched, kiln_tensor **outs, int max) {
  if (!batched) {
    v = kiln_squeeze_dim(v, 0);
    i = i ? kiln_squeeze_dim(i, 0) : NULL;
  }
  return op_out2(v, i, outs, max);
}

/* max_poolNd_with_indices(self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode) */
static int max_pool_nd(const char *fn, int nd, const op_val *a, kiln_tensor **outs, int max,
                       bool with_indices) {
  kiln_tensor *x, *v, *ix;
  bool batched;
  int rc;
  win w = {.nd = nd};
  static const int64_t zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
  if ((rc = pool_input(fn, &a[0], nd, &x, &batched, false)) < 0 ||
      (rc = ints_nd(fn, "kernel_size", &a[1], nd, w.k, NULL)) < 0 ||
      (rc = ints_nd(fn, "stride", &a[2], nd, w.s, w.k)) < 0 ||
      (rc = ints_nd(fn, "padding", &a[3], nd, w.p, zero)) < 0 ||
      (rc = ints_nd(fn, "dilation", &a[4], nd, w.d, one)) < 0)
    return rc;
  for (int i = 0; i < nd; i++) w.in[i] = x->shape[2 + i];
  if ((rc = window_geom(fn, &w, a[5].tag == OP_VAL_BOOL && a[5].b)) < 0) return rc;
  if (!core_dtype_is_floating(x->dtype)) {
    /* integer inputs: the float64 pool is exact for |x| < 2^53 */
    kiln_tensor *xd = kiln_to_dtype(x, KILN_DTYPE_F64);
    if (!xd || (rc = max_gather(xd, &w, &v, &ix)) < 0) return op_failed_status();
    v = kiln_to_dtype(v, x->dtype);
  } else if ((rc = max_gather(x, &w, &v, &ix)) < 0) {
    return rc;
  }
  if (!with_indices) return op_out1(v && !batched ? kiln_squeeze_dim(v, 0) : v, outs);
  return finish2(v, ix, batched, outs, max);
}
int op_max_pool1d_with_indices_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return max_pool_nd("aten::max_pool1d_with_indices", 1, a, outs, max, true);
}
int op_max_pool3d_with_indices_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return max_pool_nd("aten::max_pool3d_with_indices", 3, a, outs, max, true);
}
int op_max_pool3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return max_pool_nd("aten::max_pool3d", 3, a, outs, max, false);
}

/* adaptive_max_poolNd(self, output_size) -> (values, indices) */
static int adaptive_max(const char *fn, int nd, const op_val *a, kiln_tensor **outs, int max) {
  kiln_tensor *x, *v, *ix;
  bool batched;
  int rc;
  win w = {.nd = nd, .adaptive = true};
  if ((rc = pool_input(fn, &a[0], nd, &x, &batched, true)) < 0 ||
      (rc = ints_nd(fn, "output_size", &a[1], nd, w.o, NULL)) < 0)
    return rc;
  for (int i = 0; i < nd; i++) {
    w.in[i] = x->shape[2 + i];
    if (w.o[i] <= 0)
      return core_error(KILN_ERR_INVALID, "%s: output_size must be positive, got %lld", fn,
                        (long long)w.o[i]);
  }
  if ((rc = max_gather(x, &w, &v, &ix)) < 0) return rc;
  return finish2(v, ix, batched, outs, max);
}
int op_adaptive_max_pool1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return adaptive_max("aten::adaptive_max_pool1d", 1, a, outs, max);
}
int op_adaptive_max_pool2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return adaptive_max("aten::adaptive_max_pool2d", 2, a, outs, max);
}
int op_adaptive_max_pool3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return adaptive_max("aten::adaptive_max_pool3d", 3, a, outs, max);
}

/* max_unpoolNd: zeros of output_size with self scattered at indices */
static int max_unpool(const char *fn, int nd, const op_val *a, kiln_tensor **outs) {
  kiln_tensor *x, *ix;
  char d[96], e[96];
  int64_t os[3];
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "indices", &ix)) < 0 ||
      (rc = ints_nd(fn, "output_size", &a[2], nd, os, NULL)) < 0)
    return rc;
  if (a[2].tag != OP_VAL_INTS || a[2].ints.n != nd)
    return core_error(KILN_ERR_INVALID, "%s: There should be exactly %d elements (depth, height, "
                                        "width) in output_size", fn, nd);
  if (ix->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: elements in indices should be type int64 but got: %s",
                      fn, core_tensor_desc(ix, d, sizeof d));
  if ((x->ndim != nd + 1 && x->ndim != nd + 2) || ix->ndim != x->ndim ||
      memcmp(x->shape, ix->shape, (size_t)x->ndim * sizeof *x->shape))
    return core_error(KILN_ERR_INVALID, "%s: Expected shape of indices to be same as that of the "
                                        "input tensor (%s) but got indices tensor with shape: %s",
                      fn, core_tensor_desc(x, d, sizeof d), core_tensor_desc(ix, e, sizeof e));
  int lead = x->ndim - nd;
  int64_t P = 1, L = 1, sh[3] = {1, 1, 1}, out[5];
  for (int i = 0; i < lead; i++) sh[i] = x->shape[i];
  for (int i = 0; i < nd; i++) P *= os[i], L *= x->shape[lead + i];
  for (int i = 0; i < x->ndim - nd; i++) out[i] = x->shape[i];
  for (int i = 0; i < nd; i++) out[lead + i] = os[i];
  /* PyTorch checks every index against the output plane */
  kiln_tensor *ixc = kiln_contiguous(ix);
  if (!ixc) return op_failed_status();
  const int64_t *q = kiln_tensor_data(ixc);
  int64_t cnt = core_numel(ix->ndim, ix->shape);
  for (int64_t i = 0; q && i < cnt; i++)
    if (q[i] < 0 || q[i] >= P)
      return core_error(KILN_ERR_INVALID, "%s: Found an invalid max index: %lld (output volumes are "
                                          "of size %lld)", fn, (long long)q[i], (long long)P);
  int64_t s3[3] = {sh[0], lead == 2 ? sh[1] : 1, L}, z3[3] = {s3[0], s3[1], P};
  kiln_tensor *z = kiln_zeros(3, z3, x->dtype);
  kiln_tensor *y = z ? op_call1(KILN_OP_SCATTER, (op_val[]){OPV_T(z), OPV_I(2),
                                                            OPV_T(kiln_reshape(ix, 3, s3)),
                                                            OPV_T(kiln_reshape(x, 3, s3))}, 4)
                     : NULL;
  return op_out1(y ? kiln_reshape(y, x->ndim, out) : NULL, outs);
}
int op_max_unpool2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return max_unpool("aten::max_unpool2d", 2, a, outs);
}
int op_max_unpool3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return max_unpool("aten::max_unpool3d", 3, a, outs);
}

/* avg_pool3d(self, kernel_size, stride=[], padding=0, ceil_mode, count_include_pad, divisor_override) */
int op_avg_pool3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::avg_pool3d";
  kiln_tensor *x;
  if (a[0].tag == OP_VAL_TENSOR && !core_dtype_is_floating(a[0].t->dtype) &&
      a[0].t->dtype != KILN_DTYPE_BOOL)
    return op_avg_pool_int(a, n, outs, max, op_avg_pool3d_decompose);
  bool batched;
  int64_t k[3], s[3], p[3];
  static const int64_t zero[3] = {0, 0, 0};
  int rc;
  if ((rc = pool_input(fn, &a[0], 3, &x, &batched, true)) < 0 ||
      (rc = ints_nd(fn, "kernel_size", &a[1], 3, k, NULL)) < 0 ||
      (rc = ints_nd(fn, "stride", &a[2], 3, s, k)) < 0 ||
      (rc = ints_nd(fn, "padding", &a[3], 3, p, zero)) < 0)
    return rc;
  if (a[6].tag == OP_VAL_INT && a[6].i == 0)
    return core_error(KILN_ERR_INVALID, "%s: divisor must be not zero", fn);
  int64_t N = x->shape[0], C = x->shape[1], D = x->shape[2], H = x->shape[3], W = x->shape[4];
  int64_t s4[4] = {N * C, D, H, W};
  /* over (H, W): [N C, D, H, W] is a batch of D-channel images */
  kiln_tensor *y = op_call1(KILN_OP_AVG_POOL2D,
                            (op_val[]){OPV_T(kiln_reshape(x, 4, s4)), OPV_INTS(k + 1, 2),
                                       OPV_INTS(s + 1, 2), OPV_INTS(p + 1, 2), a[4], a[5], a[6]},
                            7);
  if (!y) return op_failed_status();
  int64_t OH = y->shape[2], OW = y->shape[3];
  /* over D: [N C, 1, D, OH OW] pooled with a (kD, 1) window */
  int64_t s4b[4] = {N * C, 1, D, OH * OW}, kd[2] = {k[0], 1}, sd[2] = {s[0], 1}, pd[2] = {p[0], 0};
  y = op_call1(KILN_OP_AVG_POOL2D,
               (op_val[]){OPV_T(kiln_reshape(y, 4, s4b)), OPV_INTS(kd, 2), OPV_INTS(sd, 2),
                          OPV_INTS(pd, 2), a[4], a[5],
                          a[6].tag == OP_VAL_INT ? OPV_I(1) : OPV_NONE},
               7);
  if (!y) return op_failed_status();
  int64_t s5[5] = {N, C, y->shape[2], OH, OW};
  y = kiln_reshape(y, 5, s5);
  return op_out1(y && !batched ? kiln_squeeze_dim(y, 0) : y, outs);
}

/* im2col(self [N, C, H, W] or [C, H, W], kernel_size, dilation, padding, stride)
 *   -> [N, C kh kw, L], rows (c, ki, kj), columns the L output positions */
int op_im2col_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::im2col";
  kiln_tensor *x;
  bool batched;
  int rc;
  win w = {.nd = 2};
  if ((rc = pool_input(fn, &a[0], 2, &x, &batched, false)) < 0 ||
      (rc = ints_nd(fn, "kernel_size", &a[1], 2, w.k, NULL)) < 0 ||
      (rc = ints_nd(fn, "dilation", &a[2], 2, w.d, NULL)) < 0 ||
      (rc = ints_nd(fn, "padding", &a[3], 2, w.p, NULL)) < 0 ||
      (rc = ints_nd(fn, "stride", &a[4], 2, w.s, NULL)) < 0)
    return rc;
  w.in[0] = x->shape[2];
  w.in[1] = x->shape[3];
  for (int i = 0; i < 2; i++) {
    if (w.k[i] <= 0 || w.d[i] <= 0 || w.s[i] <= 0 || w.p[i] < 0)
      return core_error(KILN_ERR_INVALID, "%s: kernel size, dilation and stride should be greater "
                                          "than zero, padding non-negative", fn);
    int64_t num = w.in[i] + 2 * w.p[i] - w.d[i] * (w.k[i] - 1) - 1;
    if (num < 0)
      return core_error(KILN_ERR_INVALID, "%s: Given input with spatial size (%lld, %lld), "
                                          "calculated shape of the array of sliding blocks is "
                                          "non-positive", fn, (long long)w.in[0],
                        (long long)w.in[1]);
    w.o[i] = num / w.s[i] + 1;
  }
  int64_t K = w.k[0] * w.k[1], L = w.o[0] * w.o[1], KL = K * L, P = w.in[0] * w.in[1];
  kiln_tensor *gi = kiln_zeros(1, &KL, KILN_DTYPE_I64);
  if (!gi) return op_failed_status();
  int64_t *g = kiln_tensor_data(gi);
  for (int64_t k = 0; k < K; k++)
    for (int64_t l = 0; l < L; l++) {
      int64_t i = tap(&w, 0, l / w.o[1], k / w.k[1]), j = tap(&w, 1, l % w.o[1], k % w.k[1]);
      g[k * L + l] = i < 0 || j < 0 ? P : i * w.in[1] + j;
    }
  int64_t N = x->shape[0], C = x->shape[1], s3[3] = {N, C, P}, pad[2] = {0, 1};
  int64_t out[3] = {N, C * K, L};
  kiln_tensor *xf = op_call1(KILN_OP_CONSTANT_PAD_ND,
                             (op_val[]){OPV_T(kiln_reshape(x, 3, s3)), OPV_INTS(pad, 2), OPV_I(0)},
                             3);
  kiln_tensor *y = xf ? kiln_reshape(kiln_index_select(xf, 2, gi), 3, out) : NULL;
  return op_out1(y && !batched ? kiln_squeeze_dim(y, 0) : y, outs);
}
