/* tests/tools/test_install.c: runs tests/tools/install_test.sh (make install
 * into a temporary PREFIX; external C and C++ programs built with
 * pkg-config, shared and static, run; only kiln_ symbols exported; make
 * uninstall removes everything). Skipped in sanitizer builds (an external
 * program would need the sanitizers' runtime) and without the kiln binary. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

TEST(install_shared_static_pkg_config) {
#if defined(__SANITIZE_ADDRESS__) || defined(KILN_FUZZ) || defined(KILN_TSAN)
  test_note("skipped: sanitizer build");
#else
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0 || access("tests/tools/install_test.sh", R_OK) != 0) {
    test_note("skipped: needs KILN_BIN and the source tree");
    return;
  }
  int rc = system("sh tests/tools/install_test.sh 2>&1 | tail -20 > build/install_test.log; "
                  "grep -q 'install_test: ok' build/install_test.log");
  if (rc != 0) {
    char *log = test_read_file("build/install_test.log", NULL);
    test_fail(__FILE__, __LINE__, "install_test.sh failed:\n%s", log ? log : "(no log)");
    free(log);
  }
#endif
}
