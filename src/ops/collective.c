/* src/ops/collective.c: the all-reduce ops: aten::kiln_all_reduce, and the
 * same split in two, aten::kiln_all_reduce_start and _wait.
 *
 * Note [All-reduce node]: as PyTorch/XLA's all_reduce, the collective is an
 * op, so a lazy step records it into its graph like any other (the world
 * size and group are constant arguments: they enter the graph's hash) and
 * the graph count per step does not change. aten::kiln_all_reduce copies
 * self, sums the copy over the ranks and divides by world_size, all in its
 * kernel: it starts and waits. On one rank (world_size 1) every op here is
 * a copy and needs no MPI.
 *
 * Note [All-reduce start and wait]: for overlap the reducer records the
 * two halves instead (Note [Lazy reduction] in src/dist/reducer.c).
 * kiln_all_reduce_start(x) copies x into its output and starts the sum of
 * that buffer over the ranks (MPI_Iallreduce, in place) through
 * op_all_reduce_start_hook; the buffer is then in flight: its only reader
 * may be kiln_all_reduce_wait, which waits for the sum started on exactly
 * that buffer (op_all_reduce_wait_hook finds it by address: the wait's
 * input must be the start's output itself) and returns it divided by
 * world_size in a new tensor (the same float division as the one-node op:
 * bit-identical). Nothing else may read or write the buffer in between;
 * the reducer gives it no other use. The lazy pipeline's last step,
 * pass_schedule_collectives (src/passes/schedule.c), moves each start
 * right after its producers and each wait as late as its consumers allow,
 * and the executor tests the pending sums between instructions (Note [Run
 * progress] in src/exec/code.h), so a bucket's all-reduce runs while the
 * rest of the backward does. Every rank runs the same graph in the same
 * order, so the collectives start in the same order everywhere (MPI's
 * rule for collectives on one communicator). */
#include "collective.h"

int (*op_all_reduce_start_hook)(void *buf, int64_t n, kiln_dtype dt, int group);
int (*op_all_reduce_wait_hook)(void *buf, int64_t n);

static int infer(const char *fn, const op_val *a, int n, op_meta *o) {
  char d[160];
  if (op_arg_tensor(fn, &a[0], NULL, NULL) < 0) return -1;
  const kiln_tensor *x = a[0].t;
  if (x->dtype != KILN_DTYPE_F32 && x->dtype != KILN_DTYPE_F64)
    return core_error(KILN_ERR_INVALID, "%s: expected a float or double tensor, got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (a[1].tag != OP_VAL_INT || a[1].i < 1 || (n > 2 && a[2].tag != OP_VAL_INT))
    return core_error(KILN_ERR_INVALID, "%s: world_size must be an int >= 1, group an int", fn);
  op_meta_of(x, &o[0]);
  return 1;
}

int op_kiln_all_reduce_infer(const op_val *a, int n, op_meta *o, int m) {
  return infer("aten::kiln_all_reduce", a, n, o);
}
int op_kiln_all_reduce_start_infer(const op_val *a, int n, op_meta *o, int m) {
  return infer("aten::kiln_all_reduce_start", a, n, o);
}
int op_kiln_all_reduce_wait_infer(const op_val *a, int n, op_meta *o, int m) {
  return infer("aten::kiln_all_reduce_wait", a, n, o);
}

static int need_dist(const char *fn, int64_t world) {
  if (op_all_reduce_start_hook && op_all_reduce_wait_hook) return 0;
  return core_error(KILN_ERR_STATE, "%s: an all-reduce over %lld ranks needs kiln_dist_init", fn,
                    (long long)world);
}

/* out = x / world, elementwise (out may be x) */
static void divide(kiln_tensor *out, const kiln_tensor *x, int64_t world) {
  int64_t numel = kiln_tensor_numel(x);
  if (x->dtype == KILN_DTYPE_F32) {
    const float *p = kiln_tensor_data(x);
    float *q = kiln_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) q[i] = p[i] / (float)world;
  } else {
    const double *p = kiln_tensor_data(x);
    double *q = kiln_tensor_data(out);
    for (int64_t i = 0; i < numel; i++) q[i] = p[i] / (double)world;
  }
}

static int start(const char *fn, const op_val *a, int n, kiln_tensor *out) {
  const kiln_tensor *x = a[0].t;
  int64_t world = a[1].i;
  int rc = kiln_copy_(out, x);
  if (rc < 0 || world == 1) return rc;
  if ((rc = need_dist(fn, world)) < 0) return rc;
  return op_all_reduce_start_hook(kiln_tensor_data(out), kiln_tensor_numel(out), x->dtype,
                                  n > 2 ? (int)a[2].i : 0);
}

int op_kiln_all_reduce_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  int64_t world = a[1].i;
  int rc = start("aten::kiln_all_reduce", a, n, o[0]);
  if (rc < 0 || world == 1) return rc;
  if ((rc = op_all_reduce_wait_hook(kiln_tensor_data(o[0]), kiln_tensor_numel(o[0]))) < 0)
    return rc;
  divide(o[0], o[0], world);
  return 0;
}

int op_kiln_all_reduce_start_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return start("aten::kiln_all_reduce_start", a, n, o[0]);
}

int op_kiln_all_reduce_wait_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[0].t;
  int64_t world = a[1].i;
  if (world == 1) return kiln_copy_(o[0], x);
  int rc = need_dist("aten::kiln_all_reduce_wait", world);
  if (rc < 0) return rc;
  if (!kiln_tensor_is_contiguous(x))
    return core_error(KILN_ERR_INVALID,
                      "aten::kiln_all_reduce_wait: its input must be the output of "
                      "aten::kiln_all_reduce_start (a contiguous buffer)");
  if ((rc = op_all_reduce_wait_hook((void *)kiln_tensor_data(x), kiln_tensor_numel(x))) < 0)
    return rc;
  divide(o[0], x, world);
  return 0;
}

kiln_tensor *kiln_all_reduce(kiln_tensor *t, int world_size, int group) {
  return op_call1(KILN_OP_KILN_ALL_REDUCE, (op_val[]){OPV_T(t), OPV_I(world_size), OPV_I(group)},
                  3);
}

kiln_tensor *op_all_reduce_start(kiln_tensor *t, int world_size, int group) {
  return op_call1(KILN_OP_KILN_ALL_REDUCE_START,
                  (op_val[]){OPV_T(t), OPV_I(world_size), OPV_I(group)}, 3);
}

kiln_tensor *op_all_reduce_wait(kiln_tensor *t, int world_size, int group) {
  return op_call1(KILN_OP_KILN_ALL_REDUCE_WAIT,
                  (op_val[]){OPV_T(t), OPV_I(world_size), OPV_I(group)}, 3);
}
