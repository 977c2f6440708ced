/* src/ops/pool.c: average pooling (adaptive and windowed, 1-d and 2-d) and
 * padding (constant, reflect, replicate, circular) as decompositions.
 *
 * Note [Separable pooling]: an average pool over H x W windows is a
 * product of one-dimensional averages: every window's divisor (with or
 * without padding counted, ceil_mode, adaptive bounds) is the product of
 * its row and column extents, so out = Ph @ x @ Pw^T with Ph [OH, H] and
 * Pw [OW, W] holding 1/extent over each window. Two matmuls: their
 * derivative comes free, and BLAS runs them. Adaptive windows that tile
 * the plane (H, W divisible by the output size; the 1x1 of every
 * classifier head) are a plain block mean instead: one reduction, not
 * two matmuls over N*C tiny batches. */
#include <math.h>
#include <string.h>

#include "op.h"

/* A [o, n] averaging matrix (dtype dt); starts/ends per output row and a
 * divisor per row (0: the window's extent). */
static kiln_tensor *avg_matrix(int64_t o, int64_t n, const int64_t *lo, const int64_t *hi,
                               const double *div, kiln_dtype dt) {
  int64_t sh[2] = {o, n};
  kiln_tensor *m = kiln_zeros(2, sh, KILN_DTYPE_F64);
  if (!m) return NULL;
  double *p = kiln_tensor_data(m);
  for (int64_t i = 0; i < o; i++)
    for (int64_t j = lo[i]; j < hi[i]; j++) p[i * n + j] = 1.0 / div[i];
  return kiln_to_dtype(m, dt);
}

/* adaptive windows: [floor(i n / o), ceil((i + 1) n / o)) */
static kiln_tensor *adaptive_matrix(int64_t o, int64_t n, kiln_dtype dt) {
  int64_t *lo = core_alloc((size_t)(2 * o + 1) * sizeof *lo), *hi = lo ? lo + o : NULL;
  double *div = core_alloc((size_t)(o + 1) * sizeof *div);
  kiln_tensor *m = NULL;
  if (lo && div) {
    for (int64_t i = 0; i < o; i++) {
      lo[i] = (i * n) / o;
      hi[i] = ((i + 1) * n + o - 1) / o;
      div[i] = (double)(hi[i] - lo[i]);
    }
    m = avg_matrix(o, n, lo, hi, div, dt);
  } else {
    core_error(KILN_ERR_NOMEM, "out of memory");
  }
  core_free(lo);
  core_free(div);
  return m;
}

/* x [..., n] averaged along its last dim by M [o, n]: x @ M^T */
static kiln_tensor *apply_last(kiln_tensor *x, kiln_tensor *m) {
  return m ? kiln_matmul(x, kiln_t(m)) : NULL;
}
/* x [..., n, w] along dim -2: M @ x */
static kiln_tensor *apply_rows(kiln_tensor *x, kiln_tensor *m) {
  return m ? kiln_matmul(m, x) : NULL;
}

static int float_4d(const char *fn, const op_val *a, int lo_nd, int hi_nd, kiln_tensor **x) {
  char d[64];
  int rc = op_arg_tensor(fn, a, "self", x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating((*x)->dtype))
    return core_error(KILN_ERR_INVALID, "%s: not implemented for %s", fn,
                      core_tensor_desc(*x, d, sizeof d));
  if ((*x)->ndim < lo_nd || (*x)->ndim > hi_nd)
    return core_error(KILN_ERR_INVALID, "%s: Expected %dD or %dD tensor, but got %s", fn, lo_nd,
                      hi_nd, core_tensor_desc(*x, d, sizeof d));
  return 0;
}

/* An int[k] argument (one int repeats). */
static int intk(const char *fn, const op_val *v, const char *name, int k, int64_t *out,
                int64_t dflt, bool allow_empty) {
  if (v->tag == OP_VAL_INT) {
    for (int i = 0; i < k; i++) out[i] = v->i;
    return 0;
  }
  if (v->tag == OP_VAL_INTS && v->ints.n == 0 && allow_empty) {
    for (int i = 0; i < k; i++) out[i] = dflt;
    return 0;
  }
  if (v->tag == OP_VAL_INTS && (v->ints.n == k || v->ints.n == 1)) {
    for (int i = 0; i < k; i++) out[i] = v->ints.v[v->ints.n == 1 ? 0 : i];
    return 0;
  }
  return core_error(KILN_ERR_INVALID, "%s: %s must be an int or a list of %d ints", fn, name, k);
}

int op_adaptive_avg_pool2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::adaptive_avg_pool2d";
  kiln_tensor *x;
  int64_t os[2];
  int rc;
  if ((rc = float_4d(fn, &a[0], 3, 4, &x)) < 0 || (rc = intk(fn, &a[1], "output_size", 2, os, 0, false)) < 0)
    return rc;
  int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
  if (os[0] < 0 || os[1] < 0)
    return core_error(KILN_ERR_INVALID, "%s: output_size must be non-negative", fn);
  for (int i = 1; i < x->ndim; i++)
    if (x->shape[i] == 0)
      return core_error(KILN_ERR_INVALID, "%s: Expected input to have non-zero size for non-batch "
                                          "dimensions", fn);
  if (os[0] > 0 && os[1] > 0 && H % os[0] == 0 && W % os[1] == 0) {
    /* equal windows that tile the plane: a mean over each (H/oh, W/ow)
     * block, as PyTorch itself computes the 1x1 case (input.mean({-1,-2})) */
    if (os[0] == 1 && os[1] == 1)
      return op_out1(kiln_mean(x, (int64_t[]){-2, -1}, 2, true), outs);
    int64_t sh[6];
    int nd = x->ndim - 2;
    for (int i = 0; i < nd; i++) sh[i] = x->shape[i];
    sh[nd] = os[0], sh[nd + 1] = H / os[0], sh[nd + 2] = os[1], sh[nd + 3] = W / os[1];
    return op_out1(kiln_mean(kiln_reshape(x, nd + 4, sh), (int64_t[]){-3, -1}, 2, false), outs);
  }
  kiln_tensor *r = apply_rows(x, adaptive_matrix(os[0], H, x->dtype));
  return op_out1(r ? apply_last(r, adaptive_matrix(os[1], W, x->dtype)) : NULL, outs);
}
int op_adaptive_avg_pool1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::adaptive_avg_pool1d";
  kiln_tensor *x;
  int64_t os[1];
  int rc;
  if ((rc = float_4d(fn, &a[0], 2, 3, &x)) < 0 || (rc = intk(fn, &a[1], "output_size", 1, os, 0, false)) < 0)
    return rc;
  if (os[0] < 0) return core_error(KILN_ERR_INVALID, "%s: output_size must be non-negative", fn);
  return op_out1(apply_last(x, adaptive_matrix(os[0], x->shape[x->ndim - 1], x->dtype)), outs);
}

/* One dim of a windowed average pool (Note [Separable pooling]). */
static kiln_tensor *window_matrix(const char *fn, int64_t n, int64_t k, int64_t s, int64_t p,
                                  bool ceil_mode, bool include_pad, bool override,
                                  kiln_dtype dt, int64_t *o_out) {
  if (k <= 0 || s <= 0) {
    core_error(KILN_ERR_INVALID, "%s: kernel_size and stride must be positive", fn);
    return NULL;
  }
  if (p < 0 || 2 * p > k) {
    core_error(KILN_ERR_INVALID, "%s: pad should be at most half of kernel size, but got pad=%lld "
                                 "and kernel_size=%lld", fn, (long long)p, (long long)k);
    return NULL;
  }
  int64_t num = n + 2 * p - k;
  if (num < 0) {
    core_error(KILN_ERR_INVALID, "%s: Output size is too small (input %lld, kernel %lld, padding "
                                 "%lld)", fn, (long long)n, (long long)k, (long long)p);
    return NULL;
  }
  int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (o - 1) * s >= n + p) o--;
  int64_t *lo = core_alloc((size_t)(2 * o + 1) * sizeof *lo), *hi = lo ? lo + o : NULL;
  double *div = core_alloc((size_t)(o + 1) * sizeof *div);
  kiln_tensor *m = NULL;
  if (lo && div) {
    for (int64_t i = 0; i < o; i++) {
      int64_t st = i * s - p, en = st + k < n + p ? st + k : n + p;
      double size = (double)(en - st);
      st = st < 0 ? 0 : st;
      en = en > n ? n : en;
      if (!include_pad) size = (double)(en - st);
      lo[i] = st;
      hi[i] = en;
      div[i] = override ? 1.0 : size;
    }
    m = avg_matrix(o, n, lo, hi, div, dt);
  }
  core_free(lo);
  core_free(div);
  *o_out = o;
  return m;
}

static bool flag(const op_val *v, bool dflt) { return v->tag == OP_VAL_BOOL ? v->b : dflt; }

/* Integer inputs (avg_pool1d/2d/3d): the float64 mean, truncated toward
 * zero as PyTorch's integer division is (a quotient's fraction is at least
 * 1/divisor away from an integer, so the nudge past rounding is safe). */
int op_avg_pool_int(const op_val *a, int n, kiln_tensor **outs, int max,
                    int (*f)(const op_val *, int, kiln_tensor **, int)) {
  op_val c[8];
  if (n > 8) return core_error(KILN_ERR_INVALID, "avg_pool: too many arguments");
  memcpy(c, a, (size_t)n * sizeof *c);
  kiln_tensor *x = a[0].t, *xd = kiln_to_dtype(x, KILN_DTYPE_F64), *r[1];
  if (!xd) return op_failed_status();
  c[0] = OPV_T(xd);
  int rc = f(c, n, r, max);
  if (rc < 0) return rc;
  kiln_tensor *v = kiln_add(r[0], kiln_mul_scalar(kiln_sign(r[0]), 1e-7));
  return op_out1(v ? kiln_to_dtype(v, x->dtype) : NULL, outs);
}
static bool int_input(const op_val *v) {
  return v->tag == OP_VAL_TENSOR && !core_dtype_is_floating(v->t->dtype) &&
         v->t->dtype != KILN_DTYPE_BOOL;
}

int op_avg_pool2d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::avg_pool2d";
  kiln_tensor *x;
  if (int_input(&a[0])) return op_avg_pool_int(a, n, outs, max, op_avg_pool2d_decompose);
  int64_t k[2], s[2], p[2], o[2];
  int rc;
  if ((rc = float_4d(fn, &a[0], 3, 4, &x)) < 0 ||
      (rc = intk(fn, &a[1], "kernel_size", 2, k, 0, false)) < 0 ||
      (rc = intk(fn, &a[2], "stride", 2, s, 0, true)) < 0 ||
      (rc = intk(fn, &a[3], "padding", 2, p, 0, false)) < 0)
    return rc;
  if (a[2].tag == OP_VAL_INTS && a[2].ints.n == 0) s[0] = k[0], s[1] = k[1];
  bool cm = flag(&a[4], false), inc = flag(&a[5], true), ov = a[6].tag == OP_VAL_INT;
  if (ov && a[6].i == 0) return core_error(KILN_ERR_INVALID, "%s: divisor must be not zero", fn);
  int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1];
  kiln_tensor *mh = window_matrix(fn, H, k[0], s[0], p[0], cm, inc, ov, x->dtype, &o[0]);
  kiln_tensor *mw = mh ? window_matrix(fn, W, k[1], s[1], p[1], cm, inc, ov, x->dtype, &o[1]) : NULL;
  if (!mw) return KILN_ERR_INVALID;
  kiln_tensor *r = apply_last(apply_rows(x, mh), mw);
  if (r && ov) r = kiln_mul_scalar(r, 1.0 / (double)a[6].i);
  return op_out1(r, outs);
}
int op_avg_pool1d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::avg_pool1d";
  kiln_tensor *x;
  if (int_input(&a[0])) return op_avg_pool_int(a, n, outs, max, op_avg_pool1d_decompose);
  int64_t k[1], s[1], p[1], o[1];
  int rc;
  if ((rc = float_4d(fn, &a[0], 2, 3, &x)) < 0 ||
      (rc = intk(fn, &a[1], "kernel_size", 1, k, 0, false)) < 0 ||
      (rc = intk(fn, &a[2], "stride", 1, s, 0, true)) < 0 ||
      (rc = intk(fn, &a[3], "padding", 1, p, 0, false)) < 0)
    return rc;
  if (a[2].tag == OP_VAL_INTS && a[2].ints.n == 0) s[0] = k[0];
  kiln_tensor *m = window_matrix(fn, x->shape[x->ndim - 1], k[0], s[0], p[0], flag(&a[4], false),
                                 flag(&a[5], true), false, x->dtype, &o[0]);
  return op_out1(apply_last(x, m), outs);
}

/* ---- padding ---------------------------------------------------------------------------- */
/* One dim of constant padding: negative amounts crop. */
static kiln_tensor *pad_const1(kiln_tensor *x, int dim, int64_t l, int64_t r, double v) {
  if (l < 0) {
    x = kiln_narrow(x, dim, -l, x->shape[dim] + l);
    l = 0;
  }
  if (x && r < 0) {
    x = kiln_narrow(x, dim, 0, x->shape[dim] + r);
    r = 0;
  }
  if (!x || (l == 0 && r == 0)) return x;
  kiln_tensor *parts[3];
  int k = 0;
  int64_t sh[KILN_MAX_DIMS];
  memcpy(sh, x->shape, (size_t)x->ndim * sizeof *sh);
  if (l) {
    sh[dim] = l;
    parts[k++] = kiln_full(x->ndim, sh, v, x->dtype);
  }
  parts[k++] = x;
  if (r) {
    sh[dim] = r;
    parts[k++] = kiln_full(x->ndim, sh, v, x->dtype);
  }
  for (int i = 0; i < k; i++)
    if (!parts[i]) return NULL;
  return kiln_cat(parts, k, dim);
}
/* One dim of index padding: mode 0 reflect, 1 replicate, 2 circular. */
static kiln_tensor *pad_index1(const char *fn, kiln_tensor *x, int dim, int64_t l, int64_t r,
                               int mode) {
  int64_t len = x->shape[dim], m = len + l + r;
  if (mode == 0 && (l >= len || r >= len)) {
    core_error(KILN_ERR_INVALID, "%s: Argument #4: Padding size should be less than the "
                                 "corresponding input dimension, but got: padding (%lld, %lld) at "
                                 "dimension %d of input %d", fn, (long long)l, (long long)r, dim,
               x->ndim);
    return NULL;
  }
  if (mode == 2 && (l > len || r > len)) {
    core_error(KILN_ERR_INVALID, "%s: Padding value causes wrapping around more than once.", fn);
    return NULL;
  }
  if (len == 0 || m <= 0) {
    core_error(KILN_ERR_INVALID, "%s: input dimension %d is empty or padded away", fn, dim);
    return NULL;
  }
  kiln_tensor *ix = kiln_zeros(1, &m, KILN_DTYPE_I64);
  if (!ix) return NULL;
  int64_t *q = kiln_tensor_data(ix);
  for (int64_t i = 0; i < m; i++) {
    int64_t j = i - l;
    if (mode == 0) {
      if (j < 0) j = -j;
      if (j >= len) j = 2 * (len - 1) - j;
    } else if (mode == 1) {
      j = j < 0 ? 0 : j >= len ? len - 1 : j;
    } else {
      j = ((j % len) + len) % len;
    }
    q[i] = j;
  }
  return kiln_index_select(x, dim, ix);
}
static int pad(const char *fn, kiln_tensor *x, const op_val *pv, int mode, double value,
               kiln_tensor **outs) {
  if (pv->tag != OP_VAL_INTS || pv->ints.n % 2)
    return core_error(KILN_ERR_INVALID, "%s: Padding length must be divisible by 2", fn);
  int np = pv->ints.n / 2;
  if (np > x->ndim)
    return core_error(KILN_ERR_INVALID, "%s: Padding length too large (%d pairs for %d dims)", fn,
                      np, x->ndim);
  if (mode != 3 && np > 3)
    return core_error(KILN_ERR_INVALID, "%s: only 1-, 2- and 3-d padding is supported for "
                                        "non-constant modes", fn);
  kiln_tensor *r = x;
  for (int i = 0; i < np && r; i++) {
    int dim = x->ndim - 1 - i;
    int64_t l = pv->ints.v[2 * i], rr = pv->ints.v[2 * i + 1];
    if (mode == 3) r = pad_const1(r, dim, l, rr, value);
    else if (l || rr) r = pad_index1(fn, r, dim, l, rr, mode);
  }
  return op_out1(r == x && r ? kiln_clone(x) : r, outs);
}
/* pad(self, pad, mode='constant', value=None) */
int op_pad_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::pad";
  kiln_tensor *x;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  const char *mode = a[2].tag == OP_VAL_STR ? a[2].s : "constant";
  int m;
  if (!strcmp(mode, "constant")) m = 3;
  else if (!strcmp(mode, "reflect")) m = 0;
  else if (!strcmp(mode, "replicate")) m = 1;
  else if (!strcmp(mode, "circular")) m = 2;
  else
    return core_error(KILN_ERR_INVALID, "%s: Unrecognised padding mode %s", fn, mode);
  if (m != 3 && a[3].tag != OP_VAL_NONE && op_val_num(&a[3]) != 0)
    return core_error(KILN_ERR_INVALID, "%s: Padding mode \"%s\" doesn't take in value argument",
                      fn, mode);
  return pad(fn, x, &a[1], m, a[3].tag == OP_VAL_NONE ? 0 : op_val_num(&a[3]), outs);
}
int op_constant_pad_nd_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = op_arg_tensor("aten::constant_pad_nd", &a[0], "self", &x);
  if (rc < 0) return rc;
  return pad("aten::constant_pad_nd", x, &a[1], 3, op_val_is_num(&a[2]) ? op_val_num(&a[2]) : 0,
             outs);
}
