/* src/ops/fill.c: fill, zero and copy, the functional ops whose in-place
 * forms (fill_, zero_, copy_: Note [In-place variants] in op.h) PyTorch
 * code calls: a tensor of self's shape and dtype holding a value, zeros,
 * or src broadcast and converted. */
#include <string.h>

#include "op.h"

/* self's meta (all three ops keep self's shape and dtype) */
static int self_meta(const char *fn, const op_val *a, op_meta *o) {
  kiln_tensor *self;
  if (op_arg_tensor(fn, &a[0], "self", &self) < 0) return -1;
  op_meta_of(self, &o[0]);
  return 1;
}

int op_fill_infer(const op_val *a, int n, op_meta *o, int m) {
  char d[64];
  if (a[1].tag != OP_VAL_TENSOR && !op_val_is_num(&a[1]))
    return core_error(KILN_ERR_INVALID, "aten::fill: expected a number for 'value', got %s",
                      op_val_desc(&a[1], d, sizeof d));
  if (a[1].tag == OP_VAL_TENSOR && a[1].t->ndim != 0)
    return core_error(KILN_ERR_INVALID,
                      "aten::fill: only supports 0-dimension value tensor but got tensor with %d "
                      "dimensions",
                      a[1].t->ndim);
  return self_meta("aten::fill", a, o);
}

int op_fill_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  if (a[1].tag == OP_VAL_TENSOR) {
    op_copy_into(o[0], a[1].t);
    return 0;
  }
  kiln_tensor *v = core_tensor_new(0, NULL, KILN_DTYPE_F64);
  if (!v) return KILN_ERR_NOMEM;
  *(double *)core_data(v) = op_val_num(&a[1]);
  op_copy_into(o[0], v);
  kiln_release(v);
  return 0;
}

/* d fill / d self = 0 (the value is a number, or a 0-d tensor whose
 * gradient is the sum) */
int op_fill_grad(op_grad_ctx *g) {
  if (g->n_slots > 1 && g->needs[1] && g->grads[0])
    return op_grad_put(g, 1, kiln_sum(g->grads[0], NULL, 0, false));
  return 0;
}

int op_zero_infer(const op_val *a, int n, op_meta *o, int m) { return self_meta("aten::zero", a, o); }

int op_zero_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  kiln_tensor *v = core_tensor_new(0, NULL, KILN_DTYPE_F64);
  if (!v) return KILN_ERR_NOMEM;
  *(double *)core_data(v) = 0;
  op_copy_into(o[0], v);
  kiln_release(v);
  return 0;
}

int op_zero_grad(op_grad_ctx *g) {
  (void)g;
  return 0; /* zeros do not depend on self */
}

int op_copy_infer(const op_val *a, int n, op_meta *o, int m) {
  kiln_tensor *self, *src;
  char sh[2][96];
  int nd;
  int64_t shape[KILN_MAX_DIMS];
  if (op_arg_tensor("aten::copy", &a[0], "self", &self) < 0 ||
      op_arg_tensor("aten::copy", &a[1], "src", &src) < 0)
    return -1;
  if (op_broadcast_shapes("aten::copy", self->ndim, self->shape, src->ndim, src->shape, &nd,
                          shape) < 0 ||
      nd != self->ndim || memcmp(shape, self->shape, (size_t)nd * sizeof *shape))
    return core_error(KILN_ERR_INVALID, "aten::copy: src of shape %s cannot be broadcast to %s",
                      core_shape_str(src->ndim, src->shape, sh[0], sizeof sh[0]),
                      core_shape_str(self->ndim, self->shape, sh[1], sizeof sh[1]));
  op_meta_of(self, &o[0]);
  return 1;
}

int op_copy_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  op_copy_into(o[0], a[1].t);
  return 0;
}

/* self: 0; src: the gradient summed to src's shape, in src's dtype */
int op_copy_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go || g->n_slots < 2 || !g->needs[1]) return 0;
  const kiln_tensor *src = g->args[1].t;
  kiln_tensor *r = op_sum_to(go, src->ndim, src->shape);
  if (r && r->dtype != src->dtype) r = kiln_to_dtype(r, src->dtype);
  return op_grad_put(g, 1, r);
}
