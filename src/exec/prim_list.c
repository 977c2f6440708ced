/* src/exec/prim_list.c: list and tuple builtins of the interpreter
 * (prim::ListConstruct, ListUnpack, TupleConstruct, TupleUnpack,
 * TupleIndex, aten::__getitem__, aten::len, aten::all/any of a bool list). */
#include <string.h>

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
  if (in[0].tag == EXEC_V_STR) { /* bytes; the graphs' strings are ASCII messages */
    out[0] = (exec_value){.tag = EXEC_V_INT, .i = (int64_t)strlen(in[0].s)};
    return 0;
  }
  return core_error(KILN_ERR_INVALID, "%s: len() of a %s", x->name, exec_tag_name(in[0].tag));
}

/* aten::slice.t(list, start=None, end=None, step=1): Python's slice of a
 * list (bounds clamped, negative ones from the end), as a new list. */
int exec_prim_list_slice(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_LIST)
    return core_error(KILN_ERR_INVALID, "%s: expected a list, got %s", x->name,
                      exec_tag_name(in[0].tag));
  int64_t n = in[0].list->n, step = in[3].tag == EXEC_V_INT ? in[3].i : 1;
  if (step == 0) return core_error(KILN_ERR_INVALID, "%s: slice step cannot be zero", x->name);
  int64_t lo_def = step > 0 ? 0 : n - 1, hi_def = step > 0 ? n : -1;
  int64_t b[2];
  for (int k = 0; k < 2; k++) {
    const exec_value *v = &in[1 + k];
    if (v->tag == EXEC_V_NONE) {
      b[k] = k ? hi_def : lo_def;
      continue;
    }
    int64_t i = v->i < 0 ? v->i + n : v->i;
    if (step > 0) i = i < 0 ? 0 : i > n ? n : i;
    else i = i < -1 ? -1 : i > n - 1 ? n - 1 : i;
    b[k] = i;
  }
  int64_t len = step > 0 ? (b[1] > b[0] ? (b[1] - b[0] + step - 1) / step : 0)
                         : (b[0] > b[1] ? (b[0] - b[1] - step - 1) / -step : 0);
  exec_value *items = core_alloc((size_t)(len ? len : 1) * sizeof *items);
  if (!items) return KILN_ERR_NOMEM;
  for (int64_t k = 0; k < len; k++) items[k] = in[0].list->items[b[0] + k * step];
  out[0] = exec_list_make(EXEC_V_LIST, items, (int)len);
  core_free(items);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

/* aten::all.bool / aten::any.bool (bool[] self): Python's all()/any() of a
 * list of bools (TransformerEncoderLayer's fast-path checks). */
static int all_any(const exec_instr *x, exec_value *in, exec_value *out, bool any) {
  if (in[0].tag != EXEC_V_LIST)
    return core_error(KILN_ERR_INVALID, "%s: expected a list, got %s", x->name,
                      exec_tag_name(in[0].tag));
  bool r = !any;
  for (int i = 0; i < in[0].list->n; i++) {
    const exec_value *v = &in[0].list->items[i];
    if (v->tag != EXEC_V_BOOL)
      return core_error(KILN_ERR_INVALID, "%s: expected a list of bools, got a %s element",
                        x->name, exec_tag_name(v->tag));
    if (v->b == any) r = any;
  }
  out[0] = (exec_value){.tag = EXEC_V_BOOL, .b = r};
  return 0;
}
int exec_prim_all_list(const exec_instr *x, exec_value *in, exec_value *out) {
  return all_any(x, in, out, false);
}
int exec_prim_any_list(const exec_instr *x, exec_value *in, exec_value *out) {
  return all_any(x, in, out, true);
}
