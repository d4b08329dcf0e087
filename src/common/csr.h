/* A batch of sparse examples in compressed sparse rows (CSR): example r holds the ids ids[off[r]..off[r+1]) with
 * their weights vals[...] (NULL: every weight 1). The producer (a batcher, a dataset slice) owns the arrays; a
 * consumer (an embedding bag) only reads them until the next batch. Offsets are absolute: a slice of a whole
 * dataset points into its arrays with off[0] > 0. */
#ifndef TFX_CSR_H
#define TFX_CSR_H

#include <stdint.h>

typedef struct tfx_csr {
  int n;              /* examples */
  const int64_t *off; /* [n + 1], ascending */
  const int64_t *ids; /* feature ids (rows of a table) */
  const float *vals;  /* per-id weights, or NULL */
} tfx_csr;

#endif
