/* src/dist/dist.h: the dist layer's internal view: the MPI wrapper that
 * comm.c implements (the only file that includes mpi.h; without MPI=1 it
 * is stubs that fail with "built without MPI"), used by the reducer. */
#ifndef KILN_DIST_H
#define KILN_DIST_H

#include "core/core.h"

/* A pending non-blocking all-reduce (MPI_Request inside comm.c). */
typedef struct dist_req dist_req;

/* Starts an in-place sum all-reduce of n elements of dtype dt at buf
 * (float32 or float64) over the world. Returns a request the caller ends
 * with dist_wait (or frees with dist_req_free after an error), or NULL
 * with the message set. */
dist_req *dist_iallreduce_sum(void *buf, int64_t n, kiln_dtype dt);
/* Tests the request without blocking: 1 done, 0 pending, negative on an
 * MPI error (message set). A done request stays valid until freed. */
int dist_test(dist_req *r);
/* Waits until the request completes or `seconds` pass: 0 done, negative
 * with the message set (what names the bucket is the caller's prefix). */
int dist_wait(dist_req *r, double seconds);
void dist_req_free(dist_req *r);

/* Blocking collectives on the world; 0 or negative with the message set,
 * each bounded by the timeout (kiln_dist_set_timeout). */
int dist_bcast_bytes(void *buf, size_t nbytes, int root);
/* In-place all-reduce of n int64 with MAX or MIN (op: kiln_dist_op). */
int dist_allreduce_i64(int64_t *v, int n, int op);

/* The all-reduces that graphs started and waited for (Note [Graph
 * all-reduces] in comm.c), over the process: seconds blocked in the waits
 * and the summed spans from first start to last completion. */
void dist_graph_stats(double *wait_seconds, double *comm_seconds);

/* Seconds since an arbitrary start (monotonic). */
double dist_now(void);

#endif
