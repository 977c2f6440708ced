/* src/ops/tile.h: macros that write an elementwise op's per-dtype tile
 * kernels: the one contiguous loop per op that the compiler vectorizes and
 * that both the eager driver and the fused executor call. Each macro also
 * keeps its expression as text (fn##_src, an op_tile_src), from which the
 * fused executor compiles a whole group into one loop (Note [Native
 * kernels] in src/exec/fusion_cc.c): the kernel and its text are one
 * definition, so they cannot disagree. Each tile is compiled once per
 * instruction-set level and dispatched at run time (CORE_CLONES, Note [CPU
 * levels] in src/core/cpu.h). The _C variants (TILE_UNARY_C, ...)
 * are for expressions that call helpers the native source lacks (core_wrap_*,
 * a file's own functions): their text has no expression. OP_TILES writes an
 * op's tile array and its text array from one list, so those cannot
 * disagree either. */
#ifndef KILN_TILE_H
#define KILN_TILE_H

#include <math.h>

#include "op.h"

#define TILE_SRC(fn, arity, T, OT, expr)                                        \
  __attribute__((unused)) static const op_tile_src fn##_src = {arity, #T, #OT, #expr};
/* The text of a tile without an expression the native source can compile
 * (also for hand-written tile functions). */
#define TILE_NO_TEXT(fn, arity, T, OT)                                          \
  __attribute__((unused)) static const op_tile_src fn##_src = {arity, #T, #OT, NULL};

/* op_<name>_tiles and op_<name>_tile_srcs, indexed by kiln_dtype (F32,
 * F64, I64, BOOL), from one list of tiles; NOTILE where the dtype has no
 * kernel (the driver reports "not implemented for dtype"). */
#define NOTILE NULL
#define NOTILE_src (*(const op_tile_src *)NULL)
#define OP_TILES(name, f32, f64, i64, b)                                        \
  const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT] = {f32, f64, i64, b};    \
  const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT] = {          \
      &f32##_src, &f64##_src, &i64##_src, &b##_src};

/* out[i] = expr, with `a` = in[0][i] (type T) and `at` the attributes. */
#define TILE_UNARY(fn, T, OT, expr)                                            \
  TILE_SRC(fn, 1, T, OT, expr)                                                 \
  TILE_UNARY_FN(fn, T, OT, expr)
#define TILE_UNARY_C(fn, T, OT, expr)                                          \
  TILE_NO_TEXT(fn, 1, T, OT)                                                   \
  TILE_UNARY_FN(fn, T, OT, expr)
#define TILE_UNARY_FN(fn, T, OT, expr)                                         \
  CORE_CLONES(fn, (void *out_, const void *const *in_, int64_t n,              \
                   const op_attrs *at), (out_, in_, n, at)) {                  \
    OT *restrict out = out_;                                                   \
    const T *restrict x = in_[0];                                              \
    (void)at;                                                                  \
    for (int64_t i = 0; i < n; i++) {                                          \
      T a = x[i];                                                              \
      out[i] = (OT)(expr);                                                     \
    }                                                                          \
  }

/* out[i] = expr, with `a` = in[0][i], `b` = in[1][i]. */
#define TILE_BINARY(fn, T, OT, expr)                                           \
  TILE_SRC(fn, 2, T, OT, expr)                                                 \
  TILE_BINARY_FN(fn, T, OT, expr)
#define TILE_BINARY_C(fn, T, OT, expr)                                         \
  TILE_NO_TEXT(fn, 2, T, OT)                                                   \
  TILE_BINARY_FN(fn, T, OT, expr)
#define TILE_BINARY_FN(fn, T, OT, expr)                                        \
  CORE_CLONES(fn, (void *out_, const void *const *in_, int64_t n,              \
                   const op_attrs *at), (out_, in_, n, at)) {                  \
    OT *restrict out = out_;                                                   \
    const T *restrict x = in_[0];                                              \
    const T *restrict y = in_[1];                                              \
    (void)at;                                                                  \
    for (int64_t i = 0; i < n; i++) {                                          \
      T a = x[i], b = y[i];                                                    \
      out[i] = (OT)(expr);                                                     \
    }                                                                          \
  }

/* out[i] = expr, with `c`, `a`, `b` = in[0..2][i]. */
#define TILE_TERNARY(fn, T, OT, expr)                                          \
  TILE_SRC(fn, 3, T, OT, expr)                                                 \
  TILE_TERNARY_FN(fn, T, OT, expr)
#define TILE_TERNARY_C(fn, T, OT, expr)                                        \
  TILE_NO_TEXT(fn, 3, T, OT)                                                   \
  TILE_TERNARY_FN(fn, T, OT, expr)
#define TILE_TERNARY_FN(fn, T, OT, expr)                                       \
  CORE_CLONES(fn, (void *out_, const void *const *in_, int64_t n,              \
                   const op_attrs *at), (out_, in_, n, at)) {                  \
    OT *restrict out = out_;                                                   \
    const T *restrict z = in_[0];                                              \
    const T *restrict x = in_[1];                                              \
    const T *restrict y = in_[2];                                              \
    (void)at;                                                                  \
    for (int64_t i = 0; i < n; i++) {                                          \
      T c = z[i], a = x[i], b = y[i];                                          \
      out[i] = (OT)(expr);                                                     \
    }                                                                          \
  }

#endif
