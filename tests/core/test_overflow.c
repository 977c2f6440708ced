/* tests/core/test_overflow.c: byte sizes that overflow or exceed what the
 * allocator can give are clear errors (Note [Byte sizes]), through the API
 * and through `kiln run`. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

TEST(empty_with_overflowing_bytes_is_an_error) {
  kiln_scope_begin();
  /* 2^62 floats: 2^64 bytes, which wraps a size_t to 0. */
  int64_t big[1] = {(int64_t)1 << 62};
  CHECK(kiln_empty(1, big, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "bytes");
  CHECK_STR_CONTAINS(kiln_last_error(), "[4611686018427387904]");
  /* 2^61 doubles: the same wrap, from the element size alone. */
  int64_t big2[1] = {(int64_t)1 << 61};
  CHECK(kiln_empty(1, big2, KILN_DTYPE_F64) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "bytes");
  /* Sizes whose product fits int64 but not the address space. */
  int64_t two[2] = {(int64_t)1 << 30, (int64_t)1 << 30};
  CHECK(kiln_zeros(2, two, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "4611686018427387904 bytes");
  /* An empty tensor is fine whatever its other sizes. */
  int64_t zero[2] = {0, (int64_t)1 << 62};
  kiln_tensor *z = kiln_empty(2, zero, KILN_DTYPE_F64);
  CHECK(z != NULL);
  if (z) CHECK_EQ_INT(kiln_tensor_numel(z), 0);
  kiln_scope_end();
}

TEST(expand_then_add_overflowing_bytes_is_an_error) {
  kiln_scope_begin();
  int64_t one[1] = {1}, big[1] = {(int64_t)1 << 62};
  kiln_tensor *x = kiln_full(1, one, 2.0, KILN_DTYPE_F32);
  kiln_tensor *e = kiln_expand(x, 1, big);
  CHECK(e != NULL); /* a view: no bytes */
  if (e) {
    CHECK(kiln_add(e, x) == NULL);
    CHECK_STR_CONTAINS(kiln_last_error(), "bytes");
    CHECK(kiln_contiguous(e) == NULL);
  }
  kiln_scope_end();
}

TEST(kiln_run_expand_to_2_62_then_add_fails_cleanly) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return;
  }
  /* a directory of this process's own: suites of several checkouts may run at once */
  char dir[] = "/tmp/kiln-overflow.XXXXXX", ir[64], x[64], err_path[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(ir, sizeof ir, "%s/g.ir", dir);
  snprintf(x, sizeof x, "%s/x.npy", dir);
  snprintf(err_path, sizeof err_path, "%s/err", dir);
  FILE *f = fopen(ir, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("graph(%x : Tensor):\n"
        "  %n : int = prim::Constant[value=4611686018427387904]()\n"
        "  %f : bool = prim::Constant[value=0]()\n"
        "  %one : int = prim::Constant[value=1]()\n"
        "  %s : int[] = prim::ListConstruct(%n)\n"
        "  %e : Tensor = aten::expand(%x, %s, %f)\n"
        "  %y : Tensor = aten::add(%e, %x, %one)\n"
        "  return (%y)\n",
        f);
  fclose(f);
  kiln_scope_begin();
  int64_t one[1] = {1};
  CHECK(kiln_npy_save(x, kiln_full(1, one, 1.0, KILN_DTYPE_F32)) == 0);
  kiln_scope_end();
  char cmd[1024];
  for (int runs = 1; runs <= 3; runs += 2) {
    snprintf(cmd, sizeof cmd,
             "%s run %s %s --runs %d --out %s/out >/dev/null 2>%s", bin, ir, x, runs, dir,
             err_path);
    int st = system(cmd);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "--runs %d: status %d", runs, st);
    char *err = test_read_file(err_path, NULL);
    CHECK_STR_CONTAINS(err, "bytes");
    free(err);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) test_fail(__FILE__, __LINE__, "cleanup");
}
