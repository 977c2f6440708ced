/* tests/passes/test_dce.c: dead code elimination: unused nodes go, side
 * effects stay (also inside If/Loop), unused If outputs and loop-carried
 * values go, random ops are not side effects, subgraphs are cleaned. */
#include "harness.h"

TEST(pass_dce_removes_unused_nodes) {
  th_expect("dce basic", pass_dce,
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(2, 3)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %2 : float = prim::Constant[value=2.]()\n"
            "  %a : Float(2, 3) = aten::relu(%x)\n"
            "  %b : Float(2, 3) = aten::mul(%a, %2)\n"
            "  %c : Float(2, 3) = aten::add(%x, %y, %1)\n"
            "  %d : int = aten::dim(%c)\n"
            "  %e : int = aten::add(%d, %1)\n"
            "  return (%c)\n",
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(2, 3)):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %c : Float(2, 3) = aten::add(%x, %y, %1)\n"
            "  return (%c)\n",
            5);
}

TEST(pass_dce_keeps_raise_in_if) {
  th_expect("dce raise", pass_dce,
            "graph(%x : Float(3),\n"
            "      %c : bool):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %s : str = prim::Constant[value=\"boom\"]()\n"
            "  %r : Float(3) = aten::relu(%x)\n"
            "  %o : Float(3), %k : int = prim::If(%c)\n"
            "    block0():\n"
            "      %n : Float(3) = aten::neg(%x)\n"
            "      %u : Float(3) = aten::exp(%x)\n"
            "      -> (%n, %1)\n"
            "    block1():\n"
            "       = prim::RaiseException(%s)\n"
            "      -> (%r, %1)\n"
            "  return (%x)\n",
            /* the If must stay for its raise; its outputs, the neg and exp
             * and the relu (only a dead return used it) go */
            "graph(%x : Float(3),\n"
            "      %c : bool):\n"
            "  %s : str = prim::Constant[value=\"boom\"]()\n"
            "   = prim::If(%c)\n"
            "    block0():\n"
            "      -> ()\n"
            "    block1():\n"
            "       = prim::RaiseException(%s)\n"
            "      -> ()\n"
            "  return (%x)\n",
            6);
}

TEST(pass_dce_removes_pure_if_and_trims_outputs) {
  /* a pure If whose outputs are unused disappears; a used one keeps only
   * its used outputs */
  th_expect("dce if", pass_dce,
            "graph(%x : Float(3),\n"
            "      %c : bool):\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %p : Float(3) = prim::If(%c)\n"
            "    block0():\n"
            "      %n : Float(3) = aten::neg(%x)\n"
            "      -> (%n)\n"
            "    block1():\n"
            "      -> (%x)\n"
            "  %q : Float(3), %k : int = prim::If(%c)\n"
            "    block0():\n"
            "      %t : Float(3) = aten::tanh(%x)\n"
            "      %j : int = aten::add(%1, %1)\n"
            "      -> (%t, %j)\n"
            "    block1():\n"
            "      -> (%x, %1)\n"
            "  return (%q)\n",
            "graph(%x : Float(3),\n"
            "      %c : bool):\n"
            "  %q : Float(3) = prim::If(%c)\n"
            "    block0():\n"
            "      %t : Float(3) = aten::tanh(%x)\n"
            "      -> (%t)\n"
            "    block1():\n"
            "      -> (%x)\n"
            "  return (%q)\n",
            4);
}

TEST(pass_dce_loop_carried_values) {
  /* %acc2 is carried but never read after the loop and feeds only itself:
   * it goes (input, parameter, return, output). %acc1 is returned; %cnt
   * is not returned but the body reads it to compute %acc1: it stays. */
  th_expect("dce loop", pass_dce,
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %f : float = prim::Constant[value=0.5]()\n"
            "  %out : Float(3), %cnt_out : int, %acc2_out : Float(3) = prim::Loop(%n, %t, %x, %1, %x)\n"
            "    block0(%i : int, %acc1 : Float(3), %cnt : int, %acc2 : Float(3)):\n"
            "      %s : Float(3) = aten::mul(%acc1, %cnt)\n"
            "      %cnt2 : int = aten::add(%cnt, %1)\n"
            "      %a2 : Float(3) = aten::mul(%acc2, %f)\n"
            "      %dead : Float(3) = aten::sin(%s)\n"
            "      -> (%t, %s, %cnt2, %a2)\n"
            "  return (%out)\n",
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %out : Float(3), %cnt_out : int = prim::Loop(%n, %t, %x, %1)\n"
            "    block0(%i : int, %acc1 : Float(3), %cnt : int):\n"
            "      %s : Float(3) = aten::mul(%acc1, %cnt)\n"
            "      %cnt2 : int = aten::add(%cnt, %1)\n"
            "      -> (%t, %s, %cnt2)\n"
            "  return (%out)\n",
            4);
}

TEST(pass_dce_removes_unused_loop) {
  th_expect("dce dead loop", pass_dce,
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %out : Float(3) = prim::Loop(%n, %t, %x)\n"
            "    block0(%i : int, %acc : Float(3)):\n"
            "      %s : Float(3) = aten::sin(%acc)\n"
            "      -> (%t, %s)\n"
            "  return (%x)\n",
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  return (%x)\n",
            2);
}

TEST(pass_dce_keeps_side_effects_in_loop) {
  /* an append inside the loop keeps the loop (and what the loop needs to
   * run, and the list) though nothing reads the list afterwards; the
   * carried value nobody needs goes */
  th_expect("dce append in loop", pass_dce,
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %l : int[] = prim::ListConstruct()\n"
            "  %out : Float(3) = prim::Loop(%n, %t, %x)\n"
            "    block0(%i : int, %acc : Float(3)):\n"
            "      %s : Float(3) = aten::sin(%acc)\n"
            "      %l2 : int[] = aten::append(%l, %i)\n"
            "      -> (%t, %s)\n"
            "  return (%x)\n",
            "graph(%x : Float(3),\n"
            "      %n : int):\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %l : int[] = prim::ListConstruct()\n"
            "   = prim::Loop(%n, %t)\n"
            "    block0(%i : int):\n"
            "      %l2 : int[] = aten::append(%l, %i)\n"
            "      -> (%t)\n"
            "  return (%x)\n",
            2);
  /* a warn is a side effect too (a loop that never runs, to stay quiet) */
  const char *warn = "graph(%x : Float(3)):\n"
                     "  %t : bool = prim::Constant[value=1]()\n"
                     "  %0 : int = prim::Constant[value=0]()\n"
                     "  %m : str = prim::Constant[value=\"tick\"]()\n"
                     "   = prim::Loop(%0, %t)\n"
                     "    block0(%i : int):\n"
                     "       = aten::warn(%m)\n"
                     "      -> (%t)\n"
                     "  return (%x)\n";
  th_expect("dce warn", pass_dce, warn, warn, 0);
}

TEST(pass_dce_random_ops_are_not_side_effects) {
  /* an unused dropout goes; an append to a list stays (it mutates) */
  th_expect("dce dropout", pass_dce,
            "graph(%x : Float(4)):\n"
            "  %p : float = prim::Constant[value=0.5]()\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %e : Float(4), %m : Bool(4) = aten::native_dropout(%x, %p, %t)\n"
            "  %d : Float(4) = aten::dropout(%x, %p, %t)\n"
            "  %l : Tensor[] = prim::ListConstruct(%x)\n"
            "  %l2 : Tensor[] = aten::append(%l, %x)\n"
            "  return (%e)\n",
            "graph(%x : Float(4)):\n"
            "  %p : float = prim::Constant[value=0.5]()\n"
            "  %t : bool = prim::Constant[value=1]()\n"
            "  %e : Float(4), %m : Bool(4) = aten::native_dropout(%x, %p, %t)\n"
            "  %l : Tensor[] = prim::ListConstruct(%x)\n"
            "  %l2 : Tensor[] = aten::append(%l, %x)\n"
            "  return (%e)\n",
            1);
}

TEST(pass_dce_nothing_to_do) {
  const char *text = "graph(%x : Tensor):\n"
                     "  %a : Tensor = aten::relu(%x)\n"
                     "  return (%a)\n";
  th_expect("dce no-op", pass_dce, text, text, 0);
}

TEST(pass_dce_cleans_subgraphs) {
  /* a DifferentiableGraph's subgraph loses its dead nodes, keeps its
   * parameters and returns */
  ir_graph *g = th_parse("graph(%x : Float(3)):\n"
                         "  %1 : Float(3) = aten::relu(%x)\n"
                         "  return (%1)\n");
  ir_graph *sub = th_parse("graph(%a : Float(3),\n"
                           "      %b : Float(3)):\n"
                           "  %c : Float(3) = aten::mul(%a, %a)\n"
                           "  %d : Float(3) = aten::exp(%a)\n"
                           "  return (%c)\n");
  if (!g || !sub) {
    ir_graph_free(g);
    ir_graph_free(sub);
    return;
  }
  ir_node *dg = ir_node_new_prim(g, IR_PRIM_DIFFERENTIABLE_GRAPH);
  ir_value *x = ir_block_param(ir_graph_top(g), 0);
  CHECK(ir_node_add_input(dg, x) == 0 && ir_node_add_input(dg, x) == 0);
  ir_value *y = ir_node_add_output(dg, ir_type_tensor());
  CHECK(ir_node_set_g(dg, "Subgraph", sub) == 0);
  ir_node_insert_before(dg, ir_graph_top(g)->ret);
  CHECK(ir_block_add_return(ir_graph_top(g), y) == 0);
  CHECK(ir_graph_verify(g) == 0);
  CHECK_EQ_INT(pass_dce(g), 1);
  CHECK(ir_graph_verify(g) == 0);
  char *got = th_print(g);
  CHECK_STR_CONTAINS(got, "with prim::DifferentiableGraph_0 = graph(%a : Float(3),\n"
                          "      %b : Float(3)):\n"
                          "  %c : Float(3) = aten::mul(%a, %a)\n"
                          "  return (%c)\n");
  core_free(got);
  ir_graph_free(g);
}
