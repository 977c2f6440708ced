/* src/ops/attention.c: PyTorch 1.13's fused transformer kernels, the ones
 * nn.MultiheadAttention and nn.TransformerEncoderLayer call on their eval
 * fast path (aten::_native_multi_head_attention,
 * aten::_transformer_encoder_layer_fwd), written as decompositions into
 * linear, bmm, masked_fill, softmax and layer_norm: their derivatives come
 * from those ops (PyTorch's kernels have none), lazy tensors record them
 * and the executor runs them like any decomposition.
 *
 * Note [Fast-path masks]: the semantics are the CPU kernels' of 1.13, not
 * the Python slow path's. A mask of another dtype is converted to bool
 * (nonzero = masked: a float mask's -inf and also its nonzero finite
 * values mask, 0 keeps); a 2-D mask is a key padding mask [B, S] whatever
 * mask_type says, and any other mask must have the scores' shape
 * [B, H, T, S]; a mask needs a mask_type, and mask_type 0 (an attention
 * mask) is refused on CPU, as PyTorch refuses it. A row whose keys are all
 * masked gives NaN, as PyTorch's softmax over -inf does. need_weights =
 * false returns an empty [0] tensor where PyTorch returns an undefined
 * one (kiln's op outputs are always tensors). */
#include <math.h>

#include "op.h"

#define MHA "aten::_native_multi_head_attention"
#define TEL "aten::_transformer_encoder_layer_fwd"

static int bad(const char *fn, const char *what, kiln_tensor *t) {
  char d[64];
  return core_error(KILN_ERR_INVALID, "%s: %s, got %s", fn, what, core_tensor_desc(t, d, sizeof d));
}

/* The projection weights: W [3D, D], b [3D], Wo [D, D], bo [D]. */
typedef struct attn_w {
  kiln_tensor *w, *b, *wo, *bo;
} attn_w;

static int check_weights(const char *fn, const op_val *a, int64_t D, attn_w *w) {
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "qkv_weight", &w->w)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "qkv_bias", &w->b)) < 0 ||
      (rc = op_arg_tensor(fn, &a[2], "proj_weight", &w->wo)) < 0 ||
      (rc = op_arg_tensor(fn, &a[3], "proj_bias", &w->bo)) < 0)
    return rc;
  if (w->w->ndim != 2 || w->w->shape[0] != 3 * D || w->w->shape[1] != D)
    return bad(fn, "expected `qkv_weight` of shape [3 * embed_dim, embed_dim]", w->w);
  if (w->b->ndim != 1 || w->b->shape[0] != 3 * D)
    return bad(fn, "expected `qkv_bias` of shape [3 * embed_dim]", w->b);
  if (w->wo->ndim != 2 || w->wo->shape[0] != D || w->wo->shape[1] != D)
    return bad(fn, "expected `proj_weight` of shape [embed_dim, embed_dim]", w->wo);
  if (w->bo->ndim != 1 || w->bo->shape[0] != D)
    return bad(fn, "expected `proj_bias` of shape [embed_dim]", w->bo);
  return 0;
}

/* [B, T, D] -> [B * H, T, D / H] (head-major, as the kernels lay it out). */
static kiln_tensor *split_heads(kiln_tensor *t, int64_t B, int64_t T, int64_t H, int64_t dh) {
  int64_t s4[4] = {B, T, H, dh}, s3[3] = {B * H, T, dh};
  kiln_tensor *v = t ? kiln_reshape(t, 4, s4) : NULL;
  v = v ? kiln_transpose(v, 1, 2) : NULL;
  return v ? kiln_reshape(v, 3, s3) : NULL;
}

/* The mask as a bool tensor broadcastable to the scores [B, H, T, T]
 * (Note [Fast-path masks]), or *m NULL for none. */
static int attn_mask(const char *fn, const op_val *mv, const op_val *tv, const int64_t sc[4],
                     kiln_tensor **m) {
  *m = NULL;
  if (mv->tag == OP_VAL_NONE) return 0;
  kiln_tensor *mask;
  int rc = op_arg_tensor(fn, mv, "mask", &mask);
  if (rc < 0) return rc;
  if (tv->tag != OP_VAL_INT) return core_error(KILN_ERR_INVALID, "%s: Mask Type should be defined", fn);
  if (mask->ndim == 2) {
    if (mask->shape[0] != sc[0] || mask->shape[1] != sc[3])
      return bad(fn, "a 2-D mask is a key padding mask of shape [batch, seq]", mask);
  } else if (tv->i != 0) {
    bool same = mask->ndim == 4;
    for (int i = 0; same && i < 4; i++) same = mask->shape[i] == sc[i];
    if (!same) return bad(fn, "Mask shape should match input shape", mask);
  }
  if (tv->i == 0) return core_error(KILN_ERR_INVALID, "%s: src_mask not currently supported on CPU", fn);
  if (mask->dtype != KILN_DTYPE_BOOL)
    mask = op_call1(KILN_OP_NE, (op_val[]){OPV_T(mask), OPV_F(0)}, 2);
  if (mask && mask->ndim == 2) mask = kiln_reshape(mask, 4, (int64_t[]){sc[0], 1, 1, sc[3]});
  *m = mask;
  return mask ? 0 : op_failed_status();
}

/* The attention of the fast path: out [B, T, D] and, when want_p, the
 * softmax probabilities [B, H, T, T] in *p. */
static int mha(const char *fn, kiln_tensor *q, kiln_tensor *k, kiln_tensor *v, int64_t D,
               int64_t H, const attn_w *w, const op_val *mv, const op_val *tv, kiln_tensor **out,
               kiln_tensor **p) {
  char d[64];
  if (q->ndim != 3) return bad(fn, "expected 3-D `query`", q);
  if (k->ndim != 3) return bad(fn, "expected 3-D `key`", k);
  if (v->ndim != 3) return bad(fn, "expected 3-D `value`", v);
  if (q->shape[2] != D)
    return core_error(KILN_ERR_INVALID, "%s: passed-in embed_dim %lld didn't match last dim of "
                      "query %s", fn, (long long)D, core_tensor_desc(q, d, sizeof d));
  for (int i = 0; i < 3; i++)
    if (k->shape[i] != q->shape[i] || v->shape[i] != q->shape[i])
      return core_error(KILN_ERR_INVALID, "%s: expected `query`/`key`/`value` shapes to match", fn);
  if (!core_dtype_is_floating(q->dtype)) return bad(fn, "expected a floating `query`", q);
  if (H <= 0 || D % H)
    return core_error(KILN_ERR_INVALID, "%s: `embed_dim` must divide evenly by `num_heads`", fn);
  int64_t B = q->shape[0], T = q->shape[1], dh = D / H;
  int64_t sc[4] = {B, H, T, T};
  kiln_tensor *mask;
  int rc = attn_mask(fn, mv, tv, sc, &mask);
  if (rc < 0) return rc;
  kiln_tensor *qp, *kp, *vp;
  if (q == k && k == v) { /* self-attention: one GEMM for q, k and v */
    kiln_tensor *qkv = kiln_linear(q, w->w, w->b);
    qp = qkv ? kiln_narrow(qkv, 2, 0, D) : NULL;
    kp = qkv ? kiln_narrow(qkv, 2, D, D) : NULL;
    vp = qkv ? kiln_narrow(qkv, 2, 2 * D, D) : NULL;
  } else {
    qp = kiln_linear(q, kiln_narrow(w->w, 0, 0, D), kiln_narrow(w->b, 0, 0, D));
    kp = kiln_linear(k, kiln_narrow(w->w, 0, D, D), kiln_narrow(w->b, 0, D, D));
    vp = kiln_linear(v, kiln_narrow(w->w, 0, 2 * D, D), kiln_narrow(w->b, 0, 2 * D, D));
  }
  qp = qp ? kiln_div_scalar(qp, sqrt((double)dh)) : NULL;
  kiln_tensor *qh = split_heads(qp, B, T, H, dh), *kh = split_heads(kp, B, T, H, dh);
  kiln_tensor *vh = split_heads(vp, B, T, H, dh);
  kiln_tensor *s = qh && kh ? kiln_bmm(qh, kiln_transpose(kh, 1, 2)) : NULL;
  s = s ? kiln_reshape(s, 4, sc) : NULL;
  if (s && mask)
    s = op_call1(KILN_OP_MASKED_FILL, (op_val[]){OPV_T(s), OPV_T(mask), OPV_F(-INFINITY)}, 3);
  kiln_tensor *pr = s ? kiln_softmax(s, -1) : NULL;
  kiln_tensor *ctx = pr && vh ? kiln_bmm(kiln_reshape(pr, 3, (int64_t[]){B * H, T, T}), vh) : NULL;
  ctx = ctx ? kiln_reshape(ctx, 4, (int64_t[]){B, H, T, dh}) : NULL;
  ctx = ctx ? kiln_transpose(ctx, 1, 2) : NULL;
  ctx = ctx ? kiln_reshape(ctx, 3, (int64_t[]){B, T, D}) : NULL;
  *out = ctx ? kiln_linear(ctx, w->wo, w->bo) : NULL;
  if (p) *p = pr;
  return *out ? 0 : op_failed_status();
}

static bool flag(const op_val *v, bool dflt) {
  return op_val_is_num(v) ? op_val_num(v) != 0 : dflt;
}

/* _native_multi_head_attention(query, key, value, embed_dim, num_head,
 * qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights,
 * average_attn_weights, mask_type) -> (out, weights) */
int op_native_mha_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *q, *k, *v, *out, *p;
  int64_t D, H;
  attn_w w;
  int rc;
  if ((rc = op_arg_tensor(MHA, &a[0], "query", &q)) < 0 ||
      (rc = op_arg_tensor(MHA, &a[1], "key", &k)) < 0 ||
      (rc = op_arg_tensor(MHA, &a[2], "value", &v)) < 0 ||
      (rc = op_arg_int(MHA, &a[3], "embed_dim", &D)) < 0 ||
      (rc = op_arg_int(MHA, &a[4], "num_head", &H)) < 0 ||
      (rc = check_weights(MHA, &a[5], D, &w)) < 0)
    return rc;
  bool need = flag(&a[10], true), avg = flag(&a[11], true);
  if ((rc = mha(MHA, q, k, v, D, H, &w, &a[9], &a[12], &out, &p)) < 0) return rc;
  kiln_tensor *wt;
  if (!need) {
    wt = kiln_zeros(1, (int64_t[]){0}, q->dtype);
  } else if (avg) {
    int64_t d1 = 1;
    wt = kiln_mean(p, &d1, 1, false);
  } else {
    wt = p;
  }
  return op_out2(out, wt, outs, max);
}

static kiln_tensor *norm(kiln_tensor *x, int64_t D, kiln_tensor *wt, kiln_tensor *b, double eps) {
  return x ? op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(&D, 1), OPV_T(wt), OPV_T(b),
                                                     OPV_F(eps), OPV_B(true)}, 6)
           : NULL;
}

/* _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight,
 * qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
 * norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
 * ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type): the layer's
 * self-attention block and feed-forward block with residuals, layer norm
 * after each (before, when norm_first); relu or (exact) gelu. */
int op_transformer_encoder_layer_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *src, *t[8];
  static const char *const names[8] = {"norm_weight_1", "norm_bias_1", "norm_weight_2",
                                       "norm_bias_2", "ffn_weight_1", "ffn_bias_1",
                                       "ffn_weight_2", "ffn_bias_2"};
  int64_t D, H;
  attn_w w;
  int rc;
  if ((rc = op_arg_tensor(TEL, &a[0], "src", &src)) < 0 ||
      (rc = op_arg_int(TEL, &a[1], "embed_dim", &D)) < 0 ||
      (rc = op_arg_int(TEL, &a[2], "num_heads", &H)) < 0 ||
      (rc = check_weights(TEL, &a[3], D, &w)) < 0)
    return rc;
  for (int i = 0; i < 8; i++)
    if ((rc = op_arg_tensor(TEL, &a[10 + i], names[i], &t[i])) < 0) return rc;
  if (src->ndim != 3) return bad(TEL, "batched input size should be 3", src);
  if (t[4]->ndim != 2 || t[6]->ndim != 2) return bad(TEL, "2d weights expected", t[4]->ndim != 2 ? t[4] : t[6]);
  if (core_numel(src->ndim, src->shape) == 0) return op_out1(kiln_clone(src), outs);
  bool gelu = flag(&a[7], false), first = flag(&a[8], false);
  double eps = op_val_is_num(&a[9]) ? op_val_num(&a[9]) : 1e-5;
  kiln_tensor *x = first ? norm(src, D, t[0], t[1], eps) : src, *att;
  if (!x) return op_failed_status();
  if ((rc = mha(TEL, x, x, x, D, H, &w, &a[18], &a[19], &att, NULL)) < 0) return rc;
  x = kiln_add(att, src);
  if (!first) x = norm(x, D, t[0], t[1], eps);
  kiln_tensor *res = x;
  if (first) x = norm(x, D, t[2], t[3], eps);
  kiln_tensor *h = x ? kiln_linear(x, t[4], t[5]) : NULL;
  h = h ? (gelu ? kiln_gelu(h, false) : kiln_relu(h)) : NULL;
  x = h ? kiln_add(kiln_linear(h, t[6], t[7]), res) : NULL;
  if (!first) x = norm(x, D, t[2], t[3], eps);
  return op_out1(x, outs);
}
