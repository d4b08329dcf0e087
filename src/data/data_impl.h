/* Declarations private to src/data: shared between its modules, not for callers outside the folder. */
#ifndef TFX_DATA_IMPL_H
#define TFX_DATA_IMPL_H

#include "data/dataset.h"

/* Expands a comma-separated list of paths and glob patterns (sorted matches) into files, in order; caller owns
 * *paths (free with tfx_data_files_free). TFX_ENOTFOUND when a pattern matches nothing or no file is named. */
int tfx_data_files_expand(const char *spec, char ***paths, size_t *n, tfx_err *err);
/* Frees a list from tfx_data_files_expand; NULL does nothing. */
void tfx_data_files_free(char **paths, size_t n);

#endif
