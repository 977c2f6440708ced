/* src/core/random.c: seeded generators (xoshiro256** seeded by splitmix64)
 * and the default generator. */
#include <math.h>

#include "core.h"

static kiln_generator default_gen;
static bool default_seeded;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void kiln_generator_seed(kiln_generator *g, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
}

kiln_generator *kiln_generator_new(uint64_t seed) {
  kiln_generator *g = core_alloc(sizeof *g);
  if (g) kiln_generator_seed(g, seed);
  return g;
}

void kiln_generator_free(kiln_generator *g) { core_free(g); }

kiln_generator *kiln_default_generator(void) {
  if (!default_seeded) {
    kiln_generator_seed(&default_gen, 0);
    default_seeded = true;
  }
  return &default_gen;
}

void kiln_manual_seed(uint64_t seed) {
  kiln_generator_seed(&default_gen, seed);
  default_seeded = true;
}

void kiln_generator_get_state(const kiln_generator *g, uint64_t s[4]) {
  for (int i = 0; i < 4; i++) s[i] = g->s[i];
}

void kiln_generator_set_state(kiln_generator *g, const uint64_t s[4]) {
  for (int i = 0; i < 4; i++) g->s[i] = s[i];
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t core_rand_u64(kiln_generator *g) {
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
