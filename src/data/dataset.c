/* In-memory datasets: the normalization every reader applies, and freeing one; opening a reader's file. */
#include "data/dataset.h"

#include <errno.h>
#include <stdlib.h>

#include "data/data_impl.h"

int data__file_open(const char *path, FILE **out, tfx_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "open %s", path);
  }
  *out = f;
  return TFX_OK;
}

int data__dataset_take(size_t n, size_t dim, float **x, int32_t **y, const char *path, tfx_dataset **out,
                       tfx_err *err) {
  tfx_dataset *d = calloc(1, sizeof *d);
  if (!d) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  d->n = n;
  d->dim = dim;
  d->x = *x;
  d->y = *y;
  *x = NULL;
  *y = NULL;
  *out = d;
  return TFX_OK;
}

void tfx_dataset_normalize(float *x, size_t n, double mean, double std) {
  if (mean == 0 && std == 1) {
    return;
  }
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)((x[i] - mean) / std);
  }
}

void tfx_dataset_destroy(tfx_dataset *d) {
  if (!d) {
    return;
  }
  free(d->x8);
  free(d->x);
  free(d->y);
  free(d->w);
  for (int f = 0; f < d->n_fields; f++) {
    free(d->fields[f].off);
    free(d->fields[f].ids);
    free(d->fields[f].vals);
  }
  free(d);
}
