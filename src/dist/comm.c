/* src/dist/comm.c: kiln's MPI wrapper, the one file that includes mpi.h:
 * init/finalize, rank and size, broadcast and all-reduce, non-blocking
 * all-reduce requests, and waits bounded by the timeout. Errors come back
 * through MPI_ERRORS_RETURN as messages. Without KILN_MPI (make MPI=1)
 * every call that communicates fails with "built without MPI".
 *
 * Note [Bounded waits]: Open MPI 4.1 has no cancel for collectives and no
 * timeout of its own, so a wait is a loop of MPI_Test with a deadline; on
 * the deadline the caller reports what it waited for and the process exits
 * (mpirun then ends the job). The loop yields the CPU between tests
 * (sched_yield, then 50 us sleeps after the first millisecond) so two ranks
 * sharing a core still make progress. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "dist.h"
#include "ops/collective.h"

static double timeout_s = 300;

double dist_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void kiln_dist_set_timeout(double seconds) {
  if (seconds > 0) timeout_s = seconds;
}

double kiln_dist_timeout(void) { return timeout_s; }

#ifdef KILN_MPI
#include <mpi.h>

struct dist_req {
  MPI_Request req;
  bool done;
};

static bool inited_here, inited;
static int my_rank, world = 1;

bool kiln_dist_built(void) { return true; }

static int mpi_fail(int err, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", err);
  return core_error(KILN_ERR_STATE, "dist: rank %d: %s failed: %s", my_rank, what, msg);
}

static int need_init(const char *what) {
  if (inited) return 0;
  return core_error(KILN_ERR_STATE, "dist: %s before kiln_dist_init", what);
}

static int op_hook(void *buf, int64_t n, kiln_dtype dt, int group);

kiln_status kiln_dist_init(void) {
  int flag = 0, provided = 0, err;
  if (inited) return KILN_OK;
  MPI_Initialized(&flag);
  if (!flag) {
    err = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Init_thread");
    inited_here = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  inited = true;
  op_all_reduce_hook = op_hook;
  return KILN_OK;
}

kiln_status kiln_dist_finalize(void) {
  if (!inited) return KILN_OK;
  inited = false;
  op_all_reduce_hook = NULL;
  my_rank = 0;
  world = 1;
  if (inited_here) {
    int flag = 0;
    MPI_Finalized(&flag);
    if (!flag) MPI_Finalize();
  }
  return KILN_OK;
}

bool kiln_dist_is_initialized(void) { return inited; }
int kiln_dist_rank(void) { return my_rank; }
int kiln_dist_world_size(void) { return world; }

/* Note [Bounded waits] */
static int wait_req(MPI_Request *req, double seconds, const char *what) {
  double deadline = dist_now() + seconds, start = dist_now();
  for (;;) {
    int flag = 0, err = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (err != MPI_SUCCESS) return mpi_fail(err, what);
    if (flag) return 0;
    double now = dist_now();
    if (now > deadline)
      return core_error(KILN_ERR_STATE,
                        "dist: rank %d of %d: timed out after %.0f s in %s: another rank "
                        "died or stopped taking part (--dist-timeout)",
                        my_rank, world, seconds, what);
    if (now - start < 1e-3) sched_yield();
    else nanosleep(&(struct timespec){0, 50000}, NULL);
  }
}

dist_req *dist_iallreduce_sum(void *buf, int64_t n, kiln_dtype dt) {
  if (need_init("all-reduce") < 0) return NULL;
  if (n > INT32_MAX) {
    core_error(KILN_ERR_UNSUPPORTED, "dist: a bucket of %lld elements is over MPI's int count",
               (long long)n);
    return NULL;
  }
  if (dt != KILN_DTYPE_F32 && dt != KILN_DTYPE_F64) {
    core_error(KILN_ERR_UNSUPPORTED, "dist: all-reduce of %s", kiln_dtype_name(dt));
    return NULL;
  }
  dist_req *r = core_calloc(1, sizeof *r);
  if (!r) return NULL;
  int err = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dt == KILN_DTYPE_F32 ? MPI_FLOAT : MPI_DOUBLE,
                           MPI_SUM, MPI_COMM_WORLD, &r->req);
  if (err != MPI_SUCCESS) {
    mpi_fail(err, "MPI_Iallreduce");
    core_free(r);
    return NULL;
  }
  return r;
}

/* aten::kiln_all_reduce's kernel (Note [All-reduce node]); group 0 is the world. */
static int op_hook(void *buf, int64_t n, kiln_dtype dt, int group) {
  if (group != 0)
    return core_error(KILN_ERR_UNSUPPORTED, "dist: all-reduce over group %d (only 0, the world)",
                      group);
  dist_req *r = dist_iallreduce_sum(buf, n, dt);
  if (!r) return KILN_ERR_STATE;
  int rc = dist_wait(r, timeout_s);
  if (rc < 0) core_error_prefix("aten::kiln_all_reduce of %lld elements: ", (long long)n);
  else dist_req_free(r);
  return rc;
}

int dist_test(dist_req *r) {
  if (r->done) return 1;
  int flag = 0, err = MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE);
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Test");
  r->done = flag != 0;
  return r->done;
}

int dist_wait(dist_req *r, double seconds) {
  if (r->done) return 0;
  int rc = wait_req(&r->req, seconds, "MPI_Iallreduce");
  if (rc == 0) r->done = true;
  return rc;
}

void dist_req_free(dist_req *r) {
  /* a pending request cannot be cancelled (collective): it is leaked with
   * its buffer's owner, which only happens on the way to exiting */
  core_free(r);
}

int dist_bcast_bytes(void *buf, size_t nbytes, int root) {
  if (need_init("broadcast") < 0) return KILN_ERR_STATE;
  unsigned char *p = buf;
  while (nbytes) {
    int k = nbytes > (1u << 30) ? 1 << 30 : (int)nbytes;
    MPI_Request req;
    int err = MPI_Ibcast(p, k, MPI_BYTE, root, MPI_COMM_WORLD, &req);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Ibcast");
    int rc = wait_req(&req, timeout_s, "a broadcast");
    if (rc < 0) return rc;
    p += k;
    nbytes -= (size_t)k;
  }
  return 0;
}

static MPI_Op mpi_op(int op) { return op == KILN_DIST_MAX ? MPI_MAX : op == KILN_DIST_MIN ? MPI_MIN : MPI_SUM; }

int dist_allreduce_i64(int64_t *v, int n, int op) {
  if (need_init("all-reduce") < 0) return KILN_ERR_STATE;
  MPI_Request req;
  int err = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, mpi_op(op), MPI_COMM_WORLD, &req);
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Iallreduce");
  return wait_req(&req, timeout_s, "an all-reduce of counts");
}

kiln_status kiln_dist_all_reduce_f64(double *v, int n, kiln_dist_op op) {
  if (need_init("all-reduce") < 0) return KILN_ERR_STATE;
  MPI_Request req;
  int err = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, mpi_op((int)op), MPI_COMM_WORLD, &req);
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Iallreduce");
  return wait_req(&req, timeout_s, "an all-reduce");
}

kiln_status kiln_dist_barrier(void) {
  if (need_init("barrier") < 0) return KILN_ERR_STATE;
  MPI_Request req;
  int err = MPI_Ibarrier(MPI_COMM_WORLD, &req);
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Ibarrier");
  return wait_req(&req, timeout_s, "a barrier");
}

#else /* !KILN_MPI */

struct dist_req {
  int unused;
};

bool kiln_dist_built(void) { return false; }

static int no_mpi(const char *what) {
  return core_error(KILN_ERR_UNSUPPORTED,
                    "dist: %s: kiln was built without MPI (rebuild with `make MPI=1`, "
                    "which needs Open MPI: libopenmpi-dev, openmpi-bin)",
                    what);
}

kiln_status kiln_dist_init(void) { return no_mpi("kiln_dist_init"); }
kiln_status kiln_dist_finalize(void) { return KILN_OK; }
bool kiln_dist_is_initialized(void) { return false; }
int kiln_dist_rank(void) { return 0; }
int kiln_dist_world_size(void) { return 1; }
dist_req *dist_iallreduce_sum(void *buf, int64_t n, kiln_dtype dt) {
  no_mpi("all-reduce");
  return NULL;
}
int dist_test(dist_req *r) { return no_mpi("test"); }
int dist_wait(dist_req *r, double seconds) { return no_mpi("wait"); }
void dist_req_free(dist_req *r) { core_free(r); }
int dist_bcast_bytes(void *buf, size_t nbytes, int root) { return no_mpi("broadcast"); }
int dist_allreduce_i64(int64_t *v, int n, int op) { return no_mpi("all-reduce"); }
kiln_status kiln_dist_all_reduce_f64(double *v, int n, kiln_dist_op op) {
  return no_mpi("kiln_dist_all_reduce_f64");
}
kiln_status kiln_dist_barrier(void) { return no_mpi("kiln_dist_barrier"); }

#endif

/* Shapes and dtypes are compared first (MAX and MIN of each rank's
 * description), so a mismatch is an error on every rank instead of a
 * broadcast of the wrong length. */
kiln_status kiln_dist_broadcast(kiln_tensor *const *ts, int n, int root) {
  if (!kiln_dist_built()) return dist_bcast_bytes(NULL, 0, root);
  if (!kiln_dist_is_initialized())
    return core_error(KILN_ERR_STATE, "dist: broadcast before kiln_dist_init");
  if (n < 0 || (n > 0 && !ts)) return core_error(KILN_ERR_INVALID, "dist: broadcast: bad list");
  for (int i = 0; i < n; i++) {
    kiln_tensor *t = ts[i];
    if (!t || !kiln_tensor_data(t) || !kiln_tensor_is_contiguous(t))
      return core_error(KILN_ERR_INVALID,
                        "dist: broadcast: tensor %d is not a contiguous CPU tensor", i);
    int64_t d[2 + KILN_MAX_DIMS] = {t->dtype, t->ndim}, lo[2 + KILN_MAX_DIMS];
    memcpy(d + 2, t->shape, (size_t)t->ndim * sizeof *d);
    for (int k = 2 + t->ndim; k < 2 + KILN_MAX_DIMS; k++) d[k] = 0;
    memcpy(lo, d, sizeof d);
    int rc = dist_allreduce_i64(d, 2 + KILN_MAX_DIMS, KILN_DIST_MAX);
    if (rc == 0) rc = dist_allreduce_i64(lo, 2 + KILN_MAX_DIMS, KILN_DIST_MIN);
    if (rc < 0) return rc;
    if (memcmp(d, lo, sizeof d) != 0)
      return core_error(KILN_ERR_INVALID,
                        "dist: broadcast: tensor %d has different shapes or dtypes on "
                        "different ranks",
                        i);
    rc = dist_bcast_bytes(kiln_tensor_data(t),
                          (size_t)kiln_tensor_numel(t) * kiln_dtype_size(t->dtype), root);
    if (rc < 0) return rc;
  }
  return KILN_OK;
}
