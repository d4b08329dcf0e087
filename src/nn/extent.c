/* How large the tensors of a model's steps can get: what bounds the frames of the messages that carry them. */
#include "nn/model.h"

/* Rows of one lazy table an example may touch, for the bound: a hashed text field or a LibSVM line rarely lists
 * more ids, and a batch's unique ids are fewer than the sum. */
#define IDS_PER_EXAMPLE 1024

int tfx_model_extent(const tfx_config *cfg, size_t *largest, size_t *ids, tfx_err *err) {
  tfx_model *m = NULL;
  int rc = tfx_model_create(cfg, 1, &m, err);
  if (rc) {
    return rc;
  }
  size_t batch = (size_t)(cfg->batch_size > TFX_EVAL_BATCH ? cfg->batch_size : TFX_EVAL_BATCH), big = 0, n_ids = 0;
  for (int i = 0; i < tfx_model_nvars(m); i++) {
    const tfx_var *v = tfx_model_var(m, i);
    size_t rows = v->rank > 0 && v->shape[0] > 0 ? (size_t)v->shape[0] : 1, width = v->count / rows;
    if (v->lazy) {
      rows = rows < batch * IDS_PER_EXAMPLE ? rows : batch * IDS_PER_EXAMPLE;
      n_ids += rows;
    }
    size_t bytes = rows * width * tfx_dtype_size(v->dtype);
    big = bytes > big ? bytes : big;
  }
  tfx_model_destroy(m);
  *largest = big;
  *ids = n_ids;
  return TFX_OK;
}
