/* training.epochs: count the training examples, turn epochs into a step budget, lower max_steps to it. */
#include "data/epochs.h"

#include <string.h>

#include "common/log.h"
#include "data/csv.h"
#include "data/data_impl.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/libsvm.h"
#include "data/tfrecord.h"

static int count_idx(const char *images, const char *labels, int64_t *n, tfx_err *err) {
  tfx_idx_reader *r = NULL;
  int rc = tfx_idx_open(images, labels, 1.0, 0, &r, err);
  if (!rc) {
    *n = (int64_t)tfx_idx_count(r);
  }
  tfx_idx_close(r);
  return rc;
}

static int count_tfrecord(const char *path, int64_t *n, tfx_err *err) {
  tfx_tfrecord_reader *r = NULL;
  int rc = tfx_tfrecord_reader_open(path, &r, err);
  const uint8_t *data = NULL;
  size_t len = 0;
  while (!rc && !(rc = tfx_tfrecord_reader_next(r, &data, &len, err)) && data) {
  }
  if (!rc) {
    *n = (int64_t)tfx_tfrecord_reader_count(r);
  }
  tfx_tfrecord_reader_close(r);
  return rc;
}

/* The examples of one file (an IDX pair: images and labels). */
static int count_file(const tfx_config *cfg, const char *images, const char *labels, int64_t *n, tfx_err *err) {
  if (cfg->data_format == TFX_FORMAT_IDX) {
    return count_idx(images, labels, n, err);
  }
  if (cfg->data_format == TFX_FORMAT_TFRECORD) {
    return count_tfrecord(images, n, err);
  }
  if (cfg->data_format == TFX_FORMAT_CSV) {
    return tfx_csv_count(images, cfg->data_header, n, err);
  }
  return tfx_libsvm_count(images, n, err);
}

/* The streamed training set: every file of data.train.images (and, for IDX, its paired labels file). */
static int count_files(const tfx_config *cfg, int64_t *n, tfx_err *err) {
  int idx = cfg->data_format == TFX_FORMAT_IDX;
  char **images = NULL, **labels = NULL;
  size_t ni = 0, nl = 0;
  int rc = data__files_expand(cfg->train_images, &images, &ni, err);
  if (!rc && idx && !(rc = data__files_expand(cfg->train_labels, &labels, &nl, err)) && nl != ni) {
    rc = tfx_err_set(err, TFX_ECONFIG, "data.train: %zu image files but %zu label files", ni, nl);
  }
  int64_t total = 0;
  for (size_t i = 0; !rc && i < ni; i++) {
    int64_t k = 0;
    rc = count_file(cfg, images[i], idx ? labels[i] : NULL, &k, err);
    total += k;
  }
  data__files_free(images, ni);
  data__files_free(labels, nl);
  if (!rc) {
    *n = total;
  }
  return rc;
}

int tfx_data_count_examples(const tfx_config *cfg, int64_t *n, tfx_err *err) {
  if (cfg->data_stream || cfg->shard_by == TFX_SHARD_BY_FILE) {
    return count_files(cfg, n, err);
  }
  return count_file(cfg, cfg->train_images, cfg->train_labels, n, err);
}

int64_t tfx_epochs_examples_per_step(const tfx_config *cfg, int n_workers) {
  int64_t per = (int64_t)cfg->batch_size * cfg->accumulate;
  if (n_workers > 0 && cfg->mode == TFX_MODE_SYNC) {
    per *= cfg->replicas_to_aggregate > 0 ? cfg->replicas_to_aggregate : n_workers;
  }
  return per;
}

int64_t tfx_epochs_steps(int64_t epochs, int64_t examples, int64_t per_step) {
  if (epochs <= 0 || examples <= 0 || per_step <= 0) {
    return 0;
  }
  if (examples > (INT64_MAX - per_step) / epochs) {
    return INT64_MAX;
  }
  return (epochs * examples + per_step - 1) / per_step;
}

int tfx_epochs_apply(tfx_config *cfg, int n_workers, int64_t *budget, tfx_err *err) {
  if (cfg->train_follow[0] && !cfg->max_steps_given) {
    cfg->max_steps = TFX_STEPS_FOREVER; /* a followed directory: until stopped */
  }
  if (cfg->epochs <= 0) {
    *budget = 0;
    return TFX_OK;
  }
  int64_t n = 0, per = tfx_epochs_examples_per_step(cfg, n_workers);
  int rc = tfx_data_count_examples(cfg, &n, err);
  if (rc) {
    return rc;
  }
  if (n <= 0) {
    return tfx_err_set(err, TFX_ECONFIG, "training.epochs %d: the training set %s has no examples", cfg->epochs,
                       cfg->train_images);
  }
  int64_t steps = tfx_epochs_steps(cfg->epochs, n, per);
  tfx_log(TFX_LOG_INFO, "TRAIN-EPOCHS", "%d epochs of %lld examples at %lld a step: %lld steps (max_steps %lld)",
          cfg->epochs, (long long)n, (long long)per, (long long)steps, (long long)cfg->max_steps);
  if (steps < cfg->max_steps || !cfg->max_steps_given) {
    cfg->max_steps = steps; /* epochs alone decide, as Keras's fit(epochs=N); a max_steps given caps them */
  }
  *budget = steps;
  return TFX_OK;
}
