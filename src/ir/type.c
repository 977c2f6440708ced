/* src/ir/type.c: IR types (Note [Tensor types]): the shared simple types,
 * graph-owned refined tensors, lists, tuples and optionals; equality, the
 * "may flow into" relation, deep copies. */
#include <string.h>

#include "irimpl.h"

#define SIMPLE(k) {.kind = (k), .dtype = -1, .ndim = -1, .requires_grad = -1}

static const ir_type simple_types[IR_TYPE_ANY + 1] = {
    SIMPLE(IR_TYPE_TENSOR), SIMPLE(IR_TYPE_INT),    SIMPLE(IR_TYPE_FLOAT),
    SIMPLE(IR_TYPE_BOOL),   SIMPLE(IR_TYPE_STR),    SIMPLE(IR_TYPE_NONE),
    SIMPLE(IR_TYPE_DEVICE), SIMPLE(IR_TYPE_NUMBER), SIMPLE(IR_TYPE_FUNCTION),
    SIMPLE(IR_TYPE_ANY),
};

const ir_type *ir_type_simple(ir_type_kind k) {
  return (int)k >= 0 && k <= IR_TYPE_ANY ? &simple_types[k] : NULL;
}
const ir_type *ir_type_tensor(void) { return &simple_types[IR_TYPE_TENSOR]; }
const ir_type *ir_type_int(void) { return &simple_types[IR_TYPE_INT]; }
const ir_type *ir_type_float(void) { return &simple_types[IR_TYPE_FLOAT]; }
const ir_type *ir_type_bool(void) { return &simple_types[IR_TYPE_BOOL]; }
const ir_type *ir_type_str(void) { return &simple_types[IR_TYPE_STR]; }
const ir_type *ir_type_none(void) { return &simple_types[IR_TYPE_NONE]; }
const ir_type *ir_type_device(void) { return &simple_types[IR_TYPE_DEVICE]; }
const ir_type *ir_type_number(void) { return &simple_types[IR_TYPE_NUMBER]; }
const ir_type *ir_type_function(void) { return &simple_types[IR_TYPE_FUNCTION]; }
const ir_type *ir_type_any(void) { return &simple_types[IR_TYPE_ANY]; }

static bool is_shared(const ir_type *t) {
  return t >= simple_types && t < simple_types + IR_TYPE_ANY + 1;
}

const ir_type *ir_type_tensor_new(ir_graph *g, int dtype, int ndim, const int64_t *sizes,
                                  const int64_t *strides, int requires_grad,
                                  const char *device) {
  if (dtype < -1 || dtype >= KILN_DTYPE_COUNT || ndim < -1 || ndim > KILN_MAX_DIMS ||
      requires_grad < -1 || requires_grad > 1) {
    core_error(KILN_ERR_INVALID, "ir_type_tensor_new: bad dtype %d, ndim %d or requires_grad %d",
               dtype, ndim, requires_grad);
    return NULL;
  }
  ir_type *t = ir_graph_alloc(g, sizeof *t);
  if (!t) return NULL;
  t->kind = IR_TYPE_TENSOR;
  t->dtype = (int8_t)dtype;
  t->ndim = (int8_t)ndim;
  t->requires_grad = (int8_t)requires_grad;
  if (ndim > 0) {
    int64_t *sz = ir_graph_alloc(g, (size_t)ndim * sizeof *sz);
    if (!sz) return NULL;
    for (int i = 0; i < ndim; i++) sz[i] = sizes && sizes[i] >= 0 ? sizes[i] : -1;
    t->sizes = sz;
    if (strides) {
      int64_t *st = ir_graph_alloc(g, (size_t)ndim * sizeof *st);
      if (!st) return NULL;
      memcpy(st, strides, (size_t)ndim * sizeof *st);
      t->strides = st;
      t->has_strides = true;
    }
  }
  if (device && !(t->device = ir_graph_strdup(g, device, strlen(device)))) return NULL;
  t->seen = dtype >= 0 || ndim >= 0 || requires_grad >= 0 || device;
  return t;
}

static const ir_type *container(ir_graph *g, ir_type_kind k, int n,
                                const ir_type *const *elems) {
  ir_type *t = ir_graph_alloc(g, sizeof *t);
  const ir_type **e = ir_graph_alloc(g, (size_t)(n ? n : 1) * sizeof *e);
  if (!t || !e) return NULL;
  *t = (ir_type)SIMPLE(k);
  for (int i = 0; i < n; i++) e[i] = elems[i];
  t->n_elems = n;
  t->elems = e;
  return t;
}

const ir_type *ir_type_list(ir_graph *g, const ir_type *elem) {
  return container(g, IR_TYPE_LIST, 1, &elem);
}
const ir_type *ir_type_optional(ir_graph *g, const ir_type *elem) {
  return container(g, IR_TYPE_OPTIONAL, 1, &elem);
}
const ir_type *ir_type_tuple(ir_graph *g, int n, const ir_type *const *elems) {
  return container(g, IR_TYPE_TUPLE, n, elems);
}

const ir_type *ir_type_copy(ir_graph *g, const ir_type *t) {
  if (is_shared(t)) return t;
  if (t->kind == IR_TYPE_TENSOR) {
    const ir_type *c = ir_type_tensor_new(g, t->dtype, t->ndim, t->sizes,
                                          t->has_strides ? t->strides : NULL,
                                          t->requires_grad, t->device);
    if (c) ((ir_type *)c)->seen = t->seen;
    return c;
  }
  if (t->kind != IR_TYPE_LIST && t->kind != IR_TYPE_TUPLE && t->kind != IR_TYPE_OPTIONAL)
    return ir_type_simple((ir_type_kind)t->kind);
  const ir_type **ep = ir_graph_alloc(g, (size_t)(t->n_elems ? t->n_elems : 1) * sizeof *ep);
  if (!ep) return NULL;
  for (int i = 0; i < t->n_elems; i++)
    if (!(ep[i] = ir_type_copy(g, t->elems[i]))) return NULL;
  return container(g, (ir_type_kind)t->kind, t->n_elems, ep);
}

bool ir_type_equal(const ir_type *a, const ir_type *b) {
  if (a == b) return true;
  if (a->kind != b->kind) return false;
  if (a->kind == IR_TYPE_TENSOR) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->requires_grad != b->requires_grad ||
        a->seen != b->seen || a->has_strides != b->has_strides)
      return false;
    if ((a->device == NULL) != (b->device == NULL) ||
        (a->device && strcmp(a->device, b->device) != 0))
      return false;
    for (int i = 0; i < a->ndim; i++) {
      if (a->sizes[i] != b->sizes[i]) return false;
      if (a->has_strides && a->strides[i] != b->strides[i]) return false;
    }
    return true;
  }
  if (a->n_elems != b->n_elems) return false;
  for (int i = 0; i < a->n_elems; i++)
    if (!ir_type_equal(a->elems[i], b->elems[i])) return false;
  return true;
}

bool ir_type_accepts(const ir_type *decl, const ir_type *actual) {
  switch (decl->kind) {
  case IR_TYPE_ANY:
    return true;
  case IR_TYPE_OPTIONAL:
    if (actual->kind == IR_TYPE_NONE) return true;
    if (actual->kind == IR_TYPE_OPTIONAL) return ir_type_accepts(decl->elems[0], actual->elems[0]);
    return ir_type_accepts(decl->elems[0], actual);
  case IR_TYPE_NUMBER:
    return actual->kind == IR_TYPE_INT || actual->kind == IR_TYPE_FLOAT ||
           actual->kind == IR_TYPE_NUMBER;
  case IR_TYPE_LIST:
    return actual->kind == IR_TYPE_LIST && ir_type_accepts(decl->elems[0], actual->elems[0]);
  case IR_TYPE_TUPLE:
    if (actual->kind != IR_TYPE_TUPLE || actual->n_elems != decl->n_elems) return false;
    for (int i = 0; i < decl->n_elems; i++)
      if (!ir_type_accepts(decl->elems[i], actual->elems[i])) return false;
    return true;
  default:
    return decl->kind == actual->kind;
  }
}

char *ir_type_text(const ir_type *t, char *buf, size_t n) {
  ir_buf b = {0};
  ir_buf_type(&b, t);
  if (n) {
    size_t k = b.p ? (b.n < n - 1 ? b.n : n - 1) : 0;
    if (k) memcpy(buf, b.p, k);
    buf[k] = 0;
  }
  core_free(b.p);
  return buf;
}
