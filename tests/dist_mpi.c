/* tests/dist_mpi.c: the MPI tests of data-parallel training (make test-mpi
 * runs them under `mpirun -np 2`; every rank runs every test, in the same
 * order, since they communicate). Not part of make test: it needs MPI=1.
 *
 * The references are computed by each rank alone, with a second copy of
 * the model and no reducer: 2 ranks with global batch B must equal, bit
 * for bit, one process doing 2 micro-batches of B/2 with the loss halved
 * (halving is exact; a 2-rank sum is one addition; dividing by 2 is
 * exact), and 1 process with the whole batch within float32 tolerance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/schedule_check.h"
#include "kiln.h"
#include "test.h"

static bool started(void) {
  if (kiln_dist_is_initialized()) return true;
  if (kiln_dist_init() < 0) {
    test_fail(__FILE__, __LINE__, "dist_init: %s", kiln_last_error());
    return false;
  }
  if (kiln_dist_world_size() != 2) {
    test_fail(__FILE__, __LINE__, "run under mpirun -np 2 (world size %d)", kiln_dist_world_size());
    return false;
  }
  kiln_dist_set_timeout(60);
  return true;
}

__attribute__((destructor)) static void stop(void) { kiln_dist_finalize(); }

/* One model copy with its optimizer, forward by mode (as src/nn/train.c). */
typedef struct replica {
  const char *arch;
  kiln_nn_mode mode;
  kiln_nn_module *m;
  kiln_optim *opt;
  kiln_graph *g;
  kiln_function *fn;
  kiln_dist_reducer *red;
} replica;

static bool replica_init(replica *r, const char *arch, kiln_nn_mode mode, bool dist,
                         double bucket_mb) {
  memset(r, 0, sizeof *r);
  r->arch = arch;
  r->mode = mode;
  kiln_generator *gen = kiln_generator_new(7);
  r->m = kiln_nn_model_new(arch, gen);
  kiln_generator_free(gen);
  kiln_optim_opts oo = {.kind = KILN_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
  r->opt = r->m ? kiln_optim_new(r->m, &oo) : NULL;
  if (!r->opt) return false;
  if (mode == KILN_NN_JIT) {
    const char *ir = kiln_nn_model_ir(arch);
    r->g = kiln_graph_parse(ir, strlen(ir));
    r->fn = r->g ? kiln_function_new(r->g) : NULL;
    if (!r->fn) return false;
  }
  int n = kiln_nn_module_n_params(r->m);
  kiln_tensor *ps[16];
  const char *names[16];
  for (int i = 0; i < n; i++) {
    ps[i] = kiln_nn_module_param(r->m, i);
    names[i] = kiln_nn_module_param_name(r->m, i);
  }
  if (dist && kiln_dist_broadcast(ps, n, 0) < 0) return false;
  if (mode == KILN_NN_LAZY) {
    if (kiln_nn_module_to_lazy(r->m) < 0 || kiln_optim_to_lazy(r->opt) < 0 || kiln_mark_step() < 0)
      return false;
    for (int i = 0; i < n; i++) ps[i] = kiln_nn_module_param(r->m, i);
  }
  if (dist) {
    kiln_dist_reducer_opts ro = {.bucket_mb = bucket_mb};
    r->red = kiln_dist_reducer_new(ps, names, n, &ro);
    if (!r->red) return false;
  }
  return true;
}

static void replica_free(replica *r) {
  kiln_dist_reducer_free(r->red);
  kiln_function_free(r->fn);
  kiln_graph_free(r->g);
  kiln_optim_free(r->opt);
  kiln_nn_module_free(r->m);
}

static kiln_tensor *forward(replica *r, kiln_tensor *x) {
  if (!r->fn) return kiln_nn_module_forward(r->m, x);
  kiln_value in[16], out[1];
  int n = 0;
  if (strcmp(r->arch, "mlp") == 0) x = kiln_reshape(x, 2, (int64_t[]){kiln_tensor_size(x, 0), 784});
  in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = x};
  for (int i = 0; i < kiln_nn_module_n_params(r->m); i++)
    in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_nn_module_param(r->m, i)};
  if (kiln_function_call(r->fn, in, n, out, 1) != 1) return NULL;
  return out[0].t;
}

/* Batch `step` of B images and labels, the same on every rank. */
static void make_batch(int step, int64_t B, kiln_tensor **x, kiln_tensor **y) {
  kiln_generator *gen = kiln_generator_new(1000 + (uint64_t)step);
  *x = kiln_randn(4, (int64_t[]){B, 1, 28, 28}, KILN_DTYPE_F32, gen);
  kiln_generator_free(gen);
  int64_t lab[512];
  uint64_t s = 88172645463325252ull + (uint64_t)step;
  for (int64_t i = 0; i < B; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    lab[i] = (int64_t)(s % 10);
  }
  *y = kiln_from_data(lab, 1, &B, KILN_DTYPE_I64);
}

/* Backward of the mean loss over rows [lo, lo+n) of (x, y), times scale;
 * its value in *loss. Inside the caller's scope. */
static int backward_rows(replica *r, kiln_tensor *x, kiln_tensor *y, int64_t lo, int64_t n,
                         double scale, double *loss) {
  kiln_tensor *xs = kiln_narrow(x, 0, lo, n), *ys = kiln_narrow(y, 0, lo, n);
  if (r->mode == KILN_NN_LAZY) {
    xs = kiln_to_lazy(xs);
    ys = kiln_to_lazy(ys);
  }
  kiln_tensor *logits = forward(r, xs);
  kiln_tensor *l = logits ? kiln_cross_entropy(logits, ys, KILN_REDUCTION_MEAN) : NULL;
  if (l && scale != 1) l = kiln_mul_scalar(l, scale);
  if (!l) return -1;
  int rc = kiln_backward(l, NULL);
  if (rc == 0 && r->red) rc = kiln_dist_reducer_finish(r->red);
  if (rc == 0 && loss) rc = kiln_item(l, loss);
  return rc;
}

static int step(replica *r) {
  int rc = kiln_optim_step(r->opt);
  if (rc == 0) rc = kiln_optim_zero_grad(r->opt);
  if (rc == 0 && r->mode == KILN_NN_LAZY) rc = kiln_mark_step();
  return rc;
}

/* A CPU copy of parameter i's values (or its grad), new reference. */
static kiln_tensor *host(replica *r, int i, bool grad) {
  kiln_tensor *p = kiln_nn_module_param(r->m, i);
  kiln_tensor *t = grad ? kiln_tensor_grad(p) : p;
  if (!t) return NULL;
  return kiln_tensor_is_lazy(t) ? kiln_to_cpu(t) : kiln_contiguous(t);
}

/* Largest |a - b| over every parameter (or grad); -1 if they differ in
 * presence; bitwise: 0 only if every byte agrees. */
static double max_diff(replica *a, replica *b, bool grad, bool *bitwise) {
  double worst = 0;
  *bitwise = true;
  for (int i = 0; i < kiln_nn_module_n_params(a->m); i++) {
    kiln_scope_begin();
    kiln_tensor *x = host(a, i, grad), *y = host(b, i, grad);
    if (!x || !y) {
      kiln_scope_end();
      if (x != y) return -1;
      continue;
    }
    const float *p = kiln_tensor_data(x), *q = kiln_tensor_data(y);
    int64_t n = kiln_tensor_numel(x);
    if (memcmp(p, q, (size_t)n * sizeof *p) != 0) *bitwise = false;
    for (int64_t k = 0; k < n; k++) {
      double d = fabs((double)p[k] - (double)q[k]);
      if (d > worst) worst = d;
    }
    kiln_scope_end();
  }
  return worst;
}

/* Checksums of every parameter, all-reduced MAX and MIN: equal on all
 * ranks iff every rank holds the same bits. */
static bool same_on_all_ranks(replica *r) {
  double v[32], lo[32];
  int n = kiln_nn_module_n_params(r->m);
  for (int i = 0; i < n; i++) {
    kiln_scope_begin();
    kiln_tensor *x = host(r, i, false);
    const uint32_t *w = kiln_tensor_data(x);
    uint64_t h = 1469598103934665603ull;
    for (int64_t k = 0; k < kiln_tensor_numel(x); k++) h = (h ^ w[k]) * 1099511628211ull;
    v[i] = (double)(h >> 12); /* exact in a double */
    kiln_scope_end();
  }
  memcpy(lo, v, sizeof v);
  if (kiln_dist_all_reduce_f64(v, n, KILN_DIST_MAX) < 0 ||
      kiln_dist_all_reduce_f64(lo, n, KILN_DIST_MIN) < 0)
    return false;
  return memcmp(v, lo, (size_t)n * sizeof *v) == 0;
}

/* 20 steps of global batch 32: 2 ranks of 16 rows against 2 local
 * micro-batches of 16 with the loss halved. */
static void bitexact(kiln_nn_mode mode) {
  if (!started()) return;
  replica d, ref;
  bool ok = replica_init(&d, "mlp", mode, true, 0.25) && replica_init(&ref, "mlp", mode, false, 0);
  CHECK_MSG(ok, "setup: %s", kiln_last_error());
  int rank = kiln_dist_rank();
  for (int s = 0; s < 20 && ok; s++) {
    kiln_scope_begin();
    kiln_tensor *x, *y;
    make_batch(s, 32, &x, &y);
    int rc = backward_rows(&d, x, y, 16 * rank, 16, 1, NULL);
    for (int mb = 0; mb < 2 && rc == 0; mb++) rc = backward_rows(&ref, x, y, 16 * mb, 16, 0.5, NULL);
    if (rc == 0) rc = step(&d);
    if (rc == 0) rc = step(&ref);
    kiln_scope_end();
    CHECK_MSG(rc == 0, "step %d: %s", s, kiln_last_error());
    bool bw;
    double diff = max_diff(&d, &ref, false, &bw);
    CHECK_MSG(bw, "step %d: parameters differ from the micro-batch run by %g", s, diff);
    CHECK_MSG(same_on_all_ranks(&d), "step %d: ranks hold different parameters", s);
    if (rc != 0 || !bw) break;
  }
  if (d.red) {
    kiln_dist_stats st;
    kiln_dist_reducer_stats(d.red, &st);
    CHECK(st.rebuilt == (mode != KILN_NN_LAZY));
    CHECK_EQ_INT(st.n_reductions, 20);
    test_note("%d buckets, overlap %.0f%%", st.n_buckets, 100 * st.overlap);
  }
  replica_free(&d);
  replica_free(&ref);
}

TEST(dist_bitexact_mlp_eager) { bitexact(KILN_NN_EAGER); }
TEST(dist_bitexact_mlp_jit) { bitexact(KILN_NN_JIT); }
TEST(dist_bitexact_mlp_lazy) { bitexact(KILN_NN_LAZY); }

/* A lazy distributed step's schedule (Note [Collective schedule]): each
 * bucket's all-reduce starts right after its gradients, the waits come
 * after every backward node that does not need them, with backward GEMMs
 * in between; the overlap is measured (0..1, over a nonzero all-reduce
 * time) as in eager mode. Batch 12 per rank: a graph no other test
 * compiled, so the last compiled graph is this step's. */
TEST(dist_lazy_all_reduce_overlaps_backward) {
  if (!started()) return;
  replica d;
  bool ok = replica_init(&d, "mlp", KILN_NN_LAZY, true, 0.25);
  CHECK_MSG(ok, "setup: %s", kiln_last_error());
  if (!ok) return;
  kiln_dist_stats st;
  kiln_dist_reducer_stats(d.red, &st);
  int buckets = st.n_buckets;
  for (int s = 0; s < 3 && ok; s++) {
    kiln_scope_begin();
    kiln_tensor *x, *y;
    make_batch(s, 24, &x, &y);
    int rc = backward_rows(&d, x, y, 12 * kiln_dist_rank(), 12, 1, NULL);
    if (rc == 0) rc = step(&d);
    kiln_scope_end();
    ok = rc == 0;
    CHECK_MSG(ok, "step %d: %s", s, kiln_last_error());
    if (ok && s == 0) {
      char *text = kiln_lazy_last_compiled_graph(), why[200] = "";
      CHECK_MSG(schedule_check(text, buckets, why, sizeof why) == 0, "schedule: %s", why);
      kiln_free(text);
    }
  }
  kiln_dist_reducer_stats(d.red, &st);
  CHECK_MSG(st.comm_seconds > 0 && st.wait_seconds >= 0 && st.wait_seconds <= st.comm_seconds,
            "all-reduce %g s, waiting %g s", st.comm_seconds, st.wait_seconds);
  CHECK(st.overlap >= 0 && st.overlap <= 1);
  test_note("%d buckets, all-reduce %.2f ms, waiting %.2f ms, overlap %.0f%%", buckets,
            1e3 * st.comm_seconds, 1e3 * st.wait_seconds, 100 * st.overlap);
  replica_free(&d);
}

/* 2 ranks with batch 128 against 1 process with batch 128. */
static void against_one(const char *arch) {
  if (!started()) return;
  replica d, ref;
  bool ok = replica_init(&d, arch, KILN_NN_EAGER, true, 0) &&
            replica_init(&ref, arch, KILN_NN_EAGER, false, 0);
  CHECK_MSG(ok, "setup: %s", kiln_last_error());
  int rank = kiln_dist_rank();
  double worst = 0;
  for (int s = 0; s < 20 && ok; s++) {
    kiln_scope_begin();
    kiln_tensor *x, *y;
    make_batch(s, 128, &x, &y);
    int rc = backward_rows(&d, x, y, 64 * rank, 64, 1, NULL);
    if (rc == 0) rc = backward_rows(&ref, x, y, 0, 128, 1, NULL);
    if (rc == 0) rc = step(&d);
    if (rc == 0) rc = step(&ref);
    kiln_scope_end();
    CHECK_MSG(rc == 0, "step %d: %s", s, kiln_last_error());
    bool bw;
    double diff = max_diff(&d, &ref, false, &bw);
    if (diff > worst) worst = diff;
    CHECK_MSG(diff >= 0 && diff < 2e-5, "step %d: %s parameters differ by %g", s, arch, diff);
    CHECK_MSG(same_on_all_ranks(&d), "step %d: ranks hold different parameters", s);
    if (rc != 0) break;
  }
  test_note("largest difference %.3g", worst);
  replica_free(&d);
  replica_free(&ref);
}

TEST(dist_two_ranks_equal_one_mlp) { against_one("mlp"); }
TEST(dist_two_ranks_equal_one_cnn) { against_one("cnn"); }

/* --no-sync-steps 2: after the local batch the grads are this rank's own
 * (not the reference's); after the synced one they are the reference's. */
TEST(dist_no_sync_accumulates_then_reduces) {
  if (!started()) return;
  replica d, ref;
  bool ok = replica_init(&d, "mlp", KILN_NN_EAGER, true, 0) &&
            replica_init(&ref, "mlp", KILN_NN_EAGER, false, 0);
  CHECK_MSG(ok, "setup: %s", kiln_last_error());
  int rank = kiln_dist_rank();
  for (int s = 0; s < 6 && ok; s++) {
    bool sync = s % 2 == 1;
    kiln_scope_begin();
    kiln_tensor *x, *y;
    make_batch(s, 64, &x, &y);
    kiln_dist_reducer_set_sync(d.red, sync);
    int rc = backward_rows(&d, x, y, 32 * rank, 32, 1, NULL);
    if (rc == 0) rc = backward_rows(&ref, x, y, 0, 64, 1, NULL);
    kiln_scope_end();
    CHECK_MSG(rc == 0, "batch %d: %s", s, kiln_last_error());
    bool bw;
    double diff = max_diff(&d, &ref, true, &bw);
    if (sync)
      CHECK_MSG(diff >= 0 && diff < 1e-5, "synced batch %d: grads differ by %g", s, diff);
    else
      CHECK_MSG(diff > 1e-4, "local batch %d: grads equal the reduced ones (%g)", s, diff);
    if (sync && rc == 0) {
      rc = step(&d);
      if (rc == 0) rc = step(&ref);
      CHECK(same_on_all_ranks(&d));
    }
    if (rc != 0) break;
  }
  replica_free(&d);
  replica_free(&ref);
}

/* Two parameters, w always used; u used when use_u. */
static int tiny_step(kiln_tensor *w, kiln_tensor *u, kiln_dist_reducer *red, bool use_u) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_full(1, (int64_t[]){4}, 1.0 + kiln_dist_rank(), KILN_DTYPE_F32);
  kiln_tensor *l = kiln_sum(kiln_mul(x, w), NULL, 0, false);
  if (use_u) l = kiln_add(l, kiln_sum(kiln_mul(u, u), NULL, 0, false));
  int rc = l ? kiln_backward(l, NULL) : -1;
  if (rc == 0) rc = kiln_dist_reducer_finish(red);
  kiln_scope_end();
  return rc;
}

TEST(dist_unused_parameters) {
  if (!started()) return;
  kiln_tensor *w = kiln_zeros(1, (int64_t[]){4}, KILN_DTYPE_F32);
  kiln_tensor *u = kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(u, true);
  kiln_tensor *ps[2] = {w, u};
  const char *names[2] = {"w", "extra.u"};
  kiln_dist_reducer *red = kiln_dist_reducer_new(ps, names, 2, NULL);
  CHECK_MSG(red, "%s", kiln_last_error());
  if (!red) return;
  /* unused on both ranks: completes, u has no gradient, w's is the mean */
  CHECK_EQ_INT(tiny_step(w, u, red, false), KILN_OK);
  CHECK(kiln_tensor_grad(u) == NULL);
  double g = 0;
  kiln_scope_begin();
  kiln_item(kiln_select(kiln_tensor_grad(w), 0, 0), &g);
  kiln_scope_end();
  CHECK_NEAR(g, 1.5, 0); /* (1 + 2) / 2 */
  kiln_tensor_set_grad(w, NULL);
  /* used by rank 0 only: both ranks fail, naming u */
  int rc = tiny_step(w, u, red, kiln_dist_rank() == 0);
  CHECK_EQ_INT(rc, KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "'extra.u'");
  kiln_tensor_set_grad(w, NULL);
  kiln_tensor_set_grad(u, NULL);
  /* and the reducer goes on working afterwards (every all-reduce matched) */
  CHECK_EQ_INT(tiny_step(w, u, red, true), KILN_OK);
  kiln_scope_begin();
  kiln_item(kiln_select(kiln_tensor_grad(u), 0, 0), &g);
  kiln_scope_end();
  CHECK_NEAR(g, 2.0, 0);
  kiln_dist_reducer_free(red);
  kiln_release(w);
  kiln_release(u);
}

/* Note [Side all-reduce]: values set before a backward come back summed
 * over the ranks after its reduction (the trainer's loss rides there). */
TEST(dist_values_ride_with_the_reduction) {
  if (!started()) return;
  kiln_tensor *w = kiln_zeros(1, (int64_t[]){4}, KILN_DTYPE_F32);
  kiln_tensor *u = kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(u, true);
  kiln_tensor *ps[2] = {w, u};
  kiln_dist_reducer *red = kiln_dist_reducer_new(ps, NULL, 2, NULL);
  CHECK_MSG(red, "%s", kiln_last_error());
  if (!red) return;
  double out[4] = {0};
  CHECK_EQ_INT(kiln_dist_reducer_values(red, out, 1), KILN_ERR_STATE); /* none yet */
  double five[5] = {0};
  CHECK_EQ_INT(kiln_dist_reducer_set_values(red, five, 5), KILN_ERR_INVALID);
  int r = kiln_dist_rank();
  double v[3] = {1.0 + r, 0.25 * (1 + r), -3};
  CHECK_EQ_INT(kiln_dist_reducer_set_values(red, v, 3), KILN_OK);
  CHECK_EQ_INT(tiny_step(w, u, red, true), KILN_OK);
  CHECK_EQ_INT(kiln_dist_reducer_values(red, out, 4), 4);
  CHECK_NEAR(out[0], 3, 0); /* 1 + 2 */
  CHECK_NEAR(out[1], 0.75, 0);
  CHECK_NEAR(out[2], -6, 0);
  CHECK_NEAR(out[3], 0, 0); /* not set */
  /* the gradients are still the mean: d/dw sum(x w) = x, (1 + 2) / 2 */
  double g = 0;
  kiln_scope_begin();
  kiln_item(kiln_select(kiln_tensor_grad(w), 0, 0), &g);
  kiln_scope_end();
  CHECK_NEAR(g, 1.5, 0);
  /* values last one reduction: the next sums zeros */
  kiln_tensor_set_grad(w, NULL);
  kiln_tensor_set_grad(u, NULL);
  CHECK_EQ_INT(tiny_step(w, u, red, true), KILN_OK);
  CHECK_EQ_INT(kiln_dist_reducer_values(red, out, 1), 1);
  CHECK_NEAR(out[0], 0, 0);
  kiln_dist_reducer_free(red);
  kiln_release(w);
  kiln_release(u);
}

TEST(dist_buckets_follow_the_cap) {
  if (!started()) return;
  replica d;
  bool ok = replica_init(&d, "mlp", KILN_NN_EAGER, true, 0.25);
  CHECK_MSG(ok, "setup: %s", kiln_last_error());
  if (!ok) return;
  /* mlp, parameters fc1.weight 0, fc1.bias 1, fc2.weight 2, fc2.bias 3,
   * fc3.weight 4, fc3.bias 5, in reverse order; as DDP, the parameter that
   * brings a bucket to the 256 KiB cap closes it: fc3.bias 40 B, fc3.weight
   * 10240 B, fc2.bias 1024 B, then fc2.weight's 262144 B reach the cap
   * (273448 B); fc1.bias 1024 B and fc1.weight 802816 B the next one */
  kiln_dist_stats st;
  kiln_dist_reducer_stats(d.red, &st);
  CHECK_MSG(st.n_buckets == 2, "%d buckets, expected 2", st.n_buckets);
  int idx[16], n0 = kiln_dist_reducer_bucket(d.red, 0, idx, 16);
  CHECK(n0 == 4 && idx[0] == 5 && idx[1] == 4 && idx[2] == 3 && idx[3] == 2);
  int n1 = kiln_dist_reducer_bucket(d.red, 1, idx, 16);
  CHECK(n1 == 2 && idx[0] == 1 && idx[1] == 0);
  replica_free(&d);
}
