/* src/ops/factory.c: tensor factories (zeros, ones, full, arange,
 * linspace, eye, and the new_* / *_like forms). They read only numbers,
 * sizes and a ScalarType code; layout, device and pin_memory must be None
 * or their CPU defaults. Each decomposes into kiln_full / kiln_arange. */
#include <math.h>
#include <string.h>

#include "op.h"

/* A ScalarType? argument: None gives dflt. */
static int dtype_arg(const op_val *v, kiln_dtype dflt, kiln_dtype *out) {
  if (v->tag == OP_VAL_NONE) {
    *out = dflt;
    return 0;
  }
  if (v->tag != OP_VAL_INT) return core_error(KILN_ERR_INVALID, "dtype must be a ScalarType");
  return op_dtype_from_code(v->i, out);
}

/* An int[] size (or one int). */
static int size_arg(const char *fn, const op_val *v, int *nd, const int64_t **sh) {
  if (v->tag == OP_VAL_INT) {
    *nd = 1;
    *sh = &v->i;
  } else if (v->tag == OP_VAL_INTS) {
    *nd = v->ints.n;
    *sh = v->ints.v;
  } else {
    return core_error(KILN_ERR_INVALID, "%s: size must be a list of ints", fn);
  }
  if (*nd > KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: at most %d dims, got %d", fn, KILN_MAX_DIMS, *nd);
  for (int i = 0; i < *nd; i++)
    if ((*sh)[i] < 0)
      return core_error(KILN_ERR_INVALID, "%s: Trying to create tensor with negative dimension "
                                          "%lld: %s", fn, (long long)(*sh)[i], "size");
  return 0;
}

/* The dtype a fill value implies: bool, int64 or float32. */
static kiln_dtype value_dtype(const op_val *v) {
  if (v->tag == OP_VAL_BOOL) return KILN_DTYPE_BOOL;
  if (v->tag == OP_VAL_INT) return KILN_DTYPE_I64;
  return KILN_DTYPE_F32;
}

static kiln_tensor *filled(const char *fn, const op_val *size, double value, const op_val *dt,
                           kiln_dtype dflt) {
  int nd = 0;
  const int64_t *sh = NULL;
  kiln_dtype d;
  if (size_arg(fn, size, &nd, &sh) < 0 || dtype_arg(dt, dflt, &d) < 0) return NULL;
  return kiln_full(nd, sh, value, d);
}

/* zeros/ones(size, dtype, layout, device, pin_memory) */
int op_zeros_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(filled("aten::zeros", &a[0], 0, &a[1], KILN_DTYPE_F32), outs);
}
int op_ones_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(filled("aten::ones", &a[0], 1, &a[1], KILN_DTYPE_F32), outs);
}
/* empty(size, dtype, layout, device, pin_memory, memory_format): PyTorch
 * leaves the contents unspecified; kiln hands out zeros, so that no stale
 * memory is ever read */
int op_empty_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_out1(filled("aten::empty", &a[0], 0, &a[1], KILN_DTYPE_F32), outs);
}
/* full(size, fill_value, dtype, ...): the dtype follows the value when None */
int op_full_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  if (!op_val_is_num(&a[1]))
    return core_error(KILN_ERR_INVALID, "aten::full: fill_value must be a number");
  return op_out1(filled("aten::full", &a[0], op_val_num(&a[1]), &a[2], value_dtype(&a[1])), outs);
}
/* new_zeros/new_ones(self, size, dtype, ...): self's dtype when None */
static int new_filled(const char *fn, const op_val *a, double v, const op_val *dt,
                      kiln_tensor **outs) {
  kiln_tensor *t;
  int rc = op_arg_tensor(fn, &a[0], "self", &t);
  if (rc < 0) return rc;
  return op_out1(filled(fn, &a[1], v, dt, t->dtype), outs);
}
int op_new_zeros_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return new_filled("aten::new_zeros", a, 0, &a[2], outs);
}
int op_new_ones_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return new_filled("aten::new_ones", a, 1, &a[2], outs);
}
int op_new_full_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  if (!op_val_is_num(&a[2]))
    return core_error(KILN_ERR_INVALID, "aten::new_full: fill_value must be a number");
  return new_filled("aten::new_full", a, op_val_num(&a[2]), &a[3], outs);
}
/* full_like(self, fill_value, dtype, layout, device, pin_memory, memory_format) */
int op_full_like_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *t;
  kiln_dtype d;
  int rc = op_arg_tensor("aten::full_like", &a[0], "self", &t);
  if (rc < 0) return rc;
  if (!op_val_is_num(&a[1]))
    return core_error(KILN_ERR_INVALID, "aten::full_like: fill_value must be a number");
  if ((rc = dtype_arg(&a[2], t->dtype, &d)) < 0) return rc;
  return op_out1(kiln_full(t->ndim, t->shape, op_val_num(&a[1]), d), outs);
}

/* arange: int64 when every bound is an int, else float32 (or dtype). */
static int arange(const op_val *start, const op_val *end, const op_val *step, const op_val *dt,
                  kiln_tensor **outs) {
  const char *fn = "aten::arange";
  if ((start && !op_val_is_num(start)) || !op_val_is_num(end) || (step && !op_val_is_num(step)))
    return core_error(KILN_ERR_INVALID, "%s: start, end and step must be numbers", fn);
  bool ints = (!start || start->tag == OP_VAL_INT) && end->tag == OP_VAL_INT &&
              (!step || step->tag == OP_VAL_INT);
  kiln_dtype d;
  int rc = dtype_arg(dt, ints ? KILN_DTYPE_I64 : KILN_DTYPE_F32, &d);
  if (rc < 0) return rc;
  double s = start ? op_val_num(start) : 0, e = op_val_num(end), st = step ? op_val_num(step) : 1;
  if (st == 0) return core_error(KILN_ERR_INVALID, "%s: step must be nonzero", fn);
  if (!isfinite(s) || !isfinite(e))
    return core_error(KILN_ERR_INVALID, "%s: unsupported range: %g -> %g", fn, s, e);
  if ((st > 0 && e < s) || (st < 0 && e > s))
    return core_error(KILN_ERR_INVALID, "%s: upper bound and larger bound inconsistent with step "
                                        "sign", fn);
  return op_out1(kiln_arange(s, e, st, d), outs);
}
int op_arange_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return arange(NULL, &a[0], NULL, &a[1], outs);
}
int op_arange_start_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return arange(&a[0], &a[1], NULL, &a[2], outs);
}
int op_arange_step_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return arange(&a[0], &a[1], &a[2], &a[3], outs);
}

/* linspace(start, end, steps, dtype, ...): PyTorch's two-sided formula
 * (the first half from start, the second from end), computed in float64 */
int op_linspace_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linspace";
  if (!op_val_is_num(&a[0]) || !op_val_is_num(&a[1]) || a[2].tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: expected (number, number, int)", fn);
  int64_t steps = a[2].i;
  if (steps < 0) return core_error(KILN_ERR_INVALID, "%s: number of steps must be non-negative", fn);
  kiln_dtype d;
  int rc = dtype_arg(&a[3], KILN_DTYPE_F32, &d);
  if (rc < 0) return rc;
  double s = op_val_num(&a[0]), e = op_val_num(&a[1]);
  kiln_tensor *t = kiln_zeros(1, &steps, KILN_DTYPE_F64);
  if (!t) return KILN_ERR_NOMEM;
  double *p = kiln_tensor_data(t), step = steps > 1 ? (e - s) / (double)(steps - 1) : 0;
  int64_t half = steps / 2;
  for (int64_t i = 0; i < steps; i++)
    p[i] = i < half ? s + step * (double)i : e - step * (double)(steps - 1 - i);
  if (steps == 1) p[0] = s;
  if (d == KILN_DTYPE_F32 && steps > 1) {
    /* PyTorch computes float32 linspace in float32 */
    float fs = (float)s, fe = (float)e, fstep = steps > 1 ? (fe - fs) / (float)(steps - 1) : 0;
    for (int64_t i = 0; i < steps; i++)
      p[i] = i < half ? fs + fstep * (float)i : fe - fstep * (float)(steps - 1 - i);
  }
  return op_out1(kiln_to_dtype(t, d), outs);
}

/* eye(n, m=n, dtype, ...) */
static int eye(const op_val *nv, const op_val *mv, const op_val *dt, kiln_tensor **outs) {
  const char *fn = "aten::eye";
  if (nv->tag != OP_VAL_INT || (mv && mv->tag != OP_VAL_INT))
    return core_error(KILN_ERR_INVALID, "%s: n and m must be ints", fn);
  int64_t sh[2] = {nv->i, mv ? mv->i : nv->i};
  if (sh[0] < 0 || sh[1] < 0)
    return core_error(KILN_ERR_INVALID, "%s: n must be greater or equal to 0, got %lld", fn,
                      (long long)(sh[0] < 0 ? sh[0] : sh[1]));
  kiln_dtype d;
  int rc = dtype_arg(dt, KILN_DTYPE_F32, &d);
  if (rc < 0) return rc;
  kiln_tensor *t = kiln_zeros(2, sh, KILN_DTYPE_F64);
  if (!t) return KILN_ERR_NOMEM;
  double *p = kiln_tensor_data(t);
  for (int64_t i = 0; i < sh[0] && i < sh[1]; i++) p[i * sh[1] + i] = 1;
  return op_out1(kiln_to_dtype(t, d), outs);
}
int op_eye_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return eye(&a[0], NULL, &a[1], outs);
}
int op_eye_m_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return eye(&a[0], &a[1], &a[2], outs);
}
