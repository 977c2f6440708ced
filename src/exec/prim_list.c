/* src/exec/prim_list.c: list and tuple builtins of the interpreter
 * (prim::ListConstruct, ListUnpack, TupleConstruct, TupleUnpack,
 * TupleIndex, aten::__getitem__, aten::len). */
#include "prims.h"

int exec_prim_list_construct(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = exec_list_make(EXEC_V_LIST, in, x->n_in);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

int exec_prim_tuple_construct(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = exec_list_make(EXEC_V_TUPLE, in, x->n_in);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

int exec_prim_unpack(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_LIST && in[0].tag != EXEC_V_TUPLE)
    return core_error(KILN_ERR_INVALID, "%s: expected a list or tuple, got %s", x->name,
                      exec_tag_name(in[0].tag));
  if (in[0].list->n != x->n_out)
    return core_error(KILN_ERR_INVALID, "%s: cannot unpack %d values into %d", x->name,
                      in[0].list->n, x->n_out);
  for (int i = 0; i < x->n_out; i++) out[i] = exec_value_copy(&in[0].list->items[i]);
  return 0;
}

/* TupleIndex / __getitem__: in[0] the sequence, in[1] the index (or the
 * instruction's constant k when n_in == 1). Negative indices count from
 * the end, as Python. */
int exec_prim_getitem(const exec_instr *x, exec_value *in, exec_value *out) {
  const exec_value *ix = x->n_in > 1 ? &in[1] : &x->k;
  if (in[0].tag != EXEC_V_LIST && in[0].tag != EXEC_V_TUPLE)
    return core_error(KILN_ERR_INVALID, "%s: expected a list or tuple, got %s", x->name,
                      exec_tag_name(in[0].tag));
  if (ix->tag != EXEC_V_INT)
    return core_error(KILN_ERR_INVALID, "%s: index must be an int", x->name);
  int64_t n = in[0].list->n, i = ix->i < 0 ? ix->i + n : ix->i;
  if (i < 0 || i >= n)
    return core_error(KILN_ERR_INVALID, "%s: index %lld out of range for a sequence of %lld",
                      x->name, (long long)ix->i, (long long)n);
  out[0] = exec_value_copy(&in[0].list->items[i]);
  return 0;
}

int exec_prim_len(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag == EXEC_V_LIST || in[0].tag == EXEC_V_TUPLE) {
    out[0] = (exec_value){.tag = EXEC_V_INT, .i = in[0].list->n};
    return 0;
  }
  if (in[0].tag == EXEC_V_TENSOR) {
    if (in[0].t->ndim == 0)
      return core_error(KILN_ERR_INVALID, "%s: len() of a 0-d tensor", x->name);
    out[0] = (exec_value){.tag = EXEC_V_INT, .i = in[0].t->shape[0]};
    return 0;
  }
  return core_error(KILN_ERR_INVALID, "%s: len() of a %s", x->name, exec_tag_name(in[0].tag));
}
