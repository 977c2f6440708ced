/* tests/ir/test_ir_graph.c: building graphs with the API, the mutators
 * passes use (each checked against the printed text and the verifier),
 * names, attributes, types, clones and copies between graphs, and the
 * verifier's own failures. */
#include "ir/ir.h"
#include "test.h"

static bool prints_as(const ir_graph *g, const char *want, int line) {
  char *p = ir_graph_print(g, IR_PRINT_NO_SOURCE);
  bool ok = p && strcmp(p, want) == 0;
  if (!ok) test_fail(__FILE__, line, "printed:\n%s\nexpected:\n%s", p ? p : "(null)", want);
  core_free(p);
  if (ir_graph_verify(g) < 0) test_fail(__FILE__, line, "verify: %s", kiln_last_error());
  return ok;
}
#define PRINTS_AS(g, want) prints_as(g, want, __LINE__)

static ir_graph *parse(const char *text) {
  ir_graph *g = ir_graph_parse(text, strlen(text));
  if (!g) test_fail(__FILE__, __LINE__, "parse: %s", kiln_last_error());
  return g;
}

static ir_node *node_of(const ir_graph *g, const char *name) {
  ir_value *v = ir_graph_find_value(g, name);
  return v ? v->node : NULL;
}

TEST(ir_graph_build) {
  ir_graph *g = ir_graph_new();
  ir_block *top = ir_graph_top(g);
  ir_value *x = ir_block_add_param(top, ir_type_tensor(), "x");
  ir_value *y = ir_block_add_param(top, ir_type_tensor(), "y");
  ir_node *k = ir_node_new_prim(g, IR_PRIM_CONSTANT);
  ir_node_set_i(k, "value", 1);
  ir_value *one = ir_node_add_output(k, ir_type_int());
  ir_node_append(top, k);
  ir_node *add = ir_node_new_op(g, KILN_OP_ADD);
  ir_node_add_input(add, x);
  ir_node_add_input(add, y);
  ir_node_add_input(add, one);
  ir_value *s = ir_node_add_output(add, ir_type_tensor());
  ir_node_append(top, add);
  ir_node *relu = ir_node_new_op(g, KILN_OP_RELU);
  ir_node_add_input(relu, s);
  ir_value *r = ir_node_add_output(relu, ir_type_tensor());
  CHECK(ir_value_set_name(r, "out") == 0);
  ir_node_append(top, relu);
  ir_block_add_return(top, r);
  PRINTS_AS(g, "graph(%x : Tensor,\n      %y : Tensor):\n"
               "  %2 : int = prim::Constant[value=1]()\n"
               "  %3 : Tensor = aten::add(%x, %y, %2)\n"
               "  %out : Tensor = aten::relu(%3)\n"
               "  return (%out)\n");
  CHECK(x->n_uses == 1 && x->uses[0].user == add && x->uses[0].index == 0);
  CHECK(one->n_uses == 1 && one->uses[0].index == 2);
  CHECK(r->n_uses == 1 && r->uses[0].user == top->ret);
  CHECK(strcmp(ir_node_kind(add), "aten::add") == 0 && ir_node_check(add) == 0);
  ir_graph_free(g);
}

TEST(ir_graph_insert_move_replace) {
  ir_graph *g = parse("graph(%x : Tensor):\n"
                      "  %a : Tensor = aten::relu(%x)\n"
                      "  %b : Tensor = aten::neg(%a)\n"
                      "  return (%a, %b)\n");
  if (!g) return;
  ir_node *na = node_of(g, "a"), *nb = node_of(g, "b");
  /* insert_after / insert_before, including at the Param and Return nodes */
  ir_node *e = ir_node_new_op(g, KILN_OP_EXP);
  ir_node_add_input(e, ir_graph_find_value(g, "x"));
  ir_value *ev = ir_node_add_output(e, ir_type_tensor());
  ir_value_set_name(ev, "e");
  ir_node_insert_after(e, na);
  ir_node *t = ir_node_new_op(g, KILN_OP_TANH);
  ir_node_add_input(t, ir_graph_find_value(g, "x"));
  ir_value_set_name(ir_node_add_output(t, ir_type_tensor()), "t");
  ir_node_insert_after(t, ir_graph_top(g)->param);
  ir_node *s = ir_node_new_op(g, KILN_OP_SIN);
  ir_node_add_input(s, ev);
  ir_value_set_name(ir_node_add_output(s, ir_type_tensor()), "s");
  ir_node_insert_before(s, ir_graph_top(g)->ret);
  PRINTS_AS(g, "graph(%x : Tensor):\n"
               "  %t : Tensor = aten::tanh(%x)\n"
               "  %a : Tensor = aten::relu(%x)\n"
               "  %e : Tensor = aten::exp(%x)\n"
               "  %b : Tensor = aten::neg(%a)\n"
               "  %s : Tensor = aten::sin(%e)\n"
               "  return (%a, %b)\n");
  /* replace all uses of %a (node input and graph return) by %e */
  CHECK(ir_value_replace_all_uses(ir_graph_find_value(g, "a"), ev) == 0);
  CHECK(ir_graph_find_value(g, "a")->n_uses == 0 && ev->n_uses == 3);
  PRINTS_AS(g, "graph(%x : Tensor):\n"
               "  %t : Tensor = aten::tanh(%x)\n"
               "  %a : Tensor = aten::relu(%x)\n"
               "  %e : Tensor = aten::exp(%x)\n"
               "  %b : Tensor = aten::neg(%e)\n"
               "  %s : Tensor = aten::sin(%e)\n"
               "  return (%e, %b)\n");
  /* move %s before %b, then %t to the end */
  ir_node_move_before(s, nb);
  ir_node_move_after(t, nb);
  PRINTS_AS(g, "graph(%x : Tensor):\n"
               "  %a : Tensor = aten::relu(%x)\n"
               "  %e : Tensor = aten::exp(%x)\n"
               "  %s : Tensor = aten::sin(%e)\n"
               "  %b : Tensor = aten::neg(%e)\n"
               "  %t : Tensor = aten::tanh(%x)\n"
               "  return (%e, %b)\n");
  /* uses after a node only */
  CHECK(ir_value_replace_uses_after(ev, ir_graph_find_value(g, "s"), s) == 0);
  PRINTS_AS(g, "graph(%x : Tensor):\n"
               "  %a : Tensor = aten::relu(%x)\n"
               "  %e : Tensor = aten::exp(%x)\n"
               "  %s : Tensor = aten::sin(%e)\n"
               "  %b : Tensor = aten::neg(%s)\n"
               "  %t : Tensor = aten::tanh(%x)\n"
               "  return (%s, %b)\n");
  /* remove: refused while used, done when unused */
  CHECK(ir_node_remove(s) == KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "%s (aten::sin) is still used");
  CHECK(ir_node_remove(na) == 0 && ir_node_remove(t) == 0);
  CHECK(ir_graph_find_value(g, "x")->n_uses == 1);
  PRINTS_AS(g, "graph(%x : Tensor):\n"
               "  %e : Tensor = aten::exp(%x)\n"
               "  %s : Tensor = aten::sin(%e)\n"
               "  %b : Tensor = aten::neg(%s)\n"
               "  return (%s, %b)\n");
  ir_graph_free(g);
}

TEST(ir_graph_inputs_outputs_blocks) {
  ir_graph *g = parse("graph(%x : Tensor, %c : bool, %n : int):\n"
                      "  %l : Tensor[] = prim::ListConstruct(%x, %x, %x)\n"
                      "  %y : Tensor, %k : int = prim::If(%c)\n"
                      "    block0():\n"
                      "      %z : Tensor = aten::relu(%x)\n"
                      "      -> (%z, %n)\n"
                      "    block1():\n"
                      "      -> (%x, %n)\n"
                      "  return (%y, %l)\n");
  if (!g) return;
  ir_node *lc = node_of(g, "l");
  ir_value *x = ir_graph_find_value(g, "x");
  /* remove_input renumbers the later uses */
  ir_node_remove_input(lc, 0);
  CHECK(lc->n_inputs == 2);
  bool ok = true;
  for (int i = 0; i < x->n_uses; i++)
    if (x->uses[i].user == lc) ok = ok && x->uses[i].index < 2;
  CHECK(ok);
  /* set_input */
  ir_node_set_input(lc, 1, x);
  /* an unused If output goes together with its block returns */
  ir_node *iff = node_of(g, "y");
  CHECK(ir_node_remove_output(iff, 1) == 0);
  ir_block_remove_return(iff->blocks[0], 1);
  ir_block_remove_return(iff->blocks[1], 1);
  PRINTS_AS(g, "graph(%x : Tensor,\n      %c : bool,\n      %n : int):\n"
               "  %l : Tensor[] = prim::ListConstruct(%x, %x)\n"
               "  %y : Tensor = prim::If(%c)\n"
               "    block0():\n"
               "      %z : Tensor = aten::relu(%x)\n"
               "      -> (%z)\n"
               "    block1():\n"
               "      -> (%x)\n"
               "  return (%y, %l)\n");
  /* a used output and a used parameter cannot go */
  CHECK(ir_node_remove_output(iff, 0) == KILN_ERR_STATE);
  CHECK(ir_block_remove_param(ir_graph_top(g), 0) == KILN_ERR_STATE);
  CHECK(ir_block_remove_param(ir_graph_top(g), 2) == 0);
  /* removing the If drops the uses inside its blocks too */
  ir_block_remove_return(ir_graph_top(g), 0);
  int before = x->n_uses;
  CHECK(ir_node_remove(iff) == 0);
  CHECK(x->n_uses == before - 2);
  PRINTS_AS(g, "graph(%x : Tensor,\n      %c : bool):\n"
               "  %l : Tensor[] = prim::ListConstruct(%x, %x)\n"
               "  return (%l)\n");
  ir_graph_free(g);
}

TEST(ir_graph_names) {
  ir_graph *g = ir_graph_new();
  ir_block *top = ir_graph_top(g);
  ir_value *a = ir_block_add_param(top, ir_type_int(), "x");
  ir_value *b = ir_block_add_param(top, ir_type_int(), "x");
  ir_value *c = ir_block_add_param(top, ir_type_int(), "x.1");
  ir_value *d = ir_block_add_param(top, ir_type_int(), NULL);
  CHECK(strcmp(a->name, "x") == 0 && strcmp(b->name, "x.1") == 0 && strcmp(c->name, "x.2") == 0);
  CHECK(ir_value_set_name(d, "12") == 0 && !d->name && !ir_graph_find_value(g, "12"));
  CHECK(ir_value_set_name(d, "x") == 0 && strcmp(d->name, "x.3") == 0);
  CHECK(ir_value_set_name(a, "y") == 0 && ir_graph_find_value(g, "x") == NULL);
  CHECK(ir_value_set_name(d, "x") == 0 && strcmp(d->name, "x") == 0);
  CHECK(ir_graph_find_value(g, "x") == d && ir_graph_find_value(g, "y") == a);
  CHECK(ir_value_set_name(d, NULL) == 0 && !d->name && !ir_graph_find_value(g, "x"));
  /* many names: the table grows */
  char nm[32];
  for (int i = 0; i < 500; i++) {
    snprintf(nm, sizeof nm, "v%d", i);
    ir_block_add_param(top, ir_type_int(), nm);
  }
  CHECK(ir_graph_find_value(g, "v0") && ir_graph_find_value(g, "v499") &&
        strcmp(ir_graph_find_value(g, "v321")->name, "v321") == 0);
  CHECK(ir_graph_find_value(g, "y") == a);
  ir_graph_free(g);
}

TEST(ir_graph_attributes) {
  ir_graph *g = ir_graph_new();
  ir_block *top = ir_graph_top(g);
  ir_node *n = ir_node_new_prim(g, IR_PRIM_PROFILE);
  int64_t is[3] = {1, -2, 3};
  double fs[2] = {0.5, 3.0};
  int64_t sizes[2] = {4, -1};
  const ir_type *t = ir_type_tensor_new(g, KILN_DTYPE_F32, 2, sizes, NULL, 1, "cpu");
  const ir_type *tys[2] = {t, ir_type_tensor()};
  ir_ivalue items[2] = {{.tag = IR_IV_BOOL, .b = true}, {.tag = IR_IV_STR, .s = "q\""}};
  ir_ivalue tup = {.tag = IR_IV_TUPLE, .items = {items, 2}};
  CHECK(ir_node_set_i(n, "i", 7) == 0 && ir_node_set_f(n, "f", 0.1) == 0 &&
        ir_node_set_s(n, "s", "a\nb") == 0 && ir_node_set_is(n, "is", is, 3) == 0 &&
        ir_node_set_fs(n, "fs", fs, 2) == 0 && ir_node_set_ty(n, "ty", t) == 0 &&
        ir_node_set_tys(n, "tys", tys, 2) == 0 && ir_node_set_iv(n, "iv", &tup) == 0);
  CHECK(ir_node_set_i(n, "i", 8) == 0 && n->n_attrs == 8);
  ir_node_remove_attr(n, "f");
  ir_node_append(top, n);
  PRINTS_AS(g, "graph():\n"
               "   = prim::profile[i=8, s=\"a\\nb\", is=[1, -2, 3], fs=[0.5, 3.], "
               "ty=Float(4, *, requires_grad=1, device=cpu), tys=[Float(4, *, requires_grad=1, "
               "device=cpu), Tensor], iv=(True, \"q\\\"\")]()\n"
               "  return ()\n");
  char *p = ir_graph_print(g, 0);
  ir_graph *g2 = p ? ir_graph_parse(p, strlen(p)) : NULL;
  CHECK_MSG(g2, "%s", kiln_last_error());
  if (g2) {
    const ir_attr *a = ir_node_attr(ir_graph_top(g2)->first, "tys");
    CHECK(a && a->kind == IR_ATTR_TYPES && a->types.n == 2 && ir_type_equal(a->types.v[0], t));
  }
  core_free(p);
  ir_graph_free(g2);
  ir_graph_free(g);
}

TEST(ir_graph_types) {
  ir_graph *g = ir_graph_new();
  int64_t sz[2] = {2, 3}, st[2] = {3, 1};
  const ir_type *a = ir_type_tensor_new(g, KILN_DTYPE_F32, 2, sz, st, 0, "cpu");
  const ir_type *b = ir_type_tensor_new(g, KILN_DTYPE_F32, 2, sz, st, 0, "cpu");
  const ir_type *c = ir_type_tensor_new(g, KILN_DTYPE_F64, 2, sz, NULL, -1, NULL);
  char buf[128];
  CHECK(ir_type_equal(a, b) && !ir_type_equal(a, c) && !ir_type_equal(a, ir_type_tensor()));
  CHECK(strcmp(ir_type_text(a, buf, sizeof buf),
               "Float(2, 3, strides=[3, 1], requires_grad=0, device=cpu)") == 0);
  CHECK(strcmp(ir_type_text(c, buf, sizeof buf), "Double(2, 3)") == 0);
  CHECK(strcmp(ir_type_text(ir_type_tensor_new(g, -1, -1, NULL, NULL, -1, "cpu"), buf, sizeof buf),
               "Tensor(device=cpu)") == 0);
  CHECK(a->seen && c->seen && !ir_type_tensor()->seen);
  CHECK(ir_type_tensor_new(g, KILN_DTYPE_F32, 9, NULL, NULL, -1, NULL) == NULL);
  const ir_type *li = ir_type_list(g, ir_type_int()), *lf = ir_type_list(g, ir_type_float());
  const ir_type *oi = ir_type_optional(g, ir_type_int());
  const ir_type *el[2] = {a, li};
  const ir_type *tu = ir_type_tuple(g, 2, el);
  CHECK(strcmp(ir_type_text(tu, buf, sizeof buf), "(Float(2, 3, strides=[3, 1], requires_grad=0, "
                                                  "device=cpu), int[])") == 0);
  CHECK(strcmp(ir_type_text(ir_type_optional(g, li), buf, sizeof buf), "int[]?") == 0);
  /* the "may flow into" relation */
  CHECK(ir_type_accepts(ir_type_tensor(), a) && ir_type_accepts(a, c));
  CHECK(ir_type_accepts(oi, ir_type_int()) && ir_type_accepts(oi, ir_type_none()) &&
        ir_type_accepts(oi, oi) && !ir_type_accepts(ir_type_int(), oi));
  CHECK(ir_type_accepts(ir_type_number(), ir_type_int()) &&
        ir_type_accepts(ir_type_number(), ir_type_float()) &&
        !ir_type_accepts(ir_type_number(), ir_type_bool()));
  CHECK(!ir_type_accepts(li, lf) && ir_type_accepts(ir_type_any(), tu));
  /* copies into another graph are equal and independent */
  ir_graph *h = ir_graph_new();
  const ir_type *tc = ir_type_copy(h, tu);
  ir_graph_free(g);
  CHECK(tc && tc->elems[0]->sizes[1] == 3 && strcmp(tc->elems[0]->device, "cpu") == 0);
  CHECK(strcmp(ir_type_text(tc, buf, 20), "(Float(2, 3, stride") == 0);
  ir_graph_free(h);
}

TEST(ir_graph_kind_resolution) {
  ir_graph *g = parse("graph(%x : Tensor, %i : int, %f : float, %l : int[], %s : str):\n"
                      "  return ()\n");
  if (!g) return;
  ir_value *x = ir_graph_find_value(g, "x"), *i = ir_graph_find_value(g, "i"),
           *f = ir_graph_find_value(g, "f"), *l = ir_graph_find_value(g, "l"),
           *s = ir_graph_find_value(g, "s");
  int op, prim;
  ir_value *ii[2] = {i, i}, *xf[2] = {x, f}, *if_[2] = {i, f}, *ll[2] = {l, l}, *xx[2] = {x, x};
  ir_value *xfi[3] = {x, f, i}, *xi[2] = {x, i}, *ss[2] = {s, s};
  CHECK(ir_kind_resolve("aten::add", ii, 2, &op, &prim) == 0 && prim == IR_PRIM_ADD && op < 0);
  CHECK(ir_kind_resolve("aten::add", xfi, 3, &op, &prim) == 0 && op == KILN_OP_ADD && prim < 0);
  CHECK(ir_kind_resolve("aten::mul", xf, 2, &op, &prim) == 0 && op == KILN_OP_MUL);
  CHECK(ir_kind_resolve("aten::mul", if_, 2, &op, &prim) == 0 && prim == IR_PRIM_MUL);
  CHECK(ir_kind_resolve("aten::eq", ll, 2, &op, &prim) == 0 && prim == IR_PRIM_EQ);
  CHECK(ir_kind_resolve("aten::eq", xx, 2, &op, &prim) == 0 && op == KILN_OP_EQ);
  CHECK(ir_kind_resolve("aten::eq", ss, 2, &op, &prim) == 0 && prim == IR_PRIM_EQ);
  CHECK(ir_kind_resolve("aten::size", xi, 2, &op, &prim) == 0 && prim == IR_PRIM_SIZE);
  CHECK(ir_kind_resolve("aten::size", &x, 1, &op, &prim) == 0 && prim == IR_PRIM_SIZE);
  CHECK(ir_kind_resolve("aten::neg", &x, 1, &op, &prim) == 0 && op == KILN_OP_NEG);
  CHECK(ir_kind_resolve("aten::neg", &f, 1, &op, &prim) == 0 && prim == IR_PRIM_NEG);
  CHECK(ir_kind_resolve("aten::max", xx, 2, &op, &prim) == 0 && op == KILN_OP_MAX_OTHER);
  CHECK(ir_kind_resolve("aten::softmax", xx, 2, &op, &prim) == KILN_ERR_FORMAT);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::softmax expects 3 arguments");
  /* overloads of one arity are told apart by their argument types */
  CHECK(ir_kind_resolve("aten::clamp_min", xx, 2, &op, &prim) == 0 && op == KILN_OP_CLAMP_MIN_T);
  CHECK(ir_kind_resolve("aten::clamp_min", xf, 2, &op, &prim) == 0 && op == KILN_OP_CLAMP_MIN);
  CHECK(ir_kind_resolve("aten::nope", xx, 2, &op, &prim) == KILN_ERR_FORMAT);
  CHECK(ir_prim_find("prim::Loop") == IR_PRIM_LOOP && ir_prim_find("aten::relu") < 0);
  /* every prims.def entry is well formed: a unique name, a signature that
   * parses (letters, '?', '*', one '>' per alternative) */
  for (int k = 0; k < IR_PRIM_COUNT; k++) {
    const ir_prim_info *pi = &ir_prim_table[k];
    CHECK_MSG(ir_prim_find(pi->name) == k, "%s listed twice", pi->name);
    CHECK_MSG(strncmp(pi->name, "prim::", 6) == 0 || strncmp(pi->name, "aten::", 6) == 0,
              "%s: bad namespace", pi->name);
    if (!pi->sig) continue;
    int arrows = 0, alts = 1;
    for (const char *c = pi->sig; *c; c++) {
      if (*c == '>') arrows++;
      else if (*c == '|') alts++;
      else CHECK_MSG(strchr("TifbsNDnILluFa?*", *c), "%s: bad signature letter %c", pi->name, *c);
    }
    CHECK_MSG(arrows == alts, "%s: each alternative needs one '>'", pi->name);
  }
  ir_graph_free(g);
}

TEST(ir_graph_clone_and_copy) {
  static const char *text =
      "graph(%x.1 : Tensor,\n"
      "      %n : int):\n"
      "  %2 : bool = prim::Constant[value=1]()\n"
      "  %y : Tensor = prim::Loop(%n, %2, %x.1)\n"
      "    block0(%i : int, %y.1 : Tensor):\n"
      "      %5 : Tensor = aten::mul(%y.1, %x.1)\n"
      "      -> (%2, %5)\n"
      "  return (%y)\n";
  ir_graph *g = parse(text);
  if (!g) return;
  ir_graph *c = ir_graph_clone(g);
  CHECK(c && PRINTS_AS(c, text));
  /* changing the clone leaves the original alone */
  ir_node_remove_input(ir_graph_top(c)->ret, 0);
  CHECK(PRINTS_AS(g, text));
  ir_graph_free(c);
  /* copy the loop into another graph (as inlining does) */
  ir_graph *h = parse("graph(%a : Tensor,\n      %x.1 : int):\n  return ()\n");
  if (h) {
    ir_value_map *m = ir_value_map_new();
    ir_value_map_set(m, ir_graph_find_value(g, "x.1"), ir_graph_find_value(h, "a"));
    ir_value_map_set(m, ir_graph_find_value(g, "n"), ir_graph_find_value(h, "x.1"));
    /* an unmapped input is an error, and leaves h untouched */
    ir_node *bad = ir_node_copy_into(h, node_of(g, "y"), m);
    CHECK(!bad);
    CHECK_STR_CONTAINS(kiln_last_error(), "input 1 (%2) of prim::Loop is not mapped");
    CHECK(ir_graph_find_value(h, "a")->n_uses == 0);
    for (ir_node *k = ir_graph_top(g)->first; k; k = k->next) {
      ir_node *copy = ir_node_copy_into(h, k, m);
      CHECK_MSG(copy, "%s", kiln_last_error());
      if (copy) ir_node_append(ir_graph_top(h), copy);
    }
    ir_block_add_return(ir_graph_top(h), ir_value_map_get(m, ir_graph_find_value(g, "y")));
    PRINTS_AS(h, "graph(%a : Tensor,\n      %x.1 : int):\n"
                 "  %2 : bool = prim::Constant[value=1]()\n"
                 "  %y : Tensor = prim::Loop(%x.1, %2, %a)\n"
                 "    block0(%i : int, %y.1 : Tensor):\n"
                 "      %5 : Tensor = aten::mul(%y.1, %a)\n"
                 "      -> (%2, %5)\n"
                 "  return (%y)\n");
    ir_value_map_free(m);
  }
  ir_graph_free(h);
  ir_graph_free(g);
}

TEST(ir_graph_subgraph_attr) {
  /* build a FusionGroup by hand: the node holds its Subgraph */
  ir_graph *g = parse("graph(%x : Tensor, %y : Tensor):\n  return ()\n");
  ir_graph *sub = parse("graph(%a : Tensor, %b : Tensor):\n"
                        "  %c : Tensor = aten::mul(%a, %b)\n"
                        "  return (%c)\n");
  if (!g || !sub) return;
  ir_node *n = ir_node_new_prim(g, IR_PRIM_FUSION_GROUP);
  ir_node_add_input(n, ir_graph_find_value(g, "x"));
  ir_node_add_input(n, ir_graph_find_value(g, "y"));
  ir_value *o = ir_node_add_output(n, ir_type_tensor());
  CHECK(ir_node_check(n) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "missing its Subgraph");
  CHECK(ir_node_set_g(n, "Subgraph", sub) == 0);
  ir_node_append(ir_graph_top(g), n);
  ir_block_add_return(ir_graph_top(g), o);
  PRINTS_AS(g, "graph(%x : Tensor,\n      %y : Tensor):\n"
               "  %2 : Tensor = prim::FusionGroup_0(%x, %y)\n"
               "  return (%2)\n"
               "with prim::FusionGroup_0 = graph(%a : Tensor,\n      %b : Tensor):\n"
               "  %c : Tensor = aten::mul(%a, %b)\n"
               "  return (%c)\n");
  /* a single node prints without the group numbering */
  char *p = ir_node_print(n, 0);
  CHECK(p && strcmp(p, "%2 : Tensor = prim::FusionGroup[Subgraph=<Graph>](%x, %y)\n") == 0);
  core_free(p);
  ir_graph_free(g);
}

TEST(ir_graph_verify_failures) {
  ir_graph *g = parse("graph(%x : Tensor):\n"
                      "  %a : Tensor = aten::relu(%x)\n"
                      "  %b : Tensor = aten::neg(%a)\n"
                      "  return (%b)\n");
  if (!g) return;
  ir_node *na = node_of(g, "a"), *nb = node_of(g, "b");
  CHECK(ir_graph_verify(g) == 0);
  /* a use before its definition */
  ir_node_move_before(nb, na);
  CHECK(ir_graph_verify(g) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "verify: input 0 (%a) is used before its definition "
                                        "(in %b = aten::neg, line 3)");
  ir_node_move_after(nb, na);
  CHECK(ir_graph_verify(g) == 0);
  /* a use list that lost an entry */
  ir_value *a = ir_graph_find_value(g, "a");
  a->n_uses = 0;
  CHECK(ir_graph_verify(g) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "use list of %a has 0 entries for input 0");
  a->n_uses = 1;
  /* a use by a node that is not in the graph */
  ir_node *stray = ir_node_new_op(g, KILN_OP_EXP);
  ir_node_add_input(stray, a);
  CHECK(ir_graph_verify(g) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "%a has a use by a node that is not in the graph");
  CHECK(ir_node_remove(stray) == 0 && ir_graph_verify(g) == 0);
  /* a node whose kind check fails (wrong arity after an edit) */
  ir_node_add_input(nb, a);
  CHECK(ir_graph_verify(g) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::neg expects 1 arguments");
  ir_node_remove_input(nb, 1);
  /* a value used outside the block defining it */
  ir_graph_free(g);
  g = parse("graph(%x : Tensor, %c : bool):\n"
            "  %y : Tensor = prim::If(%c)\n"
            "    block0():\n"
            "      %z : Tensor = aten::relu(%x)\n"
            "      -> (%z)\n"
            "    block1():\n"
            "      -> (%x)\n"
            "  return (%y)\n");
  if (!g) return;
  ir_node *iff = node_of(g, "y");
  ir_node *w = ir_node_new_op(g, KILN_OP_NEG);
  ir_node_add_input(w, ir_graph_find_value(g, "z"));
  ir_node_add_output(w, ir_type_tensor());
  ir_node_insert_after(w, iff);
  CHECK(ir_graph_verify(g) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "(%z) is defined in a block that does not enclose this use");
  ir_node_remove(w);
  /* If arity after removing a block return */
  ir_block_remove_return(iff->blocks[1], 0);
  CHECK(ir_graph_verify(g) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "prim::If: block1 returns 0 values for 1 outputs");
  ir_graph_free(g);
}

TEST(ir_graph_out_of_memory) {
  /* building and mutating fail cleanly when allocations fail */
  for (long k = 1; k < 40; k++) {
    core_alloc_fail_at(k);
    ir_graph *g = ir_graph_new();
    ir_value *x = g ? ir_block_add_param(ir_graph_top(g), ir_type_tensor(), "x") : NULL;
    ir_node *n = g ? ir_node_new_op(g, KILN_OP_RELU) : NULL;
    int rc = n && x ? ir_node_add_input(n, x) : -1;
    ir_value *y = rc == 0 ? ir_node_add_output(n, ir_type_tensor()) : NULL;
    if (y) {
      ir_node_append(ir_graph_top(g), n);
      rc = ir_block_add_return(ir_graph_top(g), y);
    }
    core_alloc_fail_at(0);
    if (g && rc == 0 && y) CHECK(ir_graph_verify(g) == 0);
    ir_graph_free(g);
  }
}
