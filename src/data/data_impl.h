/* Declarations private to src/data: shared between its modules, not for callers outside the folder. */
#ifndef TFX_DATA_IMPL_H
#define TFX_DATA_IMPL_H

#include "dataset.h"

/* Records the batcher's first error (later ones are dropped) for tfx_batcher_status to report. */
void tfx_batcher_fail(tfx_batcher *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
