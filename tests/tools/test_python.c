/* tests/tools/test_python.c: runs the Python package's tests (pytest over
 * python/tests, against build/libkiln.so) as one test of the suite, so the
 * suite's "N passed, M failed" line stays the last and counts them.
 * Skipped, with a note, when /usr/bin/python3 lacks numpy or pytest
 * (.ci/run installs them and also runs make test-python), and in
 * sanitizer builds (python cannot load an ASan library). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

TEST(python_package_pytest) {
#if defined(__SANITIZE_ADDRESS__) || defined(KILN_TSAN)
  test_note("skipped: sanitizer build");
#else
  if (access("python/tests", R_OK) != 0 || access("build/libkiln.so.0", R_OK) != 0) {
    test_note("skipped: needs the source tree and build/libkiln.so.0");
    return;
  }
  if (system("/usr/bin/python3 -c 'import numpy, pytest' >/dev/null 2>&1") != 0) {
    test_note("skipped: /usr/bin/python3 lacks numpy or pytest (sh scripts/deps.sh --python)");
    return;
  }
  int rc = system("KILN_LIBRARY=$PWD/build/libkiln.so.0 /usr/bin/python3 -m pytest -q -p "
                  "no:cacheprovider python/tests > build/pytest.log 2>&1");
  char *log = test_read_file("build/pytest.log", NULL);
  if (rc != 0) {
    test_fail(__FILE__, __LINE__, "pytest failed:\n%s", log ? log : "(no log)");
  } else if (log) {
    /* pytest's summary ("42 passed in 6.1s") as this test's note */
    char *last = log, *p = log;
    for (; *p; p++)
      if (p[0] == '\n' && p[1]) last = p + 1;
    char *nl = strchr(last, '\n');
    if (nl) *nl = 0;
    test_note("pytest: %s", last);
  }
  free(log);
#endif
}
