/* src/ops/grid_sample.c: aten::grid_sampler (F.grid_sample) for 4-D
 * inputs, bilinear and nearest, with zeros, border and reflection
 * padding, as a decomposition.
 *
 * Note [Grid sampling]: the grid's (x, y) in [-1, 1] are unnormalised to
 * pixel coordinates (align_corners: -1 and 1 are the corner pixels'
 * centres; else their outer edges), then border clamps them into the
 * image and reflection folds them back into it (PyTorch's
 * grid_sampler_compute_source_index). Each output pixel then reads its
 * corner pixels from the [N, C, H W] input with gather, weighted
 * bilinearly (nearest: the rounded pixel, half to even), corners outside
 * the image reading 0. Gather, the weights' arithmetic and clamp give the
 * derivatives for the input and the grid. */
#include <math.h>

#include "op.h"

/* reflect x into [lo2 / 2, hi2 / 2] (twice the bounds, as PyTorch) */
static kiln_tensor *reflect(kiln_tensor *x, double lo2, double hi2) {
  if (lo2 == hi2) return kiln_mul_scalar(x, 0);
  double mn = lo2 / 2, span = (hi2 - lo2) / 2;
  kiln_tensor *in = kiln_abs(kiln_add_scalar(x, -mn));
  kiln_tensor *sp = in ? kiln_scalar(span, in->dtype) : NULL;
  kiln_tensor *extra = sp ? kiln_sub(in, kiln_mul_scalar(op_call1(KILN_OP_FLOOR,
                                       (op_val[]){OPV_T(kiln_div_scalar(in, span))}, 1), span))
                          : NULL;
  kiln_tensor *flips = in ? op_call1(KILN_OP_FLOOR, (op_val[]){OPV_T(kiln_div_scalar(in, span))}, 1)
                          : NULL;
  if (!extra || !flips) return NULL;
  /* even flips: extra + mn; odd: span - extra + mn */
  kiln_tensor *half = kiln_mul_scalar(flips, 0.5);
  kiln_tensor *odd = half ? kiln_ne(op_call1(KILN_OP_FLOOR, (op_val[]){OPV_T(half)}, 1), half) : NULL;
  if (!odd) return NULL;
  return kiln_where(odd, kiln_add_scalar(kiln_neg(extra), span + mn), kiln_add_scalar(extra, mn));
}

/* pixel coordinate of normalised c along a dim of size n */
static kiln_tensor *source_index(kiln_tensor *c, int64_t n, int pad, bool ac) {
  kiln_tensor *x = ac ? kiln_mul_scalar(kiln_add_scalar(c, 1), (double)(n - 1) / 2)
                      : kiln_div_scalar(kiln_add_scalar(kiln_mul_scalar(kiln_add_scalar(c, 1),
                                                                        (double)n), -1), 2);
  if (!x) return NULL;
  if (pad == 1) return kiln_clamp(x, 0, (double)(n - 1));
  if (pad == 2) {
    x = ac ? reflect(x, 0, 2.0 * (double)(n - 1)) : reflect(x, -1, 2.0 * (double)n - 1);
    return x ? kiln_clamp(x, 0, (double)(n - 1)) : NULL;
  }
  return x;
}

/* input_flat [N, C, H W] read at integer pixel (ix, iy) [N, L] (float
 * tensors), 0 outside; times w [N, L] */
static kiln_tensor *corner(kiln_tensor *flat, kiln_tensor *ix, kiln_tensor *iy, kiln_tensor *w,
                           int64_t H, int64_t W) {
  if (!w) return NULL;
  kiln_tensor *okx = kiln_mul(kiln_ge(ix, kiln_scalar(0, ix->dtype)),
                              kiln_le(ix, kiln_scalar((double)(W - 1), ix->dtype)));
  kiln_tensor *oky = kiln_mul(kiln_ge(iy, kiln_scalar(0, iy->dtype)),
                              kiln_le(iy, kiln_scalar((double)(H - 1), iy->dtype)));
  kiln_tensor *cx = kiln_clamp(ix, 0, (double)(W - 1)), *cy = kiln_clamp(iy, 0, (double)(H - 1));
  if (!okx || !oky || !cx || !cy) return NULL;
  kiln_tensor *lin = kiln_to_dtype(kiln_add(kiln_mul_scalar(cy, (double)W), cx), KILN_DTYPE_I64);
  if (!lin) return NULL;
  int64_t N = flat->shape[0], C = flat->shape[1], L = lin->shape[1];
  int64_t s3[3] = {N, 1, L}, e3[3] = {N, C, L};
  kiln_tensor *idx = kiln_expand(kiln_reshape(lin, 3, s3), 3, e3);
  kiln_tensor *v = idx ? kiln_gather(flat, 2, idx) : NULL;
  kiln_tensor *m = kiln_mul(kiln_to_dtype(kiln_mul(okx, oky), w->dtype), w);
  return v && m ? kiln_mul(v, kiln_reshape(m, 3, s3)) : NULL;
}

/* grid_sampler(input [N, C, H, W], grid [N, OH, OW, 2], interpolation_mode, padding_mode,
 * align_corners) */
int op_grid_sampler_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::grid_sampler";
  kiln_tensor *x, *grid;
  char d[96], e[96];
  int64_t mode, pad;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "input", &x)) < 0 ||
      (rc = op_arg_tensor(fn, &a[1], "grid", &grid)) < 0 ||
      (rc = op_arg_int(fn, &a[2], "interpolation_mode", &mode)) < 0 ||
      (rc = op_arg_int(fn, &a[3], "padding_mode", &pad)) < 0)
    return rc;
  bool ac = a[4].tag == OP_VAL_BOOL && a[4].b;
  if (x->ndim != 4 || grid->ndim != 4 || grid->shape[3] != 2 || grid->shape[0] != x->shape[0] ||
      !core_dtype_is_floating(x->dtype) || grid->dtype != x->dtype)
    return core_error(KILN_ERR_INVALID, "%s: expected a 4-D floating input and a grid [N, H, W, 2] "
                                        "of its dtype and batch (5-D inputs are not supported), "
                                        "got input %s and grid %s", fn,
                      core_tensor_desc(x, d, sizeof d), core_tensor_desc(grid, e, sizeof e));
  if (mode != 0 && mode != 1)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: interpolation_mode %lld is not supported (0 "
                                            "bilinear, 1 nearest)", fn, (long long)mode);
  if (pad < 0 || pad > 2)
    return core_error(KILN_ERR_INVALID, "%s: padding_mode must be 0 (zeros), 1 (border) or 2 "
                                        "(reflection), got %lld", fn, (long long)pad);
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = grid->shape[1], OW = grid->shape[2], L = OH * OW;
  if (H == 0 || W == 0)
    return core_error(KILN_ERR_INVALID, "%s: input spatial size must be non-empty", fn);
  int64_t s2[2] = {N, L}, s3[3] = {N, C, H * W};
  kiln_tensor *gx = kiln_reshape(kiln_select(grid, 3, 0), 2, s2);
  kiln_tensor *gy = kiln_reshape(kiln_select(grid, 3, 1), 2, s2);
  kiln_tensor *flat = kiln_reshape(x, 3, s3);
  if (!gx || !gy || !flat) return op_failed_status();
  kiln_tensor *ix = source_index(gx, W, (int)pad, ac), *iy = source_index(gy, H, (int)pad, ac);
  if (!ix || !iy) return op_failed_status();
  kiln_tensor *y;
  if (mode == 1) {
    kiln_tensor *rx = op_call1(KILN_OP_ROUND, (op_val[]){OPV_T(ix)}, 1);
    kiln_tensor *ry = op_call1(KILN_OP_ROUND, (op_val[]){OPV_T(iy)}, 1);
    y = rx && ry ? corner(flat, rx, ry, kiln_ones(2, s2, x->dtype), H, W) : NULL;
  } else {
    kiln_tensor *x0 = op_call1(KILN_OP_FLOOR, (op_val[]){OPV_T(ix)}, 1);
    kiln_tensor *y0 = op_call1(KILN_OP_FLOOR, (op_val[]){OPV_T(iy)}, 1);
    if (!x0 || !y0) return op_failed_status();
    kiln_tensor *x1 = kiln_add_scalar(x0, 1), *y1 = kiln_add_scalar(y0, 1);
    kiln_tensor *wx1 = kiln_sub(ix, x0), *wy1 = kiln_sub(iy, y0);
    kiln_tensor *wx0 = kiln_sub(x1, ix), *wy0 = kiln_sub(y1, iy);
    if (!x1 || !y1 || !wx1 || !wy1 || !wx0 || !wy0) return op_failed_status();
    kiln_tensor *c[4] = {corner(flat, x0, y0, kiln_mul(wx0, wy0), H, W),
                         corner(flat, x1, y0, kiln_mul(wx1, wy0), H, W),
                         corner(flat, x0, y1, kiln_mul(wx0, wy1), H, W),
                         corner(flat, x1, y1, kiln_mul(wx1, wy1), H, W)};
    if (!c[0] || !c[1] || !c[2] || !c[3]) return op_failed_status();
    y = kiln_add(kiln_add(c[0], c[1]), kiln_add(c[2], c[3]));
  }
  int64_t s4[4] = {N, C, OH, OW};
  return op_out1(y ? kiln_reshape(y, 4, s4) : NULL, outs);
}
