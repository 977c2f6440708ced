/* src/dist/comm.c: kiln's MPI wrapper, the one file that includes mpi.h:
 * init/finalize, rank and size, broadcast and all-reduce, non-blocking
 * all-reduce requests, and waits bounded by the timeout. Errors come back
 * through MPI_ERRORS_RETURN as messages. Without KILN_MPI (make MPI=1)
 * every call that communicates fails with "built without MPI".
 *
 * Note [Bounded waits]: Open MPI 4.1 has no cancel for collectives and no
 * timeout of its own, so a wait is a loop of MPI_Test with a deadline; on
 * the deadline the caller reports what it waited for and the process exits
 * (mpirun then ends the job). The loop tests without pause for the first
 * 250 us (an all-reduce whose ranks are all there completes in that time:
 * 110 us for the CNN's 320 KiB on this machine), then yields the CPU
 * between tests (sched_yield, then 50 us sleeps after the first half
 * second) so two ranks sharing a core still make progress. With another
 * process runnable, sched_yield hands it the core for its time slice, so
 * a wait of a few microseconds (the peer is there) should not yield; a
 * wait for a peer that is late should (at load 9-12, 2 CNN ranks: 250 us
 * then yields gave 890-913 samples/s, yielding at once 856-931, spinning
 * 30 ms 790-803, alternating runs). Sleeping earlier is slow: a
 * large all-reduce advances one round per test, so a sleep per round made
 * 2 ranks slower than 1 (the MLP's 784 KiB bucket).
 *
 * Note [Progress thread]: with KILN_DIST_PROGRESS_THREAD=1, kiln_dist_init
 * asks for MPI_THREAD_SERIALIZED and starts a thread that tests the pending
 * all-reduces every 100 us, so they progress while the backward runs
 * kernels for long stretches between nodes. Every MPI call then holds
 * mpi_lock (SERIALIZED: one thread in MPI at a time). Off by default: on a
 * machine with as many ranks as cores the thread takes CPU from the
 * compute, and the engine's tests between nodes (Note [Progress] in
 * reducer.c) already come often.
 *
 * Note [Graph all-reduces]: the sums that aten::kiln_all_reduce_start
 * began (Note [All-reduce start and wait] in src/ops/collective.c) are kept
 * here in start order, each under its buffer's address, until the wait
 * that names the buffer. While any is pending the executor calls
 * graph_progress after every instruction (Note [Run progress] in
 * src/exec/code.h), which tests them in order at most every 20 us, as the
 * engine's callback does for eager buckets (Note [Progress] in
 * reducer.c). Their statistics: comm is the span from the first start to
 * the last completion of each run of all-reduces (from an empty list back
 * to empty), wait the time spent blocked inside the waits. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist.h"
#include "exec/code.h"
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
  struct dist_req *next; /* the progress thread's list of pending requests */
};

static bool inited_here, inited;
static int my_rank, world = 1;

/* Note [Progress thread] */
static bool use_thread, thread_stop;
static pthread_t progress_tid;
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static dist_req *pending;

static void lock(void) {
  if (use_thread) pthread_mutex_lock(&mpi_lock);
}
static void unlock(void) {
  if (use_thread) pthread_mutex_unlock(&mpi_lock);
}

static void *progress_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mpi_lock);
    bool stop = thread_stop;
    for (dist_req *r = pending; r && !stop; r = r->next)
      if (!r->done) {
        int flag = 0;
        if (MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) r->done = true;
      }
    pthread_mutex_unlock(&mpi_lock);
    if (stop) return NULL;
    nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

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

static int start_hook(void *buf, int64_t n, kiln_dtype dt, int group);
static int wait_hook(void *buf, int64_t n);
static void graph_reqs_free(void);

kiln_status kiln_dist_init(void) {
  int flag = 0, provided = 0, err;
  if (inited) return KILN_OK;
  MPI_Initialized(&flag);
  if (!flag) {
    const char *env = getenv("KILN_DIST_PROGRESS_THREAD");
    bool want = env && strcmp(env, "1") == 0;
    err = MPI_Init_thread(NULL, NULL, want ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED,
                          &provided);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Init_thread");
    inited_here = true;
    if (want && provided < MPI_THREAD_SERIALIZED)
      return core_error(KILN_ERR_UNSUPPORTED,
                        "dist: KILN_DIST_PROGRESS_THREAD=1 needs MPI_THREAD_SERIALIZED; this MPI "
                        "provides level %d",
                        provided);
    if (want) {
      thread_stop = false;
      use_thread = pthread_create(&progress_tid, NULL, progress_main, NULL) == 0;
      if (!use_thread) return core_error(KILN_ERR_STATE, "dist: cannot start the progress thread");
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  inited = true;
  op_all_reduce_start_hook = start_hook;
  op_all_reduce_wait_hook = wait_hook;
  return KILN_OK;
}

kiln_status kiln_dist_finalize(void) {
  if (!inited) return KILN_OK;
  inited = false;
  op_all_reduce_start_hook = NULL;
  op_all_reduce_wait_hook = NULL;
  graph_reqs_free();
  if (use_thread) {
    pthread_mutex_lock(&mpi_lock);
    thread_stop = true;
    pthread_mutex_unlock(&mpi_lock);
    pthread_join(progress_tid, NULL);
    use_thread = false;
  }
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

/* Note [Bounded waits]; seconds is what is left of the timeout, which
 * the message names. */
static int wait_req(MPI_Request *req, double seconds, const char *what) {
  double deadline = dist_now() + seconds, start = dist_now();
  for (;;) {
    lock();
    int flag = 0, err = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    unlock();
    if (err != MPI_SUCCESS) return mpi_fail(err, what);
    if (flag) return 0;
    double now = dist_now();
    if (now > deadline)
      return core_error(KILN_ERR_STATE,
                        "dist: rank %d of %d: timed out after %.0f s in %s: another rank "
                        "died or stopped taking part (--dist-timeout)",
                        my_rank, world, timeout_s, what);
    if (now - start < 250e-6) continue;
    if (now - start < 0.5) sched_yield();
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
  lock();
  int err = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dt == KILN_DTYPE_F32 ? MPI_FLOAT : MPI_DOUBLE,
                           MPI_SUM, MPI_COMM_WORLD, &r->req);
  if (err == MPI_SUCCESS && use_thread) {
    r->next = pending;
    pending = r;
  }
  unlock();
  if (err != MPI_SUCCESS) {
    mpi_fail(err, "MPI_Iallreduce");
    core_free(r);
    return NULL;
  }
  return r;
}

/* Note [Graph all-reduces] */
typedef struct graph_req {
  void *buf;
  int64_t n;
  dist_req *r;
  double t_done; /* 0 until seen complete */
} graph_req;

static graph_req *greqs;
static int n_greqs, cap_greqs;
static double g_first, g_last_done, g_last_test, g_wait_s, g_comm_s;

static void graph_progress(void *ud) {
  (void)ud;
  double now = dist_now();
  if (now - g_last_test < 20e-6) return;
  g_last_test = now;
  for (int k = 0; k < n_greqs; k++) {
    if (greqs[k].t_done > 0) continue;
    if (dist_test(greqs[k].r) <= 0) break; /* an error: the wait reports it */
    greqs[k].t_done = dist_now();
  }
}

static void graph_reqs_free(void) {
  for (int k = 0; k < n_greqs; k++) dist_req_free(greqs[k].r);
  core_free(greqs);
  greqs = NULL;
  n_greqs = cap_greqs = 0;
  exec_set_run_progress(NULL, NULL);
  core_set_poll(NULL, NULL); /* Note [Kernel poll] */
}

/* aten::kiln_all_reduce_start's hook; group 0 is the world. */
static int start_hook(void *buf, int64_t n, kiln_dtype dt, int group) {
  if (group != 0)
    return core_error(KILN_ERR_UNSUPPORTED, "dist: all-reduce over group %d (only 0, the world)",
                      group);
  for (int k = 0; k < n_greqs; k++)
    if (greqs[k].buf == buf)
      return core_error(KILN_ERR_STATE,
                        "dist: an all-reduce on this buffer is still in flight (a graph failed "
                        "between aten::kiln_all_reduce_start and its wait)");
  if (n_greqs == cap_greqs) {
    int cap = cap_greqs ? 2 * cap_greqs : 16;
    graph_req *v = core_realloc(greqs, (size_t)cap * sizeof *v);
    if (!v) return core_error(KILN_ERR_NOMEM, "dist: out of memory");
    greqs = v;
    cap_greqs = cap;
  }
  dist_req *r = dist_iallreduce_sum(buf, n, dt);
  if (!r) {
    core_error_prefix("aten::kiln_all_reduce_start of %lld elements: ", (long long)n);
    return KILN_ERR_STATE;
  }
  if (n_greqs == 0) g_first = dist_now();
  greqs[n_greqs++] = (graph_req){buf, n, r, 0};
  exec_set_run_progress(graph_progress, NULL);
  core_set_poll(graph_progress, NULL); /* Note [Kernel poll] */
  return 0;
}

/* aten::kiln_all_reduce_wait's hook: waits for the sum started on buf. */
static int wait_hook(void *buf, int64_t n) {
  int k = 0;
  while (k < n_greqs && (greqs[k].buf != buf || greqs[k].n != n)) k++;
  if (k == n_greqs)
    return core_error(KILN_ERR_STATE,
                      "aten::kiln_all_reduce_wait: no all-reduce of %lld elements was started "
                      "on its input (it must be aten::kiln_all_reduce_start's output)",
                      (long long)n);
  graph_req *q = &greqs[k];
  double t0 = dist_now();
  int rc = dist_wait(q->r, timeout_s);
  double t1 = dist_now();
  if (rc < 0) {
    core_error_prefix("aten::kiln_all_reduce_wait of %lld elements (all-reduce %d of %d in "
                      "flight): ",
                      (long long)n, k + 1, n_greqs);
    return rc;
  }
  g_wait_s += t1 - t0;
  if (q->t_done <= 0) q->t_done = t1;
  if (q->t_done > g_last_done) g_last_done = q->t_done;
  dist_req_free(q->r);
  memmove(q, q + 1, (size_t)(n_greqs - k - 1) * sizeof *q);
  if (--n_greqs == 0) {
    g_comm_s += g_last_done > g_first ? g_last_done - g_first : 0;
    g_last_done = 0;
    exec_set_run_progress(NULL, NULL);
    core_set_poll(NULL, NULL); /* Note [Kernel poll] */
  }
  return 0;
}

void dist_graph_stats(double *wait_seconds, double *comm_seconds) {
  *wait_seconds = g_wait_s;
  *comm_seconds = g_comm_s;
}

int dist_test(dist_req *r) {
  int flag = 0, err = MPI_SUCCESS;
  lock();
  if (!r->done) err = MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE);
  if (flag) r->done = true;
  bool done = r->done;
  unlock();
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Test");
  return done;
}

int dist_wait(dist_req *r, double seconds) {
  /* a request the progress thread completed is MPI_REQUEST_NULL: its test
   * returns at once */
  int rc = wait_req(&r->req, seconds, "MPI_Iallreduce");
  if (rc == 0) {
    lock();
    r->done = true;
    unlock();
  }
  return rc;
}

/* A pending request cannot be cancelled (a collective): freeing one only
 * happens on the way to exiting after an error, and leaks its MPI state. */
void dist_req_free(dist_req *r) {
  if (!r) return;
  lock();
  for (dist_req **p = &pending; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  unlock();
  core_free(r);
}

int dist_bcast_bytes(void *buf, size_t nbytes, int root) {
  if (need_init("broadcast") < 0) return KILN_ERR_STATE;
  unsigned char *p = buf;
  while (nbytes) {
    int k = nbytes > (1u << 30) ? 1 << 30 : (int)nbytes;
    MPI_Request req;
    lock();
    int err = MPI_Ibcast(p, k, MPI_BYTE, root, MPI_COMM_WORLD, &req);
    unlock();
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
  lock();
  int err = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, mpi_op(op), MPI_COMM_WORLD, &req);
  unlock();
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Iallreduce");
  return wait_req(&req, timeout_s, "an all-reduce of counts");
}

kiln_status kiln_dist_all_reduce_f64(double *v, int n, kiln_dist_op op) {
  if (need_init("all-reduce") < 0) return KILN_ERR_STATE;
  MPI_Request req;
  lock();
  int err = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, mpi_op((int)op), MPI_COMM_WORLD, &req);
  unlock();
  if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Iallreduce");
  return wait_req(&req, timeout_s, "an all-reduce");
}

kiln_status kiln_dist_barrier(void) {
  if (need_init("barrier") < 0) return KILN_ERR_STATE;
  MPI_Request req;
  lock();
  int err = MPI_Ibarrier(MPI_COMM_WORLD, &req);
  unlock();
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
void dist_graph_stats(double *wait_seconds, double *comm_seconds) {
  *wait_seconds = *comm_seconds = 0;
}

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
