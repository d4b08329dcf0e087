/* A model ready to score (scorer.h). */
#include "cli/scorer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/init.h"
#include "nn/model.h"
#include "store/ckpt.h"
#include "store/rowindex.h"
#include "store/weights.h"

/* Every forward runs on exactly BLOCK rows (the examples, then zero or empty rows): OpenBLAS's sgemm rounds a row
 * by the batch's size and the row's place in it (its tail kernels), and on a block of 8 every place gives the same
 * bits, so an example's probabilities never depend on the examples scored with it (see scorer.h). */
#define BLOCK 8

struct tfx_scorer {
  tfx_config cfg;
  tfx_model *model;
  tfx_rowindex *rows; /* lazy tables of a checkpoint, read in place; NULL otherwise */
  int32_t *labels;    /* zeros: the loss computes the probabilities */
  float *x, *probs;   /* one block's dense rows [BLOCK, inputs] and probabilities [BLOCK, classes] */
  int64_t off[TFX_MAX_FIELDS][BLOCK + 1]; /* one block's offsets per sparse field, padded with empty rows */
  int max_batch;
  int64_t step;
  char source[1100];
};

/* The rows of lazy tables the lent block touches (their batch_ids) into their batch_vals, from the checkpoint's
 * row files, or as the ps would make it (the initializer) when the checkpoint does not hold it. */
static void fetch_rows(tfx_scorer *s, tfx_model *m) {
  for (int i = 0; i < tfx_model_nvars(m); i++) {
    tfx_var *v = tfx_model_var(m, i);
    if (!v->lazy || v->rank != 2) {
      continue;
    }
    size_t width = (size_t)v->shape[1];
    for (size_t k = 0; k < v->n_batch; k++) {
      float *row = v->batch_vals + k * width;
      if (!tfx_rowindex_get(s->rows, v->name, v->batch_ids[k], (int)width, row)) {
        tfx_init_fill(v->init, v->name, (uint64_t)s->cfg.seed, v->fan_in, v->fan_out, (size_t)v->batch_ids[k] * width,
                      width, row);
      }
    }
  }
}

/* The number of ps that wrote the checkpoint in dir (its ps-K.shard files). */
static int shard_count(const char *dir) {
  char path[1200];
  for (int k = 0; k < 4096; k++) {
    tfx_ckpt_part_path(path, sizeof path, dir, k, TFX_CKPT_SHARD);
    if (access(path, F_OK)) {
      return k;
    }
  }
  return 4096;
}

static int create(const char *cfgpath, int max_batch, tfx_scorer **out, tfx_err *err) {
  tfx_scorer *s = calloc(1, sizeof *s);
  if (!s || !(s->labels = calloc(BLOCK, sizeof(int32_t)))) {
    free(s);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  s->max_batch = max_batch;
  tfx_config_init(&s->cfg);
  int rc = tfx_config_load_saved(&s->cfg, cfgpath, err);
  if (!rc) {
    rc = tfx_model_create(&s->cfg, BLOCK, &s->model, err);
  }
  if (!rc && (!(s->x = calloc(BLOCK * tfx_model_input_size(s->model) + 1, sizeof(float))) ||
              !(s->probs = calloc(BLOCK * tfx_model_output_size(s->model), sizeof(float))))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (rc) {
    tfx_scorer_close(s);
    return rc;
  }
  *out = s;
  return TFX_OK;
}

/* Loads the checkpoint in dir: dense variables whole, lazy tables through a row index. */
static int load_checkpoint(tfx_scorer *s, const char *dir, tfx_err *err) {
  tfx_weights ws;
  int rc = tfx_weights_dense_from_checkpoint(dir, &ws, err);
  if (rc) {
    return rc;
  }
  if (!(rc = tfx_weights_load_dense(&ws, s->model, err)) &&
      !(rc = tfx_rowindex_open(dir, shard_count(dir), &s->rows, err))) {
    s->step = ws.step;
    snprintf(s->source, sizeof s->source, "%s", dir);
    tfx_model_set_rows(s->model, TFX_ROWS_BATCH); /* lazy tables: each block's rows from the row index */
  }
  tfx_weights_fini(&ws);
  return rc;
}

int tfx_scorer_open_run(const char *run_dir, const char *ckpt_dir, int max_batch, tfx_scorer **out, tfx_err *err) {
  char cfgpath[1100], dir[1100];
  int64_t step;
  snprintf(cfgpath, sizeof cfgpath, "%s/config.json", run_dir);
  int rc = TFX_OK;
  if (ckpt_dir && ckpt_dir[0]) {
    snprintf(dir, sizeof dir, "%s", ckpt_dir);
  } else {
    rc = tfx_ckpt_read_point(run_dir, &step, dir, sizeof dir, err);
  }
  tfx_scorer *s = NULL;
  if (rc || (rc = create(cfgpath, max_batch, &s, err))) {
    return rc;
  }
  if ((rc = load_checkpoint(s, dir, err))) {
    tfx_scorer_close(s);
    return rc;
  }
  *out = s;
  return TFX_OK;
}

int tfx_scorer_open_export(const char *dir, int max_batch, tfx_scorer **out, tfx_err *err) {
  char cfgpath[1100];
  snprintf(cfgpath, sizeof cfgpath, "%s/model.json", dir);
  tfx_scorer *s = NULL;
  tfx_weights ws;
  int rc = create(cfgpath, max_batch, &s, err);
  if (rc || (rc = tfx_weights_from_export(dir, &ws, err))) {
    tfx_scorer_close(s);
    return rc;
  }
  if (!(rc = tfx_weights_load_model(&ws, s->model, err))) {
    s->step = ws.step;
    snprintf(s->source, sizeof s->source, "%s", ws.source);
  }
  tfx_weights_fini(&ws);
  if (rc) {
    tfx_scorer_close(s);
    return rc;
  }
  *out = s;
  return TFX_OK;
}

const tfx_config *tfx_scorer_config(const tfx_scorer *s) {
  return &s->cfg;
}

int64_t tfx_scorer_step(const tfx_scorer *s) {
  return s->step;
}

const char *tfx_scorer_source(const tfx_scorer *s) {
  return s->source;
}

size_t tfx_scorer_inputs(const tfx_scorer *s) {
  return tfx_model_input_size(s->model);
}

size_t tfx_scorer_classes(const tfx_scorer *s) {
  return tfx_model_output_size(s->model);
}

int tfx_scorer_max_batch(const tfx_scorer *s) {
  return s->max_batch;
}

size_t tfx_scorer_lazy_rows(const tfx_scorer *s) {
  return s->rows ? tfx_rowindex_rows(s->rows) : 0;
}

size_t tfx_scorer_lazy_bytes(const tfx_scorer *s) {
  return s->rows ? tfx_rowindex_bytes(s->rows) : 0;
}

/* Forward of examples [i, i + b) of d (b <= BLOCK) as one block of BLOCK rows; the outputs stay in the model. */
static int forward_block(tfx_scorer *s, const tfx_dataset *d, size_t i, int b, int *at, tfx_err *err) {
  size_t dim = tfx_model_input_size(s->model);
  if (d->x) {
    memcpy(s->x, d->x + i * d->dim, sizeof(float) * dim * (size_t)b);
    memset(s->x + dim * (size_t)b, 0, sizeof(float) * dim * (size_t)(BLOCK - b));
  }
  tfx_csr csr[TFX_MAX_FIELDS];
  for (int f = 0; f < d->n_fields; f++) {
    for (int r = 0; r <= BLOCK; r++) {
      s->off[f][r] = d->fields[f].off[i + (size_t)(r < b ? r : b)];
    }
    csr[f] = (tfx_csr){BLOCK, s->off[f], d->fields[f].ids, d->fields[f].vals};
  }
  int rc = d->n_fields ? tfx_model_set_csr(s->model, csr, d->n_fields, err) : TFX_OK;
  if (rc) {
    return rc;
  }
  if (d->n_fields && s->rows) {
    fetch_rows(s, s->model);
  }
  tfx_model_forward(s->model, d->x ? s->x : NULL, BLOCK, 0, 0);
  return tfx_model_input_status(s->model, at, err);
}

int tfx_scorer_run(tfx_scorer *s, const tfx_dataset *d, size_t i, int b, float *probs, int *at, tfx_err *err) {
  if (b < 1 || b > s->max_batch) {
    return tfx_err_set(err, TFX_EINVAL, "a batch of %d examples (the model takes 1..%d)", b, s->max_batch);
  }
  size_t classes = tfx_model_output_size(s->model);
  for (int r = 0; r < b; r += BLOCK) {
    int n = b - r < BLOCK ? b - r : BLOCK, where = 0;
    int rc = forward_block(s, d, i + (size_t)r, n, &where, err);
    if (rc) {
      *at = r + where;
      return rc;
    }
    tfx_step_stats st;
    tfx_model_loss(s->model, s->labels, BLOCK, 0, &st);
    tfx_model_probabilities(s->model, BLOCK, s->probs);
    memcpy(probs + (size_t)r * classes, s->probs, sizeof(float) * classes * (size_t)n);
  }
  return TFX_OK;
}

void tfx_scorer_scale(const tfx_config *cfg, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(x[i] * cfg->data_scale);
  }
  tfx_dataset_normalize(x, n, cfg->data_mean, cfg->data_std);
}

void tfx_scorer_close(tfx_scorer *s) {
  if (!s) {
    return;
  }
  tfx_rowindex_close(s->rows);
  tfx_model_destroy(s->model);
  free(s->labels);
  free(s->x);
  free(s->probs);
  free(s);
}
