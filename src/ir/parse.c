/* src/ir/parse.c: the parser for TorchScript's graph text (what
 * `print(graph)` shows) and kiln's own printed graphs. A hand-written lexer
 * with one token of lookahead and a recursive-descent parser; indentation
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

/* ---- lexer --------------------------------------------------------------------- */

typedef enum tkind {
  T_EOF = 0,
  T_IDENT,
  T_VALUE,    /* %name: s/n is the name without '%' */
  T_INT,
  T_FLOAT,    /* also inf, -inf, nan written as numbers */
  T_STRING,   /* s/n include the quotes */
  T_PUNCT,    /* c */
  T_ARROW,    /* -> */
  T_COLONS,   /* :: */
  T_ELLIPSIS, /* ... */
  T_ERROR     /* c: the bad character ('"' for an unterminated string) */
} tkind;

typedef struct token {
  tkind kind;
  const char *s;
  size_t n;
  int line, col;
  char c;
} token;

/* One graph being parsed (the top graph or a `with` subgraph). */
typedef struct gctx {
  ir_graph *g;
  uint8_t *vis;        /* per value id: 0 undefined yet, 1 visible, 2 out of scope */
  int vis_cap;
  ir_node **groups;    /* group nodes in print order (their subgraphs follow) */
  int n_groups, cap_groups;
} gctx;

typedef struct parser {
  const char *pos, *end, *line_start;
  int line;
  token tok;
  const char *cmt;     /* comment skipped just before tok ("f.py:3:9") */
  size_t cmt_n;
  int cmt_line;
  int depth;
  bool failed;
} parser;

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident(char c) { return is_ident_start(c) || is_digit(c); }

static void skip_space(parser *p) {
  while (p->pos < p->end) {
    char c = *p->pos;
    if (c == '\n') {
      p->pos++;
      p->line++;
      p->line_start = p->pos;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      p->pos++;
    } else if (c == '#') {
      const char *s = ++p->pos;
      while (p->pos < p->end && *p->pos != '\n') p->pos++;
      const char *e = p->pos;
      if (s < e && *s == ' ') s++;
      while (e > s && (e[-1] == ' ' || e[-1] == '\r' || e[-1] == '\t')) e--;
      p->cmt = s;
      p->cmt_n = (size_t)(e - s);
      p->cmt_line = p->line;
    } else {
      return;
    }
  }
}

static bool starts(const parser *p, const char *at, const char *word) {
  size_t n = strlen(word);
  return (size_t)(p->end - at) >= n && memcmp(at, word, n) == 0 &&
         (at + n == p->end || !is_ident(at[n]));
}

static void next(parser *p) {
  p->cmt = NULL;
  skip_space(p);
  token t = {.s = p->pos, .line = p->line, .col = (int)(p->pos - p->line_start) + 1};
  const char *q = p->pos, *e = p->end;
  if (q >= e) {
    t.kind = T_EOF;
  } else if (is_ident_start(*q)) {
    while (q < e && is_ident(*q)) q++;
    t.kind = T_IDENT;
  } else if (*q == '%') {
    q++;
    while (q < e && (is_ident(*q) || *q == '.')) q++;
    t.kind = q - p->pos > 1 ? T_VALUE : T_ERROR;
    t.c = '%';
    t.s = p->pos + 1;
    t.n = (size_t)(q - t.s);
  } else if (is_digit(*q) || (*q == '-' && q + 1 < e && is_digit(q[1]))) {
    bool flt = false;
    if (*q == '-') q++;
    while (q < e && is_digit(*q)) q++;
    if (q < e && *q == '.' && !(q + 1 < e && q[1] == '.')) {
      flt = true;
      q++;
      while (q < e && is_digit(*q)) q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
      const char *x = q + 1;
      if (x < e && (*x == '+' || *x == '-')) x++;
      if (x < e && is_digit(*x)) {
        flt = true;
        q = x;
        while (q < e && is_digit(*q)) q++;
      }
    }
    t.kind = flt ? T_FLOAT : T_INT;
  } else if (*q == '-' && (starts(p, q + 1, "inf") || starts(p, q + 1, "nan"))) {
    q += 4;
    t.kind = T_FLOAT;
  } else if (*q == '"') {
    q++;
    while (q < e && *q != '"' && *q != '\n') q += (*q == '\\' && q + 1 < e && q[1] != '\n') ? 2 : 1;
    if (q < e && *q == '"') {
      q++;
      t.kind = T_STRING;
    } else {
      t.kind = T_ERROR;
      t.c = '"';
    }
  } else if (*q == '-' && q + 1 < e && q[1] == '>') {
    q += 2;
    t.kind = T_ARROW;
  } else if (*q == ':' && q + 1 < e && q[1] == ':') {
    q += 2;
    t.kind = T_COLONS;
  } else if (*q == '.' && q + 2 < e && q[1] == '.' && q[2] == '.') {
    q += 3;
    t.kind = T_ELLIPSIS;
  } else if (strchr("()[],:=?*.<>{}", *q)) {
    t.c = *q++;
    t.kind = T_PUNCT;
  } else {
    t.c = *q++;
    t.kind = T_ERROR;
  }
  if (t.kind != T_VALUE) t.n = (size_t)(q - t.s);
  p->pos = q;
  p->tok = t;
}

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

static const char *tok_desc(const token *t, char *buf, size_t n) {
  switch (t->kind) {
  case T_EOF: return "end of input";
  case T_ERROR:
    if (t->c == '"') return "an unterminated string";
    if (t->c == '%') return "'%' without a value name";
    if ((unsigned char)t->c < 0x20 || (unsigned char)t->c >= 0x7f) {
      snprintf(buf, n, "byte 0x%02x", (unsigned char)t->c);
      return buf;
    }
    snprintf(buf, n, "'%c'", t->c);
    return buf;
  case T_VALUE: snprintf(buf, n, "'%%%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
  default: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
  }
}

static int unexpected(parser *p, const char *wanted) {
  char buf[64];
  return perr_at(p, p->tok.line, p->tok.col, "expected %s, found %s", wanted,
                 tok_desc(&p->tok, buf, sizeof buf));
}

static bool at(const parser *p, char c) { return p->tok.kind == T_PUNCT && p->tok.c == c; }

static bool at_word(const parser *p, const char *w) {
  return p->tok.kind == T_IDENT && p->tok.n == strlen(w) && memcmp(p->tok.s, w, p->tok.n) == 0;
}

static int expect(parser *p, char c) {
  char want[8] = {'\'', c, '\'', 0};
  if (!at(p, c)) return unexpected(p, want);
  next(p);
  return 0;
}

static int enter(parser *p) {
  if (++p->depth > MAX_DEPTH)
    return perr_at(p, p->tok.line, p->tok.col, "nesting deeper than %d", MAX_DEPTH);
  return 0;
}

/* ---- literals ------------------------------------------------------------------------ */

static int tok_int(parser *p, int64_t *out) {
  char buf[32];
  if (p->tok.n >= sizeof buf) return perr_at(p, p->tok.line, p->tok.col, "integer out of range");
  memcpy(buf, p->tok.s, p->tok.n);
  buf[p->tok.n] = 0;
  errno = 0;
  long long v = strtoll(buf, NULL, 10);
  if (errno == ERANGE) return perr_at(p, p->tok.line, p->tok.col, "integer %s out of range", buf);
  *out = v;
  next(p);
  return 0;
}

static double tok_float(const token *t) {
  char buf[64];
  size_t n = t->n < sizeof buf - 1 ? t->n : sizeof buf - 1;
  memcpy(buf, t->s, n);
  buf[n] = 0;
  return strtod(buf, NULL);
}

/* Decodes a string token (C escapes, \ooo octal, \xHH) into g. */
static int tok_string(parser *p, ir_graph *g, const char **out) {
  const token *t = &p->tok;
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
      if (c < '0' || c > '7') return perr_at(p, t->line, t->col, "unknown escape '\\%c' in a string", c);
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

static int dtype_of(const token *t) {
  static const struct { const char *name; int dt; } names[] = {
      {"Float", KILN_DTYPE_F32}, {"Double", KILN_DTYPE_F64},
      {"Long", KILN_DTYPE_I64},  {"Bool", KILN_DTYPE_BOOL}};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (t->n == strlen(names[i].name) && memcmp(t->s, names[i].name, t->n) == 0) return names[i].dt;
  static const char *unsupported[] = {"Byte", "Char", "Short", "Int", "Half", "BFloat16",
                                      "ComplexHalf", "ComplexFloat", "ComplexDouble",
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
    token t = p->tok;
    if (t.kind == T_ELLIPSIS && !ndim && !keywords) {
      ellipsis = true;
      next(p);
    } else if ((t.kind == T_INT || at(p, '*')) && !keywords && !ellipsis) {
      if (ndim == KILN_MAX_DIMS)
        return perr_at(p, t.line, t.col, "tensor type with more than %d dims", KILN_MAX_DIMS);
      int64_t v = -1;
      if (t.kind == T_INT) {
        if ((rc = tok_int(p, &v)) < 0) return rc;
        if (v < 0) return perr_at(p, t.line, t.col, "negative size %lld in a tensor type", (long long)v);
      } else {
        next(p);
      }
      sizes[ndim++] = v;
    } else if (t.kind == T_IDENT) {
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
            return perr_at(p, p->tok.line, p->tok.col, "too many strides");
          if (p->tok.kind != T_INT) return unexpected(p, "a stride");
          if ((rc = tok_int(p, &strides[n_strides++])) < 0) return rc;
          if (!at(p, ']') && (rc = expect(p, ',')) < 0) return rc;
        }
        next(p);
      } else if (is_rg || is_dim) {
        int64_t v;
        if (p->tok.kind != T_INT) return unexpected(p, "0 or 1");
        token vt = p->tok;
        if ((rc = tok_int(p, &v)) < 0) return rc;
        if (is_rg ? (v != 0 && v != 1) : v != 0)
          return perr_at(p, vt.line, vt.col, "expected %s", is_rg ? "0 or 1" : "dim=0");
        if (is_rg) rg = (int)v;
        else dim0 = true;
      } else {
        if (p->tok.kind != T_IDENT) return unexpected(p, "a device name");
        size_t n = p->tok.n;
        if (n > 16) return perr_at(p, p->tok.line, p->tok.col, "device name too long");
        memcpy(device, p->tok.s, n);
        next(p);
        if (at(p, ':')) {
          next(p);
          if (p->tok.kind != T_INT || p->tok.n > 8) return unexpected(p, "a device index");
          device[n++] = ':';
          memcpy(device + n, p->tok.s, p->tok.n);
          next(p);
        }
      }
    } else {
      return unexpected(p, "a size, '*' or a keyword in a tensor type");
    }
    if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
  }
  token close = p->tok;
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
    const ir_type *elems[64];
    int n = 0;
    next(p);
    while (!at(p, ')')) {
      if (n == 64) return perr_at(p, p->tok.line, p->tok.col, "tuple type with more than 64 elements");
      if ((rc = parse_type(p, g, &elems[n++])) < 0) return rc;
      if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
    }
    next(p);
    *out = ir_type_tuple(g, n, elems);
    return *out ? 0 : oom(p);
  }
  if (p->tok.kind != T_IDENT) return unexpected(p, "a type");
  if (at_word(p, "Tensor")) return parse_tensor_type(p, g, -1, out);
  int dt = dtype_of(&p->tok);
  if (dt >= 0) return parse_tensor_type(p, g, dt, out);
  char buf[64];
  if (dt == -2)
    return perr_at(p, p->tok.line, p->tok.col, "unsupported tensor dtype %s (kiln has Float, "
                   "Double, Long, Bool)", tok_desc(&p->tok, buf, sizeof buf));
  for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
    if (at_word(p, simple[i].name)) {
      *out = ir_type_simple(simple[i].k);
      next(p);
      return 0;
    }
  return perr_at(p, p->tok.line, p->tok.col, "unknown type %s", tok_desc(&p->tok, buf, sizeof buf));
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

/* Is the current token the start of a type rather than a constant? */
static bool at_type(const parser *p) {
  return p->tok.kind == T_IDENT && !at_word(p, "True") && !at_word(p, "False") &&
         !at_word(p, "None") && !at_word(p, "inf") && !at_word(p, "nan");
}

static int parse_ivalue(parser *p, ir_graph *g, ir_ivalue *v) {
  int rc;
  token t = p->tok;
  memset(v, 0, sizeof *v);
  switch (t.kind) {
  case T_INT:
    v->tag = IR_IV_INT;
    return tok_int(p, &v->i);
  case T_FLOAT:
    v->tag = IR_IV_FLOAT;
    v->f = tok_float(&t);
    next(p);
    return 0;
  case T_STRING:
    v->tag = IR_IV_STR;
    return tok_string(p, g, &v->s);
  case T_IDENT:
    if (at_word(p, "True") || at_word(p, "False")) {
      v->tag = IR_IV_BOOL;
      v->b = at_word(p, "True");
    } else if (at_word(p, "None")) {
      v->tag = IR_IV_NONE;
    } else if (at_word(p, "inf") || at_word(p, "nan")) {
      v->tag = IR_IV_FLOAT;
      v->f = tok_float(&t);
    } else {
      return unexpected(p, "a constant");
    }
    next(p);
    return 0;
  case T_PUNCT:
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
        return perr_at(p, p->tok.line, p->tok.col, "unexpected ',' before '%c'", close);
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
  token t = p->tok;
  if (at_type(p)) {
    a->kind = IR_ATTR_TYPE;
    return parse_type(p, g, &a->ty);
  }
  if (at(p, '<'))
    return perr_at(p, t.line, t.col, "graph attributes cannot be parsed (only Subgraph, "
                   "printed as a `with` section)");
  if (at(p, '[')) {
    /* a list of types? */
    const char *save_pos = p->pos, *save_ls = p->line_start;
    int save_line = p->line;
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
    p->pos = save_pos;
    p->line_start = save_ls;
    p->line = save_line;
    p->tok = t;
  }
  if (at(p, '(')) {
    const char *save_pos = p->pos, *save_ls = p->line_start;
    int save_line = p->line;
    next(p);
    bool type = at_type(p);
    p->pos = save_pos;
    p->line_start = save_ls;
    p->line = save_line;
    p->tok = t;
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

/* ---- values and scopes ------------------------------------------------------------------------ */

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

/* Names v as written (token t) and makes it visible. */
static int define(parser *p, gctx *c, ir_value *v, const token *t) {
  if (ir_graph_find_value_n(c->g, t->s, t->n))
    return perr_at(p, t->line, t->col, "redefinition of %%%.*s", (int)t->n, t->s);
  if (ir_name_is_numeric(t->s, t->n)) {
    if (t->n > 9) return perr_at(p, t->line, t->col, "value number %%%.*s too large", (int)t->n, t->s);
    /* Note [Value names]: later values must not print like this one */
    int id = (int)strtol(t->s, NULL, 10);
    if (id >= c->g->next_value_id) c->g->next_value_id = id + 1;
  }
  if (ir_value_name_raw(v, t->s, t->n) < 0) return oom(p);
  return vis_set(p, c, v, 1);
}

/* The visible value named by the current T_VALUE token. */
static int use(parser *p, gctx *c, ir_value **out) {
  token t = p->tok;
  if (t.kind != T_VALUE) return unexpected(p, "a value (%name)");
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
    if (!at(p, ')') && (rc = expect(p, ',')) < 0) return rc;
  }
  if (close_line) *close_line = p->tok.line;
  next(p);
  return 0;
}

/* A declaration "%name : type". */
typedef struct decl {
  token name;
  const ir_type *type;
} decl;

static int parse_decl(parser *p, gctx *c, decl *d) {
  int rc;
  if (p->tok.kind != T_VALUE) return unexpected(p, "a value (%name)");
  d->name = p->tok;
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
  if (p->tok.kind != T_ARROW) return unexpected(p, "a node or '->' ending the block");
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
  token ns = p->tok;
  if (ns.kind != T_IDENT) return unexpected(p, "a node kind such as aten::add");
  next(p);
  if (p->tok.kind != T_COLONS) return unexpected(p, "'::' in the node kind");
  next(p);
  if (p->tok.kind != T_IDENT) return unexpected(p, "a node kind such as aten::add");
  if (ns.n + 2 + p->tok.n >= MAX_KIND) return perr_at(p, ns.line, ns.col, "node kind too long");
  snprintf(kind, MAX_KIND, "%.*s::%.*s", (int)ns.n, ns.s, (int)p->tok.n, p->tok.s);
  next(p);
  *overload = NULL;
  *overload_n = 0;
  if (at(p, '.')) {
    next(p);
    if (p->tok.kind != T_IDENT) return unexpected(p, "an overload name");
    *overload = p->tok.s;
    *overload_n = p->tok.n;
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
  if (p->tok.kind == T_VALUE) {
    for (;;) {
      if (ir_grow(c->g, &outs, &cap_outs, n_outs + 1, sizeof *outs) < 0) return oom(p);
      if ((rc = parse_decl(p, c, &outs[n_outs++])) < 0) return rc;
      if (!at(p, ',')) break;
      next(p);
    }
  }
  if ((rc = expect(p, '=')) < 0) return rc;
  /* kind */
  token kt = p->tok;
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
    return perr_at(p, p->tok.line, p->tok.col, "tensor constants are not supported");
  if (at(p, '[')) {
    next(p);
    while (!at(p, ']')) {
      token an = p->tok;
      if (an.kind != T_IDENT) return unexpected(p, "an attribute name");
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
  if (p->cmt && p->cmt_n && p->cmt_line == close_line) {
    src = p->cmt;
    src_n = p->cmt_n;
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
    if (ir_graph_find_value_n(c->g, outs[i].name.s, outs[i].name.n))
      return perr_at(p, outs[i].name.line, outs[i].name.col, "redefinition of %%%.*s",
                     (int)outs[i].name.n, outs[i].name.s);
  }
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
  for (int k = 0; p->tok.kind == T_IDENT && p->tok.n > 5 && memcmp(p->tok.s, "block", 5) == 0; k++) {
    if ((rc = enter(p)) < 0 || (rc = parse_block(p, c, n, k)) < 0) return rc;
    p->depth--;
  }
  /* the outputs become visible after the node (and its blocks) */
  for (int i = 0; i < n_outs; i++)
    if ((rc = define(p, c, n->outputs[i], &outs[i].name)) < 0) return rc;
  if (group_prim < 0 && (rc = ir_node_check(n)) < 0) return perr_prefix(p, kt.line, kt.col, rc);
  return 0;
}

static int parse_nodes(parser *p, gctx *c, ir_block *b) {
  while (p->tok.kind == T_VALUE || at(p, '=')) {
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
    token kt = p->tok;
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
  parser p = {.pos = text, .end = text + len, .line_start = text, .line = 1};
  ir_graph *g = NULL;
  next(&p);
  if (parse_graph(&p, &g) < 0) return NULL;
  if (p.tok.kind != T_EOF) {
    unexpected(&p, "end of input after the graph");
    ir_graph_free(g);
    return NULL;
  }
  return g;
}
