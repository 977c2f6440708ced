/* src/exec/value.c: interpreter values: copy, clear, lists, and viewing a
 * value as an op argument. */
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "value.h"

/* Note [Shared strings]: a string value's bytes follow a reference count,
 * so copying a value (a register move, a constant loaded, a list item
 * read) only counts one more reference and never allocates. A copy that
 * could fail would have to be checked at every move; before, a failed copy
 * became None and the program went on with it (aten::div's rounding_mode
 * "floor" read as None: true division; found by the OpInfo allocation
 * sweep, tests/ops/test_opinfo.c). */
typedef struct str_head {
  alignas(max_align_t) atomic_int refs;
} str_head;

static str_head *str_head_of(const char *s) { return (str_head *)(void *)(s - sizeof(str_head)); }

char *exec_str_alloc(size_t n) {
  if (n > SIZE_MAX - sizeof(str_head) - 1) {
    core_error(KILN_ERR_NOMEM, "out of memory: a string of %zu bytes", n);
    return NULL;
  }
  str_head *h = core_alloc(sizeof(str_head) + n + 1);
  if (!h) return NULL;
  atomic_init(&h->refs, 1);
  char *s = (char *)(h + 1);
  s[n] = 0;
  return s;
}

char *exec_str_dup(const char *s) {
  size_t n = strlen(s);
  char *r = exec_str_alloc(n);
  if (r) memcpy(r, s, n);
  return r;
}

static void str_release(char *s) {
  if (s && atomic_fetch_sub_explicit(&str_head_of(s)->refs, 1, memory_order_acq_rel) == 1)
    core_free(str_head_of(s));
}

static void list_release(exec_list *l) {
  if (!l || --l->refcount > 0) return;
  for (int i = 0; i < l->n; i++) exec_value_clear(&l->items[i]);
  core_free(l->items);
  core_free(l->ints);
  core_free(l->floats);
  core_free(l->tensors);
  core_free(l);
}

void exec_value_clear(exec_value *v) {
  switch (v->tag) {
  case EXEC_V_TENSOR: kiln_release(v->t); break;
  case EXEC_V_STR:
  case EXEC_V_DEVICE: str_release(v->s); break;
  case EXEC_V_LIST:
  case EXEC_V_TUPLE: list_release(v->list); break;
  default: break;
  }
  v->tag = EXEC_V_NONE;
}

exec_value exec_value_copy(const exec_value *v) {
  exec_value r = *v;
  switch (v->tag) {
  case EXEC_V_TENSOR: kiln_retain(v->t); break;
  case EXEC_V_STR:
  case EXEC_V_DEVICE:
    atomic_fetch_add_explicit(&str_head_of(v->s)->refs, 1, memory_order_relaxed);
    break;
  case EXEC_V_LIST:
  case EXEC_V_TUPLE: v->list->refcount++; break;
  default: break;
  }
  return r;
}

exec_value exec_list_make(exec_tag tag, const exec_value *items, int n) {
  exec_value r = {.tag = EXEC_V_NONE};
  exec_list *l = core_calloc(1, sizeof *l);
  if (!l) return r;
  l->refcount = 1;
  l->n = n;
  l->items = core_calloc((size_t)(n ? n : 1), sizeof *l->items);
  if (!l->items) {
    core_free(l);
    return r;
  }
  for (int i = 0; i < n; i++) l->items[i] = exec_value_copy(&items[i]);
  r.tag = (uint8_t)tag;
  r.list = l;
  return r;
}

int exec_value_as_op(exec_value *v, op_val *out) {
  switch (v->tag) {
  case EXEC_V_NONE: *out = OPV_NONE; return 0;
  case EXEC_V_TENSOR: *out = OPV_T(v->t); return 0;
  case EXEC_V_INT: *out = OPV_I(v->i); return 0;
  case EXEC_V_FLOAT: *out = OPV_F(v->f); return 0;
  case EXEC_V_BOOL: *out = OPV_B(v->b); return 0;
  case EXEC_V_STR:
  case EXEC_V_DEVICE: *out = OPV_S(v->s); return 0;
  case EXEC_V_LIST:
  case EXEC_V_TUPLE: {
    exec_list *l = v->list;
    bool all_int = true, all_t = true, any_t = false, all_num = true;
    for (int i = 0; i < l->n; i++) {
      all_int &= l->items[i].tag == EXEC_V_INT || l->items[i].tag == EXEC_V_BOOL;
      /* a Tensor?[] (index's indices) holds None entries: NULL in the list */
      all_t &= l->items[i].tag == EXEC_V_TENSOR || l->items[i].tag == EXEC_V_NONE;
      any_t |= l->items[i].tag == EXEC_V_TENSOR;
      all_num &= l->items[i].tag == EXEC_V_INT || l->items[i].tag == EXEC_V_FLOAT;
    }
    all_t &= any_t || l->n == 0;
    if (all_int) {
      if (!l->ints) {
        l->ints = core_alloc((size_t)(l->n ? l->n : 1) * sizeof *l->ints);
        if (!l->ints) return KILN_ERR_NOMEM;
        for (int i = 0; i < l->n; i++)
          l->ints[i] = l->items[i].tag == EXEC_V_INT ? l->items[i].i : l->items[i].b;
      }
      *out = OPV_INTS(l->ints, l->n);
      return 0;
    }
    if (all_t) {
      if (!l->tensors) {
        l->tensors = core_alloc((size_t)l->n * sizeof *l->tensors);
        if (!l->tensors) return KILN_ERR_NOMEM;
        for (int i = 0; i < l->n; i++)
          l->tensors[i] = l->items[i].tag == EXEC_V_TENSOR ? l->items[i].t : NULL;
      }
      *out = OPV_TS(l->tensors, l->n);
      return 0;
    }
    if (all_num) { /* float[] (an all-int or empty list went the int[] way) */
      if (!l->floats) {
        l->floats = core_alloc((size_t)l->n * sizeof *l->floats);
        if (!l->floats) return KILN_ERR_NOMEM;
        for (int i = 0; i < l->n; i++)
          l->floats[i] = l->items[i].tag == EXEC_V_FLOAT ? l->items[i].f : (double)l->items[i].i;
      }
      *out = OPV_FLOATS(l->floats, l->n);
      return 0;
    }
    return core_error(KILN_ERR_INVALID, "a list of mixed types cannot be passed to an op");
  }
  default:
    return core_error(KILN_ERR_INVALID, "a %s cannot be passed to an op", exec_tag_name(v->tag));
  }
}

const char *exec_tag_name(int tag) {
  static const char *const names[] = {"None", "Tensor", "int",    "float",  "bool",
                                      "str",  "list",   "tuple",  "Device", "object"};
  return tag >= 0 && tag <= EXEC_V_OBJ ? names[tag] : "?";
}
