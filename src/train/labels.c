/* Labels checked against the model when a set is loaded. */
#include "train/labels.h"

#include <limits.h>

#include "data/source.h"

int tfx_labels_check(const tfx_model *m, const tfx_config *cfg, int eval, const tfx_dataset *d, size_t first,
                     size_t stride, tfx_err *err) {
  for (size_t i = 0; i < d->n;) {
    int b = d->n - i > INT_MAX ? INT_MAX : (int)(d->n - i), at = 0;
    tfx_err e = {0};
    int rc = tfx_model_check_labels(m, d->y + i, b, &at, &e);
    if (rc) {
      char where[TFX_PATH_MAX + 64];
      tfx_err w = {0};
      size_t k = first + (i + (size_t)at) * stride;
      if (tfx_dataset_where(cfg, eval, k, where, sizeof where, &w)) {
        snprintf(where, sizeof where, "%s: example %zu", eval ? cfg->eval_images : cfg->train_images, k);
      }
      return tfx_err_set(err, rc, "%s: %s", where, e.msg);
    }
    i += (size_t)b;
  }
  return TFX_OK;
}

int tfx_labels_load(const tfx_model *m, const tfx_config *cfg, int eval, tfx_dataset **out, tfx_err *err) {
  tfx_dataset *d = NULL;
  int rc = tfx_dataset_load_config(cfg, eval, tfx_model_input_size(m), &d, err);
  if (!rc && (rc = tfx_labels_check(m, cfg, eval, d, 0, 1, err))) {
    tfx_dataset_destroy(d);
  }
  if (!rc) {
    *out = d;
  }
  return rc;
}

int tfx_labels_train_input(const tfx_model *m, const tfx_config *cfg, int index, int count, tfx_dataset **data,
                           tfx_batcher **out, tfx_err *err) {
  int rc = tfx_train_input_open(cfg, index, count, tfx_model_input_size(m), data, out, err);
  if (!rc && !*data) {
    /* streamed: each file as it is read (a multi-label model: each class of a set) */
    if ((rc = tfx_batcher_check_labels(*out, tfx_model_label_classes(m), tfx_model_multi_label(m), err))) {
      tfx_batcher_destroy(*out);
      *out = NULL;
    }
  }
  if (rc || !*data) {
    return rc;
  }
  int shard = cfg->data_format == TFX_FORMAT_IDX; /* only this worker's records, i % count == index */
  if ((rc = tfx_labels_check(m, cfg, 0, *data, shard ? (size_t)index : 0, shard ? (size_t)count : 1, err))) {
    tfx_batcher_destroy(*out);
    tfx_dataset_destroy(*data);
    *out = NULL;
    *data = NULL;
  }
  return rc;
}

int tfx_labels_check_inputs(const tfx_model *m, const tfx_config *cfg, tfx_err *err) {
  tfx_dataset *d = NULL;
  tfx_batcher *b = NULL;
  int rc = tfx_labels_train_input(m, cfg, 0, 1, &d, &b, err);
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
  d = NULL;
  if (!rc && !(rc = tfx_labels_load(m, cfg, 1, &d, err))) {
    tfx_dataset_destroy(d);
  }
  for (int i = 0; !rc && i < cfg->n_valsets; i++) {
    tfx_config vc = *cfg;
    snprintf(vc.eval_images, sizeof vc.eval_images, "%s", cfg->valsets[i].images);
    snprintf(vc.eval_labels, sizeof vc.eval_labels, "%s", cfg->valsets[i].labels);
    if (!(rc = tfx_labels_load(m, &vc, 1, &d, err))) {
      tfx_dataset_destroy(d);
    }
  }
  return rc;
}
