/* tests/passes/test_schedule.c: pass_schedule_collectives (Note
 * [Collective schedule]): starts right after their producers, waits after
 * everything that does not need them, a graph without all-reduces or with
 * an in-place write in the way keeps its order. World size 1: the
 * all-reduce ops are copies, so the interpreter checks that the meaning
 * is kept. */
#include "harness.h"

static int schedule(ir_graph *g) { return pass_schedule_collectives(g); }

#define HEAD                                                                                  \
  "graph(%x : Float(4, 4),\n"                                                                 \
  "      %p1 : Float(4, 4),\n"                                                                \
  "      %p2 : Float(4, 4)):\n"                                                               \
  "  %w : int = prim::Constant[value=1]()\n"                                                  \
  "  %k : int = prim::Constant[value=0]()\n"

TEST(pass_schedule_starts_early_and_waits_late) {
  th_expect("schedule two buckets", schedule,
            HEAD "  %g1 : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %s1 : Float(4, 4) = aten::kiln_all_reduce_start(%g1, %w, %k)\n"
                 "  %r1 : Float(4, 4) = aten::kiln_all_reduce_wait(%s1, %w, %k)\n"
                 "  %u1 : Float(4, 4) = aten::sub(%p1, %r1, %w)\n"
                 "  %g2 : Float(4, 4) = aten::mm(%g1, %p2)\n"
                 "  %s2 : Float(4, 4) = aten::kiln_all_reduce_start(%g2, %w, %k)\n"
                 "  %r2 : Float(4, 4) = aten::kiln_all_reduce_wait(%s2, %w, %k)\n"
                 "  %u2 : Float(4, 4) = aten::sub(%p2, %r2, %w)\n"
                 "  return (%u1, %u2)\n",
            HEAD "  %g1 : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %s1 : Float(4, 4) = aten::kiln_all_reduce_start(%g1, %w, %k)\n"
                 "  %g2 : Float(4, 4) = aten::mm(%g1, %p2)\n"
                 "  %s2 : Float(4, 4) = aten::kiln_all_reduce_start(%g2, %w, %k)\n"
                 "  %r1 : Float(4, 4) = aten::kiln_all_reduce_wait(%s1, %w, %k)\n"
                 "  %u1 : Float(4, 4) = aten::sub(%p1, %r1, %w)\n"
                 "  %r2 : Float(4, 4) = aten::kiln_all_reduce_wait(%s2, %w, %k)\n"
                 "  %u2 : Float(4, 4) = aten::sub(%p2, %r2, %w)\n"
                 "  return (%u1, %u2)\n",
            4);
}

/* The start that depends on fewer nodes goes first, even when the
 * post-order put the other bucket first; the independent relu runs before
 * the waits. */
TEST(pass_schedule_ranks_starts_by_their_producers) {
  th_expect("schedule ranks", schedule,
            HEAD "  %a : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %b : Float(4, 4) = aten::mm(%a, %p2)\n"
                 "  %s2 : Float(4, 4) = aten::kiln_all_reduce_start(%b, %w, %k)\n"
                 "  %r2 : Float(4, 4) = aten::kiln_all_reduce_wait(%s2, %w, %k)\n"
                 "  %s1 : Float(4, 4) = aten::kiln_all_reduce_start(%a, %w, %k)\n"
                 "  %r1 : Float(4, 4) = aten::kiln_all_reduce_wait(%s1, %w, %k)\n"
                 "  %z : Float(4, 4) = aten::relu(%x)\n"
                 "  %o : Float(4, 4) = aten::add(%r1, %r2, %w)\n"
                 "  return (%o, %z)\n",
            HEAD "  %a : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %s1 : Float(4, 4) = aten::kiln_all_reduce_start(%a, %w, %k)\n"
                 "  %b : Float(4, 4) = aten::mm(%a, %p2)\n"
                 "  %s2 : Float(4, 4) = aten::kiln_all_reduce_start(%b, %w, %k)\n"
                 "  %z : Float(4, 4) = aten::relu(%x)\n"
                 "  %r1 : Float(4, 4) = aten::kiln_all_reduce_wait(%s1, %w, %k)\n"
                 "  %r2 : Float(4, 4) = aten::kiln_all_reduce_wait(%s2, %w, %k)\n"
                 "  %o : Float(4, 4) = aten::add(%r1, %r2, %w)\n"
                 "  return (%o, %z)\n",
            -1);
}

TEST(pass_schedule_leaves_graphs_without_all_reduces) {
  const char *g = HEAD "  %a : Float(4, 4) = aten::mm(%x, %p1)\n"
                       "  %z : Float(4, 4) = aten::relu(%p2)\n"
                       "  %o : Float(4, 4) = aten::add(%a, %z, %w)\n"
                       "  return (%o)\n";
  th_expect("schedule none", schedule, g, g, 0);
}

/* An in-place write keeps its place relative to what reads the memory it
 * writes: the relu_ of %a stays after the start that copies %a. */
TEST(pass_schedule_keeps_writes_in_order) {
  th_expect("schedule write", schedule,
            HEAD "  %a : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %s : Float(4, 4) = aten::kiln_all_reduce_start(%a, %w, %k)\n"
                 "  %r : Float(4, 4) = aten::kiln_all_reduce_wait(%s, %w, %k)\n"
                 "  %q : Float(4, 4) = aten::relu_(%a)\n"
                 "  %o : Float(4, 4) = aten::add(%r, %q, %w)\n"
                 "  return (%o)\n",
            HEAD "  %a : Float(4, 4) = aten::mm(%x, %p1)\n"
                 "  %s : Float(4, 4) = aten::kiln_all_reduce_start(%a, %w, %k)\n"
                 "  %q : Float(4, 4) = aten::relu_(%a)\n"
                 "  %r : Float(4, 4) = aten::kiln_all_reduce_wait(%s, %w, %k)\n"
                 "  %o : Float(4, 4) = aten::add(%r, %q, %w)\n"
                 "  return (%o)\n",
            2);
}
