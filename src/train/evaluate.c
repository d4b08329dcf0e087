/* Whole-dataset evaluation. */
#include "train/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfx_forward_examples(tfx_model *m, const tfx_dataset *d, size_t i, int b, int *at, tfx_err *err) {
  tfx_csr csr[TFX_MAX_FIELDS];
  if (d->n_fields) { /* sparse examples: views of the set's own arrays */
    tfx_dataset_csr(d, i, b, csr);
    int rc = tfx_model_set_csr(m, csr, d->n_fields, err);
    if (rc) {
      return rc;
    }
  }
  tfx_model_forward(m, d->x ? d->x + i * d->dim : NULL, b, 0, 0);
  return tfx_model_input_status(m, at, err);
}

/* Forward and loss of examples [i, i + b) of d; TFX_EINVAL naming the example (its index in d, from 0) and the
 * label outside the classes or the embedding id outside its table (which tfx_model_loss would skip without a word). */
static int eval_batch(tfx_model *m, const tfx_dataset *d, size_t i, int b, tfx_step_stats *st, tfx_err *err) {
  tfx_err e = {0};
  int at = 0;
  int rc = tfx_model_check_labels(m, d->y + i, b, &at, &e);
  if (!rc) {
    rc = tfx_forward_examples(m, d, i, b, &at, &e);
  }
  if (rc) {
    return tfx_err_set(err, rc, "example %zu: %s", i + (size_t)at, e.msg);
  }
  tfx_model_loss(m, d->y + i, b, 0, st);
  return TFX_OK;
}

typedef struct scored {
  float score;
  int32_t label;
} scored;

static int cmp_scored(const void *a, const void *b) {
  float x = ((const scored *)a)->score, y = ((const scored *)b)->score;
  return (x > y) - (x < y);
}

double tfx_auc(float *scores, int32_t *labels, size_t n) {
  scored *s = malloc(sizeof *s * (n ? n : 1));
  if (!s) {
    return NAN;
  }
  for (size_t i = 0; i < n; i++) {
    s[i] = (scored){scores[i], labels[i]};
  }
  qsort(s, n, sizeof *s, cmp_scored);
  double pos = 0, rank_sum = 0;
  for (size_t i = 0, j; i < n; i = j) {
    double pos_here = 0;
    for (j = i; j < n && s[j].score == s[i].score; j++) {
      pos_here += s[j].label == 1;
    }
    rank_sum += pos_here * (double)(i + 1 + j) / 2.0; /* ranks i+1 .. j share their mean */
    pos += pos_here;
  }
  free(s);
  double neg = (double)n - pos;
  return pos > 0 && neg > 0 ? (rank_sum - pos * (pos + 1) / 2) / (pos * neg) : NAN;
}

int tfx_evaluate(tfx_model *m, const tfx_dataset *d, int batch, tfx_eval_result *out, tfx_err *err) {
  return tfx_evaluate_range(m, d, batch, 0, d->n, out, err);
}

void tfx_eval_slice(size_t n, int index, int count, size_t *lo, size_t *hi) {
  *lo = n * (size_t)index / (size_t)count;
  *hi = n * (size_t)(index + 1) / (size_t)count;
}

int tfx_evaluate_range(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, tfx_eval_result *out,
                       tfx_err *err) {
  double loss = 0;
  size_t correct = 0, top5 = 0, n = hi - lo;
  float *scores = malloc(sizeof(float) * (n ? n : 1));
  int binary = scores != NULL;
  for (size_t i = lo; i < hi; i += (size_t)batch) {
    int b = (int)(hi - i < (size_t)batch ? hi - i : (size_t)batch);
    tfx_step_stats st;
    int rc = eval_batch(m, d, i, b, &st, err);
    if (rc) {
      free(scores);
      return rc;
    }
    binary = binary && tfx_model_scores(m, b, scores + (i - lo));
    loss += st.loss * b;
    correct += (size_t)st.correct;
    top5 += (size_t)st.top5;
  }
  out->auc = binary ? tfx_auc(scores, d->y + lo, n) : NAN; /* sorts a copy: d stays as it is */
  out->has_auc = !isnan(out->auc);
  free(scores);
  out->examples = n;
  out->loss = n ? loss / (double)n : 0;
  out->accuracy = n ? (double)correct / (double)n : 0;
  out->top5 = n ? (double)top5 / (double)n : 0;
  out->top_k = tfx_model_top_k(m);
  return TFX_OK;
}

static void fold(const char *agg, double *acc, double v, int first) {
  if (first) {
    *acc = v;
  } else if (!strcmp(agg, "min")) {
    *acc = v < *acc ? v : *acc;
  } else if (!strcmp(agg, "max")) {
    *acc = v > *acc ? v : *acc;
  } else {
    *acc += v;
  }
}

/* The aggregation agg gives metric (loss, accuracy, top): the one for all, its own, or mean if unlisted. */
static void agg_for(const char *agg, const char *metric, char out[8]) {
  snprintf(out, 8, "%s", strchr(agg, ':') ? "mean" : agg);
  size_t m = strlen(metric);
  for (const char *p = agg; strchr(agg, ':') && *p;) {
    size_t n = strcspn(p, ","), k = strcspn(p, ":");
    if (k < n && k >= m && !strncmp(p, metric, m) && (k == m || metric[m - 1] == '_')) {
      snprintf(out, 8, "%.*s", (int)(n - k - 1), p + k + 1);
    }
    p += n + (p[n] == ',');
  }
}

int tfx_evaluate_agg(tfx_model *m, const tfx_dataset *d, int batch, size_t max_examples, const char *agg,
                     tfx_eval_result *out, tfx_err *err) {
  size_t n = max_examples && max_examples < d->n ? max_examples : d->n;
  char aggs[3][8];
  agg_for(agg, "loss", aggs[0]);
  agg_for(agg, "accuracy", aggs[1]);
  agg_for(agg, "top_", aggs[2]);
  double acc[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i += (size_t)batch) {
    int b = (int)(n - i < (size_t)batch ? n - i : (size_t)batch);
    tfx_step_stats st;
    int rc = eval_batch(m, d, i, b, &st, err);
    if (rc) {
      return rc;
    }
    double vals[3] = {st.loss, (double)st.correct / b, (double)st.top5 / b};
    for (int k = 0; k < 3; k++) {
      fold(aggs[k], &acc[k], vals[k] * (strcmp(aggs[k], "mean") ? 1.0 : (double)b), i == 0);
    }
  }
  for (int k = 0; k < 3; k++) {
    acc[k] = !strcmp(aggs[k], "mean") && n ? acc[k] / (double)n : acc[k];
  }
  out->examples = n;
  out->auc = NAN;
  out->has_auc = 0; /* per-batch aggregation has no AUC */
  out->loss = acc[0];
  out->accuracy = acc[1];
  out->top5 = acc[2];
  out->top_k = tfx_model_top_k(m);
  return TFX_OK;
}

void tfx_eval_report_init(tfx_eval_report *out, const char *metrics, const tfx_eval_result *r) {
  out->n = 0;
  for (const char *p = metrics; *p && out->n < TFX_EVAL_MAX_FIELDS - 1;) {
    size_t len = strcspn(p, ",:");
    if (len == 4 && !strncmp(p, "loss", 4)) {
      out->names[out->n] = "loss";
      out->values[out->n++] = r->loss;
    } else if (len == 8 && !strncmp(p, "accuracy", 8)) {
      out->names[out->n] = "accuracy";
      out->values[out->n++] = r->accuracy;
    } else if (len == 3 && !strncmp(p, "auc", 3)) {
      if (r->has_auc) {
        out->names[out->n] = "auc";
        out->values[out->n++] = r->auc;
      }
    } else if (len == 8 && !strncmp(p, "log_loss", 8)) {
      out->names[out->n] = "log_loss";
      out->values[out->n++] = r->loss;
    } else if (len > 4 && !strncmp(p, "top_", 4)) {
      snprintf(out->text[out->n], sizeof out->text[0], "top%d_accuracy", r->top_k);
      out->names[out->n] = out->text[out->n];
      out->values[out->n++] = r->top5;
    }
    p += strcspn(p, ",");
    p += *p == ',';
  }
  out->names[out->n] = "examples";
  out->values[out->n++] = (double)r->examples;
}

const char *tfx_valset_metrics(const tfx_valset *v, const char *model_metrics) {
  return strchr(v->agg, ':') ? v->agg : model_metrics;
}
