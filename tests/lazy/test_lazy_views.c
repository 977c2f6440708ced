/* tests/lazy/test_lazy_views.c: in-place writes through lazy views (Note
 * [Lazy views] in src/lazy/views.c) give eager's values. An expand that
 * only adds or keeps size-1 dims (as many elements as its base) is a
 * writable view in eager mode and PyTorch: so it must be in lazy mode
 * (fuzz_exec found `%v6 = aten::expand(%v5, [])` of a 0-d value, then
 * `aten::neg_(%v6)`, refused by lazy recording alone). */
#include "test.h"

#include "kiln.h"

TEST(lazy_write_through_size_keeping_expand_writes_the_base) {
  kiln_scope_begin();
  float xv[3] = {1, -2, 3}, ov[3] = {10, 20, 30};
  int64_t s3[1] = {3}, s13[2] = {1, 3};
  kiln_tensor *x = kiln_to_lazy(kiln_from_data(xv, 1, s3, KILN_DTYPE_F32));
  kiln_tensor *o = kiln_to_lazy(kiln_from_data(ov, 1, s3, KILN_DTYPE_F32));
  kiln_tensor *v = kiln_expand(x, 2, s13); /* [3] -> [1, 3]: no element repeats */
  CHECK(v != NULL);
  CHECK_MSG(v && kiln_add_(v, o, 1.0) == 0, "%s", kiln_last_error());
  CHECK(kiln_mark_step() == 0);
  float got[3] = {0};
  CHECK(kiln_tensor_copy_to(kiln_to_cpu(x), got, KILN_DTYPE_F32) == 0);
  CHECK_NEAR(got[0], 11, 0);
  CHECK_NEAR(got[1], 18, 0);
  CHECK_NEAR(got[2], 33, 0);
  /* a 0-d value expanded to [] (the fuzz case) */
  float zv = 2;
  kiln_tensor *z = kiln_to_lazy(kiln_from_data(&zv, 0, NULL, KILN_DTYPE_F32));
  kiln_tensor *e = kiln_expand(z, 0, NULL);
  CHECK_MSG(e && kiln_add_(e, e, 1.0) == 0, "%s", kiln_last_error());
  CHECK(kiln_mark_step() == 0);
  double zz = 0;
  CHECK(kiln_item(kiln_to_cpu(z), &zz) == 0);
  CHECK_NEAR(zz, 4, 0);
  kiln_scope_end();
}
