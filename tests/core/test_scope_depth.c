/* tests/core/test_scope_depth.c: scopes nested deeper than the 256 frames
 * kiln keeps fold into the deepest one (src/core/scope.c): a tensor made at
 * depth 300 is released when the 256th scope ends, not before (found by
 * `make coverage`'s unreached lines: any tensor made that deep wrote past
 * the frame's array, a segfault); and a device given as a file is refused
 * naming it (src/core/file.c). */
#include "test.h"

#include "core/core.h"
#include "kiln.h"

TEST(scopes_deeper_than_the_frames_fold_into_the_deepest) {
  for (int i = 0; i < 300; i++) kiln_scope_begin();
  kiln_tensor *t = kiln_retain(kiln_scalar(1, KILN_DTYPE_F32));
  CHECK_EQ_INT(t->refcount, 2); /* ours and the scope's */
  for (int i = 0; i < 44; i++) kiln_scope_end(); /* the 44 folded ones */
  CHECK_EQ_INT(t->refcount, 2);
  kiln_scope_end(); /* frame 256 */
  CHECK_EQ_INT(t->refcount, 1);
  for (int i = 0; i < 255; i++) kiln_scope_end();
  kiln_release(t);
}

TEST(a_device_as_a_data_file_is_refused) {
  kiln_clear_error();
  CHECK(kiln_npy_load("/dev/null") == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "is not a regular file (it is a device)");
}
