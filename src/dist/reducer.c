/* src/dist/reducer.c: the gradient reducer of data-parallel training, after
 * PyTorch DDP's Reducer: gradient buckets, a post-accumulate hook per
 * parameter that marks it ready, all-reduces started bucket by bucket
 * while the backward goes on, and an end-of-backward callback that waits
 * and divides by the world size.
 *
 * Note [Buckets]: parameters are grouped into buckets of one dtype, each a
 * flat tensor; a parameter's .grad is a view into its bucket (after its
 * hook copies the accumulated gradient there, as DDP does without
 * gradient_as_bucket_view). The first layout is reverse registration
 * order (the last layer's gradients are ready first); as DDP's, a bucket
 * closes with the parameter that brings it to its cap, 1 MiB for the first
 * bucket (so that communication starts early), the cap (25 MiB) for the
 * others: a large gradient rides with the small ones ready before it. After the first synced backward the layout is rebuilt
 * once from the order in which the hooks fired, rank 0's order broadcast
 * so that every rank has the same buckets (all-reduces must match).
 *
 * Note [Bucket order]: bucket b's all-reduce starts when all of its
 * parameters are ready AND buckets 0..b-1 have started, so every rank
 * starts the same collectives in the same order whatever order its hooks
 * fire in (on 1 rank none starts: a bucket's sum is its gradient, and the
 * waits find nothing to wait for). Parameters the loss does not reach are marked ready when the
 * backward starts (the engine knows: kiln_backward_will_accumulate), so a
 * bucket never waits for a gradient that will not come; ranks that
 * disagree on which parameters were used still start every all-reduce
 * (no hang) and then fail, naming the parameter, from the side all-reduce.
 *
 * Note [Side all-reduce]: which parameters this rank's loss reaches is
 * known when the backward starts, so a small float64 sum all-reduce of
 * one count per parameter (1 used, 0 not) and the caller's values
 * (kiln_dist_reducer_set_values: the trainer's loss) starts then, before
 * the first bucket, and completes during the backward. At the end a count
 * other than 0 or the world size names a parameter that some ranks used
 * and others did not. A step then synchronises the ranks once, in the
 * waits at the end of the backward, instead of three times (the buckets,
 * a blocking MAX/MIN all-reduce of the used flags, a blocking all-reduce
 * of the loss): each blocking collective made the rank that was ahead
 * wait again for the other's jitter since the last one. The counts and
 * values are small integers and a few doubles: their sums are exact for
 * the counts, and for two ranks the values' sum is the one addition a
 * blocking all-reduce would do. The progress callback does not test it:
 * each test costs a few microseconds (Open MPI's whole progress loop), a
 * rank ahead of the other would test it every 20 us until the other
 * starts it, and testing the buckets, or the wait, progresses it too.
 *
 * Note [Progress]: Open MPI progresses a non-blocking collective only
 * inside MPI calls, so the engine's progress callback tests the started
 * requests between backward nodes, and long kernels call it between their
 * blocks (Note [Kernel poll] in src/core/core.h), at most every 20 us (a
 * test costs ~0.3 us; most nodes take more). Overlap = 1 - wait / comm, where comm
 * is the span from the first start to the last completion seen. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dist.h"
#include "ops/collective.h"

typedef struct bucket {
  kiln_tensor *buf;    /* flat [numel], owned */
  int *idx;            /* parameters, in layout order */
  int n;
  int pending;         /* parameters not ready in this backward */
  dist_req *req;
  double t_start, t_done;
} bucket;

typedef struct slot {
  kiln_dist_reducer *r;
  int i;
} slot;

struct kiln_dist_reducer {
  int n;
  kiln_tensor **params;    /* owned references */
  char **names;
  kiln_tensor **views;     /* per parameter: its view into its bucket (owned) */
  int *bucket_of;
  bucket *b;
  int n_buckets;
  double cap_bytes;
  slot *slots;
  bool *ready, *used;
  int *order;              /* first synced backward: hook order */
  int n_order;
  bool sync, active, reduced, rebuilt, no_rebuild, order_done;
  bool lazy;               /* lazy parameters: Note [Lazy reduction] */
  int next_start;          /* next bucket to start */
  int first_open;          /* first bucket not seen done */
  double last_test;
  double *side;            /* Note [Side all-reduce]: [n + KILN_DIST_MAX_VALUES] */
  dist_req *side_req;
  double values[KILN_DIST_MAX_VALUES], sums[KILN_DIST_MAX_VALUES];
  bool have_sums;
  int status;              /* first error of this backward */
  char msg[640];
  kiln_dist_stats st;
};

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void set_error(kiln_dist_reducer *r, int status) {
  if (r->status < 0) return;
  r->status = status < 0 ? status : KILN_ERR_STATE;
  snprintf(r->msg, sizeof r->msg, "%s", kiln_last_error());
}

static void free_buckets(kiln_dist_reducer *r) {
  for (int k = 0; k < r->n_buckets; k++) {
    kiln_release(r->b[k].buf);
    core_free(r->b[k].idx);
    dist_req_free(r->b[k].req);
  }
  core_free(r->b);
  r->b = NULL;
  r->n_buckets = 0;
  for (int i = 0; i < r->n; i++) {
    kiln_release(r->views[i]);
    r->views[i] = NULL;
  }
}

/* Lays the parameters out in buckets in the given order (Note [Buckets]);
 * lazy parameters get the layout only (Note [Lazy reduction]). */
static int build(kiln_dist_reducer *r, const int *order) {
  bucket *b = core_calloc((size_t)r->n, sizeof *b);
  int nb = 0, rc = 0;
  if (!b) return KILN_ERR_NOMEM;
  double bytes = 0;
  bool full = false; /* the open bucket reached its cap */
  for (int k = 0; k < r->n; k++) {
    int i = order[k];
    kiln_tensor *p = r->params[i];
    double nbytes = (double)kiln_tensor_numel(p) * (double)kiln_dtype_size(p->dtype);
    bool fresh = nb == 0 || full || kiln_tensor_dtype(r->params[b[nb - 1].idx[0]]) != p->dtype;
    if (fresh) {
      nb++;
      bytes = 0;
      full = false;
      b[nb - 1].idx = core_alloc((size_t)r->n * sizeof(int));
      if (!b[nb - 1].idx) {
        rc = KILN_ERR_NOMEM;
        goto fail;
      }
    }
    b[nb - 1].idx[b[nb - 1].n++] = i;
    r->bucket_of[i] = nb - 1;
    bytes += nbytes;
    /* as DDP (compute_bucket_assignment_by_size): the parameter that
     * reaches the cap closes its bucket, so a large gradient shares the
     * bucket of the small ones ready before it and starts with them */
    double cap = nb == 1 && r->cap_bytes > 1048576.0 ? 1048576.0 : r->cap_bytes;
    full = bytes >= cap;
  }
  kiln_scope_begin();
  for (int k = 0; k < nb && rc == 0 && !r->lazy; k++) {
    int64_t numel = 0;
    for (int j = 0; j < b[k].n; j++) numel += kiln_tensor_numel(r->params[b[k].idx[j]]);
    kiln_dtype dt = kiln_tensor_dtype(r->params[b[k].idx[0]]);
    kiln_tensor *buf = kiln_zeros(1, &numel, dt);
    if (!buf) {
      rc = KILN_ERR_NOMEM;
      break;
    }
    b[k].buf = kiln_keep(buf);
    int64_t off = 0;
    for (int j = 0; j < b[k].n && rc == 0; j++) {
      kiln_tensor *p = r->params[b[k].idx[j]];
      int64_t m = kiln_tensor_numel(p);
      kiln_tensor *v = kiln_narrow(buf, 0, off, m);
      v = v ? kiln_view(v, kiln_tensor_ndim(p), kiln_tensor_shape(p)) : NULL;
      if (!v) rc = KILN_ERR_NOMEM;
      else r->views[b[k].idx[j]] = kiln_keep(v);
      off += m;
    }
  }
  kiln_scope_end();
  r->b = b;
  r->n_buckets = nb;
  if (rc < 0) free_buckets(r);
  r->st.n_buckets = r->n_buckets;
  return rc;
fail:
  for (int k = 0; k < nb; k++) core_free(b[k].idx);
  core_free(b);
  return rc;
}

/* Starts the buckets that may start (Note [Bucket order]). */
static void start_ready(kiln_dist_reducer *r) {
  while (r->next_start < r->n_buckets && r->b[r->next_start].pending == 0) {
    bucket *b = &r->b[r->next_start];
    if (r->status == 0 && kiln_dist_world_size() > 1) { /* 1 rank: the sum is the gradient */
      b->req = dist_iallreduce_sum(kiln_tensor_data(b->buf), kiln_tensor_numel(b->buf),
                                   kiln_tensor_dtype(b->buf));
      if (!b->req) set_error(r, KILN_ERR_STATE);
    }
    b->t_start = dist_now();
    r->next_start++;
  }
}

/* Moves parameter i's gradient into its bucket (zeros when it has none)
 * and marks it ready. */
static void mark_ready(kiln_dist_reducer *r, int i) {
  if (r->ready[i]) return;
  r->ready[i] = true;
  kiln_tensor *p = r->params[i], *v = r->views[i], *g = kiln_tensor_grad(p);
  if (!g) {
    memset(kiln_tensor_data(v), 0, (size_t)kiln_tensor_numel(v) * kiln_dtype_size(v->dtype));
  } else if (g != v) {
    if (kiln_tensor_data(g) != kiln_tensor_data(v) || !kiln_tensor_is_contiguous(g) ||
        g->dtype != v->dtype) {
      int rc = kiln_copy_(v, g);
      if (rc < 0) set_error(r, rc);
    }
    kiln_tensor_set_grad(p, v);
  }
  bucket *b = &r->b[r->bucket_of[i]];
  if (--b->pending == 0) start_ready(r);
}

static void progress(void *ud) {
  kiln_dist_reducer *r = ud;
  double now = dist_now();
  if (now - r->last_test < 20e-6) return;
  r->last_test = now;
  bool tested = false;
  while (r->first_open < r->next_start && r->status == 0) {
    bucket *b = &r->b[r->first_open];
    int k = b->req ? dist_test(b->req) : 1;
    tested = true;
    r->st.n_tests += b->req != NULL;
    if (k < 0) set_error(r, k);
    if (k <= 0) break;
    b->t_done = dist_now();
    r->first_open++;
  }
  if (tested) r->st.test_seconds += dist_now() - now;
}

/* Note [Bucket order]: every rank waits for every bucket, and errors name it. */
static void end_backward(void *ud) {
  kiln_dist_reducer *r = ud;
  kiln_set_backward_progress(NULL, NULL);
  core_set_poll(NULL, NULL); /* Note [Kernel poll] */
  if (!r->active) return;
  for (int i = r->n - 1; i >= 0; i--)
    if (!r->ready[i]) mark_ready(r, i);
  double t0 = dist_now(), first = t0, last = 0, deadline = t0 + kiln_dist_timeout();
  double c0 = cpu_now();
  for (int k = 0; k < r->n_buckets; k++) {
    bucket *b = &r->b[k];
    double left = deadline - dist_now(); /* one timeout for all the buckets */
    if (r->status == 0 && b->req && dist_wait(b->req, left > 0 ? left : 0) < 0) {
      core_error_prefix("bucket %d of %d (%d parameters from '%s'): ", k, r->n_buckets, b->n,
                        r->names[b->idx[0]]);
      set_error(r, KILN_ERR_STATE);
    }
    if (k >= r->first_open) b->t_done = dist_now();
    if (b->t_start < first) first = b->t_start;
    if (b->t_done > last) last = b->t_done;
    dist_req_free(b->req);
    b->req = NULL;
  }
  /* Note [Side all-reduce]: it started first and progressed with the
   * buckets, so it is done by now unless a rank failed; waited for last,
   * so that a rank that stopped is reported at the bucket it held up */
  double ts = dist_now(), left = deadline - ts;
  if (r->status == 0 && r->side_req && dist_wait(r->side_req, left > 0 ? left : 0) < 0) {
    core_error_prefix("the used-parameter all-reduce (after bucket %d of %d): ",
                      r->n_buckets - 1, r->n_buckets);
    set_error(r, KILN_ERR_STATE);
  }
  dist_req_free(r->side_req);
  r->side_req = NULL;
  double t1 = dist_now();
  r->st.flags_seconds += t1 - ts;
  if (r->status == 0 && kiln_dist_world_size() > 1) {
    r->st.wait_seconds += t1 - t0;
    r->st.wait_cpu_seconds += cpu_now() - c0;
    r->st.comm_seconds += last > first ? last - first : 0;
    r->st.overlap = r->st.comm_seconds > 0 ? 1 - r->st.wait_seconds / r->st.comm_seconds : 0;
  }
  if (r->status == 0) r->st.n_reductions++;
  int world = kiln_dist_world_size();
  double t2 = dist_now();
  for (int k = 0; k < r->n_buckets && r->status == 0 && world > 1; k++) {
    int64_t m = kiln_tensor_numel(r->b[k].buf);
    if (kiln_tensor_dtype(r->b[k].buf) == KILN_DTYPE_F32) {
      float *x = kiln_tensor_data(r->b[k].buf);
      for (int64_t j = 0; j < m; j++) x[j] /= (float)world;
    } else {
      double *x = kiln_tensor_data(r->b[k].buf);
      for (int64_t j = 0; j < m; j++) x[j] /= (double)world;
    }
  }
  r->st.divide_seconds += dist_now() - t2;
  /* Note [Side all-reduce]: every rank's count is 0 or 1, so the sum is 0
   * (no rank used it) or the world size (all did) */
  for (int i = 0; i < r->n && r->status == 0; i++)
    if (r->side[i] != 0 && r->side[i] != (double)world) {
      set_error(r, core_error(KILN_ERR_STATE,
                              "dist: rank %d: parameter '%s' was %s by this rank's loss "
                              "but not by every rank's (all ranks must use the same "
                              "parameters in each step)",
                              kiln_dist_rank(), r->names[i],
                              r->used[i] ? "used" : "not reached"));
    }
  if (r->status == 0) {
    memcpy(r->sums, r->side + r->n, sizeof r->sums);
    r->have_sums = true;
  }
  memset(r->values, 0, sizeof r->values);
  r->active = false;
  r->reduced = true;
}

/* The first hook of a synced backward (or finish, when none fired). */
static void begin_backward(kiln_dist_reducer *r, bool in_backward) {
  r->active = true;
  r->next_start = r->first_open = 0;
  r->last_test = 0;
  for (int k = 0; k < r->n_buckets; k++) r->b[k].pending = r->b[k].n;
  memset(r->ready, 0, (size_t)r->n * sizeof *r->ready);
  if (in_backward) {
    int rc = kiln_queue_callback(end_backward, r);
    if (rc < 0) set_error(r, rc);
    kiln_set_backward_progress(progress, r);
    core_set_poll(progress, r); /* Note [Kernel poll] */
  }
  for (int i = r->n - 1; i >= 0; i--) {
    int w = in_backward ? kiln_backward_will_accumulate(r->params[i]) : 0;
    r->used[i] = w == 1;
  }
  /* Note [Side all-reduce]: before any bucket's, on every rank */
  for (int i = 0; i < r->n; i++) r->side[i] = r->used[i];
  memcpy(r->side + r->n, r->values, sizeof r->values);
  r->have_sums = false;
  if (r->status == 0 && kiln_dist_world_size() > 1) {
    r->side_req = dist_iallreduce_sum(r->side, r->n + KILN_DIST_MAX_VALUES, KILN_DTYPE_F64);
    if (!r->side_req) set_error(r, KILN_ERR_STATE);
  }
  for (int i = r->n - 1; i >= 0; i--)
    if (!r->used[i]) mark_ready(r, i);
}

static void on_accumulate(kiln_tensor *leaf, void *ud) {
  slot *s = ud;
  kiln_dist_reducer *r = s->r;
  if (!r || !r->sync) return;
  double t0 = dist_now();
  if (!r->active) begin_backward(r, true);
  if (!r->order_done && r->n_order < r->n) r->order[r->n_order++] = s->i;
  r->used[s->i] = true;
  mark_ready(r, s->i);
  r->st.hook_seconds += dist_now() - t0;
}

/* Rebuilds the layout from the first synced backward's order, rank 0's
 * (Note [Buckets]); the reduced gradients move into the new buckets. */
static int rebuild(kiln_dist_reducer *r) {
  int *order = core_alloc((size_t)r->n * sizeof *order);
  bool *seen = core_calloc((size_t)r->n, sizeof *seen);
  kiln_tensor **grads = core_calloc((size_t)r->n, sizeof *grads);
  int k = 0, rc = 0;
  if (!order || !seen || !grads) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int j = 0; j < r->n_order; j++)
    if (!seen[r->order[j]]) {
      seen[r->order[j]] = true;
      order[k++] = r->order[j];
    }
  for (int i = r->n - 1; i >= 0; i--)
    if (!seen[i]) order[k++] = i;
  int64_t *o64 = core_alloc((size_t)r->n * sizeof *o64);
  if (!o64) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < r->n; i++) o64[i] = order[i];
  rc = dist_bcast_bytes(o64, (size_t)r->n * sizeof *o64, 0);
  for (int i = 0; i < r->n; i++) order[i] = (int)o64[i];
  core_free(o64);
  if (rc < 0) goto done;
  kiln_scope_begin(); /* the clones are ours whether or not a scope is open */
  for (int i = 0; i < r->n && rc == 0; i++) {
    kiln_tensor *g = kiln_tensor_grad(r->params[i]);
    grads[i] = g ? kiln_clone(g) : NULL;
    if (grads[i]) kiln_keep(grads[i]);
    else if (g) rc = KILN_ERR_NOMEM;
  }
  kiln_scope_end();
  if (rc < 0) goto done;
  free_buckets(r);
  if ((rc = build(r, order)) < 0) goto done;
  for (int i = 0; i < r->n; i++)
    if (grads[i]) {
      if ((rc = kiln_copy_(r->views[i], grads[i])) < 0) goto done;
      kiln_tensor_set_grad(r->params[i], r->views[i]);
    }
  r->rebuilt = r->st.rebuilt = true;
done:
  if (grads)
    for (int i = 0; i < r->n; i++) kiln_release(grads[i]);
  core_free(grads);
  core_free(order);
  core_free(seen);
  return rc;
}

/* Note [Lazy reduction]: on lazy parameters nothing has run when the
 * backward returns, so the reducer records, per bucket, the flattened
 * gradients' concatenation, an aten::kiln_all_reduce_start node and its
 * aten::kiln_all_reduce_wait (Note [All-reduce start and wait] in
 * src/ops/collective.c) and the views back into .grad: the reduction
 * becomes part of the step's graph, which runs at the next mark_step, each
 * bucket's all-reduce started right after the gradients it sums and waited
 * for just before the optimizer reads it (pass_schedule_collectives). Which parameters have gradients is known when the
 * recording ends; the ranks compare it (MAX/MIN all-reduce) first, so a
 * disagreement fails naming the parameter before any graph runs. The
 * layout stays in registration order reversed (hooks firing during a
 * recording say nothing about when gradients are computed). */
static int lazy_finish(kiln_dist_reducer *r) {
  int rc = 0, world = kiln_dist_world_size();
  int64_t *v = core_alloc((size_t)r->n * 2 * sizeof *v);
  if (!v) return core_error(KILN_ERR_NOMEM, "dist: out of memory");
  for (int i = 0; i < r->n; i++) {
    r->used[i] = kiln_tensor_grad(r->params[i]) != NULL;
    v[i] = r->used[i];
    v[r->n + i] = -(int64_t)r->used[i];
  }
  rc = dist_allreduce_i64(v, 2 * r->n, KILN_DIST_MAX);
  for (int i = 0; i < r->n && rc == 0; i++)
    if (v[i] != -v[r->n + i])
      rc = core_error(KILN_ERR_STATE,
                      "dist: rank %d: parameter '%s' has a gradient on some ranks and not on "
                      "others (all ranks must use the same parameters in each step)",
                      kiln_dist_rank(), r->names[i]);
  core_free(v);
  if (rc < 0) return rc;
  bool was = kiln_set_grad_enabled(false);
  kiln_scope_begin();
  for (int k = 0; k < r->n_buckets && rc == 0; k++) {
    bucket *b = &r->b[k];
    kiln_tensor **parts = core_calloc((size_t)b->n, sizeof *parts);
    int np = 0;
    if (!parts) {
      rc = core_error(KILN_ERR_NOMEM, "dist: out of memory");
      break;
    }
    for (int j = 0; j < b->n; j++) {
      kiln_tensor *g = kiln_tensor_grad(r->params[b->idx[j]]);
      if (g) parts[np++] = kiln_reshape(g, 1, (int64_t[]){-1});
    }
    kiln_tensor *flat = np == 1 ? parts[0] : np ? kiln_cat(parts, np, 0) : NULL;
    core_free(parts);
    if (np == 0) continue;
    kiln_tensor *started = flat ? op_all_reduce_start(flat, world, 0) : NULL;
    kiln_tensor *red = started ? op_all_reduce_wait(started, world, 0) : NULL;
    if (!red) {
      rc = KILN_ERR_STATE;
      break;
    }
    int64_t off = 0;
    for (int j = 0; j < b->n && rc == 0; j++) {
      kiln_tensor *p = r->params[b->idx[j]];
      if (!kiln_tensor_grad(p)) continue;
      int64_t m = kiln_tensor_numel(p);
      kiln_tensor *g = kiln_narrow(red, 0, off, m);
      g = g ? kiln_view(g, kiln_tensor_ndim(p), kiln_tensor_shape(p)) : NULL;
      rc = g ? kiln_tensor_set_grad(p, g) : KILN_ERR_STATE;
      off += m;
    }
  }
  kiln_scope_end();
  kiln_set_grad_enabled(was);
  if (rc == 0) r->st.n_reductions++;
  return rc;
}

kiln_dist_reducer *kiln_dist_reducer_new(kiln_tensor *const *params, const char *const *names,
                                         int n, const kiln_dist_reducer_opts *opts) {
  kiln_dist_reducer_opts o = opts ? *opts : (kiln_dist_reducer_opts){0};
  char d[160];
  if (!kiln_dist_built()) {
    dist_bcast_bytes(NULL, 0, 0); /* the "built without MPI" message */
    core_error_prefix("dist_reducer_new: ");
    return NULL;
  }
  if (!kiln_dist_is_initialized()) {
    core_error(KILN_ERR_STATE, "dist_reducer_new: call kiln_dist_init first");
    return NULL;
  }
  if (n < 1 || !params || o.bucket_mb < 0) {
    core_error(KILN_ERR_INVALID, "dist_reducer_new: no parameters or a negative bucket size");
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    kiln_tensor *p = params[i];
    kiln_dtype dt = p ? kiln_tensor_dtype(p) : KILN_DTYPE_F32;
    if (!p || !kiln_is_leaf(p) || !kiln_requires_grad(p) ||
        kiln_tensor_is_lazy(p) != kiln_tensor_is_lazy(params[0]) ||
        (!kiln_tensor_is_lazy(p) && !kiln_tensor_data(p)) ||
        (dt != KILN_DTYPE_F32 && dt != KILN_DTYPE_F64)) {
      core_error(KILN_ERR_INVALID,
                 "dist_reducer_new: parameter %d (%s) must be a float32/float64 leaf "
                 "that requires grad (all CPU or all lazy)",
                 i, p ? core_tensor_desc(p, d, sizeof d) : "NULL");
      return NULL;
    }
  }
  /* every rank must have the same parameters: count, sizes, dtypes */
  int64_t desc[4] = {n, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    desc[1] += kiln_tensor_numel(params[i]);
    desc[2] = desc[2] * 31 + kiln_tensor_numel(params[i]) * 8 + kiln_tensor_dtype(params[i]);
  }
  desc[2] &= 0x3fffffffffffffffLL;
  int64_t lo[4];
  memcpy(lo, desc, sizeof lo);
  if (dist_allreduce_i64(desc, 4, KILN_DIST_MAX) < 0 || dist_allreduce_i64(lo, 4, KILN_DIST_MIN) < 0)
    return NULL;
  if (memcmp(desc, lo, sizeof lo) != 0) {
    core_error(KILN_ERR_INVALID,
               "dist_reducer_new: the ranks' models differ (parameter counts %lld..%lld, "
               "elements %lld..%lld)",
               (long long)lo[0], (long long)desc[0], (long long)lo[1], (long long)desc[1]);
    return NULL;
  }
  kiln_dist_reducer *r = core_calloc(1, sizeof *r);
  if (!r) return NULL;
  r->n = n;
  r->sync = true;
  r->lazy = kiln_tensor_is_lazy(params[0]);
  r->no_rebuild = o.no_rebuild;
  r->cap_bytes = (o.bucket_mb > 0 ? o.bucket_mb : 25.0) * 1048576.0;
  r->params = core_calloc((size_t)n, sizeof *r->params);
  r->names = core_calloc((size_t)n, sizeof *r->names);
  r->views = core_calloc((size_t)n, sizeof *r->views);
  r->bucket_of = core_calloc((size_t)n, sizeof *r->bucket_of);
  r->slots = core_calloc((size_t)n, sizeof *r->slots);
  r->ready = core_calloc((size_t)n, sizeof *r->ready);
  r->used = core_calloc((size_t)n, sizeof *r->used);
  r->order = core_calloc((size_t)n, sizeof *r->order);
  r->side = core_calloc((size_t)n + KILN_DIST_MAX_VALUES, sizeof *r->side);
  int *order = core_alloc((size_t)n * sizeof *order);
  if (!r->params || !r->names || !r->views || !r->bucket_of || !r->slots || !r->ready ||
      !r->used || !r->order || !r->side || !order)
    goto fail;
  for (int i = 0; i < n; i++) {
    char buf[32];
    snprintf(buf, sizeof buf, "parameter %d", i);
    r->params[i] = kiln_retain(params[i]);
    r->names[i] = core_strdup(names && names[i] ? names[i] : buf);
    if (!r->names[i]) goto fail;
    order[i] = n - 1 - i;
  }
  if (build(r, order) < 0) goto fail;
  for (int i = 0; i < n && !r->lazy; i++) {
    r->slots[i] = (slot){r, i};
    if (kiln_register_post_accumulate_hook(params[i], on_accumulate, &r->slots[i]) < 0) goto fail;
  }
  core_free(order);
  return r;
fail:
  core_free(order);
  kiln_dist_reducer_free(r);
  if (!kiln_last_error()[0]) core_error(KILN_ERR_NOMEM, "dist_reducer_new: out of memory");
  return NULL;
}

void kiln_dist_reducer_free(kiln_dist_reducer *r) {
  if (!r) return;
  if (r->active) {
    kiln_set_backward_progress(NULL, NULL);
    core_set_poll(NULL, NULL); /* Note [Kernel poll] */
  }
  if (r->views) free_buckets(r);
  for (int i = 0; r->slots && i < r->n; i++) r->slots[i].r = NULL;
  for (int i = 0; i < r->n; i++) {
    if (r->params) kiln_release(r->params[i]);
    if (r->names) core_free(r->names[i]);
  }
  core_free(r->params);
  core_free(r->names);
  core_free(r->views);
  core_free(r->bucket_of);
  core_free(r->slots);
  core_free(r->ready);
  core_free(r->used);
  core_free(r->order);
  dist_req_free(r->side_req);
  core_free(r->side);
  core_free(r);
}

void kiln_dist_reducer_set_sync(kiln_dist_reducer *r, bool sync) {
  if (r) r->sync = sync;
}

kiln_status kiln_dist_reducer_finish(kiln_dist_reducer *r) {
  if (!r) return core_error(KILN_ERR_INVALID, "dist_reducer_finish: NULL reducer");
  if (!r->sync) return KILN_OK;
  if (r->lazy) return lazy_finish(r);
  if (!r->reduced) {
    /* no hook fired (no parameter reached), or the backward failed before
     * its end callback: take part in every all-reduce all the same */
    if (!r->active) begin_backward(r, false);
    end_backward(r);
  }
  r->reduced = false;
  int rc = r->status;
  if (rc == 0 && !r->order_done) {
    r->order_done = true;
    if (!r->no_rebuild) rc = rebuild(r);
    if (rc < 0) set_error(r, rc);
  }
  rc = r->status;
  if (rc < 0) {
    r->status = 0;
    return core_error(rc, "%s", r->msg);
  }
  return KILN_OK;
}

kiln_status kiln_dist_reducer_set_values(kiln_dist_reducer *r, const double *v, int n) {
  if (!r || (n > 0 && !v) || n < 0 || n > KILN_DIST_MAX_VALUES)
    return core_error(KILN_ERR_INVALID, "dist_reducer_set_values: NULL reducer or values, or "
                      "%d values (0..%d)", n, KILN_DIST_MAX_VALUES);
  if (r->lazy)
    return core_error(KILN_ERR_UNSUPPORTED,
                      "dist_reducer_set_values: a lazy reducer reduces no values");
  if (r->active)
    return core_error(KILN_ERR_STATE, "dist_reducer_set_values: a backward is in progress");
  memset(r->values, 0, sizeof r->values);
  if (n > 0) memcpy(r->values, v, (size_t)n * sizeof *v);
  return KILN_OK;
}

int kiln_dist_reducer_values(const kiln_dist_reducer *r, double *out, int n) {
  if (!r || (n > 0 && !out) || n < 0 || n > KILN_DIST_MAX_VALUES)
    return core_error(KILN_ERR_INVALID, "dist_reducer_values: NULL reducer or output, or %d "
                      "values (0..%d)", n, KILN_DIST_MAX_VALUES);
  if (!r->have_sums)
    return core_error(KILN_ERR_STATE, "dist_reducer_values: no synced reduction has finished");
  if (n > 0) memcpy(out, r->sums, (size_t)n * sizeof *out);
  return n;
}

void kiln_dist_reducer_stats(const kiln_dist_reducer *r, kiln_dist_stats *s) {
  if (!s) return;
  memset(s, 0, sizeof *s);
  if (r) *s = r->st;
  if (r && r->lazy && kiln_dist_world_size() > 1) {
    /* the graphs' all-reduces (Note [Graph all-reduces] in comm.c) */
    dist_graph_stats(&s->wait_seconds, &s->comm_seconds);
    s->overlap = s->comm_seconds > 0 ? 1 - s->wait_seconds / s->comm_seconds : 0;
  }
}

int kiln_dist_reducer_bucket(const kiln_dist_reducer *r, int b, int *idx, int cap) {
  if (!r || b < 0 || b >= r->n_buckets) return -1;
  for (int j = 0; j < r->b[b].n && j < cap; j++) idx[j] = r->b[b].idx[j];
  return r->b[b].n;
}
