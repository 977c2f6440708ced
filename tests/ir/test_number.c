/* tests/ir/test_number.c: the number table (src/ir/number.c) on values
 * worked out by hand from Python's rules: exact int comparisons and
 * conversions beyond 2^53, wrapping int64, raising where Python raises. */
#include <math.h>

#include "ir/scalar.h"
#include "test.h"

static ir_num I(int64_t i) { return (ir_num){.tag = IR_NUM_INT, .i = i}; }
static ir_num F(double f) { return (ir_num){.tag = IR_NUM_FLOAT, .f = f}; }
static ir_num B(bool b) { return (ir_num){.tag = IR_NUM_BOOL, .b = b}; }

static ir_num eval(int prim, ir_num a, ir_num b, ir_num c, int n, int *rc) {
  ir_num in[3] = {a, b, c}, r = {0};
  *rc = ir_num_eval(prim, "t", in, n, &r);
  return r;
}

TEST(ir_number_table_by_hand) {
  int rc;
  const int64_t big = 9007199254740993; /* 2^53 + 1: no double holds it */
  ir_num r = eval(IR_PRIM_EQ, I(big), I(big - 1), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_BOOL && !r.b); /* Python: False */
  r = eval(IR_PRIM_LT, I(big - 1), I(big), I(0), 2, &rc);
  CHECK(rc == 1 && r.b);
  r = eval(IR_PRIM_EQ, I(3), F(3.0), I(0), 2, &rc);
  CHECK(rc == 1 && r.b);
  r = eval(IR_PRIM_EQ, F(NAN), F(NAN), I(0), 2, &rc);
  CHECK(rc == 1 && !r.b);
  r = eval(IR_PRIM_INT, I(big), I(0), I(0), 1, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_INT && r.i == big);
  r = eval(IR_PRIM_FLOOR, I(INT64_MAX), I(0), I(0), 1, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_INT && r.i == INT64_MAX);
  r = eval(IR_PRIM_INT, F(-2.7), I(0), I(0), 1, &rc);
  CHECK(rc == 1 && r.i == -2);
  r = eval(IR_PRIM_CEIL, F(-2.5), I(0), I(0), 1, &rc);
  CHECK(rc == 1 && r.i == -2);
  eval(IR_PRIM_INT, F(0x1p63), I(0), I(0), 1, &rc);
  CHECK(rc == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "t: cannot convert");
  r = eval(IR_PRIM_MAX, I(INT64_MAX), I(INT64_MAX - 1), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_INT && r.i == INT64_MAX);
  r = eval(IR_PRIM_MIN, I(4), F(2.5), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_FLOAT && r.f == 2.5);
  /* wraps as int64 (PyTorch), never C's undefined behaviour */
  r = eval(IR_PRIM_DERIVE_INDEX, I(INT64_MAX), I(1), I(1), 3, &rc);
  CHECK(rc == 1 && r.i == INT64_MIN);
  r = eval(IR_PRIM_DERIVE_INDEX, I(3), I(10), I(-2), 3, &rc); /* 10 + 3 * -2 */
  CHECK(rc == 1 && r.i == 4);
  r = eval(IR_PRIM_ADD, B(true), B(true), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_INT && r.i == 2);
  r = eval(IR_PRIM_FLOORDIV, I(-7), I(2), I(0), 2, &rc);
  CHECK(rc == 1 && r.i == -4);
  r = eval(IR_PRIM_REMAINDER, I(7), I(-2), I(0), 2, &rc);
  CHECK(rc == 1 && r.i == -1);
  r = eval(IR_PRIM_POW, I(2), I(-1), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_FLOAT && r.f == 0.5);
  r = eval(IR_PRIM_AND, B(true), B(false), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_BOOL && !r.b);
  r = eval(IR_PRIM_XOR, I(6), B(true), I(0), 2, &rc);
  CHECK(rc == 1 && r.tag == IR_NUM_INT && r.i == 7);
  eval(IR_PRIM_DIV, I(1), F(-0.0), I(0), 2, &rc);
  CHECK(rc == KILN_ERR_INVALID);
  eval(IR_PRIM_REMAINDER, F(1), I(0), I(0), 2, &rc);
  CHECK(rc == KILN_ERR_INVALID);
  eval(IR_PRIM_RANGE_LENGTH, I(0), I(5), I(0), 3, &rc);
  CHECK(rc == KILN_ERR_INVALID);
  r = eval(IR_PRIM_RANGE_LENGTH, I(0), I(5), I(2), 3, &rc);
  CHECK(rc == 1 && r.i == 3);
  /* not numbers' business: floats into bitwise ops, NOT of an int */
  eval(IR_PRIM_AND, F(1), I(1), I(0), 2, &rc);
  CHECK(rc == 0);
  eval(IR_PRIM_NOT, I(1), I(0), I(0), 1, &rc);
  CHECK(rc == 0);
}
