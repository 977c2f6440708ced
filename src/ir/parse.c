/* src/ir/parse.c: the parser for TorchScript's graph text (what
 * `print(graph)` shows) and kiln's own printed graphs. A hand-written lexer
 * with one token of lookahead (lex.c) and a recursive-descent parser; indentation
 * is not significant (blocks end at `->`, as in TorchScript's irparser).
 * Every error is "line:col: message" and leaves nothing allocated. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "irimpl.h"

#define MAX_DEPTH 200   /* nesting of blocks, types, constants, subgraphs */
#define MAX_KIND 128

/* ---- parser state ---------------------------------------------------------------- */

/* One graph being parsed (the top graph or a `with` subgraph). */
typedef struct gctx {
  ir_graph *g;
  uint8_t *vis;        /* per value id: 0 undefined yet, 1 visible, 2 out of scope */
  int vis_cap;
  ir_node **groups;    /* group nodes in print order (their subgraphs follow) */
  int n_groups, cap_groups;
} gctx;

typedef struct parser {
  ir_lexer lx;
  int depth;
  bool failed;
} parser;

static void next(parser *p) { ir_lex_next(&p->lx); }

/* ---- errors ------------------------------------------------------------------------ */

static int perr_at(parser *p, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr_at(parser *p, int line, int col, const char *fmt, ...) {
  if (p->failed) return KILN_ERR_FORMAT;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  p->failed = true;
  return core_error(KILN_ERR_FORMAT, "%d:%d: %s", line, col, msg);
}

/* Prefixes the message an IR function just set with the position. */
static int perr_prefix(parser *p, int line, int col, int rc) {
  if (p->failed) return rc;
  p->failed = true;
  if (rc == KILN_ERR_NOMEM) return rc;
  core_error_prefix("%d:%d: ", line, col);
  return KILN_ERR_FORMAT;
}

static int oom(parser *p) {
  if (!p->failed) core_error(KILN_ERR_NOMEM, "ir_graph_parse: out of memory");
  p->failed = true;
  return KILN_ERR_NOMEM;
}

static int unexpected(parser *p, const char *wanted) {
  char buf[64];
  return perr_at(p, p->lx.tok.line, p->lx.tok.col, "expected %s, found %s", wanted,
                 ir_tok_desc(&p->lx.tok, buf, sizeof buf));
}

static bool at(const parser *p, char c) { return p->lx.tok.kind == IR_T_PUNCT && p->lx.tok.c == c; }

static bool at_word(const parser *p, const char *w) {
  return p->lx.tok.kind == IR_T_IDENT && p->lx.tok.n == strlen(w) &&
         memcmp(p->lx.tok.s, w, p->lx.tok.n) == 0;
}

static int expect(parser *p, char c) {
  char want[8] = {'\'', c, '\'', 0};
  if (!at(p, c)) return unexpected(p, want);
  next(p);
  return 0;
}

static int enter(parser *p) {
  if (++p->depth > MAX_DEPTH)
    return perr_at(p, p->lx.tok.line, p->lx.tok.col, "nesting deeper than %d", MAX_DEPTH);
  return 0;
}

/* ---- literals ------------------------------------------------------------------------ */

static int tok_int(parser *p, int64_t *out) {
  char buf[32];
  if (p->lx.tok.n >= sizeof buf)
    return perr_at(p, p->lx.tok.line, p->lx.tok.col, "integer out of range");
  memcpy(buf, p->lx.tok.s, p->lx.tok.n);
  buf[p->lx.tok.n] = 0;
  errno = 0;
  long long v = strtoll(buf, NULL, 10);
  if (errno == ERANGE)
    return perr_at(p, p->lx.tok.line, p->lx.tok.col, "integer %s out of range", buf);
  *out = v;
  next(p);
  return 0;
}

static double tok_float(const ir_token *t) {
  char buf[64];
  size_t n = t->n < sizeof buf - 1 ? t->n : sizeof buf - 1;
  memcpy(buf, t->s, n);
  buf[n] = 0;
  return strtod(buf, NULL);
}

/* Decodes a string token (C escapes, \ooo octal, \xHH) into g. */
static int tok_string(parser *p, ir_graph *g, const char **out) {
  const ir_token *t = &p->lx.tok;
  char *s = ir_graph_alloc(g, t->n);
  if (!s) return oom(p);
  size_t k = 0;
  for (const char *q = t->s + 1, *e = t->s + t->n - 1; q < e; q++) {
    if (*q != '\\') {
      if (!*q) return perr_at(p, t->line, t->col, "NUL byte in a string");
      s[k++] = *q;
      continue;
    }
    char c = *++q;
    int v = 0, digits = 0;
    switch (c) {
    case 'n': s[k++] = '\n'; break;
    case 't': s[k++] = '\t'; break;
    case 'r': s[k++] = '\r'; break;
    case 'a': s[k++] = '\a'; break;
    case 'b': s[k++] = '\b'; break;
    case 'f': s[k++] = '\f'; break;
    case 'v': s[k++] = '\v'; break;
    case '\\': case '\'': case '"': case '?': s[k++] = c; break;
    case 'x':
      while (digits < 2 && q + 1 < e &&
             ((q[1] >= '0' && q[1] <= '9') || ((q[1] | 32) >= 'a' && (q[1] | 32) <= 'f'))) {
        q++;
        v = v * 16 + (*q <= '9' ? *q - '0' : (*q | 32) - 'a' + 10);
        digits++;
      }
      if (!digits || !v) return perr_at(p, t->line, t->col, "bad \\x escape in a string");
      s[k++] = (char)v;
      break;
    default:
      if (c < '0' || c > '7')
        return perr_at(p, t->line, t->col, "unknown escape '\\%c' in a string", c);
      q--;
      while (digits < 3 && q + 1 < e && q[1] >= '0' && q[1] <= '7') {
        q++;
        v = v * 8 + (*q - '0');
        digits++;
      }
      if (!v || v > 255) return perr_at(p, t->line, t->col, "bad octal escape in a string");
      s[k++] = (char)v;
    }
  }
  s[k] = 0;
  *out = s;
  next(p);
  return 0;
}

/* ---- types ----------------------------------------------------------------------------- */

static int parse_type(parser *p, ir_graph *g, const ir_type **out);

static int dtype_of(const ir_token *t) {
  static const struct { const char *name; int dt; } names[] = {
      {"Float", KILN_DTYPE_F32}, {"Double", KILN_DTYPE_F64}, {"Long", KILN_DTYPE_I64},
      {"Bool", KILN_DTYPE_BOOL}, {"Int", KILN_DTYPE_I32},    {"Short", KILN_DTYPE_I16},
      {"Char", KILN_DTYPE_I8},   {"Byte", KILN_DTYPE_U8},    {"Half", KILN_DTYPE_F16},
      {"BFloat16", KILN_DTYPE_BF16}};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (t->n == strlen(names[i].name) && memcmp(t->s, names[i].name, t->n) == 0) return names[i].dt;
  static const char *unsupported[] = {"ComplexHalf", "ComplexFloat", "ComplexDouble",
                                      "QInt8", "QUInt8", "QInt32"};
  for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
    if (t->n == strlen(unsupported[i]) && memcmp(t->s, unsupported[i], t->n) == 0) return -2;
  return -3;
}

/* Note [Tensor type text]: after the dtype name (or `Tensor`). */
static int parse_tensor_type(parser *p, ir_graph *g, int dtype, const ir_type **out) {
  int64_t sizes[KILN_MAX_DIMS], strides[KILN_MAX_DIMS];
  int ndim = 0, n_strides = -1, rg = -1, rc;
  bool ellipsis = false, dim0 = false, keywords = false, empty;
  char device[32] = {0};
  next(p);
  if (!at(p, '(')) {
    *out = dtype < 0 ? ir_type_tensor() : ir_type_tensor_new(g, dtype, -1, NULL, NULL, -1, NULL);
    return *out ? 0 : oom(p);
  }
  next(p);
  empty = at(p, ')');
  while (!at(p, ')')) {
    ir_token t = p->lx.tok;
    if (t.kind == IR_T_ELLIPSIS && !ndim && !keywords) {
      ellipsis = true;
      next(p);
    } else if ((t.kind == IR_T_INT || at(p, '*')) && !keywords && !ellipsis) {
      if (ndim == KILN_MAX_DIMS)
        return perr_at(p, t.line, t.col, "tensor type with more than %d dims", KILN_MAX_DIMS);
      int64_t v = -1;
      if (t.kind == IR_T_INT) {
        if ((rc = tok_int(p, &v)) < 0) return rc;
        if (v < 0)
          return perr_at(p, t.line, t.col, "negative size %lld in a tensor type", (long long)v);
      } else {
        next(p);
      }
      sizes[ndim++] = v;
    } else if (t.kind == IR_T_IDENT) {
      keywords = true;
      bool is_strides = at_word(p, "strides"), is_rg = at_word(p, "requires_grad"),
           is_dev = at_word(p, "device"), is_dim = at_word(p, "dim");
      if (!is_strides && !is_rg && !is_dev && !is_dim)
        return unexpected(p, "strides=, requires_grad= or device= in a tensor type");
      next(p);
      if ((rc = expect(p, '=')) < 0) return rc;
      if (is_strides) {
        if ((rc = expect(p, '[')) < 0) return rc;
        n_strides = 0;
        while (!at(p, ']')) {
          if (n_strides == KILN_MAX_DIMS)
            return perr_at(p, p->lx.tok.line, p->lx.tok.col, "too many strides");
          if (p->lx.tok.kind != IR_T_INT) return unexpected(p, "a stride");
          if ((rc = tok_int(p, &strides[n_strides++])) < 0) return rc;
          if (!at(p, ']') && (rc = expect(p, ',')) < 0) return rc;
        }
        next(p);
      } else if (is_rg || is_dim) {
        int64_t v;
        if (p->lx.tok.kind != IR_T_INT) return unexpected(p, "0 or 1");
        ir_token vt = p->lx.tok;
        if ((rc = tok_int(p, &v)) < 0) return rc;
        if (is_rg ? (v != 0 && v != 1) : v != 0)
          return perr_at(p, vt.line, vt.col, "expected %s", is_rg ? "0 or 1" : "dim=0");
        if (is_rg) rg = (int)v;
        else dim0 = true;
      } else {
        if (p->lx.tok.kind != IR_T_IDENT) return unexpected(p, "a device name");
        size_t n = p->lx.tok.n;
        if (n > 16) return perr_at(p, p->lx.tok.line, p->lx.tok.col, "device name too long");
        memcpy(device, p->lx.tok.s, n);
        next(p);
        if (at(p, ':')) {
          next(p);
          if (p->lx.tok.kind != IR_T_INT || p->lx.tok.n > 8) return unexpected(p, "a device index");
          device[n++] = ':';
          memcpy(device + n, p->lx.tok.s, p->lx.tok.n);
          next(p);
        }
      }
    } else {
      return unexpected(p, "a size, '*' or a keyword in a tensor type");
    }
    if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
  }
  ir_token close = p->lx.tok;
  next(p);
  /* the rank: sizes given; else 0 for a dtype (TorchScript) or `()`, else
   * unknown (`Tensor(requires_grad=1)`, `Float(..., ...)`) */
  int rank = ndim;
  if (ellipsis) rank = -1;
  else if (!ndim && dtype < 0 && !empty && !dim0) rank = -1;
  if (n_strides >= 0 && n_strides != rank)
    return perr_at(p, close.line, close.col, "%d strides for %d dims", n_strides, rank);
  *out = ir_type_tensor_new(g, dtype, rank, sizes, n_strides >= 0 ? strides : NULL, rg,
                            device[0] ? device : NULL);
  return *out ? 0 : oom(p);
}

static int parse_type_primary(parser *p, ir_graph *g, const ir_type **out) {
  static const struct { const char *name; ir_type_kind k; } simple[] = {
      {"int", IR_TYPE_INT},       {"float", IR_TYPE_FLOAT},     {"bool", IR_TYPE_BOOL},
      {"str", IR_TYPE_STR},       {"NoneType", IR_TYPE_NONE},   {"Device", IR_TYPE_DEVICE},
      {"Scalar", IR_TYPE_NUMBER}, {"Function", IR_TYPE_FUNCTION}, {"Any", IR_TYPE_ANY},
      {"ScalarType", IR_TYPE_INT}, {"Layout", IR_TYPE_INT},     {"MemoryFormat", IR_TYPE_INT}};
  int rc;
  if (at(p, '(')) {
    const ir_type **elems = NULL;
    int n = 0, cap = 0;
    next(p);
    while (!at(p, ')')) {
      if (ir_grow(g, &elems, &cap, n + 1, sizeof *elems) < 0) return oom(p);
      if ((rc = parse_type(p, g, &elems[n++])) < 0) return rc;
      if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
    }
    next(p);
    *out = ir_type_tuple(g, n, elems);
    return *out ? 0 : oom(p);
  }
  if (p->lx.tok.kind != IR_T_IDENT) return unexpected(p, "a type");
  if (at_word(p, "NamedTuple")) {
    /* NamedTuple(values : Tensor, indices : Tensor): read as a plain tuple */
    const ir_type **elems = NULL;
    int n = 0, cap = 0;
    next(p);
    if ((rc = expect(p, '(')) < 0) return rc;
    while (!at(p, ')')) {
      if (p->lx.tok.kind != IR_T_IDENT) return unexpected(p, "a field name");
      next(p);
      if ((rc = expect(p, ':')) < 0) return rc;
      if (ir_grow(g, &elems, &cap, n + 1, sizeof *elems) < 0) return oom(p);
      if ((rc = parse_type(p, g, &elems[n++])) < 0) return rc;
      if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
    }
    next(p);
    *out = ir_type_tuple(g, n, elems);
    return *out ? 0 : oom(p);
  }
  if (at_word(p, "Tensor")) return parse_tensor_type(p, g, -1, out);
  int dt = dtype_of(&p->lx.tok);
  if (dt >= 0) return parse_tensor_type(p, g, dt, out);
  char buf[64];
  if (dt == -2)
    return perr_at(p, p->lx.tok.line, p->lx.tok.col, "unsupported tensor dtype %s (kiln has Float, "
                   "Double, Long, Bool, Int, Short, Char, Byte, Half, BFloat16)", ir_tok_desc(&p->lx.tok, buf, sizeof buf));
  for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
    if (at_word(p, simple[i].name)) {
      *out = ir_type_simple(simple[i].k);
      next(p);
      return 0;
    }
  return perr_at(p, p->lx.tok.line, p->lx.tok.col, "unknown type %s",
                 ir_tok_desc(&p->lx.tok, buf, sizeof buf));
}

static int parse_type(parser *p, ir_graph *g, const ir_type **out) {
  int rc = enter(p);
  if (rc < 0 || (rc = parse_type_primary(p, g, out)) < 0) return rc;
  for (;;) {
    if (at(p, '[')) {
      next(p);
      if ((rc = expect(p, ']')) < 0) return rc;
      *out = ir_type_list(g, *out);
    } else if (at(p, '?')) {
      next(p);
      *out = ir_type_optional(g, *out);
    } else {
      break;
    }
    if (!*out) return oom(p);
  }
  p->depth--;
  return 0;
}

/* ---- constants and attributes ------------------------------------------------------------- */

/* Is the current ir_token the start of a type rather than a constant? */
static bool at_type(const parser *p) {
  return p->lx.tok.kind == IR_T_IDENT && !at_word(p, "True") && !at_word(p, "False") &&
         !at_word(p, "None") && !at_word(p, "inf") && !at_word(p, "nan") &&
         !at_word(p, "annotate");
}

static int parse_ivalue(parser *p, ir_graph *g, ir_ivalue *v) {
  int rc;
  ir_token t = p->lx.tok;
  memset(v, 0, sizeof *v);
  switch (t.kind) {
  case IR_T_INT:
    v->tag = IR_IV_INT;
    return tok_int(p, &v->i);
  case IR_T_FLOAT:
    v->tag = IR_IV_FLOAT;
    v->f = tok_float(&t);
    next(p);
    return 0;
  case IR_T_STRING:
    v->tag = IR_IV_STR;
    return tok_string(p, g, &v->s);
  case IR_T_IDENT:
    if (at_word(p, "True") || at_word(p, "False")) {
      v->tag = IR_IV_BOOL;
      v->b = at_word(p, "True");
    } else if (at_word(p, "None")) {
      v->tag = IR_IV_NONE;
    } else if (at_word(p, "inf") || at_word(p, "nan")) {
      v->tag = IR_IV_FLOAT;
      v->f = tok_float(&t);
    } else if (at_word(p, "annotate")) {
      /* annotate(List[int], []): the value, whose type the node declares
       * (the Python type is skipped up to its comma) */
      next(p);
      if ((rc = expect(p, '(')) < 0) return rc;
      for (int depth = 0; depth > 0 || !at(p, ','); next(p)) {
        if (p->lx.tok.kind == IR_T_EOF) return unexpected(p, "',' after the annotated type");
        if (at(p, '[') || at(p, '(')) depth++;
        else if (at(p, ']') || at(p, ')')) depth--;
        if (depth < 0) return unexpected(p, "',' after the annotated type");
      }
      next(p);
      if ((rc = parse_ivalue(p, g, v)) < 0) return rc;
      return expect(p, ')');
    } else {
      return unexpected(p, "a constant");
    }
    next(p);
    return 0;
  case IR_T_PUNCT:
    if (t.c == '[' || t.c == '(') {
      char close = t.c == '[' ? ']' : ')';
      ir_ivalue *items = NULL;
      int n = 0, cap = 0;
      bool comma = false;
      if ((rc = enter(p)) < 0) return rc;
      next(p);
      while (!at(p, close)) {
        if (ir_grow(g, &items, &cap, n + 1, sizeof *items) < 0) return oom(p);
        if ((rc = parse_ivalue(p, g, &items[n++])) < 0) return rc;
        comma = false;
        if (!at(p, close)) {
          if ((rc = expect(p, ',')) < 0) return rc;
          comma = true;
        }
      }
      if (comma && (close == ']' || n != 1))
        return perr_at(p, p->lx.tok.line, p->lx.tok.col, "unexpected ',' before '%c'", close);
      next(p);
      p->depth--;
      v->tag = close == ']' ? IR_IV_LIST : IR_IV_TUPLE;
      v->items.v = items;
      v->items.n = n;
      return 0;
    }
    if (t.c == '{')
      return perr_at(p, t.line, t.col, "tensor constants are not supported");
    /* fall through */
  default:
    return unexpected(p, "a constant");
  }
}

/* Parses one attribute value into a (kind and payload). */
static int parse_attr_value(parser *p, ir_graph *g, ir_attr *a) {
  int rc;
  ir_token t = p->lx.tok;
  if (at_type(p)) {
    a->kind = IR_ATTR_TYPE;
    return parse_type(p, g, &a->ty);
  }
  if (at(p, '<'))
    return perr_at(p, t.line, t.col, "graph attributes cannot be parsed (only Subgraph, "
                   "printed as a `with` section)");
  if (at(p, '[')) {
    /* a list of types? */
    const char *save_pos = p->lx.pos, *save_ls = p->lx.line_start;
    int save_line = p->lx.line;
    next(p);
    if (at_type(p)) {
      const ir_type **tys = NULL;
      int n = 0, cap = 0;
      while (!at(p, ']')) {
        if (ir_grow(g, &tys, &cap, n + 1, sizeof *tys) < 0) return oom(p);
        if ((rc = parse_type(p, g, &tys[n++])) < 0) return rc;
        if (!at(p, ']') && (rc = expect(p, ',')) < 0) return rc;
      }
      next(p);
      a->kind = IR_ATTR_TYPES;
      a->types.v = tys;
      a->types.n = n;
      return 0;
    }
    /* no: rewind to the '[' and read a constant */
    p->lx.pos = save_pos;
    p->lx.line_start = save_ls;
    p->lx.line = save_line;
    p->lx.tok = t;
  }
  if (at(p, '(')) {
    const char *save_pos = p->lx.pos, *save_ls = p->lx.line_start;
    int save_line = p->lx.line;
    next(p);
    bool type = at_type(p);
    p->lx.pos = save_pos;
    p->lx.line_start = save_ls;
    p->lx.line = save_line;
    p->lx.tok = t;
    if (type) {
      a->kind = IR_ATTR_TYPE;
      return parse_type(p, g, &a->ty);
    }
  }
  ir_ivalue v;
  if ((rc = parse_ivalue(p, g, &v)) < 0) return rc;
  switch (v.tag) {
  case IR_IV_INT: a->kind = IR_ATTR_INT; a->i = v.i; return 0;
  case IR_IV_FLOAT: a->kind = IR_ATTR_FLOAT; a->f = v.f; return 0;
  case IR_IV_STR: a->kind = IR_ATTR_STR; a->s = v.s; return 0;
  case IR_IV_LIST: {
    bool ints = true, floats = v.items.n > 0;
    for (int i = 0; i < v.items.n; i++) {
      ints = ints && v.items.v[i].tag == IR_IV_INT;
      floats = floats && v.items.v[i].tag == IR_IV_FLOAT;
    }
    if (ints) {
      int64_t *x = ir_graph_alloc(g, (size_t)v.items.n * sizeof *x);
      if (!x) return oom(p);
      for (int i = 0; i < v.items.n; i++) x[i] = v.items.v[i].i;
      a->kind = IR_ATTR_INTS;
      a->ints.v = x;
      a->ints.n = v.items.n;
      return 0;
    }
    if (floats) {
      double *x = ir_graph_alloc(g, (size_t)v.items.n * sizeof *x);
      if (!x) return oom(p);
      for (int i = 0; i < v.items.n; i++) x[i] = v.items.v[i].f;
      a->kind = IR_ATTR_FLOATS;
      a->floats.v = x;
      a->floats.n = v.items.n;
      return 0;
    }
    break;
  }
  default:
    break;
  }
  ir_ivalue *copy = ir_graph_alloc(g, sizeof *copy);
  if (!copy) return oom(p);
  *copy = v;
  a->kind = IR_ATTR_IVALUE;
  a->iv = copy;
  return 0;
}

/* ---- values and scopes ------------------------------------------------------------------------
 */

static int vis_set(parser *p, gctx *c, const ir_value *v, uint8_t state) {
  int need = ir_graph_value_count(c->g);
  if (need > c->vis_cap) {
    int cap = c->vis_cap ? c->vis_cap : 64;
    while (cap < need) cap *= 2;
    uint8_t *x = core_realloc(c->vis, (size_t)cap);
    if (!x) return oom(p);
    memset(x + c->vis_cap, 0, (size_t)(cap - c->vis_cap));
    c->vis = x;
    c->vis_cap = cap;
  }
  c->vis[v->id] = state;
  return 0;
}

/* Names v as written (ir_token t); it becomes visible with show(). */
static int name_value(parser *p, gctx *c, ir_value *v, const ir_token *t) {
  if (ir_graph_find_value_n(c->g, t->s, t->n))
    return perr_at(p, t->line, t->col, "redefinition of %%%.*s", (int)t->n, t->s);
  if (ir_name_is_numeric(t->s, t->n)) {
    if (t->n > 9)
      return perr_at(p, t->line, t->col, "value number %%%.*s too large", (int)t->n, t->s);
    /* Note [Value names]: later values must not print like this one */
    int id = (int)strtol(t->s, NULL, 10);
    if (id >= c->g->next_value_id) c->g->next_value_id = id + 1;
  }
  if (ir_value_name_raw(v, t->s, t->n) < 0) return oom(p);
  return vis_set(p, c, v, 0);
}

static int define(parser *p, gctx *c, ir_value *v, const ir_token *t) {
  int rc = name_value(p, c, v, t);
  return rc < 0 ? rc : vis_set(p, c, v, 1);
}

/* The visible value named by the current IR_T_VALUE token. */
static int use(parser *p, gctx *c, ir_value **out) {
  ir_token t = p->lx.tok;
  if (t.kind != IR_T_VALUE) return unexpected(p, "a value (%name)");
  ir_value *v = ir_graph_find_value_n(c->g, t.s, t.n);
  uint8_t state = v && v->id < c->vis_cap ? c->vis[v->id] : 0;
  if (!v) return perr_at(p, t.line, t.col, "use of undefined value %%%.*s", (int)t.n, t.s);
  if (state == 0)
    return perr_at(p, t.line, t.col, "use of %%%.*s before its definition", (int)t.n, t.s);
  if (state == 2)
    return perr_at(p, t.line, t.col, "%%%.*s is defined in a block that does not enclose "
                   "this use", (int)t.n, t.s);
  *out = v;
  next(p);
  return 0;
}

/* "(%a, %b)" into a new arena array; *close_line is the line of ')'. */
static int parse_uses(parser *p, gctx *c, ir_value ***out, int *n_out, int *close_line) {
  int rc, cap = 0;
  *out = NULL;
  *n_out = 0;
  if ((rc = expect(p, '(')) < 0) return rc;
  while (!at(p, ')')) {
    if (ir_grow(c->g, out, &cap, *n_out + 1, sizeof **out) < 0) return oom(p);
    if ((rc = use(p, c, &(*out)[*n_out])) < 0) return rc;
    (*n_out)++;
    if (!at(p, ')') && !at(p, ',')) return unexpected(p, "',' or ')'");
    if (at(p, ',')) next(p);
  }
  if (close_line) *close_line = p->lx.tok.line;
  next(p);
  return 0;
}

/* A declaration "%name : type". */
typedef struct decl {
  ir_token name;
  const ir_type *type;
} decl;

static int parse_decl(parser *p, gctx *c, decl *d) {
  int rc;
  if (p->lx.tok.kind != IR_T_VALUE) return unexpected(p, "a value (%name)");
  d->name = p->lx.tok;
  next(p);
  if ((rc = expect(p, ':')) < 0) return rc;
  return parse_type(p, c->g, &d->type);
}

/* "(%a : T, %b : U)" as parameters of block b. */
static int parse_params(parser *p, gctx *c, ir_block *b) {
  int rc;
  if ((rc = expect(p, '(')) < 0) return rc;
  while (!at(p, ')')) {
    decl d;
    if ((rc = parse_decl(p, c, &d)) < 0) return rc;
    ir_value *v = ir_node_add_output(b->param, d.type);
    if (!v) return oom(p);
    if ((rc = define(p, c, v, &d.name)) < 0) return rc;
    if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
  }
  next(p);
  return 0;
}

/* TorchScript prints an integral float of 1e10 or more without a '.'
 * ("10000000000"), so a float constant may read as an int: make it the
 * float its type says (the text prints back the same). */
static void coerce_ivalue(ir_ivalue *v, const ir_type *t) {
  if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  if (v->tag == IR_IV_INT && t->kind == IR_TYPE_FLOAT) {
    v->f = (double)v->i;
    v->tag = IR_IV_FLOAT;
  } else if (v->tag == IR_IV_LIST && t->kind == IR_TYPE_LIST) {
    for (int i = 0; i < v->items.n; i++) coerce_ivalue(&v->items.v[i], t->elems[0]);
  } else if (v->tag == IR_IV_TUPLE && t->kind == IR_TYPE_TUPLE && t->n_elems == v->items.n) {
    for (int i = 0; i < v->items.n; i++) coerce_ivalue(&v->items.v[i], t->elems[i]);
  }
}

static int coerce_constant(parser *p, ir_node *n) {
  ir_attr *a = (ir_attr *)ir_node_attr(n, "value");
  const ir_type *t = n->outputs[0]->type;
  if (!a) return 0;
  if (t->kind == IR_TYPE_OPTIONAL) t = t->elems[0];
  if (a->kind == IR_ATTR_INT && t->kind == IR_TYPE_FLOAT) {
    a->f = (double)a->i;
    a->kind = IR_ATTR_FLOAT;
  } else if (a->kind == IR_ATTR_INTS && a->ints.n && t->kind == IR_TYPE_LIST &&
             t->elems[0]->kind == IR_TYPE_FLOAT) {
    double *x = ir_graph_alloc(n->graph, (size_t)a->ints.n * sizeof *x);
    if (!x) return oom(p);
    for (int i = 0; i < a->ints.n; i++) x[i] = (double)a->ints.v[i];
    int count = a->ints.n;
    a->kind = IR_ATTR_FLOATS;
    a->floats.v = x;
    a->floats.n = count;
  } else if (a->kind == IR_ATTR_IVALUE) {
    ir_ivalue *v = (ir_ivalue *)a->iv;
    coerce_ivalue(v, t);
    bool floats = v->tag == IR_IV_LIST && v->items.n > 0;
    for (int i = 0; floats && i < v->items.n; i++) floats = v->items.v[i].tag == IR_IV_FLOAT;
    if (floats) {
      double *x = ir_graph_alloc(n->graph, (size_t)v->items.n * sizeof *x);
      if (!x) return oom(p);
      for (int i = 0; i < v->items.n; i++) x[i] = v->items.v[i].f;
      a->kind = IR_ATTR_FLOATS;
      a->floats.v = x;
      a->floats.n = v->items.n;
    }
  }
  return 0;
}

/* ---- nodes, blocks, graphs ----------------------------------------------------------------- */

static int parse_nodes(parser *p, gctx *c, ir_block *b);
static int parse_graph(parser *p, ir_graph **out);

static int parse_block(parser *p, gctx *c, ir_node *n, int index) {
  int rc;
  char want[24];
  snprintf(want, sizeof want, "block%d", index);
  if (!at_word(p, want)) return unexpected(p, want);
  ir_block *b = ir_node_add_block(n);
  if (!b) return oom(p);
  next(p);
  if ((rc = parse_params(p, c, b)) < 0 || (rc = expect(p, ':')) < 0 ||
      (rc = parse_nodes(p, c, b)) < 0)
    return rc;
  if (p->lx.tok.kind != IR_T_ARROW) return unexpected(p, "a node or '->' ending the block");
  next(p);
  ir_value **rets;
  int n_rets;
  if ((rc = parse_uses(p, c, &rets, &n_rets, NULL)) < 0) return rc;
  for (int i = 0; i < n_rets; i++)
    if (ir_block_add_return(b, rets[i]) < 0) return oom(p);
  /* the block's definitions go out of scope */
  for (int i = 0; i < ir_block_n_params(b); i++)
    if ((rc = vis_set(p, c, ir_block_param(b, i), 2)) < 0) return rc;
  for (ir_node *m = b->first; m; m = m->next)
    for (int i = 0; i < m->n_outputs; i++)
      if ((rc = vis_set(p, c, m->outputs[i], 2)) < 0) return rc;
  return 0;
}

/* Reads "ns::name[.overload]" (or a group reference "prim::FusionGroup_3")
 * into kind; *overload points into the text. */
static int parse_kind(parser *p, char *kind, const char **overload, size_t *overload_n) {
  ir_token ns = p->lx.tok;
  if (ns.kind != IR_T_IDENT) return unexpected(p, "a node kind such as aten::add");
  next(p);
  if (p->lx.tok.kind != IR_T_COLONS) return unexpected(p, "'::' in the node kind");
  next(p);
  if (p->lx.tok.kind != IR_T_IDENT) return unexpected(p, "a node kind such as aten::add");
  if (ns.n + 2 + p->lx.tok.n >= MAX_KIND) return perr_at(p, ns.line, ns.col, "node kind too long");
  snprintf(kind, MAX_KIND, "%.*s::%.*s", (int)ns.n, ns.s, (int)p->lx.tok.n, p->lx.tok.s);
  next(p);
  *overload = NULL;
  *overload_n = 0;
  if (at(p, '.')) {
    next(p);
    if (p->lx.tok.kind != IR_T_IDENT) return unexpected(p, "an overload name");
    *overload = p->lx.tok.s;
    *overload_n = p->lx.tok.n;
    next(p);
  }
  return 0;
}

/* Is kind "prim::X_<n>" for a subgraph kind X? Returns the prim (and n). */
static int group_kind(const char *kind, int *index) {
  const char *us = strrchr(kind, '_');
  if (!us || !ir_name_is_numeric(us + 1, strlen(us + 1)) || strlen(us + 1) > 6) return -1;
  char base[MAX_KIND];
  snprintf(base, sizeof base, "%.*s", (int)(us - kind), kind);
  int prim = ir_prim_find(base);
  if (prim < 0 || !(ir_prim_table[prim].flags & IR_PF_SUBGRAPH)) return -1;
  *index = atoi(us + 1);
  return prim;
}

static int parse_node(parser *p, gctx *c, ir_block *b) {
  int rc, n_outs = 0, cap_outs = 0;
  decl *outs = NULL;
  /* outputs */
  if (p->lx.tok.kind == IR_T_VALUE) {
    for (;;) {
      if (ir_grow(c->g, &outs, &cap_outs, n_outs + 1, sizeof *outs) < 0) return oom(p);
      if ((rc = parse_decl(p, c, &outs[n_outs++])) < 0) return rc;
      if (!at(p, ',')) break;
      next(p);
    }
  }
  if ((rc = expect(p, '=')) < 0) return rc;
  /* kind */
  ir_token kt = p->lx.tok;
  char kind[MAX_KIND];
  const char *ovl;
  size_t ovl_n;
  if ((rc = parse_kind(p, kind, &ovl, &ovl_n)) < 0) return rc;
  int group_index = -1, group_prim = ir_prim_find(kind) < 0 ? group_kind(kind, &group_index) : -1;
  /* attributes */
  ir_attr *attrs = NULL;
  int n_attrs = 0, cap_attrs = 0;
  if (at(p, '[') && strcmp(kind, "prim::Constant") == 0 && n_outs == 1 &&
      outs[0].type->kind == IR_TYPE_TENSOR)
    return perr_at(p, p->lx.tok.line, p->lx.tok.col, "tensor constants are not supported");
  if (at(p, '[')) {
    next(p);
    while (!at(p, ']')) {
      ir_token an = p->lx.tok;
      if (an.kind != IR_T_IDENT) return unexpected(p, "an attribute name");
      for (int i = 0; i < n_attrs; i++)
        if (strlen(attrs[i].name) == an.n && memcmp(attrs[i].name, an.s, an.n) == 0)
          return perr_at(p, an.line, an.col, "duplicate attribute %.*s", (int)an.n, an.s);
      if (ir_grow(c->g, &attrs, &cap_attrs, n_attrs + 1, sizeof *attrs) < 0) return oom(p);
      ir_attr *a = &attrs[n_attrs++];
      memset(a, 0, sizeof *a);
      if (!(a->name = ir_graph_strdup(c->g, an.s, an.n))) return oom(p);
      next(p);
      if ((rc = expect(p, '=')) < 0 || (rc = parse_attr_value(p, c->g, a)) < 0) return rc;
      if (!at(p, ']') && (rc = expect(p, ',')) < 0) return rc;
    }
    next(p);
  }
  /* inputs, then the source comment on the line the node ends on */
  ir_value **ins;
  int n_ins, close_line;
  if ((rc = parse_uses(p, c, &ins, &n_ins, &close_line)) < 0) return rc;
  const char *src = NULL;
  size_t src_n = 0;
  if (p->lx.cmt && p->lx.cmt_n && p->lx.cmt_line == close_line) {
    src = p->lx.cmt;
    src_n = p->lx.cmt_n;
  }
  /* resolve the kind against the input types and build the node */
  int op = -1, prim = group_prim;
  if (prim < 0 && (rc = ir_kind_resolve(kind, ins, n_ins, &op, &prim)) < 0)
    return perr_prefix(p, kt.line, kt.col, rc);
  ir_node *n = ir_node_new_kind(c->g, op, prim);
  if (!n) return oom(p);
  n->line = kt.line;
  n->col = kt.col;
  if (ovl && !(n->overload = ir_graph_strdup(c->g, ovl, ovl_n))) return oom(p);
  if (src && !(n->src = ir_graph_strdup(c->g, src, src_n))) return oom(p);
  for (int i = 0; i < n_ins; i++)
    if (ir_node_add_input(n, ins[i]) < 0) return oom(p);
  n->attrs = attrs;
  n->n_attrs = n->cap_attrs = n_attrs;
  ir_node_append(b, n);
  for (int i = 0; i < n_outs; i++) {
    ir_value *v = ir_node_add_output(n, outs[i].type);
    if (!v) return oom(p);
    if ((rc = name_value(p, c, v, &outs[i].name)) < 0) return rc;
  }
  if (prim == IR_PRIM_CONSTANT && n_outs == 1 && (rc = coerce_constant(p, n)) < 0) return rc;
  if (group_prim >= 0) {
    if (group_index != c->n_groups)
      return perr_at(p, kt.line, kt.col, "expected group number %d, found %s", c->n_groups, kind);
    if (c->n_groups == c->cap_groups) {
      int cap = c->cap_groups ? c->cap_groups * 2 : 4;
      ir_node **x = core_realloc(c->groups, (size_t)cap * sizeof *x);
      if (!x) return oom(p);
      c->groups = x;
      c->cap_groups = cap;
    }
    c->groups[c->n_groups++] = n;
  }
  /* blocks */
  for (int k = 0;
       p->lx.tok.kind == IR_T_IDENT && p->lx.tok.n > 5 && memcmp(p->lx.tok.s, "block", 5) == 0;
       k++) {
    if ((rc = enter(p)) < 0 || (rc = parse_block(p, c, n, k)) < 0) return rc;
    p->depth--;
  }
  /* the outputs become visible after the node (and its blocks) */
  for (int i = 0; i < n_outs; i++)
    if ((rc = vis_set(p, c, n->outputs[i], 1)) < 0) return rc;
  if (group_prim < 0 && (rc = ir_node_check(n)) < 0) return perr_prefix(p, kt.line, kt.col, rc);
  return 0;
}

static int parse_nodes(parser *p, gctx *c, ir_block *b) {
  while (p->lx.tok.kind == IR_T_VALUE || at(p, '=')) {
    int rc = parse_node(p, c, b);
    if (rc < 0) return rc;
  }
  return 0;
}

static int parse_graph_into(parser *p, gctx *c) {
  int rc;
  ir_block *top = ir_graph_top(c->g);
  if (!at_word(p, "graph")) return unexpected(p, "'graph('");
  next(p);
  if ((rc = parse_params(p, c, top)) < 0 || (rc = expect(p, ':')) < 0 ||
      (rc = parse_nodes(p, c, top)) < 0)
    return rc;
  if (!at_word(p, "return")) return unexpected(p, "a node or 'return'");
  next(p);
  ir_value **rets;
  int n_rets;
  if ((rc = parse_uses(p, c, &rets, &n_rets, NULL)) < 0) return rc;
  for (int i = 0; i < n_rets; i++)
    if (ir_block_add_return(top, rets[i]) < 0) return oom(p);
  /* `with prim::X_<i> = graph(...)` for each group node, in order */
  for (int i = 0; i < c->n_groups; i++) {
    ir_node *gn = c->groups[i];
    if (!at_word(p, "with")) return unexpected(p, "'with' and the subgraph of a group");
    next(p);
    ir_token kt = p->lx.tok;
    char kind[MAX_KIND], want[MAX_KIND + 16];
    const char *ovl;
    size_t ovl_n;
    if ((rc = parse_kind(p, kind, &ovl, &ovl_n)) < 0) return rc;
    snprintf(want, sizeof want, "%s_%d", ir_node_kind(gn), i);
    if (strcmp(kind, want) != 0 || ovl)
      return perr_at(p, kt.line, kt.col, "expected the subgraph of %s", want);
    if ((rc = expect(p, '=')) < 0) return rc;
    ir_graph *sub;
    if ((rc = enter(p)) < 0 || (rc = parse_graph(p, &sub)) < 0) return rc;
    p->depth--;
    if (ir_node_set_g(gn, "Subgraph", sub) < 0) return oom(p);
    if ((rc = ir_node_check(gn)) < 0) return perr_prefix(p, gn->line, gn->col, rc);
  }
  return 0;
}

static int parse_graph(parser *p, ir_graph **out) {
  gctx c = {0};
  *out = NULL;
  if (!(c.g = ir_graph_new())) return oom(p);
  int rc = parse_graph_into(p, &c);
  core_free(c.vis);
  core_free(c.groups);
  if (rc < 0) {
    ir_graph_free(c.g);
    return rc;
  }
  *out = c.g;
  return 0;
}

ir_graph *ir_graph_parse(const char *text, size_t len) {
  parser p = {0};
  ir_lex_init(&p.lx, text, len);
  ir_graph *g = NULL;
  if (parse_graph(&p, &g) < 0) return NULL;
  if (p.lx.tok.kind != IR_T_EOF) {
    unexpected(&p, "end of input after the graph");
    ir_graph_free(g);
    return NULL;
  }
  return g;
}
