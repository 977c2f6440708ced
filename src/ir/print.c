/* src/ir/print.c: the printer: exactly the text TorchScript's Graph::print
 * gives (torch/csrc/jit/ir/ir.cpp), so kiln's graphs read like PyTorch's
 * and print -> parse -> print is the identity. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "irimpl.h"

/* c10's IValue::repr of a double: integral values below 1e10 as "3." (and
 * "-0."), everything else with 17 significant digits ("%.17g", which reads
 * back exactly). */
void ir_fmt_double(char *buf, size_t n, double d) {
  int c = fpclassify(d);
  if ((c == FP_NORMAL || c == FP_ZERO) && fabs(d) < 1e10) {
    long long i = (long long)d;
    if ((double)i == d) {
      snprintf(buf, n, "%s%lld.", i == 0 && signbit(d) ? "-" : "", i);
      return;
    }
  }
  if (isnan(d)) snprintf(buf, n, "nan");
  else if (isinf(d)) snprintf(buf, n, d > 0 ? "inf" : "-inf");
  else snprintf(buf, n, "%.17g", d);
}

/* c10::printQuotedString: C escapes, octal for other non-printables. */
void ir_buf_quoted(ir_buf *b, const char *s) {
  ir_buf_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    const char *e = NULL;
    switch (*p) {
    case '\\': e = "\\\\"; break;
    case '\'': e = "\\'"; break;
    case '"': e = "\\\""; break;
    case '\a': e = "\\a"; break;
    case '\b': e = "\\b"; break;
    case '\f': e = "\\f"; break;
    case '\n': e = "\\n"; break;
    case '\r': e = "\\r"; break;
    case '\t': e = "\\t"; break;
    case '\v': e = "\\v"; break;
    default: break;
    }
    if (e) ir_buf_puts(b, e);
    else if (*p >= 0x20 && *p < 0x7f) ir_buf_put(b, (const char *)p, 1);
    else ir_buf_printf(b, "\\%03o", *p);
  }
  ir_buf_put(b, "\"", 1);
}

/* ---- types ----------------------------------------------------------------------- */

static const char *dtype_text[KILN_DTYPE_COUNT] = {
    [KILN_DTYPE_F32] = "Float", [KILN_DTYPE_F64] = "Double",
    [KILN_DTYPE_I64] = "Long", [KILN_DTYPE_BOOL] = "Bool",
    [KILN_DTYPE_I32] = "Int", [KILN_DTYPE_I16] = "Short",
    [KILN_DTYPE_I8] = "Char", [KILN_DTYPE_U8] = "Byte",
    [KILN_DTYPE_F16] = "Half", [KILN_DTYPE_BF16] = "BFloat16"};

static void tensor_opts(ir_buf *b, const ir_type *t, bool first) {
  if (t->requires_grad >= 0) {
    ir_buf_printf(b, "%srequires_grad=%d", first ? "" : ", ", t->requires_grad);
    first = false;
  }
  if (t->device) ir_buf_printf(b, "%sdevice=%s", first ? "" : ", ", t->device);
}

/* Note [Tensor type text]. */
static void tensor_type(ir_buf *b, const ir_type *t) {
  bool opts = t->requires_grad >= 0 || t->device;
  ir_buf_puts(b, t->dtype >= 0 ? dtype_text[t->dtype] : "Tensor");
  if (t->ndim < 0) {
    if (!opts) return;
    ir_buf_puts(b, t->dtype >= 0 ? "(..., " : "(");
    tensor_opts(b, t, true);
    ir_buf_puts(b, ")");
    return;
  }
  ir_buf_puts(b, "(");
  if (t->ndim == 0 && t->dtype < 0 && opts) ir_buf_puts(b, "dim=0, ");
  for (int i = 0; i < t->ndim; i++) {
    if (i) ir_buf_puts(b, ", ");
    if (t->sizes[i] >= 0) ir_buf_printf(b, "%lld", (long long)t->sizes[i]);
    else ir_buf_puts(b, "*");
  }
  if (t->has_strides && t->ndim > 0) {
    ir_buf_puts(b, ", strides=[");
    for (int i = 0; i < t->ndim; i++)
      ir_buf_printf(b, "%s%lld", i ? ", " : "", (long long)t->strides[i]);
    ir_buf_puts(b, "]");
  }
  tensor_opts(b, t, t->ndim == 0);
  ir_buf_puts(b, ")");
}

void ir_buf_type(ir_buf *b, const ir_type *t) {
  static const char *names[] = {
      [IR_TYPE_INT] = "int", [IR_TYPE_FLOAT] = "float", [IR_TYPE_BOOL] = "bool",
      [IR_TYPE_STR] = "str", [IR_TYPE_NONE] = "NoneType", [IR_TYPE_DEVICE] = "Device",
      [IR_TYPE_NUMBER] = "Scalar", [IR_TYPE_FUNCTION] = "Function", [IR_TYPE_ANY] = "Any"};
  switch (t->kind) {
  case IR_TYPE_TENSOR:
    tensor_type(b, t);
    break;
  case IR_TYPE_LIST:
    ir_buf_type(b, t->elems[0]);
    ir_buf_puts(b, "[]");
    break;
  case IR_TYPE_OPTIONAL:
    ir_buf_type(b, t->elems[0]);
    ir_buf_puts(b, "?");
    break;
  case IR_TYPE_TUPLE:
    ir_buf_puts(b, "(");
    for (int i = 0; i < t->n_elems; i++) {
      if (i) ir_buf_puts(b, ", ");
      ir_buf_type(b, t->elems[i]);
    }
    ir_buf_puts(b, ")");
    break;
  default:
    ir_buf_puts(b, names[t->kind]);
  }
}

/* ---- attributes ------------------------------------------------------------------ */

static void put_double(ir_buf *b, double d) {
  char tmp[64];
  ir_fmt_double(tmp, sizeof tmp, d);
  ir_buf_puts(b, tmp);
}

static void put_ivalue(ir_buf *b, const ir_ivalue *v) {
  switch (v->tag) {
  case IR_IV_NONE: ir_buf_puts(b, "None"); break;
  case IR_IV_INT: ir_buf_printf(b, "%lld", (long long)v->i); break;
  case IR_IV_FLOAT: put_double(b, v->f); break;
  case IR_IV_BOOL: ir_buf_puts(b, v->b ? "True" : "False"); break;
  case IR_IV_STR: ir_buf_quoted(b, v->s); break;
  case IR_IV_LIST:
  case IR_IV_TUPLE: {
    bool list = v->tag == IR_IV_LIST;
    ir_buf_puts(b, list ? "[" : "(");
    for (int i = 0; i < v->items.n; i++) {
      if (i) ir_buf_puts(b, ", ");
      put_ivalue(b, &v->items.v[i]);
    }
    ir_buf_puts(b, list ? "]" : v->items.n == 1 ? ",)" : ")");
    break;
  }
  }
}

static void put_attr_value(ir_buf *b, const ir_attr *a) {
  switch (a->kind) {
  case IR_ATTR_INT: ir_buf_printf(b, "%lld", (long long)a->i); break;
  case IR_ATTR_FLOAT: put_double(b, a->f); break;
  case IR_ATTR_STR: ir_buf_quoted(b, a->s); break;
  case IR_ATTR_INTS:
    ir_buf_puts(b, "[");
    for (int i = 0; i < a->ints.n; i++)
      ir_buf_printf(b, "%s%lld", i ? ", " : "", (long long)a->ints.v[i]);
    ir_buf_puts(b, "]");
    break;
  case IR_ATTR_FLOATS:
    ir_buf_puts(b, "[");
    for (int i = 0; i < a->floats.n; i++) {
      if (i) ir_buf_puts(b, ", ");
      put_double(b, a->floats.v[i]);
    }
    ir_buf_puts(b, "]");
    break;
  case IR_ATTR_TYPE: ir_buf_type(b, a->ty); break;
  case IR_ATTR_TYPES:
    ir_buf_puts(b, "[");
    for (int i = 0; i < a->types.n; i++) {
      if (i) ir_buf_puts(b, ", ");
      ir_buf_type(b, a->types.v[i]);
    }
    ir_buf_puts(b, "]");
    break;
  case IR_ATTR_GRAPH: ir_buf_puts(b, "<Graph>"); break;
  case IR_ATTR_IVALUE: put_ivalue(b, a->iv); break;
  }
}

static void put_attrs(ir_buf *b, const ir_node *n, bool skip_subgraph) {
  ir_buf_puts(b, "[");
  int k = 0;
  for (int i = 0; i < n->n_attrs; i++) {
    if (skip_subgraph && strcmp(n->attrs[i].name, "Subgraph") == 0) continue;
    ir_buf_printf(b, "%s%s=", k++ ? ", " : "", n->attrs[i].name);
    put_attr_value(b, &n->attrs[i]);
  }
  ir_buf_puts(b, "]");
}

/* ---- nodes and graphs --------------------------------------------------------------- */

typedef struct groups {
  const ir_node **v;
  int n, cap;
  bool oom;
} groups;

static void put_value(ir_buf *b, const ir_value *v) {
  if (v->name) ir_buf_printf(b, "%%%s", v->name);
  else ir_buf_printf(b, "%%%d", v->id);
}

static void put_values(ir_buf *b, ir_value *const *v, int n, bool types, const char *sep) {
  for (int i = 0; i < n; i++) {
    if (i) ir_buf_puts(b, sep);
    put_value(b, v[i]);
    if (types) {
      ir_buf_puts(b, " : ");
      ir_buf_type(b, v[i]->type);
    }
  }
}

static void indent(ir_buf *b, int level) {
  for (int i = 0; i < level; i++) ir_buf_puts(b, "  ");
}

static const ir_attr *subgraph_attr(const ir_node *n) {
  const ir_attr *a = ir_node_attr(n, "Subgraph");
  return a && a->kind == IR_ATTR_GRAPH ? a : NULL;
}

static void print_node(ir_buf *b, const ir_node *n, int level, groups *gr, unsigned flags) {
  indent(b, level);
  put_values(b, n->outputs, n->n_outputs, true, ", ");
  ir_buf_puts(b, " = ");
  if (gr && subgraph_attr(n)) {
    ir_buf_printf(b, "%s_%d", ir_node_kind(n), gr->n);
    if (n->n_attrs > 1 && n->prim != IR_PRIM_DIFFERENTIABLE_GRAPH) put_attrs(b, n, true);
    if (gr->n == gr->cap) {
      int cap = gr->cap ? gr->cap * 2 : 8;
      const ir_node **p = core_realloc(gr->v, (size_t)cap * sizeof *p);
      if (!p) {
        gr->oom = true;
      } else {
        gr->v = p;
        gr->cap = cap;
      }
    }
    if (gr->n < gr->cap) gr->v[gr->n] = n;
    gr->n++;
  } else {
    ir_buf_puts(b, ir_node_kind(n));
    if (n->overload) ir_buf_printf(b, ".%s", n->overload);
    if (n->n_attrs) put_attrs(b, n, false);
  }
  ir_buf_puts(b, "(");
  put_values(b, n->inputs, n->n_inputs, false, ", ");
  ir_buf_puts(b, ")");
  if (n->src && !(flags & IR_PRINT_NO_SOURCE)) {
    ir_buf_puts(b, " # ");
    ir_buf_puts(b, n->src);
  }
  ir_buf_puts(b, "\n");
  for (int i = 0; i < n->n_blocks; i++) {
    const ir_block *blk = n->blocks[i];
    indent(b, level + 1);
    ir_buf_printf(b, "block%d(", i);
    put_values(b, blk->param->outputs, blk->param->n_outputs, true, ", ");
    ir_buf_puts(b, "):\n");
    for (const ir_node *m = blk->first; m; m = m->next) print_node(b, m, level + 2, gr, flags);
    indent(b, level + 2);
    ir_buf_puts(b, "-> (");
    put_values(b, blk->ret->inputs, blk->ret->n_inputs, false, ", ");
    ir_buf_puts(b, ")\n");
  }
}

static void print_graph(ir_buf *b, const ir_graph *g, unsigned flags) {
  const ir_block *top = g->top;
  groups gr = {0};
  ir_buf_puts(b, "graph(");
  put_values(b, top->param->outputs, top->param->n_outputs, true, ",\n      ");
  ir_buf_puts(b, "):\n");
  for (const ir_node *n = top->first; n; n = n->next) print_node(b, n, 1, &gr, flags);
  ir_buf_puts(b, "  return (");
  put_values(b, top->ret->inputs, top->ret->n_inputs, false, ", ");
  ir_buf_puts(b, ")\n");
  if (gr.oom) b->oom = true;
  for (int i = 0; i < gr.n && !gr.oom; i++) {
    ir_buf_printf(b, "with %s_%d = ", ir_node_kind(gr.v[i]), i);
    print_graph(b, subgraph_attr(gr.v[i])->g, flags);
  }
  core_free(gr.v);
}

static char *finish(ir_buf *b) {
  if (b->oom || !b->p) {
    core_free(b->p);
    if (!b->oom) return core_strdup("");
    core_error(KILN_ERR_NOMEM, "ir_graph_print: out of memory");
    return NULL;
  }
  return b->p;
}

char *ir_graph_print(const ir_graph *g, unsigned flags) {
  ir_buf b = {0};
  print_graph(&b, g, flags);
  return finish(&b);
}

char *ir_node_print(const ir_node *n, unsigned flags) {
  ir_buf b = {0};
  print_node(&b, n, 0, NULL, flags);
  return finish(&b);
}
