/* Whole-dataset evaluation. */
#include "train/evaluate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "train/classes.h"
#include "train/recall.h"

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

/* A float's bits as an unsigned key in the float's order (negatives flipped whole, positives above them). */
static uint32_t order_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* Sorts s[0..n) by score, ascending, with tmp (n places) as scratch: four counting passes of a byte each
 * (an LSD radix sort: a window's AUC at every report costs a few passes, not a comparison sort). */
static void sort_scored(scored *s, scored *tmp, size_t n) {
  for (int shift = 0; shift < 32; shift += 8) {
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) {
      count[((order_key(s[i].score) >> shift) & 0xffu) + 1]++;
    }
    for (int b = 0; b < 256; b++) {
      count[b + 1] += count[b];
    }
    for (size_t i = 0; i < n; i++) {
      tmp[count[(order_key(s[i].score) >> shift) & 0xffu]++] = s[i];
    }
    memcpy(s, tmp, n * sizeof *s);
  }
}

double tfx_auc(float *scores, int32_t *labels, size_t n) {
  scored *s = malloc(2 * sizeof *s * (n ? n : 1));
  if (!s) {
    return NAN;
  }
  for (size_t i = 0; i < n; i++) {
    s[i] = (scored){scores[i], labels[i]};
  }
  sort_scored(s, s + n, n);
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

/* Each output's AUC of a multi-label model into r->auc_k and their mean into r->auc; TFX_ENOMEM leaves none. */
static void output_aucs(const float *scores, const int32_t *labels, size_t n, int cols, tfx_eval_result *r) {
  float *col = malloc(sizeof(float) * (n ? n : 1));
  int32_t *bit = malloc(sizeof(int32_t) * (n ? n : 1));
  double sum = 0;
  int defined = 0;
  for (int k = 0; col && bit && k < cols && k < TFX_EVAL_MAX_CLASSES; k++) {
    for (size_t i = 0; i < n; i++) {
      col[i] = scores[i * (size_t)cols + (size_t)k];
      bit[i] = (int32_t)((tfx_label_bits(labels[i]) >> k) & 1u);
    }
    r->auc_k[k] = tfx_auc(col, bit, n);
    r->n_auc = k + 1;
    sum += isnan(r->auc_k[k]) ? 0 : r->auc_k[k];
    defined += !isnan(r->auc_k[k]);
  }
  r->auc = defined ? sum / defined : NAN;
  free(col);
  free(bit);
}

void tfx_eval_auc(const float *scores, const int32_t *labels, size_t n, int cols, tfx_eval_result *r) {
  r->auc = NAN;
  r->n_auc = 0;
  r->scored = cols;
  if (cols == 1) {
    r->auc = tfx_auc((float *)scores, (int32_t *)labels, n); /* sorts a copy: both stay as they are */
  } else if (cols > 1) {
    output_aucs(scores, labels, n, cols, r);
  }
  r->has_auc = !isnan(r->auc);
}

int tfx_evaluate(tfx_model *m, const tfx_dataset *d, int batch, tfx_eval_result *out, tfx_err *err) {
  return tfx_evaluate_range(m, d, batch, 0, d->n, NULL, out, err);
}

void tfx_eval_slice(size_t n, int index, int count, size_t *lo, size_t *hi) {
  *lo = n * (size_t)index / (size_t)count;
  *hi = n * (size_t)(index + 1) / (size_t)count;
}

/* Counts batch b's predicted classes (pred: room for b) into r's confusion matrix. */
static void count_classes(const tfx_model *m, const int32_t *labels, int b, int32_t *pred, tfx_eval_result *r) {
  if (r->classes && tfx_model_predictions(m, b, pred)) {
    tfx_confusion_add(r, labels, pred, b);
  }
}

/* Sums of examples [lo, hi) into acc (its confusion matrix started), their scores (hi - lo rows of the score
 * columns; NULL: none kept) and the AUC they give. */
static int score_range(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, float *scores,
                       const tfx_pmetrics *pm, int32_t *pred, double sums[3], tfx_eval_result *acc, tfx_err *err) {
  size_t w = tfx_model_multi_label(m) ? tfx_model_output_size(m) : 1; /* score columns an example */
  int cols = scores ? (int)w : 0;
  for (size_t i = lo; i < hi; i += (size_t)batch) {
    int b = (int)(hi - i < (size_t)batch ? hi - i : (size_t)batch);
    tfx_step_stats st;
    int rc = eval_batch(m, d, i, b, &st, err);
    if (rc) {
      return rc;
    }
    cols = cols && tfx_model_scores(m, b, scores + (i - lo) * w) ? cols : 0;
    count_classes(m, d->y + i, b, pred, acc);
    tfx_recall_add(m, d->y + i, b, acc);
    tfx_pmetrics_update(pm, &acc->pm, m, d->y + i, d->w ? d->w + i : NULL, b, 0);
    sums[0] += st.loss * b;
    sums[1] += (double)st.correct;
    sums[2] += (double)st.top5;
  }
  tfx_eval_auc(scores, d->y + lo, hi - lo, cols, acc);
  return TFX_OK;
}

int tfx_evaluate_range(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, const tfx_pmetrics *pm,
                       tfx_eval_result *out, tfx_err *err) {
  size_t n = hi - lo;
  float *scores = malloc(sizeof(float) * (n ? n : 1) * tfx_model_output_size(m));
  int rc = tfx_evaluate_scored(m, d, batch, lo, hi, scores, pm, out, err);
  free(scores);
  return rc;
}

int tfx_evaluate_scored(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, float *scores,
                        const tfx_pmetrics *pm, tfx_eval_result *out, tfx_err *err) {
  size_t n = hi - lo;
  int32_t *pred = malloc(sizeof(int32_t) * (size_t)batch);
  tfx_eval_result *acc = malloc(sizeof *acc);
  double sums[3] = {0, 0, 0};
  int rc = pred && acc ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  if (!rc) {
    tfx_confusion_init(acc, tfx_model_predictions(m, 0, NULL), tfx_model_multi_label(m)); /* 0: a regression */
    tfx_pm_state_init(pm, &acc->pm);
    tfx_recall_init(m, acc);
    rc = score_range(m, d, batch, lo, hi, scores, pm, pred, sums, acc, err);
  }
  if (!rc) {
    acc->examples = n;
    acc->loss = n ? sums[0] / (double)n : 0;
    acc->accuracy = n ? sums[1] / (double)n : 0;
    acc->top5 = n ? sums[2] / (double)n : 0;
    acc->top_k = tfx_model_top_k(m);
    tfx_recall_finish(acc, n);
    *out = *acc;
  }
  free(pred);
  free(acc);
  return rc;
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

/* Folds examples [0, n) of d batch by batch into acc by aggs (per-batch loss, accuracy, top-K) and counts their
 * classes into out's confusion matrix (started). */
static int fold_batches(tfx_model *m, const tfx_dataset *d, int batch, size_t n, char aggs[3][8], double acc[3],
                        const tfx_pmetrics *pm, int32_t *pred, tfx_eval_result *out, tfx_err *err) {
  for (size_t i = 0; i < n; i += (size_t)batch) {
    int b = (int)(n - i < (size_t)batch ? n - i : (size_t)batch);
    tfx_step_stats st;
    int rc = eval_batch(m, d, i, b, &st, err);
    if (rc) {
      return rc;
    }
    count_classes(m, d->y + i, b, pred, out);
    tfx_pmetrics_update(pm, &out->pm, m, d->y + i, d->w ? d->w + i : NULL, b, 0);
    double vals[3] = {st.loss, (double)st.correct / b, (double)st.top5 / b};
    for (int k = 0; k < 3; k++) {
      fold(aggs[k], &acc[k], vals[k] * (strcmp(aggs[k], "mean") ? 1.0 : (double)b), i == 0);
    }
  }
  for (int k = 0; k < 3; k++) {
    acc[k] = !strcmp(aggs[k], "mean") && n ? acc[k] / (double)n : acc[k];
  }
  return TFX_OK;
}

int tfx_evaluate_agg(tfx_model *m, const tfx_dataset *d, int batch, size_t max_examples, const char *agg,
                     const tfx_pmetrics *pm, tfx_eval_result *out, tfx_err *err) {
  size_t n = max_examples && max_examples < d->n ? max_examples : d->n;
  char aggs[3][8];
  agg_for(agg, "loss", aggs[0]);
  agg_for(agg, "accuracy", aggs[1]);
  agg_for(agg, "top_", aggs[2]);
  double acc[3] = {0, 0, 0};
  int32_t *pred = malloc(sizeof(int32_t) * (size_t)batch);
  if (!pred) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  /* counts are whole-set sums whatever agg says */
  tfx_confusion_init(out, tfx_model_predictions(m, 0, NULL), tfx_model_multi_label(m));
  tfx_pm_state_init(pm, &out->pm);
  int rc = fold_batches(m, d, batch, n, aggs, acc, pm, pred, out, err);
  free(pred);
  if (rc) {
    return rc;
  }
  out->examples = n;
  out->auc = NAN;
  out->has_auc = 0; /* per-batch aggregation has no AUC */
  out->n_auc = 0;
  out->scored = 0;
  out->ranked = 0; /* recall@K is counted over whole sets only */
  out->loss = acc[0];
  out->accuracy = acc[1];
  out->top5 = acc[2];
  out->top_k = tfx_model_top_k(m);
  return TFX_OK;
}

/* Appends the field `name` (copied into the report's text) with value v, when v is defined and there is room
 * (one place stays for examples). */
static void add_field(tfx_eval_report *out, const char *name, size_t len, double v) {
  if (isnan(v) || out->n >= TFX_EVAL_MAX_FIELDS - 1) {
    return;
  }
  snprintf(out->text[out->n], sizeof out->text[0], "%.*s", (int)len, name);
  out->names[out->n] = out->text[out->n];
  out->values[out->n++] = v;
}

/* Appends the per-class metric p[0..len) (precision, recall, f1, their _K, per_class) of r; 0 when p is none. */
static int add_class_fields(tfx_eval_report *out, const char *p, size_t len, const tfx_eval_result *r) {
  double v;
  if (tfx_class_metric_named(r, p, len, &v)) {
    add_field(out, p, len, v);
    return 1;
  }
  int k = len > 4 && len <= 6 && !strncmp(p, "auc_", 4) ? atoi(p + 4) : -1;
  if (k >= 0) {
    add_field(out, p, len, k < r->n_auc ? r->auc_k[k] : NAN);
    return 1;
  }
  if (len != 9 || strncmp(p, "per_class", 9)) {
    return 0;
  }
  for (k = 0; k < r->n_auc; k++) { /* a multi-label model's AUC of each output */
    char name[24];
    add_field(out, name, (size_t)snprintf(name, sizeof name, "auc_%d", k), r->auc_k[k]);
  }
  static const char *const stats[] = {"precision", "recall", "f1"};
  for (k = 0; k < r->classes; k++) {
    for (int i = 0; i < 3; i++) {
      char name[24];
      int n = snprintf(name, sizeof name, "%s_%d", stats[i], k);
      add_field(out, name, (size_t)n, tfx_class_metric(r, (tfx_class_stat)i, k));
    }
  }
  return 1;
}

void tfx_eval_report_init(tfx_eval_report *out, const char *metrics, const tfx_eval_result *r) {
  out->n = 0;
  for (const char *p = metrics; *p && out->n < TFX_EVAL_MAX_FIELDS - 1;) {
    size_t len = strcspn(p, ",:");
    double v;
    if (tfx_recall_named(r, p, len, &v)) {
      add_field(out, p, len, v);
    } else if (add_class_fields(out, p, len, r)) {
    } else if (len == 4 && !strncmp(p, "loss", 4)) {
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

void tfx_eval_report_add_plugin(tfx_eval_report *out, const tfx_pmetrics *pm, const tfx_eval_result *r,
                                const char *what) {
  int room = TFX_EVAL_MAX_FIELDS - 1 - out->n; /* one place stays for a caller's field */
  out->n += room > 0 ? tfx_pmetrics_values(pm, &r->pm, what, out->names + out->n, out->values + out->n, room) : 0;
}

/* Whether the comma-separated list names `name` (each entry possibly with ":agg"). */
static int names_metric(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",:");
    if (len == n && !strncmp(p, name, n)) {
      return 1;
    }
    p += strcspn(p, ",");
    p += *p == ',';
  }
  return 0;
}

char *tfx_eval_confusion_json(const char *metrics, const tfx_eval_result *r) {
  if (!r->classes || !names_metric(metrics, "confusion")) {
    return NULL;
  }
  int cols = tfx_confusion_cols(r);
  size_t cap = 64 + (size_t)r->classes * ((size_t)cols * 20 + 4), len = 0;
  char *s = malloc(cap);
  if (!s) {
    return NULL;
  }
  len += (size_t)snprintf(s, cap, "\"confusion_classes\": %d, \"confusion\": [", r->classes);
  for (int i = 0; i < r->classes; i++) {
    len += (size_t)snprintf(s + len, cap - len, "%s[", i ? ", " : "");
    for (int j = 0; j < cols; j++) {
      len += (size_t)snprintf(s + len, cap - len, "%s%.0f", j ? ", " : "", r->confusion[i][j]);
    }
    len += (size_t)snprintf(s + len, cap - len, "]");
  }
  snprintf(s + len, cap - len, "]");
  return s;
}

const char *tfx_valset_metrics(const tfx_valset *v, const char *model_metrics) {
  return strchr(v->agg, ':') ? v->agg : model_metrics;
}
