/* src/ops/sgemm_pack_cache.c: the cache of packed B panels that kiln's
 * sgemm reuses when one weight is multiplied many times in a row.
 *
 * Note [Packed B cache]: the recurrent product of an RNN step, h @ W^T
 * ([32, 256] @ [256, 1024]) and its backward dgates @ W, have few rows, so
 * packing W's panels (1 MiB read, transposed, written) costs about a third
 * of each product, and a 32-step loop packs the same W 32 times forward and
 * 32 times backward. The cache keeps the packed panels of a B operand and
 * hands them back to later products on the same B:
 * - Identity. The caller of op_gemm_ep names B's tensor (op_pack_src_of):
 *   its storage's uid (never reused, unlike an address), its version
 *   counter (an in-place write raises it: the entry no longer matches),
 *   and the bytes the storage spans (a B pointer outside them is not
 *   that tensor's, e.g. a contiguous copy made for BLAS). The key adds the
 *   B pointer, ldb, layout, the block (jc, pc, kc, nc) and the kernel.
 * - Lifetime. Entries live only inside a scope (op_pack_scope_begin/end:
 *   kiln_function_call, kiln_backward and kiln_grad, kiln_mark_step), and
 *   the outermost end frees that scope's entries. So memory written
 *   through kiln_tensor_data between calls (which bumps no version) is
 *   never read stale; inside a scope only kiln's own ops write, and they
 *   bump versions. (A hook that writes a tensor's memory by pointer during
 *   a backward must bump it with an in-place op, as in PyTorch.)
 * - Cost. A B seen once (an activation) never costs an entry: a key is
 *   cached the second time it is seen in a scope (a ring of recent keys).
 *   At most CACHE_BYTES and CACHE_ENTRIES are held; a full cache evicts
 *   the least recently used entry that no thread is reading.
 * - Threads. The table is shared and locked (op_gemm's OpenMP workers
 *   look up their own slices of B; user threads each have their own
 *   scopes, hence their own keys). An entry is pinned while a kernel reads
 *   or fills it; one being filled is a miss for everyone else.
 * The panels are the same bytes packing would write, so results are
 * identical with and without the cache. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

enum { CACHE_ENTRIES = 64, SEEN = 128, POOL = 32, POOL_AGE = 16 };
#define CACHE_BYTES ((size_t)64 << 20)

typedef struct pack_key {
  uint64_t uid, epoch;
  uint32_t version;
  int kernel;
  bool tb;
  const float *B;
  int64_t ldb, jc, pc, kc, nc;
} pack_key;

struct op_pack_entry {
  pack_key key;
  float *panels;
  size_t nbytes, cap; /* bytes used; bytes the buffer holds (>= nbytes) */
  int pins;
  bool ready;
  uint64_t used; /* LRU clock */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static op_pack_entry *entries[CACHE_ENTRIES];
static size_t held;
static uint64_t clock_now;
static long hits; /* lookups that found filled panels (op_pack_stats) */
static uint64_t seen[SEEN];
static int seen_next;
static _Atomic uint64_t next_epoch = 1; /* atomic: Note [Threads] in kiln.h */

/* Freed panels kept for reuse (Recycling above); under the lock. */
static struct {
  float *p;
  size_t cap;
  uint64_t stamp; /* scope_ends when pooled */
} pool[POOL];
static size_t pooled;       /* bytes in the pool */
static uint64_t scope_ends; /* outermost scope ends so far */
static long fresh;          /* panels allocated, not taken from the pool */

static _Thread_local int scope_depth;
static _Thread_local uint64_t scope_epoch;
static _Thread_local op_pack_src cur_src;

static atomic_int enabled = -1; /* KILN_PACK_CACHE=0 turns the cache off (A/B runs) */

void op_pack_scope_begin(void) {
  if (scope_depth++ > 0) return;
  int on = atomic_load_explicit(&enabled, memory_order_relaxed);
  if (on < 0) {
    const char *e = getenv("KILN_PACK_CACHE");
    on = !(e && strcmp(e, "0") == 0);
    atomic_store_explicit(&enabled, on, memory_order_relaxed);
  }
  scope_epoch = on ? atomic_fetch_add_explicit(&next_epoch, 1, memory_order_relaxed) : 0;
}

/* Puts panels of cap bytes in the pool, or frees them if it is full. */
static void pool_put(float *p, size_t cap) {
  for (int i = 0; i < POOL && pooled + cap <= CACHE_BYTES; i++)
    if (!pool[i].p) {
      pool[i].p = p, pool[i].cap = cap, pool[i].stamp = scope_ends;
      pooled += cap;
      return;
    }
  core_free_aligned(p);
}

/* The smallest pooled buffer of nbytes to 2 * nbytes (so a small entry
 * never pins a large buffer), removed from the pool, its size in *cap;
 * NULL if none. */
static float *pool_take(size_t nbytes, size_t *cap) {
  int best = -1;
  for (int i = 0; i < POOL; i++)
    if (pool[i].p && pool[i].cap >= nbytes && pool[i].cap / 2 <= nbytes &&
        (best < 0 || pool[i].cap < pool[best].cap))
      best = i;
  if (best < 0) return NULL;
  float *p = pool[best].p;
  *cap = pool[best].cap;
  pooled -= pool[best].cap;
  pool[best].p = NULL;
  return p;
}

/* Frees the pooled buffers older than age scope ends (all if age 0). */
static void pool_trim(uint64_t age) {
  for (int i = 0; i < POOL; i++)
    if (pool[i].p && (!age || scope_ends - pool[i].stamp >= age)) {
      core_free_aligned(pool[i].p);
      pooled -= pool[i].cap;
      pool[i].p = NULL;
    }
}

static void entry_free(int i) {
  held -= entries[i]->cap;
  pool_put(entries[i]->panels, entries[i]->cap);
  core_free(entries[i]);
  entries[i] = NULL;
}

void op_pack_scope_end(void) {
  if (scope_depth == 0 || --scope_depth > 0) return;
  pthread_mutex_lock(&lock);
  scope_ends++; /* first: the panels this end pools are stamped with it */
  for (int i = 0; i < CACHE_ENTRIES; i++)
    if (entries[i] && entries[i]->key.epoch == scope_epoch && !entries[i]->pins) entry_free(i);
  pool_trim(POOL_AGE);
  pthread_mutex_unlock(&lock);
  scope_epoch = 0;
}

void op_pack_src_of(const kiln_tensor *b, op_pack_src *src) {
  memset(src, 0, sizeof *src);
  if (!scope_depth || !scope_epoch || !b || !b->storage || !b->storage->data || b->device != CORE_DEVICE_CPU) return;
  src->uid = b->storage->uid;
  src->version = b->storage->version;
  src->epoch = scope_epoch;
  src->lo = b->storage->data;
  src->hi = (const char *)b->storage->data + b->storage->nbytes;
}

op_pack_src op_pack_src_swap(const op_pack_src *src) {
  op_pack_src prev = cur_src;
  if (src) cur_src = *src;
  else memset(&cur_src, 0, sizeof cur_src);
  return prev;
}

static uint64_t key_hash(const pack_key *k) {
  uint64_t h = k->uid * 0x9e3779b97f4a7c15ull ^ k->epoch;
  const int64_t v[] = {(int64_t)(uintptr_t)k->B, k->ldb, k->jc, k->pc, k->kc, k->nc,
                       (int64_t)k->version, k->kernel * 2 + k->tb};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) h = (h ^ (uint64_t)v[i]) * 0x100000001b3ull;
  return h | 1; /* 0 marks an empty ring slot */
}

static bool key_equal(const pack_key *a, const pack_key *b) {
  return a->uid == b->uid && a->epoch == b->epoch && a->version == b->version &&
         a->kernel == b->kernel && a->tb == b->tb && a->B == b->B && a->ldb == b->ldb &&
         a->jc == b->jc && a->pc == b->pc && a->kc == b->kc && a->nc == b->nc;
}

/* A free slot for nbytes more, evicting unpinned entries (other scopes'
 * first, then the least recently used); -1 if none. Under the lock. */
static int make_room(size_t nbytes, uint64_t epoch) {
  for (;;) {
    int free_slot = -1, victim = -1;
    for (int i = 0; i < CACHE_ENTRIES; i++) {
      op_pack_entry *e = entries[i];
      if (!e) {
        if (free_slot < 0) free_slot = i;
        continue;
      }
      if (e->pins) continue;
      if (victim < 0 || (e->key.epoch != epoch && entries[victim]->key.epoch == epoch) ||
          ((e->key.epoch != epoch) == (entries[victim]->key.epoch != epoch) &&
           e->used < entries[victim]->used))
        victim = i;
    }
    if (free_slot >= 0 && held + nbytes <= CACHE_BYTES) return free_slot;
    if (victim < 0) return -1;
    entry_free(victim);
  }
}

op_pack_entry *op_pack_get(const float *B, int64_t ldb, bool tb, int64_t jc, int64_t pc,
                           int64_t kc, int64_t nc, int kernel, size_t n, float **panels,
                           bool *ready) {
  const op_pack_src *s = &cur_src;
  *ready = false;
  if (!s->uid || (const char *)B < s->lo || (const char *)B >= s->hi) return NULL;
  pack_key k = {s->uid, s->epoch, s->version, kernel, tb, B, ldb, jc, pc, kc, nc};
  uint64_t h = key_hash(&k);
  op_pack_entry *e = NULL;
  pthread_mutex_lock(&lock);
  clock_now++;
  for (int i = 0; i < CACHE_ENTRIES; i++)
    if (entries[i] && key_equal(&entries[i]->key, &k)) {
      e = entries[i];
      break;
    }
  if (e) {
    if (!e->ready) e = NULL; /* another thread is filling it */
    else *ready = true, hits++;
  } else {
    bool again = false;
    for (int i = 0; i < SEEN && !again; i++) again = seen[i] == h;
    if (!again) {
      seen[seen_next] = h;
      seen_next = (seen_next + 1) % SEEN;
    } else {
      size_t nbytes = n * sizeof(float);
      size_t cap = nbytes;
      float *p = pool_take(nbytes, &cap);
      int slot = make_room(cap, k.epoch);
      if (slot < 0) {
        if (p) pool_put(p, cap);
        p = NULL;
      } else if (!p && (p = core_alloc_aligned(nbytes))) {
        fresh++;
      }
      e = p ? core_calloc(1, sizeof *e) : NULL;
      if (!e) {
        if (p) pool_put(p, cap);
      } else {
        e->key = k;
        e->panels = p;
        e->nbytes = nbytes;
        e->cap = cap;
        entries[slot] = e;
        held += cap;
      }
    }
  }
  if (e) {
    e->pins++;
    e->used = clock_now;
    *panels = e->panels;
  }
  pthread_mutex_unlock(&lock);
  return e;
}

void op_pack_put(op_pack_entry *e) {
  if (!e) return;
  pthread_mutex_lock(&lock);
  e->ready = true;
  e->pins--;
  pthread_mutex_unlock(&lock);
}

void op_pack_stats(long *n_hits, int *n_entries) {
  pthread_mutex_lock(&lock);
  *n_hits = hits;
  *n_entries = 0;
  for (int i = 0; i < CACHE_ENTRIES; i++) *n_entries += entries[i] != NULL;
  pthread_mutex_unlock(&lock);
}

void op_pack_pool_stats(long *n_fresh, size_t *pooled_bytes) {
  pthread_mutex_lock(&lock);
  *n_fresh = fresh;
  *pooled_bytes = pooled;
  pthread_mutex_unlock(&lock);
}

static void release_all(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < CACHE_ENTRIES; i++)
    if (entries[i] && !entries[i]->pins) entry_free(i);
  pool_trim(0);
  pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void pack_cache_dtor(void) { release_all(); }
