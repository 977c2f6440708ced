/* src/ops/dtype_gate.c: which ops take the extended dtypes (Int, Short,
 * Char, Byte, Half, BFloat16); every other op refuses them before it runs. */
#include <string.h>

#include "op.h"

/* Note [Extended dtypes]: kiln's kernels were written for Float, Double,
 * Long and Bool. The six dtypes added after them reach only the ops that
 * handle them: the elementwise ops (the driver computes half types in
 * float32 and integers in int64, Note [Narrow dtypes] in ew.c; an op with
 * no kernel for the compute dtype refuses there), views (metadata only),
 * in-place forms (their functional op is checked when it runs), and the
 * copies, factories and reductions flagged OPF_EXT_DTYPES in ops.def. Any
 * other op runs widened when its NARROW row in ops.def takes the dtype
 * (Note [Widening] in widen.c); given a tensor of a dtype it does not take,
 * or any op a ScalarType of one of them, it fails with "<op>: not
 * implemented for dtype <name>" instead of reading the bytes as another
 * type. The fused executor runs a group with such an input unfused. */
static bool takes_extended(int op) {
  /* the copies, factories and reductions that handle them are flagged
   * OPF_EXT_DTYPES in ops.def: integers sum in int64 (to Long, as PyTorch),
   * half types in float32 (rounded back); mean takes floating types only */
  return op_table[op].flags & (OPF_ELEMENTWISE | OPF_VIEW | OPF_INPLACE | OPF_EXT_DTYPES);
}

static int refuse(int op, kiln_dtype dt) {
  return core_error(KILN_ERR_UNSUPPORTED, "%s: not implemented for dtype %s", op_table[op].name,
                    kiln_dtype_name(dt));
}

int op_dtype_gate(int op, const op_val *args, int n_args) {
  if (takes_extended(op)) return 0;
  for (int i = 0; i < n_args; i++) {
    const op_val *v = &args[i];
    if (v->tag == OP_VAL_TENSOR && v->t && core_dtype_is_extended(v->t->dtype) &&
        !op_widen_takes(op, v->t->dtype))
      return refuse(op, v->t->dtype);
    if (v->tag == OP_VAL_TENSORS)
      for (int k = 0; k < v->ts.n; k++)
        if (v->ts.v[k] && core_dtype_is_extended(v->ts.v[k]->dtype) &&
            !op_widen_takes(op, v->ts.v[k]->dtype))
          return refuse(op, v->ts.v[k]->dtype);
    if (v->tag == OP_VAL_INT && !strncmp(op_arg_type(op, i), "ScalarType", 10)) {
      kiln_dtype dt;
      if (op_dtype_from_code(v->i, &dt) == 0 && core_dtype_is_extended(dt)) return refuse(op, dt);
      kiln_clear_error();
    }
  }
  return 0;
}
