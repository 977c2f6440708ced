/* tests/test_main.c: runs every registered test (optionally filtered by a
 * substring given as argv[1]) and prints "N passed, M failed". */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>

typedef struct {
  const char *name, *file;
  test_fn fn;
} test_case;

static test_case *tests;
static int n_tests, cap_tests;
static int cur_failures;
static char note_buf[512];

void test_register(const char *name, const char *file, test_fn fn) {
  if (n_tests == cap_tests) {
    cap_tests = cap_tests ? cap_tests * 2 : 64;
    tests = realloc(tests, (size_t)cap_tests * sizeof *tests);
    if (!tests) abort();
  }
  tests[n_tests++] = (test_case){name, file, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  if (cur_failures < 10) {
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
  }
  cur_failures++;
}

void test_note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note_buf, sizeof note_buf, fmt, ap);
  va_end(ap);
}

static int cmp_case(const void *a, const void *b) {
  const test_case *x = a, *y = b;
  int c = strcmp(x->file, y->file);
  return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0;
  /* native fused kernels are not kept in the user's cache by tests (the
   * kernel-file test sets its own directory); kiln subprocesses inherit it */
  setenv("KILN_CACHE_DIR", "off", 0);
  /* results depend on the thread count (GEMMs and reductions split over
   * threads round differently), and the suite compares runs with each
   * other: the count stays what each test asks for, not what the machine's
   * load leaves (Note [Busy cores]; the threads tests turn it on) */
  setenv("KILN_ADAPT_THREADS", "0", 0);
  qsort(tests, (size_t)n_tests, sizeof *tests, cmp_case);
  for (int i = 0; i < n_tests; i++) {
    if (filter && !strstr(tests[i].name, filter)) continue;
    cur_failures = 0;
    note_buf[0] = 0;
    tests[i].fn();
    if (cur_failures) {
      failed++;
      printf("FAIL %s (%d failed checks)\n", tests[i].name, cur_failures);
    } else {
      passed++;
      printf("ok   %s%s%s\n", tests[i].name, note_buf[0] ? ": " : "", note_buf);
    }
    fflush(stdout);
  }
  free(tests);
  printf("%d passed, %d failed\n", passed, failed);
  return failed || passed == 0 ? 1 : 0;
}

char *test_read_file(const char *path, size_t *len) {
  if (len) *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  fclose(f);
  if (!s) return NULL;
  s[n] = 0;
  if (len) *len = (size_t)n;
  return s;
}
