/* Declarations private to src/data: shared between its modules, not for callers outside the folder. */
#ifndef TFX_DATA_IMPL_H
#define TFX_DATA_IMPL_H

#include "data/dataset.h"

/* Expands a comma-separated list of paths and glob patterns (sorted matches) into files, in order; caller owns
 * *paths (free with data__free). TFX_ENOTFOUND when a pattern matches nothing or no file is named. */
int data__expand(const char *spec, char ***paths, size_t *n, tfx_err *err);
/* Frees a list from data__expand; NULL does nothing. */
void data__free(char **paths, size_t n);

#endif
