/* Declarations private to src/data: shared between its modules, not for callers outside the folder. */
#ifndef TFX_DATA_IMPL_H
#define TFX_DATA_IMPL_H

#include "data/dataset.h"

/* A new dataset of the n examples of dim floats a reader holds: takes *x and *y (set to NULL); caller owns *out
 * (free with tfx_dataset_destroy). TFX_ENOMEM naming path when memory runs out; then nothing is taken. */
int data__dataset_take(size_t n, size_t dim, float **x, int32_t **y, const char *path, tfx_dataset **out, tfx_err *err);
/* Expands a comma-separated list of paths and glob patterns (sorted matches) into files, in order; caller owns
 * *paths (free with data__files_free). TFX_ENOTFOUND when a pattern matches nothing or no file is named. */
int data__files_expand(const char *spec, char ***paths, size_t *n, tfx_err *err);
/* Frees a list from data__files_expand; NULL does nothing. */
void data__files_free(char **paths, size_t n);

/* data.train.follow: the first regular file of dir whose name sorts after `after` (strcmp order) and does not
 * start with '.', into name[len] (*found 1), or *found 0 when none has landed yet. TFX_ENOTFOUND naming dir when it
 * cannot be read. */
int data__follow_next(const char *dir, const char *after, char *name, size_t len, int *found, tfx_err *err);
/* data__follow_next, waiting (polling every 100 ms) until such a file lands; idle(ctx) is called between polls and
 * a nonzero return stops the wait with TFX_EINTR. */
int data__follow_wait(const char *dir, const char *after, char *name, size_t len, tfx_idle_fn idle, void *ctx,
                      tfx_err *err);

#endif
