/* src/ops/dropout.c: native_dropout (mask from the default generator) and
 * dropout, which decomposes into it when training.
 *
 * Note [Dropout generator]: the ops draw from the default generator, one
 * uniform double per element in C order: an element is kept when
 * u < 1 - p (PyTorch's bernoulli_(1 - p)). kiln_dropout's gen argument is
 * honoured by lending gen to the calling thread's ops for the call
 * (core_set_op_generator), so gen advances exactly as the default one
 * would have, and other threads' draws from the default generator are
 * untouched (Note [Threads] in include/kiln.h). Lazy tensors record the
 * op and draw from the default generator when the graph runs, ignoring
 * gen. */
#include <math.h>
#include <string.h>

#include "op.h"

static int check_p(const char *fn, const op_val *v, double *p) {
  char d[160];
  if (!op_val_is_num(v))
    return core_error(KILN_ERR_INVALID, "%s: p must be a number, got %s", fn,
                      op_val_desc(v, d, sizeof d));
  *p = op_val_num(v);
  if (!(*p >= 0 && *p <= 1))
    return core_error(KILN_ERR_INVALID,
                      "%s: dropout probability has to be between 0 and 1, but got %g", fn, *p);
  return 0;
}

/* train is bool? in native_dropout's schema: None means training. */
static bool is_train(const op_val *v) { return v->tag != OP_VAL_BOOL || v->b; }

/* ---- native_dropout ------------------------------------------------------------ */

int op_native_dropout_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::native_dropout";
  char d[160];
  double p;
  if (a[0].tag != OP_VAL_TENSOR || !core_dtype_is_floating(a[0].t->dtype))
    return core_error(KILN_ERR_INVALID, "%s: input must be a Float or Double tensor, got %s",
                      fn, op_val_desc(&a[0], d, sizeof d));
  if (check_p(fn, &a[1], &p) < 0) return -1;
  if (a[2].tag != OP_VAL_BOOL && a[2].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "%s: train must be a bool or None, got %s", fn,
                      op_val_desc(&a[2], d, sizeof d));
  op_meta_of(a[0].t, &o[0]);
  op_meta_of(a[0].t, &o[1]);
  o[1].dtype = KILN_DTYPE_BOOL;
  return 2;
}

/* out = (x * mask) * scale in x's dtype, scale = 1/(1-p) (0 when p == 1),
 * as PyTorch computes it; not training: out = x, mask all true. */
int op_native_dropout_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *out = o[0];
  bool *mask = core_data(o[1]);
  int64_t numel = kiln_tensor_numel(out);
  double p = op_val_num(&a[1]);
  op_copy_into(out, a[0].t); /* C-order copy; scaled in place below */
  if (!is_train(&a[2])) {
    memset(mask, 1, (size_t)numel);
    return 0;
  }
  kiln_generator *gen = core_op_generator();
  double keep = 1.0 - p, scale = keep == 0 ? 0.0 : 1.0 / keep;
  bool held = core_rand_hold(gen); /* one lock for the mask, not one per draw */
  for (int64_t i = 0; i < numel; i++) mask[i] = core_rand_double_held(gen) < keep;
  core_rand_release(held);
  if (out->dtype == KILN_DTYPE_F32) {
    float *x = core_data(out), s = (float)scale;
    for (int64_t i = 0; i < numel; i++) x[i] = x[i] * (float)mask[i] * s;
  } else {
    double *x = core_data(out);
    for (int64_t i = 0; i < numel; i++) x[i] = x[i] * (double)mask[i] * scale;
  }
  return 0;
}

/* grad = g * mask * scale (identity when not training). */
int op_native_dropout_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go || !g->needs[0]) return 0;
  if (!is_train(&g->args[2])) {
    g->grad_in[0] = go;
    return 0;
  }
  double keep = 1.0 - op_val_num(&g->args[1]), scale = keep == 0 ? 0.0 : 1.0 / keep;
  kiln_tensor *r = kiln_mul(go, kiln_to_dtype(g->outs[1], go->dtype));
  if (r && scale != 1) r = kiln_mul_scalar(r, scale);
  g->grad_in[0] = r;
  return r ? 0 : -1;
}

/* ---- dropout (decomposes) ---------------------------------------------------------- */

/* Training: native_dropout's output (its mask is dropped). Otherwise, and
 * when p is 0 or the input is empty, the input itself, as PyTorch's CPU
 * dropout returns it (a new reference to the same tensor; _dropout_impl in
 * ATen's Dropout.cpp): no mask is drawn, so the generator does not advance,
 * and the gradient passes through unchanged. */
int op_dropout_decompose(const op_val *a, int n, kiln_tensor **outs, int max_outs) {
  const char *fn = "aten::dropout";
  char d[160];
  double p;
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: input must be a tensor, got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (check_p(fn, &a[1], &p) < 0) return -1;
  if (a[2].tag != OP_VAL_BOOL)
    return core_error(KILN_ERR_INVALID, "%s: train must be a bool, got %s", fn,
                      op_val_desc(&a[2], d, sizeof d));
  if (!a[2].b || p == 0 || kiln_tensor_numel(a[0].t) == 0) {
    outs[0] = core_autorelease(kiln_retain(a[0].t));
    return outs[0] ? 1 : KILN_ERR_NOMEM;
  }
  kiln_tensor *r[2] = {0};
  kiln_scope_begin(); /* Note [Decompose scope] in matmul.c */
  int k = op_call(KILN_OP_NATIVE_DROPOUT, (op_val[]){a[0], a[1], OPV_B(true)}, 3, r, 2);
  kiln_tensor *v = k >= 1 ? kiln_retain(r[0]) : NULL;
  kiln_scope_end();
  if (k < 0) return k;
  outs[0] = core_autorelease(v);
  return outs[0] ? 1 : KILN_ERR_NOMEM;
}

/* ---- public API ------------------------------------------------------------------- */

/* gen NULL: the default generator; otherwise gen (Note [Dropout generator]). */
kiln_tensor *kiln_dropout(kiln_tensor *x, double p, bool train, kiln_generator *gen) {
  if (!gen || gen == kiln_default_generator() || !train)
    return op_call1(KILN_OP_DROPOUT, (op_val[]){OPV_T(x), OPV_F(p), OPV_B(train)}, 3);
  kiln_generator *prev = core_set_op_generator(gen);
  kiln_tensor *r = op_call1(KILN_OP_DROPOUT, (op_val[]){OPV_T(x), OPV_F(p), OPV_B(train)}, 3);
  core_set_op_generator(prev);
  return r;
}
