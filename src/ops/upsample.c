/* src/ops/upsample.c: upsampling (nearest, nearest-exact, linear, bilinear,
 * trilinear, bicubic, antialiased bilinear/bicubic; the .vec overloads
 * F.interpolate scripts into) and adaptive_avg_pool3d, as decompositions.
 *
 * Note [Separable resampling]: every mode resamples each spatial dim on
 * its own, so the result is the input with one [out, in] weight matrix
 * applied along each dim (out = M @ x over that dim; PyTorch's source
 * index and weight formulas per mode, UpSample.h); nearest modes pick
 * rows with index_select instead. Matmul and index_select give the
 * derivative. Source indices are computed in float for float32 inputs,
 * as PyTorch's CPU kernels do. */
#include <math.h>
#include <string.h>

#include "op.h"

enum { M_NEAREST, M_EXACT, M_LINEAR, M_CUBIC, M_LINEAR_AA, M_CUBIC_AA, M_ADAPTIVE };

/* PyTorch's area_pixel_compute_scale: align_corners maps the corner
 * pixels onto each other; otherwise 1/scale when given, in/out if not. */
static double pixel_scale(int64_t in, int64_t out, bool ac, double sc, bool f32) {
  double s;
  if (ac) s = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
  else s = sc > 0 ? 1.0 / sc : (double)in / (double)out;
  return f32 ? (double)(float)s : s;
}
static double rnd(double v, bool f32) { return f32 ? (double)(float)v : v; }

static double cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static double cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }
/* the antialiasing filters (PIL's: triangle, and Keys' cubic with a = -0.5) */
static double aa_filter(double x, bool cubic) {
  x = fabs(x);
  if (!cubic) return x < 1 ? 1 - x : 0;
  const double a = -0.5;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

/* Fills m [out, in] (zeroed) with the weights of mode. */
static void fill_weights(double *m, int mode, int64_t in, int64_t out, bool ac, double sc,
                         bool f32) {
  double s = pixel_scale(in, out, ac, sc, f32);
  for (int64_t i = 0; i < out; i++) {
    double *row = m + i * in;
    if (mode == M_LINEAR) {
      double r = ac ? rnd(s * (double)i, f32) : rnd(s * ((double)i + 0.5) - 0.5, f32);
      if (r < 0) r = 0;
      int64_t i0 = (int64_t)floor(r), i1 = i0 + 1 < in ? i0 + 1 : in - 1;
      if (i0 > in - 1) i0 = in - 1;
      double l = r - (double)i0;
      row[i0] += 1 - l;
      row[i1] += l;
    } else if (mode == M_CUBIC) {
      double r = ac ? rnd(s * (double)i, f32) : rnd(s * ((double)i + 0.5) - 0.5, f32);
      int64_t i0 = (int64_t)floor(r);
      double t = r - (double)i0, A = -0.75;
      double c[4] = {cubic2(t + 1, A), cubic1(t, A), cubic1(1 - t, A), cubic2(2 - t, A)};
      for (int k = 0; k < 4; k++) {
        int64_t j = i0 - 1 + k;
        j = j < 0 ? 0 : j > in - 1 ? in - 1 : j;
        row[j] += c[k];
      }
    } else if (mode == M_ADAPTIVE) {
      int64_t lo = (i * in) / out, hi = ((i + 1) * in + out - 1) / out;
      for (int64_t j = lo; j < hi; j++) row[j] = 1.0 / (double)(hi - lo);
    } else { /* antialiased (PyTorch's _compute_indices_min_size_weights_aa) */
      bool cubic = mode == M_CUBIC_AA;
      double support = (cubic ? 2.0 : 1.0) * (s >= 1 ? s : 1.0);
      double center = s * ((double)i + 0.5), inv = s >= 1 ? 1.0 / s : 1.0, total = 0;
      int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
      lo = lo < 0 ? 0 : lo;
      hi = hi > in ? in : hi;
      for (int64_t j = lo; j < hi; j++) {
        row[j] = aa_filter(((double)j - center + 0.5) * inv, cubic);
        total += row[j];
      }
      if (total != 0)
        for (int64_t j = lo; j < hi; j++) row[j] /= total;
    }
  }
}

/* x resampled along dim by an [out, in] matrix of mode's weights. */
static kiln_tensor *along_matrix(kiln_tensor *x, int dim, int mode, int64_t out, bool ac,
                                 double sc) {
  int64_t in = x->shape[dim], sh[2] = {out, in};
  kiln_tensor *m = kiln_zeros(2, sh, KILN_DTYPE_F64);
  if (!m) return NULL;
  fill_weights(kiln_tensor_data(m), mode, in, out, ac, sc, x->dtype == KILN_DTYPE_F32);
  m = kiln_to_dtype(m, x->dtype);
  if (!m) return NULL;
  if (dim == x->ndim - 1) return kiln_matmul(x, kiln_t(m));
  int64_t pre = 1, rest = 1, s3[3], full[KILN_MAX_DIMS];
  for (int i = 0; i < dim; i++) pre *= x->shape[i];
  for (int i = dim + 1; i < x->ndim; i++) rest *= x->shape[i];
  s3[0] = pre, s3[1] = in, s3[2] = rest;
  kiln_tensor *y = kiln_matmul(m, kiln_reshape(x, 3, s3));
  memcpy(full, x->shape, (size_t)x->ndim * sizeof *full);
  full[dim] = out;
  return y ? kiln_reshape(y, x->ndim, full) : NULL;
}

/* x resampled along dim by nearest (exact: pixel centres) neighbours. */
static kiln_tensor *along_nearest(kiln_tensor *x, int dim, bool exact, int64_t out, double sc) {
  int64_t in = x->shape[dim];
  kiln_tensor *ix = kiln_zeros(1, &out, KILN_DTYPE_I64);
  if (!ix) return NULL;
  int64_t *q = kiln_tensor_data(ix);
  float s = sc > 0 ? (float)(1.0 / sc) : (float)in / (float)out;
  for (int64_t i = 0; i < out; i++) {
    int64_t j;
    if (exact) j = (int64_t)floorf(((float)i + 0.5f) * s);
    else if (out == in) j = i;
    else if (out == 2 * in) j = i >> 1;
    else j = (int64_t)floorf((float)i * s);
    q[i] = j < in - 1 ? j : in - 1;
  }
  return kiln_index_select(x, dim, ix);
}

static int resample(const char *fn, int nd, int mode, const op_val *a, const op_val *osz, bool ac,
                    const op_val *scales, kiln_tensor **outs) {
  kiln_tensor *x;
  char d[96];
  int rc = op_arg_tensor(fn, a, "input", &x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "%s: \"%s\" not implemented for %s", fn, fn + 6,
                      core_tensor_desc(x, d, sizeof d));
  if (x->ndim != nd + 2 || core_numel(x->ndim, x->shape) == 0)
    return core_error(KILN_ERR_INVALID, "%s: Non-empty %dD data tensor expected but got %s", fn,
                      nd + 2, core_tensor_desc(x, d, sizeof d));
  bool has_o = osz->tag == OP_VAL_INTS || osz->tag == OP_VAL_INT;
  bool has_s = scales->tag == OP_VAL_FLOATS || (scales->tag == OP_VAL_INTS && scales->ints.n) ||
               op_val_is_num(scales);
  if (has_o == has_s)
    return core_error(KILN_ERR_INVALID, "%s: Must specify exactly one of output_size and "
                                        "scale_factors", fn);
  int64_t o[3];
  double sc[3];
  for (int i = 0; i < nd; i++) {
    int64_t in = x->shape[2 + i];
    if (has_o) {
      if (osz->tag == OP_VAL_INTS && osz->ints.n != nd)
        return core_error(KILN_ERR_INVALID, "%s: It is expected output_size equals to %d, but got "
                                            "size %d", fn, nd, osz->ints.n);
      o[i] = osz->tag == OP_VAL_INT ? osz->i : osz->ints.v[i];
      sc[i] = 0;
    } else {
      int n_s = scales->tag == OP_VAL_FLOATS ? scales->floats.n
                : scales->tag == OP_VAL_INTS ? scales->ints.n : 1;
      if (n_s != nd)
        return core_error(KILN_ERR_INVALID, "%s: It is expected scale_factors equals to %d, but "
                                            "got size %d", fn, nd, n_s);
      sc[i] = scales->tag == OP_VAL_FLOATS ? scales->floats.v[i]
              : scales->tag == OP_VAL_INTS ? (double)scales->ints.v[i] : op_val_num(scales);
      double v = (double)in * sc[i];
      if (!(v >= 0) || v > 1e15)
        return core_error(KILN_ERR_INVALID, "%s: invalid scale factor %g", fn, sc[i]);
      o[i] = (int64_t)v;
    }
    if (o[i] <= 0)
      return core_error(KILN_ERR_INVALID, "%s: Input and output sizes should be greater than 0, "
                                          "but got input size %lld and output size %lld", fn,
                        (long long)in, (long long)o[i]);
  }
  kiln_tensor *y = x;
  for (int i = 0; i < nd && y; i++) {
    int dim = 2 + i;
    if (mode == M_NEAREST || mode == M_EXACT) y = along_nearest(y, dim, mode == M_EXACT, o[i], sc[i]);
    else y = along_matrix(y, dim, mode, o[i], ac, sc[i]);
  }
  return op_out1(y, outs);
}

static bool flag(const op_val *v) { return v->tag == OP_VAL_BOOL ? v->b : v->tag == OP_VAL_INT && v->i; }

#define NEAREST(name, fn, nd, mode)                                                 \
  int op_##name##_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {  \
    return resample(fn, nd, mode, &a[0], &a[1], false, &a[2], outs);                \
  }
NEAREST(upsample_nearest1d, "aten::upsample_nearest1d", 1, M_NEAREST)
NEAREST(upsample_nearest2d, "aten::upsample_nearest2d", 2, M_NEAREST)
NEAREST(upsample_nearest3d, "aten::upsample_nearest3d", 3, M_NEAREST)
NEAREST(upsample_nearest_exact1d, "aten::_upsample_nearest_exact1d", 1, M_EXACT)
NEAREST(upsample_nearest_exact2d, "aten::_upsample_nearest_exact2d", 2, M_EXACT)
NEAREST(upsample_nearest_exact3d, "aten::_upsample_nearest_exact3d", 3, M_EXACT)

#define INTERP(name, fn, nd, mode)                                                  \
  int op_##name##_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {  \
    return resample(fn, nd, mode, &a[0], &a[1], flag(&a[2]), &a[3], outs);          \
  }
INTERP(upsample_linear1d, "aten::upsample_linear1d", 1, M_LINEAR)
INTERP(upsample_bilinear2d, "aten::upsample_bilinear2d", 2, M_LINEAR)
INTERP(upsample_trilinear3d, "aten::upsample_trilinear3d", 3, M_LINEAR)
INTERP(upsample_bicubic2d, "aten::upsample_bicubic2d", 2, M_CUBIC)
INTERP(upsample_bilinear2d_aa, "aten::_upsample_bilinear2d_aa", 2, M_LINEAR_AA)
INTERP(upsample_bicubic2d_aa, "aten::_upsample_bicubic2d_aa", 2, M_CUBIC_AA)

/* adaptive_avg_pool3d(self [C, D, H, W] or [N, C, D, H, W], output_size) */
int op_adaptive_avg_pool3d_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::adaptive_avg_pool3d";
  kiln_tensor *x;
  char d[96];
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (!core_dtype_is_floating(x->dtype))
    return core_error(KILN_ERR_INVALID, "%s: \"adaptive_avg_pool3d\" not implemented for %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (x->ndim != 4 && x->ndim != 5)
    return core_error(KILN_ERR_INVALID, "%s: Expected 4D or 5D tensor, but got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  int64_t o[3];
  const op_val *v = &a[1];
  if (v->tag == OP_VAL_INT) o[0] = o[1] = o[2] = v->i;
  else if (v->tag == OP_VAL_INTS && (v->ints.n == 3 || v->ints.n == 1))
    for (int i = 0; i < 3; i++) o[i] = v->ints.v[v->ints.n == 1 ? 0 : i];
  else
    return core_error(KILN_ERR_INVALID, "%s: output_size must be 3", fn);
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] == 0 && (i > 0 || x->ndim == 4))
      return core_error(KILN_ERR_INVALID, "%s: Expected input to have non-zero size for non-batch "
                                          "dimensions, but got %s", fn,
                        core_tensor_desc(x, d, sizeof d));
  kiln_tensor *y = x;
  for (int i = 0; i < 3 && y; i++) {
    if (o[i] < 0) return core_error(KILN_ERR_INVALID, "%s: output_size must be non-negative", fn);
    y = along_matrix(y, x->ndim - 3 + i, M_ADAPTIVE, o[i], false, 0);
  }
  return op_out1(y, outs);
}
