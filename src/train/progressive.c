/* Progressive validation: a ring of the last examples' scores, labels and losses. */
#include "train/progressive.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "train/evaluate.h"

struct tfx_progressive {
  size_t cap, n, at;  /* the window, examples in it, the next slot */
  float *score, *loss; /* score: cap x cols */
  int32_t *label;
  float *batch_score; /* [batch, cols] the last forward's scores */
  int batch, cols;
  int scored;          /* every batch so far had scores of cols columns (a binary or multi-label model) */
  int multi_label;     /* labels are sets: output k is scored against bit k */
  float *col;          /* [cap] one output's scores, for its AUC */
  int32_t *bit;        /* [cap] its labels (0 or 1) */
  double auc_k[TFX_PROGRESSIVE_MAX_COLS];
  char key[TFX_PROGRESSIVE_MAX_COLS][20]; /* "rolling_auc_K" */
};

/* Allocates p's buffers; nonzero when one failed. */
static int alloc(tfx_progressive *p, size_t window, int batch, int cols) {
  p->score = malloc(window * (size_t)cols * sizeof *p->score);
  p->loss = malloc(window * sizeof *p->loss);
  p->label = malloc(window * sizeof *p->label);
  p->batch_score = malloc((size_t)batch * (size_t)cols * sizeof *p->batch_score);
  p->col = malloc(window * sizeof *p->col);
  p->bit = malloc(window * sizeof *p->bit);
  return !p->score || !p->loss || !p->label || !p->batch_score || !p->col || !p->bit;
}

int tfx_progressive_create(size_t window, int batch, int cols, int multi_label, tfx_progressive **out,
                           tfx_err *err) {
  if (window < 1 || batch < 1 || cols < 1 || cols > TFX_PROGRESSIVE_MAX_COLS) {
    return tfx_err_set(err, TFX_EINVAL, "progressive validation: a window of %zu examples, batches of %d, %d scores",
                       window, batch, cols);
  }
  tfx_progressive *p = calloc(1, sizeof *p);
  if (!p || alloc(p, window, batch, cols)) {
    tfx_progressive_destroy(p);
    return tfx_err_set(err, TFX_ENOMEM, "progressive validation: out of memory for %zu examples", window);
  }
  p->cap = window;
  p->batch = batch;
  p->cols = cols;
  p->scored = 1;
  p->multi_label = multi_label;
  for (int k = 0; k < cols; k++) {
    snprintf(p->key[k], sizeof p->key[k], "rolling_auc_%d", k);
  }
  *out = p;
  return TFX_OK;
}

void tfx_progressive_destroy(tfx_progressive *p) {
  if (!p) {
    return;
  }
  free(p->score);
  free(p->loss);
  free(p->label);
  free(p->batch_score);
  free(p->col);
  free(p->bit);
  free(p);
}

void tfx_progressive_score(tfx_progressive *p, const tfx_model *m, int batch) {
  p->scored = p->scored && batch <= p->batch && tfx_model_multi_label(m) == p->multi_label &&
              tfx_model_scores(m, batch, p->batch_score) == p->cols;
}

void tfx_progressive_add(tfx_progressive *p, const int32_t *labels, int batch, double mean_loss) {
  size_t w = (size_t)p->cols;
  for (int i = 0; i < batch; i++) {
    for (size_t k = 0; k < w; k++) {
      p->score[p->at * w + k] = p->scored ? p->batch_score[(size_t)i * w + k] : 0;
    }
    p->label[p->at] = labels[i];
    p->loss[p->at] = (float)mean_loss;
    p->at = (p->at + 1) % p->cap;
    p->n += p->n < p->cap;
  }
}

/* Output k's AUC over the window: its scores against its class's bit (a multi-label model), or the scores against
 * the labels (a binary classifier). */
static double output_auc(const tfx_progressive *p, int k) {
  for (size_t i = 0; i < p->n; i++) {
    p->col[i] = p->score[i * (size_t)p->cols + (size_t)k];
    p->bit[i] = p->multi_label ? (int32_t)((tfx_label_bits(p->label[i]) >> k) & 1u) : p->label[i];
  }
  return tfx_auc(p->col, p->bit, p->n);
}

void tfx_progressive_get(const tfx_progressive *p, double *auc, double *log_loss) {
  double sum = 0, aucs = 0;
  for (size_t i = 0; i < p->n; i++) {
    sum += p->loss[i];
  }
  *log_loss = p->n ? sum / (double)p->n : NAN;
  int defined = 0;
  for (int k = 0; p->scored && p->n && k < p->cols; k++) { /* the multi-label mean as Keras's multi_label AUC */
    double a = output_auc(p, k);
    ((tfx_progressive *)p)->auc_k[k] = a; /* a cache of the window's values, for the report */
    aucs += isnan(a) ? 0 : a;
    defined += !isnan(a);
  }
  *auc = defined ? aucs / defined : NAN;
}

int tfx_progressive_report(const tfx_progressive *p, const char **names, double *vals) {
  double auc = NAN, log_loss = NAN;
  int n = 0;
  if (p) {
    tfx_progressive_get(p, &auc, &log_loss);
  }
  if (isfinite(log_loss)) {
    names[n] = "rolling_log_loss";
    vals[n++] = log_loss;
  }
  if (isfinite(auc)) {
    names[n] = "rolling_auc";
    vals[n++] = auc;
  }
  for (int k = 0; isfinite(auc) && p->multi_label && k < p->cols; k++) {
    if (isfinite(p->auc_k[k])) {
      names[n] = p->key[k];
      vals[n++] = p->auc_k[k];
    }
  }
  return n;
}
