/* src/ops/schema.c: parses the schema strings of the op table (once, on
 * first use) into per-argument types, names and defaults, so that other
 * layers can ask "is argument i a Scalar?" (lazy: Scalars become device
 * data) or "what is its default?" (the IR parser) without keeping their
 * own lists. */
#include <pthread.h>
#include <string.h>

#include "op.h"

#define SCHEMA_MAX_ARGS 24 /* _transformer_encoder_layer_fwd has 20 */

typedef struct arg_info {
  char type[24];
  char name[24];
  char dflt[32];
  bool has_default;
} arg_info;

static arg_info args_of[OP_INDEX_COUNT][SCHEMA_MAX_ARGS];
static int n_args_of[OP_INDEX_COUNT];
static pthread_once_t parsed = PTHREAD_ONCE_INIT; /* Note [Threads] in kiln.h */

static void copy_trim(char *dst, size_t cap, const char *s, size_t n) {
  while (n && (*s == ' ')) s++, n--;
  while (n && s[n - 1] == ' ') n--;
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = 0;
}

/* "Tensor(a -> *) self=..." → type "Tensor", name "self", default "...". */
static void parse_arg(const char *s, size_t n, arg_info *a) {
  char buf[96], type[48] = {0};
  copy_trim(buf, sizeof buf, s, n);
  char *eq = strchr(buf, '=');
  a->has_default = eq != NULL;
  if (eq) {
    copy_trim(a->dflt, sizeof a->dflt, eq + 1, strlen(eq + 1));
    *eq = 0;
  }
  char *sp = strrchr(buf, ' ');
  if (!sp) return;
  copy_trim(a->name, sizeof a->name, sp + 1, strlen(sp + 1));
  *sp = 0;
  /* drop alias annotations "(a)", "(a -> *)", "(a!)" */
  size_t k = 0;
  int depth = 0;
  for (char *p = buf; *p && k < sizeof type - 1; p++) {
    if (*p == '(') depth++;
    else if (*p == ')') depth--;
    else if (depth == 0 && *p != ' ') type[k++] = *p;
  }
  copy_trim(a->type, sizeof a->type, type, k);
}

static void parse_all(void) {
  for (int op = 0; op < OP_INDEX_COUNT; op++) {
    const char *text = op_schema_text(op);
    if (!text) continue; /* no in-place form (Note [In-place variants]) */
    const char *s = strchr(text, '(');
    int depth = 0, n = 0;
    const char *start = s + 1;
    for (const char *p = s + 1; *p; p++) {
      if (*p == '(' || *p == '[') depth++;
      else if ((*p == ')' || *p == ']') && depth > 0) depth--;
      else if ((*p == ',' || *p == ')') && depth == 0) {
        size_t len = (size_t)(p - start);
        const char *q = start;
        while (len && *q == ' ') q++, len--;
        if (!(len == 1 && *q == '*') && n < SCHEMA_MAX_ARGS) parse_arg(q, len, &args_of[op][n++]);
        start = p + 1;
        if (*p == ')') break;
      }
    }
    n_args_of[op] = n;
  }
}

const char *op_arg_type(int op, int i) {
  pthread_once(&parsed, parse_all);
  return i >= 0 && i < n_args_of[op] ? args_of[op][i].type : "";
}

const char *op_arg_name(int op, int i) {
  pthread_once(&parsed, parse_all);
  return i >= 0 && i < n_args_of[op] ? args_of[op][i].name : "";
}

const char *op_arg_default(int op, int i) {
  if (!parsed) parse_all();
  return i >= 0 && i < n_args_of[op] && args_of[op][i].has_default ? args_of[op][i].dflt
                                                                    : NULL;
}

int op_schema_n_args(int op) {
  if (!parsed) parse_all();
  return n_args_of[op];
}

bool op_arg_is_scalar(int op, int i) {
  const char *t = op_arg_type(op, i);
  return strcmp(t, "Scalar") == 0 || strcmp(t, "Scalar?") == 0;
}
