/* src/ir/irimpl.h: internals shared by the files of the IR layer (the graph
 * struct, its arena and name table). Nothing outside src/ir includes it. */
#ifndef KILN_IR_IMPL_H
#define KILN_IR_IMPL_H

#include <string.h>

#include "ir.h"

typedef struct ir_chunk ir_chunk;

struct ir_graph {
  ir_chunk *chunks;       /* the arena (Note [Graph ownership]) */
  ir_block *top;
  int next_value_id;
  int next_node_id;
  /* Note [Value names]: open addressing, name -> value; never shrinks. */
  ir_value **names;
  int names_cap, names_count;
  /* Subgraphs owned through `g` attributes, freed with this graph. */
  ir_graph **subgraphs;
  int n_subgraphs, cap_subgraphs;
  bool is_subgraph;       /* owned by another graph's node */
};

/* Grows an arena array (arrp points at the array pointer) of *cap
 * elements of size elem to hold at least need (doubling); the old array
 * stays in the arena. < 0 on OOM. */
int ir_grow(ir_graph *g, void *arrp, int *cap, int need, size_t elem);
/* A value with a given id (clone, parser); registers name. NULL on OOM. */
ir_value *ir_value_new_raw(ir_graph *g, const ir_type *t, int id);
/* Registers name (copied, must be unused) for v, which must already be
 * an output of a node. < 0 on OOM. */
int ir_value_name_raw(ir_value *v, const char *name, size_t len);
/* Appends an existing value as an output of n (parser, clone). */
int ir_node_push_output(ir_node *n, ir_value *v);
/* Creates a node with a given kind without linking it. */
ir_node *ir_node_new_kind(ir_graph *g, int op, int prim);
/* The value named s (len bytes) in g, or NULL. */
ir_value *ir_graph_find_value_n(const ir_graph *g, const char *s, size_t n);
/* Is s (len bytes) all digits? */
bool ir_name_is_numeric(const char *s, size_t len);
/* Adds sub to g's owned subgraphs. < 0 on OOM. */
int ir_graph_adopt(ir_graph *g, ir_graph *sub);
/* Formats d as TorchScript prints a double constant: "1.", "0.5",
 * "0.10000000000000001", "1e-08", "inf", "-0.". */
void ir_fmt_double(char *buf, size_t n, double d);

/* ---- growable text buffer (printer, messages) --------------------------- */
typedef core_strbuf ir_buf; /* text in p, n bytes */
#define ir_buf_put core_strbuf_append
#define ir_buf_printf core_strbuf_printf
static inline void ir_buf_puts(ir_buf *b, const char *s) { core_strbuf_append(b, s, strlen(s)); }
void ir_buf_type(ir_buf *b, const ir_type *t);
void ir_buf_quoted(ir_buf *b, const char *s);

/* ---- lexer (lex.c) -------------------------------------------------------- */
typedef enum ir_tkind {
  IR_T_EOF = 0,
  IR_T_IDENT,
  IR_T_VALUE,    /* %name: s/n is the name without '%' */
  IR_T_INT,
  IR_T_FLOAT,    /* also inf, -inf, nan written as numbers */
  IR_T_STRING,   /* s/n include the quotes */
  IR_T_PUNCT,    /* c */
  IR_T_ARROW,    /* -> */
  IR_T_COLONS,   /* :: */
  IR_T_ELLIPSIS, /* ... */
  IR_T_ERROR     /* c: the bad character ('"' for an unterminated string) */
} ir_tkind;

typedef struct ir_token {
  ir_tkind kind;
  const char *s;  /* in the text */
  size_t n;
  int line, col;  /* 1-based */
  char c;
} ir_token;

typedef struct ir_lexer {
  const char *pos, *end, *line_start;
  int line;
  ir_token tok;        /* the current token */
  const char *cmt;     /* comment skipped just before tok ("f.py:3:9"), or NULL */
  size_t cmt_n;
  int cmt_line;
} ir_lexer;

/* Starts lexing text[0, len) and reads the first token. */
void ir_lex_init(ir_lexer *lx, const char *text, size_t len);
/* Advances to the next token. */
void ir_lex_next(ir_lexer *lx);
/* "'foo'", "end of input", "byte 0x01" for messages (buf holds it). */
const char *ir_tok_desc(const ir_token *t, char *buf, size_t n);

#endif
