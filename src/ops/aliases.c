/* src/ops/aliases.c: overloads and in-place variants that TorchScript
 * prints for ordinary code (x.sum(), x.squeeze(), torch.flatten, ...).
 * Each decomposes into other ops of the table, so it needs no kernel or
 * derivative of its own; reciprocal is a plain elementwise op. In-place
 * forms (relu_, add_, ...) are derived entries (inplace.c). */
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

int op_sum_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_SUM, (op_val[]){a[0], OPV_NONE, OPV_B(false), a[1]}, 4), outs);
}

int op_mean_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_MEAN, (op_val[]){a[0], OPV_NONE, OPV_B(false), a[1]}, 4), outs);
}

int op_max_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  static const int64_t none[1] = {0};
  return op_out1(op_call1(KILN_OP_AMAX, (op_val[]){a[0], OPV_INTS(none, 0), OPV_B(false)}, 3), outs);
}

int op_squeeze_all_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(op_call1(KILN_OP_SQUEEZE, (op_val[]){a[0], OPV_NONE}, 2), outs);
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
  return op_out1(op_call1(KILN_OP_RESHAPE, (op_val[]){a[0], OPV_INTS(shape, k)}, 2), outs);
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
