/* src/ops/table.c: expands ops.def into op_table[], the single source of
 * truth for ops, and looks ops up by aten name.
 *
 * Note [Weak entries]: an op's functions are declared weak, so that the
 * entries an op does not have (a grad for a non-differentiable op, a kernel
 * for one that decomposes) are NULL rather than link errors; the table test
 * (op_table_complete in tests/ops/test_gradcheck.c) fails for every function
 * an op should have and lacks. Weak references do not pull members out of
 * an archive, so libkiln.a holds one relocatable object (Makefile). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "op.h"

#define WEAK __attribute__((weak))

/* Declarations. */
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  WEAK int op_##name##_infer(const op_val *, int, op_meta *, int);             \
  WEAK int op_##name##_cpu(const op_val *, int, kiln_tensor **, int);          \
  WEAK int op_##name##_grad(op_grad_ctx *);                                     \
  WEAK int op_##name##_decompose(const op_val *, int, kiln_tensor **, int);
#define EW(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  WEAK int op_##name##_grad(op_grad_ctx *);                                     \
  WEAK extern const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT];             \
  WEAK extern const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT];
#include "ops.def"
#undef OP
#undef EW

/* Elementwise ops share one inference and one kernel driver; each gets a
 * tiny trampoline carrying its enum. */
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)
#define EW(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  static int ew_##name##_infer(const op_val *a, int n, op_meta *o, int m) {     \
    (void)m;                                                                   \
    return op_ew_infer(KILN_OP_##ENUM, a, n, o);                               \
  }                                                                            \
  static int ew_##name##_cpu(const op_val *a, int n, kiln_tensor **o, int m) {  \
    (void)m;                                                                   \
    return op_ew_run(KILN_OP_##ENUM, a, n, o[0]);                              \
  }
#include "ops.def"
#undef OP
#undef EW

/* In-place entries (Note [In-place variants]): trampolines carrying the
 * functional op's enum. */
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  static int ip_##name##_infer(const op_val *a, int n, op_meta *o, int m) {     \
    return op_inplace_infer(KILN_OP_##ENUM, a, n, o, m);                       \
  }                                                                            \
  static int ip_##name##_run(const op_val *a, int n, kiln_tensor **o, int m) {  \
    return op_inplace_run(KILN_OP_##ENUM, a, n, o, m);                         \
  }
#define EW OP
#include "ops.def"
#undef OP
#undef EW

#define IP_FLAGS(flags)                                                                    \
  (((flags) & OPF_HAS_INPLACE) ? (((flags) & OPF_RANDOM) | OPF_INPLACE | OPF_DECOMPOSES) : 0u)

const op_info op_table[OP_INDEX_COUNT] = {
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  [KILN_OP_##ENUM] = {aten,       schema,         doc,                          \
                      flags,      nin,            nargs,                        \
                      op_##name##_infer, op_##name##_cpu, op_##name##_grad,     \
                      op_##name##_decompose, NULL, NULL},
#define EW(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  [KILN_OP_##ENUM] = {aten,        schema, doc, flags, nin, nargs,              \
                      ew_##name##_infer, ew_##name##_cpu, op_##name##_grad,     \
                      NULL,        op_##name##_tiles, op_##name##_tile_srcs},
#include "ops.def"
#undef OP
#undef EW
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  [KILN_OP_COUNT + KILN_OP_##ENUM] = {((flags) & OPF_HAS_INPLACE) ? aten "_" : NULL,  \
                                      schema, doc, IP_FLAGS(flags), nin, nargs,  \
                                      ip_##name##_infer, NULL, NULL,             \
                                      ip_##name##_run, NULL, NULL},
#define EW OP
#include "ops.def"
#undef OP
#undef EW
};

int op_find(const char *name) {
  for (int i = 0; i < OP_INDEX_COUNT; i++)
    if (op_table[i].name && strcmp(op_table[i].name, name) == 0) return i;
  return -1;
}

int op_find_arity(const char *name, int n_args) {
  for (int i = 0; i < OP_INDEX_COUNT; i++)
    if (op_table[i].name && op_table[i].n_args == n_args && strcmp(op_table[i].name, name) == 0)
      return i;
  return -1;
}

/* "add.Tensor(Tensor self, ...) -> Tensor" -> "add_.Tensor(Tensor(a!) self, ...) -> Tensor(a!)" */
static void derive_inplace_schema(const char *s, char *out, size_t cap) {
  size_t k = 0;
  const char *dot = strchr(s, '.'), *paren = strchr(s, '(');
  const char *name_end = dot && dot < paren ? dot : paren;
#define PUT(p, n)                                                                \
  do {                                                                           \
    size_t n_ = (size_t)(n);                                                     \
    if (k + n_ >= cap) n_ = cap - 1 - k;                                         \
    memcpy(out + k, (p), n_);                                                    \
    k += n_;                                                                     \
  } while (0)
  PUT(s, name_end - s);
  PUT("_", 1);
  PUT(name_end, paren + 1 - name_end);
  const char *a = paren + 1;
  if (strncmp(a, "Tensor ", 7) == 0) {
    PUT("Tensor(a!)", 10);
    a += 6;
  }
  const char *arrow = strstr(a, ") -> ");
  if (!arrow) arrow = a + strlen(a);
  PUT(a, arrow - a);
  PUT(") -> Tensor(a!)", 15);
#undef PUT
  out[k] = 0;
}

const char *op_schema_text(int op) {
  /* derived once, under a lock (Note [Threads] in include/kiln.h) */
  static char derived[KILN_OP_COUNT][320];
  static atomic_bool ready[KILN_OP_COUNT];
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  if (op < 0 || op >= OP_INDEX_COUNT) return NULL;
  if (!op_is_inplace(op)) return op_table[op].schema;
  if (!op_table[op].name) return NULL;
  int f = op_functional(op);
  if (!atomic_load(&ready[f])) {
    pthread_mutex_lock(&lock);
    if (!derived[f][0]) derive_inplace_schema(op_table[op].schema, derived[f], sizeof derived[0]);
    atomic_store(&ready[f], true);
    pthread_mutex_unlock(&lock);
  }
  return derived[f];
}

const op_tile_src *op_tile_text(int op, kiln_dtype dt) {
  const op_tile_src *const *t = op_table[op].tile_srcs;
  return t && t[dt] && t[dt]->expr ? t[dt] : NULL;
}
