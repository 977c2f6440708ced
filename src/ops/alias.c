/* src/ops/alias.c: what an op writes and which of its outputs alias its
 * inputs, read once from the alias annotations of the op table's schemas
 * (TorchScript's FunctionSchema alias info), so that no layer keeps its
 * own list of in-place or view ops.
 *
 * Note [Alias annotations]: in a schema, `Tensor(a) self` puts self in
 * alias set a, `Tensor(a!) self` says the op also writes it, and
 * `Tensor(a -> *) self` says its pieces go into a list (chunk, split). A
 * return annotated with the same letter (`-> Tensor(a)`, `Tensor(a!)`,
 * `Tensor(a)[]`) may share memory with that argument (a view, or self
 * returned by an in-place op); an unannotated return is fresh memory. */
#include <pthread.h>
#include <string.h>

#include "op.h"

#define ALIAS_MAX_ARGS 32
#define ALIAS_MAX_RETS 8

typedef struct alias_info {
  uint32_t writes;                 /* bit i: argument i is written */
  int8_t out_alias[ALIAS_MAX_RETS]; /* argument an output aliases, or -1 */
} alias_info;

static alias_info info_of[OP_INDEX_COUNT];
static pthread_once_t parsed = PTHREAD_ONCE_INIT; /* Note [Threads] in kiln.h */

/* The alias letter of one argument or return ("Tensor(a!) self" -> 'a',
 * *write true), or 0 when it has none. */
static char annotation(const char *s, const char *end, bool *write) {
  *write = false;
  const char *p = s;
  while (p < end && *p == ' ') p++;
  if (end - p < 7 || strncmp(p, "Tensor(", 7) != 0) return 0;
  p += 7;
  while (p < end && *p == ' ') p++;
  if (p >= end || *p < 'a' || *p > 'z') return 0;
  char letter = *p++;
  while (p < end && *p != ')') {
    if (*p == '!') *write = true;
    if (*p == '-') break; /* "a -> *": the letter names the argument's set */
    p++;
  }
  return letter;
}

static void parse_op(int op, alias_info *a) {
  memset(a->out_alias, -1, sizeof a->out_alias);
  a->writes = 0;
  const char *schema = op_schema_text(op);
  if (!schema) return;
  char letters[ALIAS_MAX_ARGS] = {0};
  const char *s = strchr(schema, '(');
  if (!s) return;
  int depth = 0, n = 0;
  const char *start = s + 1, *p = s + 1;
  for (; *p; p++) {
    if (*p == '(' || *p == '[') depth++;
    else if ((*p == ')' || *p == ']') && depth > 0) depth--;
    else if ((*p == ',' || *p == ')') && depth == 0) {
      const char *q = start;
      while (q < p && *q == ' ') q++;
      if (!(p - q == 1 && *q == '*') && n < ALIAS_MAX_ARGS) {
        bool w;
        letters[n] = annotation(q, p, &w);
        if (w) a->writes |= 1u << n;
        n++;
      }
      start = p + 1;
      if (*p == ')') break;
    }
  }
  const char *r = strstr(p, "->");
  if (!r) return;
  r += 2;
  while (*r == ' ') r++;
  bool tuple = *r == '(';
  if (tuple) r++;
  for (int k = 0; k < ALIAS_MAX_RETS && *r;) {
    const char *e = r;
    int d = 0;
    while (*e && !(d == 0 && (*e == ',' || (tuple && *e == ')')))) {
      if (*e == '(') d++;
      else if (*e == ')') d--;
      e++;
    }
    bool w;
    char letter = annotation(r, e, &w);
    for (int i = 0; letter && i < n; i++)
      if (letters[i] == letter) a->out_alias[k] = (int8_t)i;
    k++;
    if (*e != ',') break;
    r = e + 1;
  }
}

static void parse_all(void) {
  for (int op = 0; op < OP_INDEX_COUNT; op++) parse_op(op, &info_of[op]);
}

unsigned op_written_args(int op) {
  pthread_once(&parsed, parse_all);
  return op >= 0 && op < OP_INDEX_COUNT ? info_of[op].writes : 0;
}

bool op_writes_arg(int op, int i) {
  return i >= 0 && i < ALIAS_MAX_ARGS && (op_written_args(op) >> i & 1u);
}

int op_output_alias(int op, int out) {
  pthread_once(&parsed, parse_all);
  if (op < 0 || op >= OP_INDEX_COUNT || out < 0 || out >= ALIAS_MAX_RETS) return -1;
  return info_of[op].out_alias[out];
}
