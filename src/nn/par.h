/* A small persistent worker pool for src/nn's element loops (im2col, pooling, bias and activation passes,
 * dropout, optimizer updates): the threads start once, when the pool is created, and each call splits a range
 * [0, n) into a fixed set of contiguous parts. The caller and the workers take parts from one atomic claim
 * word, so a worker that wakes late, or gets no core on a loaded machine, leaves its part to the caller
 * instead of holding it up. Between calls the workers poll for about TFX_PAR_SPIN_US (the loops around one
 * layer come back to back), then sleep on a condition variable, so that during an sgemm the cores belong to
 * OpenBLAS's threads. The parts depend only on n and the pool's size, never on who runs them, so results do
 * not depend on timing; callers that reduce split a fixed number of chunks, so theirs do not depend on the
 * thread count either. A pool is driven by one thread at a time (the model's owner); tfx_par_for is not
 * reentrant. A NULL pool, or one of 1 thread, runs everything inline. Errors: TFX_EINVAL (thread count),
 * TFX_ESYS (a thread could not start), TFX_ENOMEM. */
#ifndef TFX_PAR_H
#define TFX_PAR_H

#include <stddef.h>

#include "common/err.h"

#define TFX_PAR_MAX 8     /* threads of one pool, the caller's included */
#define TFX_PAR_SPIN_US 5 /* how long an idle worker polls before it sleeps */

typedef struct tfx_par tfx_par;

/* The work of one part: the indexes [begin, end) of the range. */
typedef void (*tfx_par_fn)(void *ctx, size_t begin, size_t end);

/* Starts a pool of `threads` threads in all (the caller's included, so threads - 1 workers; 1 starts none,
 * at most TFX_PAR_MAX); caller owns *out; free with tfx_par_destroy. */
int tfx_par_create(int threads, tfx_par **out, tfx_err *err);
/* Stops and joins the workers and frees the pool; NULL does nothing. */
void tfx_par_destroy(tfx_par *p);
/* The pool's threads, the caller's included (1 for NULL). */
int tfx_par_threads(const tfx_par *p);
/* Runs fn over [0, n) split into at most tfx_par_threads(p) contiguous parts of at least `grain` indexes
 * each (fewer parts when n is small; one part runs inline); returns when every part is done. ctx is borrowed
 * until return. */
void tfx_par_for(tfx_par *p, size_t n, size_t grain, tfx_par_fn fn, void *ctx);

#endif
