/* tests/lazy/test_lazy_record.c: recording on lazy tensors: nothing runs,
 * shapes are inferred, the IR text follows PyTorch's _get_tensors_text,
 * scalars are device data, and hashes ignore values. */
#include "lazy/lazy.h"
#include "test.h"

static kiln_tensor *lz(int ndim, const int64_t *shape, double v) {
  return kiln_to_lazy(kiln_full(ndim, shape, v, KILN_DTYPE_F32));
}

TEST(lazy_records_without_running) {
  int64_t sh[2] = {4, 4};
  kiln_scope_begin();
  kiln_lazy_metrics_reset();
  kiln_tensor *x = lz(2, sh, 1.0), *w = lz(2, sh, 2.0);
  kiln_tensor *y = kiln_add_scalar(kiln_relu(kiln_mm(x, w)), 1.5);
  CHECK(y && kiln_tensor_is_lazy(y));
  CHECK(kiln_tensor_data(y) == NULL);
  CHECK_EQ_INT(kiln_tensor_size(y, 1), 4);
  CHECK(lazy_is_pending(y));
  CHECK(!lazy_is_pending(x));
  CHECK_EQ_INT(kiln_lazy_counter("ExecuteGraph"), 0);
  CHECK(kiln_lazy_counter("CreateLazyTensor") >= 5);
  char *text = kiln_lazy_tensors_text(&y, 1);
  CHECK(text != NULL);
  /* as PyTorch prints (x @ w).relu() + 1.5: the scalar 1.5 is device data
   * (operands in argument order); alpha=1 is a special scalar, a constant
   * (Note [Special scalars]) */
  const char *want = "IR {\n"
                     "  %0 = [Float[4,4]] lazy_tensors::device_data(), device=CPU0\n"
                     "  %1 = [Float[4,4]] lazy_tensors::device_data(), device=CPU0\n"
                     "  %2 = [Float[4,4]] aten::mm(%0, %1)\n"
                     "  %3 = [Float[4,4]] aten::relu(%2)\n"
                     "  %4 = [Double[]] lazy_tensors::device_data(), device=CPU0\n"
                     "  %5 = [Float[4,4]] aten::add(%3, %4), alpha=1, ROOT=0\n"
                     "}\n";
  CHECK_MSG(text && strcmp(text, want) == 0, "got:\n%s", text ? text : "(null)");
  kiln_free(text);
  kiln_scope_end();
}

TEST(lazy_hash_ignores_values_and_scalars) {
  int64_t sh[2] = {3, 2}, sh2[2] = {5, 2};
  kiln_scope_begin();
  kiln_tensor *a = kiln_mul_scalar(kiln_tanh(lz(2, sh, 1.0)), 0.1);
  kiln_tensor *b = kiln_mul_scalar(kiln_tanh(lz(2, sh, -3.0)), 0.01); /* new lr */
  kiln_tensor *c = kiln_mul_scalar(kiln_tanh(lz(2, sh2, 1.0)), 0.1);  /* new shape */
  uint64_t ha = lazy_of(a)->value.node->hash, hb = lazy_of(b)->value.node->hash,
           hc = lazy_of(c)->value.node->hash;
  CHECK(ha == hb);
  CHECK(ha != hc);
  CHECK(lazy_of(a)->value.node->shape_free_hash == lazy_of(c)->value.node->shape_free_hash);
  kiln_tensor *d = kiln_sum(kiln_tanh(lz(2, sh, 1.0)), (int64_t[]){0}, 1, false);
  kiln_tensor *e = kiln_sum(kiln_tanh(lz(2, sh, 1.0)), (int64_t[]){1}, 1, false);
  CHECK(d && e && lazy_of(d)->value.node->hash != lazy_of(e)->value.node->hash);
  kiln_scope_end();
}

TEST(lazy_shape_errors_at_record_time) {
  int64_t s1[2] = {4, 3}, s2[2] = {2, 5};
  kiln_scope_begin();
  CHECK(kiln_mm(lz(2, s1, 1), lz(2, s2, 1)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mm: shapes [4, 3] and [2, 5] cannot be multiplied");
  kiln_scope_end();
}

/* A scalar used twice in one step is one device-data node, wherever the
 * value-keyed scalar cache's ring happens to stand: the same step then
 * compiles once (it recompiled when the entry of a cached value was
 * overwritten between its two uses, which depended on how many scalars
 * earlier code had recorded: an order-dependent failure of the optimizer
 * test in the full suite). */
TEST(lazy_scalar_reused_in_a_step_is_one_node_at_any_cache_position) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_to_lazy(kiln_ones(1, (int64_t[]){4}, KILN_DTYPE_F32));
  kiln_mark_step();
  double fresh = 5e5;
  int64_t before = 0;
  for (int k = 0; k < 80; k++) {
    kiln_scope_begin(); /* k misses that advance the cache, never synced */
    for (int j = 0; j < k; j++) kiln_mul_scalar(x, fresh++);
    kiln_scope_end();
    kiln_scope_begin();
    kiln_tensor *y = kiln_mul_scalar(x, 0.123);
    for (int j = 0; j < 3; j++) y = kiln_add(y, kiln_mul_scalar(x, fresh++));
    y = kiln_add(y, kiln_mul_scalar(x, 0.123));
    CHECK(kiln_mark_step() == KILN_OK);
    double v = 0;
    CHECK(kiln_item(kiln_sum(y, NULL, 0, false), &v) == KILN_OK);
    if (k == 0) before = kiln_lazy_counter("UncachedCompile");
    kiln_scope_end();
  }
  int64_t extra = kiln_lazy_counter("UncachedCompile") - before;
  CHECK_MSG(extra == 0, "the same step compiled %lld more times", (long long)extra);
  kiln_scope_end();
}
