/* src/exec/prims.c: run-time implementations of the builtins in
 * src/ir/prims.def that the interpreter executes as EXEC_I_PRIM (numbers,
 * tensor queries, strings, lists), indexed by ir_prim. Structural kinds
 * (Constant, If, Loop, Param, Return) compile to other instructions; the
 * profiling executor's kinds are installed by the executor itself. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "interp.h"
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
  out[0] = (exec_value){.tag = EXEC_V_DEVICE, .s = core_strdup("cpu")};
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
  if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return type_error(x, in, 2);
  if (in[0].tag != EXEC_V_FLOAT && in[1].tag != EXEC_V_FLOAT) {
    /* ints exactly, not through a double (2^63 - 1 would round out of range) */
    int64_t a = in[0].tag == EXEC_V_BOOL ? in[0].b : in[0].i;
    int64_t b = in[1].tag == EXEC_V_BOOL ? in[1].b : in[1].i;
    out[0] = vi(is_max ? (a >= b ? a : b) : (a <= b ? a : b));
    return 0;
  }
  bool pick0 = is_max ? num(&in[0]) >= num(&in[1]) : num(&in[0]) <= num(&in[1]);
  out[0] = vf(pick0 ? num(&in[0]) : num(&in[1]));
  return 0;
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

/* item / ScalarImplicit: the number keeps the tensor's category. */
static int p_item(const exec_instr *x, exec_value *in, exec_value *out) {
  double v;
  if (need_tensor(x, &in[0]) < 0) return -1;
  if (kiln_item(in[0].t, &v) < 0) return -1;
  switch (in[0].t->dtype) {
  case KILN_DTYPE_I64: out[0] = vi(core_f2i(v)); break;
  case KILN_DTYPE_BOOL: out[0] = vb(v != 0); break;
  default: out[0] = vf(v); break;
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
  l->ints = NULL;
  l->tensors = NULL;
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
  out[0] = (exec_value){.tag = EXEC_V_STR, .s = core_strdup(buf)};
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
  out[0] = (exec_value){.tag = EXEC_V_STR, .s = core_strdup(buf)};
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
  out[0] = (exec_value){.tag = EXEC_V_DEVICE, .s = core_strdup("cpu")};
  return out[0].s ? 0 : KILN_ERR_NOMEM;
}

/* ---- arithmetic ------------------------------------------------------------------- */

static bool both_int(const exec_value *a, const exec_value *b) {
  return (a->tag == EXEC_V_INT || a->tag == EXEC_V_BOOL) &&
         (b->tag == EXEC_V_INT || b->tag == EXEC_V_BOOL);
}

static int64_t ival(const exec_value *v) { return v->tag == EXEC_V_INT ? v->i : v->b; }

static int concat(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag == EXEC_V_STR && in[1].tag == EXEC_V_STR) {
    size_t a = strlen(in[0].s), b = strlen(in[1].s);
    char *s = core_alloc(a + b + 1);
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
  out[0] = both_int(&in[0], &in[1]) ? vi(core_wrap_add(ival(&in[0]), ival(&in[1]))) : vf(num(&in[0]) + num(&in[1]));
  return 0;
}

#define ARITH(fn, iexpr, fexpr)                                                  \
  static int fn(const exec_instr *x, exec_value *in, exec_value *out) {          \
    if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return type_error(x, in, 2);         \
    if (both_int(&in[0], &in[1])) {                                              \
      int64_t a = ival(&in[0]), b = ival(&in[1]);                                \
      out[0] = vi(iexpr);                                                        \
    } else {                                                                     \
      double a = num(&in[0]), b = num(&in[1]);                                   \
      out[0] = vf(fexpr);                                                        \
    }                                                                            \
    return 0;                                                                    \
  }
ARITH(p_sub, core_wrap_sub(a, b), a - b)
ARITH(p_mul, core_wrap_mul(a, b), a * b)

static int p_div(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return type_error(x, in, 2);
  if (num(&in[1]) == 0) return core_error(KILN_ERR_INVALID, "%s: division by zero", x->name);
  out[0] = vf(num(&in[0]) / num(&in[1]));
  return 0;
}

static int p_floordiv(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return type_error(x, in, 2);
  if (num(&in[1]) == 0) return core_error(KILN_ERR_INVALID, "%s: division by zero", x->name);
  if (both_int(&in[0], &in[1])) {
    out[0] = vi(core_int_floordiv(ival(&in[0]), ival(&in[1])));
  } else {
    out[0] = vf(core_float_floordiv(num(&in[0]), num(&in[1])));
  }
  return 0;
}

static int p_remainder(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return type_error(x, in, 2);
  if (num(&in[1]) == 0) return core_error(KILN_ERR_INVALID, "%s: modulo by zero", x->name);
  if (both_int(&in[0], &in[1])) {
    out[0] = vi(core_int_remainder(ival(&in[0]), ival(&in[1])));
  } else {
    out[0] = vf(core_float_remainder(num(&in[0]), num(&in[1])));
  }
  return 0;
}

static int p_pow(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0]) || !IN_NUM(&in[1])) return type_error(x, in, 2);
  if (both_int(&in[0], &in[1]) && ival(&in[1]) >= 0) {
    out[0] = vi(core_int_pow(ival(&in[0]), ival(&in[1])));
  } else {
    out[0] = vf(pow(num(&in[0]), num(&in[1])));
  }
  return 0;
}

static int p_neg(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0])) return type_error(x, in, 1);
  out[0] = in[0].tag == EXEC_V_FLOAT ? vf(-in[0].f) : vi(core_wrap_neg(ival(&in[0])));
  return 0;
}

static int p_abs(const exec_instr *x, exec_value *in, exec_value *out) {
  if (!IN_NUM(&in[0])) return type_error(x, in, 1);
  out[0] = in[0].tag == EXEC_V_FLOAT ? vf(fabs(in[0].f)) : vi(core_wrap_abs(ival(&in[0])));
  return 0;
}

#define MATH1(fn, expr, to_int)                                                  \
  static int fn(const exec_instr *x, exec_value *in, exec_value *out) {          \
    if (!IN_NUM(&in[0])) return type_error(x, in, 1);                            \
    double a = num(&in[0]);                                                      \
    double r_ = (expr);                                                          \
    if (to_int && !(r_ >= -0x1p63 && r_ < 0x1p63))                               \
      return core_error(KILN_ERR_INVALID, "%s: cannot convert %g to int", x->name, r_); \
    out[0] = to_int ? vi((int64_t)r_) : vf(r_);                                  \
    return 0;                                                                    \
  }
MATH1(p_floor, floor(a), 1)
MATH1(p_ceil, ceil(a), 1)
MATH1(p_sqrt, sqrt(a), 0)
MATH1(p_exp, exp(a), 0)
MATH1(p_log, log(a), 0)
MATH1(p_tanh, tanh(a), 0)

static int p_range_length(const exec_instr *x, exec_value *in, exec_value *out) {
  int64_t lo = ival(&in[0]), hi = ival(&in[1]), step = ival(&in[2]);
  if (step == 0) return core_error(KILN_ERR_INVALID, "%s: range() step must not be zero", x->name);
  out[0] = vi(core_range_length(lo, hi, step));
  return 0;
}

static int p_derive_index(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = vi(ival(&in[1]) + ival(&in[0]) * ival(&in[2]));
  return 0;
}

/* ---- comparisons ---------------------------------------------------------------------- */

static bool value_eq(const exec_value *a, const exec_value *b) {
  if (IN_NUM(a) && IN_NUM(b)) return num(a) == num(b);
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

static int cmp(const exec_instr *x, exec_value *in, int *r) {
  if (IN_NUM(&in[0]) && IN_NUM(&in[1])) {
    double a = num(&in[0]), b = num(&in[1]);
    *r = a < b ? -1 : a > b ? 1 : a == b ? 0 : 2;
    return 0;
  }
  if (in[0].tag == EXEC_V_STR && in[1].tag == EXEC_V_STR) {
    int c = strcmp(in[0].s, in[1].s);
    *r = c < 0 ? -1 : c > 0;
    return 0;
  }
  return type_error(x, in, 2);
}

#define CMP(fn, pred)                                                            \
  static int fn(const exec_instr *x, exec_value *in, exec_value *out) {          \
    int r;                                                                       \
    if (cmp(x, in, &r) < 0) return -1;                                           \
    out[0] = vb(r != 2 && (pred));                                               \
    return 0;                                                                    \
  }
CMP(p_lt, r < 0)
CMP(p_le, r <= 0)
CMP(p_gt, r > 0)
CMP(p_ge, r >= 0)

static int p_is(const exec_instr *x, exec_value *in, exec_value *out) {
  bool same = in[0].tag == in[1].tag &&
              (in[0].tag == EXEC_V_NONE || (in[0].tag == EXEC_V_TENSOR && in[0].t == in[1].t) ||
               value_eq(&in[0], &in[1]));
  out[0] = vb(x->k.tag == EXEC_V_BOOL && x->k.b ? !same : same);
  return 0;
}

static int p_not(const exec_instr *x, exec_value *in, exec_value *out) {
  if (in[0].tag != EXEC_V_BOOL) return type_error(x, in, 1);
  out[0] = vb(!in[0].b);
  return 0;
}

#define LOGIC(fn, op)                                                            \
  static int fn(const exec_instr *x, exec_value *in, exec_value *out) {          \
    if (in[0].tag == EXEC_V_BOOL && in[1].tag == EXEC_V_BOOL)                    \
      out[0] = vb(in[0].b op in[1].b);                                           \
    else if (both_int(&in[0], &in[1]))                                           \
      out[0] = vi(ival(&in[0]) op ival(&in[1]));                                 \
    else                                                                         \
      return type_error(x, in, 2);                                               \
    return 0;                                                                    \
  }
LOGIC(p_and, &)
LOGIC(p_or, |)
LOGIC(p_xor, ^)

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
    [IR_PRIM_SIZE] = p_size,
    [IR_PRIM_DIM] = p_dim,
    [IR_PRIM_NUMEL] = p_numel,
    [IR_PRIM_LEN] = exec_prim_len,
    [IR_PRIM_IS_FLOATING_POINT] = p_is_floating,
    [IR_PRIM_ITEM] = p_item,
    [IR_PRIM_SCALAR_IMPLICIT] = p_item,
    [IR_PRIM_INT_IMPLICIT] = p_int,
    [IR_PRIM_FLOAT_IMPLICIT] = p_float,
    [IR_PRIM_INT] = p_int,
    [IR_PRIM_FLOAT] = p_float,
    [IR_PRIM_BOOL] = p_bool,
    [IR_PRIM_GETITEM] = exec_prim_getitem,
    [IR_PRIM_LIST_SLICE] = exec_prim_list_slice,
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
