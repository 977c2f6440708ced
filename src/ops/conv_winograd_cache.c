/* src/ops/conv_winograd_cache.c: the cache of transformed Winograd weights
 * U = G g G^T that op_wino_drive reuses across calls on frozen weights.
 *
 * Note [Winograd weights cache]: transforming the weights was 9-10% of
 * resnet18's inference at batch 16, redone on every call although
 * inference never changes them. Only memory whose bytes are known to be
 * fixed can be cached across calls: `kiln_tensor_data` hands out writable
 * pointers that bump no version (which is why the Packed B cache lives
 * inside one scope, Note [Packed B cache]). Lazy device data is such
 * memory (Note [Frozen storage] in src/core/core.h), so lazy inference
 * transforms each weight once, as XLA folds its constants once:
 * - Identity. The conv names its weight tensor (op_wino_weight_swap); a
 *   call is cached only when that tensor's storage is frozen and the
 *   weights op_wino_drive reads lie inside it. The key is the storage's
 *   uid (never reused) and version, the weights' address, O, C and the CPU
 *   level's kernels (their weights layout). Backward's flipped
 *   convolutions are not cached.
 * - Lifetime. An entry lives while its storage stays frozen: thawing it
 *   (a lazy run it is donated to, as a training step's parameters are) or
 *   freeing it calls core_frozen_drop_hook, which drops its entries. (The
 *   run's write into a donated buffer also raises its version, Note
 *   [Buffer reuse], so the key would not match either.) During such a run
 *   the weights are not frozen, so a training step's convs never use the
 *   cache; nor do eager and jit mode's, whose weights are the user's.
 * - Reads. Entries come from L3, not from the L2 a fresh transform writes:
 *   the GEMMs prefetch the next point's rows (op_wino_prefetch in conv.h);
 *   without that the cache gained 2% of resnet18's time instead of 5-6%.
 *   The weights are 16 floats per kernel against the 9 a transform reads,
 *   so the gain is what the transform's arithmetic cost, less the extra
 *   reads: 5-6% at AVX-512, about 4% at AVX2 (alternating builds). Keeping
 *   each row block's weights contiguous instead, one stream instead of 16,
 *   measured the same within noise (-2% to +3%), so the layout stays the
 *   transform's shared [16][O][C].
 * - Cost. A key is cached the second time it is seen (a ring of recent
 *   keys), so a training loop, whose parameters are new buffers or thawed
 *   every step, never fills entries it cannot reuse. At most CACHE_BYTES
 *   and CACHE_ENTRIES are held; a full cache takes no more entries (it
 *   evicts nothing: an LRU over a cycle of more weights than fit would
 *   miss every time and pay the copies too).
 * - Threads. The table is shared and locked; an entry is pinned while a
 *   call fills or reads it, and one being filled is a miss for others.
 * The cached U are the floats the transform writes, so results are the
 * same bits with and without the cache. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "conv.h"

enum { CACHE_ENTRIES = 256, SEEN = 64 };
#define CACHE_BYTES ((size_t)256 << 20)

typedef struct wino_key {
  uint64_t uid;
  uint32_t version;
  const float *w;
  int64_t O, C;
  const void *level;
} wino_key;

struct op_wino_entry {
  wino_key key;
  float *u;
  size_t nbytes, block;
  int pins;
  bool ready, dead; /* dead: dropped while pinned, freed at the last put */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static op_wino_entry *entries[CACHE_ENTRIES];
static _Atomic int n_entries; /* read without the lock by the drop hook */
static size_t held;
static long hits;
static uint64_t seen[SEEN];
static int seen_next;

/* The weight tensor of this thread's current conv call. */
static _Thread_local const kiln_tensor *cur_weight;

const kiln_tensor *op_wino_weight_swap(const kiln_tensor *w) {
  const kiln_tensor *prev = cur_weight;
  cur_weight = w;
  return prev;
}

static bool same_key(const wino_key *a, const wino_key *b) {
  return a->uid == b->uid && a->version == b->version && a->w == b->w && a->O == b->O &&
         a->C == b->C && a->level == b->level;
}

static uint64_t key_hash(const wino_key *k) {
  uint64_t h = core_hash_mix(k->uid, k->version);
  h = core_hash_mix(h, (uint64_t)(uintptr_t)k->w);
  h = core_hash_mix(h, (uint64_t)k->O);
  h = core_hash_mix(h, (uint64_t)k->C);
  return core_hash_mix(h, (uint64_t)(uintptr_t)k->level) | 1; /* 0: an empty ring slot */
}

static void entry_free(op_wino_entry *e) {
  core_block_free(e->u, e->block);
  core_free(e);
}

/* Removes entries[i] (under the lock); a pinned one is freed at its put. */
static void remove_at(int i) {
  op_wino_entry *e = entries[i];
  int n = atomic_load(&n_entries);
  entries[i] = entries[n - 1];
  entries[n - 1] = NULL;
  atomic_store(&n_entries, n - 1);
  held -= e->nbytes;
  if (e->pins) e->dead = true;
  else entry_free(e);
}

static void drop_uid(uint64_t uid) {
  if (atomic_load(&n_entries) == 0) return; /* the common case: nothing cached */
  pthread_mutex_lock(&lock);
  for (int i = atomic_load(&n_entries) - 1; i >= 0; i--)
    if (entries[i]->key.uid == uid) remove_at(i);
  pthread_mutex_unlock(&lock);
}

/* Note [Init] (src/lazy/record.c): the hook is set before main. */
__attribute__((constructor)) static void wino_cache_ctor(void) { core_frozen_drop_hook = drop_uid; }

op_wino_entry *op_wino_cache_get(const void *level, const win_geom *g, const float *w,
                                 float **u, bool *ready) {
  const kiln_tensor *t = cur_weight;
  const core_storage *s = t ? t->storage : NULL;
  if (!s || !s->frozen || !s->data || t->device != CORE_DEVICE_CPU) return NULL;
  const char *lo = s->data, *hi = lo + s->nbytes;
  size_t nbytes = (size_t)(16 * g->O * g->C) * sizeof(float); /* fits: op_conv_winograd_applies */
  size_t span = (size_t)(g->O * g->C * 9) * sizeof(float);
  if ((const char *)w < lo || (size_t)(hi - (const char *)w) < span) return NULL;
  wino_key k = {.uid = s->uid, .version = s->version, .w = w, .O = g->O, .C = g->C,
                .level = level};
  op_wino_entry *e = NULL;
  pthread_mutex_lock(&lock);
  int n = atomic_load(&n_entries);
  for (int i = 0; i < n; i++)
    if (same_key(&entries[i]->key, &k)) {
      e = entries[i];
      break;
    }
  if (e) {
    if (e->ready) { /* one being filled is a miss */
      e->pins++;
      hits++;
      *u = e->u;
      *ready = true;
    } else {
      e = NULL;
    }
    pthread_mutex_unlock(&lock);
    return e;
  }
  uint64_t h = key_hash(&k);
  bool again = false;
  for (int i = 0; i < SEEN && !again; i++) again = seen[i] == h;
  if (!again) {
    seen[seen_next] = h;
    seen_next = (seen_next + 1) % SEEN;
  }
  if (!again || n == CACHE_ENTRIES || held + nbytes > CACHE_BYTES) {
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  e = core_calloc(1, sizeof *e);
  float *buf = e ? core_block_alloc(nbytes, &e->block) : NULL;
  if (!buf) { /* not cached: the call transforms as without a cache */
    core_free(e);
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  e->key = k;
  e->u = buf;
  e->nbytes = nbytes;
  e->pins = 1;
  entries[n] = e;
  atomic_store(&n_entries, n + 1);
  held += nbytes;
  pthread_mutex_unlock(&lock);
  *u = buf;
  *ready = false;
  return e;
}

void op_wino_cache_put(op_wino_entry *e, bool filled) {
  if (!e) return;
  pthread_mutex_lock(&lock);
  if (filled) e->ready = true;
  if (--e->pins == 0) {
    if (e->dead) {
      entry_free(e);
    } else if (!e->ready) { /* a fill that failed: drop the empty entry */
      int n = atomic_load(&n_entries);
      for (int i = 0; i < n; i++)
        if (entries[i] == e) {
          remove_at(i);
          break;
        }
    }
  }
  pthread_mutex_unlock(&lock);
}

void op_wino_cache_stats(long *n_hits, int *n_held) {
  pthread_mutex_lock(&lock);
  if (n_hits) *n_hits = hits;
  if (n_held) *n_held = atomic_load(&n_entries);
  pthread_mutex_unlock(&lock);
}
