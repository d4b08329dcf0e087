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

/* A pass: where it is in its span, the lent batch, and the sums so far. */
struct tfx_eval_pass {
  tfx_model *m;
  const tfx_dataset *d;
  tfx_eval_span span;
  size_t next;  /* the first example of the next batch */
  int lent;     /* examples in the batch lent last and not yet scored (0: none) */
  size_t width; /* score columns an example */
  int cols;     /* score columns kept (0: none, no AUC) */
  float *own;   /* the scores when span.scores is NULL */
  int32_t *pred;
  char aggs[3][8];
  double sums[3];
  tfx_csr csr[TFX_MAX_FIELDS]; /* the lent batch's sparse fields, lent to the model until it is scored */
  tfx_eval_result acc;
};

int tfx_eval_pass_create(tfx_model *m, const tfx_dataset *d, const tfx_eval_span *span, tfx_eval_pass **out,
                         tfx_err *err) {
  tfx_eval_pass *p = calloc(1, sizeof *p);
  size_t n = span->hi > span->lo ? span->hi - span->lo : 0;
  int keep = !span->agg && !span->scores;
  if (!p || !(p->pred = malloc(sizeof(int32_t) * (size_t)span->batch)) ||
      (keep && !(p->own = malloc(sizeof(float) * (n ? n : 1) * tfx_model_output_size(m))))) {
    tfx_eval_pass_destroy(p);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  p->m = m;
  p->d = d;
  p->span = *span;
  p->span.scores = span->agg ? NULL : span->scores ? span->scores : p->own;
  p->next = span->lo;
  p->width = tfx_model_multi_label(m) ? tfx_model_output_size(m) : 1;
  p->cols = p->span.scores ? (int)p->width : 0;
  static const char *const metrics[3] = {"loss", "accuracy", "top_"};
  for (int k = 0; span->agg && k < 3; k++) {
    agg_for(span->agg, metrics[k], p->aggs[k]);
  }
  /* counts are whole-set sums whatever agg says */
  tfx_confusion_init(&p->acc, tfx_model_predictions(m, 0, NULL), tfx_model_multi_label(m)); /* 0: a regression */
  tfx_pm_state_init(span->pm, &p->acc.pm);
  if (!span->agg) {
    tfx_recall_init(m, &p->acc); /* recall@K is counted over whole sets only */
  }
  *out = p;
  return TFX_OK;
}

void tfx_eval_pass_destroy(tfx_eval_pass *p) {
  if (p) {
    free(p->pred);
    free(p->own);
    free(p);
  }
}

int tfx_eval_pass_next(tfx_eval_pass *p, int *lent, tfx_err *err) {
  size_t i = p->next, hi = p->span.hi;
  int b = (int)(hi - i < (size_t)p->span.batch ? hi - i : (size_t)p->span.batch), at = 0;
  tfx_err e = {0};
  p->lent = *lent = 0;
  if (i >= hi) {
    return TFX_OK;
  }
  int rc = tfx_model_check_labels(p->m, p->d->y + i, b, &at, &e);
  if (!rc && p->d->n_fields) { /* sparse examples: views of the set's own arrays */
    tfx_dataset_csr(p->d, i, b, p->csr);
    rc = tfx_model_set_csr(p->m, p->csr, p->d->n_fields, &e);
  }
  if (rc) {
    return tfx_err_set(err, rc, "example %zu: %s", i + (size_t)at, e.msg);
  }
  p->lent = *lent = b;
  return TFX_OK;
}

/* Adds the scored batch [i, i + b) to the pass's sums (example-weighted) or folds (agg). */
static void add_batch(tfx_eval_pass *p, size_t i, int b, const tfx_step_stats *st) {
  if (!p->span.agg) {
    p->sums[0] += st->loss * b;
    p->sums[1] += (double)st->correct;
    p->sums[2] += (double)st->top5;
    return;
  }
  double vals[3] = {st->loss, (double)st->correct / b, (double)st->top5 / b};
  for (int k = 0; k < 3; k++) {
    fold(p->aggs[k], &p->sums[k], vals[k] * (strcmp(p->aggs[k], "mean") ? 1.0 : (double)b), i == p->span.lo);
  }
}

int tfx_eval_pass_score(tfx_eval_pass *p, tfx_err *err) {
  tfx_model *m = p->m;
  const tfx_dataset *d = p->d;
  size_t i = p->next;
  int b = p->lent, at = 0;
  tfx_err e = {0};
  if (!b) {
    return tfx_err_set(err, TFX_ESTATE, "evaluation: no batch lent to score");
  }
  tfx_model_forward(m, d->x ? d->x + i * d->dim : NULL, b, 0, 0);
  int rc = tfx_model_input_status(m, &at, &e);
  if (rc) {
    return tfx_err_set(err, rc, "example %zu: %s", i + (size_t)at, e.msg);
  }
  tfx_step_stats st;
  tfx_model_loss(m, d->y + i, b, 0, &st);
  p->cols = p->cols && tfx_model_scores(m, b, p->span.scores + (i - p->span.lo) * p->width) ? p->cols : 0;
  count_classes(m, d->y + i, b, p->pred, &p->acc);
  if (!p->span.agg) {
    tfx_recall_add(m, d->y + i, b, &p->acc);
  }
  tfx_pmetrics_update(p->span.pm, &p->acc.pm, m, d->y + i, d->w ? d->w + i : NULL, b, 0);
  add_batch(p, i, b, &st);
  p->next += (size_t)b;
  p->lent = 0;
  return TFX_OK;
}

void tfx_eval_pass_result(tfx_eval_pass *p, tfx_eval_result *out) {
  size_t n = p->span.hi > p->span.lo ? p->span.hi - p->span.lo : 0;
  tfx_eval_result *r = &p->acc;
  double v[3];
  for (int k = 0; k < 3; k++) {
    int mean = !p->span.agg || !strcmp(p->aggs[k], "mean");
    v[k] = mean && n ? p->sums[k] / (double)n : p->sums[k];
  }
  if (p->span.agg) {
    r->auc = NAN;
    r->has_auc = 0; /* per-batch aggregation has no AUC */
    r->n_auc = 0;
    r->scored = 0;
    r->ranked = 0;
  } else {
    tfx_eval_auc(p->span.scores, p->d->y + p->span.lo, n, p->cols, r);
    tfx_recall_finish(r, n);
  }
  r->examples = n;
  r->loss = v[0];
  r->accuracy = v[1];
  r->top5 = v[2];
  r->top_k = tfx_model_top_k(p->m);
  *out = *r;
}

/* A whole pass over the span, the rows of lazy tables from the model's own tables (tfx_model_gather_rows). */
static int evaluate_local(tfx_model *m, const tfx_dataset *d, const tfx_eval_span *span, tfx_eval_result *out,
                          tfx_err *err) {
  tfx_eval_pass *p = NULL;
  int lent = 0, rc = tfx_eval_pass_create(m, d, span, &p, err);
  while (!rc && !(rc = tfx_eval_pass_next(p, &lent, err)) && lent) {
    tfx_model_gather_rows(m);
    rc = tfx_eval_pass_score(p, err);
  }
  if (!rc) {
    tfx_eval_pass_result(p, out);
  }
  tfx_eval_pass_destroy(p);
  return rc;
}

int tfx_evaluate_range(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, const tfx_pmetrics *pm,
                       tfx_eval_result *out, tfx_err *err) {
  return tfx_evaluate_scored(m, d, batch, lo, hi, NULL, pm, out, err);
}

int tfx_evaluate_scored(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, float *scores,
                        const tfx_pmetrics *pm, tfx_eval_result *out, tfx_err *err) {
  tfx_eval_span span = {batch, lo, hi, scores, NULL, pm};
  return evaluate_local(m, d, &span, out, err);
}

int tfx_evaluate_agg(tfx_model *m, const tfx_dataset *d, int batch, size_t max_examples, const char *agg,
                     const tfx_pmetrics *pm, tfx_eval_result *out, tfx_err *err) {
  size_t n = max_examples && max_examples < d->n ? max_examples : d->n;
  tfx_eval_span span = {batch, 0, n, NULL, agg, pm};
  return evaluate_local(m, d, &span, out, err);
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
