/* tests/core/test_from_blob.c: kiln_from_blob shares caller memory (writes
 * seen both ways, strided views), runs release exactly once when the last
 * tensor on it goes (views included), and refuses misaligned memory and
 * negative strides without calling release. */
#include <stdlib.h>

#include "kiln.h"
#include "test.h"

static int released;
static void on_release(void *ctx) { released += *(int *)ctx; }

TEST(from_blob_shares_memory_and_releases_once) {
  float *buf = aligned_alloc(64, 64 * sizeof(float));
  for (int i = 0; i < 12; i++) buf[i] = (float)i;
  int one = 1;
  released = 0;
  int64_t shape[2] = {3, 4};
  kiln_tensor *t = kiln_from_blob(buf, 2, shape, NULL, KILN_DTYPE_F32, on_release, &one);
  CHECK(t != NULL);
  CHECK(kiln_tensor_data(t) == buf);
  /* transposed strides: a [4, 3] view of the same memory */
  int64_t tshape[2] = {4, 3}, tstr[2] = {1, 4};
  kiln_tensor *u = kiln_from_blob(buf, 2, tshape, tstr, KILN_DTYPE_F32, NULL, NULL);
  CHECK(u != NULL && !kiln_tensor_is_contiguous(u));
  kiln_tensor *s = kiln_sum(t, NULL, 0, false);
  double v = 0;
  CHECK(kiln_item(s, &v) == KILN_OK);
  CHECK_NEAR(v, 66, 0);
  kiln_tensor *c = kiln_contiguous(u); /* c[1][2] = buf[1 + 2 * 4] */
  CHECK_NEAR(((float *)kiln_tensor_data(c))[1 * 3 + 2], 9, 0);
  CHECK(kiln_fill_(t, 2) == KILN_OK); /* kiln's write is the caller's */
  CHECK_NEAR(buf[11], 2, 0);
  kiln_tensor *view = kiln_t(t); /* keeps the storage alive */
  kiln_release(t);
  CHECK_EQ_INT(released, 0);
  kiln_release(view);
  CHECK_EQ_INT(released, 1);
  kiln_release(s);
  kiln_release(c);
  kiln_release(u);
  CHECK_EQ_INT(released, 1);
  /* misaligned, negative strides: refused, release not called */
  int64_t neg[2] = {-4, 1};
  CHECK(kiln_from_blob((char *)buf + 2, 2, shape, NULL, KILN_DTYPE_F32, on_release, &one) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aligned");
  CHECK(kiln_from_blob(buf, 2, shape, neg, KILN_DTYPE_F32, on_release, &one) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "negative stride");
  CHECK_EQ_INT(released, 1);
  free(buf);
}
