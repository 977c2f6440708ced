/* src/nn/bind.c: binds a module graph's text (what torch.jit.script(m).graph
 * prints after inlining) into a plain function graph's text: the
 * `%self : __torch__.X` input and its prim::GetAttr chains are replaced by
 * graph inputs (tensors) and constants (numbers, bools, strings, lists,
 * None), prim::SetAttr on tensors becomes extra outputs (Note [Module
 * binding]).
 *
 * Note [Module binding]: a chain %a = GetAttr[name="layer1"](%self),
 * %b = GetAttr[name="0"](%a), %w = GetAttr[name="weight"](%b) names the
 * dotted path "layer1.0.weight". Module-typed links are dropped. A chain
 * ending in a tensor becomes a graph input (one per path, named after the
 * first GetAttr of it, after the model's own inputs, in order of first
 * use); later GetAttrs of the path are renamed to it. A chain ending in
 * anything else is replaced by a prim::Constant of the value the resolver
 * gives (the weights file's metadata). `= prim::SetAttr[name="x"](%m, %v)`
 * on a tensor path (in the top block only) makes later GetAttrs of the
 * path read %v, and %v is returned after the graph's own outputs so the
 * caller writes it back. The text works line by line on the format
 * PyTorch prints: one node per line, values `%name` with [A-Za-z0-9_.]. */
#include <string.h>

#include "bind.h"

/* ---- a small string -> string map (open addressing) ---------------------- */

typedef struct smap {
  char **keys, **vals;
  size_t cap, n;
} smap;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static void smap_free(smap *m) {
  for (size_t i = 0; i < m->cap; i++) {
    core_free(m->keys[i]);
    core_free(m->vals[i]);
  }
  core_free(m->keys);
  core_free(m->vals);
  memset(m, 0, sizeof *m);
}

static const char *smap_get(const smap *m, const char *k) {
  if (!m->cap) return NULL;
  for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i]) return NULL;
    if (strcmp(m->keys[i], k) == 0) return m->vals[i];
  }
}

static int smap_set(smap *m, const char *k, const char *v) {
  if ((m->n + 1) * 2 > m->cap) {
    smap old = *m;
    size_t cap = old.cap ? old.cap * 2 : 64;
    m->keys = core_calloc(cap, sizeof *m->keys);
    m->vals = core_calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
      core_free(m->keys);
      core_free(m->vals);
      *m = old;
      return KILN_ERR_NOMEM;
    }
    m->cap = cap;
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++)
      if (old.keys[i]) {
        size_t j = hash_str(old.keys[i]) & (cap - 1);
        while (m->keys[j]) j = (j + 1) & (cap - 1);
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
        m->n++;
      }
    core_free(old.keys);
    core_free(old.vals);
  }
  size_t i = hash_str(k) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], k) != 0) i = (i + 1) & (m->cap - 1);
  char *vv = core_strdup(v);
  if (!vv) return KILN_ERR_NOMEM;
  if (m->keys[i]) {
    core_free(m->vals[i]);
  } else {
    if (!(m->keys[i] = core_strdup(k))) {
      core_free(vv);
      return KILN_ERR_NOMEM;
    }
    m->n++;
  }
  m->vals[i] = vv;
  return 0;
}

/* ---- lists of strings ------------------------------------------------------ */

static int push(char ***arr, int *n, const char *s) {
  char **a = core_realloc(*arr, (size_t)(*n + 1) * sizeof *a);
  if (!a) return KILN_ERR_NOMEM;
  *arr = a;
  if (!(a[*n] = core_strdup(s))) return KILN_ERR_NOMEM;
  (*n)++;
  return 0;
}

void nn_bound_free(nn_bound *b) {
  if (!b) return;
  core_free(b->text);
  core_free(b->self_class);
  for (int i = 0; i < b->n_tensors; i++) core_free(b->tensor_paths[i]);
  for (int i = 0; i < b->n_sets; i++) core_free(b->set_paths[i]);
  core_free(b->tensor_paths);
  core_free(b->set_paths);
  memset(b, 0, sizeof *b);
}

/* ---- lexing helpers ------------------------------------------------------- */

static bool is_vchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

/* Reads "%name" at *p into buf; advances. False if none. */
static bool read_value(const char **p, const char *e, char *buf, size_t n) {
  const char *q = *p;
  if (q >= e || *q != '%') return false;
  q++;
  size_t k = 0;
  while (q < e && is_vchar(*q) && k + 1 < n) buf[k++] = *q++;
  buf[k] = 0;
  if (!k) return false;
  *p = q;
  return true;
}

static bool eat(const char **p, const char *e, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(e - *p) < n || memcmp(*p, lit, n) != 0) return false;
  *p += n;
  return true;
}

typedef struct line_getattr {
  char out[256], type[256], attr[128], obj[256], val[256];
  bool set;
} line_getattr;

/* Matches `%out : TYPE = prim::GetAttr[name="a"](%obj)` or
 * `= prim::SetAttr[name="a"](%obj, %val)` on [p, e) (after the indent). */
static bool match_attr(const char *p, const char *e, line_getattr *g) {
  memset(g, 0, sizeof *g);
  if (eat(&p, e, "= prim::SetAttr[name=\"")) {
    g->set = true;
  } else {
    if (!read_value(&p, e, g->out, sizeof g->out) || !eat(&p, e, " : ")) return false;
    const char *t = p;
    int depth = 0;
    while (p < e && !(depth == 0 && *p == ' ' && e - p >= 3 && p[1] == '=' && p[2] == ' ')) {
      depth += (*p == '(' || *p == '[') - (*p == ')' || *p == ']');
      p++;
    }
    if (p >= e || (size_t)(p - t) >= sizeof g->type) return false;
    memcpy(g->type, t, (size_t)(p - t));
    if (!eat(&p, e, " = prim::GetAttr[name=\"")) return false;
  }
  const char *a = p;
  while (p < e && *p != '"') p++;
  if (p >= e || (size_t)(p - a) >= sizeof g->attr) return false;
  memcpy(g->attr, a, (size_t)(p - a));
  if (!eat(&p, e, "\"](") || !read_value(&p, e, g->obj, sizeof g->obj)) return false;
  if (g->set && (!eat(&p, e, ", ") || !read_value(&p, e, g->val, sizeof g->val))) return false;
  return eat(&p, e, ")");
}

/* ---- the binder ------------------------------------------------------------ */

typedef struct binder {
  const char *name;
  nn_bind_resolve resolve;
  void *ud;
  smap modules;   /* module value name -> dotted path ("" for self) */
  smap renames;   /* value name -> value name it stands for */
  smap current;   /* tensor path -> value name holding it now */
  nn_bound *out;
  core_strbuf body;
  core_strbuf inputs;  /* the bound tensor inputs' header text */
  int line;
} binder;

static int berr(binder *b, int status, const char *fmt, const char *a, const char *c) {
  return core_error(status, "module graph '%s': line %d: %s%s%s%s", b->name, b->line,
                    fmt, a ? a : "", c ? " " : "", c ? c : "");
}

/* Appends [p, e) with every %value renamed and checks no module value is
 * used outside GetAttr/SetAttr. */
static int emit_renamed(binder *b, const char *p, const char *e) {
  bool in_str = false;
  while (p < e) {
    if (in_str) {
      const char *s = p;
      while (p < e && *p != '"') p += (*p == '\\' && p + 1 < e) ? 2 : 1;
      core_strbuf_append(&b->body, s, (size_t)(p - s));
      if (p < e) core_strbuf_append(&b->body, p++, 1);
      in_str = false;
      continue;
    }
    if (*p == '"') {
      in_str = true;
      core_strbuf_append(&b->body, p++, 1);
      continue;
    }
    if (*p == '#') break; /* a source comment: dropped */
    if (*p == ',' && (size_t)(e - p) >= 9 && memcmp(p, ", scope: ", 9) == 0)
      break; /* a traced graph's module scope: dropped */
    char name[256];
    const char *q = p;
    if (*p == '%' && read_value(&q, e, name, sizeof name)) {
      if (smap_get(&b->modules, name))
        return berr(b, KILN_ERR_UNSUPPORTED, "the module value %", name,
                    "is used by a node other than prim::GetAttr (not supported; was the graph "
                    "inlined? kiln-export inlines it)");
      const char *r = smap_get(&b->renames, name);
      core_strbuf_printf(&b->body, "%%%s", r ? r : name);
      p = q;
      continue;
    }
    core_strbuf_append(&b->body, p++, 1);
  }
  /* trailing spaces left by a dropped comment */
  while (b->body.n && b->body.p[b->body.n - 1] == ' ') b->body.p[--b->body.n] = 0;
  return 0;
}

static int bind_getattr(binder *b, const line_getattr *g, const char *indent, size_t n_indent) {
  const char *base = smap_get(&b->modules, g->obj);
  if (!base)
    return berr(b, KILN_ERR_UNSUPPORTED, "prim::GetAttr on %", g->obj,
                "which is not the module or one of its submodules");
  char path[1024];
  int k = snprintf(path, sizeof path, "%s%s%s", base, *base ? "." : "", g->attr);
  if (k < 0 || (size_t)k >= sizeof path) return berr(b, KILN_ERR_INVALID, "path too long", NULL, NULL);
  if (strncmp(g->type, "__torch__.", 10) == 0) return smap_set(&b->modules, g->out, path);
  nn_bind_attr a;
  memset(&a, 0, sizeof a);
  int rc = b->resolve(b->ud, path, g->type, &a);
  if (rc < 0) return rc;
  if (a.kind == NN_BIND_TENSOR_LIST) {
    core_strbuf_append(&b->body, indent, n_indent);
    core_strbuf_printf(&b->body, "%%%s : Tensor[] = prim::ListConstruct(", g->out);
    for (int j = 0; j < a.n_list; j++) {
      const char *cur = smap_get(&b->current, a.list[j]);
      char name[300];
      snprintf(name, sizeof name, "%s.kl%d", g->out, j);
      if (!cur) {
        if ((rc = smap_set(&b->current, a.list[j], name)) < 0) return rc;
        if ((rc = push(&b->out->tensor_paths, &b->out->n_tensors, a.list[j])) < 0) return rc;
        core_strbuf_printf(&b->inputs, ",\n      %%%s : Tensor", name);
        cur = name;
      }
      core_strbuf_printf(&b->body, "%s%%%s", j ? ", " : "", cur);
    }
    core_strbuf_append(&b->body, ")\n", 2);
    return 0;
  }
  if (a.kind == NN_BIND_TENSOR) {
    const char *cur = smap_get(&b->current, path);
    if (cur) return smap_set(&b->renames, g->out, cur);
    if ((rc = smap_set(&b->current, path, g->out)) < 0) return rc;
    if ((rc = push(&b->out->tensor_paths, &b->out->n_tensors, path)) < 0) return rc;
    core_strbuf_printf(&b->inputs, ",\n      %%%s : Tensor", g->out);
    return 0;
  }
  core_strbuf_append(&b->body, indent, n_indent);
  core_strbuf_printf(&b->body, "%%%s : %s = %s\n", g->out, a.type, a.text);
  return 0;
}

static int bind_setattr(binder *b, const line_getattr *g, size_t n_indent) {
  const char *base = smap_get(&b->modules, g->obj);
  if (!base)
    return berr(b, KILN_ERR_UNSUPPORTED, "prim::SetAttr on %", g->obj,
                "which is not the module or one of its submodules");
  char path[1024];
  snprintf(path, sizeof path, "%s%s%s", base, *base ? "." : "", g->attr);
  nn_bind_attr a;
  memset(&a, 0, sizeof a);
  int rc = b->resolve(b->ud, path, "Tensor", &a);
  if (rc < 0) return rc;
  if (a.kind != NN_BIND_TENSOR)
    return berr(b, KILN_ERR_UNSUPPORTED, "prim::SetAttr of the non-tensor attribute ", path,
                "(only tensors can be written back)");
  if (n_indent > 3) /* the top block: 2 spaces, and 1 for the empty output list */
    return berr(b, KILN_ERR_UNSUPPORTED, "prim::SetAttr of ", path,
                "inside an If or Loop block (only the top block's are supported)");
  const char *r = smap_get(&b->renames, g->val);
  const char *v = r ? r : g->val;
  if ((rc = smap_set(&b->current, path, v)) < 0) return rc;
  for (int i = 0; i < b->out->n_sets; i++)
    if (strcmp(b->out->set_paths[i], path) == 0) return 0;
  return push(&b->out->set_paths, &b->out->n_sets, path);
}

/* The header `graph(%a : T, %b : U):`; sets *p past it. */
static int bind_header(binder *b, const char **pp, const char *e, core_strbuf *head) {
  const char *p = *pp;
  if (!eat(&p, e, "graph(")) return berr(b, KILN_ERR_FORMAT, "expected graph(", NULL, NULL);
  core_strbuf_append(head, "graph(", 6);
  bool first = true;
  for (;;) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r')) p++;
    if (p < e && *p == ')') break;
    char name[256];
    if (!read_value(&p, e, name, sizeof name) || !eat(&p, e, " : "))
      return berr(b, KILN_ERR_FORMAT, "expected an input `%name : Type` in graph(...)", NULL, NULL);
    const char *t = p;
    int depth = 0;
    while (p < e && !(depth == 0 && (*p == ',' || *p == ')'))) {
      depth += (*p == '(' || *p == '[') - (*p == ')' || *p == ']');
      if (*p == '\n') b->line++;
      p++;
    }
    if (p >= e) return berr(b, KILN_ERR_FORMAT, "unterminated graph(...)", NULL, NULL);
    size_t tn = (size_t)(p - t);
    if (tn > 10 && strncmp(t, "__torch__.", 10) == 0) {
      if (b->out->self_class)
        return berr(b, KILN_ERR_UNSUPPORTED, "a second module input %", name,
                    "(only %self is bound)");
      if (!(b->out->self_class = core_alloc(tn + 1))) return KILN_ERR_NOMEM;
      memcpy(b->out->self_class, t, tn);
      b->out->self_class[tn] = 0;
      int rc = smap_set(&b->modules, name, "");
      if (rc < 0) return rc;
    } else {
      core_strbuf_printf(head, "%s%%%s : %.*s", first ? "" : ",\n      ", name, (int)tn, t);
      first = false;
      b->out->n_inputs++;
    }
    if (*p == ',') p++;
  }
  p++;
  if (!eat(&p, e, ":")) return berr(b, KILN_ERR_FORMAT, "expected ':' after graph(...)", NULL, NULL);
  while (p < e && *p != '\n') p++;
  if (p < e) p++;
  b->line++;
  *pp = p;
  (void)first;
  return 0;
}

int nn_bind_module_graph(const char *text, size_t len, const char *name, nn_bind_resolve resolve,
                         void *ud, nn_bound *out) {
  binder b;
  memset(&b, 0, sizeof b);
  memset(out, 0, sizeof *out);
  b.name = name ? name : "(text)";
  b.resolve = resolve;
  b.ud = ud;
  b.out = out;
  b.line = 1;
  core_strbuf head = {0};
  const char *p = text, *e = text + len;
  int rc = bind_header(&b, &p, e, &head);
  bool returned = false;
  while (rc == 0 && p < e) {
    const char *ln = p, *le = memchr(p, '\n', (size_t)(e - p));
    if (!le) le = e;
    p = le < e ? le + 1 : e;
    b.line++;
    const char *q = ln;
    while (q < le && *q == ' ') q++;
    size_t n_indent = (size_t)(q - ln);
    const char *end = le;
    if (end > q && end[-1] == '\r') end--;
    if (q == end || *q == '#') continue; /* blank, comment, manifest */
    line_getattr g;
    if (match_attr(q, end, &g)) {
      rc = g.set ? bind_setattr(&b, &g, n_indent) : bind_getattr(&b, &g, ln, n_indent);
      continue;
    }
    if (n_indent == 2 && eat(&q, end, "return (")) {
      /* the top block's return: the model's outputs, then written-back tensors */
      core_strbuf_append(&b.body, "  return (", 10);
      const char *close = end;
      while (close > q && close[-1] != ')') close--;
      if (close <= q && !(close == q && *q == ')')) {
        rc = berr(&b, KILN_ERR_FORMAT, "bad return line", NULL, NULL);
        break;
      }
      const char *inner_end = close - 1;
      if ((rc = emit_renamed(&b, q, inner_end)) < 0) break;
      for (const char *s = q; s < inner_end; s++) out->n_outputs += *s == '%';
      for (int i = 0; i < out->n_sets; i++)
        core_strbuf_printf(&b.body, "%s%%%s", out->n_outputs || i ? ", " : "",
                           smap_get(&b.current, out->set_paths[i]));
      core_strbuf_append(&b.body, ")\n", 2);
      returned = true;
      continue;
    }
    core_strbuf_append(&b.body, ln, n_indent);
    if ((rc = emit_renamed(&b, q, end)) < 0) break;
    core_strbuf_append(&b.body, "\n", 1);
  }
  if (rc == 0 && !returned) rc = berr(&b, KILN_ERR_FORMAT, "no top-level return", NULL, NULL);
  if (rc == 0) {
    if (b.inputs.n) {
      /* no user input before the first bound one: drop its ",\n      " */
      const char *ins = b.inputs.p;
      if (!out->n_inputs) ins += 8;
      core_strbuf_append(&head, ins, strlen(ins));
    }
    core_strbuf_append(&head, "):\n", 3);
    if (b.body.p) core_strbuf_append(&head, b.body.p, b.body.n);
    if (head.oom || b.body.oom || b.inputs.oom) rc = core_error(KILN_ERR_NOMEM, "bind: out of memory");
  }
  if (rc == 0) {
    out->text = head.p;
    head.p = NULL;
  }
  core_free(head.p);
  core_free(b.body.p);
  core_free(b.inputs.p);
  smap_free(&b.modules);
  smap_free(&b.renames);
  smap_free(&b.current);
  if (rc < 0) nn_bound_free(out);
  return rc;
}
