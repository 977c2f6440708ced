/* tests/ir/test_ir_text.c: hand-written graph texts: every constant kind,
 * every type form, nested If/Loop, groups with `with` subgraphs, profiles
 * and guards print back unchanged; malformed texts give "line:col:"
 * errors naming the problem. */
#include "ir/ir.h"
#include "test.h"

/* Parses text, verifies, and checks print(parse(text)) == text. Returns
 * the graph (caller frees) or NULL. */
static ir_graph *round_trip(const char *text, int line) {
  ir_graph *g = ir_graph_parse(text, strlen(text));
  if (!g) {
    test_fail(__FILE__, line, "parse: %s", kiln_last_error());
    return NULL;
  }
  if (ir_graph_verify(g) < 0) test_fail(__FILE__, line, "verify: %s", kiln_last_error());
  char *p = ir_graph_print(g, 0);
  if (!p || strcmp(p, text) != 0)
    test_fail(__FILE__, line, "printed:\n%s\nexpected:\n%s", p ? p : "(null)", text);
  core_free(p);
  return g;
}
#define ROUND_TRIP(text) round_trip(text, __LINE__)

/* The node defining the value named name. */
static const ir_node *def(const ir_graph *g, const char *name) {
  ir_value *v = ir_graph_find_value(g, name);
  return v ? v->node : NULL;
}

static const ir_attr *value_attr(const ir_graph *g, const char *name) {
  const ir_node *n = def(g, name);
  return n ? ir_node_attr(n, "value") : NULL;
}

TEST(ir_text_constants) {
  static const char *text =
      "graph(%x : Tensor):\n"
      "  %i : int = prim::Constant[value=-7]()\n"
      "  %b : bool = prim::Constant[value=1]()\n"
      "  %f1 : float = prim::Constant[value=1.]()\n"
      "  %f2 : float = prim::Constant[value=0.10000000000000001]()\n"
      "  %f3 : float = prim::Constant[value=1e-08]()\n"
      "  %f4 : float = prim::Constant[value=inf]()\n"
      "  %f5 : float = prim::Constant[value=-inf]()\n"
      "  %f6 : float = prim::Constant[value=nan]()\n"
      "  %f7 : float = prim::Constant[value=-0.]()\n"
      "  %f8 : float = prim::Constant[value=2.5]()\n"
      "  %f9 : float = prim::Constant[value=10000000000]()\n"
      "  %f10 : float = prim::Constant[value=-1.2345678901234567e+300]()\n"
      "  %s : str = prim::Constant[value=\"a\\\"b\\n\\t\\'c\\\\ \\001\"]()\n"
      "  %n : NoneType = prim::Constant()\n"
      "  %l : int[] = prim::Constant[value=[1, -2, 3]]()\n"
      "  %e : int[] = prim::Constant[value=[]]()\n"
      "  %fl : float[] = prim::Constant[value=[1.5, 2.]]()\n"
      "  %fb : float[] = prim::Constant[value=[10000000000, 0.5]]()\n"
      "  %bl : bool[] = prim::Constant[value=[True, False]]()\n"
      "  %sl : str[] = prim::Constant[value=[\"a\", \"b\"]]()\n"
      "  %ll : int[][] = prim::Constant[value=[[1, 2], [3]]]()\n"
      "  %t : (int, str, NoneType) = prim::Constant[value=(1, \"s\", None)]()\n"
      "  %t1 : (float) = prim::Constant[value=(0.5,)]()\n"
      "  %d : Device = prim::Constant[value=\"cpu\"]()\n"
      "  %fn : Function = prim::Constant[name=\"softmax\"]()\n"
      "  %ff : Function = prim::Constant[name=\"fallback_function\", fallback=1]()\n"
      "  %dt : int = prim::Constant[value=6]()\n"
      "  %o : int? = prim::Constant[value=3]()\n"
      "  %on : int? = prim::Constant()\n"
      "  %sc : Scalar = prim::Constant[value=2]()\n"
      "  return (%i, %b, %f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8, %f9, %f10, %s, %n, %l, %e, "
      "%fl, %fb, %bl, %sl, %ll, %t, %t1, %d, %fn, %ff, %dt, %o, %on, %sc)\n";
  ir_graph *g = ROUND_TRIP(text);
  if (!g) return;
  const ir_attr *a;
  CHECK((a = value_attr(g, "i")) && a->kind == IR_ATTR_INT && a->i == -7);
  CHECK((a = value_attr(g, "b")) && a->kind == IR_ATTR_INT && a->i == 1);
  CHECK((a = value_attr(g, "f1")) && a->kind == IR_ATTR_FLOAT && a->f == 1.0);
  CHECK((a = value_attr(g, "f2")) && a->kind == IR_ATTR_FLOAT && a->f == 0.1);
  CHECK((a = value_attr(g, "f3")) && a->f == 1e-8);
  CHECK((a = value_attr(g, "f4")) && isinf(a->f) && a->f > 0);
  CHECK((a = value_attr(g, "f5")) && isinf(a->f) && a->f < 0);
  CHECK((a = value_attr(g, "f6")) && isnan(a->f));
  CHECK((a = value_attr(g, "f7")) && a->f == 0 && signbit(a->f));
  CHECK((a = value_attr(g, "f9")) && a->kind == IR_ATTR_FLOAT && a->f == 1e10);
  CHECK((a = value_attr(g, "f10")) && a->f == -1.2345678901234567e+300);
  CHECK((a = value_attr(g, "s")) && a->kind == IR_ATTR_STR &&
        strcmp(a->s, "a\"b\n\t'c\\ \001") == 0);
  CHECK(def(g, "n") && def(g, "n")->n_attrs == 0);
  CHECK((a = value_attr(g, "l")) && a->kind == IR_ATTR_INTS && a->ints.n == 3 &&
        a->ints.v[1] == -2);
  CHECK((a = value_attr(g, "e")) && a->kind == IR_ATTR_INTS && a->ints.n == 0);
  CHECK((a = value_attr(g, "fl")) && a->kind == IR_ATTR_FLOATS && a->floats.v[1] == 2.0);
  CHECK((a = value_attr(g, "fb")) && a->kind == IR_ATTR_FLOATS && a->floats.v[0] == 1e10);
  CHECK((a = value_attr(g, "bl")) && a->kind == IR_ATTR_IVALUE && a->iv->tag == IR_IV_LIST &&
        a->iv->items.n == 2 && a->iv->items.v[0].tag == IR_IV_BOOL && a->iv->items.v[0].b);
  CHECK((a = value_attr(g, "t")) && a->kind == IR_ATTR_IVALUE && a->iv->tag == IR_IV_TUPLE &&
        a->iv->items.n == 3 && a->iv->items.v[2].tag == IR_IV_NONE &&
        strcmp(a->iv->items.v[1].s, "s") == 0);
  CHECK((a = value_attr(g, "d")) && a->kind == IR_ATTR_STR && strcmp(a->s, "cpu") == 0 &&
        ir_graph_find_value(g, "d")->type->kind == IR_TYPE_DEVICE);
  CHECK(def(g, "fn") && (a = ir_node_attr(def(g, "fn"), "name")) && strcmp(a->s, "softmax") == 0);
  ir_graph_free(g);
}

TEST(ir_text_types) {
  static const char *text =
      "graph(%a : Float(4, 3, strides=[3, 1], requires_grad=0, device=cpu),\n"
      "      %b : Float(*, 3),\n"
      "      %c : Tensor(requires_grad=1),\n"
      "      %d : Float(),\n"
      "      %e : Long(requires_grad=0, device=cpu),\n"
      "      %f : Float(..., requires_grad=0),\n"
      "      %g : Tensor(dim=0, requires_grad=1),\n"
      "      %h : Double(2, 3),\n"
      "      %i : Bool,\n"
      "      %j : Tensor(2, *, device=cpu),\n"
      "      %k : Tensor,\n"
      "      %l : int[],\n"
      "      %m : Tensor[],\n"
      "      %n : float[],\n"
      "      %o : bool[],\n"
      "      %p : (Tensor, Tensor),\n"
      "      %q : Tensor?,\n"
      "      %r : int?,\n"
      "      %s : int[]?,\n"
      "      %t : (int, (float, str)),\n"
      "      %u : int[][],\n"
      "      %v : Scalar,\n"
      "      %w : Device,\n"
      "      %x : NoneType,\n"
      "      %y : str[],\n"
      "      %z : Tensor?[],\n"
      "      %aa : (),\n"
      "      %ab : Any,\n"
      "      %ac : Tensor()):\n"
      "  return (%a)\n";
  ir_graph *g = ROUND_TRIP(text);
  if (!g) return;
  const ir_type *t = ir_graph_find_value(g, "a")->type;
  CHECK(t->kind == IR_TYPE_TENSOR && t->dtype == KILN_DTYPE_F32 && t->ndim == 2 &&
        t->sizes[0] == 4 && t->sizes[1] == 3 && t->has_strides && t->strides[0] == 3 &&
        t->requires_grad == 0 && strcmp(t->device, "cpu") == 0 && t->seen);
  t = ir_graph_find_value(g, "b")->type;
  CHECK(t->ndim == 2 && t->sizes[0] == -1 && t->sizes[1] == 3 && !t->has_strides &&
        t->requires_grad == -1 && !t->device);
  t = ir_graph_find_value(g, "c")->type;
  CHECK(t->dtype == -1 && t->ndim == -1 && t->requires_grad == 1 && t->seen);
  CHECK(ir_graph_find_value(g, "d")->type->ndim == 0);
  CHECK(ir_graph_find_value(g, "e")->type->ndim == 0 &&
        ir_graph_find_value(g, "e")->type->dtype == KILN_DTYPE_I64);
  t = ir_graph_find_value(g, "f")->type;
  CHECK(t->ndim == -1 && t->dtype == KILN_DTYPE_F32 && t->requires_grad == 0);
  t = ir_graph_find_value(g, "g")->type;
  CHECK(t->ndim == 0 && t->dtype == -1 && t->requires_grad == 1);
  t = ir_graph_find_value(g, "i")->type;
  CHECK(t->ndim == -1 && t->dtype == KILN_DTYPE_BOOL && t->seen);
  t = ir_graph_find_value(g, "k")->type;
  CHECK(t->kind == IR_TYPE_TENSOR && !t->seen && t == ir_type_tensor());
  t = ir_graph_find_value(g, "t")->type;
  CHECK(t->kind == IR_TYPE_TUPLE && t->n_elems == 2 && t->elems[1]->kind == IR_TYPE_TUPLE &&
        t->elems[1]->elems[1]->kind == IR_TYPE_STR);
  t = ir_graph_find_value(g, "s")->type;
  CHECK(t->kind == IR_TYPE_OPTIONAL && t->elems[0]->kind == IR_TYPE_LIST);
  t = ir_graph_find_value(g, "z")->type;
  CHECK(t->kind == IR_TYPE_LIST && t->elems[0]->kind == IR_TYPE_OPTIONAL);
  CHECK(ir_graph_find_value(g, "v")->type->kind == IR_TYPE_NUMBER);
  CHECK(ir_graph_find_value(g, "aa")->type->kind == IR_TYPE_TUPLE &&
        ir_graph_find_value(g, "aa")->type->n_elems == 0);
  ir_graph_free(g);
  /* ScalarType, Layout and MemoryFormat are ints (as TorchScript prints) */
  static const char *st = "graph(%a : ScalarType):\n  return (%a)\n";
  g = ir_graph_parse(st, strlen(st));
  char *p = g ? ir_graph_print(g, 0) : NULL;
  CHECK(p && strcmp(p, "graph(%a : int):\n  return (%a)\n") == 0);
  core_free(p);
  ir_graph_free(g);
}

TEST(ir_text_nested_blocks) {
  static const char *text =
      "graph(%x.1 : Tensor,\n"
      "      %n.1 : int,\n"
      "      %flag.1 : bool):\n"
      "  %3 : bool = prim::Constant[value=1]()\n"
      "  %4 : int = prim::Constant[value=2]()\n"
      "  %y : Tensor, %k : int = prim::Loop(%n.1, %3, %x.1, %4) # f.py:3:4\n"
      "    block0(%i.1 : int, %y.3 : Tensor, %k.3 : int):\n"
      "      %8 : int = aten::remainder(%i.1, %4)\n"
      "      %9 : bool = aten::eq(%8, %4)\n"
      "      %y.9 : Tensor = prim::If(%9) # f.py:4:8\n"
      "        block0():\n"
      "          %y.5 : Tensor = prim::Loop(%k.3, %flag.1, %y.3)\n"
      "            block0(%j : int, %z : Tensor):\n"
      "              %13 : Tensor = aten::mul(%z, %x.1)\n"
      "              %14 : bool = aten::lt(%j, %n.1)\n"
      "              -> (%14, %13)\n"
      "          -> (%y.5)\n"
      "        block1():\n"
      "          %y.7 : Tensor = aten::neg(%y.3)\n"
      "          -> (%y.7)\n"
      "       = prim::If(%flag.1)\n"
      "        block0():\n"
      "          -> ()\n"
      "        block1():\n"
      "          %16 : str = prim::Constant[value=\"Exception\"]()\n"
      "           = prim::RaiseException(%16)\n"
      "          -> ()\n"
      "      %k.5 : int = aten::add(%k.3, %i.1)\n"
      "      -> (%3, %y.9, %k.5)\n"
      "  %17 : (Tensor, int) = prim::TupleConstruct(%y, %k)\n"
      "  %a : Tensor, %b : int = prim::TupleUnpack(%17)\n"
      "  %19 : int = prim::TupleIndex(%17, %4)\n"
      "  return (%a, %b, %19)\n";
  ir_graph *g = ROUND_TRIP(text);
  if (!g) return;
  const ir_node *loop = def(g, "y");
  CHECK(loop && loop->prim == IR_PRIM_LOOP && loop->n_blocks == 1 && loop->n_outputs == 2 &&
        loop->src && strcmp(loop->src, "f.py:3:4") == 0);
  const ir_node *iff = def(g, "y.9");
  CHECK(iff && iff->prim == IR_PRIM_IF && iff->owner == loop->blocks[0]);
  const ir_node *inner = def(g, "y.5");
  CHECK(inner && inner->owner == iff->blocks[0]);
  /* builtins vs tensor ops by input types */
  CHECK(def(g, "9")->prim == IR_PRIM_EQ);
  CHECK(def(g, "13")->op == KILN_OP_MUL);
  CHECK(def(g, "y.7")->op == KILN_OP_NEG);
  CHECK(def(g, "k.5")->prim == IR_PRIM_ADD);
  /* use lists: %x.1 is used by the outer Loop and the innermost mul */
  ir_value *x = ir_graph_find_value(g, "x.1");
  CHECK(x->n_uses == 2 && x->uses[0].user == loop && x->uses[1].user == def(g, "13"));
  ir_graph_free(g);
}

TEST(ir_text_groups_profiles_guards) {
  static const char *text =
      "graph(%b.1 : Tensor,\n"
      "      %w.1 : Tensor,\n"
      "      %x.1 : Tensor):\n"
      "  %11 : Tensor = prim::profile[profiled_type=Float(3, 5, strides=[5, 1], "
      "requires_grad=1, device=cpu), seen_none=0](%w.1)\n"
      "  %44 : Float(5, strides=[1], requires_grad=0, device=cpu), %45 : Float(3, 5, "
      "strides=[5, 1], requires_grad=1, device=cpu), %46 : Float(4, 3, strides=[3, 1], "
      "requires_grad=0, device=cpu), %47 : bool = prim::RequiresGradCheck[types=[Tensor("
      "requires_grad=0), Tensor(requires_grad=1), Tensor(requires_grad=0)]](%b.1, %11, %x.1)\n"
      "  %48 : Tensor = prim::If(%47)\n"
      "    block0():\n"
      "      %19 : Tensor = prim::DifferentiableGraph_0(%44, %45, %46)\n"
      "      -> (%19)\n"
      "    block1():\n"
      "      %65 : Function = prim::Constant[name=\"fallback_function\", fallback=1]()\n"
      "      %66 : (Tensor) = prim::CallFunction(%65, %b.1, %w.1, %x.1)\n"
      "      %67 : Tensor = prim::TupleUnpack(%66)\n"
      "      -> (%67)\n"
      "  %70 : Tensor = prim::FusionGroup_1[device=\"cpu\"](%48, %48)\n"
      "   = prim::profile()\n"
      "  return (%70)\n"
      "with prim::DifferentiableGraph_0 = graph(%b : Tensor(requires_grad=0),\n"
      "      %w : Tensor(requires_grad=1),\n"
      "      %x : Tensor(requires_grad=0)):\n"
      "  %3 : int = prim::Constant[value=1]()\n"
      "  %4 : Tensor = aten::matmul(%x, %w)\n"
      "  %5 : Tensor = prim::FusionGroup_0(%4, %b)\n"
      "  return (%5)\n"
      "with prim::FusionGroup_0 = graph(%a : Tensor,\n"
      "      %c : Tensor):\n"
      "  %2 : int = prim::Constant[value=1]()\n"
      "  %3 : Tensor = aten::add(%a, %c, %2)\n"
      "  %4 : Tensor = aten::tanh(%3)\n"
      "  return (%4)\n"
      "with prim::FusionGroup_1 = graph(%p : Tensor,\n"
      "      %q : Tensor):\n"
      "  %r : Tensor = aten::mul(%p, %q)\n"
      "  return (%r)\n";
  ir_graph *g = ROUND_TRIP(text);
  if (!g) return;
  const ir_node *dg = def(g, "19");
  const ir_attr *sub = dg ? ir_node_attr(dg, "Subgraph") : NULL;
  CHECK(dg && dg->prim == IR_PRIM_DIFFERENTIABLE_GRAPH && sub && sub->kind == IR_ATTR_GRAPH);
  if (sub) {
    const ir_node *fg = def(sub->g, "5");
    CHECK(fg && fg->prim == IR_PRIM_FUSION_GROUP && ir_node_attr(fg, "Subgraph"));
  }
  const ir_node *guard = def(g, "47");
  const ir_attr *types = guard ? ir_node_attr(guard, "types") : NULL;
  CHECK(types && types->kind == IR_ATTR_TYPES && types->types.n == 3 &&
        types->types.v[1]->requires_grad == 1 && types->types.v[1]->ndim == -1);
  const ir_attr *pt = ir_node_attr(def(g, "11"), "profiled_type");
  CHECK(pt && pt->kind == IR_ATTR_TYPE && pt->ty->ndim == 2 && pt->ty->sizes[1] == 5);
  /* clones carry their subgraphs along */
  ir_graph *c = ir_graph_clone(g);
  char *pc = c ? ir_graph_print(c, 0) : NULL;
  CHECK(pc && strcmp(pc, text) == 0);
  CHECK(c && ir_graph_verify(c) == 0);
  core_free(pc);
  ir_graph_free(c);
  ir_graph_free(g);
}

TEST(ir_text_overloads_and_layout) {
  /* overload names are kept as written; indentation, CRLF and comments
   * anywhere do not matter */
  static const char *in =
      "# a comment before the graph\r\n"
      "graph(%a : int, %b : int):  # here too\r\n"
      "%c : int = aten::add.int(%a, %b)\r\n"
      "        %d : float = aten::div(%c, %b) # x.py:1:2\r\n"
      "  return (%c,\r\n %d)";
  static const char *out =
      "graph(%a : int,\n"
      "      %b : int):\n"
      "  %c : int = aten::add.int(%a, %b)\n"
      "  %d : float = aten::div(%c, %b) # x.py:1:2\n"
      "  return (%c, %d)\n";
  ir_graph *g = ir_graph_parse(in, strlen(in));
  CHECK_MSG(g, "%s", kiln_last_error());
  if (!g) return;
  char *p = ir_graph_print(g, 0);
  CHECK_MSG(p && strcmp(p, out) == 0, "%s", p);
  CHECK(def(g, "c")->prim == IR_PRIM_ADD && strcmp(def(g, "c")->overload, "int") == 0);
  CHECK(def(g, "c")->line == 3 && def(g, "c")->col == 12);
  core_free(p);
  ir_graph_free(g);
  /* numeric names are kept, and new values never print like them */
  static const char *numeric =
      "graph(%7 : Tensor):\n  %12 : Tensor = aten::relu(%7)\n  return (%12)\n";
  g = ir_graph_parse(numeric, strlen(numeric));
  CHECK_MSG(g, "%s", kiln_last_error());
  if (!g) return;
  ir_node *n = ir_node_new_op(g, KILN_OP_NEG);
  ir_node_add_input(n, ir_graph_find_value(g, "12"));
  ir_value *v = ir_node_add_output(n, ir_type_tensor());
  ir_node_append(ir_graph_top(g), n);
  CHECK(v && v->id > 12 && !v->name);
  ir_graph_free(g);
}

/* ---- malformed text ------------------------------------------------------------------ */

typedef struct bad_case {
  const char *text;
  const char *error; /* expected start of the message, "line:col: ..." */
} bad_case;

static const bad_case bad[] = {
    /* truncated */
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::relu(%x",
     "2:30: expected ',' or ')', found end of input"},
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::relu(%x)\n", "3:1: expected a node or 'return'"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::If(%x)\n    block0():\n",
     "4:1: expected a node or '->'"},
    {"graph(%x : Te", "1:12: unknown type 'Te'"},
    {"", "1:1: expected 'graph('"},
    {"graph(%x : Tensor):\n  %s : str = prim::Constant[value=\"abc]()\n  return (%s)\n",
     "2:35: expected a constant, found an unterminated string"},
    /* unknown op, unknown kind */
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::frobnicate(%x)\n  return (%1)\n",
     "2:17: unknown op aten::frobnicate"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::Frob(%x)\n  return (%1)\n",
     "2:17: unknown node kind prim::Frob"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::Param()\n  return (%1)\n",
     "2:17: prim::Param cannot appear in graph text"},
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::frobnicate(%x)\n  return (%1)\n",
     "2:17: unknown op aten::frobnicate"},
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::broadcast_tensors(%x)\n  return (%1)\n",
     "2:17: aten::broadcast_tensors: argument 0 (tensors) expects Tensor[], got Tensor"},
    /* type mismatches */
    {"graph(%n : int):\n  %1 : Tensor = aten::relu(%n)\n  return (%1)\n",
     "2:17: aten::relu: no tensor among the arguments (int)"},
    {"graph(%x : Tensor):\n  %1 : int = aten::relu(%x)\n  return (%1)\n",
     "2:14: aten::relu: output 0 is declared int but the op returns Tensor"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::If(%x)\n    block0():\n      -> (%x)\n"
     "    block1():\n      -> (%x)\n  return (%1)\n",
     "2:17: prim::If: condition 0 is Tensor, expected bool"},
    {"graph():\n  %1 : int = prim::Constant[value=2.5]()\n  return (%1)\n",
     "2:14: prim::Constant: value does not fit type int"},
    {"graph():\n  %1 : bool = prim::Constant[value=2]()\n  return (%1)\n",
     "2:15: prim::Constant: value does not fit type bool"},
    {"graph():\n  %1 : int = prim::Constant()\n  return (%1)\n",
     "2:14: prim::Constant without a value must be NoneType"},
    {"graph(%a : int, %s : str):\n  %1 : int = aten::add(%a, %s)\n  return (%1)\n",
     "2:14: aten::add: no overload for argument types (int, str)"},
    {"graph(%a : int, %b : int):\n  %1 : str = aten::add(%a, %b)\n  return (%1)\n",
     "2:14: aten::add: no overload for (int, int) -> (str)"},
    {"graph(%x : Tensor, %y : Tensor):\n  %1 : int[] = prim::ListConstruct(%x, %y)\n  return "
     "(%1)\n",
     "2:16: prim::ListConstruct: input 0 is Tensor, expected int"},
    {"graph(%x : Tensor):\n  %1 : (Tensor, int) = prim::TupleConstruct(%x, %x)\n  return (%1)\n",
     "2:24: prim::TupleConstruct: input 1 is Tensor, expected int"},
    /* use before definition, scopes */
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::relu(%2)\n  %2 : Tensor = aten::relu(%x)\n"
     "  return (%1)\n",
     "2:28: use of undefined value %2"},
    {"graph(%x : Tensor, %c : bool):\n  %1 : Tensor = prim::If(%c)\n    block0():\n"
     "      %2 : Tensor = aten::relu(%x)\n      -> (%2)\n    block1():\n      -> (%2)\n"
     "  return (%1)\n",
     "7:11: %2 is defined in a block that does not enclose this use"},
    {"graph(%x : Tensor, %c : bool):\n  %1 : Tensor = prim::If(%c)\n    block0():\n"
     "      -> (%1)\n    block1():\n      -> (%x)\n  return (%1)\n",
     "4:11: use of %1 before its definition"},
    {"graph(%x : Tensor):\n  %x : Tensor = aten::relu(%x)\n  return (%x)\n",
     "2:3: redefinition of %x"},
    /* arity */
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::mm(%x)\n  return (%1)\n",
     "2:17: aten::mm expects 2 arguments"},
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::sum(%x)\n  return (%1)\n",
     "2:17: aten::sum expects 4 arguments"},
    {"graph(%x : Tensor):\n  %1 : Tensor, %2 : Tensor = aten::relu(%x)\n  return (%1)\n",
     "2:30: aten::relu returns 1 values, but the node has 2 outputs"},
    {"graph(%x : Tensor, %c : bool):\n  %1 : Tensor = prim::If(%c)\n    block0():\n"
     "      -> (%x)\n  return (%1)\n",
     "2:17: prim::If: expected 2 blocks, got 1"},
    {"graph(%x : Tensor, %c : bool):\n  %1 : Tensor = prim::If(%c)\n    block0():\n"
     "      -> (%x)\n    block1():\n      -> ()\n  return (%1)\n",
     "2:17: prim::If: block1 returns 0 values for 1 outputs"},
    {"graph(%x : Tensor, %n : int, %c : bool):\n  %1 : Tensor = prim::Loop(%n, %c, %x)\n"
     "    block0(%i : int):\n      -> (%c, %x)\n  return (%1)\n",
     "2:17: prim::Loop: expected 2 block parameters (iteration, carried...), got 1"},
    {"graph(%x : Tensor, %c : bool):\n  %1 : Tensor = prim::If(%c)\n    block1():\n",
     "3:5: expected block0, found 'block1'"},
    /* bad constants and attributes */
    {"graph():\n  %1 : int = prim::Constant[value=99999999999999999999]()\n  return (%1)\n",
     "2:35: integer 99999999999999999999 out of range"},
    {"graph():\n  %1 : int[] = prim::Constant[value=[1, ]]()\n  return (%1)\n",
     "2:41: unexpected ',' before ']'"},
    {"graph():\n  %1 : str = prim::Constant[value=\"\\q\"]()\n  return (%1)\n",
     "2:35: unknown escape '\\q' in a string"},
    {"graph():\n  %1 : int = prim::Constant[value=1, value=2]()\n  return (%1)\n",
     "2:38: duplicate attribute value"},
    {"graph():\n  %1 : Float(2) = prim::Constant[value={1}]()\n  return (%1)\n",
     "2:33: tensor constants are not supported"},
    {"graph():\n  %1 : Tensor = prim::Constant[value=1]()\n  return (%1)\n",
     "2:31: tensor constants are not supported"},
    /* bad types */
    {"graph(%x : ComplexFloat(2, 3)):\n  return (%x)\n", "1:12: unsupported tensor dtype 'ComplexFloat'"},
    {"graph(%x : Float(2, strides=[1, 1])):\n  return (%x)\n", "1:35: 2 strides for 1 dims"},
    {"graph(%x : Float(1, 1, 1, 1, 1, 1, 1, 1, 1)):\n  return (%x)\n",
     "1:42: tensor type with more than 8 dims"},
    {"graph(%x : Float(2, requires_grad=2)):\n  return (%x)\n", "1:35: expected 0 or 1"},
    {"graph(%x : Dict(str, Tensor)):\n  return (%x)\n", "1:12: unknown type 'Dict'"},
    /* structure */
    {"graph(%x : Tensor):\n  return (%x)\ngraph", "3:1: expected end of input after the graph"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::FusionGroup_0(%x)\n  return (%1)\n",
     "4:1: expected 'with' and the subgraph of a group"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::FusionGroup_1(%x)\n  return (%1)\n",
     "2:17: expected group number 0, found prim::FusionGroup_1"},
    {"graph(%x : Tensor):\n  %1 : Tensor = prim::FusionGroup_0(%x)\n  return (%1)\n"
     "with prim::FusionGroup_0 = graph(%a : Tensor, %b : Tensor):\n  return (%a)\n",
     "2:17: prim::FusionGroup: expected 2 inputs (the subgraph's parameters), got 1"},
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::relu(%x) junk\n  return (%1)\n",
     "2:32: expected a node or 'return', found 'junk'"},
    {"graph(%x : Tensor):\n  %1 : Tensor = aten::relu(%x)\n  return (%1)\n\x01",
     "4:1: expected end of input after the graph, found byte 0x01"},
};

TEST(ir_text_errors) {
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kiln_clear_error();
    ir_graph *g = ir_graph_parse(bad[i].text, strlen(bad[i].text));
    CHECK_MSG(!g, "case %zu parsed: %s", i, bad[i].text);
    const char *msg = kiln_last_error();
    CHECK_MSG(strncmp(msg, bad[i].error, strlen(bad[i].error)) == 0,
              "case %zu: got \"%s\", expected \"%s...\"", i, msg, bad[i].error);
    ir_graph_free(g);
  }
  test_note("%zu malformed graphs", sizeof bad / sizeof *bad);
}
