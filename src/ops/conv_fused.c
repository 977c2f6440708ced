/* src/ops/conv_fused.c: eval-mode convolution + batch norm (+ residual add)
 * (+ relu) as one op, which passes/fuse_conv_bn.c puts in place of the
 * nodes it replaces; its kernel is conv2d's GEMM with an epilogue.
 *
 * Note [Conv epilogue]: in eval mode batch norm is a per-channel affine
 * map of the convolution's output, y = (conv + b - rm) / sqrt(rv + eps) *
 * w_bn + b_bn = conv * s + t with s = w_bn / sqrt(rv + eps) and t = b_bn +
 * (b - rm) s (s, t computed in double from the tensors at each call, so a
 * change of the weights is seen). The kernel applies it, the residual add
 * and relu while it scatters the GEMM's result into the output (Note [Conv
 * batching] in conv_gemm.c), one pass instead of batch norm's four and the
 * add's and relu's one each. The weights are not folded into a copy: that
 * copy would cost a pass over them each call (resnet18 at batch 1 reads
 * them once). The rounding differs from the unfused ops (one multiply-add
 * instead of a subtract, two multiplies and an add) by float32 rounding.
 *
 * aten::_conv_bn_eval decomposes: when some tensor argument requires grad
 * (and grad mode is on), or an argument is one the kernel does not take
 * (shapes, dtypes, a residual that broadcasts), into the very ops it
 * replaced (conv2d, batch_norm with training False, add_, relu), so
 * autograd, the JIT's differentiation and every error are theirs; else it
 * calls aten::_conv_bn_eval_kernel, which lazy tensors record as one node. */
#include <math.h>

#include "conv.h"

static bool any_grad(const op_val *a, int n) {
  if (!op_grad_enabled) return false;
  for (int i = 0; i < n; i++)
    if (a[i].tag == OP_VAL_TENSOR && a[i].t->requires_grad) return true;
  return false;
}

/* May t (optional unless need) be a per-channel [O] of dtype dt? */
static bool channel_ok(const op_val *v, bool need, int64_t O, kiln_dtype dt) {
  if (v->tag == OP_VAL_NONE) return !need;
  return v->tag == OP_VAL_TENSOR && v->t->ndim == 1 && v->t->shape[0] == O && v->t->dtype == dt;
}

/* Does the kernel take these arguments (conv2d's checked by its infer)?
 * Fills *out with the output's meta. Errors are left set, not reported. */
static bool kernel_takes(const op_val *a, op_meta *out) {
  if (a[0].tag != OP_VAL_TENSOR || a[1].tag != OP_VAL_TENSOR) return false;
  if (op_conv2d_infer(a, 7, out, 1) != 1) return false;
  kiln_dtype dt = out->dtype;
  int64_t O = out->shape[1];
  if (dt != KILN_DTYPE_F32 && dt != KILN_DTYPE_F64) return false;
  if (!channel_ok(&a[7], false, O, dt) || !channel_ok(&a[8], false, O, dt) ||
      !channel_ok(&a[9], true, O, dt) || !channel_ok(&a[10], true, O, dt))
    return false;
  if (!op_val_is_num(&a[11]) || a[13].tag != OP_VAL_BOOL) return false;
  if (a[12].tag == OP_VAL_NONE) return true;
  const kiln_tensor *r = a[12].tag == OP_VAL_TENSOR ? a[12].t : NULL;
  if (!r || r->dtype != dt || r->ndim != 4) return false;
  for (int d = 0; d < 4; d++)
    if (r->shape[d] != out->shape[d]) return false;
  return true;
}

/* The ops the fused node stands for. */
static int compose(const op_val *a, kiln_tensor **outs) {
  kiln_tensor *y = op_call1(KILN_OP_CONV2D, a, 7);
  if (!y) return -1;
  op_val bn[9] = {OPV_T(y), a[7], a[8], a[9], a[10], OPV_B(false), OPV_F(0.1), a[11],
                  OPV_B(false)};
  y = op_call1(KILN_OP_BATCH_NORM, bn, 9);
  if (y && a[12].tag != OP_VAL_NONE) {
    if (a[12].tag != OP_VAL_TENSOR)
      return core_error(KILN_ERR_INVALID, "aten::_conv_bn_eval: residual must be a tensor");
    const kiln_tensor *r = a[12].t;
    bool same = r->dtype == y->dtype && r->ndim == y->ndim;
    for (int d = 0; same && d < r->ndim; d++) same = r->shape[d] == y->shape[d];
    /* y is fresh, so add_ on it is add's value where add_ would give add's
     * dtype and shape; functional there (what the JIT's differentiation
     * traces after functionalization), add_ otherwise (its casts, errors) */
    if (same) y = kiln_add(y, a[12].t);
    else if (kiln_add_(y, a[12].t, 1.0) < 0) return -1;
  }
  if (y && a[13].tag == OP_VAL_BOOL && a[13].b) y = kiln_relu(y);
  if (!y) return -1;
  outs[0] = y;
  return 1;
}

int op_conv_bn_eval_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  op_meta m;
  if (max < 1) return core_error(KILN_ERR_INVALID, "aten::_conv_bn_eval: no room for the result");
  if (!any_grad(a, n) && kernel_takes(a, &m))
    return op_call(KILN_OP_CONV_BN_EVAL_KERNEL, a, n, outs, max);
  return compose(a, outs);
}

int op_conv_bn_eval_kernel_infer(const op_val *a, int n, op_meta *o, int m) {
  if (op_conv2d_infer(a, 7, o, m) != 1) return -1;
  if (!kernel_takes(a, o))
    return core_error(KILN_ERR_INVALID,
                      "aten::_conv_bn_eval_kernel: batch norm statistics, eps, relu or "
                      "residual do not fit the convolution's output");
  return 1;
}

/* Element c of the optional float32 [O] vector v (its stride, elements),
 * or dflt when v is absent. */
static inline double chan(const float *v, int64_t st, int64_t c, double dflt) {
  return v ? (double)v[c * st] : dflt;
}

/* sc[0, O) = s and sc[O, 2O) = t of Note [Conv epilogue] for float32
 * channel vectors (kernel_takes checked: 1-D, [O], float32), computed in
 * double as the generic loop does, reading the vectors directly: that loop's
 * per-element index arithmetic was ~2% of resnet18's batch-1 inference. */
static void scale_shift_f32(int64_t O, const kiln_tensor *cb, const kiln_tensor *bw,
                            const kiln_tensor *bb, const kiln_tensor *rm, const kiln_tensor *rv,
                            double eps, float *sc) {
  const float *pcb = cb ? core_data(cb) : NULL, *pbw = bw ? core_data(bw) : NULL,
              *pbb = bb ? core_data(bb) : NULL, *prm = core_data(rm), *prv = core_data(rv);
  int64_t scb = cb ? cb->strides[0] : 0, sbw = bw ? bw->strides[0] : 0,
          sbb = bb ? bb->strides[0] : 0, srm = rm->strides[0], srv = rv->strides[0];
  for (int64_t c = 0; c < O; c++) {
    double s = chan(pbw, sbw, c, 1.0) / sqrt((double)prv[c * srv] + eps);
    sc[c] = (float)s;
    sc[O + c] = (float)(chan(pbb, sbb, c, 0.0) + (chan(pcb, scb, c, 0.0) - prm[c * srm]) * s);
  }
}

int op_conv_bn_eval_kernel_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const char *fn = "aten::_conv_bn_eval_kernel";
  win_geom g;
  kiln_tensor *own[3] = {0};
  const kiln_tensor *t[3] = {a[0].t, a[1].t, a[12].tag == OP_VAL_TENSOR ? a[12].t : NULL};
  if (op_conv_geom(fn, a[0].t, a[1].t, &a[3], &a[4], &a[5], &a[6], &g) < 0) return -1;
  if (g.N == 0 || g.O == 0) return 0;
  kiln_dtype dt = a[0].t->dtype;
  size_t es = kiln_dtype_size(dt), nb = 0;
  int rc = 0;
  if (core_buf_bytes(fn, (uint64_t)g.O, 2, es, &nb) < 0) return -1;
  char *sc = core_alloc(nb ? nb : 16);
  if (!sc) return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
  for (int i = 0; i < 3; i++) {
    if (!t[i] || core_is_contiguous(t[i])) continue;
    own[i] = core_tensor_new(t[i]->ndim, t[i]->shape, t[i]->dtype);
    if (!own[i]) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    op_copy_into(own[i], t[i]);
    t[i] = own[i];
  }
  const kiln_tensor *cb = op_opt_tensor(&a[2]), *bw = op_opt_tensor(&a[7]),
                    *bb = op_opt_tensor(&a[8]);
  double eps = op_val_num(&a[11]);
  if (dt == KILN_DTYPE_F32 && (!cb || cb->dtype == KILN_DTYPE_F32))
    scale_shift_f32(g.O, cb, bw, bb, a[9].t, a[10].t, eps, (float *)sc);
  else
    for (int64_t c = 0; c < g.O; c++) { /* Note [Conv epilogue] */
      double s = (bw ? core_get_flat(bw, c) : 1.0) / sqrt(core_get_flat(a[10].t, c) + eps);
      double sh = (bb ? core_get_flat(bb, c) : 0.0) +
                  ((cb ? core_get_flat(cb, c) : 0.0) - core_get_flat(a[9].t, c)) * s;
      if (dt == KILN_DTYPE_F32) {
        ((float *)sc)[c] = (float)s;
        ((float *)sc)[g.O + c] = (float)sh;
      } else {
        ((double *)sc)[c] = s;
        ((double *)sc)[g.O + c] = sh;
      }
    }
  conv_epilogue ep = {.scale = sc, .shift = sc + (size_t)g.O * es,
                      .residual = t[2] ? core_data(t[2]) : NULL, .relu = a[13].b};
  const kiln_tensor *prev = op_wino_weight_swap(t[1]); /* Note [Winograd weights cache] */
  rc = op_conv_forward_ep(dt, &g, core_data(t[0]), core_data(t[1]), &ep, core_data(o[0]));
  op_wino_weight_swap(prev);
done:
  for (int i = 0; i < 3; i++) kiln_release(own[i]);
  core_free(sc);
  return rc;
}
