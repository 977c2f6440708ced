/* src/ir/number.c: the meaning of prims.def's number builtins, said once.
 * The interpreter's builtins (src/exec/prims.c) and constant folding
 * (src/passes/const.c) both call ir_num_eval, so a folded node gives what
 * running it gives, and an error at run time is never folded away
 * (tests/passes/test_fold.c checks it on random operands).
 *
 * Note [Number semantics]: Python's (TorchScript's) rules on int64 and
 * double. int op int is int, anything with a float is float, bools count
 * as ints (True + True is 2); int arithmetic wraps in two's complement
 * (Note [Int semantics] in src/core/core.h), never C's undefined
 * behaviour; floor division and remainder take the divisor's sign; true
 * division is always float; int ** negative int is float. Comparisons of
 * two ints are exact (never through a double); with a float they compare
 * as doubles, NaN unordered. int(), floor() and ceil() of an int are that
 * int; of a float they truncate (floor, ceil) toward an int and raise
 * when none fits (NaN, the infinities, beyond int64). min/max pick the
 * first operand on ties (and the second when a NaN makes them unordered).
 * Raising: division or modulo by zero, a range step of 0. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "scalar.h"

/* The builtin raises: the message (name: ...) only when there is a name
 * (folding asks quietly). */
__attribute__((format(printf, 2, 3))) static int raise(const char *name, const char *fmt, ...) {
  if (!name) return KILN_ERR_INVALID;
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return core_error(KILN_ERR_INVALID, "%s: %s", name, msg);
}

static bool is_int(const ir_num *a) { return a->tag != IR_NUM_FLOAT; }
static int64_t ival(const ir_num *a) { return a->tag == IR_NUM_INT ? a->i : a->b; }
static double fval(const ir_num *a) {
  return a->tag == IR_NUM_FLOAT ? a->f : a->tag == IR_NUM_INT ? (double)a->i : (double)a->b;
}
static ir_num ni(int64_t i) { return (ir_num){.tag = IR_NUM_INT, .i = i}; }
static ir_num nf(double f) { return (ir_num){.tag = IR_NUM_FLOAT, .f = f}; }
static ir_num nb(bool b) { return (ir_num){.tag = IR_NUM_BOOL, .b = b}; }

/* A float to int64 (truncating), or an error when none fits. */
static int to_int(const char *name, double r, ir_num *out) {
  if (!(r >= -0x1p63 && r < 0x1p63)) /* NaN, inf, beyond int64 */
    return raise(name, "cannot convert %g to int", r);
  *out = ni((int64_t)r);
  return 1;
}

/* -1, 0, 1, or 2 when unordered (a NaN). */
static int compare(const ir_num *a, const ir_num *b) {
  if (is_int(a) && is_int(b)) {
    int64_t x = ival(a), y = ival(b);
    return x < y ? -1 : x > y;
  }
  double x = fval(a), y = fval(b);
  return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
}

static int binary(int prim, const char *name, const ir_num *a, const ir_num *b, ir_num *out) {
  bool ints = is_int(a) && is_int(b);
  switch (prim) {
  case IR_PRIM_ADD: *out = ints ? ni(core_wrap_add(ival(a), ival(b))) : nf(fval(a) + fval(b)); return 1;
  case IR_PRIM_SUB: *out = ints ? ni(core_wrap_sub(ival(a), ival(b))) : nf(fval(a) - fval(b)); return 1;
  case IR_PRIM_MUL: *out = ints ? ni(core_wrap_mul(ival(a), ival(b))) : nf(fval(a) * fval(b)); return 1;
  case IR_PRIM_DIV:
    if (fval(b) == 0) return raise(name, "division by zero");
    *out = nf(fval(a) / fval(b));
    return 1;
  case IR_PRIM_FLOORDIV:
    if (fval(b) == 0) return raise(name, "division by zero");
    *out = ints ? ni(core_int_floordiv(ival(a), ival(b)))
                : nf(core_float_floordiv(fval(a), fval(b)));
    return 1;
  case IR_PRIM_REMAINDER:
    if (fval(b) == 0) return raise(name, "modulo by zero");
    *out = ints ? ni(core_int_remainder(ival(a), ival(b)))
                : nf(core_float_remainder(fval(a), fval(b)));
    return 1;
  case IR_PRIM_POW:
    *out = ints && ival(b) >= 0 ? ni(core_int_pow(ival(a), ival(b))) : nf(pow(fval(a), fval(b)));
    return 1;
  case IR_PRIM_MIN:
  case IR_PRIM_MAX: {
    int c = compare(a, b);
    bool pick0 = prim == IR_PRIM_MAX ? (c == 0 || c == 1) : (c == 0 || c == -1);
    const ir_num *r = pick0 ? a : b;
    *out = ints ? ni(ival(r)) : nf(fval(r));
    return 1;
  }
  case IR_PRIM_EQ: *out = nb(compare(a, b) == 0); return 1;
  case IR_PRIM_NE: *out = nb(compare(a, b) != 0); return 1;
  case IR_PRIM_LT: *out = nb(compare(a, b) == -1); return 1;
  case IR_PRIM_LE: *out = nb(compare(a, b) == -1 || compare(a, b) == 0); return 1;
  case IR_PRIM_GT: *out = nb(compare(a, b) == 1); return 1;
  case IR_PRIM_GE: *out = nb(compare(a, b) == 1 || compare(a, b) == 0); return 1;
  case IR_PRIM_AND:
  case IR_PRIM_OR:
  case IR_PRIM_XOR: {
    if (!ints) return 0;
    int64_t x = ival(a), y = ival(b);
    int64_t r = prim == IR_PRIM_AND ? (x & y) : prim == IR_PRIM_OR ? (x | y) : (x ^ y);
    *out = a->tag == IR_NUM_BOOL && b->tag == IR_NUM_BOOL ? nb(r != 0) : ni(r);
    return 1;
  }
  default: return 0;
  }
}

static int unary(int prim, const char *name, const ir_num *a, ir_num *out) {
  switch (prim) {
  case IR_PRIM_NEG:
    *out = is_int(a) ? ni(core_wrap_neg(ival(a))) : nf(-a->f);
    return 1;
  case IR_PRIM_ABS:
  case IR_PRIM_ABS_NUM:
    *out = is_int(a) ? ni(core_wrap_abs(ival(a))) : nf(fabs(a->f));
    return 1;
  case IR_PRIM_FLOOR:
    if (is_int(a)) return *out = ni(ival(a)), 1;
    return to_int(name, floor(a->f), out);
  case IR_PRIM_CEIL:
    if (is_int(a)) return *out = ni(ival(a)), 1;
    return to_int(name, ceil(a->f), out);
  case IR_PRIM_INT:
    if (is_int(a)) return *out = ni(ival(a)), 1;
    return to_int(name, a->f, out); /* truncation toward zero, as Python's int() */
  case IR_PRIM_FLOAT: *out = nf(fval(a)); return 1;
  case IR_PRIM_BOOL: *out = nb(is_int(a) ? ival(a) != 0 : a->f != 0); return 1;
  case IR_PRIM_SQRT: *out = nf(sqrt(fval(a))); return 1;
  case IR_PRIM_EXP: *out = nf(exp(fval(a))); return 1;
  case IR_PRIM_LOG: *out = nf(log(fval(a))); return 1;
  case IR_PRIM_TANH: *out = nf(tanh(fval(a))); return 1;
  case IR_PRIM_NOT:
    if (a->tag != IR_NUM_BOOL) return 0;
    *out = nb(!a->b);
    return 1;
  default: return 0;
  }
}

int ir_num_eval(int prim, const char *name, const ir_num *in, int n_in, ir_num *out) {
  switch (n_in) {
  case 1: return unary(prim, name, &in[0], out);
  case 2: return binary(prim, name, &in[0], &in[1], out);
  case 3:
    if (!is_int(&in[0]) || !is_int(&in[1]) || !is_int(&in[2])) return 0;
    if (prim == IR_PRIM_RANGE_LENGTH) {
      if (ival(&in[2]) == 0)
        return raise(name, "range() step must not be zero");
      *out = ni(core_range_length(ival(&in[0]), ival(&in[1]), ival(&in[2])));
      return 1;
    }
    if (prim == IR_PRIM_DERIVE_INDEX) { /* (index, start, step) -> start + index * step */
      *out = ni(core_wrap_add(ival(&in[1]), core_wrap_mul(ival(&in[0]), ival(&in[2]))));
      return 1;
    }
    return 0;
  default: return 0;
  }
}
