/* src/exec/value.h: runtime values of the interpreter's registers: tensors,
 * numbers, strings, lists and tuples (refcounted), None. */
#ifndef KILN_EXEC_VALUE_H
#define KILN_EXEC_VALUE_H

#include "lazy/lazy.h"

typedef enum exec_tag {
  EXEC_V_NONE = 0,
  EXEC_V_TENSOR,
  EXEC_V_INT,
  EXEC_V_FLOAT,
  EXEC_V_BOOL,
  EXEC_V_STR,
  EXEC_V_LIST,   /* int[], float[], bool[], Tensor[], or generic */
  EXEC_V_TUPLE,
  EXEC_V_DEVICE, /* a device string ("cpu") */
  EXEC_V_OBJ     /* an opaque refcounted object (functions) */
} exec_tag;

typedef struct exec_list exec_list;

typedef struct exec_value {
  uint8_t tag;
  union {
    kiln_tensor *t;   /* owned reference */
    int64_t i;
    double f;
    bool b;
    char *s;          /* owned reference (exec_str_alloc; Note [Shared strings]) */
    exec_list *list;  /* owned reference (LIST and TUPLE) */
    void *obj;
  };
} exec_value;

struct exec_list {
  int refcount;
  int n;
  exec_value *items;  /* owned values */
  int64_t *ints;      /* cache: items as int64 when all are ints (for op_val) */
  kiln_tensor **tensors; /* cache: items as tensors when all are tensors */
  double *floats;     /* cache: items as doubles when all are numbers, some float */
};

#define EXEC_NONE ((exec_value){.tag = EXEC_V_NONE})

/* Releases what v owns and sets it to None. */
void exec_value_clear(exec_value *v);
/* A copy holding its own references; never fails (nothing is allocated:
 * tensors, strings and lists are shared and counted). */
exec_value exec_value_copy(const exec_value *v);
/* A string value's bytes (n of them, then a 0 the caller need not write),
 * owned by the caller as one reference, released by exec_value_clear of a
 * STR or DEVICE value holding it. NULL (error set) on OOM. */
char *exec_str_alloc(size_t n);
/* exec_str_alloc(strlen(s)) holding a copy of s. */
char *exec_str_dup(const char *s);
/* A new list/tuple value of n items (copied). NONE tag on OOM. */
exec_value exec_list_make(exec_tag tag, const exec_value *items, int n);
/* Borrowed op_val view of v for op_call. Int lists and tensor lists are
 * viewed through caches in the list. Returns < 0 (error set) when v cannot
 * be passed (e.g. a list of mixed types). */
int exec_value_as_op(exec_value *v, op_val *out);
/* "Tensor", "int", ... for messages. */
const char *exec_tag_name(int tag);

#endif
