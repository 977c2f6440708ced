/* tests/passes/test_fuse_conv_bn.c: pass_fuse_conv_bn (Note [Conv bn
 * fusion] in src/passes/fuse_conv_bn.c): what it fuses (resnet's block
 * shapes: conv + batch norm + relu_, conv + batch norm + add_ + relu_ with
 * a downsample branch in between) and what it leaves (training mode, a
 * conv result read twice, a write in between), each fused graph checked
 * against the unfused one in the interpreter on random inputs. */
#include <string.h>

#include "harness.h"

/* Runs the pass on text; checks its count, that the graph verifies, that
 * `has` (and not `hasnt`) is in the result, and that it computes what the
 * original does. */
static void expect_fusions(const char *what, const char *text, int n, const char *has,
                           const char *hasnt) {
  ir_graph *g = th_parse(text), *orig = th_parse(text);
  if (!g || !orig) goto done;
  int rc = pass_fuse_conv_bn(g);
  CHECK_MSG(rc == n, "%s: %d fusions, expected %d (%s)", what, rc, n,
            rc < 0 ? kiln_last_error() : "");
  CHECK_MSG(ir_graph_verify(g) == 0, "%s: verify: %s", what, kiln_last_error());
  char *got = th_print(g);
  CHECK_MSG(got && (!has || strstr(got, has)), "%s: no %s in\n%s", what, has, got ? got : "");
  CHECK_MSG(got && (!hasnt || !strstr(got, hasnt)), "%s: %s left in\n%s", what, hasnt,
            got ? got : "");
  ir_graph *again = got ? ir_graph_parse(got, strlen(got)) : NULL;
  CHECK_MSG(again != NULL, "%s: the result does not parse: %s", what, kiln_last_error());
  ir_graph_free(again);
  core_free(got);
  th_check_same_random(what, orig, g, 3);
done:
  ir_graph_free(g);
  ir_graph_free(orig);
}

#define HEAD                                                                              \
  "graph(%x : Double(2, 3, 5, 5), %w : Double(4, 3, 3, 3), %bw : Double(4),\n"           \
  "      %bb : Double(4), %rm : Double(4), %v : Double(4)):\n"                            \
  "  %none : NoneType = prim::Constant()\n"                                               \
  "  %f : bool = prim::Constant[value=0]()\n"                                             \
  "  %t : bool = prim::Constant[value=1]()\n"                                             \
  "  %one : int = prim::Constant[value=1]()\n"                                            \
  "  %mom : float = prim::Constant[value=0.1]()\n"                                        \
  "  %eps : float = prim::Constant[value=1e-05]()\n"                                      \
  "  %s : int[] = prim::ListConstruct(%one, %one)\n"                                      \
  "  %rv : Double(4) = aten::exp(%v)\n"

TEST(fuse_conv_bn_relu_and_residual_blocks) {
  expect_fusions("conv bn relu_",
                 HEAD "  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)\n"
                      "  %y : Tensor = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %f, %mom, %eps, %t)\n"
                      "  %z : Tensor = aten::relu_(%y)\n"
                      "  return (%z)\n",
                 1, "aten::_conv_bn_eval", "batch_norm");
  /* the downsample branch (a conv and batch norm of x) sits between the
   * block's batch norm and its add_: both fuse, the second after the first */
  expect_fusions("residual block",
                 HEAD "  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)\n"
                      "  %y : Tensor = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %f, %mom, %eps, %t)\n"
                      "  %c2 : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)\n"
                      "  %y2 : Tensor = aten::batch_norm(%c2, %bb, %bw, %rm, %rv, %f, %mom, %eps, %t)\n"
                      "  %z : Tensor = aten::add_(%y, %y2, %one)\n"
                      "  %o : Tensor = aten::relu_(%z)\n"
                      "  %p : Tensor = aten::neg(%o)\n"
                      "  return (%p)\n",
                 2, "aten::_conv_bn_eval", "aten::add_");
  expect_fusions("conv bn, no relu",
                 HEAD "  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)\n"
                      "  %y : Tensor = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %f, %mom, %eps, %t)\n"
                      "  %z : Tensor = aten::relu(%c)\n"
                      "  return (%y)\n",
                 0, NULL, "aten::_conv_bn_eval"); /* %c read twice */
}

TEST(fuse_conv_bn_leaves_training_and_writes) {
  expect_fusions("training batch norm",
                 HEAD "  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)\n"
                      "  %y : Tensor = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %t, %mom, %eps, %t)\n"
                      "  return (%y)\n",
                 0, "batch_norm", "aten::_conv_bn_eval");
  /* the conv's input is written between the conv and the batch norm: the
   * conv must read it before */
  expect_fusions("a write in between",
                 HEAD "  %x2 : Tensor = aten::neg(%x)\n"
                      "  %c : Tensor = aten::conv2d(%x2, %w, %none, %s, %s, %s, %one)\n"
                      "  %q : Tensor = aten::relu_(%x2)\n"
                      "  %y : Tensor = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %f, %mom, %eps, %t)\n"
                      "  return (%y, %q)\n",
                 0, "batch_norm", "aten::_conv_bn_eval");
  /* y is read besides the add_: the add and relu stay, conv + bn fuse */
  expect_fusions("batch norm result read twice",
                 HEAD "  %c : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)\n"
                      "  %y : Tensor = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %f, %mom, %eps, %t)\n"
                      "  %n : Tensor = aten::neg(%y)\n"
                      "  %z : Tensor = aten::add_(%y, %n, %one)\n"
                      "  return (%z, %n)\n",
                 1, "aten::add_", "batch_norm");
}
