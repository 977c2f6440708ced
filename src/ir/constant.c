/* src/ir/constant.c: reading a prim::Constant node's value (Note [Constant
 * values] in scalar.h), for the compiler, constant folding, differentiation
 * and fusion. */
#include "scalar.h"

int ir_constant_of(const ir_node *n, ir_const *out) {
  const ir_attr *a = ir_node_attr(n, "value");
  const ir_type *t = n->n_outputs ? n->outputs[0]->type : ir_type_none();
  *out = (ir_const){.tag = IR_CONST_NONE, .type = t};
  if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  if (!a) return 0;
  switch (a->kind) {
  case IR_ATTR_INT:
    if (t->kind == IR_TYPE_BOOL) {
      out->tag = IR_CONST_BOOL;
      out->b = a->i != 0;
    } else {
      out->tag = IR_CONST_INT;
      out->i = a->i;
    }
    return 0;
  case IR_ATTR_FLOAT:
    out->tag = IR_CONST_FLOAT;
    out->f = a->f;
    return 0;
  case IR_ATTR_STR:
    out->tag = t->kind == IR_TYPE_DEVICE ? IR_CONST_DEVICE : IR_CONST_STR;
    out->s = a->s;
    return 0;
  case IR_ATTR_INTS: {
    int ek = t->kind == IR_TYPE_LIST ? t->elems[0]->kind : -1;
    out->tag = ek == IR_TYPE_BOOL                       ? IR_CONST_BOOLS
               : ek == IR_TYPE_FLOAT && a->ints.n == 0 ? IR_CONST_FLOATS
                                                       : IR_CONST_INTS;
    out->ints = a->ints.v;
    out->n = a->ints.n;
    return 0;
  }
  case IR_ATTR_FLOATS:
    out->tag = IR_CONST_FLOATS;
    out->floats = a->floats.v;
    out->n = a->floats.n;
    return 0;
  case IR_ATTR_IVALUE:
    out->tag = IR_CONST_IVALUE;
    out->iv = a->iv;
    return 0;
  default:
    return core_error(KILN_ERR_UNSUPPORTED, "prim::Constant: unsupported value kind %d", a->kind);
  }
}
