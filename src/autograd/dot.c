/* src/autograd/dot.c: the backward graph as Graphviz DOT text. One DOT
 * node per backward node, edges to its next nodes numbered in the order
 * the engine would send gradients along them; the order is computed by
 * simulating the engine's dependency counting, running nothing
 * (Note [Order] in engine.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "autograd.h"

/* ---- a growing string ---------------------------------------------------------- */

typedef core_strbuf sbuf;
#define sb_put core_strbuf_append
#define sb_printf core_strbuf_printf
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static int utf8_len(const unsigned char *s) {
  int n = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
          : s[0] >= 0xe0 && s[0] <= 0xef ? 3
          : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                         : 0;
  if (!n) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;  /* overlong */
  if (n == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0;  /* surrogates */
  if (n == 4 && s[0] == 0xf0 && s[1] < 0x90) return 0;
  if (n == 4 && s[0] == 0xf4 && s[1] >= 0x90) return 0;
  return n;
}

/* Appends s as the inside of a DOT double-quoted string: quotes and
 * backslashes escaped (so a name cannot end the string or smuggle in a
 * Graphviz escape such as \l), newlines as \n, other control bytes and
 * invalid UTF-8 (which Graphviz rejects) as '?'. */
static void sb_escaped(sbuf *b, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    if (*u == '"' || *u == '\\') {
      char e[2] = {'\\', (char)*u};
      sb_put(b, e, 2);
      u++;
    } else if (*u == '\n') {
      sb_put(b, "\\n", 2);
      u++;
    } else if (*u < 0x20 || *u == 0x7f) {
      sb_put(b, "?", 1);
      u++;
    } else if (*u < 0x80) {
      sb_put(b, (const char *)u, 1);
      u++;
    } else {
      int n = utf8_len(u);
      sb_put(b, n ? (const char *)u : "?", n ? (size_t)n : 1);
      u += n ? n : 1;
    }
  }
}

/* ---- the graph: nodes indexed by a pointer map ------------------------------------ */

typedef struct dgraph {
  ag_node **nodes;     /* in DFS pre-order from the root */
  int n, cap;
  ag_node **keys;      /* open-addressing map node -> index */
  int *vals;
  size_t map_cap;
} dgraph;

static size_t ptr_hash(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static int dg_find(const dgraph *g, const ag_node *n) {
  for (size_t i = ptr_hash(n, g->map_cap);; i = (i + 1) & (g->map_cap - 1)) {
    if (!g->keys[i]) return -1;
    if (g->keys[i] == n) return g->vals[i];
  }
}

static void map_put(ag_node **keys, int *vals, size_t cap, ag_node *n, int v) {
  size_t i = ptr_hash(n, cap);
  while (keys[i]) i = (i + 1) & (cap - 1);
  keys[i] = n;
  vals[i] = v;
}

/* Adds n; returns its index, or -1 on OOM. */
static int dg_add(dgraph *g, ag_node *n) {
  if ((size_t)(g->n + 1) * 2 > g->map_cap) {
    size_t cap = g->map_cap ? g->map_cap * 2 : 64;
    ag_node **keys = core_calloc(cap, sizeof *keys);
    int *vals = core_calloc(cap, sizeof *vals);
    if (!keys || !vals) {
      core_free(keys);
      core_free(vals);
      return -1;
    }
    for (size_t i = 0; i < g->map_cap; i++)
      if (g->keys[i]) map_put(keys, vals, cap, g->keys[i], g->vals[i]);
    core_free(g->keys);
    core_free(g->vals);
    g->keys = keys;
    g->vals = vals;
    g->map_cap = cap;
  }
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 64;
    ag_node **v = core_realloc(g->nodes, (size_t)cap * sizeof *v);
    if (!v) return -1;
    g->nodes = v;
    g->cap = cap;
  }
  map_put(g->keys, g->vals, g->map_cap, n, g->n);
  g->nodes[g->n] = n;
  return g->n++;
}

/* ---- simulating the engine ------------------------------------------------------- */

/* The engine's heap (engine.c), over node indices: same comparisons and
 * the same push order give the same pops, ties included. */
typedef struct dheap {
  int *v;
  int n;
  const dgraph *g;
} dheap;

static uint64_t seq_of(const dheap *h, int i) { return h->g->nodes[h->v[i]]->seq; }

static void dheap_push(dheap *h, int x) {
  int i = h->n++;
  h->v[i] = x;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (seq_of(h, p) >= seq_of(h, i)) break;
    int t = h->v[p];
    h->v[p] = h->v[i];
    h->v[i] = t;
    i = p;
  }
}

static int dheap_pop(dheap *h) {
  int top = h->v[0];
  h->v[0] = h->v[--h->n];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && seq_of(h, l) > seq_of(h, m)) m = l;
    if (r < h->n && seq_of(h, r) > seq_of(h, m)) m = r;
    if (m == i) break;
    int t = h->v[m];
    h->v[m] = h->v[i];
    h->v[i] = t;
    i = m;
  }
  return top;
}

typedef struct dorder {
  bool *needed;    /* per node: would a plain backward run it */
  int *step;       /* per node: 1-based execution step, 0 = does not run */
  int *edge_base;  /* per node: index of its first edge in edge_no */
  int *edge_no;    /* per edge: 1-based delivery order, 0 = none */
} dorder;

/* Collects every node reachable from root (iterative DFS, so deep graphs
 * cannot overflow the C stack) and decides which would run: AccumulateGrad
 * nodes, and nodes upstream of one (settled in post-order, as the engine's
 * discover does for a plain backward). */
static int collect(dgraph *g, ag_node *root, dorder *o) {
  int *stack = NULL, *pos = NULL, sp = 0, cap = 64, rc = KILN_ERR_NOMEM;
  bool *needed = NULL;
  stack = core_alloc((size_t)cap * sizeof *stack);
  pos = core_alloc((size_t)cap * sizeof *pos);
  if (!stack || !pos || dg_add(g, root) < 0) goto done;
  int ncap = 64; /* needed[] grows with the node list */
  needed = core_calloc((size_t)ncap, sizeof *needed);
  if (!needed) goto done;
  stack[sp] = 0;
  pos[sp++] = 0;
  while (sp) {
    int xi = stack[sp - 1];
    ag_node *x = g->nodes[xi];
    if (pos[sp - 1] < x->n_next) {
      ag_node *c = x->next[pos[sp - 1]++].node;
      if (!c || dg_find(g, c) >= 0) continue;
      int ci = dg_add(g, c);
      if (ci < 0) goto done;
      if (ci >= ncap) {
        bool *nn = core_realloc(needed, (size_t)ncap * 2 * sizeof *nn);
        if (!nn) goto done;
        memset(nn + ncap, 0, (size_t)ncap * sizeof *nn);
        needed = nn;
        ncap *= 2;
      }
      if (sp == cap) {
        int *s2 = core_realloc(stack, (size_t)cap * 2 * sizeof *s2);
        if (!s2) goto done;
        stack = s2;
        int *p2 = core_realloc(pos, (size_t)cap * 2 * sizeof *p2);
        if (!p2) goto done;
        pos = p2;
        cap *= 2;
      }
      stack[sp] = ci;
      pos[sp++] = 0;
    } else {
      sp--;
      bool need = x->op == AG_ACCUMULATE;
      for (int j = 0; j < x->n_next && !need; j++) {
        ag_node *c = x->next[j].node;
        need = c && needed[dg_find(g, c)];
      }
      needed[xi] = need;
    }
  }
  o->needed = needed;
  needed = NULL;
  rc = 0;
done:
  core_free(needed);
  core_free(stack);
  core_free(pos);
  return rc;
}

/* Runs the engine's schedule on paper: dependency counts over the edges
 * between running nodes, then a ready heap on seq. */
static int schedule(const dgraph *g, dorder *o) {
  int n = g->n, n_edges = 0, step = 0, edge = 0;
  int *deps = core_calloc((size_t)n, sizeof *deps);
  dheap h = {core_alloc((size_t)n * sizeof(int)), 0, g};
  o->step = core_calloc((size_t)n, sizeof *o->step);
  o->edge_base = core_calloc((size_t)n, sizeof *o->edge_base);
  if (!deps || !h.v || !o->step || !o->edge_base) goto oom;
  for (int i = 0; i < n; i++) {
    o->edge_base[i] = n_edges;
    n_edges += g->nodes[i]->n_next;
  }
  o->edge_no = core_calloc((size_t)(n_edges ? n_edges : 1), sizeof *o->edge_no);
  if (!o->edge_no) goto oom;
  for (int i = 0; i < n; i++) {
    if (!o->needed[i]) continue;
    ag_node *x = g->nodes[i];
    for (int j = 0; j < x->n_next; j++)
      if (x->next[j].node && o->needed[dg_find(g, x->next[j].node)])
        deps[dg_find(g, x->next[j].node)]++;
  }
  if (o->needed[0]) dheap_push(&h, 0);
  while (h.n) {
    int i = dheap_pop(&h);
    ag_node *x = g->nodes[i];
    o->step[i] = ++step;
    for (int j = 0; j < x->n_next; j++) {
      if (!x->next[j].node) continue;
      int c = dg_find(g, x->next[j].node);
      if (!o->needed[c]) continue;
      o->edge_no[o->edge_base[i] + j] = ++edge;
      if (--deps[c] == 0) dheap_push(&h, c);
    }
  }
  core_free(deps);
  core_free(h.v);
  return 0;
oom:
  core_free(deps);
  core_free(h.v);
  return KILN_ERR_NOMEM;
}

/* ---- output ------------------------------------------------------------------------ */

static void put_meta(sbuf *b, const op_meta *m) {
  char sh[200];
  core_shape_str(m->ndim, m->shape, sh, sizeof sh);
  sb_printf(b, "%s%s", kiln_dtype_name(m->dtype), sh);
}

static void put_node(sbuf *b, const dgraph *g, const dorder *o, int i) {
  ag_node *x = g->nodes[i];
  sb_printf(b, "  n%d [label=\"", i);
  if (x->op == AG_ACCUMULATE && x->leaf) {
    char d[200];
    const char *name = x->leaf->ag ? x->leaf->ag->name : NULL;
    sb_str(b, "AccumulateGrad\\n");
    if (name) {
      sb_escaped(b, name);
      sb_put(b, "\\n", 2);
    }
    sb_escaped(b, core_tensor_desc(x->leaf, d, sizeof d));
  } else {
    sb_escaped(b, x->name ? x->name : "(unnamed node)");
    for (int k = 0; k < x->n_inputs && k < 3; k++) {
      sb_put(b, k ? ", " : "\\n", 2);
      put_meta(b, &x->in_meta[k]);
    }
    if (x->n_inputs > 3) sb_printf(b, " (%d outputs)", x->n_inputs);
  }
  sb_put(b, "\"", 1);
  if (x->op == AG_ACCUMULATE) sb_printf(b, ", style=filled, fillcolor=lightblue");
  if (o->step[i]) sb_printf(b, ", xlabel=\"#%d\"", o->step[i]);
  else sb_printf(b, ", style=dashed, tooltip=\"does not run: no leaf is reached\"");
  sb_put(b, "];\n", 3);
}

/* Builds the text; *out is a new core_alloc'd string. */
static int build_dot(kiln_tensor *root, char **out) {
  char d[200];
  ag_edge e = {0};
  dgraph g = {0};
  dorder o = {0};
  sbuf b = {0};
  int rc;
  *out = NULL;
  if (!root) return core_error(KILN_ERR_INVALID, "autograd_dot: root is NULL");
  if (!root->requires_grad)
    return core_error(KILN_ERR_INVALID,
                      "autograd_dot: the root %s does not require grad, so it has no "
                      "backward graph",
                      core_tensor_desc(root, d, sizeof d));
  /* The edge a backward from root starts at: its grad_fn, or (a leaf) its
   * AccumulateGrad, made for the occasion and dropped below. */
  if ((rc = ag_gradient_edge(root, &e)) < 0) return rc;
  if ((rc = collect(&g, e.node, &o)) < 0 || (rc = schedule(&g, &o)) < 0) goto done;
  sb_printf(&b, "digraph autograd {\n  // %d backward nodes; node xlabels (#k) are execution steps, "
                "edge labels the order gradients flow along them\n",
            g.n);
  sb_str(&b, "  node [shape=box, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\"];\n");
  for (int i = 0; i < g.n; i++) put_node(&b, &g, &o, i);
  for (int i = 0; i < g.n; i++) {
    ag_node *x = g.nodes[i];
    for (int j = 0; j < x->n_next; j++) {
      if (!x->next[j].node) continue;
      int c = dg_find(&g, x->next[j].node), k = o.edge_no[o.edge_base[i] + j];
      if (k) sb_printf(&b, "  n%d -> n%d [label=\"%d\"];\n", i, c, k);
      else sb_printf(&b, "  n%d -> n%d [style=dashed];\n", i, c);
    }
  }
  sb_put(&b, "}\n", 2);
  if (b.oom) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  *out = b.p;
  b.p = NULL;
  rc = 0;
done:
  core_free(b.p);
  core_free(g.nodes);
  core_free(g.keys);
  core_free(g.vals);
  core_free(o.needed);
  core_free(o.step);
  core_free(o.edge_base);
  core_free(o.edge_no);
  ag_node_release(e.node);
  return rc;
}

char *kiln_autograd_dot(kiln_tensor *root) {
  char *s = NULL;
  build_dot(root, &s);
  return s;
}

kiln_status kiln_autograd_dot_write(kiln_tensor *root, const char *path) {
  char *s = NULL;
  int rc;
  if (!path) return core_error(KILN_ERR_INVALID, "autograd_dot_write: path is NULL");
  if ((rc = build_dot(root, &s)) < 0) return rc;
  FILE *f = fopen(path, "w");
  if (!f) {
    rc = core_error(KILN_ERR_IO, "autograd_dot_write: cannot open '%s': %s", path,
                    strerror(errno));
    core_free(s);
    return rc;
  }
  size_t n = strlen(s);
  bool ok = fwrite(s, 1, n, f) == n;
  ok = fclose(f) == 0 && ok;
  core_free(s);
  if (!ok)
    return core_error(KILN_ERR_IO, "autograd_dot_write: writing '%s' failed: %s", path,
                      strerror(errno));
  return KILN_OK;
}
