/* Per-class counts: the confusion matrix and the precision, recall and F1 it gives. */
#include "train/classes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"

void tfx_confusion_init(tfx_eval_result *r, int classes, int multi_label) {
  r->classes = classes > 0 && classes <= TFX_EVAL_MAX_CLASSES ? classes : 0;
  r->multi_label = multi_label != 0;
  memset(r->confusion, 0, sizeof r->confusion);
}

int tfx_confusion_cols(const tfx_eval_result *r) {
  return r->multi_label ? 4 : r->classes;
}

/* Counts a set's classes: row k's tp, fp, fn, tn. */
static void add_sets(tfx_eval_result *r, int32_t label, int32_t pred) {
  uint32_t t = tfx_label_bits(label), p = tfx_label_bits(pred);
  for (int k = 0; k < r->classes; k++) {
    int tk = (t >> k) & 1u, pk = (p >> k) & 1u;
    r->confusion[k][tk ? (pk ? 0 : 2) : (pk ? 1 : 3)] += 1;
  }
}

void tfx_confusion_add(tfx_eval_result *r, const int32_t *labels, const int32_t *pred, int batch) {
  for (int b = 0; r->classes && b < batch; b++) {
    if (r->multi_label) {
      add_sets(r, labels[b], pred[b]);
    } else if (labels[b] >= 0 && labels[b] < r->classes && pred[b] >= 0 && pred[b] < r->classes) {
      r->confusion[labels[b]][pred[b]] += 1;
    }
  }
}

/* Class k's true positives, its predictions (column sum) and its examples (row sum). */
static void class_counts(const tfx_eval_result *r, int k, double *tp, double *predicted, double *actual) {
  if (r->multi_label) {
    *tp = r->confusion[k][0];
    *predicted = *tp + r->confusion[k][1];
    *actual = *tp + r->confusion[k][2];
    return;
  }
  *tp = r->confusion[k][k];
  *predicted = 0;
  *actual = 0;
  for (int j = 0; j < r->classes; j++) {
    *predicted += r->confusion[j][k];
    *actual += r->confusion[k][j];
  }
}

static double one_class(const tfx_eval_result *r, tfx_class_stat stat, int k) {
  double tp, predicted, actual;
  class_counts(r, k, &tp, &predicted, &actual);
  double p = predicted > 0 ? tp / predicted : 0, q = actual > 0 ? tp / actual : 0;
  switch (stat) {
  case TFX_CLASS_PRECISION:
    return p;
  case TFX_CLASS_RECALL:
    return q;
  default:
    return p + q > 0 ? 2 * p * q / (p + q) : 0;
  }
}

double tfx_class_metric(const tfx_eval_result *r, tfx_class_stat stat, int k) {
  if (!r->classes || k >= r->classes) {
    return NAN;
  }
  if (k >= 0 || (r->classes == 2 && !r->multi_label)) {
    return one_class(r, stat, k >= 0 ? k : 1);
  }
  double sum = 0;
  int present = 0;
  for (int c = 0; c < r->classes; c++) {
    double tp, predicted, actual;
    class_counts(r, c, &tp, &predicted, &actual);
    if (predicted > 0 || actual > 0) {
      sum += one_class(r, stat, c);
      present++;
    }
  }
  return present ? sum / present : NAN;
}

int tfx_class_metric_named(const tfx_eval_result *r, const char *name, size_t len, double *v) {
  static const struct {
    const char *name;
    tfx_class_stat stat;
  } stats[] = {{"precision", TFX_CLASS_PRECISION}, {"recall", TFX_CLASS_RECALL}, {"f1", TFX_CLASS_F1}};
  for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
    size_t n = strlen(stats[i].name);
    if (len < n || strncmp(name, stats[i].name, n)) {
      continue;
    }
    if (len == n) {
      *v = tfx_class_metric(r, stats[i].stat, -1);
      return 1;
    }
    if (name[n] == '_' && len > n + 1 && len <= n + 3 && strspn(name + n + 1, "0123456789") >= len - n - 1) {
      *v = tfx_class_metric(r, stats[i].stat, atoi(name + n + 1));
      return 1;
    }
  }
  return 0;
}

void tfx_confusion_print(const tfx_eval_result *r, FILE *f) {
  if (!r->classes) {
    return;
  }
  fprintf(f, "%8s %10s %10s %10s %10s\n", "class", "precision", "recall", "f1", "support");
  for (int k = 0; k < r->classes; k++) {
    double tp, predicted, actual;
    class_counts(r, k, &tp, &predicted, &actual);
    fprintf(f, "%8d %10.4f %10.4f %10.4f %10.0f\n", k, one_class(r, TFX_CLASS_PRECISION, k),
            one_class(r, TFX_CLASS_RECALL, k), one_class(r, TFX_CLASS_F1, k), actual);
  }
  fprintf(f, "%8s %10.4f %10.4f %10.4f %10zu\n", r->classes == 2 && !r->multi_label ? "class 1" : "mean",
          tfx_class_metric(r, TFX_CLASS_PRECISION, -1), tfx_class_metric(r, TFX_CLASS_RECALL, -1),
          tfx_class_metric(r, TFX_CLASS_F1, -1), r->examples);
  if (r->multi_label) {
    return; /* each class's counts are its own 2 x 2: the table says it */
  }
  fprintf(f, "confusion matrix (rows: label, columns: predicted)\n%8s", "");
  for (int j = 0; j < r->classes; j++) {
    fprintf(f, " %7d", j);
  }
  for (int k = 0; k < r->classes; k++) {
    fprintf(f, "\n%8d", k);
    for (int j = 0; j < r->classes; j++) {
      fprintf(f, " %7.0f", r->confusion[k][j]);
    }
  }
  fputc('\n', f);
}
