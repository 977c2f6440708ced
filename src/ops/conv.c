/* src/ops/conv.c: conv2d and its backward op (their arguments and shapes;
 * the im2col + GEMM kernels are conv_gemm.c's), and max pooling with
 * indices and its backward op. NCHW, float32/float64.
 *
 * Note [Conv layout]: for one sample, im2col writes col[C*KH*KW, OH*OW]
 * (row (c, ki, kj), column (oh, ow); padding reads as 0), so the
 * convolution is out[O, OH*OW] = W[O, C*KH*KW] @ col, the weight gradient
 * is gW += gout @ col^T, and the input gradient is col2im(W^T @ gout). A
 * 1x1 kernel with stride 1 and no padding needs no col: col is the input. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "conv.h"
#include "conv_dw.h"

/* ---- shared argument parsing ----------------------------------------------- */

/* An int[2] argument: two values, one value used for both, or a bare int.
 * An empty list gives def (pooling's stride defaults to the kernel). */
static int int2_arg(const char *fn, const char *what, const op_val *v, const int64_t *def,
                    int64_t out[2]) {
  char d[160];
  if (v->tag == OP_VAL_INT) {
    out[0] = out[1] = v->i;
    return 0;
  }
  if (v->tag == OP_VAL_INTS && v->ints.n == 2) {
    out[0] = v->ints.v[0];
    out[1] = v->ints.v[1];
    return 0;
  }
  if (v->tag == OP_VAL_INTS && v->ints.n == 1) {
    out[0] = out[1] = v->ints.v[0];
    return 0;
  }
  if (def && ((v->tag == OP_VAL_INTS && v->ints.n == 0) || v->tag == OP_VAL_NONE)) {
    out[0] = def[0];
    out[1] = def[1];
    return 0;
  }
  return core_error(KILN_ERR_INVALID, "%s: %s must be one or two ints, got %s", fn, what,
                    op_val_desc(v, d, sizeof d));
}

static int need_float(const char *fn, const char *what, const op_val *v, int ndim) {
  char d[160];
  if (v->tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: %s must be a tensor, got %s", fn, what,
                      op_val_desc(v, d, sizeof d));
  if (ndim && v->t->ndim != ndim)
    return core_error(KILN_ERR_INVALID, "%s: expected %s to be %d-D, got %s", fn, what, ndim,
                      op_val_desc(v, d, sizeof d));
  if (!core_dtype_is_floating(v->t->dtype))
    return core_error(KILN_ERR_INVALID, "%s: %s must be Float or Double, got %s", fn, what,
                      op_val_desc(v, d, sizeof d));
  return 0;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }


/* Output size of a window; < 0 with a message when it would be empty. */
static int win_out(const char *fn, const kiln_tensor *x, win_geom *g) {
  int64_t eh = g->dh * (g->KH - 1) + 1, ew = g->dw * (g->KW - 1) + 1;
  char d[160];
  if (g->H + 2 * g->ph < eh || g->W + 2 * g->pw < ew)
    return core_error(KILN_ERR_INVALID,
                      "%s: input %s padded to %lldx%lld is smaller than the (dilated) kernel "
                      "%lldx%lld",
                      fn, core_tensor_desc(x, d, sizeof d), (long long)(g->H + 2 * g->ph),
                      (long long)(g->W + 2 * g->pw), (long long)eh, (long long)ew);
  g->OH = (g->H + 2 * g->ph - eh) / g->sh + 1;
  g->OW = (g->W + 2 * g->pw - ew) / g->sw + 1;
  return 0;
}

static int win_params(const char *fn, const op_val *stride, const op_val *pad,
                      const op_val *dil, const int64_t *stride_def, win_geom *g) {
  int64_t s[2], p[2], d[2];
  if (int2_arg(fn, "stride", stride, stride_def, s) < 0 ||
      int2_arg(fn, "padding", pad, NULL, p) < 0 || int2_arg(fn, "dilation", dil, NULL, d) < 0)
    return -1;
  if (s[0] < 1 || s[1] < 1 || p[0] < 0 || p[1] < 0 || d[0] < 1 || d[1] < 1)
    return core_error(KILN_ERR_INVALID,
                      "%s: need stride >= 1, padding >= 0, dilation >= 1; got stride "
                      "[%lld, %lld], padding [%lld, %lld], dilation [%lld, %lld]",
                      fn, (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
                      (long long)d[0], (long long)d[1]);
  g->sh = s[0], g->sw = s[1], g->ph = p[0], g->pw = p[1], g->dh = d[0], g->dw = d[1];
  return 0;
}

/* t itself when contiguous, else a new contiguous copy (*own set). */
static const kiln_tensor *contig(const kiln_tensor *t, kiln_tensor **own) {
  *own = NULL;
  if (core_is_contiguous(t)) return t;
  *own = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (!*own) return NULL;
  op_copy_into(*own, t);
  return *own;
}

/* ---- conv2d ------------------------------------------------------------------- */

/* Validates a conv2d-style call: input [N, G C, H, W], weight [O, C, KH,
 * KW], stride/padding/dilation, groups G dividing the channels. Fills g
 * (g->C is the per-group input channels). */
static int conv_geom(const char *fn, const kiln_tensor *x, const kiln_tensor *w,
                     const op_val *stride, const op_val *pad, const op_val *dil,
                     const op_val *groups, win_geom *g) {
  char d[160], e[160];
  if (groups->tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: groups must be an int, got %s", fn,
                      op_val_desc(groups, d, sizeof d));
  if (groups->i < 1)
    return core_error(KILN_ERR_INVALID, "%s: non-positive groups is not supported, got %lld", fn,
                      (long long)groups->i);
  if (x->dtype != w->dtype)
    return core_error(KILN_ERR_INVALID,
                      "%s: expected input and weight to have the same dtype, got %s and %s",
                      fn, core_tensor_desc(x, d, sizeof d), core_tensor_desc(w, e, sizeof e));
  if (win_params(fn, stride, pad, dil, NULL, g) < 0) return -1;
  g->G = groups->i;
  g->N = x->shape[0], g->C = x->shape[1], g->H = x->shape[2], g->W = x->shape[3];
  g->O = w->shape[0], g->KH = w->shape[2], g->KW = w->shape[3];
  if (g->O % g->G)
    return core_error(KILN_ERR_INVALID, "%s: expected weight %s to have a multiple of groups=%lld "
                      "output channels", fn, core_tensor_desc(w, d, sizeof d), (long long)g->G);
  if (w->shape[1] * g->G != g->C)
    return core_error(KILN_ERR_INVALID,
                      "%s: weight %s%s expects input with %lld channels, got %s (%lld channels)",
                      fn, core_tensor_desc(w, d, sizeof d), g->G > 1 ? " with groups > 1" : "",
                      (long long)(w->shape[1] * g->G), core_tensor_desc(x, e, sizeof e),
                      (long long)g->C);
  g->C /= g->G;
  if (g->C == 0 || g->KH == 0 || g->KW == 0)
    return core_error(KILN_ERR_INVALID, "%s: empty channels or kernel: input %s, weight %s",
                      fn, core_tensor_desc(x, d, sizeof d), core_tensor_desc(w, e, sizeof e));
  if (win_out(fn, x, g) < 0) return -1;
  if (g->C * g->KH * g->KW > INT_MAX || g->OH * g->OW > INT_MAX || g->O > INT_MAX)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: sizes beyond 2^31-1 are not supported", fn);
  return 0;
}

int op_conv_geom(const char *fn, const kiln_tensor *x, const kiln_tensor *w,
                 const op_val *stride, const op_val *pad, const op_val *dil,
                 const op_val *groups, win_geom *g) {
  return conv_geom(fn, x, w, stride, pad, dil, groups, g);
}

int op_conv2d_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::conv2d";
  char d[160], e[160];
  win_geom g;
  if (need_float(fn, "input", &a[0], 4) < 0 || need_float(fn, "weight", &a[1], 4) < 0)
    return -1;
  if (conv_geom(fn, a[0].t, a[1].t, &a[3], &a[4], &a[5], &a[6], &g) < 0) return -1;
  if (a[2].tag != OP_VAL_NONE) {
    if (need_float(fn, "bias", &a[2], 1) < 0) return -1;
    if (a[2].t->shape[0] != g.O || a[2].t->dtype != a[1].t->dtype)
      return core_error(KILN_ERR_INVALID,
                        "%s: bias %s does not match weight %s (expected %s[%lld])", fn,
                        core_tensor_desc(a[2].t, d, sizeof d),
                        core_tensor_desc(a[1].t, e, sizeof e), kiln_dtype_name(a[1].t->dtype),
                        (long long)g.O);
  }
  o[0].dtype = a[0].t->dtype;
  o[0].ndim = 4;
  o[0].shape[0] = g.N, o[0].shape[1] = g.O, o[0].shape[2] = g.OH, o[0].shape[3] = g.OW;
  return 1;
}

int op_conv2d_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  win_geom g;
  kiln_tensor *xo = NULL, *wo = NULL, *bo = NULL;
  int rc = 0;
  conv_geom("aten::conv2d", a[0].t, a[1].t, &a[3], &a[4], &a[5], &a[6], &g);
  if (g.N == 0 || g.O == 0) return 0;
  const kiln_tensor *x = contig(a[0].t, &xo), *w = contig(a[1].t, &wo);
  const kiln_tensor *b = a[2].tag == OP_VAL_TENSOR ? contig(a[2].t, &bo) : NULL;
  if (!x || !w || (a[2].tag == OP_VAL_TENSOR && !b)) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  if (op_conv_dw_applies(&g)) { /* Note [Depthwise kernels] in conv_depthwise.c */
    rc = op_conv_dw_forward(x->dtype, &g, core_data(x), core_data(w), b ? core_data(b) : NULL,
                            core_data(o[0]));
    goto done;
  }
  /* Note [Conv batching] in conv_gemm.c */
  const kiln_tensor *prev = op_wino_weight_swap(w); /* Note [Winograd weights cache] */
  rc = op_conv_forward(x->dtype, &g, core_data(x), core_data(w), b ? core_data(b) : NULL,
                       core_data(o[0]));
  op_wino_weight_swap(prev);
done:
  kiln_release(xo);
  kiln_release(wo);
  kiln_release(bo);
  return rc;
}

/* Grads through convolution_backward (an internal op without a public
 * wrapper). Its outputs do not record history: conv2d is OPF_NO_DOUBLE. */
int op_conv2d_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0], *outs[3] = {0};
  bool has_bias = g->args[2].tag == OP_VAL_TENSOR;
  if (!go) return 0;
  int64_t bias_sizes[1] = {g->args[1].t->shape[0]}, zero2[2] = {0, 0};
  int64_t mask[3] = {g->needs[0], g->needs[1], has_bias && g->needs[2]};
  op_val args[11] = {OPV_T(go),      g->args[0],       g->args[1],
                     has_bias ? OPV_INTS(bias_sizes, 1) : OPV_NONE,
                     g->args[3],     g->args[4],       g->args[5],
                     OPV_B(false),   OPV_INTS(zero2, 2), g->args[6],
                     OPV_INTS(mask, 3)};
  int n = op_call(KILN_OP_CONVOLUTION_BACKWARD, args, 11, outs, 3);
  if (n < 0) return n;
  for (int i = 0; i < 3; i++)
    if (mask[i]) g->grad_in[i] = outs[i];
  return 0;
}

/* ---- convolution_backward ------------------------------------------------------ */

/* output_mask as bool[3]: an int list of 0/1 (or absent: all true). */
static int mask_arg(const op_val *v, bool mask[3]) {
  char d[160];
  if (v->tag == OP_VAL_NONE) {
    mask[0] = mask[1] = mask[2] = true;
    return 0;
  }
  if (v->tag != OP_VAL_INTS || v->ints.n != 3)
    return core_error(KILN_ERR_INVALID,
                      "aten::convolution_backward: output_mask must be bool[3], got %s",
                      op_val_desc(v, d, sizeof d));
  for (int i = 0; i < 3; i++) mask[i] = v->ints.v[i] != 0;
  return 0;
}

int op_convolution_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::convolution_backward";
  char d[160], e[160];
  bool mask[3];
  win_geom g;
  if (need_float(fn, "grad_output", &a[0], 4) < 0 || need_float(fn, "input", &a[1], 4) < 0 ||
      need_float(fn, "weight", &a[2], 4) < 0 || mask_arg(&a[10], mask) < 0)
    return -1;
  if (a[7].tag == OP_VAL_BOOL && a[7].b)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: transposed convolution is not supported", fn);
  if (a[8].tag == OP_VAL_INTS)
    for (int i = 0; i < a[8].ints.n; i++)
      if (a[8].ints.v[i] != 0)
        return core_error(KILN_ERR_UNSUPPORTED, "%s: output_padding must be 0", fn);
  if (conv_geom(fn, a[1].t, a[2].t, &a[4], &a[5], &a[6], &a[9], &g) < 0) return -1;
  const kiln_tensor *go = a[0].t;
  if (go->dtype != a[1].t->dtype || go->shape[0] != g.N || go->shape[1] != g.O ||
      go->shape[2] != g.OH || go->shape[3] != g.OW)
    return core_error(KILN_ERR_INVALID,
                      "%s: grad_output %s does not match the output %s[%lld, %lld, %lld, "
                      "%lld] of input %s",
                      fn, core_tensor_desc(go, d, sizeof d), kiln_dtype_name(a[1].t->dtype),
                      (long long)g.N, (long long)g.O, (long long)g.OH, (long long)g.OW,
                      core_tensor_desc(a[1].t, e, sizeof e));
  if (a[3].tag == OP_VAL_INTS && (a[3].ints.n != 1 || a[3].ints.v[0] != g.O))
    return core_error(KILN_ERR_INVALID, "%s: bias_sizes %s do not match %lld output channels",
                      fn, op_val_desc(&a[3], d, sizeof d), (long long)g.O);
  op_meta_of(a[1].t, &o[0]);
  op_meta_of(a[2].t, &o[1]);
  o[2].dtype = a[1].t->dtype;
  o[2].ndim = 1;
  o[2].shape[0] = g.O;
  return 3;
}

/* Masked-out outputs are returned as zeros of their shapes. */
int op_convolution_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  win_geom g;
  bool mask[3];
  kiln_tensor *goo = NULL, *xo = NULL, *wo = NULL;
  int rc = 0;
  mask_arg(&a[10], mask);
  conv_geom("aten::convolution_backward", a[1].t, a[2].t, &a[4], &a[5], &a[6], &a[9], &g);
  kiln_dtype dt = a[1].t->dtype;
  int64_t L = g.OH * g.OW;
  /* the kernels below add into o[0] and o[1], but for those that write
   * every element (the memsets were 1.5% of resnet18's training step) */
  bool live = g.N > 0 && g.O > 0, dw = live && op_conv_dw_applies(&g);
  bool gx_set = live && !dw && mask[0] && op_conv_bwd_data_applies(&g);
  bool gw_set = live && !dw && mask[1] && op_conv_wgrad_avx512_applies(dt, &g);
  for (int i = 0; i < 3; i++)
    if (!(i == 0 && gx_set) && !(i == 1 && gw_set))
      memset(core_data(o[i]), 0, o[i]->storage->nbytes);
  if (!live) return 0;
  const kiln_tensor *go = contig(a[0].t, &goo), *x = contig(a[1].t, &xo),
                    *w = contig(a[2].t, &wo);
  if (!go || !x || !w) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  const char *god = core_data(go), *xd = core_data(x), *wd = core_data(w);
  if (gw_set) { /* Note [Implicit weight gradient] in conv_avx512.c */
    if ((rc = op_conv_wgrad_avx512(&g, (const float *)xd, (const float *)god,
                                   core_data(o[1]))) < 0)
      goto done;
    mask[1] = false;
  }
  if (dw) { /* Note [Depthwise kernels] in conv_depthwise.c */
    rc = op_conv_dw_backward(dt, &g, mask, xd, wd, god, core_data(o[0]), core_data(o[1]),
                             core_data(o[2]));
    goto done;
  }
  if (mask[2]) { /* gb[o] = sum over samples and positions */
    for (int64_t i = 0; i < g.N; i++)
      for (int64_t c = 0; c < g.O; c++) {
        double s = 0;
        if (dt == KILN_DTYPE_F32)
          for (int64_t l = 0; l < L; l++) s += ((const float *)god)[(i * g.O + c) * L + l];
        else
          for (int64_t l = 0; l < L; l++) s += ((const double *)god)[(i * g.O + c) * L + l];
        if (dt == KILN_DTYPE_F32) ((float *)core_data(o[2]))[c] += (float)s;
        else ((double *)core_data(o[2]))[c] += s;
      }
  }
  if (mask[0] && op_conv_bwd_data_applies(&g)) { /* Note [Backward data as a conv] */
    if ((rc = op_conv_bwd_data(dt, &g, wd, god, core_data(o[0]))) < 0) goto done;
    bool rest[3] = {false, mask[1], false};
    rc = op_conv_backward(dt, &g, rest, xd, wd, god, core_data(o[0]), core_data(o[1]));
    goto done;
  }
  if (mask[0] && op_conv_bwd_stride_applies(dt, &g)) { /* Note [Strided backward data by phases] */
    if ((rc = op_conv_bwd_stride(&g, (const float *)wd, (const float *)god, core_data(o[0]))) < 0)
      goto done;
    mask[0] = false;
  }
  rc = op_conv_backward(dt, &g, mask, xd, wd, god, core_data(o[0]), core_data(o[1]));
done:
  kiln_release(goo);
  kiln_release(xo);
  kiln_release(wo);
  return rc;
}

/* ---- max pooling -------------------------------------------------------------------- */

/* Validates a max_pool2d-style call on self ([C, H, W] or [N, C, H, W]);
 * args are (kernel_size, stride, padding, dilation, ceil_mode). Planes are
 * N*C; g->N = 1 and g->C = planes. */
static int pool_geom(const char *fn, const op_val *self, const op_val *a, win_geom *g) {
  char d[160];
  int64_t k[2];
  if (need_float(fn, "self", self, 0) < 0) return -1;
  const kiln_tensor *x = self->t;
  if (x->ndim != 3 && x->ndim != 4)
    return core_error(KILN_ERR_INVALID, "%s: expected a 3-D or 4-D input, got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (int2_arg(fn, "kernel_size", &a[0], NULL, k) < 0) return -1;
  if (k[0] < 1 || k[1] < 1)
    return core_error(KILN_ERR_INVALID, "%s: kernel_size must be positive, got [%lld, %lld]",
                      fn, (long long)k[0], (long long)k[1]);
  if (win_params(fn, &a[1], &a[2], &a[3], k, g) < 0) return -1;
  if (g->ph > k[0] / 2 || g->pw > k[1] / 2)
    return core_error(KILN_ERR_INVALID,
                      "%s: padding [%lld, %lld] must be at most half the kernel size [%lld, %lld]",
                      fn, (long long)g->ph, (long long)g->pw, (long long)k[0], (long long)k[1]);
  int nd = x->ndim;
  g->N = 1;
  g->C = nd == 4 ? x->shape[0] * x->shape[1] : x->shape[0];
  g->H = x->shape[nd - 2], g->W = x->shape[nd - 1];
  g->KH = k[0], g->KW = k[1], g->O = g->C;
  if (win_out(fn, x, g) < 0) return -1;
  if (a[4].tag == OP_VAL_BOOL && a[4].b) {
    /* ceil_mode: one more window where a partial one remains, as long as
     * it starts inside the input or its left padding (the kernel clips
     * windows to the input) */
    int64_t eh = g->dh * (g->KH - 1) + 1, ew = g->dw * (g->KW - 1) + 1;
    g->OH = ceil_div(g->H + 2 * g->ph - eh, g->sh) + 1;
    g->OW = ceil_div(g->W + 2 * g->pw - ew, g->sw) + 1;
    if ((g->OH - 1) * g->sh >= g->H + g->ph) g->OH--;
    if ((g->OW - 1) * g->sw >= g->W + g->pw) g->OW--;
  }
  return 0;
}

static void pool_out_meta(const kiln_tensor *x, const win_geom *g, kiln_dtype dt, op_meta *o) {
  op_meta_of(x, o);
  o->dtype = dt;
  o->shape[x->ndim - 2] = g->OH;
  o->shape[x->ndim - 1] = g->OW;
}

int op_max_pool2d_with_indices_infer(const op_val *a, int n, op_meta *o, int m) {
  win_geom g;
  if (pool_geom("aten::max_pool2d_with_indices", &a[0], a + 1, &g) < 0) return -1;
  pool_out_meta(a[0].t, &g, a[0].t->dtype, &o[0]);
  pool_out_meta(a[0].t, &g, KILN_DTYPE_I64, &o[1]);
  return 2;
}

/* Like PyTorch: the window's first in-range element starts the max, and a
 * NaN wins (max propagates NaN). Indices are flat into each H*W plane.
 * Per output row: rows h0..h1 clipped once; float32 rows at the AVX2 and
 * AVX-512 levels take pool_max_simd.c's kernel for the columns whose
 * window lies inside the row, and this loop for the edges. */
#define DEF_MAXPOOL(NAME, T, VEC)                                                       \
  static void NAME(const T *x, const win_geom *g, T *out, int64_t *idx) {               \
    int64_t HW = g->H * g->W, OHW = g->OH * g->OW;                                      \
    int64_t work = g->C * OHW * g->KH * g->KW;                                          \
    int64_t span = (g->KW - 1) * g->dw, ow_a = (g->pw + g->sw - 1) / g->sw;             \
    int64_t ow_b = g->W - 1 - span + g->pw >= 0 ? (g->W - 1 - span + g->pw) / g->sw + 1 \
                                               : 0;                                     \
    if (ow_b > g->OW) ow_b = g->OW;                                                     \
    if (ow_b < ow_a) ow_b = ow_a;                                                       \
    void (*vec)(const T *, const win_geom *, int64_t, int64_t, int64_t, int64_t, T *,  \
                int64_t *) = HW < INT32_MAX && (g->sw == 1 || g->sw == 2) ? VEC : NULL; \
    if (!vec) ow_a = ow_b = g->OW;                                                      \
    _Pragma("omp parallel for schedule(static) if (work >= OP_PARALLEL_MIN)")            \
    for (int64_t p = 0; p < g->C; p++) {                                                \
      const T *xp = x + p * HW;                                                         \
      for (int64_t oh = 0; oh < g->OH; oh++) {                                          \
        int64_t h0 = oh * g->sh - g->ph, h1 = h0 + (g->KH - 1) * g->dh + 1;             \
        if (h1 > g->H) h1 = g->H;                                                       \
        while (h0 < 0) h0 += g->dh;                                                     \
        T *o = out + p * OHW + oh * g->OW;                                              \
        int64_t *ix = idx + p * OHW + oh * g->OW;                                       \
        if (vec && ow_a < ow_b) vec(xp, g, h0, h1, ow_a, ow_b, o, ix);                  \
        for (int64_t ow = 0; ow < g->OW; ow++) {                                        \
          if (ow == ow_a) ow = ow_b;                                                    \
          if (ow >= g->OW) break;                                                       \
          int64_t w0 = ow * g->sw - g->pw, w1 = w0 + span + 1;                          \
          if (w1 > g->W) w1 = g->W;                                                     \
          while (w0 < 0) w0 += g->dw;                                                   \
          int64_t best_i = h0 * g->W + w0;                                              \
          T best = -INFINITY;                                                           \
          for (int64_t ih = h0; ih < h1; ih += g->dh)                                   \
            for (int64_t iw = w0; iw < w1; iw += g->dw) {                               \
              T v = xp[ih * g->W + iw];                                                 \
              if (v > best || isnan(v)) {                                               \
                best = v;                                                               \
                best_i = ih * g->W + iw;                                                \
              }                                                                         \
            }                                                                           \
          o[ow] = best;                                                                 \
          ix[ow] = best_i;                                                              \
        }                                                                               \
      }                                                                                 \
    }                                                                                   \
  }

/* The level's row kernel for float32, NULL at the baseline. */
static void (*maxpool_row_f32(void))(const float *, const win_geom *, int64_t, int64_t,
                                     int64_t, int64_t, float *, int64_t *) {
  switch (core_cpu_level()) {
  case CORE_CPU_AVX512: return op_maxpool_row_f32_avx512;
  case CORE_CPU_AVX2: return op_maxpool_row_f32_avx2;
  default: return NULL;
  }
}

DEF_MAXPOOL(maxpool_f32, float, maxpool_row_f32())
DEF_MAXPOOL(maxpool_f64, double, NULL)

int op_max_pool2d_with_indices_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  win_geom g;
  kiln_tensor *xo = NULL;
  pool_geom("aten::max_pool2d_with_indices", &a[0], a + 1, &g);
  const kiln_tensor *x = contig(a[0].t, &xo);
  if (!x) return KILN_ERR_NOMEM;
  if (x->dtype == KILN_DTYPE_F32)
    maxpool_f32(core_data(x), &g, core_data(o[0]), core_data(o[1]));
  else
    maxpool_f64(core_data(x), &g, core_data(o[0]), core_data(o[1]));
  kiln_release(xo);
  return 0;
}

/* The gradient scatters into the argmax positions: the backward op needs
 * the indices (a saved output) and only self's shape (OPF_NO_SAVE_IN). */
int op_max_pool2d_with_indices_grad(op_grad_ctx *g) {
  if (!g->grads[0] || !g->needs[0]) return 0;
  op_val args[8] = {OPV_T(g->grads[0]), g->args[0], g->args[1], g->args[2],
                    g->args[3],         g->args[4], g->args[5], OPV_T(g->outs[1])};
  g->grad_in[0] = op_call1(KILN_OP_MAX_POOL2D_BACKWARD, args, 8);
  return g->grad_in[0] ? 0 : -1;
}

/* max_pool2d keeps only the values of max_pool2d_with_indices (Note
 * [Decompose scope] in matmul.c). */
int op_max_pool2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max_outs) {
  kiln_tensor *r[2] = {0};
  win_geom g;
  /* nothing needs the indices (no gradient, not recorded lazily): the
   * values alone (Note [Separable max] in pool_max.c) */
  const kiln_tensor *x = a[0].tag == OP_VAL_TENSOR ? a[0].t : NULL;
  if (x && x->device == CORE_DEVICE_CPU && !(op_grad_enabled && x->requires_grad) &&
      (x->dtype == KILN_DTYPE_F32 || x->dtype == KILN_DTYPE_F64) &&
      kiln_tensor_numel(x) > 0 && max_outs >= 1 &&
      pool_geom("aten::max_pool2d", &a[0], a + 1, &g) == 0 && g.dh == 1 && g.dw == 1) {
    op_meta m;
    kiln_tensor *xo = NULL;
    pool_out_meta(x, &g, x->dtype, &m);
    const kiln_tensor *xc = contig(x, &xo);
    kiln_tensor *y = xc ? core_tensor_new(m.ndim, m.shape, m.dtype) : NULL;
    int rc = y ? op_max_pool2d_values(x->dtype, &g, core_data(xc), core_data(y))
               : core_error(KILN_ERR_NOMEM, "aten::max_pool2d: out of memory");
    kiln_release(xo);
    if (rc < 0) {
      kiln_release(y);
      return rc;
    }
    if (core_scope_reserve(1) < 0) {
      kiln_release(y);
      return KILN_ERR_NOMEM;
    }
    outs[0] = core_autorelease(y);
    return 1;
  }
  kiln_scope_begin();
  int k = op_call(KILN_OP_MAX_POOL2D_WITH_INDICES, a, n, r, 2);
  kiln_tensor *v = k >= 1 ? kiln_retain(r[0]) : NULL;
  kiln_scope_end(); /* releases the indices */
  if (k < 0) return k;
  outs[0] = core_autorelease(v);
  return outs[0] ? 1 : KILN_ERR_NOMEM;
}

/* ---- max_pool2d_with_indices_backward ---------------------------------------------- */

int op_max_pool2d_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::max_pool2d_with_indices_backward";
  char d[160], e[160], f[160];
  win_geom g;
  op_meta want;
  if (need_float(fn, "grad_output", &a[0], 0) < 0 || pool_geom(fn, &a[1], a + 2, &g) < 0)
    return -1;
  if (a[7].tag != OP_VAL_TENSOR || a[7].t->dtype != KILN_DTYPE_I64)
    return core_error(KILN_ERR_INVALID, "%s: indices must be a Long tensor, got %s", fn,
                      op_val_desc(&a[7], d, sizeof d));
  pool_out_meta(a[1].t, &g, a[1].t->dtype, &want);
  const kiln_tensor *go = a[0].t, *ix = a[7].t;
  if (go->ndim != want.ndim || memcmp(go->shape, want.shape, (size_t)want.ndim * 8) ||
      ix->ndim != want.ndim || memcmp(ix->shape, want.shape, (size_t)want.ndim * 8) ||
      go->dtype != a[1].t->dtype)
    return core_error(KILN_ERR_INVALID,
                      "%s: grad_output %s and indices %s must match the pooled output of %s",
                      fn, core_tensor_desc(go, d, sizeof d), core_tensor_desc(ix, e, sizeof e),
                      core_tensor_desc(a[1].t, f, sizeof f));
  op_meta_of(a[1].t, &o[0]);
  return 1;
}

int op_max_pool2d_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  win_geom g;
  kiln_tensor *goo = NULL, *ixo = NULL;
  pool_geom("aten::max_pool2d_with_indices_backward", &a[1], a + 2, &g);
  const kiln_tensor *go = contig(a[0].t, &goo), *ix = contig(a[7].t, &ixo);
  int rc = 0;
  if (!go || !ix) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  memset(core_data(o[0]), 0, o[0]->storage->nbytes);
  int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  const int64_t *id = core_data(ix);
  bool f32 = o[0]->dtype == KILN_DTYPE_F32;
  void *gx = core_data(o[0]);
  const void *gd = core_data(go);
#pragma omp parallel for schedule(static) if (g.C * OHW >= OP_PARALLEL_MIN)
  for (int64_t p = 0; p < g.C; p++)
    for (int64_t j = 0; j < OHW; j++) {
      int64_t t = id[p * OHW + j];
      if (t < 0 || t >= HW) continue; /* not from max_pool2d_with_indices */
      if (f32) ((float *)gx)[p * HW + t] += ((const float *)gd)[p * OHW + j];
      else ((double *)gx)[p * HW + t] += ((const double *)gd)[p * OHW + j];
    }
done:
  kiln_release(goo);
  kiln_release(ixo);
  return rc;
}

/* ---- public API ----------------------------------------------------------------------- */

/* conv2d: stride NULL means 1, padding NULL means 0; dilation 1, groups 1.
 * New reference (in the current scope) or NULL with the error set. */
kiln_tensor *kiln_conv2d(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b,
                         const int64_t stride[2], const int64_t padding[2]) {
  static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  return op_call1(KILN_OP_CONV2D,
                  (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_INTS(stride ? stride : one, 2),
                             OPV_INTS(padding ? padding : zero, 2), OPV_INTS(one, 2), OPV_I(1)},
                  7);
}
/* max_pool2d: stride NULL means the kernel size, padding NULL means 0;
 * dilation 1, ceil_mode off. New reference or NULL with the error set. */
kiln_tensor *kiln_max_pool2d(kiln_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                             const int64_t padding[2]) {
  static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  if (!kernel) {
    core_error(KILN_ERR_INVALID, "aten::max_pool2d: kernel_size is NULL");
    return NULL;
  }
  return op_call1(KILN_OP_MAX_POOL2D,
                  (op_val[]){OPV_T(x), OPV_INTS(kernel, 2), OPV_INTS(stride, stride ? 2 : 0),
                             OPV_INTS(padding ? padding : zero, 2), OPV_INTS(one, 2),
                             OPV_B(false)},
                  6);
}
