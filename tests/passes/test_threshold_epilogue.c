/* tests/passes/test_threshold_epilogue.c: pass_threshold_epilogue (Note
 * [Threshold epilogue]): a relu's backward on a product becomes
 * aten::kiln_mm_threshold_backward, also through the reshape a 3-d linear
 * puts between them; not where the product has another use, the zero is
 * -0 or not a constant, or the types broadcast. th_expect runs both graphs
 * through the interpreter on random inputs. */
#include "harness.h"

static int thr(ir_graph *g) { return pass_threshold_epilogue(g); }

#define HEAD                                                                                  \
  "graph(%a : Float(6, 4),\n"                                                                 \
  "      %b : Float(4, 5),\n"                                                                 \
  "      %y : Float(6, 5)):\n"                                                                \
  "  %z : float = prim::Constant[value=0.]()\n"

TEST(pass_threshold_epilogue_rewrites_a_relu_backward_on_a_product) {
  th_expect("threshold", thr,
            HEAD "  %c : Bool(6, 5) = aten::le(%y, %z)\n"
                 "  %p : Float(6, 5) = aten::mm(%a, %b)\n"
                 "  %g : Float(6, 5) = aten::where(%c, %z, %p)\n"
                 "  return (%g)\n",
            HEAD "  %7 : Float(6, 5) = aten::kiln_mm_threshold_backward(%a, %b, %y, %z)\n"
                 "  return (%7)\n",
            1);
}

/* A 3-d linear's product reshaped: the reshape moves after the new node
 * and reads it; the mask %y has the reshaped shape. */
TEST(pass_threshold_epilogue_sees_through_a_reshape) {
  th_expect("threshold reshape", thr,
            "graph(%a : Float(6, 4),\n"
            "      %b : Float(4, 5),\n"
            "      %y : Float(2, 3, 5)):\n"
            "  %z : float = prim::Constant[value=0.]()\n"
            "  %s : int[] = prim::Constant[value=[2, 3, 5]]()\n"
            "  %c : Bool(2, 3, 5) = aten::le(%y, %z)\n"
            "  %p : Float(6, 5) = aten::mm(%a, %b)\n"
            "  %q : Float(2, 3, 5) = aten::reshape(%p, %s)\n"
            "  %g : Float(2, 3, 5) = aten::where(%c, %z, %q)\n"
            "  return (%g)\n",
            "graph(%a : Float(6, 4),\n"
            "      %b : Float(4, 5),\n"
            "      %y : Float(2, 3, 5)):\n"
            "  %z : float = prim::Constant[value=0.]()\n"
            "  %s : int[] = prim::Constant[value=[2, 3, 5]]()\n"
            "  %9 : Float(6, 5) = aten::kiln_mm_threshold_backward(%a, %b, %y, %z)\n"
            "  %q : Float(2, 3, 5) = aten::reshape(%9, %s)\n"
            "  return (%q)\n",
            1);
}

TEST(pass_threshold_epilogue_leaves_other_patterns) {
  const char *other_use = HEAD "  %c : Bool(6, 5) = aten::le(%y, %z)\n"
                               "  %p : Float(6, 5) = aten::mm(%a, %b)\n"
                               "  %g : Float(6, 5) = aten::where(%c, %z, %p)\n"
                               "  return (%g, %p)\n";
  th_expect("threshold other use", thr, other_use, other_use, 0);
  const char *neg_zero = HEAD "  %m : float = prim::Constant[value=-0.]()\n"
                              "  %c : Bool(6, 5) = aten::le(%y, %z)\n"
                              "  %p : Float(6, 5) = aten::mm(%a, %b)\n"
                              "  %g : Float(6, 5) = aten::where(%c, %m, %p)\n"
                              "  return (%g)\n";
  th_expect("threshold -0", thr, neg_zero, neg_zero, 0);
  const char *broadcast = "graph(%a : Float(6, 4),\n"
                          "      %b : Float(4, 5),\n"
                          "      %y : Float(1, 5)):\n"
                          "  %z : float = prim::Constant[value=0.]()\n"
                          "  %c : Bool(1, 5) = aten::le(%y, %z)\n"
                          "  %p : Float(6, 5) = aten::mm(%a, %b)\n"
                          "  %g : Float(6, 5) = aten::where(%c, %z, %p)\n"
                          "  return (%g)\n";
  th_expect("threshold broadcast", thr, broadcast, broadcast, 0);
  const char *ge = HEAD "  %c : Bool(6, 5) = aten::ge(%y, %z)\n"
                        "  %p : Float(6, 5) = aten::mm(%a, %b)\n"
                        "  %g : Float(6, 5) = aten::where(%c, %z, %p)\n"
                        "  return (%g)\n";
  th_expect("threshold ge", thr, ge, ge, 0);
}
