/* tests/passes/test_hoist.c: pass_hoist_results (Note [Hoisting
 * results]): a node whose results only leave the graph moves up to just
 * after the last node that defines or also reads one of its tensor
 * inputs, never across a write, when it reads a tensor made in the graph;
 * nodes used inside the graph, and a graph already in that order, stay.
 * The interpreter checks that the meaning is kept (th_expect runs both
 * graphs). */
#include "harness.h"

static int hoist(ir_graph *g) { return pass_hoist_results(g); }

#define HEAD                                                                                  \
  "graph(%x : Float(4, 4),\n"                                                                 \
  "      %p1 : Float(4, 4),\n"                                                                \
  "      %p2 : Float(4, 4)):\n"                                                               \
  "  %w : int = prim::Constant[value=1]()\n"

/* An optimizer after a backward: each update moves up to its gradient's
 * last reader (%u1 after %g2, which reads %g1 too; %u2 after %h). */
TEST(pass_hoist_moves_updates_up_to_their_gradients) {
  th_expect("hoist updates", hoist,
            HEAD "  %g1 : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %g2 : Float(4, 4) = aten::mm(%g1, %p2)\n"
                 "  %h : Float(4, 4) = aten::relu(%g2)\n"
                 "  %z : Float(4, 4) = aten::tanh(%h)\n"
                 "  %u1 : Float(4, 4) = aten::sub(%p1, %g1, %w)\n"
                 "  %u2 : Float(4, 4) = aten::sub(%p2, %g2, %w)\n"
                 "  return (%u1, %u2, %z)\n",
            HEAD "  %g1 : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %g2 : Float(4, 4) = aten::mm(%g1, %p2)\n"
                 "  %u1 : Float(4, 4) = aten::sub(%p1, %g1, %w)\n"
                 "  %h : Float(4, 4) = aten::relu(%g2)\n"
                 "  %u2 : Float(4, 4) = aten::sub(%p2, %g2, %w)\n"
                 "  %z : Float(4, 4) = aten::tanh(%h)\n"
                 "  return (%u1, %u2, %z)\n",
            2);
}

/* An update that frees nothing, because the graph also returns what it
 * reads (a momentum its gradient GEMM wrote), still moves up to that
 * tensor's maker: %u after %g. */
TEST(pass_hoist_moves_an_update_reading_a_returned_tensor) {
  th_expect("hoist returned", hoist,
            HEAD "  %g : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %h : Float(4, 4) = aten::relu(%x)\n"
                 "  %z : Float(4, 4) = aten::tanh(%h)\n"
                 "  %u : Float(4, 4) = aten::sub(%p2, %g, %w)\n"
                 "  return (%u, %g, %z)\n",
            HEAD "  %g : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %u : Float(4, 4) = aten::sub(%p2, %g, %w)\n"
                 "  %h : Float(4, 4) = aten::relu(%x)\n"
                 "  %z : Float(4, 4) = aten::tanh(%h)\n"
                 "  return (%u, %g, %z)\n",
            1);
}

/* A parameter read by a later node keeps the update after that reader
 * (so the update still writes the parameter's buffer in place): %u waits
 * for %m, which reads %p1. */
TEST(pass_hoist_waits_for_the_other_readers_of_an_input) {
  th_expect("hoist readers", hoist,
            HEAD "  %g : Float(4, 4) = aten::mm(%x, %p2)\n"
                 "  %a : Float(4, 4) = aten::relu(%x)\n"
                 "  %m : Float(4, 4) = aten::mm(%a, %p1)\n"
                 "  %b : Float(4, 4) = aten::tanh(%m)\n"
                 "  %u : Float(4, 4) = aten::sub(%p1, %g, %w)\n"
                 "  return (%u, %b)\n",
            HEAD "  %g : Float(4, 4) = aten::mm(%x, %p2)\n"
                 "  %a : Float(4, 4) = aten::relu(%x)\n"
                 "  %m : Float(4, 4) = aten::mm(%a, %p1)\n"
                 "  %u : Float(4, 4) = aten::sub(%p1, %g, %w)\n"
                 "  %b : Float(4, 4) = aten::tanh(%m)\n"
                 "  return (%u, %b)\n",
            1);
}

/* Nothing moves across a write (the relu_ of %a), a result also used
 * inside the graph stays, and a graph in that order already is unchanged. */
TEST(pass_hoist_keeps_writes_and_inner_uses_in_order) {
  const char *write = HEAD "  %g : Float(4, 4) = aten::mm(%x, %p1)\n"
                           "  %a : Float(4, 4) = aten::mm(%x, %p2)\n"
                           "  %q : Float(4, 4) = aten::relu_(%a)\n"
                           "  %b : Float(4, 4) = aten::tanh(%q)\n"
                           "  %u : Float(4, 4) = aten::sub(%p1, %g, %w)\n"
                           "  return (%u, %b)\n";
  th_expect("hoist write", hoist, write,
            HEAD "  %g : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %a : Float(4, 4) = aten::mm(%x, %p2)\n"
                 "  %q : Float(4, 4) = aten::relu_(%a)\n"
                 "  %u : Float(4, 4) = aten::sub(%p1, %g, %w)\n"
                 "  %b : Float(4, 4) = aten::tanh(%q)\n"
                 "  return (%u, %b)\n",
            1);
  const char *inner = HEAD "  %g : Float(4, 4) = aten::mm(%x, %p1)\n"
                           "  %a : Float(4, 4) = aten::relu(%x)\n"
                           "  %u : Float(4, 4) = aten::sub(%p1, %g, %w)\n"
                           "  %b : Float(4, 4) = aten::add(%a, %u, %w)\n"
                           "  return (%u, %b)\n";
  th_expect("hoist inner use", hoist, inner, inner, 0);
  const char *done = HEAD "  %g : Float(4, 4) = aten::mm(%x, %p1)\n"
                          "  %u : Float(4, 4) = aten::sub(%p1, %g, %w)\n"
                          "  %v : Float(4, 4) = aten::sub(%p2, %g, %w)\n"
                          "  %a : Float(4, 4) = aten::relu(%x)\n"
                          "  return (%u, %v, %a)\n";
  th_expect("hoist in order", hoist, done, done, 0);
}
