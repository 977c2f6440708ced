/* src/ir/kinds.c: node kinds: the prims.def table, resolving a printed kind
 * to an op-table op or a builtin, and checking a node's inputs, outputs,
 * attributes and blocks against its kind (op schema, prims.def signature,
 * or the structural rules of If/Loop/Constant/lists/tuples/groups). */
#include <stdio.h>
#include <string.h>

#include "irimpl.h"

const ir_prim_info ir_prim_table[IR_PRIM_COUNT] = {
#define PRIM(ENUM, name, sig, flags, doc) [IR_PRIM_##ENUM] = {name, sig, flags, doc},
#include "prims.def"
#undef PRIM
};

int ir_prim_find(const char *name) {
  for (int i = 0; i < IR_PRIM_COUNT; i++)
    if (strcmp(ir_prim_table[i].name, name) == 0) return i;
  return -1;
}

/* ---- messages ------------------------------------------------------------------ */

/* "(int, Tensor)" of the values' types into b. */
static void put_types(ir_buf *b, ir_value *const *v, int n) {
  ir_buf_puts(b, "(");
  for (int i = 0; i < n; i++) {
    if (i) ir_buf_puts(b, ", ");
    ir_buf_type(b, v[i]->type);
  }
  ir_buf_puts(b, ")");
}

static const char *class_name(char c) {
  switch (c) {
  case 'T': return "Tensor";
  case 'i': return "int";
  case 'f': return "float";
  case 'b': return "bool";
  case 's': return "str";
  case 'N': return "NoneType";
  case 'D': return "Device";
  case 'n': return "Scalar";
  case 'I': return "int[]";
  case 'L': return "Tensor[]";
  case 'l': return "list";
  case 'u': return "tuple";
  case 'F': return "Function";
  default: return "Any";
  }
}

/* "(Scalar, Scalar) -> Scalar | (str, str) -> str" of a signature. */
static void put_sig(ir_buf *b, const char *sig) {
  bool in = true, first = true;
  ir_buf_puts(b, "(");
  for (const char *p = sig;; p++) {
    char c = *p;
    if (c == '>' || c == '|' || c == 0) {
      if (in) {
        ir_buf_puts(b, ") -> ");
        in = false;
        first = true;
        if (c != '>') ir_buf_puts(b, "()");
      }
      if (c == 0) break;
      if (c == '|') {
        ir_buf_puts(b, " | (");
        in = true;
      }
      continue;
    }
    if (c == '?') ir_buf_puts(b, "?");
    else if (c == '*') ir_buf_puts(b, "...");
    else {
      if (!first) ir_buf_puts(b, ", ");
      ir_buf_puts(b, class_name(c));
      first = false;
    }
  }
}

/* Sets the error from a buffer (KILN_ERR_INVALID); frees the buffer. */
static int buf_error(ir_buf *b) {
  int rc = core_error(KILN_ERR_INVALID, "%s", b->p ? b->p : "out of memory");
  core_free(b->p);
  return rc;
}

/* ---- signatures (prims.def) -------------------------------------------------------- */

static bool class_accepts(char c, bool opt, const ir_type *t) {
  if (opt) {
    if (t->kind == IR_TYPE_NONE) return true;
    if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  }
  switch (c) {
  case 'T': return t->kind == IR_TYPE_TENSOR;
  case 'i': return t->kind == IR_TYPE_INT;
  case 'f': return t->kind == IR_TYPE_FLOAT;
  case 'b': return t->kind == IR_TYPE_BOOL;
  case 's': return t->kind == IR_TYPE_STR;
  case 'N': return t->kind == IR_TYPE_NONE;
  case 'D': return t->kind == IR_TYPE_DEVICE;
  case 'F': return t->kind == IR_TYPE_FUNCTION;
  case 'n':
    return t->kind == IR_TYPE_INT || t->kind == IR_TYPE_FLOAT || t->kind == IR_TYPE_NUMBER;
  case 'I': return t->kind == IR_TYPE_LIST && t->elems[0]->kind == IR_TYPE_INT;
  case 'L': return t->kind == IR_TYPE_LIST && t->elems[0]->kind == IR_TYPE_TENSOR;
  case 'l': return t->kind == IR_TYPE_LIST;
  case 'u': return t->kind == IR_TYPE_TUPLE;
  default: return true; /* 'a' */
  }
}

/* Matches the class letters in [p, end) against the values' types. */
static bool match_part(const char *p, const char *end, ir_value *const *v, int n) {
  int k = 0;
  while (p < end) {
    char c = *p++;
    bool opt = false, star = false;
    if (p < end && *p == '?') opt = true, p++;
    if (p < end && *p == '*') star = true, p++;
    if (star) {
      while (k < n && class_accepts(c, opt, v[k]->type)) k++;
    } else {
      if (k >= n || !class_accepts(c, opt, v[k]->type)) return false;
      k++;
    }
  }
  return k == n;
}

/* Does some alternative of sig accept the inputs (and, if outs, the
 * outputs)? */
static bool sig_matches(const char *sig, ir_value *const *in, int n_in, ir_value *const *out,
                        int n_out, bool check_outs) {
  for (const char *alt = sig; alt;) {
    const char *bar = strchr(alt, '|'), *end = bar ? bar : alt + strlen(alt);
    const char *gt = memchr(alt, '>', (size_t)(end - alt));
    KILN_ASSERT(gt);
    if (match_part(alt, gt, in, n_in) && (!check_outs || match_part(gt + 1, end, out, n_out)))
      return true;
    alt = bar ? bar + 1 : NULL;
  }
  return false;
}

/* ---- op schemas --------------------------------------------------------------------- */

static bool base_accepts(const char *base, size_t n, const ir_type *t, bool operand) {
#define IS(s) (n == strlen(s) && strncmp(base, s, n) == 0)
  bool num = t->kind == IR_TYPE_INT || t->kind == IR_TYPE_FLOAT || t->kind == IR_TYPE_NUMBER;
  if (IS("Tensor"))
    return t->kind == IR_TYPE_TENSOR || (operand && (num || t->kind == IR_TYPE_BOOL));
  if (IS("int") || IS("ScalarType") || IS("MemoryFormat") || IS("Layout"))
    return t->kind == IR_TYPE_INT;
  if (IS("float")) return t->kind == IR_TYPE_FLOAT || t->kind == IR_TYPE_INT;
  if (IS("bool")) return t->kind == IR_TYPE_BOOL;
  if (IS("Scalar")) return num || t->kind == IR_TYPE_BOOL;
  if (IS("str")) return t->kind == IR_TYPE_STR;
  if (IS("Device")) return t->kind == IR_TYPE_DEVICE;
  return true; /* a schema type kiln does not model: no check */
#undef IS
}

/* Does a value of type t fit schema type st ("Tensor?", "int[1]?", ...)? */
static bool schema_accepts(const char *st, const ir_type *t, bool operand) {
  size_t n = strlen(st);
  if (n && st[n - 1] == '?') {
    n--;
    if (t->kind == IR_TYPE_NONE) return true;
    if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  }
  const char *br = memchr(st, '[', n);
  if (br) {
    size_t base = (size_t)(br - st);
    if (t->kind == IR_TYPE_LIST) return base_accepts(st, base, t->elems[0], false);
    /* int[2] also takes one int (TorchScript broadcasts it) */
    return br[1] != ']' && base_accepts(st, base, t, false) && t->kind == IR_TYPE_INT;
  }
  return base_accepts(st, n, t, operand);
}

/* The schema's return types: fills kinds (IR_TYPE_TENSOR, or IR_TYPE_LIST
 * for Tensor[]) and returns their count. */
static int schema_returns(int op, uint8_t *kinds, int max) {
  /* skip the argument list (alias annotations such as "(a -> *)" hold
   * arrows of their own) */
  const char *r = strchr(op_table[op].schema, '(');
  for (int depth = 0; r && *r; r++) {
    if (*r == '(') depth++;
    else if (*r == ')' && --depth == 0) break;
  }
  if (!r || !*r || !(r = strstr(r, "->"))) return 0;
  r += 2;
  while (*r == ' ') r++;
  if (*r == '(') r++; /* a tuple of returns */
  int n = 0, depth = 0;
  const char *start = r;
  for (const char *p = r;; p++) {
    if (*p == '(') depth++;
    else if (*p == ')' && depth > 0) depth--;
    else if ((*p == ',' && depth == 0) || (*p == ')' && depth == 0) || *p == 0) {
      /* one return type in [start, p) */
      const char *q = p;
      while (q > start && q[-1] == ' ') q--;
      if (n < max) {
        bool list = false;
        for (const char *s = start; s < p; s++)
          if (s[0] == '[' && s + 1 < p && s[1] == ']') list = true;
        kinds[n] = list ? IR_TYPE_LIST : IR_TYPE_TENSOR;
      }
      n++;
      if (*p != ',') break;
      start = p + 1;
      while (*start == ' ') start++;
    }
  }
  return n;
}

static int check_op(const ir_node *n) {
  int op = n->op;
  const op_info *info = &op_table[op];
  ir_buf b = {0};
  if (n->n_inputs != info->n_args) {
    ir_buf_printf(&b, "%s expects %d arguments (%s), got %d", info->name, info->n_args,
                  info->schema, n->n_inputs);
    return buf_error(&b);
  }
  bool any_tensor = false;
  for (int i = 0; i < n->n_inputs; i++) {
    const ir_type *t = n->inputs[i]->type;
    /* an in-place form takes numbers where its functional op does, except self */
    bool operand = (op_table[op_functional(op)].flags & OPF_ELEMENTWISE) && i < info->n_operands &&
                   !(op_is_inplace(op) && i == 0);
    if (t->kind == IR_TYPE_TENSOR ||
        (t->kind == IR_TYPE_LIST && t->elems[0]->kind == IR_TYPE_TENSOR))
      any_tensor = true;
    if (!schema_accepts(op_arg_type(op, i), t, operand)) {
      ir_buf_printf(&b, "%s: argument %d (%s) expects %s, got ", info->name, i,
                    op_arg_name(op, i), op_arg_type(op, i));
      ir_buf_type(&b, t);
      ir_buf_printf(&b, " (%s)", info->schema);
      return buf_error(&b);
    }
  }
  bool factory = true; /* zeros(int[] size, ...): no Tensor in the schema */
  for (int i = 0; i < info->n_args && factory; i++)
    factory = strncmp(op_arg_type(op, i), "Tensor", 6) != 0;
  if (!any_tensor && !factory) {
    ir_buf_printf(&b, "%s: no tensor among the arguments ", info->name);
    put_types(&b, n->inputs, n->n_inputs);
    ir_buf_printf(&b, " (%s)", info->schema);
    return buf_error(&b);
  }
  uint8_t kinds[8];
  int n_ret = schema_returns(op, kinds, 8);
  if (n->n_outputs != n_ret) {
    ir_buf_printf(&b, "%s returns %d values, but the node has %d outputs (%s)", info->name,
                  n_ret, n->n_outputs, info->schema);
    return buf_error(&b);
  }
  for (int i = 0; i < n_ret && i < 8; i++) {
    const ir_type *t = n->outputs[i]->type;
    bool ok = kinds[i] == IR_TYPE_TENSOR
                  ? t->kind == IR_TYPE_TENSOR
                  : t->kind == IR_TYPE_LIST && t->elems[0]->kind == IR_TYPE_TENSOR;
    if (!ok) {
      ir_buf_printf(&b, "%s: output %d is declared ", info->name, i);
      ir_buf_type(&b, t);
      ir_buf_printf(&b, " but the op returns %s",
                    kinds[i] == IR_TYPE_TENSOR ? "Tensor" : "Tensor[]");
      return buf_error(&b);
    }
  }
  return 0;
}

/* ---- constants ------------------------------------------------------------------------- */

static bool iv_fits(const ir_ivalue *v, const ir_type *t) {
  if (t->kind == IR_TYPE_ANY) return true;
  if (t->kind == IR_TYPE_OPTIONAL) return v->tag == IR_IV_NONE || iv_fits(v, t->elems[0]);
  switch (v->tag) {
  case IR_IV_NONE: return t->kind == IR_TYPE_NONE;
  case IR_IV_INT: return t->kind == IR_TYPE_INT || t->kind == IR_TYPE_NUMBER;
  case IR_IV_FLOAT: return t->kind == IR_TYPE_FLOAT || t->kind == IR_TYPE_NUMBER;
  case IR_IV_BOOL: return t->kind == IR_TYPE_BOOL;
  case IR_IV_STR: return t->kind == IR_TYPE_STR || t->kind == IR_TYPE_DEVICE;
  case IR_IV_LIST:
    if (t->kind != IR_TYPE_LIST) return false;
    for (int i = 0; i < v->items.n; i++)
      if (!iv_fits(&v->items.v[i], t->elems[0])) return false;
    return true;
  case IR_IV_TUPLE:
    if (t->kind != IR_TYPE_TUPLE || t->n_elems != v->items.n) return false;
    for (int i = 0; i < v->items.n; i++)
      if (!iv_fits(&v->items.v[i], t->elems[i])) return false;
    return true;
  }
  return false;
}

/* Does constant attribute a (NULL = no value) fit type t? */
static bool const_fits(const ir_attr *a, const ir_type *t) {
  if (t->kind == IR_TYPE_ANY) return true;
  if (!a) return t->kind == IR_TYPE_NONE || t->kind == IR_TYPE_OPTIONAL;
  if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  switch (a->kind) {
  case IR_ATTR_INT:
    return t->kind == IR_TYPE_INT || t->kind == IR_TYPE_NUMBER ||
           (t->kind == IR_TYPE_BOOL && (a->i == 0 || a->i == 1));
  case IR_ATTR_FLOAT: return t->kind == IR_TYPE_FLOAT || t->kind == IR_TYPE_NUMBER;
  case IR_ATTR_STR: return t->kind == IR_TYPE_STR || t->kind == IR_TYPE_DEVICE;
  case IR_ATTR_INTS:
    return t->kind == IR_TYPE_LIST && (t->elems[0]->kind == IR_TYPE_INT || a->ints.n == 0);
  case IR_ATTR_FLOATS:
    return t->kind == IR_TYPE_LIST && (t->elems[0]->kind == IR_TYPE_FLOAT || a->floats.n == 0);
  case IR_ATTR_IVALUE: return iv_fits(a->iv, t);
  default: return false;
  }
}

static int check_constant(const ir_node *n) {
  ir_buf b = {0};
  if (n->n_inputs != 0 || n->n_outputs != 1) {
    ir_buf_printf(&b, "prim::Constant takes no inputs and has one output (got %d and %d)",
                  n->n_inputs, n->n_outputs);
    return buf_error(&b);
  }
  const ir_type *t = n->outputs[0]->type;
  const ir_attr *a = ir_node_attr(n, "value");
  if (t->kind == IR_TYPE_FUNCTION) {
    const ir_attr *nm = ir_node_attr(n, "name");
    if (nm && nm->kind == IR_ATTR_STR && !a) return 0;
    ir_buf_puts(&b, "prim::Constant of type Function needs a name=\"...\" attribute");
    return buf_error(&b);
  }
  if (t->kind == IR_TYPE_TENSOR) {
    ir_buf_puts(&b, "prim::Constant: tensor constants are not supported");
    return buf_error(&b);
  }
  if (const_fits(a, t)) return 0;
  if (!a) {
    ir_buf_puts(&b, "prim::Constant without a value must be NoneType, not ");
    ir_buf_type(&b, t);
    return buf_error(&b);
  }
  ir_buf_puts(&b, "prim::Constant: value does not fit type ");
  ir_buf_type(&b, t);
  return buf_error(&b);
}

/* ---- structural kinds -------------------------------------------------------------------- */

static int type_error(const ir_node *n, const char *what, int i, const ir_type *want,
                      const ir_type *got) {
  ir_buf b = {0};
  ir_buf_printf(&b, "%s: %s %d is ", ir_node_kind(n), what, i);
  ir_buf_type(&b, got);
  ir_buf_puts(&b, ", expected ");
  ir_buf_type(&b, want);
  return buf_error(&b);
}

static int count_error(const ir_node *n, const char *what, int want, int got) {
  return core_error(KILN_ERR_INVALID, "%s: expected %d %s, got %d", ir_node_kind(n), want,
                    what, got);
}

static int check_if(const ir_node *n) {
  if (n->n_inputs != 1) return count_error(n, "inputs", 1, n->n_inputs);
  if (n->inputs[0]->type->kind != IR_TYPE_BOOL)
    return type_error(n, "condition", 0, ir_type_bool(), n->inputs[0]->type);
  if (n->n_blocks != 2) return count_error(n, "blocks", 2, n->n_blocks);
  for (int k = 0; k < 2; k++) {
    const ir_block *b = n->blocks[k];
    if (ir_block_n_params(b)) return count_error(n, "block parameters", 0, ir_block_n_params(b));
    if (ir_block_n_returns(b) != n->n_outputs)
      return core_error(KILN_ERR_INVALID, "prim::If: block%d returns %d values for %d outputs",
                        k, ir_block_n_returns(b), n->n_outputs);
    for (int i = 0; i < n->n_outputs; i++)
      if (!ir_type_accepts(n->outputs[i]->type, ir_block_return(b, i)->type))
        return type_error(n, k ? "block1 return" : "block0 return", i, n->outputs[i]->type,
                          ir_block_return(b, i)->type);
  }
  return 0;
}

static int check_loop(const ir_node *n) {
  if (n->n_inputs < 2)
    return core_error(KILN_ERR_INVALID, "prim::Loop: expected (max_trip_count, cond, "
                                        "carried...), got %d inputs", n->n_inputs);
  if (n->inputs[0]->type->kind != IR_TYPE_INT)
    return type_error(n, "input", 0, ir_type_int(), n->inputs[0]->type);
  if (n->inputs[1]->type->kind != IR_TYPE_BOOL)
    return type_error(n, "input", 1, ir_type_bool(), n->inputs[1]->type);
  int carried = n->n_inputs - 2;
  if (n->n_outputs != carried)
    return count_error(n, "outputs (one per carried value)", carried, n->n_outputs);
  if (n->n_blocks != 1) return count_error(n, "blocks", 1, n->n_blocks);
  const ir_block *b = n->blocks[0];
  if (ir_block_n_params(b) != carried + 1)
    return count_error(n, "block parameters (iteration, carried...)", carried + 1,
                       ir_block_n_params(b));
  if (ir_block_n_returns(b) != carried + 1)
    return count_error(n, "block returns (cond, carried...)", carried + 1, ir_block_n_returns(b));
  if (ir_block_param(b, 0)->type->kind != IR_TYPE_INT)
    return type_error(n, "block parameter", 0, ir_type_int(), ir_block_param(b, 0)->type);
  if (ir_block_return(b, 0)->type->kind != IR_TYPE_BOOL)
    return type_error(n, "block return", 0, ir_type_bool(), ir_block_return(b, 0)->type);
  for (int i = 0; i < carried; i++) {
    if (!ir_type_accepts(ir_block_param(b, i + 1)->type, n->inputs[i + 2]->type))
      return type_error(n, "carried input", i + 2, ir_block_param(b, i + 1)->type,
                        n->inputs[i + 2]->type);
    if (!ir_type_accepts(n->outputs[i]->type, ir_block_return(b, i + 1)->type))
      return type_error(n, "block return", i + 1, n->outputs[i]->type,
                        ir_block_return(b, i + 1)->type);
  }
  return 0;
}

static int check_group(const ir_node *n) {
  const ir_attr *a = ir_node_attr(n, "Subgraph");
  if (!a || a->kind != IR_ATTR_GRAPH)
    return core_error(KILN_ERR_INVALID, "%s: missing its Subgraph", ir_node_kind(n));
  const ir_block *top = ir_graph_top(a->g);
  if (ir_block_n_params(top) != n->n_inputs)
    return count_error(n, "inputs (the subgraph's parameters)", ir_block_n_params(top),
                       n->n_inputs);
  if (ir_block_n_returns(top) != n->n_outputs)
    return count_error(n, "outputs (the subgraph's returns)", ir_block_n_returns(top),
                       n->n_outputs);
  return 0;
}

static int check_guard(const ir_node *n) {
  if (n->n_outputs != n->n_inputs + 1)
    return count_error(n, "outputs (one per input and a bool)", n->n_inputs + 1, n->n_outputs);
  for (int i = 0; i < n->n_inputs; i++) {
    if (n->inputs[i]->type->kind != IR_TYPE_TENSOR)
      return type_error(n, "input", i, ir_type_tensor(), n->inputs[i]->type);
    if (n->outputs[i]->type->kind != IR_TYPE_TENSOR)
      return type_error(n, "output", i, ir_type_tensor(), n->outputs[i]->type);
  }
  if (n->outputs[n->n_inputs]->type->kind != IR_TYPE_BOOL)
    return type_error(n, "output", n->n_inputs, ir_type_bool(), n->outputs[n->n_inputs]->type);
  const ir_attr *a = ir_node_attr(n, "types");
  if (!a || a->kind != IR_ATTR_TYPES || a->types.n != n->n_inputs)
    return core_error(KILN_ERR_INVALID, "%s: needs types=[...] with one type per input",
                      ir_node_kind(n));
  return 0;
}

static int check_custom(const ir_node *n) {
  switch (n->prim) {
  case IR_PRIM_PARAM:
  case IR_PRIM_RETURN:
    return 0;
  case IR_PRIM_CONSTANT:
    return check_constant(n);
  case IR_PRIM_IF:
    return check_if(n);
  case IR_PRIM_LOOP:
    return check_loop(n);
  case IR_PRIM_LIST_CONSTRUCT: {
    if (n->n_outputs != 1) return count_error(n, "outputs", 1, n->n_outputs);
    const ir_type *t = n->outputs[0]->type;
    if (t->kind != IR_TYPE_LIST) return type_error(n, "output", 0, ir_type_any(), t);
    for (int i = 0; i < n->n_inputs; i++)
      if (!ir_type_accepts(t->elems[0], n->inputs[i]->type))
        return type_error(n, "input", i, t->elems[0], n->inputs[i]->type);
    return 0;
  }
  case IR_PRIM_LIST_UNPACK: {
    if (n->n_inputs != 1) return count_error(n, "inputs", 1, n->n_inputs);
    const ir_type *t = n->inputs[0]->type;
    if (t->kind != IR_TYPE_LIST)
      return core_error(KILN_ERR_INVALID, "prim::ListUnpack: input is not a list");
    for (int i = 0; i < n->n_outputs; i++)
      if (!ir_type_accepts(n->outputs[i]->type, t->elems[0]))
        return type_error(n, "output", i, t->elems[0], n->outputs[i]->type);
    return 0;
  }
  case IR_PRIM_TUPLE_CONSTRUCT: {
    if (n->n_outputs != 1) return count_error(n, "outputs", 1, n->n_outputs);
    const ir_type *t = n->outputs[0]->type;
    if (t->kind != IR_TYPE_TUPLE || t->n_elems != n->n_inputs)
      return core_error(KILN_ERR_INVALID, "prim::TupleConstruct: output is not a tuple of %d",
                        n->n_inputs);
    for (int i = 0; i < n->n_inputs; i++)
      if (!ir_type_accepts(t->elems[i], n->inputs[i]->type))
        return type_error(n, "input", i, t->elems[i], n->inputs[i]->type);
    return 0;
  }
  case IR_PRIM_TUPLE_UNPACK: {
    if (n->n_inputs != 1) return count_error(n, "inputs", 1, n->n_inputs);
    const ir_type *t = n->inputs[0]->type;
    if (t->kind != IR_TYPE_TUPLE || t->n_elems != n->n_outputs)
      return core_error(KILN_ERR_INVALID, "prim::TupleUnpack: input is not a tuple of %d",
                        n->n_outputs);
    for (int i = 0; i < n->n_outputs; i++)
      if (!ir_type_accepts(n->outputs[i]->type, t->elems[i]))
        return type_error(n, "output", i, t->elems[i], n->outputs[i]->type);
    return 0;
  }
  case IR_PRIM_PROFILE:
    if (n->n_inputs == n->n_outputs && n->n_inputs <= 1) return 0;
    return core_error(KILN_ERR_INVALID, "prim::profile: expected one input and one output "
                                        "(or none: the run counter)");
  case IR_PRIM_DIFFERENTIABLE_GRAPH:
  case IR_PRIM_FUSION_GROUP:
  case IR_PRIM_FALLBACK_GRAPH:
    return check_group(n);
  case IR_PRIM_TYPE_CHECK:
  case IR_PRIM_REQUIRES_GRAD_CHECK:
    return check_guard(n);
  default:
    return core_error(KILN_ERR_INVALID, "%s: no check defined", ir_node_kind(n));
  }
}

int ir_node_check(const ir_node *n) {
  if (n->op >= 0) {
    if (n->n_blocks) return core_error(KILN_ERR_INVALID, "%s: unexpected blocks", ir_node_kind(n));
    return check_op(n);
  }
  const ir_prim_info *p = &ir_prim_table[n->prim];
  if (n->n_blocks && !(p->flags & IR_PF_BLOCKS))
    return core_error(KILN_ERR_INVALID, "%s: unexpected blocks", p->name);
  if (!p->sig) return check_custom(n);
  if (sig_matches(p->sig, n->inputs, n->n_inputs, n->outputs, n->n_outputs, true)) return 0;
  ir_buf b = {0};
  ir_buf_printf(&b, "%s: no overload for ", p->name);
  put_types(&b, n->inputs, n->n_inputs);
  ir_buf_puts(&b, " -> ");
  put_types(&b, n->outputs, n->n_outputs);
  ir_buf_puts(&b, "; expected ");
  put_sig(&b, p->sig);
  return buf_error(&b);
}

/* ---- resolving printed kinds ------------------------------------------------------------ */

int ir_kind_resolve(const char *name, ir_value *const *inputs, int n_inputs, int *op,
                    int *prim) {
  *op = *prim = -1;
  int p = ir_prim_find(name);
  if (p >= 0 && (ir_prim_table[p].flags & IR_PF_INTERNAL))
    return core_error(KILN_ERR_FORMAT, "%s cannot appear in graph text", name);
  if (p >= 0 && (!ir_prim_table[p].sig ||
                 sig_matches(ir_prim_table[p].sig, inputs, n_inputs, NULL, 0, false))) {
    *prim = p;
    return 0;
  }
  int o = op_find_arity(name, n_inputs);
  if (o >= 0) {
    /* overloads of one arity (masked_fill.Scalar and .Tensor): the first
     * whose schema accepts the argument types, else the first; their
     * in-place forms (masked_fill_) alike */
    for (int k = o; k < OP_INDEX_COUNT; k++) {
      const op_info *info = &op_table[k];
      if (!info->name || info->n_args != n_inputs || strcmp(info->name, name) != 0) continue;
      bool fits = true;
      for (int i = 0; i < n_inputs && fits; i++)
        fits = schema_accepts(op_arg_type(k, i), inputs[i]->type,
                              (info->flags & OPF_ELEMENTWISE) && i < info->n_operands);
      if (fits) {
        o = k;
        break;
      }
    }
    *op = o;
    return 0;
  }
  o = op_find(name);
  bool any_tensor = false;
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i]->type->kind == IR_TYPE_TENSOR) any_tensor = true;
  ir_buf b = {0};
  if (o >= 0 && (p < 0 || any_tensor)) {
    ir_buf_printf(&b, "%s expects %d arguments (%s), got %d", name, op_table[o].n_args,
                  op_table[o].schema, n_inputs);
  } else if (p >= 0) {
    ir_buf_printf(&b, "%s: no overload for argument types ", name);
    put_types(&b, inputs, n_inputs);
    ir_buf_puts(&b, "; expected ");
    put_sig(&b, ir_prim_table[p].sig);
  } else if (strncmp(name, "aten::", 6) == 0) {
    ir_buf_printf(&b, "unknown op %s (not in the op table or the builtins of src/ir/prims.def)",
                  name);
  } else {
    ir_buf_printf(&b, "unknown node kind %s", name);
  }
  int rc = core_error(KILN_ERR_FORMAT, "%s", b.p ? b.p : "out of memory");
  core_free(b.p);
  return rc;
}
