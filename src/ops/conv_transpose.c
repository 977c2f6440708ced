/* src/ops/conv_transpose.c: conv_transpose1d/2d/3d as decompositions into
 * conv2d, and conv1d/conv2d with a padding string ('valid', 'same').
 *
 * Note [Transposed convolution]: conv_transpose(x, w; stride s, padding p,
 * output_padding op, groups g, dilation d) is the input-gradient of a
 * convolution, which is itself a stride-1 convolution: insert s - 1 zeros
 * between the input's elements along each spatial dim, pad each side by
 * d (k - 1) - p (plus op on the far side; a negative amount crops), and
 * convolve with dilation d, groups g and the weight flipped along its
 * spatial dims with in/out channels swapped within each group ([Cin,
 * Cout/g, k...] -> [Cout, Cin/g, k...]). Output length (in - 1) s - 2p +
 * d (k - 1) + op + 1, as PyTorch's. 1-d runs as 2-d with a unit height;
 * 3-d sums one conv2d per depth tap over depth-shifted slices (depth
 * folded into the batch). conv2d's derivative gives the gradients. */
#include <string.h>

#include "op.h"

/* An int[nd] argument: nd ints, or one int (or [v]) for all. */
static int ints_nd(const char *fn, const char *what, const op_val *v, int nd, int64_t *out) {
  if (v->tag == OP_VAL_INT) {
    for (int i = 0; i < nd; i++) out[i] = v->i;
    return 0;
  }
  if (v->tag == OP_VAL_INTS && (v->ints.n == nd || v->ints.n == 1)) {
    for (int i = 0; i < nd; i++) out[i] = v->ints.v[v->ints.n == 1 ? 0 : i];
    return 0;
  }
  return core_error(KILN_ERR_INVALID, "%s: expected %s to be a single integer value or a list of "
                                      "%d values to match the convolution dimensions", fn, what, nd);
}

/* x [N, C, sp...] with s - 1 zeros between elements along spatial dim i. */
static kiln_tensor *dilate_dim(kiln_tensor *x, int dim, int64_t s) {
  int64_t n = x->shape[dim];
  if (s == 1 || n <= 1) return x;
  kiln_tensor *u = kiln_unsqueeze(x, dim + 1);
  if (!u) return NULL;
  int64_t padv[2 * KILN_MAX_DIMS] = {0};
  int after = u->ndim - 1 - (dim + 1); /* dims after the new one */
  padv[2 * after + 1] = s - 1;
  kiln_tensor *p = op_call1(KILN_OP_CONSTANT_PAD_ND,
                            (op_val[]){OPV_T(u), OPV_INTS(padv, 2 * (after + 1)), OPV_I(0)}, 3);
  if (!p) return NULL;
  int64_t sh[KILN_MAX_DIMS];
  memcpy(sh, x->shape, (size_t)x->ndim * sizeof *sh);
  sh[dim] = n * s;
  kiln_tensor *r = kiln_reshape(p, x->ndim, sh);
  return r ? kiln_narrow(r, dim, 0, (n - 1) * s + 1) : NULL;
}

static int conv_transpose(const char *fn, int nd, const op_val *a, kiln_tensor **outs) {
  kiln_tensor *x, *w, *b = NULL;
  char d[96], e[96];
  int rc;
  int64_t s[3], p[3], op[3], dl[3], g;
  if ((rc = op_arg_tensor(fn, &a[0], "input", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "weight", &w)) < 0)
    return rc;
  if (a[2].tag == OP_VAL_TENSOR) b = a[2].t;
  else if (a[2].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "%s: bias must be a tensor or None", fn);
  if ((rc = ints_nd(fn, "stride", &a[3], nd, s)) < 0 ||
      (rc = ints_nd(fn, "padding", &a[4], nd, p)) < 0 ||
      (rc = ints_nd(fn, "output_padding", &a[5], nd, op)) < 0 ||
      (rc = op_arg_int(fn, &a[6], "groups", &g)) < 0 ||
      (rc = ints_nd(fn, "dilation", &a[7], nd, dl)) < 0)
    return rc;
  if (x->dtype != w->dtype || (b && b->dtype != x->dtype) || x->dtype == KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID, "%s: expected input, weight and bias of one numeric dtype, "
                                        "got %s and %s", fn, core_tensor_desc(x, d, sizeof d),
                      core_tensor_desc(w, e, sizeof e));
  if (!core_dtype_is_floating(x->dtype)) {
    /* integer tensors (PyTorch computes them exactly): float64 is exact below 2^53 */
    op_val c[8];
    memcpy(c, a, sizeof c);
    c[0] = OPV_T(kiln_to_dtype(x, KILN_DTYPE_F64));
    c[1] = OPV_T(kiln_to_dtype(w, KILN_DTYPE_F64));
    if (b) c[2] = OPV_T(kiln_to_dtype(b, KILN_DTYPE_F64));
    if (c[0].tag != OP_VAL_TENSOR || c[1].tag != OP_VAL_TENSOR || (b && c[2].tag != OP_VAL_TENSOR))
      return op_failed_status();
    kiln_tensor *r[1];
    if ((rc = conv_transpose(fn, nd, c, r)) < 0) return rc;
    return op_out1(kiln_to_dtype(r[0], x->dtype), outs);
  }
  bool batched = x->ndim == nd + 2;
  if ((x->ndim != nd + 1 && !batched) || w->ndim != nd + 2)
    return core_error(KILN_ERR_INVALID, "%s: Expected %dD (unbatched) or %dD (batched) input and a "
                                        "%dD weight, but got input %s and weight %s", fn, nd + 1,
                      nd + 2, nd + 2, core_tensor_desc(x, d, sizeof d),
                      core_tensor_desc(w, e, sizeof e));
  if (g < 1) return core_error(KILN_ERR_INVALID, "%s: non-positive groups is not supported", fn);
  if (!batched && !(x = kiln_unsqueeze(x, 0))) return op_failed_status();
  int64_t cin = x->shape[1], cout = w->shape[1] * g;
  if (w->shape[0] != cin || cin % g)
    return core_error(KILN_ERR_INVALID, "%s: Given transposed=1, weight of size %s, expected input "
                                        "%s to have %lld channels, but got %lld channels instead", fn,
                      core_tensor_desc(w, e, sizeof e), core_tensor_desc(x, d, sizeof d),
                      (long long)w->shape[0], (long long)cin);
  if (b && (b->ndim != 1 || b->shape[0] != cout))
    return core_error(KILN_ERR_INVALID, "%s: expected bias of shape [%lld], got %s", fn,
                      (long long)cout, core_tensor_desc(b, d, sizeof d));
  int64_t pads[6] = {0};
  for (int i = 0; i < nd; i++) {
    int64_t k = w->shape[2 + i], in = x->shape[2 + i];
    if (s[i] < 1 || dl[i] < 1 || p[i] < 0 || op[i] < 0)
      return core_error(KILN_ERR_INVALID, "%s: stride and dilation must be positive, padding and "
                                          "output_padding non-negative", fn);
    if (op[i] >= s[i] && op[i] >= dl[i])
      return core_error(KILN_ERR_INVALID, "%s: output padding must be smaller than either stride or "
                                          "dilation, but got output_padding %lld, stride %lld, "
                                          "dilation %lld", fn, (long long)op[i], (long long)s[i],
                        (long long)dl[i]);
    int64_t o = (in - 1) * s[i] - 2 * p[i] + dl[i] * (k - 1) + op[i] + 1;
    if (in < 1 || o < 1)
      return core_error(KILN_ERR_INVALID, "%s: input size %lld gives output size %lld, which is too "
                                          "small", fn, (long long)in, (long long)o);
    int j = nd - 1 - i; /* constant_pad_nd counts from the last dim */
    pads[2 * j] = pads[2 * j + 1] = dl[i] * (k - 1) - p[i];
    pads[2 * j + 1] += op[i];
  }
  kiln_tensor *z = x;
  for (int i = 0; i < nd && z; i++) z = dilate_dim(z, 2 + i, s[i]);
  if (z) z = op_call1(KILN_OP_CONSTANT_PAD_ND, (op_val[]){OPV_T(z), OPV_INTS(pads, 2 * nd), OPV_I(0)}, 3);
  /* weight [Cin, Cout/g, k...] -> [g, Cin/g, Cout/g, k...] -> [Cout, Cin/g, k...], flipped */
  int64_t sh[KILN_MAX_DIMS], fl[3];
  sh[0] = g, sh[1] = cin / g, sh[2] = w->shape[1];
  for (int i = 0; i < nd; i++) sh[3 + i] = w->shape[2 + i], fl[i] = 2 + i;
  kiln_tensor *wt = kiln_transpose(kiln_reshape(w, nd + 3, sh), 1, 2);
  sh[0] = cout, sh[1] = cin / g;
  for (int i = 0; i < nd; i++) sh[2 + i] = w->shape[2 + i];
  wt = wt ? kiln_reshape(wt, nd + 2, sh) : NULL;
  wt = wt ? op_call1(KILN_OP_FLIP, (op_val[]){OPV_T(wt), OPV_INTS(fl, nd)}, 2) : NULL;
  if (!z || !wt) return op_failed_status();
  int64_t one[2] = {1, 1}, zero[2] = {0, 0}, dil[2];
  kiln_tensor *y = NULL;
  if (nd == 1) {
    dil[0] = 1, dil[1] = dl[0];
    y = op_call1(KILN_OP_CONV2D,
                 (op_val[]){OPV_T(kiln_unsqueeze(z, 2)), OPV_T(kiln_unsqueeze(wt, 2)), OPV_T(b),
                            OPV_INTS(one, 2), OPV_INTS(zero, 2), OPV_INTS(dil, 2), OPV_I(g)}, 7);
    y = y ? kiln_squeeze_dim(y, 2) : NULL;
  } else if (nd == 2) {
    y = op_call1(KILN_OP_CONV2D, (op_val[]){OPV_T(z), OPV_T(wt), OPV_T(b), OPV_INTS(one, 2),
                                            OPV_INTS(zero, 2), OPV_INTS(dl, 2), OPV_I(g)},
                 7);
  } else {
    /* depth folded into the batch: one conv2d per depth tap */
    int64_t N = z->shape[0], C = z->shape[1], D = z->shape[2], kd = w->shape[2];
    int64_t OD = D - dl[0] * (kd - 1), perm[5] = {0, 2, 1, 3, 4};
    kiln_tensor *zp = kiln_permute(z, 5, perm);
    dil[0] = dl[1], dil[1] = dl[2];
    for (int64_t t = 0; t < kd && zp; t++) {
      kiln_tensor *sl = kiln_narrow(zp, 1, t * dl[0], OD);
      int64_t s4[4] = {N * OD, C, z->shape[3], z->shape[4]};
      kiln_tensor *c = op_call1(KILN_OP_CONV2D,
                                (op_val[]){OPV_T(sl ? kiln_reshape(sl, 4, s4) : NULL),
                                           OPV_T(kiln_select(wt, 2, t)), OPV_T(t ? NULL : b),
                                           OPV_INTS(one, 2), OPV_INTS(zero, 2), OPV_INTS(dil, 2),
                                           OPV_I(g)},
                                7);
      y = !c ? NULL : y ? kiln_add(y, c) : c;
      if (!y) break;
    }
    if (y) {
      int64_t s5[5] = {N, OD, cout, y->shape[2], y->shape[3]};
      y = kiln_permute(kiln_reshape(y, 5, s5), 5, perm);
    }
  }
  if (y && !batched) y = kiln_squeeze_dim(y, 0);
  return op_out1(y, outs);
}

int op_conv_transpose1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return conv_transpose("aten::conv_transpose1d", 1, a, outs);
}
int op_conv_transpose2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return conv_transpose("aten::conv_transpose2d", 2, a, outs);
}
int op_conv_transpose3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return conv_transpose("aten::conv_transpose3d", 3, a, outs);
}

/* ---- conv1d/conv2d with a padding string ('valid', 'same') ----------------------------- */
/* 'same' pads d (k - 1) in all per dim, the odd one on the far side (as
 * PyTorch's _convolution_mode); unbatched and integer inputs are handled
 * here too (integers through float64, exact below 2^53). */
static int conv_padding(const char *fn, int nd, const op_val *a, kiln_tensor **outs) {
  kiln_tensor *x, *w, *b = a[2].tag == OP_VAL_TENSOR ? a[2].t : NULL;
  char d[96], e[96];
  int rc;
  int64_t s[2], dl[2], g;
  if ((rc = op_arg_tensor(fn, &a[0], "input", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "weight", &w)) < 0 ||
      (rc = ints_nd(fn, "stride", &a[3], nd, s)) < 0 ||
      (rc = ints_nd(fn, "dilation", &a[5], nd, dl)) < 0 ||
      (rc = op_arg_int(fn, &a[6], "groups", &g)) < 0)
    return rc;
  if (a[4].tag != OP_VAL_STR)
    return core_error(KILN_ERR_INVALID, "%s: padding must be a string here", fn);
  bool same = !strcmp(a[4].s, "same");
  if (!same && strcmp(a[4].s, "valid"))
    return core_error(KILN_ERR_INVALID, "%s: Invalid padding string: '%s'", fn, a[4].s);
  if (x->dtype != w->dtype || (b && b->dtype != x->dtype) || x->dtype == KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID, "%s: expected input, weight and bias of one numeric dtype, "
                                        "got %s and %s", fn, core_tensor_desc(x, d, sizeof d),
                      core_tensor_desc(w, e, sizeof e));
  bool batched = x->ndim == nd + 2;
  if ((x->ndim != nd + 1 && !batched) || w->ndim != nd + 2)
    return core_error(KILN_ERR_INVALID, "%s: Expected %dD (unbatched) or %dD (batched) input and a "
                                        "%dD weight, but got input %s and weight %s", fn, nd + 1,
                      nd + 2, nd + 2, core_tensor_desc(x, d, sizeof d),
                      core_tensor_desc(w, e, sizeof e));
  kiln_dtype dt = x->dtype;
  if (!core_dtype_is_floating(dt)) {
    x = kiln_to_dtype(x, KILN_DTYPE_F64);
    w = kiln_to_dtype(w, KILN_DTYPE_F64);
    b = b ? kiln_to_dtype(b, KILN_DTYPE_F64) : NULL;
    if (!x || !w || (a[2].tag == OP_VAL_TENSOR && !b)) return op_failed_status();
  }
  if (!batched && !(x = kiln_unsqueeze(x, 0))) return op_failed_status();
  int64_t pads[4] = {0}, zero[2] = {0, 0};
  if (same)
    for (int i = 0; i < nd; i++) {
      if (s[i] != 1)
        return core_error(KILN_ERR_INVALID, "%s: padding='same' is not supported for strided "
                                            "convolutions", fn);
      int64_t tot = dl[i] * (w->shape[2 + i] - 1), j = nd - 1 - i;
      pads[2 * j] = tot / 2;
      pads[2 * j + 1] = tot - tot / 2;
    }
  if (same) x = op_call1(KILN_OP_CONSTANT_PAD_ND, (op_val[]){OPV_T(x), OPV_INTS(pads, 2 * nd), OPV_I(0)}, 3);
  if (!x) return op_failed_status();
  kiln_tensor *y = op_call1(nd == 1 ? KILN_OP_CONV1D : KILN_OP_CONV2D,
                            (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_INTS(s, nd),
                                       OPV_INTS(zero, nd), OPV_INTS(dl, nd), OPV_I(g)}, 7);
  if (y && !batched) y = kiln_squeeze_dim(y, 0);
  if (y && y->dtype != dt) y = kiln_to_dtype(y, dt);
  return op_out1(y, outs);
}
int op_conv1d_padding_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return conv_padding("aten::conv1d", 1, a, outs);
}
int op_conv2d_padding_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return conv_padding("aten::conv2d", 2, a, outs);
}
