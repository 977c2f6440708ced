/* src/ir/lex.c: the lexer of graph text: identifiers, %values, numbers
 * (with inf/nan), strings, punctuation, `->`, `::`, `...`; skips blanks
 * and `#` comments, remembering the last comment (a node's source
 * location). Never reads past the end of the text. */
#include <stdio.h>
#include <string.h>

#include "irimpl.h"

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident(char c) { return is_ident_start(c) || is_digit(c); }

static void skip_space(ir_lexer *p) {
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
      const char *e = p->pos, *nul = memchr(s, 0, (size_t)(e - s));
      if (nul) e = nul; /* a source location never holds a NUL */
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

static bool starts(const ir_lexer *p, const char *at, const char *word) {
  size_t n = strlen(word);
  return (size_t)(p->end - at) >= n && memcmp(at, word, n) == 0 &&
         (at + n == p->end || !is_ident(at[n]));
}

void ir_lex_next(ir_lexer *p) {
  p->cmt = NULL;
  skip_space(p);
  ir_token t = {.s = p->pos, .line = p->line, .col = (int)(p->pos - p->line_start) + 1};
  const char *q = p->pos, *e = p->end;
  if (q >= e) {
    t.kind = IR_T_EOF;
  } else if (is_ident_start(*q)) {
    while (q < e && is_ident(*q)) q++;
    t.kind = IR_T_IDENT;
  } else if (*q == '%') {
    q++;
    while (q < e && (is_ident(*q) || *q == '.')) q++;
    t.kind = q - p->pos > 1 ? IR_T_VALUE : IR_T_ERROR;
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
    t.kind = flt ? IR_T_FLOAT : IR_T_INT;
  } else if (*q == '-' && (starts(p, q + 1, "inf") || starts(p, q + 1, "nan"))) {
    q += 4;
    t.kind = IR_T_FLOAT;
  } else if (*q == '"') {
    q++;
    while (q < e && *q != '"' && *q != '\n') q += (*q == '\\' && q + 1 < e && q[1] != '\n') ? 2 : 1;
    if (q < e && *q == '"') {
      q++;
      t.kind = IR_T_STRING;
    } else {
      t.kind = IR_T_ERROR;
      t.c = '"';
    }
  } else if (*q == '-' && q + 1 < e && q[1] == '>') {
    q += 2;
    t.kind = IR_T_ARROW;
  } else if (*q == ':' && q + 1 < e && q[1] == ':') {
    q += 2;
    t.kind = IR_T_COLONS;
  } else if (*q == '.' && q + 2 < e && q[1] == '.' && q[2] == '.') {
    q += 3;
    t.kind = IR_T_ELLIPSIS;
  } else if (*q && strchr("()[],:=?*.<>{}", *q)) {
    t.c = *q++;
    t.kind = IR_T_PUNCT;
  } else {
    t.c = *q++;
    t.kind = IR_T_ERROR;
  }
  if (t.kind != IR_T_VALUE) t.n = (size_t)(q - t.s);
  p->pos = q;
  p->tok = t;
}

void ir_lex_init(ir_lexer *lx, const char *text, size_t len) {
  memset(lx, 0, sizeof *lx);
  lx->pos = lx->line_start = text;
  lx->end = text + len;
  lx->line = 1;
  ir_lex_next(lx);
}

const char *ir_tok_desc(const ir_token *t, char *buf, size_t n) {
  switch (t->kind) {
  case IR_T_EOF: return "end of input";
  case IR_T_ERROR:
    if (t->c == '"') return "an unterminated string";
    if (t->c == '%') return "'%' without a value name";
    if ((unsigned char)t->c < 0x20 || (unsigned char)t->c >= 0x7f) {
      snprintf(buf, n, "byte 0x%02x", (unsigned char)t->c);
      return buf;
    }
    snprintf(buf, n, "'%c'", t->c);
    return buf;
  case IR_T_VALUE: snprintf(buf, n, "'%%%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
  default: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
  }
}

