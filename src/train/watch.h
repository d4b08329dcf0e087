/* A watched evaluation metric: the best value so far, the step it was scored at, and how many evaluations have
 * not improved on it since. The rules of checkpoint.keep_best (is this the best?) and training.early_stopping
 * (patience exhausted?), pure: no files, no clock; the trainer and the chief feed them their evaluations.
 * Improvement is Keras's: value beats best by more than min_delta (max: value - min_delta > best; min: value +
 * min_delta < best); the first finite value is the best; NaN never improves. */
#ifndef TFX_TRAIN_WATCH_H
#define TFX_TRAIN_WATCH_H

#include <stdint.h>

#include "config/config.h"
#include "train/evaluate.h"

typedef struct tfx_watch {
  char metric[16]; /* "": off */
  int maximize;
  double min_delta;
  int patience;      /* evaluations without improvement before exhausted (0: never) */
  double best;       /* NaN: none yet */
  int64_t best_step; /* the step best was scored at (-1: none) */
  int since;         /* evaluations since the best */
} tfx_watch;

/* Sets up a watch of metric (empty: off) in the direction mode says (auto: min for loss and log_loss, else max). */
void tfx_watch_init(tfx_watch *w, const char *metric, tfx_watch_mode mode, double min_delta, int patience);
/* Starts from a known best (a resumed run's best.json); the patience count starts over. */
void tfx_watch_restore(tfx_watch *w, int64_t step, double value);
/* Counts an evaluation scoring value at step: 1 when it improves on the best (it becomes the best), else 0. */
int tfx_watch_update(tfx_watch *w, int64_t step, double value);
/* 1 when the watch is on and `patience` evaluations in a row have not improved on the best. */
int tfx_watch_exhausted(const tfx_watch *w);
/* The value of metric (loss, log_loss, accuracy, auc, top_K, precision, recall, f1, precision_K, recall_K, f1_K)
 * in r; NaN when r has none (auc of a set with one class, top_K of another K than r's, a class r has no counts
 * of). */
double tfx_eval_metric(const tfx_eval_result *r, const char *metric);

#endif
