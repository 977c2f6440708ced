/* src/ops/dispatch.c: op_call, the one entry point every op goes through
 * (eager API, interpreter, lazy recording, derivative formulas). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ew.h"

int (*op_autograd_hook)(int op, const op_val *args, int n_args, kiln_tensor **outs,
                        int n_outs);
bool (*op_is_leaf_hook)(const kiln_tensor *t);
kiln_status (*op_lazy_copy_hook)(kiln_tensor *dst, const kiln_tensor *src);
_Thread_local bool op_grad_enabled = true;
int (*op_lazy_hook)(int op, const op_val *args, int n_args, kiln_tensor **outs,
                    int max_outs);
int (*op_view_base_hook)(kiln_tensor *in, kiln_tensor **outs, int n_outs);
bool (*op_view_grad_hook)(kiln_tensor *t);

double op_val_num(const op_val *v) {
  switch (v->tag) {
  case OP_VAL_INT: return (double)v->i;
  case OP_VAL_FLOAT: return v->f;
  case OP_VAL_BOOL: return v->b ? 1.0 : 0.0;
  default: return NAN;
  }
}

bool op_val_is_num(const op_val *v) {
  return v->tag == OP_VAL_INT || v->tag == OP_VAL_FLOAT || v->tag == OP_VAL_BOOL;
}

void op_meta_of(const kiln_tensor *t, op_meta *m) {
  m->dtype = t->dtype;
  m->ndim = t->ndim;
  memcpy(m->shape, t->shape, sizeof m->shape);
}

char *op_val_desc(const op_val *v, char *buf, size_t n) {
  switch (v->tag) {
  case OP_VAL_TENSOR: return core_tensor_desc(v->t, buf, n);
  case OP_VAL_INT: snprintf(buf, n, "%lld", (long long)v->i); break;
  case OP_VAL_FLOAT: snprintf(buf, n, "%g", v->f); break;
  case OP_VAL_BOOL: snprintf(buf, n, "%s", v->b ? "True" : "False"); break;
  case OP_VAL_INTS: core_shape_str(v->ints.n, v->ints.v, buf, n); break;
  case OP_VAL_TENSORS: snprintf(buf, n, "Tensor[%d]", v->ts.n); break;
  case OP_VAL_STR: snprintf(buf, n, "'%s'", v->s); break;
  default: snprintf(buf, n, "None"); break;
  }
  return buf;
}

int op_slots(const op_val *args, int n_args, kiln_tensor **slot_tensors, int max) {
  int n = 0;
  for (int i = 0; i < n_args; i++) {
    if (args[i].tag == OP_VAL_TENSOR) {
      if (slot_tensors && n < max) slot_tensors[n] = args[i].t;
      n++;
    } else if (args[i].tag == OP_VAL_TENSORS) {
      for (int k = 0; k < args[i].ts.n; k++) {
        if (slot_tensors && n < max) slot_tensors[n] = args[i].ts.v[k];
        n++;
      }
    }
  }
  return n;
}

static bool any_lazy(const op_val *args, int n_args) {
  for (int i = 0; i < n_args; i++) {
    if (args[i].tag == OP_VAL_TENSOR && args[i].t->device == CORE_DEVICE_LAZY) return true;
    if (args[i].tag == OP_VAL_TENSORS)
      for (int k = 0; k < args[i].ts.n; k++)
        if (args[i].ts.v[k]->device == CORE_DEVICE_LAZY) return true;
  }
  return false;
}

/* (a view that has autograd state may have come to require grad: Note
 * [Views without history] in src/autograd/views.c) */
static bool requires_grad(kiln_tensor *t) {
  return t->requires_grad || (t->ag && op_view_grad_hook && op_view_grad_hook(t));
}

static bool any_requires_grad(const op_val *args, int n_args) {
  for (int i = 0; i < n_args; i++) {
    if (args[i].tag == OP_VAL_TENSOR && requires_grad(args[i].t)) return true;
    if (args[i].tag == OP_VAL_TENSORS)
      for (int k = 0; k < args[i].ts.n; k++)
        if (requires_grad(args[i].ts.v[k])) return true;
  }
  return false;
}

/* Does an output share the first argument's memory (a view)? */
static bool shares_first(const op_val *args, int n_args, kiln_tensor *const *outs, int n) {
  if (!n_args || args[0].tag != OP_VAL_TENSOR || !args[0].t->storage) return false;
  for (int i = 0; i < n; i++)
    if (outs[i] && outs[i] != args[0].t && outs[i]->storage == args[0].t->storage) return true;
  return false;
}

int op_infer_outs(int op, const op_val *args, int n_args, int max_outs, op_out_metas *m) {
  const op_info *info = &op_table[op];
  int cap = 4;
  m->v = m->small;
  if (info->flags & OPF_LIST_OUT) {
    cap = max_outs < OP_MAX_OUTS ? max_outs : OP_MAX_OUTS;
    op_meta *v = core_alloc((size_t)(cap > 0 ? cap : 1) * sizeof *v);
    if (!v) return KILN_ERR_NOMEM;
    m->v = v;
  }
  int n = op_widens(op, args, n_args) ? op_widen_infer(op, args, n_args, m->v, cap)
                                      : info->infer(args, n_args, m->v, cap);
  if (n > max_outs)
    return core_error(KILN_ERR_INVALID, "%s: produces %d outputs, room for %d", info->name, n,
                      max_outs);
  return n;
}

void op_out_metas_free(op_out_metas *m) {
  if (m->v != m->small) core_free(m->v);
  m->v = m->small;
}

static int call(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs) {
  const op_info *info;
  op_out_metas om; /* not zeroed: 4 metas are 300 bytes, and this is every op's path */
  op_meta *metas;
  int n = -1, rc;
  om.v = NULL;
  if (op < 0 || op >= OP_INDEX_COUNT || !op_table[op].name)
    return core_error(KILN_ERR_INVALID, "op_call: no op %d", op);
  info = &op_table[op];
  if (n_args != info->n_args)
    return core_error(KILN_ERR_INVALID, "%s: expected %d arguments, got %d", info->name,
                      info->n_args, n_args);
  for (int i = 0; i < n_args; i++)
    if (args[i].tag == OP_VAL_TENSORS && strcmp(op_arg_type(op, i), "Tensor?[]") != 0)
      for (int k = 0; k < args[i].ts.n; k++) /* a Tensor?[] holds None entries (index) */
        if (!args[i].ts.v[k])
          return core_error(KILN_ERR_INVALID, "%s: tensor %d of argument %d is NULL",
                            info->name, k, i);
  if (op_dtype_gate(op, args, n_args) < 0) return KILN_ERR_UNSUPPORTED;
  if (info->flags & OPF_DECOMPOSES) {
    if (!info->decompose)
      return core_error(KILN_ERR_UNSUPPORTED, "%s: not implemented", info->name);
    if (op_widens(op, args, n_args)) return op_widen_decompose(op, args, n_args, outs, max_outs);
    return info->decompose(args, n_args, outs, max_outs);
  }
  if (!info->infer || !info->cpu)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: not implemented", info->name);
  if (op_lazy_hook && any_lazy(args, n_args)) {
    /* Lazy: record a node; the outputs are data-less LAZY tensors. */
    n = op_lazy_hook(op, args, n_args, outs, max_outs);
    if (n < 0) return n;
    rc = 0;
    goto record;
  }
  if (op_widens(op, args, n_args)) { /* Note [Widening] in widen.c */
    if ((n = op_widen_run(op, args, n_args, outs, max_outs)) < 0) return n;
    rc = 0;
    goto record;
  }
  if (info->tiles && !(info->flags & (OPF_VIEW | OPF_ALLOCS))) {
    /* Note [Eager fast path]: an elementwise op is planned once, for its
     * output's shape and dtype and for its kernel (op_ew_infer and
     * op_ew_run would each plan); this is the dispatch-overhead path. */
    ew_plan p;
    if (max_outs < 1)
      return core_error(KILN_ERR_INVALID, "%s: produces 1 outputs, room for %d", info->name,
                        max_outs);
    if (op_ew_plan(op, args, n_args, &p) < 0) return KILN_ERR_INVALID;
    n = 1;
    outs[0] = core_tensor_new(p.ndim, p.shape, p.out_dtype);
    if (!outs[0]) {
      rc = KILN_ERR_NOMEM;
      goto fail;
    }
    core_threads_adapt(); /* Note [Busy cores] */
    rc = op_ew_run_plan(op, args, n_args, &p, outs[0]);
    if (rc < 0) goto fail;
    goto record;
  }
  n = op_infer_outs(op, args, n_args, max_outs, &om);
  metas = om.v;
  if (n < 0) goto done;
  memset(outs, 0, (size_t)n * sizeof *outs);
  if (!(info->flags & (OPF_VIEW | OPF_ALLOCS))) {
    for (int i = 0; i < n; i++) {
      outs[i] = core_tensor_new(metas[i].ndim, metas[i].shape, metas[i].dtype);
      if (!outs[i]) {
        rc = KILN_ERR_NOMEM;
        goto fail;
      }
    }
  }
  core_threads_adapt(); /* Note [Busy cores] */
  rc = info->cpu(args, n_args, outs, n);
  if (rc < 0) goto fail;
record:
  if (op_grad_enabled && op_autograd_hook && (info->flags & OPF_DIFF) &&
      any_requires_grad(args, n_args)) {
    rc = op_autograd_hook(op, args, n_args, outs, n);
    if (rc < 0) goto fail;
  } else if (op_view_base_hook && (info->flags & OPF_DIFF) && shares_first(args, n_args, outs, n)) {
    rc = op_view_base_hook(args[0].t, outs, n); /* Note [Views without history] */
    if (rc < 0) goto fail;
  }
  /* Room first: a registration that failed would release an output that
   * the caller then receives. */
  if (core_scope_reserve(n) < 0) {
    rc = KILN_ERR_NOMEM;
    goto fail;
  }
  for (int i = 0; i < n; i++) core_autorelease(outs[i]);
  goto done;
fail:
  for (int i = 0; i < n; i++) {
    kiln_release(outs[i]);
    outs[i] = NULL;
  }
  n = rc;
done:
  if (om.v) op_out_metas_free(&om);
  return n;
}

/* Note [Missing operand]: derivative formulas, decompositions and the
 * optimizers chain calls, so the NULL result of a call that ran out of
 * memory arrives at the next one as None, which refuses it ("operand 1
 * must be a tensor, got None"). When the thread's last error was an
 * out-of-memory and a None argument made the call fail as invalid, the
 * failure is the out-of-memory: it says so and keeps its status. */
int op_call(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs) {
  bool after_oom = kiln_last_status() == KILN_ERR_NOMEM;
  int n = call(op, args, n_args, outs, max_outs);
  if (n != KILN_ERR_INVALID || !after_oom) return n;
  for (int i = 0; i < n_args; i++)
    if (args[i].tag == OP_VAL_NONE) {
      char msg[900];
      snprintf(msg, sizeof msg, "%s", kiln_last_error());
      return core_error(KILN_ERR_NOMEM, "out of memory (a missing operand is the result of a "
                        "call that ran out of memory): %s", msg);
    }
  return n;
}

kiln_tensor *op_call1(int op, const op_val *args, int n_args) {
  kiln_tensor *out[4] = {0};
  int n = op_call(op, args, n_args, out, 4);
  if (n < 1) return NULL;
  /* Extra outputs (indices, masks) stay in the scope or are dropped. */
  if (core_scope_depth() == 0)
    for (int i = 1; i < n; i++) kiln_release(out[i]);
  return out[0];
}

int op_call_into(int op, const op_val *args, int n_args, kiln_tensor *out) {
  const op_info *info = &op_table[op];
  op_meta m;
  bool ew = info->flags & OPF_ELEMENTWISE, self_out = info->flags & OPF_SELF_OUT;
  if (!(ew || self_out) || n_args != info->n_args)
    return core_error(KILN_ERR_INVALID, "%s: cannot write into a given tensor", info->name);
  if (op_dtype_gate(op, args, n_args) < 0) return KILN_ERR_UNSUPPORTED;
  if (op_widens(op, args, n_args)) /* addmm into Half: its kernel has no Half */
    return core_error(KILN_ERR_UNSUPPORTED, "%s: cannot write a %s result in place", info->name,
                      kiln_dtype_name(out->dtype));
  if (self_out) {
    /* out is self, and no other argument reads its memory while it is written */
    bool ok = n_args > 0 && args[0].tag == OP_VAL_TENSOR && args[0].t == out;
    for (int i = 1; ok && i < n_args; i++)
      ok = args[i].tag != OP_VAL_TENSOR || args[i].t->storage != out->storage;
    if (!ok)
      return core_error(KILN_ERR_INVALID, "%s: can write only into its self, alone", info->name);
  }
  int n = ew ? op_ew_infer(op, args, n_args, &m) : info->infer(args, n_args, &m, 1);
  if (n < 0) return n;
  if (n != 1 || m.dtype != out->dtype || m.ndim != out->ndim ||
      memcmp(m.shape, out->shape, (size_t)m.ndim * sizeof *m.shape) || !core_is_contiguous(out))
    return core_error(KILN_ERR_INVALID, "%s: the result does not fit the given tensor", info->name);
  core_threads_adapt(); /* Note [Busy cores] */
  int rc = ew ? op_ew_run(op, args, n_args, out) : info->cpu(args, n_args, &out, 1);
  if (rc == 0) core_bump_version(out);
  return rc;
}

int op_arg_tensor(const char *fn, const op_val *a, const char *name, kiln_tensor **t) {
  char d[64];
  if (a->tag != OP_VAL_TENSOR || !a->t) {
    if (name)
      return core_error(KILN_ERR_INVALID, "%s: expected a tensor for '%s', got %s", fn, name,
                        op_val_desc(a, d, sizeof d));
    return core_error(KILN_ERR_INVALID, "%s: expected a tensor, got %s", fn,
                      op_val_desc(a, d, sizeof d));
  }
  if (t) *t = a->t;
  return 0;
}

int op_arg_int(const char *fn, const op_val *a, const char *name, int64_t *out) {
  char d[64];
  if (a->tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: expected an int for '%s', got %s", fn, name,
                      op_val_desc(a, d, sizeof d));
  *out = a->i;
  return 0;
}
