/* src/passes/const.c: prim::Constant values as passes see them (reading,
 * inserting) and the evaluation of prims.def builtins on constants for
 * constant folding.
 *
 * Note [Folding semantics]: a folded builtin must give exactly what the
 * interpreter gives at run time, or folding would change programs. Number
 * builtins are evaluated by the same function the interpreter calls
 * (ir_num_eval, Note [Number semantics] in src/ir/number.c); where it
 * raises (division or modulo by zero, range step 0, int() of a non-finite
 * float), nothing is folded, so the error still happens at run time. The
 * rest (== on strings and lists, len and [] of list constants, `is`)
 * follows src/exec/prims.c. tests/passes/test_fold.c compares folding with
 * running on random operands and on graphs. */
#include <string.h>

#include "ir/scalar.h"
#include "passes.h"

/* ---- reading and writing constants --------------------------------------------- */

bool pass_const_of(const ir_value *v, pass_const *out) {
  const ir_node *n = v->node;
  ir_const c;
  memset(out, 0, sizeof *out);
  if (!n || n->prim != IR_PRIM_CONSTANT || n->n_outputs != 1) return false;
  if (ir_constant_of(n, &c) < 0) return false;
  const ir_type *t = v->type;
  if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  switch (c.tag) {
  case IR_CONST_NONE:
    if (v->type->kind != IR_TYPE_NONE && v->type->kind != IR_TYPE_OPTIONAL) return false;
    out->tag = PASS_C_NONE;
    return true;
  case IR_CONST_INT: out->tag = PASS_C_INT; out->i = c.i; return true;
  case IR_CONST_FLOAT: out->tag = PASS_C_FLOAT; out->f = c.f; return true;
  case IR_CONST_BOOL: out->tag = PASS_C_BOOL; out->b = c.b; return true;
  case IR_CONST_STR: out->tag = PASS_C_STR; out->s = c.s; return true;
  case IR_CONST_DEVICE: out->tag = PASS_C_DEVICE; out->s = c.s; return true;
  case IR_CONST_INTS:
    if (t->kind != IR_TYPE_LIST || t->elems[0]->kind != IR_TYPE_INT) return false;
    out->tag = PASS_C_INTS;
    out->ints = c.ints;
    out->n = c.n;
    return true;
  case IR_CONST_FLOATS:
    if (t->kind != IR_TYPE_LIST || t->elems[0]->kind != IR_TYPE_FLOAT) return false;
    out->tag = PASS_C_FLOATS;
    out->floats = c.floats;
    out->n = c.n;
    return true;
  case IR_CONST_IVALUE:
    if (c.iv->tag == IR_IV_BOOL && t->kind == IR_TYPE_BOOL) {
      out->tag = PASS_C_BOOL;
      out->b = c.iv->b;
      return true;
    }
    return false;
  default:
    return false; /* bool lists and the like: not folded */
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

static bool as_num(const pass_const *c, ir_num *n) {
  switch (c->tag) {
  case PASS_C_INT: *n = (ir_num){.tag = IR_NUM_INT, .i = c->i}; return true;
  case PASS_C_FLOAT: *n = (ir_num){.tag = IR_NUM_FLOAT, .f = c->f}; return true;
  case PASS_C_BOOL: *n = (ir_num){.tag = IR_NUM_BOOL, .b = c->b}; return true;
  default: return false;
  }
}

static pass_const from_num(const ir_num *r) {
  return r->tag == IR_NUM_INT     ? (pass_const){.tag = PASS_C_INT, .i = r->i}
         : r->tag == IR_NUM_FLOAT ? (pass_const){.tag = PASS_C_FLOAT, .f = r->f}
                                  : (pass_const){.tag = PASS_C_BOOL, .b = r->b};
}

static pass_const ci(int64_t i) { return (pass_const){.tag = PASS_C_INT, .i = i}; }
static pass_const cf(double f) { return (pass_const){.tag = PASS_C_FLOAT, .f = f}; }
static pass_const cb(bool b) { return (pass_const){.tag = PASS_C_BOOL, .b = b}; }

static bool is_list(const pass_const *c) { return c->tag == PASS_C_INTS || c->tag == PASS_C_FLOATS; }
static ir_num item(const pass_const *c, int i) {
  return c->tag == PASS_C_INTS ? (ir_num){.tag = IR_NUM_INT, .i = c->ints[i]}
                               : (ir_num){.tag = IR_NUM_FLOAT, .f = c->floats[i]};
}

static bool num_eq(const ir_num *a, const ir_num *b) {
  ir_num in[2] = {*a, *b}, r;
  return ir_num_eval(IR_PRIM_EQ, NULL, in, 2, &r) == 1 && r.b;
}

/* The interpreter's ==: numbers by Note [Number semantics] (so are list
 * items), other values only equal values of the same kind. *known is
 * false for kinds not modelled here. */
static bool value_eq(const pass_const *a, const pass_const *b, bool *known) {
  ir_num x, y;
  *known = true;
  if (as_num(a, &x) && as_num(b, &y)) return num_eq(&x, &y);
  if (is_list(a) && is_list(b)) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
      ir_num p = item(a, i), q = item(b, i);
      if (!num_eq(&p, &q)) return false;
    }
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

/* A number builtin on number constants: 1 folded, 0 not (an input is not
 * a number, or the builtin raises: it stays and raises at run time). */
static int eval_number(int prim, const pass_const *in, int n_in, pass_const *out) {
  ir_num a[3], r;
  if (n_in < 1 || n_in > 3) return 0;
  for (int i = 0; i < n_in; i++)
    if (!as_num(&in[i], &a[i])) return 0;
  if (ir_num_eval(prim, NULL, a, n_in, &r) != 1) return 0;
  *out = from_num(&r);
  return 1;
}

int pass_const_eval(ir_graph *g, int prim, const pass_const *in, int n_in, pass_const *out) {
  memset(out, 0, sizeof *out);
  if (eval_number(prim, in, n_in, out)) return 1;
  switch (prim) {
  case IR_PRIM_MIN:
  case IR_PRIM_MAX: {
    if (n_in != 1 || in[0].tag != PASS_C_INTS || in[0].n == 0) return 0;
    bool is_max = prim == IR_PRIM_MAX;
    int64_t best = in[0].ints[0];
    for (int i = 1; i < in[0].n; i++)
      best = is_max ? (in[0].ints[i] > best ? in[0].ints[i] : best)
                    : (in[0].ints[i] < best ? in[0].ints[i] : best);
    *out = ci(best);
    return 1;
  }
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
    if (n_in != 2 || in[0].tag != PASS_C_STR || in[1].tag != PASS_C_STR) return 0;
    int r = strcmp(in[0].s, in[1].s);
    *out = cb(prim == IR_PRIM_LT   ? r < 0
              : prim == IR_PRIM_LE ? r <= 0
              : prim == IR_PRIM_GT ? r > 0
                                   : r >= 0);
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
