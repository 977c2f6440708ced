/* tests/dist/test_dist_schedule.c: the schedule of a lazy step's
 * all-reduces (Note [Collective schedule] in src/passes/schedule.c) on one
 * process: world size 1, where aten::kiln_all_reduce_start and _wait are
 * copies and need no MPI, so make test covers the pass and the ops. The
 * reduction is recorded by hand as the reducer records it (Note [Lazy
 * reduction] in src/dist/reducer.c): two buckets, the last layers' and
 * fc1.weight's. */
#include <string.h>

#include "dist/schedule_check.h"
#include "kiln.h"
#include "ops/collective.h"
#include "test.h"

typedef struct model {
  kiln_nn_module *m;
  kiln_optim *opt;
} model;

static bool model_init(model *r) {
  kiln_generator *gen = kiln_generator_new(11);
  r->m = kiln_nn_model_new("mlp", gen);
  kiln_generator_free(gen);
  kiln_optim_opts oo = {.kind = KILN_OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
  r->opt = r->m ? kiln_optim_new(r->m, &oo) : NULL;
  return r->opt && kiln_nn_module_to_lazy(r->m) == 0 && kiln_optim_to_lazy(r->opt) == 0 &&
         kiln_mark_step() == 0;
}

static void model_free(model *r) {
  kiln_optim_free(r->opt);
  kiln_nn_module_free(r->m);
}

/* Sets the grads of params idx[0..n) to views of one all-reduced
 * concatenation of them (world size 1): split into start and wait, or the
 * one node aten::kiln_all_reduce. */
static int reduce_bucket(kiln_nn_module *m, const int *idx, int n, bool split) {
  kiln_tensor *parts[16];
  for (int j = 0; j < n; j++)
    parts[j] = kiln_reshape(kiln_tensor_grad(kiln_nn_module_param(m, idx[j])), 1, (int64_t[]){-1});
  kiln_tensor *flat = n == 1 ? parts[0] : kiln_cat(parts, n, 0);
  kiln_tensor *s = flat && split ? op_all_reduce_start(flat, 1, 0) : flat;
  kiln_tensor *w = !s ? NULL : split ? op_all_reduce_wait(s, 1, 0) : kiln_all_reduce(s, 1, 0);
  if (!w) return -1;
  int64_t off = 0;
  for (int j = 0; j < n; j++) {
    kiln_tensor *p = kiln_nn_module_param(m, idx[j]);
    int64_t k = kiln_tensor_numel(p);
    kiln_tensor *g = kiln_view(kiln_narrow(w, 0, off, k), kiln_tensor_ndim(p), kiln_tensor_shape(p));
    if (!g || kiln_tensor_set_grad(p, g) < 0) return -1;
    off += k;
  }
  return 0;
}

/* One SGD step on batch s, with the two all-reduce buckets. */
static int train_step(model *r, int s, bool split) {
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(500 + (uint64_t)s);
  kiln_tensor *x = kiln_to_lazy(kiln_randn(4, (int64_t[]){8, 1, 28, 28}, KILN_DTYPE_F32, gen));
  kiln_generator_free(gen);
  int64_t lab[8] = {3, 1, 4, 1, 5, 9, 2, 6}, n = 8;
  kiln_tensor *y = kiln_to_lazy(kiln_from_data(lab, 1, &n, KILN_DTYPE_I64));
  kiln_tensor *l = kiln_cross_entropy(kiln_nn_module_forward(r->m, x), y, KILN_REDUCTION_MEAN);
  int rc = l ? kiln_backward(l, NULL) : -1;
  if (rc == 0) {
    int np = kiln_nn_module_n_params(r->m), last[16], k = 0;
    for (int i = np - 1; i >= 1; i--) last[k++] = i;
    bool was = kiln_set_grad_enabled(false);
    rc = reduce_bucket(r->m, last, k, split);
    if (rc == 0) rc = reduce_bucket(r->m, (int[]){0}, 1, split);
    kiln_set_grad_enabled(was);
  }
  if (rc == 0) rc = kiln_optim_step(r->opt);
  if (rc == 0) rc = kiln_optim_zero_grad(r->opt);
  if (rc == 0) rc = kiln_mark_step();
  kiln_scope_end();
  return rc;
}

/* The step's graph: each start right after its producers, each wait after
 * every node that does not need an all-reduce, backward GEMMs between the
 * first start and the first wait; and the values are those of the same
 * steps with the one-node aten::kiln_all_reduce, which the lazy pipeline
 * leaves where the post-order put it, bit for bit (moving nodes changes no
 * arithmetic). */
TEST(dist_lazy_schedule_overlaps_backward) {
  model a, b;
  bool ok = model_init(&a) && model_init(&b);
  CHECK_MSG(ok, "setup: %s", kiln_last_error());
  if (!ok) return;
  for (int s = 0; s < 3 && ok; s++) {
    ok = train_step(&a, s, true) == 0;
    CHECK_MSG(ok, "step %d with all-reduces: %s", s, kiln_last_error());
    if (ok && s == 0) {
      char *text = kiln_lazy_last_compiled_graph(), why[200] = "";
      CHECK_MSG(text && strstr(text, "aten::kiln_all_reduce_start("), "no start in the graph");
      CHECK_MSG(schedule_check(text, 2, why, sizeof why) == 0, "schedule: %s", why);
      kiln_free(text);
    }
    ok = ok && train_step(&b, s, false) == 0;
    CHECK_MSG(ok, "step %d: %s", s, kiln_last_error());
  }
  for (int i = 0; ok && i < kiln_nn_module_n_params(a.m); i++) {
    kiln_scope_begin();
    kiln_tensor *p = kiln_to_cpu(kiln_nn_module_param(a.m, i));
    kiln_tensor *q = kiln_to_cpu(kiln_nn_module_param(b.m, i));
    CHECK(p && q && kiln_tensor_numel(p) == kiln_tensor_numel(q));
    if (p && q)
      CHECK_MSG(memcmp(kiln_tensor_data(p), kiln_tensor_data(q),
                       (size_t)kiln_tensor_numel(p) * sizeof(float)) == 0,
                "parameter %d differs from the run with one-node all-reduces", i);
    kiln_scope_end();
  }
  model_free(&a);
  model_free(&b);
}
