/* src/ir/scalar.h: what the number builtins of prims.def mean, and what a
 * prim::Constant holds: each said once, for the compiler and the
 * interpreter's builtins (src/exec) and for constant folding,
 * differentiation and fusion (src/passes, src/exec). */
#ifndef KILN_IR_SCALAR_H
#define KILN_IR_SCALAR_H

#include "ir.h"

/* ---- number semantics (number.c) ------------------------------------------ */

/* A Python number as the builtins see it: int (int64), float (double) or
 * bool. */
typedef enum ir_num_tag { IR_NUM_INT = 0, IR_NUM_FLOAT, IR_NUM_BOOL } ir_num_tag;

typedef struct ir_num {
  uint8_t tag; /* ir_num_tag */
  union {
    int64_t i;
    double f;
    bool b;
  };
} ir_num;

/* Evaluates number builtin `prim` (an ir_prim) on n_in numbers, under
 * Note [Number semantics] (number.c). Returns 1 with *out set; 0 when prim
 * is not a number builtin of that arity or an input's tag does not take
 * part (the caller has other meanings for other values: str + str, list ==
 * list); KILN_ERR_INVALID when the builtin raises (with the message
 * "name: ..." set, unless name is NULL): division or modulo by zero, a range step of 0, a float
 * that converts to no int. Never undefined behaviour. */
int ir_num_eval(int prim, const char *name, const ir_num *in, int n_in, ir_num *out);

/* ---- constants (constant.c) ---------------------------------------------- */

typedef enum ir_const_tag {
  IR_CONST_NONE = 0,
  IR_CONST_INT,
  IR_CONST_FLOAT,
  IR_CONST_BOOL,
  IR_CONST_STR,
  IR_CONST_DEVICE,
  IR_CONST_INTS,   /* int[] (also an empty float[]: `[]` parses as an int list) */
  IR_CONST_BOOLS,  /* bool[], stored as ints */
  IR_CONST_FLOATS, /* float[] */
  IR_CONST_IVALUE  /* anything else the parser keeps (tuples, nested lists) */
} ir_const_tag;

/* A prim::Constant's value. Strings, lists and the ivalue point into the
 * node's attribute (the graph's arena): valid while the node lives. */
typedef struct ir_const {
  uint8_t tag; /* ir_const_tag */
  int64_t i;
  double f;
  bool b;
  const char *s;
  const int64_t *ints; /* INTS, BOOLS */
  const double *floats;
  int n;               /* list length */
  const ir_ivalue *iv;
  const ir_type *type; /* the output's type */
} ir_const;

/* Note [Constant values]: the one reading of a prim::Constant node n (one
 * output): no `value` is None (Function constants carry only a name); an
 * int attribute is a bool when the type is bool (Optional[bool] too), else
 * an int; a str is a Device when the type is Device; an int list is a bool
 * list when the type is bool[], an empty float list when the type is
 * float[] and it is empty (`[]` parses as ints). 0 with *out set, or
 * KILN_ERR_UNSUPPORTED with the error set for an attribute kind no
 * constant uses. */
int ir_constant_of(const ir_node *n, ir_const *out);

#endif
