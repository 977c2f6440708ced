/* src/exec/prim_math.c: tensor predicates that return a bool (not a
 * tensor), so they are builtins rather than op-table ops:
 * aten::equal and aten::allclose. */
#include <string.h>

#include "prims.h"

/* true when every element of the bool tensor m is set (and m exists) */
static int all_set(kiln_tensor *m, bool *out) {
  if (!m) return -1;
  kiln_tensor *s = kiln_sum(kiln_to_dtype(m, KILN_DTYPE_F64), NULL, 0, false);
  double v;
  if (!s || kiln_item(s, &v) < 0) return -1;
  *out = v == (double)kiln_tensor_numel(m);
  return 0;
}

static int tensor_in(const exec_instr *x, const exec_value *v, int i) {
  if (v->tag == EXEC_V_TENSOR) return 0;
  return core_error(KILN_ERR_INVALID, "%s: argument %d must be a Tensor, got %s", x->name, i,
                    exec_tag_name(v->tag));
}

/* equal(a, b): the same shape and the same values (NaN is not equal) */
int exec_prim_equal(const exec_instr *x, exec_value *in, exec_value *out) {
  if (tensor_in(x, &in[0], 0) < 0 || tensor_in(x, &in[1], 1) < 0) return -1;
  kiln_tensor *a = in[0].t, *b = in[1].t;
  bool r = a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
  if (r && all_set(kiln_eq(a, b), &r) < 0) return -1;
  out[0] = (exec_value){.tag = EXEC_V_BOOL, .b = r};
  return 0;
}

/* allclose(a, b, rtol, atol, equal_nan) = all(isclose(...)) */
int exec_prim_allclose(const exec_instr *x, exec_value *in, exec_value *out) {
  if (tensor_in(x, &in[0], 0) < 0 || tensor_in(x, &in[1], 1) < 0) return -1;
  op_val args[5] = {OPV_T(in[0].t), OPV_T(in[1].t), OPV_F(1e-5), OPV_F(1e-8), OPV_B(false)};
  for (int i = 2; i < 4 && i < x->n_in; i++) {
    if (in[i].tag == EXEC_V_FLOAT) args[i] = OPV_F(in[i].f);
    else if (in[i].tag == EXEC_V_INT) args[i] = OPV_F((double)in[i].i);
  }
  if (x->n_in > 4 && in[4].tag == EXEC_V_BOOL) args[4] = OPV_B(in[4].b);
  bool r;
  kiln_no_grad_begin();
  int rc = all_set(op_call1(KILN_OP_ISCLOSE, args, 5), &r);
  kiln_no_grad_end();
  if (rc < 0) return -1;
  out[0] = (exec_value){.tag = EXEC_V_BOOL, .b = r};
  return 0;
}
