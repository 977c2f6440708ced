/* src/passes/const.c: prim::Constant values as passes see them (reading,
 * inserting) and the evaluation of prims.def number builtins on constants
 * for constant folding.
 *
 * Note [Folding semantics]: a folded builtin must give exactly what the
 * interpreter gives at run time (src/exec/prims.c), or folding would
 * change programs. The evaluator below follows prims.c case by case
 * (Python's int/float rules: int op int is int, anything with a float is
 * float, bools count as ints; floor division and remainder take the
 * divisor's sign; true division is always float; int ** negative int is
 * float). Where prims.c raises (division or modulo by zero, range step 0,
 * int() of a non-finite float, len of a str), nothing is folded, so the
 * error still happens at run time. tests/passes compares folded graphs
 * with the interpreter on the same graphs. (exec may call
 * pass_const_eval itself one day, leaving one definition.) */
#include <math.h>
#include <string.h>

#include "passes.h"

/* ---- reading and writing constants --------------------------------------------- */

bool pass_const_of(const ir_value *v, pass_const *out) {
  const ir_node *n = v->node;
  memset(out, 0, sizeof *out);
  if (!n || n->prim != IR_PRIM_CONSTANT || n->n_outputs != 1) return false;
  const ir_type *t = v->type;
  if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  const ir_attr *a = ir_node_attr(n, "value");
  if (!a) {
    if (v->type->kind != IR_TYPE_NONE && v->type->kind != IR_TYPE_OPTIONAL) return false;
    out->tag = PASS_C_NONE;
    return true;
  }
  switch (a->kind) {
  case IR_ATTR_INT:
    if (t->kind == IR_TYPE_BOOL) {
      out->tag = PASS_C_BOOL;
      out->b = a->i != 0;
    } else {
      out->tag = PASS_C_INT;
      out->i = a->i;
    }
    return true;
  case IR_ATTR_FLOAT:
    out->tag = PASS_C_FLOAT;
    out->f = a->f;
    return true;
  case IR_ATTR_STR:
    out->tag = t->kind == IR_TYPE_DEVICE ? PASS_C_DEVICE : PASS_C_STR;
    out->s = a->s;
    return true;
  case IR_ATTR_INTS:
    if (t->kind != IR_TYPE_LIST) return false;
    if (t->elems[0]->kind == IR_TYPE_INT) {
      out->tag = PASS_C_INTS;
      out->ints = a->ints.v;
    } else if (t->elems[0]->kind == IR_TYPE_FLOAT && a->ints.n == 0) {
      out->tag = PASS_C_FLOATS;
    } else {
      return false; /* bool lists and the like: not folded */
    }
    out->n = a->ints.n;
    return true;
  case IR_ATTR_FLOATS:
    if (t->kind != IR_TYPE_LIST || t->elems[0]->kind != IR_TYPE_FLOAT) return false;
    out->tag = PASS_C_FLOATS;
    out->floats = a->floats.v;
    out->n = a->floats.n;
    return true;
  case IR_ATTR_IVALUE:
    if (a->iv->tag == IR_IV_BOOL && t->kind == IR_TYPE_BOOL) {
      out->tag = PASS_C_BOOL;
      out->b = a->iv->b;
      return true;
    }
    return false;
  default:
    return false;
  }
}

const ir_type *pass_const_type(ir_graph *g, const pass_const *c) {
  switch (c->tag) {
  case PASS_C_INT: return ir_type_int();
  case PASS_C_FLOAT: return ir_type_float();
  case PASS_C_BOOL: return ir_type_bool();
  case PASS_C_STR: return ir_type_str();
  case PASS_C_DEVICE: return ir_type_device();
  case PASS_C_INTS: return ir_type_list(g, ir_type_int());
  case PASS_C_FLOATS: return ir_type_list(g, ir_type_float());
  default: return ir_type_none();
  }
}

ir_value *pass_const_insert(ir_graph *g, const pass_const *c, ir_node *pos) {
  const ir_type *t = pass_const_type(g, c);
  ir_node *n = t ? ir_node_new_prim(g, IR_PRIM_CONSTANT) : NULL;
  if (!n) goto oom;
  int rc = 0;
  switch (c->tag) {
  case PASS_C_INT: rc = ir_node_set_i(n, "value", c->i); break;
  case PASS_C_FLOAT: rc = ir_node_set_f(n, "value", c->f); break;
  case PASS_C_BOOL: rc = ir_node_set_i(n, "value", c->b); break;
  case PASS_C_STR:
  case PASS_C_DEVICE: rc = ir_node_set_s(n, "value", c->s); break;
  case PASS_C_INTS: rc = ir_node_set_is(n, "value", c->ints, c->n); break;
  case PASS_C_FLOATS:
    /* an empty float list prints as [] and parses back as an int list,
     * which fits float[] too */
    rc = c->n ? ir_node_set_fs(n, "value", c->floats, c->n) : ir_node_set_is(n, "value", NULL, 0);
    break;
  default: break; /* None: no value */
  }
  ir_value *v = rc == 0 ? ir_node_add_output(n, t) : NULL;
  if (!v) goto oom;
  ir_node_insert_before(n, pos);
  return v;
oom:
  core_error(KILN_ERR_NOMEM, "constant folding: out of memory");
  return NULL;
}

/* ---- evaluation (Note [Folding semantics]) ---------------------------------------- */

static bool is_num(const pass_const *c) {
  return c->tag == PASS_C_INT || c->tag == PASS_C_FLOAT || c->tag == PASS_C_BOOL;
}
static double num(const pass_const *c) {
  return c->tag == PASS_C_INT ? (double)c->i : c->tag == PASS_C_FLOAT ? c->f : (double)c->b;
}
static bool is_intlike(const pass_const *c) { return c->tag == PASS_C_INT || c->tag == PASS_C_BOOL; }
static int64_t ival(const pass_const *c) { return c->tag == PASS_C_INT ? c->i : c->b; }
static pass_const ci(int64_t i) { return (pass_const){.tag = PASS_C_INT, .i = i}; }
static pass_const cf(double f) { return (pass_const){.tag = PASS_C_FLOAT, .f = f}; }
static pass_const cb(bool b) { return (pass_const){.tag = PASS_C_BOOL, .b = b}; }


/* A double that converts to int64 without undefined behaviour. */
static bool fits_i64(double d) { return isfinite(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0; }

static bool is_list(const pass_const *c) { return c->tag == PASS_C_INTS || c->tag == PASS_C_FLOATS; }
static double item(const pass_const *c, int i) {
  return c->tag == PASS_C_INTS ? (double)c->ints[i] : c->floats[i];
}

/* The interpreter's ==: numbers compare as doubles (so do list items),
 * other values only equal values of the same kind. *known is false for
 * kinds not modelled here. */
static bool value_eq(const pass_const *a, const pass_const *b, bool *known) {
  *known = true;
  if (is_num(a) && is_num(b)) return num(a) == num(b);
  if (is_list(a) && is_list(b)) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
      if (item(a, i) != item(b, i)) return false;
    return true;
  }
  if (a->tag != b->tag) return false;
  switch (a->tag) {
  case PASS_C_NONE: return true;
  case PASS_C_STR:
  case PASS_C_DEVICE: return strcmp(a->s, b->s) == 0;
  default:
    *known = false;
    return false;
  }
}

/* -1, 0, 1, or 2 (unordered: NaN); false when not comparable. */
static bool compare(const pass_const *a, const pass_const *b, int *r) {
  if (is_num(a) && is_num(b)) {
    double x = num(a), y = num(b);
    *r = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
    return true;
  }
  if (a->tag == PASS_C_STR && b->tag == PASS_C_STR) {
    int c = strcmp(a->s, b->s);
    *r = c < 0 ? -1 : c > 0;
    return true;
  }
  return false;
}

static int arith(int prim, const pass_const *a, const pass_const *b, pass_const *out) {
  if (!is_num(a) || !is_num(b)) return 0;
  bool ints = is_intlike(a) && is_intlike(b);
  switch (prim) {
  case IR_PRIM_ADD: *out = ints ? ci(core_wrap_add(ival(a), ival(b))) : cf(num(a) + num(b)); return 1;
  case IR_PRIM_SUB: *out = ints ? ci(core_wrap_sub(ival(a), ival(b))) : cf(num(a) - num(b)); return 1;
  case IR_PRIM_MUL: *out = ints ? ci(core_wrap_mul(ival(a), ival(b))) : cf(num(a) * num(b)); return 1;
  case IR_PRIM_DIV:
    if (num(b) == 0) return 0; /* ZeroDivisionError at run time */
    *out = cf(num(a) / num(b));
    return 1;
  case IR_PRIM_FLOORDIV:
    if (num(b) == 0) return 0;
    if (ints) {
      *out = ci(core_int_floordiv(ival(a), ival(b))); /* Note [Int semantics] */
    } else {
      *out = cf(core_float_floordiv(num(a), num(b)));
    }
    return 1;
  case IR_PRIM_REMAINDER:
    if (num(b) == 0) return 0;
    if (ints) {
      *out = ci(core_int_remainder(ival(a), ival(b)));
    } else {
      *out = cf(core_float_remainder(num(a), num(b)));
    }
    return 1;
  case IR_PRIM_POW:
    if (ints && ival(b) >= 0) {
      *out = ci(core_int_pow(ival(a), ival(b)));
    } else {
      *out = cf(pow(num(a), num(b)));
    }
    return 1;
  default:
    return 0;
  }
}

static int minmax(const pass_const *in, int n_in, bool is_max, pass_const *out) {
  if (n_in == 1) {
    if (in[0].tag != PASS_C_INTS || in[0].n == 0) return 0;
    int64_t best = in[0].ints[0];
    for (int i = 1; i < in[0].n; i++)
      best = is_max ? (in[0].ints[i] > best ? in[0].ints[i] : best)
                    : (in[0].ints[i] < best ? in[0].ints[i] : best);
    *out = ci(best);
    return 1;
  }
  if (n_in != 2 || !is_num(&in[0]) || !is_num(&in[1])) return 0;
  bool pick0 = is_max ? num(&in[0]) >= num(&in[1]) : num(&in[0]) <= num(&in[1]);
  bool any_float = in[0].tag == PASS_C_FLOAT || in[1].tag == PASS_C_FLOAT;
  double r = pick0 ? num(&in[0]) : num(&in[1]);
  if (any_float) {
    *out = cf(r);
    return 1;
  }
  /* the interpreter goes through a double, exact below 2^53 */
  if (fabs(r) >= 9007199254740992.0) return 0;
  *out = ci((int64_t)r);
  return 1;
}

static int unary(int prim, const pass_const *a, pass_const *out) {
  if (!is_num(a)) return 0;
  double x = num(a);
  switch (prim) {
  case IR_PRIM_NEG:
    *out = a->tag == PASS_C_FLOAT ? cf(-a->f) : ci(core_wrap_neg(ival(a)));
    return 1;
  case IR_PRIM_ABS:
  case IR_PRIM_ABS_NUM:
    if (a->tag == PASS_C_FLOAT) *out = cf(fabs(a->f));
    else *out = ci(core_wrap_abs(ival(a)));
    return 1;
  case IR_PRIM_FLOOR:
  case IR_PRIM_CEIL: {
    double r = prim == IR_PRIM_FLOOR ? floor(x) : ceil(x);
    if (!fits_i64(r)) return 0;
    *out = ci((int64_t)r);
    return 1;
  }
  case IR_PRIM_SQRT: *out = cf(sqrt(x)); return 1;
  case IR_PRIM_EXP: *out = cf(exp(x)); return 1;
  case IR_PRIM_LOG: *out = cf(log(x)); return 1;
  case IR_PRIM_TANH: *out = cf(tanh(x)); return 1;
  case IR_PRIM_INT:
    /* the interpreter converts through a double and raises for inf/nan */
    if (!fits_i64(x) || (a->tag != PASS_C_FLOAT && fabs(x) >= 9007199254740992.0)) return 0;
    *out = ci((int64_t)x);
    return 1;
  case IR_PRIM_FLOAT: *out = cf(x); return 1;
  case IR_PRIM_BOOL: *out = cb(x != 0); return 1;
  default: return 0;
  }
}

int pass_const_eval(ir_graph *g, int prim, const pass_const *in, int n_in, pass_const *out) {
  memset(out, 0, sizeof *out);
  switch (prim) {
  case IR_PRIM_ADD:
  case IR_PRIM_SUB:
  case IR_PRIM_MUL:
  case IR_PRIM_DIV:
  case IR_PRIM_FLOORDIV:
  case IR_PRIM_REMAINDER:
  case IR_PRIM_POW:
    return n_in == 2 ? arith(prim, &in[0], &in[1], out) : 0;
  case IR_PRIM_NEG:
  case IR_PRIM_ABS:
  case IR_PRIM_ABS_NUM:
  case IR_PRIM_FLOOR:
  case IR_PRIM_CEIL:
  case IR_PRIM_SQRT:
  case IR_PRIM_EXP:
  case IR_PRIM_LOG:
  case IR_PRIM_TANH:
  case IR_PRIM_INT:
  case IR_PRIM_FLOAT:
  case IR_PRIM_BOOL:
    return n_in == 1 ? unary(prim, &in[0], out) : 0;
  case IR_PRIM_MIN:
  case IR_PRIM_MAX:
    return minmax(in, n_in, prim == IR_PRIM_MAX, out);
  case IR_PRIM_RANGE_LENGTH: {
    if (n_in != 3 || !is_intlike(&in[0]) || !is_intlike(&in[1]) || !is_intlike(&in[2])) return 0;
    int64_t lo = ival(&in[0]), hi = ival(&in[1]), step = ival(&in[2]);
    if (step == 0) return 0; /* ValueError at run time */
    *out = ci(core_range_length(lo, hi, step));
    return 1;
  }
  case IR_PRIM_DERIVE_INDEX:
    if (n_in != 3 || !is_intlike(&in[0]) || !is_intlike(&in[1]) || !is_intlike(&in[2])) return 0;
    *out = ci(core_wrap_add(ival(&in[1]), core_wrap_mul(ival(&in[0]), ival(&in[2]))));
    return 1;
  case IR_PRIM_EQ:
  case IR_PRIM_NE: {
    bool known;
    if (n_in != 2) return 0;
    bool eq = value_eq(&in[0], &in[1], &known);
    if (!known) return 0;
    *out = cb(prim == IR_PRIM_EQ ? eq : !eq);
    return 1;
  }
  case IR_PRIM_LT:
  case IR_PRIM_LE:
  case IR_PRIM_GT:
  case IR_PRIM_GE: {
    int r;
    if (n_in != 2 || !compare(&in[0], &in[1], &r)) return 0;
    bool v = r != 2 && (prim == IR_PRIM_LT   ? r < 0
                        : prim == IR_PRIM_LE ? r <= 0
                        : prim == IR_PRIM_GT ? r > 0
                                             : r >= 0);
    *out = cb(v);
    return 1;
  }
  case IR_PRIM_IS:
  case IR_PRIM_ISNOT: {
    bool known = true;
    if (n_in != 2 || is_list(&in[0]) || is_list(&in[1])) return 0; /* identity of lists */
    bool same = in[0].tag == in[1].tag &&
                (in[0].tag == PASS_C_NONE || value_eq(&in[0], &in[1], &known));
    if (!known) return 0;
    *out = cb(prim == IR_PRIM_IS ? same : !same);
    return 1;
  }
  case IR_PRIM_NOT:
    if (n_in != 1 || in[0].tag != PASS_C_BOOL) return 0;
    *out = cb(!in[0].b);
    return 1;
  case IR_PRIM_AND:
  case IR_PRIM_OR:
  case IR_PRIM_XOR: {
    if (n_in != 2) return 0;
    if (in[0].tag == PASS_C_BOOL && in[1].tag == PASS_C_BOOL) {
      bool a = in[0].b, b = in[1].b;
      *out = cb(prim == IR_PRIM_AND ? (a & b) : prim == IR_PRIM_OR ? (a | b) : (a ^ b));
      return 1;
    }
    if (!is_intlike(&in[0]) || !is_intlike(&in[1])) return 0;
    int64_t a = ival(&in[0]), b = ival(&in[1]);
    *out = ci(prim == IR_PRIM_AND ? (a & b) : prim == IR_PRIM_OR ? (a | b) : (a ^ b));
    return 1;
  }
  case IR_PRIM_LEN:
    if (n_in != 1 || (in[0].tag != PASS_C_INTS && in[0].tag != PASS_C_FLOATS)) return 0;
    *out = ci(in[0].n);
    return 1;
  case IR_PRIM_GETITEM: {
    if (n_in != 2 || in[1].tag != PASS_C_INT) return 0;
    if (in[0].tag != PASS_C_INTS && in[0].tag != PASS_C_FLOATS) return 0;
    int64_t n = in[0].n, i = in[1].i < 0 ? in[1].i + n : in[1].i;
    if (i < 0 || i >= n) return 0; /* IndexError at run time */
    *out = in[0].tag == PASS_C_INTS ? ci(in[0].ints[i]) : cf(in[0].floats[i]);
    return 1;
  }
  default:
    return 0;
  }
}
