/* tests/exec/randgraph.c: the random-program generator and the three-way
 * (eager / jit / lazy) differential oracle of randgraph.h.
 *
 * Generation runs eagerly: each candidate op (from a template list:
 * unary and binary elementwise ops, scalar-argument ops, reductions,
 * matmul, view and shape ops, cat, in-place ops) is tried with op_call on
 * the eager values; one that fails is dropped (so the program stays well
 * typed), except that now and then it is kept as the last step, making an
 * ill-typed program every mode must refuse. New graph inputs are made
 * along the way where an operand should broadcast against or fit another
 * value (random dtypes f32/f64/int64/bool, shapes with 0- and 1-sized
 * dims, random requires_grad).
 *
 * Values are quarter-integers, so sums, products and GEMMs of them are
 * exact in every mode; a value stays "exact" while only exact ops made it,
 * and discontinuous ops (compare, sign, floor, where's condition) take
 * only exact values, so rounding differences of fusion or GEMM cannot
 * flip a comparison into a false mismatch. In-place ops write only to
 * values that share no storage with a graph input. */
#include "exec/randgraph.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kiln.h"
#include "ops/op.h"

#define RG_MAX_VALS 64
#define RG_MAX_ARGS 6
#define RG_MAX_LIST 4
#define RG_MAX_OUTS 3

typedef struct rg_arg {
  char k; /* t tensor value, i int, f float, b bool, n None, l int[], L Tensor[] */
  int64_t i;
  double f;
  int n;
  int64_t v[RG_MAX_LIST];
} rg_arg;

typedef struct rg_step {
  const char *name;
  int n_args;
  rg_arg a[RG_MAX_ARGS];
  int out; /* value index of the result */
} rg_step;

typedef struct rg_prog {
  kiln_tensor *val[RG_MAX_VALS]; /* eager values */
  bool input[RG_MAX_VALS], exact[RG_MAX_VALS], rg[RG_MAX_VALS];
  int parent[RG_MAX_VALS]; /* a step's first tensor argument, or -1 */
  int n_vals;
  rg_step step[RG_MAX_VALS];
  int n_steps;
  bool fails; /* the last step is one eager refused */
  char err[256]; /* eager's message then */
  int out[RG_MAX_OUTS], n_out;
} rg_prog;

/* ---- the random stream ---------------------------------------------------- */
static unsigned rnd(rg_rand *r, unsigned n) {
  if (n <= 1) return 0;
  if (r->data) return r->at < r->size ? r->data[r->at++] % n : 0;
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (unsigned)((z ^ (z >> 31)) % n);
}

static kiln_dtype rand_dtype(rg_rand *r) {
  static const kiln_dtype dts[] = {KILN_DTYPE_F32, KILN_DTYPE_F32, KILN_DTYPE_F32, KILN_DTYPE_F64,
                                   KILN_DTYPE_I64, KILN_DTYPE_BOOL};
  return dts[rnd(r, 6)];
}

static int64_t rand_size(rg_rand *r) {
  unsigned k = rnd(r, 12);
  return k == 0 ? 0 : k < 4 ? 1 : (int64_t)(k % 3) + 2; /* 0, 1 or 2..4 */
}

/* A new graph input of shape/dtype; NULL if out of memory. */
static int new_input(rg_prog *p, rg_rand *r, int nd, const int64_t *shape, kiln_dtype dt) {
  if (p->n_vals >= RG_MAX_VALS) return -1;
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  double *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
  if (!buf) return -1;
  for (int64_t i = 0; i < n; i++)
    buf[i] = dt == KILN_DTYPE_BOOL ? rnd(r, 2)
             : dt == KILN_DTYPE_I64 ? (double)rnd(r, 7) - 3
                                    : ((double)rnd(r, 17) - 8) / 4;
  kiln_tensor *f = kiln_from_data(buf, nd, shape, KILN_DTYPE_F64);
  free(buf);
  kiln_tensor *t = f ? kiln_to_dtype(f, dt) : NULL;
  if (!t) return -1;
  if (t == f) t = kiln_clone(f);
  bool grad = (dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F64) && rnd(r, 2);
  if (!t || (grad && kiln_set_requires_grad(t, true) < 0)) return -1;
  int v = p->n_vals++;
  p->val[v] = t;
  p->input[v] = true;
  p->parent[v] = -1;
  p->exact[v] = true;
  p->rg[v] = grad;
  return v;
}

/* An input shaped to broadcast against value v's shape. */
static int broadcast_input(rg_prog *p, rg_rand *r, int v) {
  int nd = kiln_tensor_ndim(p->val[v]);
  const int64_t *s = kiln_tensor_shape(p->val[v]);
  int drop = (int)rnd(r, (unsigned)nd + 1), bnd = nd - drop;
  int64_t shape[KILN_MAX_DIMS];
  for (int d = 0; d < bnd; d++) shape[d] = rnd(r, 3) == 0 ? 1 : s[drop + d];
  if (rnd(r, 8) == 0 && bnd < 4) { /* a broadcast the other way: [1] -> [k, ...] */
    memmove(shape + 1, shape, (size_t)bnd * sizeof *shape);
    shape[0] = rand_size(r);
    bnd++;
  }
  return new_input(p, r, bnd, shape, rnd(r, 3) ? kiln_tensor_dtype(p->val[v]) : rand_dtype(r));
}

static int pick(rg_prog *p, rg_rand *r) {
  if (rnd(r, 2)) return p->n_vals - 1 - (int)rnd(r, p->n_vals < 3 ? (unsigned)p->n_vals : 3);
  return (int)rnd(r, (unsigned)p->n_vals);
}

static int pick_exact(rg_prog *p, rg_rand *r) {
  for (int tries = 0; tries < 4; tries++) {
    int v = pick(p, r);
    if (p->exact[v]) return v;
  }
  return -1;
}

/* May v be written in place? Not if it shares storage with a graph input.
 * Other views of its base (made before or after it) are fine: every mode
 * shows them the write (Note [Lazy views] in src/lazy/views.c). */
static bool writable(const rg_prog *p, int v) {
  if (p->input[v]) return false;
  for (int i = 0; i < p->n_vals; i++) {
    if (i == v || p->val[i] == p->val[v] || p->val[i]->storage != p->val[v]->storage) continue;
    if (p->input[i]) return false;
    /* a view with history: eager rebases it with CopySlices (Note
     * [CopySlices]); lazy recording refuses it (src/ops/inplace.c) */
    if (kiln_requires_grad(p->val[v])) return false;
  }
  return true;
}

#define A_T(v) ((rg_arg){.k = 't', .i = (v)})
#define A_I(x) ((rg_arg){.k = 'i', .i = (x)})
#define A_F(x) ((rg_arg){.k = 'f', .f = (x)})
#define A_B(x) ((rg_arg){.k = 'b', .i = (x)})
#define A_N ((rg_arg){.k = 'n'})

static rg_arg a_list(int n, const int64_t *v, char k) {
  rg_arg a = {.k = k, .n = n};
  memcpy(a.v, v, (size_t)n * sizeof *v);
  return a;
}

static int rand_dim(rg_rand *r, int nd) { /* -nd-1..nd: sometimes out of range */
  return (int)rnd(r, (unsigned)(2 * nd + 2)) - nd - 1;
}

/* Fills s with a random op on the current values; exact = does the result
 * stay exact. false when no candidate could be made. */
static bool make_step(rg_prog *p, rg_rand *r, rg_step *s, bool *exact) {
  static const char *const unary[] = {"neg", "abs", "relu", "square", "exp", "tanh", "sigmoid",
                                      "log", "sqrt", "sin", "reciprocal", "silu", "erf", "cos",
                                      "sign", "floor", "logical_not", "isnan"};
  static const char *const binary[] = {"add", "sub", "mul", "maximum", "minimum", "div",
                                       "pow", "eq", "lt", "gt", "ne"};
  int a = pick(p, r), nd = kiln_tensor_ndim(p->val[a]);
  const int64_t *sh = kiln_tensor_shape(p->val[a]);
  *exact = p->exact[a];
  s->a[0] = A_T(a);
  switch (rnd(r, 9)) {
  case 0: { /* unary */
    int k = (int)rnd(r, 18);
    if (k >= 14 && !p->exact[a]) return false;
    s->name = unary[k];
    s->n_args = 1;
    *exact = *exact && (k < 4 || k >= 14);
    return true;
  }
  case 1: { /* binary, the other operand broadcasting */
    int k = (int)rnd(r, 11);
    int b = rnd(r, 3) ? broadcast_input(p, r, a) : pick(p, r);
    if (b < 0 || (k >= 7 && !(p->exact[a] && p->exact[b]))) return false;
    if (rnd(r, 2)) { int t = a; a = b; b = t; }
    s->name = binary[k];
    s->a[0] = A_T(a);
    s->a[1] = A_T(b);
    s->n_args = 2;
    if (k <= 1) s->a[s->n_args++] = rnd(r, 3) ? A_I(1 + rnd(r, 2)) : A_F(0.5);
    *exact = p->exact[a] && p->exact[b] && k <= 4;
    return true;
  }
  case 2: { /* where */
    int c = pick_exact(p, r);
    if (c < 0 || kiln_tensor_dtype(p->val[c]) != KILN_DTYPE_BOOL) c = broadcast_input(p, r, a);
    int b = rnd(r, 2) ? broadcast_input(p, r, a) : pick(p, r);
    if (c < 0 || b < 0) return false;
    s->name = "where";
    s->a[0] = A_T(c);
    s->a[1] = A_T(a);
    s->a[2] = A_T(b);
    s->n_args = 3;
    *exact = p->exact[a] && p->exact[b];
    return true;
  }
  case 3: /* scalar arguments */
    if (rnd(r, 2)) {
      s->name = "leaky_relu";
      s->a[1] = A_F(0.25);
      s->n_args = 2;
    } else {
      s->name = "clamp";
      s->a[1] = rnd(r, 3) ? A_F(-0.5 * rnd(r, 4)) : A_N;
      s->a[2] = rnd(r, 3) ? A_F(0.5 * rnd(r, 4)) : A_N;
      s->n_args = 3;
    }
    return true;
  case 4: { /* reductions */
    int64_t dims[2] = {rand_dim(r, nd), rand_dim(r, nd)};
    unsigned k = rnd(r, 6);
    s->name = k <= 1 ? "sum" : k == 2 ? "mean" : k == 3 ? "amax" : k == 4 ? "softmax" : "log_softmax";
    if (k == 0) {
      s->a[1] = A_N;
      s->n_args = 2;
    } else if (k <= 3) {
      s->a[1] = a_list(1 + (int)rnd(r, 2), dims, 'l');
      s->a[2] = A_B(rnd(r, 2));
      s->n_args = 3;
      if (k != 3) s->a[s->n_args++] = A_N;
    } else {
      s->a[1] = A_I(dims[0]);
      s->a[2] = A_N;
      s->n_args = 3;
    }
    *exact = *exact && (k <= 1 || k == 3);
    return true;
  }
  case 5: { /* matmul / mm with a fitting operand */
    int64_t shape[4] = {0};
    int bnd = 0;
    if (nd >= 1) {
      unsigned form = rnd(r, 3);
      if (form == 0) shape[bnd++] = sh[nd - 1];
      else {
        if (form == 2 && nd < 3) shape[bnd++] = rand_size(r) > 1 ? 2 : 1;
        shape[bnd++] = sh[nd - 1];
        shape[bnd++] = rand_size(r);
      }
    }
    int b = new_input(p, r, bnd, shape, rnd(r, 4) ? kiln_tensor_dtype(p->val[a]) : rand_dtype(r));
    if (b < 0) return false;
    s->name = nd == 2 && bnd == 2 && rnd(r, 2) ? "mm" : "matmul";
    s->a[1] = A_T(b);
    s->n_args = 2;
    *exact = p->exact[a];
    return true;
  }
  case 6: { /* views and shape ops */
    int64_t l[4];
    int64_t numel = kiln_tensor_numel(p->val[a]);
    switch (rnd(r, 12)) {
    case 0:
    case 1:
      s->name = rnd(r, 2) ? "reshape" : "view";
      if (rnd(r, 2) || numel < 2) l[0] = -1, s->a[1] = a_list(1, l, 'l');
      else {
        int64_t f = numel % 2 == 0 ? 2 : numel % 3 == 0 ? 3 : 1;
        l[0] = f, l[1] = -1, l[2] = 1;
        s->a[1] = a_list(2 + (int)rnd(r, 2), l, 'l');
      }
      s->n_args = 2;
      return true;
    case 2:
      s->name = "transpose";
      s->a[1] = A_I(rand_dim(r, nd));
      s->a[2] = A_I(rand_dim(r, nd));
      s->n_args = 3;
      return true;
    case 3:
      s->name = "permute";
      for (int d = 0; d < nd; d++) l[d] = nd - 1 - d;
      if (nd >= 2 && rnd(r, 2)) { int64_t t = l[0]; l[0] = l[1]; l[1] = t; }
      s->a[1] = a_list(nd, l, 'l');
      s->n_args = 2;
      return true;
    case 4:
      s->name = "unsqueeze";
      s->a[1] = A_I((int)rnd(r, (unsigned)(2 * nd + 2)) - nd - 1);
      s->n_args = 2;
      return true;
    case 5:
      s->name = "squeeze";
      s->a[1] = A_I(rand_dim(r, nd));
      s->n_args = 2;
      return true;
    case 6:
      s->name = "expand";
      for (int d = 0; d < nd; d++) l[d] = sh[d] == 1 ? 1 + (int64_t)rnd(r, 3) : rnd(r, 2) ? -1 : sh[d];
      s->a[1] = a_list(nd, l, 'l');
      s->a[2] = A_B(0);
      s->n_args = 3;
      return true;
    case 7: {
      int d = nd ? (int)rnd(r, (unsigned)nd) : 0;
      int64_t size = nd ? sh[d] : 0, start = size ? rnd(r, (unsigned)size) : 0;
      s->name = "narrow";
      s->a[1] = A_I(d);
      s->a[2] = A_I(start);
      s->a[3] = A_I(size - start ? (int64_t)rnd(r, (unsigned)(size - start + 1)) : 0);
      s->n_args = 4;
      return true;
    }
    case 8: {
      int d = nd ? (int)rnd(r, (unsigned)nd) : 0;
      s->name = "select";
      s->a[1] = A_I(d);
      s->a[2] = A_I(nd && sh[d] ? (int64_t)rnd(r, (unsigned)sh[d] * 2) - sh[d] : 0);
      s->n_args = 3;
      return true;
    }
    case 9:
      s->name = nd <= 2 && rnd(r, 2) ? "t" : "flatten";
      s->n_args = 1;
      if (s->name[0] == 'f') s->a[s->n_args++] = A_I(0), s->a[s->n_args++] = A_I(-1);
      return true;
    case 10: {
      static const int codes[] = {4, 6, 7, 11};
      int c = codes[rnd(r, 4)];
      if (c == 11 && !p->exact[a]) return false;
      s->name = rnd(r, 3) ? "to" : "clone";
      s->a[1] = s->name[0] == 't' ? A_I(c) : A_N;
      s->n_args = 2;
      if (s->name[0] == 't') s->a[2] = A_B(0), s->a[3] = A_B(0), s->a[4] = A_N, s->n_args = 5;
      *exact = *exact && (c != 4 || s->name[0] == 'c');
      return true;
    }
    default: { /* cat */
      int b = rnd(r, 2) ? a : new_input(p, r, nd, sh, kiln_tensor_dtype(p->val[a]));
      if (b < 0) return false;
      l[0] = a, l[1] = b;
      s->name = "cat";
      s->a[0] = a_list(2, l, 'L');
      s->a[1] = A_I(nd ? rand_dim(r, nd) : 0);
      s->n_args = 2;
      *exact = p->exact[a] && p->exact[b];
      return true;
    }
    }
  }
  default: { /* in-place, on a value that is not (a view of) a graph input */
    static const char *const ip[] = {"add_", "mul_", "relu_", "neg_", "clamp_", "zero_", "sigmoid_"};
    if (!writable(p, a)) return false;
    int k = (int)rnd(r, 7);
    s->name = ip[k];
    s->n_args = 1;
    if (k <= 1) {
      int b = rnd(r, 2) ? broadcast_input(p, r, a) : pick(p, r);
      if (b < 0) return false;
      s->a[s->n_args++] = A_T(b);
      if (k == 0) s->a[s->n_args++] = A_I(1);
      *exact = *exact && p->exact[b];
    }
    if (k == 4) s->a[1] = A_F(-1), s->a[2] = A_F(1), s->n_args = 3;
    *exact = *exact && k != 6;
    return true;
  }
  }
}

/* ---- running a step ------------------------------------------------------ */
/* op_call of s on the tensors vals; NULL with the error set on failure. */
static kiln_tensor *run_step(const rg_step *s, kiln_tensor *const *vals) {
  char name[64];
  snprintf(name, sizeof name, "aten::%s", s->name);
  int op = op_find_arity(name, s->n_args);
  if (op < 0) op = op_find(name);
  if (op < 0) {
    core_error(KILN_ERR_INVALID, "randgraph: no op %s/%d", name, s->n_args);
    return NULL;
  }
  op_val args[RG_MAX_ARGS];
  kiln_tensor *lists[RG_MAX_ARGS][RG_MAX_LIST];
  for (int i = 0; i < s->n_args; i++) {
    const rg_arg *a = &s->a[i];
    switch (a->k) {
    case 't': args[i] = OPV_T(vals[a->i]); break;
    case 'i': args[i] = OPV_I(a->i); break;
    case 'f': args[i] = OPV_F(a->f); break;
    case 'b': args[i] = OPV_B(a->i != 0); break;
    case 'l': args[i] = OPV_INTS(a->v, a->n); break;
    case 'L':
      for (int j = 0; j < a->n; j++) lists[i][j] = vals[a->v[j]];
      args[i] = OPV_TS(lists[i], a->n);
      break;
    default: args[i] = OPV_NONE; break;
    }
  }
  kiln_tensor *out = NULL;
  int n = op_call(op, args, s->n_args, &out, 1);
  return n == 1 ? out : NULL;
}

/* ---- the graph text ------------------------------------------------------ */
typedef struct rg_buf {
  char *p;
  size_t len, cap;
  int consts;
} rg_buf;

static void put(rg_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = (b->cap + (size_t)n + 1) * 2;
    char *q = realloc(b->p, cap);
    if (!q) return;
    b->p = q;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* Emits the constants of argument a; returns its value number. */
static int emit_arg(rg_buf *b, const rg_arg *a) {
  int c = b->consts++;
  switch (a->k) {
  case 't': b->consts--; return (int)a->i;
  case 'i': put(b, "  %%c%d : int = prim::Constant[value=%lld]()\n", c, (long long)a->i); break;
  case 'b': put(b, "  %%c%d : bool = prim::Constant[value=%d]()\n", c, (int)a->i); break;
  case 'f': { /* with a point, as TorchScript prints it: "-0" would parse as the int 0 */
    char num[40];
    snprintf(num, sizeof num, "%.17g", a->f);
    put(b, "  %%c%d : float = prim::Constant[value=%s%s]()\n", c, num,
        strpbrk(num, ".eni") ? "" : ".");
    break;
  }
  case 'n': put(b, "  %%c%d : NoneType = prim::Constant()\n", c); break;
  case 'l':
  case 'L': {
    int first = b->consts;
    if (a->k == 'l')
      for (int j = 0; j < a->n; j++)
        put(b, "  %%c%d : int = prim::Constant[value=%lld]()\n", b->consts++, (long long)a->v[j]);
    put(b, "  %%c%d : %s = prim::ListConstruct(", c, a->k == 'l' ? "int[]" : "Tensor[]");
    for (int j = 0; j < a->n; j++)
      put(b, a->k == 'l' ? "%s%%c%d" : "%s%%v%d", j ? ", " : "", a->k == 'l' ? first + j : (int)a->v[j]);
    put(b, ")\n");
    break;
  }
  }
  return -1 - c; /* a constant: %c<c> */
}

static char *graph_text(const rg_prog *p) {
  rg_buf b = {0};
  put(&b, "graph(");
  int k = 0;
  for (int v = 0; v < p->n_vals; v++)
    if (p->input[v]) put(&b, "%s%%v%d : Tensor", k++ ? ", " : "", v);
  put(&b, "):\n");
  for (int i = 0; i < p->n_steps; i++) {
    const rg_step *s = &p->step[i];
    int ref[RG_MAX_ARGS];
    for (int j = 0; j < s->n_args; j++) ref[j] = emit_arg(&b, &s->a[j]);
    put(&b, "  %%v%d : Tensor = aten::%s(", s->out, s->name);
    for (int j = 0; j < s->n_args; j++)
      put(&b, ref[j] >= 0 ? "%s%%v%d" : "%s%%c%d", j ? ", " : "", ref[j] >= 0 ? ref[j] : -1 - ref[j]);
    put(&b, ")\n");
  }
  put(&b, "  return (");
  for (int i = 0; i < p->n_out; i++) put(&b, "%s%%v%d", i ? ", " : "", p->out[i]);
  put(&b, ")\n");
  return b.p;
}

/* ---- comparing ----------------------------------------------------------- */
/* Equal shape and dtype, values within tolerance (NULL and all-zero equal
 * when zero_ok: a gradient that did not flow). */
static bool same_tensor(kiln_tensor *e, kiln_tensor *x, bool zero_ok, char *why, size_t n) {
  if (!e || !x) {
    kiln_tensor *t = e ? e : x;
    if (!t || !zero_ok) {
      snprintf(why, n, "%s missing", e ? "result" : "reference");
      return !t;
    }
    double *buf = malloc((size_t)(kiln_tensor_numel(t) + 1) * sizeof *buf);
    bool zero = buf && kiln_tensor_copy_to(t, buf, KILN_DTYPE_F64) == 0;
    for (int64_t i = 0; zero && i < kiln_tensor_numel(t); i++) zero = buf[i] == 0;
    free(buf);
    if (!zero) snprintf(why, n, "one gradient missing, the other nonzero");
    return zero;
  }
  int nd = kiln_tensor_ndim(e);
  if (nd != kiln_tensor_ndim(x) ||
      memcmp(kiln_tensor_shape(e), kiln_tensor_shape(x), (size_t)nd * sizeof(int64_t)) ||
      kiln_tensor_dtype(e) != kiln_tensor_dtype(x)) {
    char s1[96], s2[96];
    snprintf(why, n, "shape/dtype %s %s vs %s %s", kiln_shape_str(e, s1, sizeof s1),
             kiln_dtype_name(kiln_tensor_dtype(e)), kiln_shape_str(x, s2, sizeof s2),
             kiln_dtype_name(kiln_tensor_dtype(x)));
    return false;
  }
  int64_t m = kiln_tensor_numel(e);
  double *a = malloc((size_t)(m + 1) * sizeof *a), *b = malloc((size_t)(m + 1) * sizeof *b);
  bool ok = a && b && kiln_tensor_copy_to(e, a, KILN_DTYPE_F64) == 0 &&
            kiln_tensor_copy_to(x, b, KILN_DTYPE_F64) == 0;
  if (!ok) snprintf(why, n, "copy failed: %s", kiln_last_error());
  kiln_dtype dt = kiln_tensor_dtype(e);
  double rtol = dt == KILN_DTYPE_F32 ? 2e-4 : dt == KILN_DTYPE_F64 ? 1e-9 : 0, scale = 1;
  for (int64_t i = 0; ok && i < m; i++)
    if (isfinite(a[i]) && fabs(a[i]) > scale) scale = fabs(a[i]);
  for (int64_t i = 0; ok && i < m; i++) {
    bool eq = isnan(a[i]) ? isnan(b[i]) : isinf(a[i]) ? a[i] == b[i]
                                                      : fabs(a[i] - b[i]) <= rtol * scale;
    if (!eq) {
      snprintf(why, n, "element %lld: %.9g vs %.9g", (long long)i, a[i], b[i]);
      ok = false;
    }
  }
  free(a);
  free(b);
  return ok;
}

/* ---- the oracle ---------------------------------------------------------- */
/* Sum of the outputs that require grad (floating); NULL when none does. */
static kiln_tensor *loss_of(kiln_tensor *const *outs, int n) {
  kiln_tensor *loss = NULL;
  for (int i = 0; i < n; i++) {
    if (!outs[i] || !kiln_requires_grad(outs[i])) continue;
    kiln_tensor *s = kiln_sum(outs[i], NULL, 0, false);
    loss = loss && s ? kiln_add(loss, s) : s;
    if (!loss) return NULL;
  }
  return loss;
}

#define FAIL(...) do { snprintf(msg, n, __VA_ARGS__); goto mismatch; } while (0)

/* One jit call on inputs (requires grad per p->rg when grad); compares
 * with the eager outputs (and gradients, when eg_grad). */
static int jit_call(rg_prog *p, kiln_function *f, bool grad, kiln_tensor **eg_grad,
                    bool eager_bwd, char *msg, size_t n) {
  kiln_value in[RG_MAX_VALS], out[RG_MAX_OUTS + 1];
  kiln_tensor *leaf[RG_MAX_VALS] = {0};
  int n_in = 0;
  char why[256];
  for (int v = 0; v < p->n_vals; v++) {
    if (!p->input[v]) continue;
    leaf[v] = kiln_detach(p->val[v]);
    if (!leaf[v] || (grad && p->rg[v] && kiln_set_requires_grad(leaf[v], true) < 0))
      FAIL("jit input: %s", kiln_last_error());
    in[n_in++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = leaf[v]};
  }
  int got = kiln_function_call(f, in, n_in, out, RG_MAX_OUTS + 1);
  if (got < 0) {
    if (p->fails) return RG_ALL_FAILED;
    FAIL("jit call failed where eager ran: %s", kiln_last_error());
  }
  if (p->fails) FAIL("jit ran a program eager refused (%s)", p->err);
  if (got != p->n_out) FAIL("jit gave %d outputs, expected %d", got, p->n_out);
  kiln_tensor *o[RG_MAX_OUTS];
  for (int i = 0; i < got; i++) {
    o[i] = out[i].kind == KILN_VALUE_TENSOR ? out[i].t : NULL;
    if (!same_tensor(p->val[p->out[i]], o[i], false, why, sizeof why))
      FAIL("jit output %d (%%v%d): %s", i, p->out[i], why);
    if (grad && o[i] && kiln_requires_grad(o[i]) != kiln_requires_grad(p->val[p->out[i]]))
      FAIL("jit output %d requires_grad %d, eager %d", i, kiln_requires_grad(o[i]),
           kiln_requires_grad(p->val[p->out[i]]));
  }
  if (!grad || !eager_bwd) return RG_AGREE;
  kiln_tensor *loss = loss_of(o, got);
  if (!loss || kiln_backward(loss, NULL) < 0) FAIL("jit backward failed: %s", kiln_last_error());
  for (int v = 0; v < p->n_vals; v++)
    if (p->input[v] && p->rg[v] &&
        !same_tensor(eg_grad[v], kiln_tensor_grad(leaf[v]), true, why, sizeof why))
      FAIL("jit gradient of %%v%d: %s", v, why);
  return RG_AGREE;
mismatch:
  return RG_MISMATCH;
}

static int lazy_run(rg_prog *p, kiln_tensor **eg_grad, bool eager_bwd, char *msg, size_t n) {
  kiln_tensor *lz[RG_MAX_VALS] = {0};
  char why[256];
  for (int v = 0; v < p->n_vals; v++) {
    if (!p->input[v]) continue;
    kiln_tensor *d = kiln_detach(p->val[v]);
    lz[v] = d ? kiln_to_lazy(d) : NULL;
    if (!lz[v] || (p->rg[v] && kiln_set_requires_grad(lz[v], true) < 0))
      FAIL("lazy input: %s", kiln_last_error());
  }
  for (int i = 0; i < p->n_steps; i++) {
    const rg_step *s = &p->step[i];
    kiln_clear_error();
    lz[s->out] = run_step(s, lz);
    if (!lz[s->out]) {
      if (!kiln_last_error()[0]) FAIL("lazy %s failed without a message", s->name);
      if (p->fails && i == p->n_steps - 1) return RG_ALL_FAILED;
      FAIL("lazy recording refused %s: %s", s->name, kiln_last_error());
    }
  }
  kiln_tensor *o[RG_MAX_OUTS];
  for (int i = 0; i < p->n_out; i++) o[i] = lz[p->out[i]];
  kiln_tensor *loss = eager_bwd && !p->fails ? loss_of(o, p->n_out) : NULL;
  if (loss && kiln_backward(loss, NULL) < 0) FAIL("lazy backward failed: %s", kiln_last_error());
  if (kiln_mark_step() < 0) {
    if (p->fails) return RG_ALL_FAILED;
    FAIL("lazy mark_step failed: %s", kiln_last_error());
  }
  for (int i = 0; i < p->n_out; i++) {
    kiln_tensor *c = kiln_to_cpu(o[i]);
    if (!c && p->fails) return RG_ALL_FAILED;
    if (!c) FAIL("lazy output %d: %s", i, kiln_last_error());
    if (p->fails) FAIL("lazy ran a program eager refused (%s)", p->err);
    if (!same_tensor(p->val[p->out[i]], c, false, why, sizeof why))
      FAIL("lazy output %d (%%v%d): %s", i, p->out[i], why);
  }
  for (int v = 0; loss && v < p->n_vals; v++) {
    if (!p->input[v] || !p->rg[v]) continue;
    kiln_tensor *g = kiln_tensor_grad(lz[v]);
    kiln_tensor *gc = g ? kiln_to_cpu(g) : NULL;
    if (g && !gc) FAIL("lazy gradient of %%v%d: %s", v, kiln_last_error());
    if (!same_tensor(eg_grad[v], gc, true, why, sizeof why))
      FAIL("lazy gradient of %%v%d: %s", v, why);
  }
  return RG_AGREE;
mismatch:
  return RG_MISMATCH;
}

int rg_run(rg_rand *r, int max_steps, char *msg, size_t n) {
  rg_prog *p = calloc(1, sizeof *p);
  char *text = NULL;
  kiln_graph *g = NULL;
  kiln_function *f = NULL;
  int rc = RG_AGREE;
  msg[0] = 0;
  if (!p) return RG_AGREE; /* out of memory: nothing to compare */
  kiln_scope_begin();
  /* 1..2 starting inputs */
  for (int i = 0, n0 = 1 + (int)rnd(r, 2); i < n0; i++) {
    int nd = (int)rnd(r, 4);
    int64_t shape[3];
    for (int d = 0; d < nd; d++) shape[d] = rand_size(r);
    if (new_input(p, r, nd, shape, i == 0 && rnd(r, 2) ? KILN_DTYPE_F32 : rand_dtype(r)) < 0)
      goto done;
  }
  int steps = 1 + (int)rnd(r, (unsigned)max_steps);
  for (int tries = 0; p->n_steps < steps && tries < 4 * steps && p->n_vals < RG_MAX_VALS - 4; tries++) {
    int saved = p->n_vals;
    rg_step *s = &p->step[p->n_steps];
    memset(s, 0, sizeof *s);
    bool exact;
    if (!make_step(p, r, s, &exact)) {
      p->n_vals = saved;
      continue;
    }
    kiln_clear_error();
    kiln_tensor *t = run_step(s, p->val);
    if (!t && !kiln_last_error()[0]) {
      snprintf(msg, n, "eager %s failed without a message", s->name);
      rc = RG_MISMATCH;
      goto done;
    }
    if (!t && (rnd(r, 12) || p->n_steps == 0)) {
      p->n_vals = saved; /* dropped; the inputs it made go unused */
      continue;
    }
    s->out = p->n_vals++;
    p->input[s->out] = false;
    p->rg[s->out] = false;
    p->parent[s->out] = s->a[0].k == 't' ? (int)s->a[0].i : -1;
    p->val[s->out] = t;
    p->exact[s->out] = exact;
    p->n_steps++;
    if (!t) {
      p->fails = true;
      snprintf(p->err, sizeof p->err, "%s", kiln_last_error());
      break;
    }
  }
  if (p->n_steps == 0) goto done;
  /* outputs: the last value and up to two others */
  p->out[p->n_out++] = p->step[p->n_steps - 1].out;
  for (int k = (int)rnd(r, 3); k > 0 && !p->fails; k--) p->out[p->n_out++] = pick(p, r);
  text = graph_text(p);
  if (!text) goto done;
  if (getenv("KILN_RG_PRINT")) fprintf(stderr, "%s", text); /* to replay a fuzz input */
  /* eager backward, the reference gradients */
  kiln_tensor *eg_grad[RG_MAX_VALS] = {0};
  kiln_tensor *eo[RG_MAX_OUTS];
  for (int i = 0; i < p->n_out; i++) eo[i] = p->val[p->out[i]];
  kiln_tensor *loss = p->fails ? NULL : loss_of(eo, p->n_out);
  bool eager_bwd = loss && kiln_backward(loss, NULL) == 0;
  for (int v = 0; eager_bwd && v < p->n_vals; v++)
    if (p->input[v] && p->rg[v]) eg_grad[v] = kiln_tensor_grad(p->val[v]);
  /* jit: parse, then calls 1 (profiling), 2 (optimizing), 3 (optimized),
   * 4 without requires_grad (the guards fail: a fallback) */
  g = kiln_graph_parse(text, strlen(text));
  f = g ? kiln_function_new(g) : NULL;
  if (!f) {
    if (!kiln_last_error()[0]) FAIL("jit refused the graph without a message");
    if (!p->fails) FAIL("jit refused the graph: %s", kiln_last_error());
    rc = RG_ALL_FAILED;
  }
  /* (an ill-typed program gets no call 4: what eager refused with grad,
   * such as an in-place write to a view autograd records, may run without) */
  for (int call = 0; f && call < (p->fails ? 3 : 4); call++) {
    kiln_scope_begin();
    int c = jit_call(p, f, call < 3, eg_grad, eager_bwd, msg, n);
    kiln_scope_end();
    if (c == RG_MISMATCH) {
      size_t l = strlen(msg);
      snprintf(msg + l, n - l, " (call %d)", call + 1);
      goto mismatch;
    }
    rc = c;
  }
  kiln_scope_begin();
  int c = lazy_run(p, eg_grad, eager_bwd, msg, n);
  kiln_scope_end();
  if (c == RG_MISMATCH) goto mismatch;
  rc = p->fails ? RG_ALL_FAILED : RG_AGREE;
  goto done;
mismatch:
  rc = RG_MISMATCH;
  {
    size_t l = strlen(msg);
    snprintf(msg + l, n - l, "\n%s", text ? text : "");
  }
done:
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
  free(text);
  free(p);
  return rc;
}
