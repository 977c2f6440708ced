/* src/ops/widen.c: running an op that has no kernel for a narrow dtype
 * (Int, Short, Char, Byte, Half, BFloat16) in a wide one (Long, Float)
 * and giving back results of the narrow dtype, by the rule its NARROW row
 * in ops.def declares (Note [Widening]). */
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* Note [Widening]: most kernels were written for Float, Double, Long and
 * Bool. An op whose NARROW row in ops.def (the table's last block) names
 * NW_HALF takes Half and BFloat16 tensors: they compute in float32 and
 * every float32 result is rounded (to nearest even) to the inputs' half
 * type (below), as PyTorch's CPU kernels do (they accumulate in
 * float32, "opmath"); integer (index) and bool results keep their dtype.
 * NW_INT takes Int, Short, Char and Byte: they compute in int64, exact for
 * the ring ops, and the first result (every result of a list-returning op)
 * is cast back with wrap-around when it is int64; NW_INT_LONG leaves it
 * int64 (PyTorch's sum, prod and cumsum of an int8 tensor are int64). The
 * narrow dtype is the first tensor argument's, leaving out the ones named
 * index, indices, repeats or sorter (gather's int64 index does not make an
 * int8 result int64), promoted over a Tensor[] (cat of int8 and int16 is
 * int16): PyTorch's result dtype for these ops. NW_SAME marks a composite
 * op whose decomposition is views (split, movedim, diagonal): it runs on
 * the narrow tensors as they are, so its results stay views.
 *
 * The widening is below autograd: call() (dispatch.c) runs the kernel on
 * wide copies of the narrow arguments (op_widen_run), converts the
 * results and records the op on the narrow arguments and results, so the derivative formula runs on the narrow
 * tensors and gradients of half tensors are half, as in PyTorch. A
 * mutable argument (batch_norm's running statistics, "Tensor(a!)") is
 * written back into the narrow tensor. A composite op (OPF_DECOMPOSES)
 * runs its decomposition on `to` copies instead (op_widen_decompose), so
 * its intermediates stay in float32 and the rounding happens once; its
 * gradient reaches the narrow inputs through `to`, again in their dtype.
 * Lazy recording and the IR infer the narrow results' metadata through
 * op_infer_outs (op_widen_infer). An op without a row, or given a dtype
 * its row does not name, refuses
 * ("<op>: not implemented for dtype Char", op_dtype_gate) as PyTorch does
 * for the combinations it lacks. */

static const unsigned char rules[KILN_OP_COUNT] = {
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)
#define EW OP
#define NARROW(ENUM, rule) [KILN_OP_##ENUM] = (rule),
#include "ops.def"
#undef NARROW
#undef OP
#undef EW
};

unsigned op_narrow_rule(int op) {
  return op >= 0 && op < KILN_OP_COUNT ? rules[op] : 0;
}

static bool is_half(kiln_dtype dt) { return dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16; }

/* the wide dtype a narrow one computes in */
static kiln_dtype wide_of(kiln_dtype dt) {
  if (!core_dtype_is_extended(dt)) return dt;
  return is_half(dt) ? KILN_DTYPE_F32 : KILN_DTYPE_I64;
}

bool op_widen_takes(int op, kiln_dtype dt) {
  unsigned r = op_narrow_rule(op);
  if (r & NW_SAME) return true;
  return is_half(dt) ? (r & NW_HALF) != 0 : (r & (NW_INT | NW_INT_LONG)) != 0;
}

static bool any_extended(const op_val *args, int n_args) {
  for (int i = 0; i < n_args; i++) {
    if (args[i].tag == OP_VAL_TENSOR && args[i].t && core_dtype_is_extended(args[i].t->dtype))
      return true;
    if (args[i].tag == OP_VAL_TENSORS)
      for (int k = 0; k < args[i].ts.n; k++)
        if (args[i].ts.v[k] && core_dtype_is_extended(args[i].ts.v[k]->dtype)) return true;
  }
  return false;
}

bool op_widens(int op, const op_val *args, int n_args) {
  return op >= 0 && op < KILN_OP_COUNT && rules[op] && !(rules[op] & NW_SAME) &&
         any_extended(args, n_args);
}

static bool index_like(int op, int i) {
  const char *n = op_arg_name(op, i);
  return n && (!strcmp(n, "index") || !strcmp(n, "indices") || !strcmp(n, "repeats") ||
               !strcmp(n, "sorter"));
}

/* whether argument i is written ("Tensor(a!)" in the schema) */
static bool arg_mutable(int op, int i) {
  const char *p = strchr(op_table[op].schema, '(');
  int depth = 0, k = 0;
  for (p = p ? p + 1 : ""; *p && depth >= 0; p++) {
    if (*p == '(') depth++;
    else if (*p == ')') depth--;
    else if (*p == ',' && depth == 0) k++;
    else if (*p == '!' && k == i) return true;
  }
  return false;
}

/* the narrow dtype results are given back in: the first tensor
 * argument's (an index argument left out), promoted over its list when it
 * is a Tensor[] (cat) */
static kiln_dtype target_of(int op, const op_val *args, int n_args) {
  for (int i = 0; i < n_args; i++) {
    if (index_like(op, i)) continue;
    if (args[i].tag == OP_VAL_TENSOR && args[i].t) return args[i].t->dtype;
    if (args[i].tag == OP_VAL_TENSORS && args[i].ts.n > 0) {
      kiln_dtype dt = KILN_DTYPE_COUNT;
      for (int k = 0; k < args[i].ts.n; k++)
        if (args[i].ts.v[k])
          dt = dt == KILN_DTYPE_COUNT ? args[i].ts.v[k]->dtype
                                      : kiln_promote_types(dt, args[i].ts.v[k]->dtype);
      return dt;
    }
  }
  return KILN_DTYPE_COUNT;
}

/* the dtype result k (of n) takes when its kernel gave `wide` */
static kiln_dtype narrow_of(int op, kiln_dtype target, int k, kiln_dtype wide) {
  unsigned r = rules[op];
  if (wide == KILN_DTYPE_F32 && is_half(target)) return target;
  if (wide == KILN_DTYPE_I64 && core_dtype_is_extended(target) && !is_half(target) &&
      (r & NW_INT) && (k == 0 || (op_table[op].flags & OPF_LIST_OUT)))
    return target;
  return wide;
}

/* Wide stand-ins for the arguments: new converted tensors, or with meta
 * (inference of lazy tensors, which have no data) struct copies that only
 * carry metadata.
 * The arrays are freed by free_wide. */
typedef struct wide_args {
  op_val *v;
  kiln_tensor *metas;   /* meta copies, one per tensor */
  kiln_tensor **ptrs;   /* list elements */
  kiln_tensor **owned;  /* converted tensors (kernel mode) */
  int n_owned;
} wide_args;

static void free_wide(wide_args *w) {
  for (int i = 0; i < w->n_owned; i++) kiln_release(w->owned[i]);
  core_free(w->v);
  core_free(w->metas);
  core_free(w->ptrs);
  core_free(w->owned);
  memset(w, 0, sizeof *w);
}

static kiln_tensor *widen_one(wide_args *w, kiln_tensor *t, bool meta, int *mi) {
  if (!t || !core_dtype_is_extended(t->dtype)) return t;
  kiln_dtype dt = wide_of(t->dtype);
  /* a CPU tensor is converted even for inference: some infer functions
   * read the data (nonzero's, masked_select's result shapes) */
  if (meta && (t->device == CORE_DEVICE_LAZY || !t->storage)) {
    kiln_tensor *m = &w->metas[(*mi)++];
    memcpy(m, t, sizeof *m); /* read as metadata only: no reference taken */
    m->dtype = dt;
    return m;
  }
  kiln_tensor *c = core_tensor_new(t->ndim, t->shape, dt);
  if (!c) return NULL;
  op_copy_into(c, t);
  c->wrapped_number = t->wrapped_number;
  w->owned[w->n_owned++] = c;
  return c;
}

static int make_wide(const op_val *args, int n_args, bool meta, wide_args *w) {
  int n_t = 0, n_list = 0, mi = 0, li = 0;
  memset(w, 0, sizeof *w);
  for (int i = 0; i < n_args; i++) {
    if (args[i].tag == OP_VAL_TENSOR) n_t++;
    if (args[i].tag == OP_VAL_TENSORS) n_t += args[i].ts.n, n_list += args[i].ts.n;
  }
  w->v = core_alloc((size_t)(n_args > 0 ? n_args : 1) * sizeof *w->v);
  w->metas = core_alloc((size_t)(n_t > 0 ? n_t : 1) * sizeof *w->metas);
  w->ptrs = core_alloc((size_t)(n_list > 0 ? n_list : 1) * sizeof *w->ptrs);
  w->owned = core_alloc((size_t)(n_t > 0 ? n_t : 1) * sizeof *w->owned);
  if (!w->v || !w->metas || !w->ptrs || !w->owned) goto oom;
  for (int i = 0; i < n_args; i++) {
    w->v[i] = args[i];
    if (args[i].tag == OP_VAL_TENSOR) {
      w->v[i].t = widen_one(w, args[i].t, meta, &mi);
      if (args[i].t && !w->v[i].t) goto oom;
    } else if (args[i].tag == OP_VAL_TENSORS) {
      kiln_tensor **p = w->ptrs + li;
      for (int k = 0; k < args[i].ts.n; k++) {
        p[k] = widen_one(w, args[i].ts.v[k], meta, &mi);
        if (args[i].ts.v[k] && !p[k]) goto oom;
      }
      li += args[i].ts.n;
      w->v[i].ts.v = p;
    }
  }
  return 0;
oom:
  free_wide(w);
  return KILN_ERR_NOMEM;
}

int op_widen_infer(int op, const op_val *args, int n_args, op_meta *outs, int max_outs) {
  wide_args w;
  int rc = make_wide(args, n_args, true, &w);
  if (rc < 0) return rc;
  int n = op_table[op].infer(w.v, n_args, outs, max_outs);
  kiln_dtype target = target_of(op, args, n_args);
  for (int k = 0; k < n && k < max_outs; k++)
    outs[k].dtype = narrow_of(op, target, k, outs[k].dtype);
  free_wide(&w);
  return n;
}

int op_widen_run(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs) {
  const op_info *info = &op_table[op];
  wide_args w;
  op_out_metas om;
  kiln_tensor *small[4] = {0}, **wout = small;
  om.v = NULL;
  int n = make_wide(args, n_args, false, &w), rc = n;
  if (rc < 0) return rc;
  if ((n = rc = op_infer_outs(op, w.v, n_args, max_outs, &om)) < 0) goto done;
  if (n > 4 && !(wout = core_alloc((size_t)n * sizeof *wout))) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  memset(wout, 0, (size_t)n * sizeof *wout);
  memset(outs, 0, (size_t)n * sizeof *outs);
  if (!(info->flags & (OPF_VIEW | OPF_ALLOCS)))
    for (int k = 0; k < n; k++)
      if (!(wout[k] = core_tensor_new(om.v[k].ndim, om.v[k].shape, om.v[k].dtype))) {
        rc = KILN_ERR_NOMEM;
        goto done;
      }
  if ((rc = info->cpu(w.v, n_args, wout, n)) < 0) goto done;
  /* mutable arguments (running statistics) back into their narrow tensors */
  for (int i = 0; i < n_args; i++)
    if (args[i].tag == OP_VAL_TENSOR && args[i].t && w.v[i].t != args[i].t && arg_mutable(op, i)) {
      op_copy_into(args[i].t, w.v[i].t);
      core_bump_version(args[i].t);
    }
  kiln_dtype target = target_of(op, args, n_args);
  for (int k = 0; k < n; k++) {
    kiln_dtype dt = narrow_of(op, target, k, wout[k]->dtype);
    if (dt == wout[k]->dtype) {
      outs[k] = wout[k];
      wout[k] = NULL;
      continue;
    }
    if (!(outs[k] = core_tensor_new(wout[k]->ndim, wout[k]->shape, dt))) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    op_copy_into(outs[k], wout[k]);
  }
  rc = n;
done:
  if (rc < 0 && n > 0)
    for (int k = 0; k < n; k++) {
      kiln_release(outs[k]);
      outs[k] = NULL;
    }
  if (n > 0)
    for (int k = 0; k < n; k++) kiln_release(wout[k]);
  if (wout != small) core_free(wout);
  if (om.v) op_out_metas_free(&om);
  free_wide(&w);
  return rc;
}

static kiln_tensor *to_dtype(kiln_tensor *t, kiln_dtype dt) {
  return op_call1(KILN_OP_TO, (op_val[]){OPV_T(t), OPV_I(op_dtype_code(dt)), OPV_B(false),
                                         OPV_B(false), OPV_NONE}, 5);
}

int op_widen_decompose(int op, const op_val *args, int n_args, kiln_tensor **outs,
                       int max_outs) {
  const op_info *info = &op_table[op];
  op_val sv[16], *v = n_args <= 16 ? sv : core_alloc((size_t)n_args * sizeof *v);
  int n_list = 0, li = 0, n = KILN_ERR_NOMEM;
  for (int i = 0; i < n_args; i++)
    if (args[i].tag == OP_VAL_TENSORS) n_list += args[i].ts.n;
  kiln_tensor **ptrs = core_alloc((size_t)(n_list > 0 ? n_list : 1) * sizeof *ptrs);
  if (!v || !ptrs) goto done;
  for (int i = 0; i < n_args; i++) {
    v[i] = args[i];
    if (args[i].tag == OP_VAL_TENSOR && args[i].t &&
        core_dtype_is_extended(args[i].t->dtype)) {
      if (!(v[i].t = to_dtype(args[i].t, wide_of(args[i].t->dtype)))) goto failed;
    } else if (args[i].tag == OP_VAL_TENSORS) {
      kiln_tensor **p = ptrs + li;
      for (int k = 0; k < args[i].ts.n; k++) {
        kiln_tensor *t = args[i].ts.v[k];
        p[k] = t && core_dtype_is_extended(t->dtype) ? to_dtype(t, wide_of(t->dtype)) : t;
        if (t && !p[k]) goto failed;
      }
      li += args[i].ts.n;
      v[i].ts.v = p;
    }
  }
  n = info->decompose(v, n_args, outs, max_outs);
  if (n < 0) goto done;
  /* mutable arguments (running statistics) back into their narrow tensors */
  for (int i = 0; i < n_args; i++)
    if (args[i].tag == OP_VAL_TENSOR && args[i].t && v[i].t != args[i].t &&
        arg_mutable(op, i) && kiln_copy_(args[i].t, v[i].t) != KILN_OK)
      goto failed;
  kiln_dtype target = target_of(op, args, n_args);
  for (int k = 0; k < n; k++) {
    kiln_dtype dt = narrow_of(op, target, k, outs[k]->dtype);
    if (dt == outs[k]->dtype) continue;
    if (!(outs[k] = to_dtype(outs[k], dt))) goto failed;
  }
  goto done;
failed:
  n = op_failed_status();
done:
  if (v != sv) core_free(v);
  core_free(ptrs);
  return n;
}
