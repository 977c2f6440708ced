/* tests/test.h: kiln's test runner. Tests register themselves with TEST(name)
 * (a constructor adds them to a global list), so no file keeps a list of
 * tests. CHECK macros record failures without aborting the test; the runner
 * filters by substring (argv[1]), and ends with "N passed, M failed". */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);

void test_register(const char *name, const char *file, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints a note that is shown with the test's result (e.g. coverage counts). */
void test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The whole file at `path` as a malloc'd, NUL-terminated buffer the caller
 * frees; its length (without the NUL) in *len if len is not NULL (0 on failure). NULL if
 * the file cannot be opened or read, or memory runs out. */
char *test_read_file(const char *path, size_t *len);

#define TEST(name)                                                           \
  static void test_##name(void);                                             \
  __attribute__((constructor)) static void test_reg_##name(void) {           \
    test_register(#name, __FILE__, test_##name);                              \
  }                                                                          \
  static void test_##name(void)

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);          \
  } while (0)

#define CHECK_MSG(cond, ...)                                                 \
  do {                                                                       \
    if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                 \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                   \
  do {                                                                       \
    long long a_ = (long long)(a), b_ = (long long)(b);                      \
    if (a_ != b_)                                                            \
      test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                \
  do {                                                                       \
    double a_ = (double)(a), b_ = (double)(b);                               \
    if (!(fabs(a_ - b_) <= (tol)) && !(isnan(a_) && isnan(b_)))              \
      test_fail(__FILE__, __LINE__, "%s ~= %s: %.9g != %.9g (tol %g)", #a,   \
                #b, a_, b_, (double)(tol));                                   \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                      \
  do {                                                                       \
    const char *h_ = (hay), *n_ = (needle);                                  \
    if (!h_ || !strstr(h_, n_))                                              \
      test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"",        \
                h_ ? h_ : "(null)", n_);                                     \
  } while (0)

#endif
