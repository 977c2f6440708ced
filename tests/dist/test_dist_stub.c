/* tests/dist/test_dist_stub.c: the dist layer in the default build (no
 * MPI): every call that communicates fails with "built without MPI", rank
 * and world size read 0 and 1, and `kiln train --dist` exits 1 saying so.
 * The engine's progress callback and kiln_backward_will_accumulate, which
 * the reducer builds on, are tested here too (they need no MPI). The MPI
 * tests are tests/dist_mpi.c (make test-mpi). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln.h"
#include "test.h"

TEST(dist_without_mpi_fails_clearly) {
  if (kiln_dist_built()) {
    test_note("built with MPI: see make test-mpi");
    return;
  }
  CHECK_EQ_INT(kiln_dist_init(), KILN_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(kiln_last_error(), "built without MPI");
  CHECK(!kiln_dist_is_initialized());
  CHECK_EQ_INT(kiln_dist_rank(), 0);
  CHECK_EQ_INT(kiln_dist_world_size(), 1);
  double v = 1;
  CHECK_EQ_INT(kiln_dist_all_reduce_f64(&v, 1, KILN_DIST_SUM), KILN_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(kiln_last_error(), "built without MPI");
  CHECK_EQ_INT(kiln_dist_barrier(), KILN_ERR_UNSUPPORTED);
  kiln_tensor *w = kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F32);
  CHECK_EQ_INT(kiln_dist_broadcast(&w, 1, 0), KILN_ERR_UNSUPPORTED);
  CHECK_STR_CONTAINS(kiln_last_error(), "built without MPI");
  kiln_set_requires_grad(w, true);
  CHECK(kiln_dist_reducer_new(&w, NULL, 1, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "built without MPI");
  kiln_release(w);
  CHECK_EQ_INT(kiln_dist_finalize(), KILN_OK);
}

TEST(dist_train_without_mpi_exits_with_the_reason) {
  const char *bin = getenv("KILN_BIN");
  if (kiln_dist_built()) return;
  if (!bin || access(bin, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return;
  }
  char cmd[512], *out;
  snprintf(cmd, sizeof cmd, "%s train --dist --steps 1 > /tmp/kiln-dist-stub.%d 2>&1", bin,
           (int)getpid());
  int st = system(cmd);
  CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
  snprintf(cmd, sizeof cmd, "/tmp/kiln-dist-stub.%d", (int)getpid());
  out = test_read_file(cmd, NULL);
  CHECK_STR_CONTAINS(out, "built without MPI");
  free(out);
  remove(cmd);
}

typedef struct {
  kiln_tensor *used, *unused;
  int will_used, will_unused, calls;
} probe;

static void on_acc(kiln_tensor *leaf, void *ud) {
  probe *p = ud;
  p->will_used = kiln_backward_will_accumulate(p->used);
  p->will_unused = kiln_backward_will_accumulate(p->unused);
}

static void on_progress(void *ud) { ((probe *)ud)->calls++; }

TEST(engine_reports_reachable_leaves_and_progress) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_full(1, (int64_t[]){2}, 3.0, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_full(1, (int64_t[]){2}, 5.0, KILN_DTYPE_F32);
  kiln_set_requires_grad(a, true);
  kiln_set_requires_grad(b, true);
  probe p = {a, b, -9, -9, 0};
  CHECK_EQ_INT(kiln_register_post_accumulate_hook(a, on_acc, &p), KILN_OK);
  kiln_set_backward_progress(on_progress, &p);
  /* b takes part in the forward of another loss only */
  kiln_tensor *other = kiln_sum(kiln_mul(b, b), NULL, 0, false);
  kiln_tensor *loss = kiln_sum(kiln_mul(kiln_exp(a), a), NULL, 0, false);
  CHECK(other && loss);
  CHECK_EQ_INT(kiln_backward(loss, NULL), KILN_OK);
  kiln_set_backward_progress(NULL, NULL);
  CHECK_EQ_INT(p.will_used, 1);
  CHECK_EQ_INT(p.will_unused, 0);
  /* sum, mul, exp and the AccumulateGrad ran: a callback after each */
  CHECK(p.calls >= 4);
  CHECK_EQ_INT(kiln_backward_will_accumulate(a), KILN_ERR_STATE);
  kiln_scope_end();
}

/* aten::kiln_all_reduce on one rank is a copy; over more ranks without
 * kiln_dist_init it fails; on lazy tensors it is a node whose world size
 * is a constant of the graph (so it enters the graph's hash). */
TEST(all_reduce_op_on_one_rank_and_lazy) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_arange(0, 6, 1, KILN_DTYPE_F32);
  kiln_tensor *y = kiln_all_reduce(x, 1, 0);
  CHECK(y && kiln_tensor_data(y) != kiln_tensor_data(x));
  double v = 0;
  if (y) kiln_item(kiln_select(y, 0, 5), &v);
  CHECK_NEAR(v, 5.0, 0);
  if (!kiln_dist_is_initialized()) {
    CHECK(kiln_all_reduce(x, 2, 0) == NULL);
    CHECK_STR_CONTAINS(kiln_last_error(), "needs kiln_dist_init");
  }
  CHECK(kiln_all_reduce(kiln_arange(0, 3, 1, KILN_DTYPE_I64), 1, 0) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "float or double");
  kiln_tensor *lz = kiln_all_reduce(kiln_to_lazy(x), 1, 0);
  char *text = lz ? kiln_lazy_tensors_text(&lz, 1) : NULL;
  CHECK_STR_CONTAINS(text, "aten::kiln_all_reduce(");
  kiln_free(text);
  kiln_tensor *back = lz ? kiln_to_cpu(lz) : NULL;
  if (back) kiln_item(kiln_select(back, 0, 4), &v);
  CHECK_NEAR(v, 4.0, 0);
  kiln_scope_end();
}
