/* src/ops/ew.c: the elementwise driver: broadcasting, type promotion and
 * the strided iteration that feeds contiguous tiles to each op's tile
 * kernel (op_table[op].tiles[compute dtype]).
 *
 * Note [Tiles]: the output is walked in C order in tiles of EW_TILE
 * elements. For each tile, an operand that is contiguous over the tile and
 * already in the compute dtype is passed by pointer; any other operand
 * (strided, broadcast, or of another dtype) is gathered into a small
 * L1-resident buffer first. So each op's arithmetic is one contiguous loop,
 * written once, and the same kernel serves the fused executor. Tiles run in
 * parallel (OpenMP) above OP_PARALLEL_MIN elements. */
#include <math.h>
#include <string.h>

#include "ew.h"

int op_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb,
                        const int64_t *b, int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  int64_t res[KILN_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int64_t da = i < n - na ? 1 : a[i - (n - na)];
    int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
    if (da != db && da != 1 && db != 1) {
      char sa[160], sb[160];
      return core_error(KILN_ERR_INVALID,
                        "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)",
                        fn, core_shape_str(na, a, sa, sizeof sa),
                        core_shape_str(nb, b, sb, sizeof sb), i, (long long)da,
                        (long long)db);
    }
    res[i] = da == 1 ? db : da;
  }
  *nout = n;
  memcpy(out, res, (size_t)n * sizeof *out);
  return 0;
}

/* PyTorch's c10 combine_categories (Note [Promotion]). -1 = undefined. */
static int combine_categories(int higher, int lower) {
  if (higher < 0) return lower;
  if (core_dtype_is_floating((kiln_dtype)higher)) return higher;
  if (higher == KILN_DTYPE_BOOL ||
      (lower >= 0 && core_dtype_is_floating((kiln_dtype)lower)))
    return lower < 0 ? higher : (int)kiln_promote_types((kiln_dtype)higher, (kiln_dtype)lower);
  return higher;
}

static int promote_opt(int a, kiln_dtype b) {
  return a < 0 ? (int)b : (int)kiln_promote_types((kiln_dtype)a, b);
}

kiln_dtype op_result_type(const op_val *operands, int n) {
  /* the common case first: tensors of one dtype, none a wrapped number
   * (every tier then holds that dtype, so it is the result) */
  bool same = n > 0;
  for (int i = 0; same && i < n; i++)
    same = operands[i].tag == OP_VAL_TENSOR && !operands[i].t->wrapped_number &&
           operands[i].t->dtype == operands[0].t->dtype;
  if (same) return operands[0].t->dtype;
  int dim_dt = -1, zero_dt = -1, wrapped_dt = -1;
  for (int i = 0; i < n; i++) {
    const op_val *v = &operands[i];
    if (v->tag == OP_VAL_TENSOR) {
      const kiln_tensor *t = v->t;
      if (t->wrapped_number)
        wrapped_dt = promote_opt(wrapped_dt, core_dtype_is_floating(t->dtype)
                                                 ? KILN_DTYPE_F32
                                                 : t->dtype);
      else if (t->ndim == 0)
        zero_dt = promote_opt(zero_dt, t->dtype);
      else
        dim_dt = promote_opt(dim_dt, t->dtype);
    } else if (v->tag == OP_VAL_INT) {
      wrapped_dt = promote_opt(wrapped_dt, KILN_DTYPE_I64);
    } else if (v->tag == OP_VAL_FLOAT) {
      wrapped_dt = promote_opt(wrapped_dt, KILN_DTYPE_F32);
    } else if (v->tag == OP_VAL_BOOL) {
      wrapped_dt = promote_opt(wrapped_dt, KILN_DTYPE_BOOL);
    }
  }
  int r = combine_categories(dim_dt, combine_categories(zero_dt, wrapped_dt));
  return r < 0 ? KILN_DTYPE_F32 : (kiln_dtype)r;
}

int op_ew_plan(int op, const op_val *args, int n_args, ew_plan *p) {
  const op_info *info = &op_table[op];
  char d[160];
  p->nin = info->n_operands;
  p->ndim = 0;
  for (int i = 0; i < p->nin; i++) {
    const op_val *v = &args[i];
    if (v->tag == OP_VAL_TENSOR) {
      if (v->t->device != CORE_DEVICE_CPU && v->t->device != CORE_DEVICE_LAZY)
        return core_error(KILN_ERR_INVALID, "%s: operand %d on an unknown device",
                          info->name, i);
      if (op_broadcast_shapes(info->name, p->ndim, p->shape, v->t->ndim, v->t->shape,
                              &p->ndim, p->shape) < 0)
        return KILN_ERR_INVALID;
    } else if (!op_val_is_num(v)) {
      return core_error(KILN_ERR_INVALID, "%s: operand %d must be a tensor or a number, got %s",
                        info->name, i, op_val_desc(v, d, sizeof d));
    }
  }
  if (info->flags & OPF_COND_FIRST) {
    if (args[0].tag != OP_VAL_TENSOR || args[0].t->dtype != KILN_DTYPE_BOOL)
      return core_error(KILN_ERR_INVALID, "%s: condition must be a Bool tensor, got %s",
                        info->name, op_val_desc(&args[0], d, sizeof d));
    p->compute = op_result_type(args + 1, p->nin - 1);
  } else {
    p->compute = op_result_type(args, p->nin);
  }
  if ((info->flags & OPF_FLOAT_ONLY) && !core_dtype_is_floating(p->compute))
    p->compute = KILN_DTYPE_F32;
  /* Note [Narrow dtypes]: a half or narrow-integer result computes in
   * float32 or int64 (core_dtype_compute); its operands are first rounded
   * or wrapped to the result dtype, as PyTorch converts them to it, and
   * the kernel's results are rounded or wrapped back. For integers this is
   * exactly arithmetic in their own width: +, -, *, shifts and bitwise
   * ops are the same modulo 2^width, and a quotient or comparison of
   * in-range values is the same value. */
  p->result = p->compute;
  p->compute = core_dtype_compute(p->result);
  p->out_dtype = (info->flags & OPF_BOOL_OUT) ? KILN_DTYPE_BOOL : p->result;
  if (!info->tiles || !info->tiles[p->compute])
    return core_error(KILN_ERR_INVALID, "%s: not implemented for dtype %s", info->name,
                      kiln_dtype_name(p->result));
  for (int k = 0; k < OP_MAX_ATTRS; k++) p->attrs.s[k] = NAN;
  for (int i = p->nin, k = 0; i < n_args && k < OP_MAX_ATTRS; i++, k++) {
    const op_val *v = &args[i];
    if (v->tag == OP_VAL_STR)
      p->attrs.s[k] = strcmp(v->s, "tanh") == 0 ? 1.0 : 0.0;
    else if (v->tag == OP_VAL_NONE || op_val_is_num(v))
      p->attrs.s[k] = op_val_num(v);
    else
      return core_error(KILN_ERR_INVALID, "%s: argument %d must be a number, got %s",
                        info->name, i, op_val_desc(v, d, sizeof d));
  }
  /* a narrow integer op's scalars (clamp's bounds, alpha) are of its dtype
   * too, as PyTorch converts them: clamp(uint8, min=-5) clamps at 251 */
  if (p->result != p->compute && core_dtype_is_integral(p->result))
    for (int k = 0; k < OP_MAX_ATTRS; k++)
      if (!isnan(p->attrs.s[k])) {
        char e[8];
        core_store_double(e, p->result, p->attrs.s[k]);
        p->attrs.s[k] = core_load_double(e, p->result);
      }
  return 0;
}

int op_ew_infer(int op, const op_val *args, int n_args, op_meta *outs) {
  ew_plan p;
  if (op_ew_plan(op, args, n_args, &p) < 0) return KILN_ERR_INVALID;
  outs[0].dtype = p.out_dtype;
  outs[0].ndim = p.ndim;
  memcpy(outs[0].shape, p.shape, sizeof p.shape);
  return 1;
}

/* ---- gathering ----------------------------------------------------------- */

static inline void store_conv(void *dst, kiln_dtype dt, int64_t i, double v) {
  switch (dt) {
  case KILN_DTYPE_F32: ((float *)dst)[i] = (float)v; break;
  case KILN_DTYPE_F64: ((double *)dst)[i] = v; break;
  case KILN_DTYPE_I64: ((int64_t *)dst)[i] = core_f2i(v); break;
  case KILN_DTYPE_BOOL: ((bool *)dst)[i] = v != 0; break;
  default: core_store_double((char *)dst + i * (int64_t)kiln_dtype_size(dt), dt, v); break;
  }
}

void op_ew_operand_init(ew_operand *o, const kiln_tensor *t, int ndim, const int64_t *shape) {
  o->base = core_data(t);
  o->dtype = t->dtype;
  int lead = ndim - t->ndim;
  for (int d = 0; d < ndim; d++) {
    int td = d - lead;
    o->strides[d] = (td < 0 || t->shape[td] == 1) ? 0 : t->strides[td];
  }
  o->direct = t->ndim == ndim &&
              memcmp(t->shape, shape, (size_t)ndim * sizeof *shape) == 0 && core_is_contiguous(t);
}

void op_ew_convert(void *dst, kiln_dtype dd, const void *src, kiln_dtype sd, int64_t n) {
  if (dd == sd) memcpy(dst, src, (size_t)n * kiln_dtype_size(sd));
  else core_convert_run(dst, dd, src, sd, 1, n);
}

void op_ew_fill(void *buf, kiln_dtype dt, const op_val *v, int64_t n) {
  if (dt == KILN_DTYPE_I64 && (v->tag == OP_VAL_INT || v->tag == OP_VAL_BOOL)) {
    int64_t iv = v->tag == OP_VAL_INT ? v->i : v->b;
    for (int64_t k = 0; k < n; k++) ((int64_t *)buf)[k] = iv;
    return;
  }
  double val = op_val_num(v);
  for (int64_t k = 0; k < n; k++) store_conv(buf, dt, k, val);
}

/* Rounds or wraps n elements of buf (dtype cd) to dtype rd and back:
 * what converting them to rd first would have given (Note [Narrow
 * dtypes]). In place, one EW_TILE at most. */
static void narrow_in_place(void *buf, kiln_dtype cd, kiln_dtype rd, int64_t n) {
  _Alignas(64) char tmp[EW_TILE * 8];
  KILN_ASSERT(n <= EW_TILE);
  core_convert_run(tmp, rd, buf, cd, 1, n);
  core_convert_run(buf, cd, tmp, rd, 1, n);
}

/* A tensor operand of the eager driver, with its scalar tile if it has one
 * element. */
typedef struct ew_arg {
  ew_operand o;
  const void *scalar_buf;
} ew_arg;

void op_ew_gather(const ew_operand *o, int ndim, const int64_t *shape, int64_t i0, int64_t n,
                  void *buf, kiln_dtype cd) {
  int64_t idx[KILN_MAX_DIMS];
  int64_t rem = i0, off = 0;
  size_t es = kiln_dtype_size(o->dtype);
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    off += idx[d] * o->strides[d];
  }
  int last = ndim - 1;
  int64_t s_last = ndim ? o->strides[last] : 0;
  int64_t k = 0;
  bool f32 = o->dtype == KILN_DTYPE_F32 && cd == KILN_DTYPE_F32;
  while (k < n) {
    int64_t run = ndim ? shape[last] - idx[last] : 1;
    if (run > n - k) run = n - k;
    const char *src = o->base + off * (int64_t)es;
    if (f32 && run <= 16) { /* short runs (a small last dim): no call per run */
      float *d = (float *)buf + k;
      const float *sp = (const float *)src;
      for (int64_t j = 0; j < run; j++) d[j] = sp[j * s_last];
    } else {
      core_convert_run((char *)buf + k * (int64_t)kiln_dtype_size(cd), cd, src, o->dtype, s_last,
                       run);
    }
    k += run;
    if (k >= n) break;
    /* advance the odometer past this run */
    off += run * s_last;
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == shape[d]; d--) {
      off -= idx[d] * o->strides[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += o->strides[d - 1];
    }
  }
}

/* The gathering loop's state, shared by its tiles. */
typedef struct ew_tiles {
  const op_info *info;
  const ew_plan *p;
  const ew_arg *ops;
  int nd;
  const int64_t *shape; /* coalesced (Note [Coalescing]) */
  int64_t numel;
  char *outp;
  size_t ces, oes;
  bool narrow;
  op_tile_fn tile;
} ew_tiles;

/* Note [Serial regions]: entering an OpenMP parallel region costs about
 * 300 ns (libgomp makes and ends a team) even when its if clause is false,
 * more than a whole one-element add; so a loop too small to split is a
 * plain loop, not a region with `if (numel >= OP_PARALLEL_MIN)`. */
static void run_tile(const ew_tiles *w, int64_t tix) {
  const ew_plan *p = w->p;
  _Alignas(64) char bufs[EW_MAX_OPERANDS][EW_TILE * 8];
  const void *in[EW_MAX_OPERANDS];
  int64_t i0 = tix * EW_TILE, n = w->numel - i0 < EW_TILE ? w->numel - i0 : EW_TILE;
  for (int i = 0; i < p->nin; i++) {
    const ew_arg *o = &w->ops[i];
    if (o->scalar_buf)
      in[i] = o->scalar_buf;
    else if (o->o.direct)
      in[i] = o->o.base + i0 * (int64_t)w->ces;
    else {
      op_ew_gather(&o->o, w->nd, w->shape, i0, n, bufs[i], p->compute);
      if (w->narrow && o->o.dtype != p->result && !(i == 0 && (w->info->flags & OPF_COND_FIRST)))
        narrow_in_place(bufs[i], p->compute, p->result, n);
      in[i] = bufs[i];
    }
  }
  char *out = w->outp + i0 * (int64_t)w->oes;
  if (!w->narrow) {
    w->tile(out, in, n, &p->attrs);
    return;
  }
  /* the kernel writes its own dtype (bool, or compute); round it back */
  _Alignas(64) char obuf[EW_TILE * 8];
  kiln_dtype kd = p->out_dtype == KILN_DTYPE_BOOL ? KILN_DTYPE_BOOL : p->compute;
  w->tile(kd == p->out_dtype ? (void *)out : (void *)obuf, in, n, &p->attrs);
  if (kd != p->out_dtype) core_convert_run(out, p->out_dtype, obuf, kd, 1, n);
}

int op_ew_run(int op, const op_val *args, int n_args, kiln_tensor *out) {
  ew_plan p;
  if (op_ew_plan(op, args, n_args, &p) < 0) return KILN_ERR_INVALID;
  return op_ew_run_plan(op, args, n_args, &p, out);
}

int op_ew_run_plan(int op, const op_val *args, int n_args, const ew_plan *plan,
                   kiln_tensor *out) {
  const op_info *info = &op_table[op];
  ew_plan p = *plan;
  ew_arg ops[EW_MAX_OPERANDS];
  _Alignas(64) char scalar_bufs[EW_MAX_OPERANDS][EW_TILE * 8];
  (void)n_args;
  KILN_ASSERT(p.nin <= EW_MAX_OPERANDS);
  op_tile_fn tile = info->tiles[p.compute];
  size_t ces = kiln_dtype_size(p.compute);
  size_t oes = kiln_dtype_size(p.out_dtype);
  int64_t numel = core_numel(p.ndim, p.shape);
  /* a scalar operand is spread over one tile; tiny outputs need less (the
   * 1-element case is the eager dispatch-overhead path) */
  int64_t fill = numel < EW_TILE ? numel : EW_TILE;
  bool narrow = p.result != p.compute; /* Note [Narrow dtypes] */
  bool all_direct = !narrow;
  for (int i = 0; i < p.nin; i++) {
    ew_arg *o = &ops[i];
    const op_val *v = &args[i];
    o->scalar_buf = NULL;
    o->o.direct = false;
    if (numel == 1 && v->tag == OP_VAL_TENSOR && v->t->dtype == p.compute && !narrow &&
        v->t->storage != out->storage) {
      /* a one-element output (the eager dispatch-overhead path): its
       * one-element operands in the compute dtype are read in place */
      o->scalar_buf = core_data(v->t);
      continue;
    }
    if (v->tag != OP_VAL_TENSOR || core_numel(v->t->ndim, v->t->shape) == 1) {
      if (v->tag == OP_VAL_TENSOR) {
        /* exact: read the element in its own dtype, then fill */
        op_val e;
        switch (v->t->dtype) {
        case KILN_DTYPE_BOOL: e = OPV_B(*(const bool *)core_data(v->t)); break;
        default:
          e = core_dtype_is_integral(v->t->dtype)
                  ? OPV_I(core_load_int(core_data(v->t), v->t->dtype))
                  : OPV_F(core_get_flat(v->t, 0));
          break;
        }
        op_ew_fill(scalar_bufs[i], p.compute, &e, fill);
      } else {
        op_ew_fill(scalar_bufs[i], p.compute, v, fill);
      }
      if (narrow && !(i == 0 && (info->flags & OPF_COND_FIRST)))
        narrow_in_place(scalar_bufs[i], p.compute, p.result, fill);
      o->scalar_buf = scalar_bufs[i];
      if (numel > 1) all_direct = false;
      continue;
    }
    op_ew_operand_init(&o->o, v->t, p.ndim, p.shape);
    /* writing into an input's buffer (op_call_into): read it through the
     * tile buffer, so a kernel's restrict pointers never alias */
    o->o.direct &= v->t->dtype == p.compute && v->t->storage != out->storage && !narrow;
    if (!o->o.direct) all_direct = false;
  }
  char *outp = core_data(out);
  if (numel == 0) return 0;
  /* Fast path: every operand contiguous in the compute dtype (or a scalar
   * of a one-element output): no gathering at all. */
  if (all_direct) {
    const void *in[EW_MAX_OPERANDS];
    if (numel < OP_PARALLEL_MIN) {
      for (int i = 0; i < p.nin; i++)
        in[i] = ops[i].scalar_buf ? ops[i].scalar_buf : ops[i].o.base;
      tile(outp, in, numel, &p.attrs);
      return 0;
    }
    int64_t n_chunks = (numel + 16383) / 16384;
#pragma omp parallel for schedule(static) private(in)
    for (int64_t c = 0; c < n_chunks; c++) {
      int64_t i0 = c * 16384, n = numel - i0 < 16384 ? numel - i0 : 16384;
      for (int i = 0; i < p.nin; i++) in[i] = ops[i].o.base + i0 * (int64_t)ces;
      tile(outp + i0 * (int64_t)oes, in, n, &p.attrs);
    }
    return 0;
  }
  /* Note [Coalescing]: adjacent dims that every strided operand (and the
   * contiguous output) walks as one are merged, and dims of size 1
   * dropped, so gathering moves longer runs: a per-channel [1, C, 1, 1]
   * operand over [N, C, H, W] reads runs of H W equal values, not W. */
  int nd = 0;
  int64_t shape[KILN_MAX_DIMS];
  for (int d = 0; d < p.ndim; d++) {
    if (p.shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int i = 0; merge && i < p.nin; i++)
      if (!ops[i].scalar_buf && !ops[i].o.direct) {
        int64_t *st = ops[i].o.strides;
        merge = st[nd - 1] == st[d] * p.shape[d];
      }
    for (int i = 0; i < p.nin; i++)
      if (!ops[i].scalar_buf && !ops[i].o.direct) ops[i].o.strides[merge ? nd - 1 : nd] =
                                                      ops[i].o.strides[d];
    if (merge) shape[nd - 1] *= p.shape[d];
    else shape[nd++] = p.shape[d];
  }
  ew_tiles w = {info, &p, ops, nd, shape, numel, outp, ces, oes, narrow, tile};
  int64_t n_tiles = (numel + EW_TILE - 1) / EW_TILE;
  if (numel < OP_PARALLEL_MIN) { /* Note [Serial regions] */
    for (int64_t tix = 0; tix < n_tiles; tix++) run_tile(&w, tix);
    return 0;
  }
#pragma omp parallel for schedule(static)
  for (int64_t tix = 0; tix < n_tiles; tix++) run_tile(&w, tix);
  return 0;
}
