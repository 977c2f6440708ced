/* src/core/cache.c: the caching allocator for tensor storage.
 *
 * Note [Storage cache]: a training step allocates the same tensor sizes
 * every step, so released storage blocks are kept on free lists by size
 * class and handed out again: steady-state steps make no malloc calls for
 * tensors. Classes are powers of two and 1.5x powers of two (waste <= 25%);
 * lists are thread-local (no locks); at most KILN_CACHE_MB (default 512)
 * MiB are kept per thread. Sanitizer builds (CORE_ASAN: sanitizer.h)
 * bypass the cache so that use-after-free is still caught. */
#include <stdlib.h>

#include "core.h"
#include "sanitizer.h"

#define N_CLASSES 96

typedef struct free_block {
  struct free_block *next;
} free_block;

static _Thread_local free_block *lists[N_CLASSES];
static _Thread_local size_t cached_bytes;
static _Thread_local int64_t n_hits, n_misses;
static _Atomic size_t limit_bytes; /* read once from the environment; atomic */

#if defined(CORE_ASAN)
#define CACHE_ENABLED 0
#else
#define CACHE_ENABLED 1
#endif

/* Rounds n up to its class; returns the class index (or -1: too big). */
static int size_class(size_t n, size_t *rounded) {
  size_t c = 64;
  for (int k = 0; k < N_CLASSES; k += 2) {
    if (n <= c) {
      *rounded = c;
      return k;
    }
    if (n <= c + c / 2) {
      *rounded = c + c / 2;
      return k + 1;
    }
    c *= 2;
    if (c > ((size_t)1 << 40)) break;
  }
  *rounded = n;
  return -1;
}

static size_t limit(void) {
  size_t n = limit_bytes;
  if (!n) {
    const char *e = getenv("KILN_CACHE_MB");
    long mb = e ? atol(e) : 512;
    n = (size_t)(mb < 0 ? 0 : mb) << 20;
    if (!n) n = 1; /* 0 disables: nothing fits */
    limit_bytes = n;
  }
  return n;
}

void *core_block_alloc(size_t n, size_t *block) {
  size_t rounded;
  int k = size_class(n, &rounded);
  *block = rounded;
  if (CACHE_ENABLED && k >= 0 && lists[k]) {
    free_block *b = lists[k];
    lists[k] = b->next;
    cached_bytes -= rounded;
    n_hits++;
    return b;
  }
  n_misses++;
  return core_alloc_aligned(rounded);
}

void core_block_free(void *p, size_t block) {
  size_t rounded;
  if (!p) return;
  int k = size_class(block, &rounded);
  if (CACHE_ENABLED && k >= 0 && rounded == block && cached_bytes + block <= limit()) {
    free_block *b = p;
    b->next = lists[k];
    lists[k] = b;
    cached_bytes += block;
    core_thread_arm(); /* Note [Thread exit] */
    return;
  }
  core_free_aligned(p);
}

void core_cache_release(void) {
  for (int k = 0; k < N_CLASSES; k++)
    while (lists[k]) {
      free_block *b = lists[k];
      lists[k] = b->next;
      core_free_aligned(b);
    }
  cached_bytes = 0;
  core_small_release();
}

void core_cache_stats(int64_t *hits, int64_t *misses, size_t *bytes) {
  *hits = n_hits;
  *misses = n_misses;
  *bytes = cached_bytes;
}

/* Free what the main thread cached at exit (leak checkers see a clean
 * heap). */
__attribute__((destructor)) static void cache_dtor(void) { core_cache_release(); }
