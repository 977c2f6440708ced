/* tests/ops/test_pack_cache.c: the packed-B cache (Note [Packed B cache]):
 * products on one weight inside a scope hit the cache and give the same
 * bits as without it, in both layouts the recurrent step uses (h @ W^T and
 * g @ W); an in-place write inside the scope, and a write through the data
 * pointer between scopes, are never read stale; a scope's end frees it. */
#include "core/cpu.h"
#include "ops/op.h"
#include "test.h"

/* C = a @ b in double, element (i, j); a [M, K], b [K, N] as strided views */
static double ref(const kiln_tensor *a, const kiln_tensor *b, int64_t i, int64_t j) {
  double s = 0;
  for (int64_t k = 0; k < a->shape[1]; k++)
    s += core_get_flat(a, i * a->shape[1] + k) * core_get_flat(b, k * b->shape[1] + j);
  return s;
}

static bool same_bits(const kiln_tensor *x, const kiln_tensor *y) {
  return x && y && kiln_tensor_numel(x) == kiln_tensor_numel(y) &&
         memcmp(kiln_tensor_data(x), kiln_tensor_data(y),
                (size_t)kiln_tensor_numel(x) * sizeof(float)) == 0;
}

/* a @ b outside any scope (never cached), inside the caller's scope */
static kiln_tensor *plain(kiln_tensor *a, kiln_tensor *b) { return kiln_mm(a, b); }

static void run_layout(bool transposed) {
  kiln_generator *g = kiln_generator_new(19);
  const int64_t sw[2] = {1024, 256}, sh[2] = {32, transposed ? 256 : 1024};
  kiln_scope_begin();
  kiln_tensor *w = kiln_randn(2, sw, KILN_DTYPE_F32, g), *h = kiln_randn(2, sh, KILN_DTYPE_F32, g);
  kiln_tensor *b = transposed ? kiln_t(w) : w; /* h @ W^T, or g @ W */
  kiln_tensor *want = plain(h, b), *got[4] = {0};
  long hits0, hits1;
  int n_entries;
  op_pack_stats(&hits0, &n_entries);
  op_pack_scope_begin();
  for (int r = 0; r < 4; r++) got[r] = kiln_mm(h, b);
  op_pack_stats(&hits1, &n_entries);
  /* at the baseline level float32 GEMM is OpenBLAS's (Note [CPU levels]):
   * kiln packs nothing there, so nothing is cached; the values below are
   * checked at every level */
  if (core_cpu_level() >= CORE_CPU_AVX2) {
    CHECK_MSG(hits1 - hits0 >= 2, "the 3rd and 4th products should hit: %ld hits", hits1 - hits0);
    CHECK(n_entries > 0);
  } else {
    CHECK_EQ_INT(n_entries, 0);
  }
  for (int r = 0; r < 4; r++) CHECK_MSG(same_bits(got[r], want), "product %d differs", r);
  /* the values are the product's (not just self-consistent) */
  int64_t n = b->shape[1];
  for (int64_t i = 0; i < 32; i += 7)
    for (int64_t j = 0; j < n; j += 37)
      CHECK_NEAR(core_get_flat(got[3], i * n + j), ref(h, b, i, j), 1e-3);
  /* an in-place write raises the version: the next product reads W anew */
  CHECK(kiln_mul_scalar_(w, -0.5) == KILN_OK);
  kiln_tensor *after = kiln_mm(h, b), *after2 = kiln_mm(h, b);
  op_pack_scope_end();
  op_pack_stats(&hits1, &n_entries);
  CHECK_EQ_INT(n_entries, 0); /* the scope's end freed its entries */
  kiln_tensor *want2 = plain(h, b);
  CHECK(same_bits(after, want2) && same_bits(after2, want2));
  CHECK(!same_bits(after, want));
  /* a write through the data pointer bumps no version; between scopes it
   * is still seen, since entries never outlive their scope */
  op_pack_scope_begin();
  for (int r = 0; r < 3; r++) kiln_mm(h, b);
  op_pack_scope_end();
  float *p = kiln_tensor_data(w);
  for (int64_t i = 0; i < 1024 * 256; i += 3) p[i] += 1.0f;
  kiln_tensor *want3 = plain(h, b), *got3[3];
  op_pack_scope_begin();
  for (int r = 0; r < 3; r++) got3[r] = kiln_mm(h, b);
  op_pack_scope_end();
  for (int r = 0; r < 3; r++) CHECK_MSG(same_bits(got3[r], want3), "stale product %d", r);
  kiln_scope_end();
  kiln_generator_free(g);
}

TEST(pack_cache_h_wt_hits_and_matches) { run_layout(true); }
TEST(pack_cache_g_w_hits_and_matches) { run_layout(false); }

/* Recycling (Note [Packed B cache]): a second scope making the same
 * products takes its panels from the pool, allocating none, and gives the
 * same bits though the reused buffers still hold the first scope's panels
 * of another weight, as does a smaller weight with edge panels in the
 * larger buffers; POOL_AGE (16) idle scope ends give the pool back. */
TEST(pack_cache_recycles_panels_across_scopes) {
  if (core_cpu_level() < CORE_CPU_AVX2) return; /* OpenBLAS's GEMM: nothing packed */
  kiln_generator *g = kiln_generator_new(23);
  const int64_t sw[2] = {1024, 256}, sh[2] = {32, 256};
  kiln_scope_begin();
  kiln_tensor *w1 = kiln_randn(2, sw, KILN_DTYPE_F32, g), *w2 = kiln_randn(2, sw, KILN_DTYPE_F32, g);
  kiln_tensor *h = kiln_randn(2, sh, KILN_DTYPE_F32, g);
  kiln_tensor *b1 = kiln_t(w1), *b2 = kiln_t(w2);
  kiln_tensor *want = plain(h, b2), *got[3];
  long fresh0, fresh1, fresh2, hits0, hits1;
  size_t pooled;
  int n_entries;
  op_pack_scope_begin();
  for (int r = 0; r < 3; r++) kiln_mm(h, b1);
  op_pack_scope_end();
  op_pack_pool_stats(&fresh0, &pooled);
  CHECK_MSG(pooled > 0, "the scope's panels should be pooled: %zu bytes", pooled);
  op_pack_stats(&hits0, &n_entries);
  op_pack_scope_begin();
  for (int r = 0; r < 3; r++) got[r] = kiln_mm(h, b2);
  op_pack_pool_stats(&fresh1, &pooled);
  op_pack_stats(&hits1, &n_entries);
  op_pack_scope_end();
  CHECK_MSG(fresh1 == fresh0, "%ld panels allocated, not recycled", fresh1 - fresh0);
  CHECK_MSG(hits1 - hits0 >= 1, "the reused panels should still hit: %ld", hits1 - hits0);
  for (int r = 0; r < 3; r++) CHECK_MSG(same_bits(got[r], want), "product %d differs", r);
  for (int64_t i = 0; i < 32; i += 5)
    for (int64_t j = 0; j < 1024; j += 41) CHECK_NEAR(core_get_flat(got[2], i * 1024 + j), ref(h, b2, i, j), 1e-3);
  /* a smaller weight (N = 1000, K = 250: edge panels, zero padding) takes
   * the larger pooled buffers; its products are still exact */
  const int64_t sw3[2] = {1000, 250}, sh3[2] = {32, 250};
  kiln_tensor *w3 = kiln_randn(2, sw3, KILN_DTYPE_F32, g), *h3 = kiln_randn(2, sh3, KILN_DTYPE_F32, g);
  kiln_tensor *b3 = kiln_t(w3), *want3 = plain(h3, b3), *got3 = NULL;
  op_pack_scope_begin();
  for (int r = 0; r < 3; r++) got3 = kiln_mm(h3, b3);
  op_pack_pool_stats(&fresh1, &pooled);
  op_pack_scope_end();
  CHECK_MSG(fresh1 == fresh0, "%ld panels allocated for the smaller weight", fresh1 - fresh0);
  CHECK(same_bits(got3, want3));
  for (int64_t i = 0; i < 32; i += 5)
    for (int64_t j = 0; j < 1000; j += 37) CHECK_NEAR(core_get_flat(got3, i * 1000 + j), ref(h3, b3, i, j), 1e-3);
  for (int r = 0; r < 15; r++) {
    op_pack_scope_begin();
    op_pack_scope_end();
  }
  op_pack_pool_stats(&fresh2, &pooled);
  CHECK_MSG(pooled > 0, "15 idle scope ends should keep the pool: %zu bytes", pooled);
  op_pack_scope_begin();
  op_pack_scope_end();
  op_pack_pool_stats(&fresh2, &pooled);
  CHECK_EQ_INT((long)pooled, 0);
  kiln_scope_end();
  kiln_generator_free(g);
}
