/* Initializers, seeded from the experiment seed and the variable name, by element index: any process can
 * rebuild any variable, or any slice of it, and get the same numbers. Pure computation, thread-safe. */
#ifndef TFX_INIT_H
#define TFX_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/rand.h"

/* Checks an initializer spec: zeros, ones, constant:V, uniform:A, normal:S, truncated_normal:S,
 * glorot_uniform, glorot_normal, he_uniform, he_normal. */
int tfx_init_check(const char *spec, tfx_err *err);
/* Writes elements [offset, offset+count) of the variable `name` initialized by spec into out. */
void tfx_init_fill(const char *spec, const char *name, uint64_t seed, int64_t fan_in, int64_t fan_out, size_t offset,
                   size_t count, float *out);

#endif
