/* Dispatch on data.format. */
#include "data/source.h"

#include <stdio.h>
#include <string.h>

#include "data/columns.h"
#include "data/csv.h"
#include "data/example.h"
#include "data/idx.h"
#include "data/libsvm.h"
#include "data/stream.h"

static int load_other(const tfx_config *cfg, const char *path, size_t dim, tfx_dataset **out, tfx_err *err) {
  tfx_format f = cfg->data_format;
  if (cfg->n_features > 0) {
    if (f == TFX_FORMAT_TFRECORD) {
      return tfx_columns_load_tfrecord(cfg, path, out, err);
    }
    return f != TFX_FORMAT_CSV
               ? tfx_err_set(err, TFX_ECONFIG, "model.features: data.format %s (feature columns read csv or tfrecord)",
                             tfx_config_choice_name("data.format", f))
               : tfx_columns_load_csv(cfg, path, out, err);
  }
  if (f == TFX_FORMAT_CSV) {
    return tfx_csv_load(path, cfg->label_column, cfg->data_header, out, err);
  }
  if (f == TFX_FORMAT_LIBSVM) {
    return tfx_config_sparse_input(cfg) ? tfx_libsvm_load_sparse(path, dim, out, err)
                                        : tfx_libsvm_load(path, dim, out, err);
  }
  return tfx_example_load(path, cfg->feature_key, cfg->label_key, 1.0, out, err);
}

int tfx_dataset_load_config(const tfx_config *cfg, int eval, size_t expect_dim, tfx_dataset **out, tfx_err *err) {
  const char *images = eval ? cfg->eval_images : cfg->train_images,
             *labels = eval ? cfg->eval_labels : cfg->train_labels;
  int idx = cfg->data_format == TFX_FORMAT_IDX;
  tfx_dataset *d;
  int rc = idx ? tfx_dataset_load_idx(images, labels, cfg->data_scale, expect_dim, &d, err)
               : load_other(cfg, images, expect_dim, &d, err);
  if (rc) {
    return rc;
  }
  if (expect_dim && d->dim != expect_dim) {
    rc = tfx_err_set(err, TFX_ESHAPE, "%s: %zu values per example, the model's input takes %zu", images, d->dim,
                     expect_dim);
    tfx_dataset_destroy(d);
    return rc;
  }
  if (d->n_fields && cfg->n_features > 0) { /* feature columns: the numeric ones (x) scaled and normalized */
    for (size_t i = 0; tfx_config_numeric_features(cfg) > 0 && i < d->n * d->dim; i++) {
      d->x[i] = (float)(d->x[i] * cfg->data_scale);
    }
    tfx_dataset_normalize(d->x, d->n * d->dim, cfg->data_mean, cfg->data_std);
    *out = d;
    return TFX_OK;
  }
  if (d->n_fields && !d->x) { /* a LibSVM row: its values scaled; mean and std would densify (refused by config) */
    for (int64_t k = 0; k < d->fields[0].off[d->n]; k++) {
      d->fields[0].vals[k] = (float)(d->fields[0].vals[k] * cfg->data_scale);
    }
    *out = d;
    return TFX_OK;
  }
  for (size_t i = 0; !idx && i < d->n * d->dim; i++) {
    d->x[i] = (float)(d->x[i] * cfg->data_scale);
  }
  tfx_dataset_normalize(d->x, d->n * d->dim, cfg->data_mean, cfg->data_std);
  *out = d;
  return TFX_OK;
}

int tfx_dataset_where(const tfx_config *cfg, int eval, size_t index, char *buf, size_t len, tfx_err *err) {
  const char *file = eval ? cfg->eval_images : cfg->train_images;
  size_t line = 0;
  int rc = TFX_OK;
  switch (cfg->data_format) {
    case TFX_FORMAT_IDX:
      snprintf(buf, len, "%s: record %zu", eval ? cfg->eval_labels : cfg->train_labels, index);
      break;
    case TFX_FORMAT_TFRECORD:
      snprintf(buf, len, "%s: record %zu", file, index);
      break;
    case TFX_FORMAT_CSV: /* feature columns read a header always */
      rc = tfx_csv_line_of(file, cfg->data_header || cfg->n_features > 0, index, &line, err);
      break;
    default:
      rc = tfx_libsvm_line_of(file, index, &line, err);
  }
  if (!rc && line) {
    snprintf(buf, len, "%s: line %zu", file, line);
  }
  return rc;
}

int tfx_train_input_open(const tfx_config *cfg, int index, int count, size_t dim, tfx_dataset **data, tfx_batcher **out,
                         tfx_err *err) {
  *data = NULL;
  if (cfg->data_stream || cfg->shard_by == TFX_SHARD_BY_FILE || cfg->train_follow[0]) {
    tfx_stream *s = NULL;
    int rc = tfx_stream_open(cfg, index, count, dim, &s, err);
    return rc ? rc : tfx_batcher_create_stream(s, out, err);
  }
  if (cfg->data_format == TFX_FORMAT_IDX) {
    /* IDX: only this worker's records, as the file's bytes (converted per batch). */
    int rc = tfx_dataset_load_idx_shard(cfg->train_images, cfg->train_labels, cfg->data_scale, cfg->data_mean,
                                        cfg->data_std, dim, index, count, data, err);
    if (!rc && (rc = tfx_batcher_create_shard(*data, index, count, (uint64_t)cfg->seed, cfg->data_shuffle, out, err))) {
      tfx_dataset_destroy(*data);
      *data = NULL;
    }
    return rc;
  }
  int rc = tfx_dataset_load_config(cfg, 0, dim, data, err);
  if (!rc && (rc = tfx_batcher_create(*data, index, count, (uint64_t)cfg->seed, cfg->data_shuffle, out, err))) {
    tfx_dataset_destroy(*data);
    *data = NULL;
  }
  return rc;
}
