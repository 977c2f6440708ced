/* src/exec/lazy_anomaly.h: anomaly mode for lazy steps (lazy_anomaly.c),
 * used by lazy_sync.c. */
#ifndef KILN_EXEC_LAZY_ANOMALY_H
#define KILN_EXEC_LAZY_ANOMALY_H

#include "lazy/lazy.h"

/* Does any of the n (CPU) tensors hold a NaN or Inf? */
bool exec_lazy_any_nonfinite(kiln_tensor *const *ts, int n);
/* Replays the pending graph `order` (post order, inputs holding their
 * data) eagerly and fails with a message naming the op and the graph
 * node that made the first NaN/Inf. Always returns a negative status
 * (KILN_ERR_STATE, or KILN_ERR_NOMEM) with the error set; the step's
 * tensors are not touched. */
int exec_lazy_anomaly(lazy_node *const *order, int n_order);

#endif
