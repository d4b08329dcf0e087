/* Progressive validation: a ring of the last examples' scores, labels and losses. */
#include "train/progressive.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/evaluate.h"

struct tfx_progressive {
  size_t cap, n, at; /* the window, examples in it, the next slot */
  float *score, *loss;
  int32_t *label;
  float *batch_score; /* [batch] the last forward's scores */
  int batch, binary;  /* binary: every batch so far had scores */
};

int tfx_progressive_create(size_t window, int batch, tfx_progressive **out, tfx_err *err) {
  tfx_progressive *p = calloc(1, sizeof *p);
  if (window < 1 || batch < 1) {
    free(p);
    return tfx_err_set(err, TFX_EINVAL, "progressive validation: a window of %zu examples, batches of %d", window,
                       batch);
  }
  if (p) {
    p->score = malloc(window * sizeof *p->score);
    p->loss = malloc(window * sizeof *p->loss);
    p->label = malloc(window * sizeof *p->label);
    p->batch_score = malloc((size_t)batch * sizeof *p->batch_score);
  }
  if (!p || !p->score || !p->loss || !p->label || !p->batch_score) {
    tfx_progressive_destroy(p);
    return tfx_err_set(err, TFX_ENOMEM, "progressive validation: out of memory for %zu examples", window);
  }
  p->cap = window;
  p->batch = batch;
  p->binary = 1;
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
  free(p);
}

void tfx_progressive_score(tfx_progressive *p, const tfx_model *m, int batch) {
  p->binary = p->binary && batch <= p->batch && !tfx_model_multi_label(m) &&
              tfx_model_scores(m, batch, p->batch_score) == 1;
}

void tfx_progressive_add(tfx_progressive *p, const int32_t *labels, int batch, double mean_loss) {
  for (int i = 0; i < batch; i++) {
    p->score[p->at] = p->binary ? p->batch_score[i] : 0;
    p->label[p->at] = labels[i];
    p->loss[p->at] = (float)mean_loss;
    p->at = (p->at + 1) % p->cap;
    p->n += p->n < p->cap;
  }
}

void tfx_progressive_get(const tfx_progressive *p, double *auc, double *log_loss) {
  double sum = 0;
  for (size_t i = 0; i < p->n; i++) {
    sum += p->loss[i];
  }
  *log_loss = p->n ? sum / (double)p->n : NAN;
  *auc = p->binary && p->n ? tfx_auc(p->score, p->label, p->n) : NAN; /* sorts a copy */
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
  if (n) {
    names[n] = "rolling_examples";
    vals[n++] = (double)p->n;
  }
  return n;
}

size_t tfx_progressive_histogram(const tfx_progressive *p, int64_t *hist) {
  if (!p || !p->binary || !p->n) {
    return 0;
  }
  memset(hist, 0, 2 * TFX_PROGRESSIVE_BINS * sizeof *hist);
  const double per = TFX_PROGRESSIVE_BINS / (2 * TFX_PROGRESSIVE_LOGIT);
  for (size_t i = 0; i < p->n; i++) {
    double at = ((double)p->score[i] + TFX_PROGRESSIVE_LOGIT) * per; /* NaN scores fall into bin 0 */
    int bin = at >= TFX_PROGRESSIVE_BINS ? TFX_PROGRESSIVE_BINS - 1 : at > 0 ? (int)at : 0;
    hist[(p->label[i] == 1) * TFX_PROGRESSIVE_BINS + bin]++;
  }
  return p->n;
}

double tfx_progressive_histogram_auc(const int64_t *hist) {
  const int64_t *neg = hist, *pos = hist + TFX_PROGRESSIVE_BINS;
  double below = 0, n_neg = 0, n_pos = 0, wins = 0;
  for (int b = 0; b < TFX_PROGRESSIVE_BINS; b++) {
    wins += (double)pos[b] * (below + 0.5 * (double)neg[b]); /* positives above the negatives below, ties half */
    below += (double)neg[b];
    n_pos += (double)pos[b];
  }
  n_neg = below;
  return n_pos > 0 && n_neg > 0 ? wins / (n_pos * n_neg) : NAN;
}
