/* src/ops/aliases.c: overloads and in-place variants that TorchScript
 * prints for ordinary code (x.sum(), x.squeeze(), torch.flatten, F.relu's
 * in-place branch, ...). Each decomposes into other ops of the table, so it
 * needs no kernel or derivative of its own; reciprocal is a plain
 * elementwise op. */
#include <string.h>

#include "tile.h"

/* ---- reciprocal ----------------------------------------------------------- */
TILE_UNARY(recip_f32, float, float, 1.0f / a)
TILE_UNARY(recip_f64, double, double, 1.0 / a)
OP_TILES(reciprocal, recip_f32, recip_f64, NOTILE, NOTILE)

/* d(1/x) = -g / x^2 = -g * y^2 */
int op_reciprocal_grad(op_grad_ctx *g) {
  if (!g->grads[0] || !g->needs[0]) return 0;
  kiln_tensor *y = g->outs[0];
  kiln_tensor *r = kiln_mul_scalar(kiln_mul(g->grads[0], kiln_mul(y, y)), -1.0);
  if (!r) return -1;
  g->grad_in[0] = r;
  return 0;
}

/* ---- decompositions ------------------------------------------------------- */

static int one(kiln_tensor *t, kiln_tensor **outs) {
  if (!t) return -1;
  outs[0] = t;
  return 1;
}

int op_sum_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return one(op_call1(KILN_OP_SUM, (op_val[]){a[0], OPV_NONE, OPV_B(false), a[1]}, 4), outs);
}

int op_mean_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return one(op_call1(KILN_OP_MEAN, (op_val[]){a[0], OPV_NONE, OPV_B(false), a[1]}, 4), outs);
}

int op_max_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  static const int64_t none[1] = {0};
  return one(op_call1(KILN_OP_AMAX, (op_val[]){a[0], OPV_INTS(none, 0), OPV_B(false)}, 3), outs);
}

int op_squeeze_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return one(op_call1(KILN_OP_SQUEEZE, (op_val[]){a[0], OPV_NONE}, 2), outs);
}

int op_flatten_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  char d[64];
  if (a[0].tag != OP_VAL_TENSOR || a[1].tag != OP_VAL_INT || a[2].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "aten::flatten: expected (Tensor, int, int), got %s",
                      op_val_desc(&a[0], d, sizeof d));
  const kiln_tensor *t = a[0].t;
  int nd = t->ndim ? t->ndim : 1;
  int s = core_wrap_dim("aten::flatten", a[1].i, t->ndim), e = core_wrap_dim("aten::flatten", a[2].i, t->ndim);
  if (s < 0 || e < 0) return KILN_ERR_INVALID;
  if (s > e)
    return core_error(KILN_ERR_INVALID, "aten::flatten: start_dim %d comes after end_dim %d", s, e);
  int64_t shape[KILN_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < s; i++) shape[k++] = t->shape[i];
  int64_t m = 1;
  for (int i = s; i <= e && i < t->ndim; i++) m *= t->shape[i];
  shape[k++] = m;
  for (int i = e + 1; i < nd && i < t->ndim; i++) shape[k++] = t->shape[i];
  return one(op_call1(KILN_OP_RESHAPE, (op_val[]){a[0], OPV_INTS(shape, k)}, 2), outs);
}

int op_broadcast_tensors_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  int nd = 0;
  int64_t shape[KILN_MAX_DIMS];
  if (a[0].tag != OP_VAL_TENSORS)
    return core_error(KILN_ERR_INVALID, "aten::broadcast_tensors: expected a tensor list");
  if (a[0].ts.n > max)
    return core_error(KILN_ERR_INVALID, "aten::broadcast_tensors: room for %d outputs, need %d",
                      max, a[0].ts.n);
  for (int i = 0; i < a[0].ts.n; i++)
    if (op_broadcast_shapes("aten::broadcast_tensors", nd, shape, a[0].ts.v[i]->ndim,
                            a[0].ts.v[i]->shape, &nd, shape) < 0)
      return KILN_ERR_INVALID;
  for (int i = 0; i < a[0].ts.n; i++) {
    outs[i] = kiln_expand(a[0].ts.v[i], nd, shape);
    if (!outs[i]) return -1;
  }
  return a[0].ts.n;
}

/* In place: the functional op, then a copy into self (bumping its version,
 * so a backward that saved self fails loudly instead of being wrong). */
static int in_place(int op, const op_val *a, int n_args, const char *name, kiln_tensor **outs) {
  char d[64];
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor, got %s", name,
                      op_val_desc(&a[0], d, sizeof d));
  kiln_tensor *self = a[0].t;
  if (op_grad_enabled && self->requires_grad)
    return core_error(KILN_ERR_UNSUPPORTED,
                      "%s: in-place ops on tensors that require grad are not supported; "
                      "use the out-of-place op",
                      name);
  /* PyTorch's rules for writing a result into self: its shape must be
   * self's (self does not grow by broadcasting), and its dtype must cast
   * to self's without losing its kind (no float into an integer tensor,
   * no number into a bool one) */
  op_meta m[1];
  if (op_table[op].infer(a, n_args, m, 1) < 0) return -1;
  char sh[2][96];
  if (m[0].ndim != self->ndim || memcmp(m[0].shape, self->shape, (size_t)self->ndim * sizeof *m[0].shape))
    return core_error(KILN_ERR_INVALID, "%s: output with shape %s doesn't match the broadcast shape %s",
                      name, core_shape_str(self->ndim, self->shape, sh[0], sizeof sh[0]),
                      core_shape_str(m[0].ndim, m[0].shape, sh[1], sizeof sh[1]));
  if ((core_dtype_is_floating(m[0].dtype) && !core_dtype_is_floating(self->dtype)) ||
      (m[0].dtype != KILN_DTYPE_BOOL && self->dtype == KILN_DTYPE_BOOL))
    return core_error(KILN_ERR_INVALID,
                      "%s: result type %s can't be cast to the desired output type %s", name,
                      kiln_dtype_name(m[0].dtype), kiln_dtype_name(self->dtype));
  /* Note [In place]: on the CPU, an elementwise op whose result has self's
   * shape and dtype writes straight into a contiguous self (one pass, no
   * temporary), as long as no other argument overlaps self differently
   * (reading element i and writing element i is safe; anything else
   * takes the functional op and a copy). */
  bool direct = self->device == CORE_DEVICE_CPU && (op_table[op].flags & OPF_ELEMENTWISE) &&
                core_is_contiguous(self);
  for (int i = 1; i < n_args && direct; i++) {
    if (a[i].tag != OP_VAL_TENSOR) continue;
    const kiln_tensor *o = a[i].t;
    direct = o->device == CORE_DEVICE_CPU &&
             (o->storage != self->storage ||
              (o->offset == self->offset && o->ndim == self->ndim &&
               !memcmp(o->shape, self->shape, (size_t)o->ndim * sizeof *o->shape) &&
               !memcmp(o->strides, self->strides, (size_t)o->ndim * sizeof *o->strides)));
  }
  if (direct) {
    if (op_call_into(op, a, n_args, self) == 0) {
      outs[0] = core_autorelease(kiln_retain(self));
      return outs[0] ? 1 : KILN_ERR_NOMEM;
    }
    kiln_clear_error(); /* e.g. a wider result dtype: the general path */
  }
  kiln_tensor *r = op_call1(op, a, n_args);
  if (!r || kiln_copy_(self, r) < 0) return -1;
  outs[0] = core_autorelease(kiln_retain(self));
  return outs[0] ? 1 : KILN_ERR_NOMEM;
}

int op_add__decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return in_place(KILN_OP_ADD, a, 3, "aten::add_", outs);
}
int op_mul__decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return in_place(KILN_OP_MUL, a, 2, "aten::mul_", outs);
}

int op_relu__decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return in_place(KILN_OP_RELU, a, 1, "aten::relu_", outs);
}
int op_silu__decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return in_place(KILN_OP_SILU, a, 1, "aten::silu_", outs);
}
int op_leaky_relu__decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return in_place(KILN_OP_LEAKY_RELU, a, 2, "aten::leaky_relu_", outs);
}
int op_dropout__decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return in_place(KILN_OP_DROPOUT, a, 3, "aten::dropout_", outs);
}
