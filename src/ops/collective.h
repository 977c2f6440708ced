/* src/ops/collective.h: the hook through which the all-reduce op reaches
 * the dist layer above (which sets it in kiln_dist_init). */
#ifndef KILN_OPS_COLLECTIVE_H
#define KILN_OPS_COLLECTIVE_H

#include "op.h"

/* Sums n elements of dtype dt at buf over the ranks of group, in place;
 * 0 or negative with the message set. NULL until MPI is initialised. */
extern int (*op_all_reduce_hook)(void *buf, int64_t n, kiln_dtype dt, int group);

#endif
