/* src/core/alloc.c: the one allocation hook. Every allocation in kiln goes
 * through here so tests can make the Nth allocation fail (as SQLite's
 * malloc fault injection does). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "sanitizer.h"

/* The test hooks are process-wide and atomic (Note [Threads] in
 * include/kiln.h); allocations are counted only once a test has called
 * core_alloc_fail_at, so a program's threads never share a counter. */
static atomic_bool counting;
static atomic_long alloc_count;     /* allocations since the last core_alloc_fail_at */
static atomic_long alloc_fail_at;   /* 0 = never */
static _Atomic size_t alloc_max;    /* 0 = no limit (core_alloc_limit) */
static _Thread_local long alloc_failures; /* allocations that failed on this thread */

long core_alloc_failures(void) { return alloc_failures; }

static bool should_fail(void) {
  if (!atomic_load_explicit(&counting, memory_order_relaxed)) return false;
  long k = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed) + 1;
  long at = atomic_load_explicit(&alloc_fail_at, memory_order_relaxed);
  return at > 0 && k == at;
}

size_t core_alloc_limit(size_t max_bytes) { return atomic_exchange(&alloc_max, max_bytes); }

static bool too_big(size_t n) {
  size_t max = atomic_load_explicit(&alloc_max, memory_order_relaxed);
  return max && n > max;
}

long core_alloc_fail_at(long n) {
  atomic_store(&counting, true);
  long made = atomic_exchange(&alloc_count, 0);
  atomic_store(&alloc_fail_at, n);
  return made;
}

/* Note [Small-object cache]: autograd nodes, lazy nodes and tensor headers
 * are small, short-lived and made by the thousand per step. glibc keeps
 * only 7 blocks per size in its lock-free per-thread cache; past that (and
 * for every calloc, which bypasses it in glibc 2.36) malloc and free take
 * the arena lock, which is uncontended but an atomic instruction once the
 * process has a second thread (OpenMP's or OpenBLAS's pool). That made
 * overhead_add_grad, lazy_record and mark_step ~25% dearer at 2 threads
 * than at 1. So blocks of up to SMALL_MAX bytes carry a 16-byte header with
 * their size class and are kept on thread-local free lists (at most
 * CLASS_BYTES per class), like the storage cache (cache.c). Large blocks
 * carry a header of class 0 and go straight to malloc. Sanitizer builds
 * (CORE_ASAN: src/core/sanitizer.h) keep the header but bypass the lists,
 * so use-after-free is still caught, and so is a pointer freed by the
 * wrong function. */
#define HDR 16
#define SMALL_STEP 16
#define SMALL_MAX 512
#define N_SMALL (SMALL_MAX / SMALL_STEP)
#define CLASS_BYTES ((size_t)1 << 20)

#if defined(CORE_ASAN)
#define SMALL_CACHE 0
#else
#define SMALL_CACHE 1
#endif

typedef struct small_block {
  struct small_block *next;
} small_block;

static _Thread_local small_block *small_lists[N_SMALL + 1];
static _Thread_local uint32_t small_count[N_SMALL + 1];

/* A block of n bytes with its header, or NULL; does not count or report. */
static void *raw_alloc(size_t n) {
  if (n > SIZE_MAX - HDR - SMALL_STEP) return NULL;
  size_t cls = n <= SMALL_MAX ? (n + SMALL_STEP - 1) / SMALL_STEP : 0;
  if (cls == 0 && n == 0) cls = 1;
  char *base;
  if (SMALL_CACHE && cls && small_lists[cls]) {
    small_block *b = small_lists[cls];
    small_lists[cls] = b->next;
    small_count[cls]--;
    base = (char *)b;
  } else {
    base = malloc(HDR + (cls ? cls * SMALL_STEP : n));
    if (!base) return NULL;
  }
  *(size_t *)base = cls;
  return base + HDR;
}

/* The usable size of p's block: its class size, or 0 for a large block. */
static size_t small_size(const void *p) { return *(const size_t *)((const char *)p - HDR) * SMALL_STEP; }

void *core_alloc(size_t nbytes) {
  void *p = should_fail() || too_big(nbytes) ? NULL : raw_alloc(nbytes);
  if (!p) alloc_failures++, core_error(KILN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
  return p;
}

void *core_calloc(size_t n, size_t size) {
  void *p = NULL;
  if ((!size || n <= SIZE_MAX / size) && !should_fail() && !too_big(n * size))
    p = raw_alloc(n * size);
  if (!p) alloc_failures++, core_error(KILN_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
  else memset(p, 0, n * size);
  return p;
}

void *core_realloc(void *old, size_t nbytes) {
  if (!old) return core_alloc(nbytes);
  size_t have = small_size(old);
  void *p = NULL;
  if (should_fail() || too_big(nbytes)) {
    p = NULL;
  } else if (have && nbytes <= have) {
    return old; /* the class already holds it */
  } else if (!have && nbytes > SMALL_MAX && nbytes <= SIZE_MAX - HDR) {
    char *base = realloc((char *)old - HDR, HDR + nbytes); /* large stays large */
    p = base ? base + HDR : NULL;
  } else if ((p = raw_alloc(nbytes))) {
    /* across classes: a large block shrinking, or a small one growing */
    size_t keep = have ? have : nbytes;
    memcpy(p, old, keep < nbytes ? keep : nbytes);
    core_free(old);
  }
  if (!p) alloc_failures++, core_error(KILN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
  return p;
}

void *core_alloc_aligned(size_t nbytes) {
  void *p = NULL;
  /* Round up so vector loops may read a full last 64-byte line. */
  size_t n = (nbytes + 63) & ~(size_t)63;
  if (should_fail() || too_big(n) || posix_memalign(&p, 64, n ? n : 64) != 0) p = NULL;
  if (!p) alloc_failures++, core_error(KILN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
  return p;
}

void core_free(void *p) {
  if (!p) return;
  char *base = (char *)p - HDR;
  size_t cls = *(size_t *)base;
  if (SMALL_CACHE && cls && small_count[cls] < CLASS_BYTES / (cls * SMALL_STEP)) {
    small_block *b = (small_block *)base;
    b->next = small_lists[cls];
    small_lists[cls] = b;
    small_count[cls]++;
    core_thread_arm(); /* Note [Thread exit] */
    return;
  }
  free(base);
}
void core_small_release(void) {
  for (int c = 1; c <= N_SMALL; c++) {
    while (small_lists[c]) {
      small_block *b = small_lists[c];
      small_lists[c] = b->next;
      free(b);
    }
    small_count[c] = 0;
  }
}

void core_free_aligned(void *p) { free(p); }

char *core_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = core_alloc(n);
  if (p) memcpy(p, s, n);
  return p;
}
