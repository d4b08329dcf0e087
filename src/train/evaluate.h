/* Evaluation of a model over a dataset: loss, accuracy and top-K accuracy averaged over examples, or aggregated
 * over batches per metric (validation sets), and the metric records the experiment names (model.metrics).
 * Errors: TFX_EINVAL for a label or an embedding id the model cannot score (no result is written then). */
#ifndef TFX_EVALUATE_H
#define TFX_EVALUATE_H

#include "data/dataset.h"
#include "nn/model.h"
#include "train/pmetrics.h"

/* The most classes whose counts an evaluation keeps (per-class metrics, the confusion matrix): config.h's bound. */
#define TFX_EVAL_MAX_CLASSES TFX_MAX_CLASSES

/* The K of the recall@K an evaluation counts (train/recall.h). */
#define TFX_RECALL_KS 6

typedef struct tfx_eval_result {
  double loss, accuracy, top5; /* top5: the top-K accuracy, K = top_k */
  int top_k;
  size_t examples;
  double auc;  /* binary classifiers: the exact ROC AUC over every example (ties count half) */
  int has_auc; /* 0: not binary, or one class absent from the set */
  int scored;  /* score columns tfx_evaluate_scored wrote an example: 1 binary, the outputs multi-label, 0 none */
  int n_auc;   /* multi-label: auc_k holds each output's AUC (NaN: one class absent), auc their mean */
  double auc_k[TFX_EVAL_MAX_CLASSES];
  int classes;  /* the confusion matrix's classes (0: none kept: a regression, or over TFX_EVAL_MAX_CLASSES) */
  int multi_label; /* sets of classes: row k of confusion holds class k's tp, fp, fn, tn */
  double confusion[TFX_EVAL_MAX_CLASSES][TFX_EVAL_MAX_CLASSES]; /* [label][predicted]: examples (train/classes.h) */
  tfx_pm_state pm; /* the plugin's own metrics (n 0: none asked) */
  int ranked;      /* a softmax over a catalogue: rank_hits and pop_hits hold recall@K (train/recall.h) */
  double rank_hits[TFX_RECALL_KS], pop_hits[TFX_RECALL_KS];
} tfx_eval_result;

/* Room for every named metric, and per_class's three of each class (four with a multi-label AUC). */
#define TFX_EVAL_MAX_FIELDS (4 * TFX_EVAL_MAX_CLASSES + 16)

/* The fields of one metrics record: the metrics named, then examples; callers may append more fields. */
typedef struct tfx_eval_report {
  const char *names[TFX_EVAL_MAX_FIELDS]; /* point into text or at string literals */
  double values[TFX_EVAL_MAX_FIELDS];
  char text[TFX_EVAL_MAX_FIELDS][24];
  int n;
} tfx_eval_report;

/* Runs the model (borrowed, its current weights) over every example of d in batches of at most the model's
 * batch size `batch`; writes example-weighted means into *out. TFX_EINVAL (out untouched) naming the examples
 * and the value when a label is outside the model's classes or an embedding id outside its table: such an
 * example would count as a miss with no loss, and the accuracy would not be the model's. */
int tfx_evaluate(tfx_model *m, const tfx_dataset *d, int batch, tfx_eval_result *out, tfx_err *err);

/* As tfx_evaluate over examples [lo, hi) of d (a worker's slice of the eval set: eval.distributed), also adding
 * every batch to the states of pm's metrics (borrowed; NULL: none) in out->pm. */
int tfx_evaluate_range(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, const tfx_pmetrics *pm,
                       tfx_eval_result *out, tfx_err *err);
/* As tfx_evaluate_range, keeping the scores of examples [lo, hi) in scores (the caller's, (hi - lo) x
 * tfx_model_output_size floats, tfx_model_scores's; NULL: the evaluation's own); out->scored says how many an
 * example were written (0: none, a model without AUC). */
int tfx_evaluate_scored(tfx_model *m, const tfx_dataset *d, int batch, size_t lo, size_t hi, float *scores,
                        const tfx_pmetrics *pm, tfx_eval_result *out, tfx_err *err);
/* Slice index of count of n examples: [*lo, *hi), contiguous, sizes differing by at most one, covering all. */
void tfx_eval_slice(size_t n, int index, int count, size_t *lo, size_t *hi);

/* As tfx_evaluate over the first max_examples (0: all), aggregating per-batch metrics by agg: "mean"
 * (example-weighted), "min", "max" or "sum" for all, or per metric ("accuracy:mean,loss:max"; unlisted: mean);
 * pm's metrics (NULL: none) over the same examples by their own aggregation. */
int tfx_evaluate_agg(tfx_model *m, const tfx_dataset *d, int batch, size_t max_examples, const char *agg,
                     const tfx_pmetrics *pm, tfx_eval_result *out, tfx_err *err);

/* What an evaluation pass covers: examples [lo, hi) of its dataset in batches of at most `batch` (the model's
 * batch size); with agg (tfx_evaluate_agg's) the per-batch metrics folded by it and no scores, else
 * example-weighted means with each example's scores kept in `scores` (the caller's, as tfx_evaluate_scored's;
 * NULL: the pass's own) for the AUC; pm's metrics (NULL: none). Everything borrowed for the pass's life. */
typedef struct tfx_eval_span {
  int batch;
  size_t lo, hi;
  float *scores;
  const char *agg;
  const tfx_pmetrics *pm;
} tfx_eval_span;

/* An evaluation driven batch by batch by its caller, which fills the rows of the lazy tables each lent batch
 * touches (TFX_ROWS_BATCH: from its ps) between tfx_eval_pass_next and tfx_eval_pass_score: the functions above
 * are one such pass whose rows come from the model's own tables. */
typedef struct tfx_eval_pass tfx_eval_pass;
/* Starts a pass of model m (borrowed, its current weights) over span of d (borrowed); caller owns *out; free with
 * tfx_eval_pass_destroy. TFX_ENOMEM. */
int tfx_eval_pass_create(tfx_model *m, const tfx_dataset *d, const tfx_eval_span *span, tfx_eval_pass **out,
                         tfx_err *err);
/* Frees the pass; NULL does nothing. */
void tfx_eval_pass_destroy(tfx_eval_pass *p);
/* Lends the model the next batch (*lent: its examples; 0 when the span is done): its labels checked, its sparse
 * fields set (tfx_model_set_csr: the lazy tables' batch_ids). TFX_EINVAL naming the example (its index in the
 * dataset) and the label outside the model's classes; tfx_model_set_csr's errors. */
int tfx_eval_pass_next(tfx_eval_pass *p, int *lent, tfx_err *err);
/* Scores the lent batch (forward, loss, counts, scores) into the pass's sums. TFX_EINVAL naming the example and
 * the embedding id outside its table; TFX_ESTATE when no batch is lent. */
int tfx_eval_pass_score(tfx_eval_pass *p, tfx_err *err);
/* The pass's result, once every batch is scored, into *out. */
void tfx_eval_pass_result(tfx_eval_pass *p, tfx_eval_result *out);

/* The exact ROC AUC of scores against binary labels (1 positive), n of each: the Mann-Whitney statistic with tied
 * scores at their mean rank (scores and labels are left as they are). NaN when a class is absent. */
double tfx_auc(float *scores, int32_t *labels, size_t n);
/* Fills *out with the metrics of r that `metrics` names (comma-separated loss, accuracy, top_K, auc, log_loss,
 * precision, recall, f1, precision_K, recall_K, f1_K, auc_K, per_class, each optionally ":agg"; top_K is recorded
 * as topK_accuracy with the model's K; log_loss is the cross-entropy loss; auc only when r has one, auc_K when r
 * has a multi-label model's; the per-class ones only when r keeps counts: per_class as precision_K, recall_K, f1_K
 * (and auc_K) of every class), then examples. */
/* The AUC of n examples' scores (cols an example: 1 for a binary classifier, the outputs of a multi-label model,
 * whose AUC is each output's against its class's bit, and their mean over the outputs that have one, as Keras's
 * AUC(multi_label=True)) against their labels into r's auc, has_auc, n_auc, auc_k and scored; cols 0: none. */
void tfx_eval_auc(const float *scores, const int32_t *labels, size_t n, int cols, tfx_eval_result *r);
void tfx_eval_report_init(tfx_eval_report *out, const char *metrics, const tfx_eval_result *r);
/* Appends the values of r's plugin metrics (pm: the tfx_pmetrics that made them, borrowed) to out; `what` names
 * the record in the log line of a value left out. */
void tfx_eval_report_add_plugin(tfx_eval_report *out, const tfx_pmetrics *pm, const tfx_eval_result *r,
                                const char *what);
/* When `metrics` names confusion and r keeps counts: the record's extra JSON fields `"confusion": [[...], ...]`
 * (rows: labels, columns: predicted classes; a multi-label model's row k is class k's [tp, fp, fn, tn]) and
 * `"confusion_classes": C`; else NULL. Caller owns the text; free with free(). */
char *tfx_eval_confusion_json(const char *metrics, const tfx_eval_result *r);
/* The metrics a validation set reports: its per-metric aggregation list if it has one, else model_metrics
 * (both borrowed). */
const char *tfx_valset_metrics(const tfx_valset *v, const char *model_metrics);

#endif
