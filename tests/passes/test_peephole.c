/* tests/passes/test_peephole.c: peepholes: arithmetic identities with a
 * constant number (and the cases where dtype promotion or a tensor
 * operand forbids them), t(t(x)), tuple/list construct-unpack pairs,
 * no-op aten::to and aten::expand. */
#include "harness.h"

TEST(pass_peephole_arithmetic_identities) {
  th_expect("peephole identities", pass_peephole,
            "graph(%x : Float(2, 3),\n"
            "      %d : Double(3),\n"
            "      %l : Long(3),\n"
            "      %k : int):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %f1 : float = prim::Constant[value=1.]()\n"
            "  %f0 : float = prim::Constant[value=0.]()\n"
            "  %fa : float = prim::Constant[value=2.5]()\n"
            "  %a : Float(2, 3) = aten::mul(%x, %1)\n"
            "  %b : Float(2, 3) = aten::mul(%f1, %a)\n"
            "  %c : Float(2, 3) = aten::div(%b, %1)\n"
            "  %e : Float(2, 3) = aten::add(%c, %0, %2)\n"
            "  %g : Float(2, 3) = aten::sub(%e, %f0, %k)\n"
            "  %h : Float(2, 3) = aten::add(%0, %g, %1)\n"
            "  %i : Double(3) = aten::add(%d, %f0, %fa)\n"
            "  %j : Double(3) = aten::div(%i, %f1)\n"
            "  %m : Long(3) = aten::mul(%l, %1)\n"
            "  %n : Long(3) = aten::sub(%m, %0, %1)\n"
            "  %t : (Tensor, Tensor, Tensor) = prim::TupleConstruct(%h, %j, %n)\n"
            "  return (%t)\n",
            "graph(%x : Float(2, 3),\n"
            "      %d : Double(3),\n"
            "      %l : Long(3),\n"
            "      %k : int):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %1 : int = prim::Constant[value=1]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %f1 : float = prim::Constant[value=1.]()\n"
            "  %f0 : float = prim::Constant[value=0.]()\n"
            "  %fa : float = prim::Constant[value=2.5]()\n"
            "  %t : (Tensor, Tensor, Tensor) = prim::TupleConstruct(%x, %d, %l)\n"
            "  return (%t)\n",
            10);
}

TEST(pass_peephole_identities_that_must_not_fire) {
  /* each of these changes the dtype, or is not an identity, or has a
   * tensor operand that may broadcast x to a bigger shape */
  const char *text =
      "graph(%x : Float(3),\n"
      "      %l : Long(3),\n"
      "      %bo : Bool(3),\n"
      "      %u : Tensor,\n"
      "      %big : Float(4, 3),\n"
      "      %s : Scalar):\n"
      "  %0 : int = prim::Constant[value=0]()\n"
      "  %1 : int = prim::Constant[value=1]()\n"
      "  %2 : int = prim::Constant[value=2]()\n"
      "  %f1 : float = prim::Constant[value=1.]()\n"
      "  %f0 : float = prim::Constant[value=0.]()\n"
      "  %inf : float = prim::Constant[value=inf]()\n"
      "  %a : Tensor = aten::mul(%l, %f1)\n"       /* Long * 1.0 is Float */
      "  %b : Tensor = aten::mul(%u, %f1)\n"       /* unknown dtype */
      "  %c : Tensor = aten::mul(%u, %1)\n"        /* unknown dtype (Bool?) */
      "  %d : Tensor = aten::mul(%bo, %1)\n"       /* Bool * 1 is Long */
      "  %e : Tensor = aten::div(%l, %1)\n"        /* Long / 1 is Float */
      "  %f : Tensor = aten::add(%x, %big, %1)\n"  /* a tensor operand broadcasts */
      "  %g : Tensor = aten::add(%x, %0, %s)\n"    /* alpha may be inf */
      "  %h : Tensor = aten::add(%x, %0, %inf)\n"  /* inf * 0 is nan */
      "  %i : Tensor = aten::mul(%x, %2)\n"        /* not an identity */
      "  %j : Tensor = aten::add(%0, %x, %2)\n"    /* 0 + 2x */
      "  %k : Tensor = aten::sub(%0, %x, %1)\n"    /* -x */
      "  %m : Tensor = aten::div(%1, %x)\n"        /* 1 / x */
      "  %n : Tensor = aten::add(%l, %f0, %1)\n"   /* Long + 0.0 is Float */
      "  %t : (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, "
      "Tensor, Tensor, Tensor, Tensor) = prim::TupleConstruct(%a, %b, %c, %d, %e, %f, %g, "
      "%h, %i, %j, %k, %m, %n)\n"
      "  return (%t)\n";
  th_expect("peephole no-fire", pass_peephole, text, text, 0);
}

TEST(pass_peephole_transpose_twice) {
  th_expect("peephole t(t(x))", pass_peephole,
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(2, 3, 4)):\n"
            "  %a : Float(3, 2) = aten::t(%x)\n"
            "  %b : Float(2, 3) = aten::t(%a)\n"
            "  %c : Tensor = aten::t(%y)\n"
            "  %d : Tensor = aten::t(%c)\n"
            "  %r : (Tensor, Tensor, Tensor) = prim::TupleConstruct(%a, %b, %d)\n"
            "  return (%r)\n",
            /* t() of a 3-d tensor raises: left alone */
            "graph(%x : Float(2, 3),\n"
            "      %y : Float(2, 3, 4)):\n"
            "  %a : Float(3, 2) = aten::t(%x)\n"
            "  %c : Tensor = aten::t(%y)\n"
            "  %d : Tensor = aten::t(%c)\n"
            "  %r : (Tensor, Tensor, Tensor) = prim::TupleConstruct(%a, %x, %d)\n"
            "  return (%r)\n",
            1);
}

TEST(pass_peephole_tuples_and_lists) {
  th_expect("peephole tuples", pass_peephole,
            "graph(%x : Float(3),\n"
            "      %y : Float(3)):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %t : (Tensor, Tensor) = prim::TupleConstruct(%x, %y)\n"
            "  %a : Tensor, %b : Tensor = prim::TupleUnpack(%t)\n"
            "  %c : Tensor = prim::TupleIndex(%t, %m1)\n"
            "  %l : Tensor[] = prim::ListConstruct(%y, %x)\n"
            "  %p : Tensor, %q : Tensor = prim::ListUnpack(%l)\n"
            "  %r : Tensor = aten::__getitem__(%l, %0)\n"
            "  %n : int = aten::len(%l)\n"
            "  %s : Tensor = aten::mul(%a, %b)\n"
            "  %u : Tensor = aten::mul(%c, %p)\n"
            "  %v : Tensor = aten::mul(%q, %r)\n"
            "  %w : (Tensor, Tensor, Tensor, int) = prim::TupleConstruct(%s, %u, %v, %n)\n"
            "  return (%w)\n",
            "graph(%x : Float(3),\n"
            "      %y : Float(3)):\n"
            "  %0 : int = prim::Constant[value=0]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %t : (Tensor, Tensor) = prim::TupleConstruct(%x, %y)\n"
            "  %l : Tensor[] = prim::ListConstruct(%y, %x)\n"
            "  %17 : int = prim::Constant[value=2]()\n"
            "  %s : Tensor = aten::mul(%x, %y)\n"
            "  %u : Tensor = aten::mul(%y, %y)\n"
            "  %v : Tensor = aten::mul(%x, %y)\n"
            "  %w : (Tensor, Tensor, Tensor, int) = prim::TupleConstruct(%s, %u, %v, %17)\n"
            "  return (%w)\n",
            5);
  /* wrong arity, an out-of-range index, and lists that are appended to:
   * left for run time */
  const char *text = "graph(%x : Float(3),\n"
                     "      %y : Float(3)):\n"
                     "  %5 : int = prim::Constant[value=5]()\n"
                     "  %l : Tensor[] = prim::ListConstruct(%y, %x)\n"
                     "  %p : Tensor, %q : Tensor, %z : Tensor = prim::ListUnpack(%l)\n"
                     "  %r : Tensor = aten::__getitem__(%l, %5)\n"
                     "  %l2 : Tensor[] = aten::append(%l, %x)\n"
                     "  %m : Tensor[] = prim::ListConstruct(%y, %x)\n"
                     "  %a : Tensor, %b : Tensor = prim::ListUnpack(%m)\n"
                     "  %w : (Tensor, Tensor, Tensor) = prim::TupleConstruct(%p, %r, %a)\n"
                     "  return (%w)\n";
  th_expect("peephole lists kept", pass_peephole, text, text, 0);
}

TEST(pass_peephole_to_and_expand) {
  th_expect("peephole to/expand", pass_peephole,
            "graph(%x : Float(2, 3),\n"
            "      %u : Tensor):\n"
            "  %none : NoneType = prim::Constant()\n"
            "  %fl : bool = prim::Constant[value=0]()\n"
            "  %tr : bool = prim::Constant[value=1]()\n"
            "  %6 : int = prim::Constant[value=6]()\n"
            "  %7 : int = prim::Constant[value=7]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %3 : int = prim::Constant[value=3]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %4 : int = prim::Constant[value=4]()\n"
            "  %sz : int[] = prim::Constant[value=[2, 3]]()\n"
            "  %a : Float(2, 3) = aten::to(%x, %6, %fl, %fl, %none)\n"
            "  %b : Double(2, 3) = aten::to(%x, %7, %fl, %fl, %none)\n"
            "  %c : Float(2, 3) = aten::to(%x, %6, %fl, %tr, %none)\n"
            "  %d : Tensor = aten::to(%u, %6, %fl, %fl, %none)\n"
            "  %s1 : int[] = prim::ListConstruct(%m1, %3)\n"
            "  %e : Float(2, 3) = aten::expand(%a, %s1, %fl)\n"
            "  %f : Float(2, 3) = aten::expand(%x, %sz, %fl)\n"
            "  %s2 : int[] = prim::ListConstruct(%4, %2, %3)\n"
            "  %g : Float(4, 2, 3) = aten::expand(%x, %s2, %fl)\n"
            "  %r : (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) = "
            "prim::TupleConstruct(%a, %b, %c, %d, %e, %f, %g)\n"
            "  return (%r)\n",
            "graph(%x : Float(2, 3),\n"
            "      %u : Tensor):\n"
            "  %none : NoneType = prim::Constant()\n"
            "  %fl : bool = prim::Constant[value=0]()\n"
            "  %tr : bool = prim::Constant[value=1]()\n"
            "  %6 : int = prim::Constant[value=6]()\n"
            "  %7 : int = prim::Constant[value=7]()\n"
            "  %2 : int = prim::Constant[value=2]()\n"
            "  %3 : int = prim::Constant[value=3]()\n"
            "  %m1 : int = prim::Constant[value=-1]()\n"
            "  %4 : int = prim::Constant[value=4]()\n"
            "  %sz : int[] = prim::Constant[value=[2, 3]]()\n"
            "  %b : Double(2, 3) = aten::to(%x, %7, %fl, %fl, %none)\n"
            "  %c : Float(2, 3) = aten::to(%x, %6, %fl, %tr, %none)\n"
            "  %d : Tensor = aten::to(%u, %6, %fl, %fl, %none)\n"
            "  %s1 : int[] = prim::ListConstruct(%m1, %3)\n"
            "  %s2 : int[] = prim::ListConstruct(%4, %2, %3)\n"
            "  %g : Float(4, 2, 3) = aten::expand(%x, %s2, %fl)\n"
            "  %r : (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) = "
            "prim::TupleConstruct(%x, %b, %c, %d, %x, %x, %g)\n"
            "  return (%r)\n",
            3);
}
