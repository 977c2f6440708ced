/* src/ops/collective.c: the all-reduce op, aten::kiln_all_reduce.
 *
 * Note [All-reduce node]: as PyTorch/XLA's all_reduce, the collective is an
 * op, so a lazy step records it into its graph like any other (the world
 * size and group are constant arguments: they enter the graph's hash) and
 * the graph count per step does not change. Its kernel copies self, sums
 * the copy over the ranks through op_all_reduce_hook (src/dist/comm.c:
 * MPI_Iallreduce with the bounded wait) and divides by world_size. The
 * interpreter runs it where the post-order puts it, right after its
 * producers; every rank runs the same graph, so the collectives match. On
 * one rank (world_size 1) it is a copy and needs no MPI. */
#include "collective.h"

int (*op_all_reduce_hook)(void *buf, int64_t n, kiln_dtype dt, int group);

int op_kiln_all_reduce_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::kiln_all_reduce";
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

int op_kiln_all_reduce_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[0].t;
  int64_t world = a[1].i, numel = kiln_tensor_numel(x);
  int rc = kiln_copy_(o[0], x);
  if (rc < 0 || world == 1) return rc;
  if (!op_all_reduce_hook)
    return core_error(KILN_ERR_STATE,
                      "aten::kiln_all_reduce: an all-reduce over %lld ranks needs kiln_dist_init",
                      (long long)world);
  rc = op_all_reduce_hook(kiln_tensor_data(o[0]), numel, x->dtype, n > 2 ? (int)a[2].i : 0);
  if (rc < 0) return rc;
  if (x->dtype == KILN_DTYPE_F32) {
    float *p = kiln_tensor_data(o[0]);
    for (int64_t i = 0; i < numel; i++) p[i] /= (float)world;
  } else {
    double *p = kiln_tensor_data(o[0]);
    for (int64_t i = 0; i < numel; i++) p[i] /= (double)world;
  }
  return 0;
}

kiln_tensor *kiln_all_reduce(kiln_tensor *t, int world_size, int group) {
  return op_call1(KILN_OP_KILN_ALL_REDUCE, (op_val[]){OPV_T(t), OPV_I(world_size), OPV_I(group)},
                  3);
}
