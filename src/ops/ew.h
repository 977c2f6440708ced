/* src/ops/ew.h: the elementwise driver's building blocks, shared with the
 * fused-kernel executor (src/exec/fusion.c): an op's compute plan, strided
 * operands, gathering a tile, converting a tile between dtypes. */
#ifndef KILN_OPS_EW_H
#define KILN_OPS_EW_H

#include "op.h"

/* Elements per tile: a few KB per operand, so a whole chain's tiles stay in
 * L1/L2 (Note [Tiles] in ew.c). */
#define EW_TILE 1024
#define EW_MAX_OPERANDS 3

typedef struct ew_plan {
  int nin;
  kiln_dtype compute, out_dtype;
  kiln_dtype result; /* the promoted dtype; compute is the kernel's
                        (core_dtype_compute: F32 for half, I64 for ints) */
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  op_attrs attrs;
} ew_plan;

/* Checks an elementwise op's arguments and computes its plan (broadcast
 * shape, compute and output dtypes, attributes). < 0 with the error set. */
int op_ew_plan(int op, const op_val *args, int n_args, ew_plan *p);

/* op_ew_run with the plan op_ew_plan gave for these arguments (the eager
 * dispatcher plans once for the output and the kernel). out is the plan's
 * shape and dtype, contiguous; 0, or < 0 with the error set. */
int op_ew_run_plan(int op, const op_val *args, int n_args, const ew_plan *p, kiln_tensor *out);

typedef struct ew_operand {
  const char *base;               /* data of element [0..0] */
  kiln_dtype dtype;
  int64_t strides[KILN_MAX_DIMS]; /* aligned to the output's dims; 0 = broadcast */
  bool direct;                    /* contiguous over the output, same shape */
} ew_operand;

/* Describes tensor t read over an output of the given shape. */
void op_ew_operand_init(ew_operand *o, const kiln_tensor *t, int ndim, const int64_t *shape);
/* Copies n elements starting at flat output index i0 into buf in dtype cd. */
void op_ew_gather(const ew_operand *o, int ndim, const int64_t *shape, int64_t i0, int64_t n,
                  void *buf, kiln_dtype cd);
/* Converts n elements from src (dtype sd) to dst (dtype dd). */
void op_ew_convert(void *dst, kiln_dtype dd, const void *src, kiln_dtype sd, int64_t n);
/* Fills n elements of buf (dtype dt) with a number (int64 exactly). */
void op_ew_fill(void *buf, kiln_dtype dt, const op_val *v, int64_t n);

#endif
