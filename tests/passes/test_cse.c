/* tests/passes/test_cse.c: common subexpression elimination: equal nodes
 * merge, scoped by blocks (outer expressions reused inside If/Loop
 * blocks, never across sibling blocks or out of a block), random ops,
 * side effects and differing attributes/types never merge, list nodes do
 * not merge in a graph that mutates lists. */
#include "harness.h"

TEST(pass_cse_merges_equal_nodes) {
  th_expect("cse basic", pass_cse,
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(2, 3)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %one : int = prim::Constant[value=1]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %a : Float(2, 3) = aten::mul(%x, %y)\n"
            "  %b : Float(2, 3) = aten::mul(%x, %y)\n"
            "  %c : Float(2, 3) = aten::mul(%y, %x)\n"
            "  %d : Float(2, 3) = aten::add(%a, %b, %1)\n"
            "  %e : Float(2, 3) = aten::add(%a, %b, %one)\n"
            "  %f : Float(2, 3) = aten::add(%a, %b, %2)\n"
            "  %g : (Tensor, Tensor, Tensor, Tensor) = prim::TupleConstruct(%c, %d, %e, %f)\n"
            "  return (%g)\n",
            /* %one is %1, so %e is %d; mul(y, x) is another expression;
             * alpha 2 differs */
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(2, 3)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %a : Float(2, 3) = aten::mul(%x, %y)\n"
            "  %c : Float(2, 3) = aten::mul(%y, %x)\n"
            "  %d : Float(2, 3) = aten::add(%a, %a, %1)\n"
            "  %f : Float(2, 3) = aten::add(%a, %a, %2)\n"
            "  %g : (Tensor, Tensor, Tensor, Tensor) = prim::TupleConstruct(%c, %d, %d, %f)\n"
            "  return (%g)\n",
            3);
}

TEST(pass_cse_respects_attributes_and_types) {
  /* constants differing in type (int 1 vs bool true, float 1. vs int 1)
   * or value never merge; nodes whose output types differ do not either */
  const char *text = "graph(%x : Tensor):\n"
                     "  %1 : int = prim::Constant[value=1]()\n"
                     "  %t : bool = prim::Constant[value=1]()\n"
                     "  %f : float = prim::Constant[value=1.]()\n"
                     "  %z : float = prim::Constant[value=0.]()\n"
                     "  %nz : float = prim::Constant[value=-0.]()\n"
                     "  %a : Float(2) = aten::relu(%x)\n"
                     "  %b : Double(2) = aten::relu(%x)\n"
                     "  %g : (int, bool, float, float, float, Tensor, Tensor) = "
                     "prim::TupleConstruct(%1, %t, %f, %z, %nz, %a, %b)\n"
                     "  return (%g)\n";
  th_expect("cse attrs", pass_cse, text, text, 0);
}

TEST(pass_cse_if_scoping) {
  /* the outer relu is reused inside both blocks; the two blocks' sigmoids
   * do not merge with each other (siblings), nor with the one after the If
   * (a block's expressions are not visible after it) */
  th_expect("cse if", pass_cse,
            "graph(%x : Float(3),\n"
            "      %c : bool):\n"
            "  %r : Float(3) = aten::relu(%x)\n"
            "  %o : Float(3) = prim::If(%c)\n"
            "    block0():\n"
            "      %r1 : Float(3) = aten::relu(%x)\n"
            "      %s1 : Float(3) = aten::sigmoid(%r1)\n"
            "      %s1b : Float(3) = aten::sigmoid(%r)\n"
            "      %m1 : Float(3) = aten::mul(%s1, %s1b)\n"
            "      -> (%m1)\n"
            "    block1():\n"
            "      %r2 : Float(3) = aten::relu(%x)\n"
            "      %s2 : Float(3) = aten::sigmoid(%r2)\n"
            "      -> (%s2)\n"
            "  %s3 : Float(3) = aten::sigmoid(%r)\n"
            "  %t : (Tensor, Tensor) = prim::TupleConstruct(%o, %s3)\n"
            "  return (%t)\n",
            "graph(%x : Float(3),\n"
            "      %c : bool):\n"
            "  %r : Float(3) = aten::relu(%x)\n"
            "  %o : Float(3) = prim::If(%c)\n"
            "    block0():\n"
            "      %s1 : Float(3) = aten::sigmoid(%r)\n"
            "      %m1 : Float(3) = aten::mul(%s1, %s1)\n"
            "      -> (%m1)\n"
            "    block1():\n"
            "      %s2 : Float(3) = aten::sigmoid(%r)\n"
            "      -> (%s2)\n"
            "  %s3 : Float(3) = aten::sigmoid(%r)\n"
            "  %t : (Tensor, Tensor) = prim::TupleConstruct(%o, %s3)\n"
            "  return (%t)\n",
            3);
}

TEST(pass_cse_nested_blocks_and_loops) {
  /* an expression of the outer block is reused two levels down (If in a
   * Loop); loop-carried parameters are values of their own */
  th_expect("cse loop", pass_cse,
            "graph(%x : Float(3),\n"
            "      %n : int,\n"
            "      %c : bool):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %e : Float(3) = aten::exp(%x)\n"
            "  %out : Float(3) = prim::Loop(%n, %t, %x)\n"
            "    block0(%i : int, %acc : Float(3)):\n"
            "      %e2 : Float(3) = aten::exp(%x)\n"
            "      %ea : Float(3) = aten::exp(%acc)\n"
            "      %v : Float(3) = prim::If(%c)\n"
            "        block0():\n"
            "          %e3 : Float(3) = aten::exp(%x)\n"
            "          %ea2 : Float(3) = aten::exp(%acc)\n"
            "          %w : Float(3) = aten::mul(%e3, %ea2)\n"
            "          -> (%w)\n"
            "        block1():\n"
            "          -> (%e2)\n"
            "      %t2 : bool = prim::Constant[value=1]()\n"
            "      -> (%t2, %v)\n"
            "  return (%out)\n",
            "graph(%x : Float(3),\n"
            "      %n : int,\n"
            "      %c : bool):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %e : Float(3) = aten::exp(%x)\n"
            "  %out : Float(3) = prim::Loop(%n, %t, %x)\n"
            "    block0(%i : int, %acc : Float(3)):\n"
            "      %ea : Float(3) = aten::exp(%acc)\n"
            "      %v : Float(3) = prim::If(%c)\n"
            "        block0():\n"
            "          %w : Float(3) = aten::mul(%e, %ea)\n"
            "          -> (%w)\n"
            "        block1():\n"
            "          -> (%e)\n"
            "      -> (%t, %v)\n"
            "  return (%out)\n",
            4);
}

TEST(pass_cse_never_merges_random_ops) {
  const char *text =
      "graph(%x : Float(8)):\n"
      "  %p : float = prim::Constant[value=0.5]()\n"
      "  %tr : bool = prim::Constant[value=1]()\n"
      "  %a : Float(8) = aten::dropout(%x, %p, %tr)\n"
      "  %b : Float(8) = aten::dropout(%x, %p, %tr)\n"
      "  %c : Float(8), %m1 : Bool(8) = aten::native_dropout(%x, %p, %tr)\n"
      "  %d : Float(8), %m2 : Bool(8) = aten::native_dropout(%x, %p, %tr)\n"
      "  %g : (Tensor, Tensor, Tensor, Tensor) = prim::TupleConstruct(%a, %b, %c, %d)\n"
      "  return (%g)\n";
  th_expect("cse dropout", pass_cse, text, text, 0);
  /* and the two really differ when run */
  ir_graph *g = th_parse(text);
  exec_value in[1], out[1];
  int64_t n = 8;
  in[0] = (exec_value){.tag = EXEC_V_TENSOR, .t = kiln_ones(1, &n, KILN_DTYPE_F32)};
  CHECK(g && th_run(g, in, out, 1) == 1);
  if (g && out[0].tag == EXEC_V_TUPLE) {
    char why[128];
    CHECK(!th_values_equal(&out[0].list->items[0], &out[0].list->items[1], 0, why, sizeof why));
    exec_value_clear(&out[0]);
  }
  exec_value_clear(&in[0]);
  ir_graph_free(g);
}

TEST(pass_cse_side_effects_and_lists) {
  /* appends never merge, and in a graph that appends, list makers and
   * readers do not merge either (the two lists are different objects) */
  const char *mutating = "graph(%x : Tensor):\n"
                         "  %a : Tensor[] = prim::ListConstruct(%x)\n"
                         "  %b : Tensor[] = prim::ListConstruct(%x)\n"
                         "  %a2 : Tensor[] = aten::append(%a, %x)\n"
                         "  %a3 : Tensor[] = aten::append(%a, %x)\n"
                         "  %na : int = aten::len(%a)\n"
                         "  %nb : int = aten::len(%b)\n"
                         "  %nc : int = aten::len(%a)\n"
                         "  %g : (int, int, int) = prim::TupleConstruct(%na, %nb, %nc)\n"
                         "  return (%g)\n";
  th_expect("cse append", pass_cse, mutating, mutating, 0);
  th_expect("cse lists", pass_cse,
            "graph(%x : Tensor):\n"
            "  %a : Tensor[] = prim::ListConstruct(%x)\n"
            "  %b : Tensor[] = prim::ListConstruct(%x)\n"
            "  %na : int = aten::len(%a)\n"
            "  %nb : int = aten::len(%b)\n"
            "  %g : (int, int) = prim::TupleConstruct(%na, %nb)\n"
            "  return (%g)\n",
            "graph(%x : Tensor):\n"
            "  %a : Tensor[] = prim::ListConstruct(%x)\n"
            "  %na : int = aten::len(%a)\n"
            "  %g : (int, int) = prim::TupleConstruct(%na, %na)\n"
            "  return (%g)\n",
            2);
}

TEST(pass_cse_semantics) {
  /* a bigger graph, checked on random inputs */
  ir_graph *a = th_parse("graph(%x : Double(4, 3),\n"
                         "      %w : Double(3, 5),\n"
                         "      %c : bool):\n"
                         "  %1 : int = prim::Constant[value=1]()\n"
                         "  %m : Double(4, 5) = aten::mm(%x, %w)\n"
                         "  %m2 : Double(4, 5) = aten::mm(%x, %w)\n"
                         "  %o : Double(4, 5) = prim::If(%c)\n"
                         "    block0():\n"
                         "      %t : Double(4, 5) = aten::tanh(%m)\n"
                         "      -> (%t)\n"
                         "    block1():\n"
                         "      %t2 : Double(4, 5) = aten::tanh(%m2)\n"
                         "      -> (%t2)\n"
                         "  %s : Double(4, 5) = aten::add(%o, %m2, %1)\n"
                         "  return (%s)\n");
  ir_graph *b = a ? ir_graph_clone(a) : NULL;
  CHECK(b && pass_cse(b) == 1);
  CHECK(b && ir_graph_verify(b) == 0);
  if (a && b) th_check_same_random("cse semantics", a, b, 4);
  ir_graph_free(a);
  ir_graph_free(b);
}
