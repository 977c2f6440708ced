/* tests/passes/test_fold.c: constant folding: int/float/bool builtins with
 * the interpreter's semantics (checked against the interpreter itself, on
 * listed cases and on random operands of the number table), errors left
 * to run time, If with a constant condition, loops that never run,
 * ListConstruct into list constants, size/dim/len from types, `is None`,
 * and tensor ops never folded. */
#include <math.h>
#include <string.h>

#include "harness.h"

TEST(pass_fold_int_arithmetic) {
  th_expect("fold ints", pass_constant_fold,
            "graph(%x : Tensor):\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %3 : int = prim::Constant[value=3]()\n"
            "  %4 : int = aten::mul(%2, %3)\n"
            "  %5 : int = aten::add(%4, %2)\n"
            "  %6 : bool = aten::gt(%5, %3)\n"
            "  %7 : bool = aten::__not__(%6)\n"
            "  %8 : (int, bool) = prim::TupleConstruct(%5, %7)\n"
            "  return (%8)\n",
            "graph(%x : Tensor):\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %3 : int = prim::Constant[value=3]()\n"
            "  %9 : int = prim::Constant[value=6]()\n"
            "  %10 : int = prim::Constant[value=8]()\n"
            "  %11 : bool = prim::Constant[value=1]()\n"
            "  %12 : bool = prim::Constant[value=0]()\n"
            "  %8 : (int, bool) = prim::TupleConstruct(%10, %12)\n"
            "  return (%8)\n",
            4);
}

/* Builds `graph(): %a = const; %b = const; %r = <kind>(%a, %b); return (%r)`
 * for each case, folds it, and compares the folded constant with what the
 * interpreter computes for the unfolded graph. */
TEST(pass_fold_matches_interpreter) {
  static const struct {
    const char *a, *b, *kind, *out;
    bool folds;
  } cases[] = {
      {"int = prim::Constant[value=-7]", "int = prim::Constant[value=2]", "aten::floordiv", "int", true},
      {"int = prim::Constant[value=-7]", "int = prim::Constant[value=2]", "aten::remainder", "int", true},
      {"int = prim::Constant[value=7]", "int = prim::Constant[value=-2]", "aten::remainder", "int", true},
      {"float = prim::Constant[value=-7.5]", "int = prim::Constant[value=2]", "aten::floordiv", "float", true},
      {"float = prim::Constant[value=-7.5]", "float = prim::Constant[value=2.]", "aten::remainder", "float", true},
      {"int = prim::Constant[value=7]", "int = prim::Constant[value=2]", "aten::div", "float", true},
      {"int = prim::Constant[value=7]", "int = prim::Constant[value=0]", "aten::div", "float", false},
      {"int = prim::Constant[value=7]", "int = prim::Constant[value=0]", "aten::floordiv", "int", false},
      {"float = prim::Constant[value=7.]", "float = prim::Constant[value=0.]", "aten::remainder", "float", false},
      {"int = prim::Constant[value=3]", "int = prim::Constant[value=4]", "aten::pow", "Scalar", true},
      {"int = prim::Constant[value=2]", "int = prim::Constant[value=-1]", "aten::pow", "Scalar", true},
      {"int = prim::Constant[value=3]", "float = prim::Constant[value=0.5]", "aten::add", "float", true},
      {"int = prim::Constant[value=3]", "float = prim::Constant[value=0.5]", "aten::mul", "float", true},
      {"int = prim::Constant[value=3]", "int = prim::Constant[value=5]", "aten::sub", "int", true},
      {"int = prim::Constant[value=3]", "float = prim::Constant[value=3.]", "aten::eq", "bool", true},
      {"float = prim::Constant[value=nan]", "float = prim::Constant[value=nan]", "aten::eq", "bool", true},
      {"float = prim::Constant[value=nan]", "float = prim::Constant[value=1.]", "aten::lt", "bool", true},
      {"float = prim::Constant[value=nan]", "float = prim::Constant[value=1.]", "aten::ge", "bool", true},
      {"str = prim::Constant[value=\"ab\"]", "str = prim::Constant[value=\"b\"]", "aten::lt", "bool", true},
      {"str = prim::Constant[value=\"ab\"]", "str = prim::Constant[value=\"ab\"]", "aten::eq", "bool", true},
      {"int = prim::Constant[value=6]", "int = prim::Constant[value=3]", "aten::__and__", "int", true},
      {"bool = prim::Constant[value=1]", "bool = prim::Constant[value=0]", "aten::__or__", "bool", true},
      {"bool = prim::Constant[value=1]", "bool = prim::Constant[value=1]", "aten::__xor__", "bool", true},
      {"int = prim::Constant[value=4]", "float = prim::Constant[value=2.5]", "prim::min", "Scalar", true},
      {"int = prim::Constant[value=4]", "int = prim::Constant[value=9]", "prim::max", "Scalar", true},
      {"NoneType = prim::Constant", "NoneType = prim::Constant", "aten::__is__", "bool", true},
      {"int = prim::Constant[value=1]", "NoneType = prim::Constant", "aten::__isnot__", "bool", true},
      {"int[] = prim::Constant[value=[4, 5, 6]]", "int = prim::Constant[value=-1]", "aten::__getitem__", "int", true},
      {"int[] = prim::Constant[value=[4, 5, 6]]", "int = prim::Constant[value=3]", "aten::__getitem__", "int", false},
      {"int[] = prim::Constant[value=[4, 5]]", "int[] = prim::Constant[value=[4, 5]]", "aten::eq", "bool", true},
      /* int64 wraps around (two's complement) in both, never C's undefined
       * behaviour or a SIGFPE; pow squares (a huge exponent is no hang) */
      {"int = prim::Constant[value=9223372036854775807]", "int = prim::Constant[value=1]", "aten::add", "int", true},
      {"int = prim::Constant[value=-9223372036854775808]", "int = prim::Constant[value=1]", "aten::sub", "int", true},
      {"int = prim::Constant[value=4611686018427387904]", "int = prim::Constant[value=4]", "aten::mul", "int", true},
      {"int = prim::Constant[value=-9223372036854775808]", "int = prim::Constant[value=-1]", "aten::floordiv", "int", true},
      {"int = prim::Constant[value=-9223372036854775808]", "int = prim::Constant[value=-1]", "aten::remainder", "int", true},
      {"int = prim::Constant[value=3]", "int = prim::Constant[value=1000000000000000000]", "aten::pow", "Scalar", true},
      {"int = prim::Constant[value=-1]", "int = prim::Constant[value=1000000000000000001]", "aten::pow", "Scalar", true},
  };
  static const struct {
    const char *a, *kind, *out;
  } unary[] = {
      {"float = prim::Constant[value=-2.5]", "aten::floor", "int"},
      {"float = prim::Constant[value=-2.5]", "aten::ceil", "int"},
      {"float = prim::Constant[value=-2.5]", "aten::neg", "Scalar"},
      {"int = prim::Constant[value=-3]", "aten::abs", "Scalar"},
      {"float = prim::Constant[value=2.]", "aten::sqrt", "float"},
      {"float = prim::Constant[value=0.5]", "aten::exp", "float"},
      {"float = prim::Constant[value=0.5]", "aten::log", "float"},
      {"float = prim::Constant[value=0.5]", "aten::tanh", "float"},
      {"float = prim::Constant[value=-2.7]", "aten::Int", "int"},
      {"int = prim::Constant[value=3]", "aten::Float", "float"},
      {"float = prim::Constant[value=0.]", "aten::Bool", "bool"},
      {"int[] = prim::Constant[value=[3, 1, 2]]", "aten::len", "int"},
      {"int[] = prim::Constant[value=[3, 1, 2]]", "prim::min", "int"},
      {"int = prim::Constant[value=-9223372036854775808]", "aten::neg", "Scalar"},
      {"int = prim::Constant[value=-9223372036854775808]", "aten::abs", "Scalar"},
  };
  char text[1024];
  int n_cases = (int)(sizeof cases / sizeof *cases), n_unary = (int)(sizeof unary / sizeof *unary);
  for (int i = 0; i < n_cases + n_unary; i++) {
    if (i < n_cases)
      snprintf(text, sizeof text,
               "graph():\n  %%a : %s()\n  %%b : %s()\n  %%r : %s = %s(%%a, %%b)\n  return (%%r)\n",
               cases[i].a, cases[i].b, cases[i].out, cases[i].kind);
    else
      snprintf(text, sizeof text, "graph():\n  %%a : %s()\n  %%r : %s = %s(%%a)\n  return (%%r)\n",
               unary[i - n_cases].a, unary[i - n_cases].out, unary[i - n_cases].kind);
    ir_graph *g = th_parse(text), *orig = th_parse(text);
    if (!g || !orig) {
      ir_graph_free(g);
      ir_graph_free(orig);
      continue;
    }
    int rc = pass_constant_fold(g);
    bool folds = i < n_cases ? cases[i].folds : true;
    CHECK_MSG(rc == (folds ? 1 : 0), "case %d (%s): fold returned %d", i, text, rc);
    CHECK_MSG(ir_graph_verify(g) == 0, "case %d: %s", i, kiln_last_error());
    const ir_node *last = ir_block_return(ir_graph_top(g), 0)->node;
    CHECK_MSG(last->prim == (folds ? IR_PRIM_CONSTANT : ir_block_return(ir_graph_top(orig), 0)->node->prim),
              "case %d: result made by %s", i, ir_node_kind(last));
    exec_value oa[1], ob[1];
    int na = th_run(orig, NULL, oa, 1), nb = th_run(g, NULL, ob, 1);
    if (folds) {
      CHECK_MSG(na == 1 && nb == 1, "case %d: runs %d %d: %s", i, na, nb, kiln_last_error());
      char why[256] = "";
      if (na == 1 && nb == 1)
        CHECK_MSG(th_values_equal(&oa[0], &ob[0], 0, why, sizeof why), "case %d (%s): %s", i,
                  text, why);
    } else {
      CHECK_MSG(na < 0 && nb < 0, "case %d: the unfolded node should fail at run time", i);
    }
    if (na == 1) exec_value_clear(&oa[0]);
    if (nb == 1) exec_value_clear(&ob[0]);
    ir_graph_free(g);
    ir_graph_free(orig);
  }
}

TEST(pass_fold_if_constant_condition) {
  /* the taken block's nodes move out (and are folded in turn), the If goes */
  th_expect("fold if true", pass_constant_fold,
            "graph(%x : Float(3)):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %y : Float(3), %k : int = prim::If(%t)\n"
            "    block0():\n"
            "      %r : Float(3) = aten::relu(%x)\n"
            "      %j : int = aten::add(%1, %1)\n"
            "      -> (%r, %j)\n"
            "    block1():\n"
            "      %n : Float(3) = aten::neg(%x)\n"
            "      -> (%n, %1)\n"
            "  %z : Float(3) = aten::mul(%y, %k)\n"
            "  return (%z)\n",
            "graph(%x : Float(3)):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %r : Float(3) = aten::relu(%x)\n"
            "  %9 : int = prim::Constant[value=2]()\n"
            "  %z : Float(3) = aten::mul(%r, %9)\n"
            "  return (%z)\n",
            2);
  /* a condition that folds to false picks block1; nested Ifs fold too */
  th_expect("fold if false", pass_constant_fold,
            "graph(%x : Float(3)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %c : bool = aten::eq(%1, %2)\n"
            "  %y : Float(3) = prim::If(%c)\n"
            "    block0():\n"
            "      %r : Float(3) = aten::relu(%x)\n"
            "      -> (%r)\n"
            "    block1():\n"
            "      %d : bool = aten::ne(%1, %2)\n"
            "      %w : Float(3) = prim::If(%d)\n"
            "        block0():\n"
            "          %s : Float(3) = aten::sin(%x)\n"
            "          -> (%s)\n"
            "        block1():\n"
            "          -> (%x)\n"
            "      -> (%w)\n"
            "  return (%y)\n",
            "graph(%x : Float(3)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %9 : bool = prim::Constant[value=0]()\n"
            "  %10 : bool = prim::Constant[value=1]()\n"
            "  %s : Float(3) = aten::sin(%x)\n"
            "  return (%s)\n",
            4);
}

TEST(pass_fold_loops_that_never_run) {
  th_expect("fold loop", pass_constant_fold,
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %f : bool = prim::Constant[value=0]()\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %a : Float(3) = prim::Loop(%n, %f, %x)\n"
            "    block0(%i : int, %acc : Float(3)):\n"
            "      %s : Float(3) = aten::sin(%acc)\n"
            "      -> (%t, %s)\n"
            "  %b : Float(3) = prim::Loop(%0, %t, %a)\n"
            "    block0(%j : int, %acc2 : Float(3)):\n"
            "      %c : Float(3) = aten::cos(%acc2)\n"
            "      -> (%t, %c)\n"
            "  %d : Float(3) = prim::Loop(%n, %t, %b)\n"
            "    block0(%k : int, %acc3 : Float(3)):\n"
            "      %e : Float(3) = aten::exp(%acc3)\n"
            "      -> (%t, %e)\n"
            "  return (%d)\n",
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %f : bool = prim::Constant[value=0]()\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %d : Float(3) = prim::Loop(%n, %t, %x)\n"
            "    block0(%k : int, %acc3 : Float(3)):\n"
            "      %e : Float(3) = aten::exp(%acc3)\n"
            "      -> (%t, %e)\n"
            "  return (%d)\n",
            2);
}

TEST(pass_fold_lists_and_sizes) {
  /* complete sizes fold size()/numel, a known rank folds dim(), a known
   * first size folds len(); ListConstruct of constants becomes a list
   * constant. size(x, 0) of Float(*, 3) stays. */
  th_expect("fold sizes", pass_constant_fold,
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(*, 3)):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %s : int[] = aten::size(%x)\n"
            "  %n : int = aten::numel(%x)\n"
            "  %d : int = aten::dim(%y)\n"
            "  %l : int = aten::len(%x)\n"
            "  %a : int = aten::size(%y, %0)\n"
            "  %b : int = aten::size(%y, %m1)\n"
            "  %f : bool = aten::is_floating_point(%y)\n"
            "  %v : int[] = prim::ListConstruct(%n, %d)\n"
            "  %w : int[] = prim::ListConstruct(%a, %b)\n"
            "  %t : (int[], int[], int[], int, bool) = prim::TupleConstruct(%s, %v, %w, %l, %f)\n"
            "  return (%t)\n",
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(*, 3)):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %14 : int[] = prim::Constant[value=[2, 3]]()\n"
            "  %15 : int = prim::Constant[value=6]()\n"
            "  %16 : int = prim::Constant[value=2]()\n"
            "  %17 : int = prim::Constant[value=2]()\n"
            "  %a : int = aten::size(%y, %0)\n"
            "  %18 : int = prim::Constant[value=3]()\n"
            "  %19 : bool = prim::Constant[value=1]()\n"
            "  %20 : int[] = prim::Constant[value=[6, 2]]()\n"
            "  %w : int[] = prim::ListConstruct(%a, %18)\n"
            "  %t : (int[], int[], int[], int, bool) = prim::TupleConstruct(%14, %20, %w, %17, %19)\n"
            "  return (%t)\n",
            7);
}

TEST(pass_fold_leaves_tensors_and_mutation) {
  /* no tensor op is folded (even on constants), NumToTensor stays, and a
   * list that gets appended to stays a ListConstruct */
  const char *text = "graph(%x : Tensor):\n"
                     "  %1 : int = prim::Constant[value=1]()\n"
                     "  %2 : int = prim::Constant[value=2]()\n"
                     "  %t : Tensor = prim::NumToTensor(%2)\n"
                     "  %u : Tensor = aten::add(%t, %1, %1)\n"
                     "  %l : int[] = prim::ListConstruct(%1, %2)\n"
                     "  %l2 : int[] = aten::append(%l, %2)\n"
                     "  %g : (Tensor, int[]) = prim::TupleConstruct(%u, %l)\n"
                     "  return (%g)\n";
  th_expect("fold tensors", pass_constant_fold, text, text, 0);
}

TEST(pass_fold_is_none_by_type) {
  th_expect("fold is None", pass_constant_fold,
            "graph(%x : Tensor,\n"
            "      %k : int,\n"
            "      %o : int?):\n"
            "  %none : NoneType = prim::Constant()\n"
            "  %a : bool = aten::__is__(%k, %none)\n"
            "  %b : bool = aten::__isnot__(%k, %none)\n"
            "  %c : bool = aten::__is__(%o, %none)\n"
            "  %d : bool = aten::__is__(%x, %none)\n"
            "  %g : (bool, bool, bool, bool) = prim::TupleConstruct(%a, %b, %c, %d)\n"
            "  return (%g)\n",
            "graph(%x : Tensor,\n"
            "      %k : int,\n"
            "      %o : int?):\n"
            "  %none : NoneType = prim::Constant()\n"
            "  %9 : bool = prim::Constant[value=0]()\n"
            "  %10 : bool = prim::Constant[value=1]()\n"
            "  %c : bool = aten::__is__(%o, %none)\n"
            "  %d : bool = aten::__is__(%x, %none)\n"
            "  %g : (bool, bool, bool, bool) = prim::TupleConstruct(%9, %10, %c, %d)\n"
            "  return (%g)\n",
            2);
}

/* len(range(lo, hi, step)) folded and interpreted alike, exactly, for
 * extreme int64 bounds (Python's answers, clamped to INT64_MAX). */
TEST(pass_fold_range_length_extremes) {
  static const struct {
    int64_t lo, hi, step, want;
  } cases[] = {
      {0, 10, 3, 4},
      {10, 0, -3, 4},
      {INT64_MIN, INT64_MAX, INT64_MAX, 3},
      {INT64_MAX, INT64_MIN, INT64_MIN, 2},
      {INT64_MIN, INT64_MAX, 1, INT64_MAX},
      {-5, 5, INT64_MIN, 0},
      {5, -5, INT64_MAX, 0},
  };
  char text[512];
  for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
    snprintf(text, sizeof text,
             "graph():\n  %%a : int = prim::Constant[value=%lld]()\n"
             "  %%b : int = prim::Constant[value=%lld]()\n"
             "  %%c : int = prim::Constant[value=%lld]()\n"
             "  %%r : int = aten::__range_length(%%a, %%b, %%c)\n  return (%%r)\n",
             (long long)cases[i].lo, (long long)cases[i].hi, (long long)cases[i].step);
    ir_graph *g = th_parse(text), *orig = th_parse(text);
    exec_value got[1];
    if (orig && th_run(orig, NULL, got, 1) == 1) {
      CHECK_MSG(got[0].tag == EXEC_V_INT && got[0].i == cases[i].want, "case %d: ran %lld", i,
                (long long)got[0].i);
      exec_value_clear(&got[0]);
    } else {
      CHECK_MSG(false, "case %d: %s", i, kiln_last_error());
    }
    if (g && pass_constant_fold(g) == 1 && th_run(g, NULL, got, 1) == 1) {
      CHECK_MSG(got[0].tag == EXEC_V_INT && got[0].i == cases[i].want, "case %d: folded %lld", i,
                (long long)got[0].i);
      exec_value_clear(&got[0]);
    } else {
      CHECK_MSG(false, "case %d: did not fold: %s", i, kiln_last_error());
    }
    ir_graph_free(g);
    ir_graph_free(orig);
  }
}

/* ---- the number table, folded and run ----------------------------------------- */

static uint64_t prop_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A random number with many edges: int64's ends, 2^53 + 1, -0.0, NaN, the
 * infinities, floats beyond int64 and just inside. */
static void prop_operand(uint64_t *s, pass_const *c, exec_value *v) {
  static const int64_t ints[] = {0, 1, -1, 2, -2, 3, 7, -7, 64, INT64_MAX, INT64_MIN,
                                 INT64_MAX - 1, INT64_MIN + 1, 9007199254740993, 4611686018427387904};
  static const double floats[] = {0.0, -0.0, 0.5, -0.5, 1.0, -2.5, 2.0, 3.0, 1e300, -1e300,
                                  INFINITY, -INFINITY, NAN, 0x1p63, -0x1p63, 0x1.fffffffffffffp62,
                                  9007199254740993.0, 1e-310};
  uint64_t r = prop_next(s);
  switch (r % 3) {
  case 0: {
    int64_t i = (r >> 8) % 4 == 0 ? (int64_t)prop_next(s)
                : (r >> 8) % 4 == 1 ? (int64_t)(prop_next(s) % 41) - 20
                                    : ints[(r >> 16) % (sizeof ints / sizeof *ints)];
    *c = (pass_const){.tag = PASS_C_INT, .i = i};
    *v = (exec_value){.tag = EXEC_V_INT, .i = i};
    break;
  }
  case 1: {
    double f = (r >> 8) % 3 == 0 ? ((double)(int64_t)(prop_next(s) % 2001) - 1000) / 8
                                 : floats[(r >> 16) % (sizeof floats / sizeof *floats)];
    *c = (pass_const){.tag = PASS_C_FLOAT, .f = f};
    *v = (exec_value){.tag = EXEC_V_FLOAT, .f = f};
    break;
  }
  default: {
    bool b = (r >> 8) & 1;
    *c = (pass_const){.tag = PASS_C_BOOL, .b = b};
    *v = (exec_value){.tag = EXEC_V_BOOL, .b = b};
    break;
  }
  }
}

/* Same tag and value (NaN equals NaN; -0.0 differs from 0.0). */
static bool prop_same(const pass_const *c, const exec_value *v, char *why, size_t n) {
  bool ok = false;
  switch (c->tag) {
  case PASS_C_INT: ok = v->tag == EXEC_V_INT && v->i == c->i; break;
  case PASS_C_BOOL: ok = v->tag == EXEC_V_BOOL && v->b == c->b; break;
  case PASS_C_FLOAT:
    ok = v->tag == EXEC_V_FLOAT && (isnan(c->f) ? isnan(v->f) : memcmp(&c->f, &v->f, sizeof c->f) == 0);
    break;
  default: break;
  }
  if (!ok)
    snprintf(why, n, "folded tag %d (%lld, %.17g), ran tag %d (%lld, %.17g)", c->tag,
             (long long)c->i, c->f, v->tag, (long long)v->i, v->f);
  return ok;
}

/* Note [Number semantics] has two consumers, constant folding
 * (pass_const_eval) and the interpreter's builtins (exec_prim_impl): on
 * random number operands both give the same value, or folding declines
 * exactly when running raises. */
TEST(pass_fold_number_table_property) {
  static const struct {
    int prim, n_in;
  } kinds[] = {
      {IR_PRIM_ADD, 2}, {IR_PRIM_SUB, 2}, {IR_PRIM_MUL, 2}, {IR_PRIM_DIV, 2},
      {IR_PRIM_FLOORDIV, 2}, {IR_PRIM_REMAINDER, 2}, {IR_PRIM_POW, 2}, {IR_PRIM_MIN, 2},
      {IR_PRIM_MAX, 2}, {IR_PRIM_EQ, 2}, {IR_PRIM_NE, 2}, {IR_PRIM_LT, 2}, {IR_PRIM_LE, 2},
      {IR_PRIM_GT, 2}, {IR_PRIM_GE, 2}, {IR_PRIM_AND, 2}, {IR_PRIM_OR, 2}, {IR_PRIM_XOR, 2},
      {IR_PRIM_NEG, 1}, {IR_PRIM_ABS, 1}, {IR_PRIM_ABS_NUM, 1}, {IR_PRIM_FLOOR, 1},
      {IR_PRIM_CEIL, 1}, {IR_PRIM_SQRT, 1}, {IR_PRIM_EXP, 1}, {IR_PRIM_LOG, 1},
      {IR_PRIM_TANH, 1}, {IR_PRIM_INT, 1}, {IR_PRIM_FLOAT, 1}, {IR_PRIM_BOOL, 1},
      {IR_PRIM_NOT, 1}, {IR_PRIM_RANGE_LENGTH, 3}, {IR_PRIM_DERIVE_INDEX, 3},
  };
  const int n_kinds = (int)(sizeof kinds / sizeof *kinds), n_cases = 20000;
  ir_graph *g = th_parse("graph():\n  return ()\n");
  uint64_t seed = 0x6b696c6eull;
  int n_values = 0, n_raised = 0, n_failed = 0;
  for (int i = 0; i < n_cases && g && n_failed < 10; i++) {
    int k = (int)(prop_next(&seed) % (uint64_t)n_kinds), n_in = kinds[k].n_in;
    int prim = kinds[k].prim;
    pass_const c[3], folded;
    exec_value v[3], ran = EXEC_NONE;
    for (int j = 0; j < n_in; j++) prop_operand(&seed, &c[j], &v[j]);
    exec_instr x = {.code = EXEC_I_PRIM, .prim = exec_prim_impl[prim],
                    .name = ir_prim_table[prim].name, .n_in = n_in, .n_out = 1};
    int rf = pass_const_eval(g, prim, c, n_in, &folded);
    int rr = x.prim(&x, v, &ran);
    char why[256] = "";
    bool ok = rr < 0 ? rf == 0 : rf == 1 && prop_same(&folded, &ran, why, sizeof why);
    if (rr < 0) n_raised++;
    else n_values++;
    if (!ok) {
      n_failed++;
      CHECK_MSG(false, "case %d: %s on (%lld|%.17g, %lld|%.17g) tags (%d, %d): fold %d, run %d: %s %s",
                i, x.name, (long long)c[0].i, c[0].f, (long long)c[n_in > 1].i, c[n_in > 1].f,
                c[0].tag, c[n_in > 1].tag, rf, rr, why, rr < 0 ? kiln_last_error() : "");
    }
    exec_value_clear(&ran);
  }
  CHECK(n_values + n_raised == n_cases);
  CHECK(n_raised > 100 && n_values > 10000); /* both outcomes are exercised */
  test_note("%d cases: %d values, %d raised", n_values + n_raised, n_values, n_raised);
  ir_graph_free(g);
}
