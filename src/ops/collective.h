/* src/ops/collective.h: the all-reduce ops' entry points for the dist
 * layer, and the hooks through which their kernels reach it (kiln_dist_init
 * sets them; Note [All-reduce start and wait] in collective.c). */
#ifndef KILN_OPS_COLLECTIVE_H
#define KILN_OPS_COLLECTIVE_H

#include "op.h"

/* Starts the in-place sum of n elements of dtype dt at buf over the ranks
 * of group; the buffer stays in flight until op_all_reduce_wait_hook(buf).
 * 0 or negative with the message set. NULL until MPI is initialised. */
extern int (*op_all_reduce_start_hook)(void *buf, int64_t n, kiln_dtype dt, int group);
/* Waits (bounded by the dist timeout) for the sum started on buf; 0 or
 * negative with the message set (also when no sum was started on buf). */
extern int (*op_all_reduce_wait_hook)(void *buf, int64_t n);

/* aten::kiln_all_reduce_start / _wait on t (a new tensor in the current
 * scope, lazy when t is; NULL with the error set). */
kiln_tensor *op_all_reduce_start(kiln_tensor *t, int world_size, int group);
kiln_tensor *op_all_reduce_wait(kiln_tensor *t, int world_size, int group);

#endif
