/* Counter-based random numbers: any process gets the same number for the same key and counter. */
#include "common/rand.h"

uint64_t tfx_rand_mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t tfx_hash_str(const char *s) {
  uint64_t h = 14695981039346656037ULL;
  for (; *s; s++) {
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  }
  return h;
}

double tfx_rand_uniform(uint64_t key, uint64_t counter) {
  return (double)(tfx_rand_mix(key ^ tfx_rand_mix(counter)) >> 11) * (1.0 / 9007199254740992.0);
}
