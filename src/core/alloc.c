/* src/core/alloc.c: the one allocation hook. Every allocation in kiln goes
 * through here so tests can make the Nth allocation fail (as SQLite's
 * malloc fault injection does). */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static long alloc_count;     /* allocations since the last core_alloc_fail_at */
static long alloc_fail_at;   /* 0 = never */

static bool should_fail(void) {
  alloc_count++;
  return alloc_fail_at > 0 && alloc_count == alloc_fail_at;
}

long core_alloc_fail_at(long n) {
  long made = alloc_count;
  alloc_count = 0;
  alloc_fail_at = n;
  return made;
}

void *core_alloc(size_t nbytes) {
  void *p = should_fail() ? NULL : malloc(nbytes ? nbytes : 1);
  if (!p) core_error(KILN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
  return p;
}

void *core_calloc(size_t n, size_t size) {
  void *p = should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
  if (!p) core_error(KILN_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
  return p;
}

void *core_realloc(void *old, size_t nbytes) {
  void *p = should_fail() ? NULL : realloc(old, nbytes ? nbytes : 1);
  if (!p) core_error(KILN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
  return p;
}

void *core_alloc_aligned(size_t nbytes) {
  void *p = NULL;
  /* Round up so vector loops may read a full last 64-byte line. */
  size_t n = (nbytes + 63) & ~(size_t)63;
  if (should_fail() || posix_memalign(&p, 64, n ? n : 64) != 0) p = NULL;
  if (!p) core_error(KILN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
  return p;
}

void core_free(void *p) { free(p); }
void core_free_aligned(void *p) { free(p); }

char *core_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = core_alloc(n);
  if (p) memcpy(p, s, n);
  return p;
}
