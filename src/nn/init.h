/* Initializers, seeded from the experiment seed and the variable name, by element index: any process can
 * rebuild any variable, or any slice of it, and get the same numbers. Pure computation, thread-safe. */
#ifndef TFX_INIT_H
#define TFX_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Checks an initializer spec: zeros, ones, constant:V, uniform:A, normal:S, truncated_normal:S,
 * glorot_uniform, glorot_normal, he_uniform, he_normal. */
int tfx_init_check(const char *spec, tfx_err *err);
/* Writes elements [offset, offset+count) of the variable `name` initialized by spec into out. */
void tfx_init_fill(const char *spec, const char *name, uint64_t seed, int64_t fan_in, int64_t fan_out, size_t offset,
                   size_t count, float *out);
/* A 64-bit hash of a string (FNV-1a). */
uint64_t tfx_hash_str(const char *s);
/* The counter-based random stream: a uniform in [0,1) for (key, counter). */
double tfx_rand_uniform(uint64_t key, uint64_t counter);

#endif
