/* src/core/thread.c: releasing a thread's caches when the thread exits.
 *
 * Note [Thread exit]: the storage cache (cache.c), the small-object lists
 * (alloc.c) and GEMM's packing buffers (ops/sgemm.c) are thread-local, so
 * that the hot paths take no lock. A thread that used them and then exits
 * would leave them behind: up to KILN_CACHE_MB (512 MiB by default) of
 * storage per thread, for an embedder that runs kiln on short-lived
 * threads. So the first time a thread caches something it arms a pthread
 * key, whose destructor runs the registered release functions and frees the
 * thread's caches as it exits. The main thread's caches are freed at
 * process exit (cache.c's destructor); OpenMP's workers live as long as
 * the process. */
#include <pthread.h>
#include <stdatomic.h>

#include "core.h"

#define MAX_HOOKS 8

static void (*hooks[MAX_HOOKS])(void);
static atomic_int n_hooks;
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool key_ok;
static atomic_long n_released;
static _Thread_local bool armed;

static void release_thread(void *unused) {
  (void)unused;
  int n = atomic_load(&n_hooks);
  for (int i = 0; i < n; i++) hooks[i]();
  core_cache_release(); /* storage blocks and small objects */
  atomic_fetch_add(&n_released, 1);
}

static void make_key(void) { key_ok = pthread_key_create(&key, release_thread) == 0; }

void core_thread_arm(void) {
  if (armed) return;
  armed = true;
  pthread_once(&once, make_key);
  if (key_ok) pthread_setspecific(key, (void *)1);
}

int core_thread_on_exit(void (*fn)(void)) {
  int i = atomic_fetch_add(&n_hooks, 1);
  if (i >= MAX_HOOKS) {
    atomic_fetch_sub(&n_hooks, 1);
    return core_error(KILN_ERR_STATE, "core_thread_on_exit: more than %d hooks", MAX_HOOKS);
  }
  hooks[i] = fn;
  return 0;
}

long core_threads_released(void) { return atomic_load(&n_released); }
