/* src/core/random.c: seeded generators (xoshiro256** seeded by splitmix64)
 * and the default generator.
 *
 * The default generator is shared by every thread (Note [Threads] in
 * include/kiln.h): each draw from it, and each read or write of its state,
 * holds default_lock, so threads drawing at once get distinct numbers of
 * the one sequence, in an order that depends on the scheduling. A
 * generator of kiln_generator_new is the caller's: one thread at a time. */
#include <math.h>
#include <pthread.h>

#include "core.h"

static kiln_generator default_gen;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;

static void seed_state(kiln_generator *g, uint64_t seed);
static void seed_default(void) { seed_state(&default_gen, 0); }

/* Locks the default generator when g is it; returns whether it did. */
static bool lock_if_default(const kiln_generator *g) {
  if (g != &default_gen) return false;
  pthread_once(&default_once, seed_default);
  pthread_mutex_lock(&default_lock);
  return true;
}

static void unlock(bool locked) {
  if (locked) pthread_mutex_unlock(&default_lock);
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void seed_state(kiln_generator *g, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
}

void kiln_generator_seed(kiln_generator *g, uint64_t seed) {
  bool locked = lock_if_default(g);
  seed_state(g, seed);
  unlock(locked);
}

kiln_generator *kiln_generator_new(uint64_t seed) {
  kiln_generator *g = core_alloc(sizeof *g);
  if (g) seed_state(g, seed);
  return g;
}

void kiln_generator_free(kiln_generator *g) { core_free(g); }

static _Thread_local kiln_generator *op_gen; /* lent to this thread's ops */

kiln_generator *core_op_generator(void) { return op_gen ? op_gen : kiln_default_generator(); }

kiln_generator *core_set_op_generator(kiln_generator *g) {
  kiln_generator *prev = op_gen;
  op_gen = g;
  return prev;
}

kiln_generator *kiln_default_generator(void) {
  pthread_once(&default_once, seed_default);
  return &default_gen;
}

void kiln_manual_seed(uint64_t seed) { kiln_generator_seed(&default_gen, seed); }

void kiln_generator_get_state(const kiln_generator *g, uint64_t s[4]) {
  bool locked = lock_if_default(g);
  for (int i = 0; i < 4; i++) s[i] = g->s[i];
  unlock(locked);
}

void kiln_generator_set_state(kiln_generator *g, const uint64_t s[4]) {
  bool locked = lock_if_default(g);
  for (int i = 0; i < 4; i++) g->s[i] = s[i];
  unlock(locked);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(kiln_generator *g) {
  uint64_t *s = g->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t core_rand_u64(kiln_generator *g) {
  if (g != &default_gen) return next_u64(g);
  bool locked = lock_if_default(g);
  uint64_t r = next_u64(g);
  unlock(locked);
  return r;
}

bool core_rand_hold(kiln_generator *g) { return lock_if_default(g); }

void core_rand_release(bool held) { unlock(held); }

double core_rand_double_held(kiln_generator *g) { return (double)(next_u64(g) >> 11) * 0x1.0p-53; }

double core_rand_double(kiln_generator *g) {
  return (double)(core_rand_u64(g) >> 11) * 0x1.0p-53;
}

/* Box-Muller; one normal per call (the second is dropped for simplicity and
 * so that the state after n draws does not depend on parity). */
double core_rand_normal(kiln_generator *g) {
  double u1 = core_rand_double(g), u2 = core_rand_double(g);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}
