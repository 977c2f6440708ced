/* tests/core/test_tensor.c: tensor creation, metadata, scopes, promotion. */
#include "core/core.h"
#include "test.h"

TEST(tensor_create_and_item) {
  kiln_scope_begin();
  int64_t shape[2] = {2, 3};
  kiln_tensor *t = kiln_full(2, shape, 2.5, KILN_DTYPE_F32);
  CHECK(t != NULL);
  CHECK_EQ_INT(kiln_tensor_numel(t), 6);
  CHECK_EQ_INT(kiln_tensor_strides(t)[0], 3);
  double v = 0;
  CHECK(kiln_item(t, &v) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "6 elements");
  kiln_tensor *s = kiln_scalar(4.0, KILN_DTYPE_I64);
  CHECK(kiln_item(s, &v) == KILN_OK);
  CHECK_NEAR(v, 4.0, 0);
  kiln_tensor *r = kiln_arange(0, 5, 2, KILN_DTYPE_F64);
  CHECK_EQ_INT(kiln_tensor_numel(r), 3);
  CHECK_NEAR(core_get_flat(r, 2), 4.0, 0);
  kiln_scope_end();
}

TEST(tensor_bad_shapes) {
  int64_t bad[2] = {2, -1};
  CHECK(kiln_zeros(2, bad, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "negative size");
  int64_t many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(kiln_zeros(9, many, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "at most 8");
  CHECK(kiln_arange(0, 1, 0, KILN_DTYPE_F32) == NULL);
  /* empty, but its strides would overflow int64 (found by the IDX fuzz
   * target): refused rather than undefined behaviour */
  int64_t wide[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 40};
  CHECK(kiln_zeros(3, wide, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "too large");
  int64_t fine[3] = {(int64_t)1 << 40, 0, 3};
  kiln_tensor *e = kiln_zeros(3, fine, KILN_DTYPE_F32);
  CHECK(e && kiln_tensor_numel(e) == 0);
  kiln_release(e);
}

TEST(promotion_rules) {
  CHECK(kiln_promote_types(KILN_DTYPE_I64, KILN_DTYPE_F32) == KILN_DTYPE_F32);
  CHECK(kiln_promote_types(KILN_DTYPE_BOOL, KILN_DTYPE_I64) == KILN_DTYPE_I64);
  CHECK(kiln_promote_types(KILN_DTYPE_F32, KILN_DTYPE_F64) == KILN_DTYPE_F64);
  kiln_scope_begin();
  int64_t sh[1] = {3};
  kiln_tensor *f = kiln_ones(1, sh, KILN_DTYPE_F32);
  kiln_tensor *i = kiln_ones(1, sh, KILN_DTYPE_I64);
  kiln_tensor *b = kiln_ones(1, sh, KILN_DTYPE_BOOL);
  kiln_tensor *d0 = kiln_scalar(2, KILN_DTYPE_F64);
  /* a Python float scalar does not promote float32 */
  CHECK(kiln_tensor_dtype(kiln_add_scalar(f, 2.5)) == KILN_DTYPE_F32);
  /* an int tensor with a float scalar gives the default float */
  CHECK(kiln_tensor_dtype(kiln_mul_scalar(i, 2.5)) == KILN_DTYPE_F32);
  /* bool with int gives int */
  CHECK(kiln_tensor_dtype(kiln_add(b, i)) == KILN_DTYPE_I64);
  /* a 0-d double does not promote a float32 tensor, but does an int one */
  CHECK(kiln_tensor_dtype(kiln_mul(f, d0)) == KILN_DTYPE_F32);
  CHECK(kiln_tensor_dtype(kiln_mul(i, d0)) == KILN_DTYPE_F64);
  /* int + float tensors give float */
  CHECK(kiln_tensor_dtype(kiln_add(i, f)) == KILN_DTYPE_F32);
  kiln_scope_end();
}

TEST(scope_releases_and_keep) {
  kiln_tensor *kept;
  kiln_scope_begin();
  int64_t sh[1] = {4};
  kiln_tensor *a = kiln_ones(1, sh, KILN_DTYPE_F32);
  kept = kiln_keep(kiln_add(a, a));
  kiln_scope_end();
  CHECK_NEAR(core_get_flat(kept, 3), 2.0, 0);
  kiln_release(kept);
}

TEST(alloc_failure_is_an_error) {
  int64_t sh[1] = {4};
  core_alloc_fail_at(1);
  kiln_tensor *t = kiln_zeros(1, sh, KILN_DTYPE_F32);
  core_alloc_fail_at(0);
  CHECK(t == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "out of memory");
}

TEST(broadcast_and_strided_add) {
  kiln_scope_begin();
  double av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
  int64_t sa[2] = {2, 3}, sb[1] = {3};
  kiln_tensor *a = kiln_from_data(av, 2, sa, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, sb, KILN_DTYPE_F64);
  kiln_tensor *c = kiln_add(a, b);
  double want[6] = {11, 22, 33, 14, 25, 36};
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(c, i), want[i], 0);
  int64_t bad[1] = {2};
  kiln_tensor *d = kiln_ones(1, bad, KILN_DTYPE_F64);
  CHECK(kiln_add(a, d) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::add: shapes [2, 3] and [2] cannot be broadcast");
  kiln_scope_end();
}
