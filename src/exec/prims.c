/* src/exec/prims.c: run-time implementations of the builtins in
 * src/ir/prims.def that the interpreter executes as EXEC_I_PRIM (numbers,
 * tensor queries, strings, lists), indexed by ir_prim. What a number
 * builtin computes is said once, in src/ir/number.c (Note [Number
 * semantics]), which constant folding calls too; here only the other
 * values' meanings (str + str, list == list, int("12")). Structural kinds
 * (Constant, If, Loop, Param, Return) compile to other instructions; the
 * group kinds are installed by compile hooks (fusion.c, executor.c). */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "compile.h"
#include "ir/scalar.h"
#include "prims.h"

#define IN_NUM(v) ((v)->tag == EXEC_V_INT || (v)->tag == EXEC_V_FLOAT || (v)->tag == EXEC_V_BOOL)

static double num(const exec_value *v) {
  switch (v->tag) {
  case EXEC_V_INT: return (double)v->i;
  case EXEC_V_FLOAT: return v->f;
  case EXEC_V_BOOL: return v->b;
  default: return NAN;
  }
}

static exec_value vi(int64_t i) { return (exec_value){.tag = EXEC_V_INT, .i = i}; }
static exec_value vf(double f) { return (exec_value){.tag = EXEC_V_FLOAT, .f = f}; }
static exec_value vb(bool b) { return (exec_value){.tag = EXEC_V_BOOL, .b = b}; }

static int type_error(const exec_instr *x, const exec_value *in, int n);

/* The numbers among in[0..n): true with a[] set if every one is a number. */
static bool as_nums(const exec_value *in, int n, ir_num *a) {
  for (int i = 0; i < n; i++) {
    switch (in[i].tag) {
    case EXEC_V_INT: a[i] = (ir_num){.tag = IR_NUM_INT, .i = in[i].i}; break;
    case EXEC_V_FLOAT: a[i] = (ir_num){.tag = IR_NUM_FLOAT, .f = in[i].f}; break;
    case EXEC_V_BOOL: a[i] = (ir_num){.tag = IR_NUM_BOOL, .b = in[i].b}; break;
    default: return false;
    }
  }
  return true;
}

static exec_value from_num(const ir_num *r) {
  return r->tag == IR_NUM_INT ? vi(r->i) : r->tag == IR_NUM_FLOAT ? vf(r->f) : vb(r->b);
}

/* Number builtin `prim` on numbers in[] (Note [Number semantics]): 0, or
 * < 0 with the error set (it raised, or an input is not a number). */
static int number(const exec_instr *x, exec_value *in, exec_value *out, int prim) {
  ir_num a[3], r;
  if (x->n_in > 3 || !as_nums(in, x->n_in, a)) return type_error(x, in, x->n_in);
  int rc = ir_num_eval(prim, x->name, a, x->n_in, &r);
  if (rc < 0) return rc;
  if (rc == 0) return type_error(x, in, x->n_in);
  out[0] = from_num(&r);
  return 0;
}
#define NUMBER(fn, prim)                                                         \
  static int fn(const exec_instr *x, exec_value *in, exec_value *out) {          \
    return number(x, in, out, prim);                                             \
  }

static int type_error(const exec_instr *x, const exec_value *in, int n) {
  char buf[128];
  size_t k = 0;
  for (int i = 0; i < n && k < sizeof buf; i++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", exec_tag_name(in[i].tag));
  return core_error(KILN_ERR_INVALID, "%s: unsupported argument types (%s)", x->name, n ? buf : "");
}

static int need_tensor(const exec_instr *x, const exec_value *v) {
  if (v->tag != EXEC_V_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: expected a Tensor, got %s", x->name,
                      exec_tag_name(v->tag));
  return 0;
}

/* ---- misc prims ----------------------------------------------------------- */

static int p_raise(const exec_instr *x, exec_value *in, exec_value *out) {
  const char *msg = in[0].tag == EXEC_V_STR ? in[0].s : "exception";
  const char *cls = x->n_in > 1 && in[1].tag == EXEC_V_STR ? in[1].s : "Exception";
  return core_error(KILN_ERR_INVALID, "%s: %s", cls, msg);
}

static int p_none(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = EXEC_NONE;
  return 0;
}

static int p_identity(const exec_instr *x, exec_value *in, exec_value *out) {
  for (int i = 0; i < x->n_out && i < x->n_in; i++) out[i] = exec_value_copy(&in[i]);
  return 0;
}

static int p_num_to_tensor(const exec_instr *x, exec_value *in, exec_value *out) {
  kiln_dtype dt = in[0].tag == EXEC_V_INT ? KILN_DTYPE_I64
                  : in[0].tag == EXEC_V_BOOL ? KILN_DTYPE_BOOL
                                             : KILN_DTYPE_F64;
  if (!IN_NUM(&in[0])) return type_error(x, in, 1);
  kiln_tensor *t = core_tensor_new(0, NULL, dt);
  if (!t) return KILN_ERR_NOMEM;
  kiln_fill_(t, num(&in[0]));
  t->storage->version = 0;
  out[0] = (exec_value){.tag = EXEC_V_TENSOR, .t = t};
  return 0;
}

static int p_device(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = (exec_value){.tag = EXEC_V_DEVICE, .s = exec_str_dup("cpu")};
  return out[0].s ? 0 : KILN_ERR_NOMEM;
}

static int p_dtype(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = vi(op_dtype_code(in[0].t->dtype));
  return 0;
}

static int p_requires_grad(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = vb(kiln_requires_grad(in[0].t) && kiln_is_grad_enabled());
  return 0;
}

static int p_false(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = vb(false);
  return 0;
}

static int minmax(const exec_instr *x, exec_value *in, exec_value *out, bool is_max) {
  if (x->n_in == 1) {
    if (in[0].tag != EXEC_V_LIST || in[0].list->n == 0)
      return core_error(KILN_ERR_INVALID, "%s: expected a non-empty int list", x->name);
    exec_list *l = in[0].list;
    int64_t best = l->items[0].i;
    for (int i = 1; i < l->n; i++)
      best = is_max ? (l->items[i].i > best ? l->items[i].i : best)
                    : (l->items[i].i < best ? l->items[i].i : best);
    out[0] = vi(best);
    return 0;
  }
  return number(x, in, out, is_max ? IR_PRIM_MAX : IR_PRIM_MIN);
}
static int p_min(const exec_instr *x, exec_value *in, exec_value *out) { return minmax(x, in, out, false); }
static int p_max(const exec_instr *x, exec_value *in, exec_value *out) { return minmax(x, in, out, true); }

/* ---- tensor queries --------------------------------------------------------- */

static int p_size(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  kiln_tensor *t = in[0].t;
  if (x->n_in > 1) {
    if (in[1].tag != EXEC_V_INT) return type_error(x, in, 2);
    int d = core_wrap_dim(x->name, in[1].i, t->ndim);
    if (d < 0) return KILN_ERR_INVALID;
    out[0] = vi(t->ndim ? t->shape[d] : 1);
    return 0;
  }
  exec_value items[KILN_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) items[i] = vi(t->shape[i]);
  out[0] = exec_list_make(EXEC_V_LIST, items, t->ndim);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

static int p_dim(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = vi(in[0].t->ndim);
  return 0;
}

static int p_numel(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = vi(kiln_tensor_numel(in[0].t));
  return 0;
}

static int p_is_floating(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = vb(core_dtype_is_floating(in[0].t->dtype));
  return 0;
}

static int p_is_nested(const exec_instr *x, exec_value *in, exec_value *out) {
  if (need_tensor(x, &in[0]) < 0) return -1;
  out[0] = vb(false);
  return 0;
}

static int p_is_grad_enabled(const exec_instr *x, exec_value *in, exec_value *out) {
  (void)x;
  (void)in;
  out[0] = vb(kiln_is_grad_enabled());
  return 0;
}

static int p_is_autocast_enabled(const exec_instr *x, exec_value *in, exec_value *out) {
  (void)x;
  (void)in;
  out[0] = vb(false);
  return 0;
}

/* TorchScript's str.find: negative start/end count from the end (end -1 is
 * the end itself); -1 when sub is not in s[start:end]. */
static int p_find(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_STR || in[1].tag != EXEC_V_STR || in[2].tag != EXEC_V_INT ||
      in[3].tag != EXEC_V_INT)
    return type_error(x, in, 4);
  int64_t size = (int64_t)strlen(in[0].s), start = in[2].i, end = in[3].i;
  if (start < 0) start = size + start < 0 ? 0 : size + start;
  if (end < 0) end = size + end + 1 < 0 ? 0 : size + end + 1;
  if (start > size) start = size;
  if (end > size) end = size;
  int64_t sub = (int64_t)strlen(in[1].s), r = -1;
  for (int64_t i = start; r < 0 && i + sub <= end; i++)
    if (memcmp(in[0].s + i, in[1].s, (size_t)sub) == 0) r = i;
  out[0] = vi(r);
  return 0;
}

/* item / ScalarImplicit: the number keeps the tensor's category. */
static int p_item(const exec_instr *x, exec_value *in, exec_value *out) {
  double v;
  if (need_tensor(x, &in[0]) < 0) return -1;
  if (kiln_item(in[0].t, &v) < 0) return -1;
  switch (in[0].t->dtype) {
  case KILN_DTYPE_BOOL: out[0] = vb(v != 0); break;
  default: out[0] = core_dtype_is_integral(in[0].t->dtype) ? vi(core_f2i(v)) : vf(v); break;
  }
  return 0;
}

/* The number in a tensor (item) or a number value; 1 if v is neither. */
static int number_of(const exec_value *v, double *out) {
  if (v->tag == EXEC_V_TENSOR) return kiln_item(v->t, out) < 0 ? -1 : 0;
  if (IN_NUM(v)) {
    *out = num(v);
    return 0;
  }
  return 1;
}

static int p_int(const exec_instr *x, exec_value *in, exec_value *out) {
  if (IN_NUM(&in[0])) return number(x, in, out, IR_PRIM_INT);
  double v;
  int rc = number_of(&in[0], &v);
  if (rc < 0) return rc;
  if (rc > 0) {
    char *end;
    long long k = in[0].tag == EXEC_V_STR ? strtoll(in[0].s, &end, 10) : 0;
    if (in[0].tag != EXEC_V_STR) return type_error(x, in, 1);
    if (*end || end == in[0].s)
      return core_error(KILN_ERR_INVALID, "%s: invalid literal for int(): '%s'", x->name, in[0].s);
    out[0] = vi(k);
    return 0;
  }
  if (!(v >= -0x1p63 && v < 0x1p63)) /* NaN, inf, beyond int64 */
    return core_error(KILN_ERR_INVALID, "%s: cannot convert %g to int", x->name, v);
  out[0] = vi((int64_t)v); /* truncation toward zero, as Python's int() */
  return 0;
}

static int p_float(const exec_instr *x, exec_value *in, exec_value *out) {
  if (IN_NUM(&in[0])) return number(x, in, out, IR_PRIM_FLOAT);
  double v;
  int rc = number_of(&in[0], &v);
  if (rc < 0) return rc;
  if (rc > 0) {
    if (in[0].tag != EXEC_V_STR) return type_error(x, in, 1);
    char *end;
    v = strtod(in[0].s, &end);
    if (*end || end == in[0].s)
      return core_error(KILN_ERR_INVALID, "%s: could not convert '%s' to float", x->name, in[0].s);
  }
  out[0] = vf(v);
  return 0;
}

static int p_bool(const exec_instr *x, exec_value *in, exec_value *out) {
  if (IN_NUM(&in[0])) return number(x, in, out, IR_PRIM_BOOL);
  double v;
  int rc = number_of(&in[0], &v);
  if (rc != 0) return rc < 0 ? rc : type_error(x, in, 1);
  out[0] = vb(v != 0);
  return 0;
}

/* ---- lists and strings -------------------------------------------------------- */

static int p_append(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_LIST) return type_error(x, in, 2);
  exec_list *l = in[0].list;
  exec_value *items = core_realloc(l->items, (size_t)(l->n + 1) * sizeof *items);
  if (!items) return KILN_ERR_NOMEM;
  l->items = items;
  l->items[l->n++] = exec_value_copy(&in[1]);
  core_free(l->ints); /* caches describe the old contents */
  core_free(l->tensors);
  core_free(l->floats);
  l->ints = NULL;
  l->tensors = NULL;
  l->floats = NULL;
  out[0] = exec_value_copy(&in[0]);
  return 0;
}

static int p_list_copy(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_LIST) return type_error(x, in, 1);
  out[0] = exec_list_make(EXEC_V_LIST, in[0].list->items, in[0].list->n);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

static bool value_eq(const exec_value *a, const exec_value *b);

static int p_contains(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_LIST) return type_error(x, in, 2);
  bool found = false;
  for (int i = 0; i < in[0].list->n && !found; i++) found = value_eq(&in[0].list->items[i], &in[1]);
  out[0] = vb(found);
  return 0;
}

static size_t value_str(const exec_value *v, char *buf, size_t n) {
  switch (v->tag) {
  case EXEC_V_INT: return (size_t)snprintf(buf, n, "%lld", (long long)v->i);
  case EXEC_V_FLOAT: return (size_t)snprintf(buf, n, "%.17g", v->f);
  case EXEC_V_BOOL: return (size_t)snprintf(buf, n, "%s", v->b ? "True" : "False");
  case EXEC_V_STR:
  case EXEC_V_DEVICE: return (size_t)snprintf(buf, n, "%s", v->s);
  case EXEC_V_NONE: return (size_t)snprintf(buf, n, "None");
  case EXEC_V_TENSOR: {
    char d[160];
    return (size_t)snprintf(buf, n, "tensor(%s)", core_tensor_desc(v->t, d, sizeof d));
  }
  default: {
    size_t k = (size_t)snprintf(buf, n, "%c", v->tag == EXEC_V_TUPLE ? '(' : '[');
    for (int i = 0; i < v->list->n && k < n; i++) {
      if (i) k += (size_t)snprintf(buf + k, n - k, ", ");
      if (k < n) k += value_str(&v->list->items[i], buf + k, n - k);
    }
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "%c", v->tag == EXEC_V_TUPLE ? ')' : ']');
    return k;
  }
  }
}

static int p_str(const exec_instr *x, exec_value *in, exec_value *out) {
  char buf[1024];
  value_str(&in[0], buf, sizeof buf);
  out[0] = (exec_value){.tag = EXEC_V_STR, .s = exec_str_dup(buf)};
  return out[0].s ? 0 : KILN_ERR_NOMEM;
}

static int p_format(const exec_instr *x, exec_value *in, exec_value *out) {
  char buf[2048];
  size_t k = 0;
  int arg = 1;
  if (in[0].tag != EXEC_V_STR) return type_error(x, in, 1);
  for (const char *p = in[0].s; *p && k < sizeof buf - 1; p++) {
    if (p[0] == '{' && p[1] == '}') {
      if (arg < x->n_in) k += value_str(&in[arg++], buf + k, sizeof buf - k);
      p++;
    } else {
      buf[k++] = *p;
    }
  }
  buf[k < sizeof buf ? k : sizeof buf - 1] = 0;
  out[0] = (exec_value){.tag = EXEC_V_STR, .s = exec_str_dup(buf)};
  return out[0].s ? 0 : KILN_ERR_NOMEM;
}

static int p_warn(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag == EXEC_V_STR) fprintf(stderr, "kiln: warning: %s\n", in[0].s);
  return 0;
}

static int p_device_from_str(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_STR) return type_error(x, in, 1);
  if (strcmp(in[0].s, "cpu") != 0)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: device '%s' is not supported (only cpu)",
                      x->name, in[0].s);
  out[0] = (exec_value){.tag = EXEC_V_DEVICE, .s = exec_str_dup("cpu")};
  return out[0].s ? 0 : KILN_ERR_NOMEM;
}

/* ---- arithmetic ------------------------------------------------------------------- */

static int concat(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag == EXEC_V_STR && in[1].tag == EXEC_V_STR) {
    size_t a = strlen(in[0].s), b = strlen(in[1].s);
    char *s = a <= SIZE_MAX / 2 && b <= SIZE_MAX / 2 ? exec_str_alloc(a + b) : NULL;
    if (!s) return KILN_ERR_NOMEM;
    memcpy(s, in[0].s, a);
    memcpy(s + a, in[1].s, b + 1);
    out[0] = (exec_value){.tag = EXEC_V_STR, .s = s};
    return 0;
  }
  if (in[0].tag == EXEC_V_LIST && in[1].tag == EXEC_V_LIST) {
    int n = in[0].list->n + in[1].list->n;
    exec_value *items = core_alloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items) return KILN_ERR_NOMEM;
    memcpy(items, in[0].list->items, (size_t)in[0].list->n * sizeof *items);
    memcpy(items + in[0].list->n, in[1].list->items, (size_t)in[1].list->n * sizeof *items);
    out[0] = exec_list_make(EXEC_V_LIST, items, n);
    core_free(items);
    return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
  }
  return type_error(x, in, 2);
}

static int p_add(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return concat(x, in, out);
  return number(x, in, out, IR_PRIM_ADD);
}

NUMBER(p_sub, IR_PRIM_SUB)
/* numbers, or list * n: the list repeated max(n, 0) times (Python's) */
static int p_mul(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_LIST || in[1].tag != EXEC_V_INT) return number(x, in, out, IR_PRIM_MUL);
  int64_t reps = in[1].i < 0 ? 0 : in[1].i, len = in[0].list->n;
  if (len && reps > INT32_MAX / len)
    return core_error(KILN_ERR_INVALID, "aten::mul: a list of %lld items repeated %lld times "
                                        "is too long", (long long)len, (long long)reps);
  int n = (int)(len * reps);
  exec_value *items = core_alloc((size_t)(n ? n : 1) * sizeof *items);
  if (!items) return KILN_ERR_NOMEM;
  for (int64_t r = 0; r < reps; r++)
    if (len) memcpy(items + r * len, in[0].list->items, (size_t)len * sizeof *items);
  out[0] = exec_list_make(EXEC_V_LIST, items, n);
  core_free(items);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

NUMBER(p_div, IR_PRIM_DIV)
NUMBER(p_floordiv, IR_PRIM_FLOORDIV)
NUMBER(p_remainder, IR_PRIM_REMAINDER)
NUMBER(p_pow, IR_PRIM_POW)
NUMBER(p_neg, IR_PRIM_NEG)
NUMBER(p_abs, IR_PRIM_ABS)
NUMBER(p_floor, IR_PRIM_FLOOR)
NUMBER(p_ceil, IR_PRIM_CEIL)
NUMBER(p_sqrt, IR_PRIM_SQRT)
NUMBER(p_exp, IR_PRIM_EXP)
NUMBER(p_log, IR_PRIM_LOG)
NUMBER(p_tanh, IR_PRIM_TANH)
NUMBER(p_range_length, IR_PRIM_RANGE_LENGTH)
NUMBER(p_derive_index, IR_PRIM_DERIVE_INDEX)
NUMBER(p_not, IR_PRIM_NOT)
NUMBER(p_and, IR_PRIM_AND)
NUMBER(p_or, IR_PRIM_OR)
NUMBER(p_xor, IR_PRIM_XOR)

/* ---- comparisons ---------------------------------------------------------------------- */

static bool value_eq(const exec_value *a, const exec_value *b) {
  ir_num n[2], r;
  if (as_nums(a, 1, &n[0]) && as_nums(b, 1, &n[1]))
    return ir_num_eval(IR_PRIM_EQ, NULL, n, 2, &r) == 1 && r.b;
  if (a->tag != b->tag) return false;
  switch (a->tag) {
  case EXEC_V_NONE: return true;
  case EXEC_V_STR:
  case EXEC_V_DEVICE: return strcmp(a->s, b->s) == 0;
  case EXEC_V_TENSOR: return a->t == b->t;
  case EXEC_V_LIST:
  case EXEC_V_TUPLE:
    if (a->list->n != b->list->n) return false;
    for (int i = 0; i < a->list->n; i++)
      if (!value_eq(&a->list->items[i], &b->list->items[i])) return false;
    return true;
  default: return false;
  }
}

static int p_eq(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = vb(value_eq(&in[0], &in[1]));
  return 0;
}
static int p_ne(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = vb(!value_eq(&in[0], &in[1]));
  return 0;
}

/* Numbers by Note [Number semantics]; strings by strcmp. */
#define CMP(fn, prim, pred)                                                      \
  static int fn(const exec_instr *x, exec_value *in, exec_value *out) {          \
    if (in[0].tag == EXEC_V_STR && in[1].tag == EXEC_V_STR) {                    \
      int r = strcmp(in[0].s, in[1].s);                                          \
      out[0] = vb(pred);                                                         \
      return 0;                                                                  \
    }                                                                            \
    return number(x, in, out, prim);                                             \
  }
CMP(p_lt, IR_PRIM_LT, r < 0)
CMP(p_le, IR_PRIM_LE, r <= 0)
CMP(p_gt, IR_PRIM_GT, r > 0)
CMP(p_ge, IR_PRIM_GE, r >= 0)

static int p_is(const exec_instr *x, exec_value *in, exec_value *out) {
  bool same = in[0].tag == in[1].tag &&
              (in[0].tag == EXEC_V_NONE || (in[0].tag == EXEC_V_TENSOR && in[0].t == in[1].t) ||
               value_eq(&in[0], &in[1]));
  out[0] = vb(x->k.tag == EXEC_V_BOOL && x->k.b ? !same : same);
  return 0;
}

/* ---- autodiff helpers ----------------------------------------------------------------- */

static int p_broadcast_sizes(const exec_instr *x, exec_value *in, exec_value *out) {
  int nd = 0;
  int64_t shape[KILN_MAX_DIMS];
  for (int i = 0; i < x->n_in; i++) {
    op_val v;
    if (exec_value_as_op(&in[i], &v) < 0 || v.tag != OP_VAL_INTS) return type_error(x, in, x->n_in);
    if (op_broadcast_shapes(x->name, nd, shape, v.ints.n, v.ints.v, &nd, shape) < 0) return -1;
  }
  exec_value items[KILN_MAX_DIMS];
  for (int i = 0; i < nd; i++) items[i] = vi(shape[i]);
  out[0] = exec_list_make(EXEC_V_LIST, items, nd);
  return out[0].tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}

static int p_size_if_not_equal(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = value_eq(&in[0], &in[1]) ? EXEC_NONE : exec_value_copy(&in[0]);
  return 0;
}

static int p_autograd_zero(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = EXEC_NONE; /* an undefined gradient */
  return 0;
}

static int p_autograd_add(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag == EXEC_V_NONE) {
    out[0] = exec_value_copy(&in[1]);
    return 0;
  }
  if (in[1].tag == EXEC_V_NONE) {
    out[0] = exec_value_copy(&in[0]);
    return 0;
  }
  kiln_scope_begin();
  kiln_tensor *r = kiln_add(in[0].t, in[1].t);
  kiln_retain(r);
  kiln_scope_end();
  if (!r) return -1;
  out[0] = (exec_value){.tag = EXEC_V_TENSOR, .t = r};
  return 0;
}

static int all_defined(const exec_instr *x, exec_value *in, exec_value *out, int mode) {
  int defined = 0;
  for (int i = 0; i < x->n_in; i++) defined += in[i].tag != EXEC_V_NONE;
  out[0] = vb(mode == 0 ? defined == 0 : mode == 1 ? defined == x->n_in : defined > 0);
  return 0;
}
static int p_all_zero(const exec_instr *x, exec_value *in, exec_value *out) { return all_defined(x, in, out, 0); }
static int p_all_nonzero(const exec_instr *x, exec_value *in, exec_value *out) { return all_defined(x, in, out, 1); }
static int p_any_nonzero(const exec_instr *x, exec_value *in, exec_value *out) { return all_defined(x, in, out, 2); }

/* ---- the table ------------------------------------------------------------------------- */

const exec_prim_fn exec_prim_impl[IR_PRIM_COUNT] = {
    [IR_PRIM_LIST_CONSTRUCT] = exec_prim_list_construct,
    [IR_PRIM_LIST_UNPACK] = exec_prim_unpack,
    [IR_PRIM_TUPLE_CONSTRUCT] = exec_prim_tuple_construct,
    [IR_PRIM_TUPLE_UNPACK] = exec_prim_unpack,
    [IR_PRIM_TUPLE_INDEX] = exec_prim_getitem,
    [IR_PRIM_RAISE_EXCEPTION] = p_raise,
    [IR_PRIM_UNINITIALIZED] = p_none,
    [IR_PRIM_UNCHECKED_CAST] = p_identity,
    [IR_PRIM_NUM_TO_TENSOR] = p_num_to_tensor,
    [IR_PRIM_DEVICE] = p_device,
    [IR_PRIM_DTYPE] = p_dtype,
    [IR_PRIM_REQUIRES_GRAD] = p_requires_grad,
    [IR_PRIM_IS_CUDA] = p_false,
    [IR_PRIM_MIN] = p_min,
    [IR_PRIM_MAX] = p_max,
    [IR_PRIM_ABS] = p_abs,
    [IR_PRIM_PROFILE] = p_identity,
    [IR_PRIM_PROFILE_IVALUE] = p_identity,
    [IR_PRIM_AUTOGRAD_ZERO] = p_autograd_zero,
    [IR_PRIM_AUTOGRAD_ADD] = p_autograd_add,
    [IR_PRIM_AUTOGRAD_ALL_ZERO] = p_all_zero,
    [IR_PRIM_AUTOGRAD_ALL_NONZERO] = p_all_nonzero,
    [IR_PRIM_AUTOGRAD_ANY_NONZERO] = p_any_nonzero,
    [IR_PRIM_BROADCAST_SIZES] = p_broadcast_sizes,
    [IR_PRIM_SIZE_IF_NOT_EQUAL] = p_size_if_not_equal,
    [IR_PRIM_INFER_SIZE] = p_broadcast_sizes,
    [IR_PRIM_SIZE] = p_size,
    [IR_PRIM_DIM] = p_dim,
    [IR_PRIM_NUMEL] = p_numel,
    [IR_PRIM_LEN] = exec_prim_len,
    [IR_PRIM_IS_NESTED] = p_is_nested,
    [IR_PRIM_IS_GRAD_ENABLED] = p_is_grad_enabled,
    [IR_PRIM_IS_AUTOCAST_ENABLED] = p_is_autocast_enabled,
    [IR_PRIM_FIND] = p_find,
    [IR_PRIM_IS_FLOATING_POINT] = p_is_floating,
    [IR_PRIM_EQUAL] = exec_prim_equal,
    [IR_PRIM_ALLCLOSE] = exec_prim_allclose,
    [IR_PRIM_ITEM] = p_item,
    [IR_PRIM_SCALAR_IMPLICIT] = p_item,
    [IR_PRIM_INT_IMPLICIT] = p_int,
    [IR_PRIM_FLOAT_IMPLICIT] = p_float,
    [IR_PRIM_INT] = p_int,
    [IR_PRIM_FLOAT] = p_float,
    [IR_PRIM_BOOL] = p_bool,
    [IR_PRIM_GETITEM] = exec_prim_getitem,
    [IR_PRIM_LIST_SLICE] = exec_prim_list_slice,
    [IR_PRIM_ALL_LIST] = exec_prim_all_list,
    [IR_PRIM_ANY_LIST] = exec_prim_any_list,
    [IR_PRIM_APPEND] = p_append,
    [IR_PRIM_LIST] = p_list_copy,
    [IR_PRIM_CONTAINS] = p_contains,
    [IR_PRIM_STR] = p_str,
    [IR_PRIM_FORMAT] = p_format,
    [IR_PRIM_WARN] = p_warn,
    [IR_PRIM_DEVICE_FROM_STR] = p_device_from_str,
    [IR_PRIM_ADD] = p_add,
    [IR_PRIM_SUB] = p_sub,
    [IR_PRIM_MUL] = p_mul,
    [IR_PRIM_DIV] = p_div,
    [IR_PRIM_FLOORDIV] = p_floordiv,
    [IR_PRIM_REMAINDER] = p_remainder,
    [IR_PRIM_POW] = p_pow,
    [IR_PRIM_NEG] = p_neg,
    [IR_PRIM_ABS_NUM] = p_abs,
    [IR_PRIM_FLOOR] = p_floor,
    [IR_PRIM_CEIL] = p_ceil,
    [IR_PRIM_SQRT] = p_sqrt,
    [IR_PRIM_EXP] = p_exp,
    [IR_PRIM_LOG] = p_log,
    [IR_PRIM_TANH] = p_tanh,
    [IR_PRIM_RANGE_LENGTH] = p_range_length,
    [IR_PRIM_DERIVE_INDEX] = p_derive_index,
    [IR_PRIM_EQ] = p_eq,
    [IR_PRIM_NE] = p_ne,
    [IR_PRIM_LT] = p_lt,
    [IR_PRIM_LE] = p_le,
    [IR_PRIM_GT] = p_gt,
    [IR_PRIM_GE] = p_ge,
    [IR_PRIM_IS] = p_is,
    [IR_PRIM_ISNOT] = p_is,
    [IR_PRIM_NOT] = p_not,
    [IR_PRIM_AND] = p_and,
    [IR_PRIM_OR] = p_or,
    [IR_PRIM_XOR] = p_xor,
};
