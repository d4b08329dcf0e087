/* Counter-based random numbers and a string hash: pure functions of their arguments (no state), so any process
 * can recompute any draw (initializers, shuffles, sampling). Thread-safe; no errors. */
#ifndef TFX_RAND_H
#define TFX_RAND_H

#include <stdint.h>

/* The splitmix64 finalizer: a well-mixed 64-bit function of x. */
uint64_t tfx_rand_mix(uint64_t x);
/* A 64-bit hash of a string (FNV-1a). */
uint64_t tfx_hash_str(const char *s);
/* The counter-based random stream: a uniform in [0,1) for (key, counter). */
double tfx_rand_uniform(uint64_t key, uint64_t counter);

#endif
