/* Progressive validation: on a stream there is no held-out set, so each batch is scored before it is
 * trained on (the forward pass of the training step runs on the values before its update) and the scores of the
 * last `window` examples give a rolling AUC (binary classifiers; a multi-label model's per output and their
 * mean) and log loss (the mean loss of those examples).
 *
 * Ownership: the caller owns a tfx_progressive (create/destroy). Thread-safety: one thread. Memory: fixed at
 * create (window scores, labels and losses); adding a batch never allocates. */
#ifndef TFX_PROGRESSIVE_H
#define TFX_PROGRESSIVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "nn/model.h"

typedef struct tfx_progressive tfx_progressive;

/* The most score columns an example may have (a multi-label model's outputs: common/labelset.h's bound). */
#define TFX_PROGRESSIVE_MAX_COLS 31

/* A rolling window of `window` examples for batches of up to `batch`, each with `cols` scores (1: a binary
 * classifier; a multi-label model's outputs, multi_label 1). Caller owns *out; free with tfx_progressive_destroy. */
int tfx_progressive_create(size_t window, int batch, int cols, int multi_label, tfx_progressive **out,
                           tfx_err *err);
/* Frees p; NULL does nothing. */
void tfx_progressive_destroy(tfx_progressive *p);
/* Keeps the scores of the model's last forward pass (before its loss and backward), `batch` examples. */
void tfx_progressive_score(tfx_progressive *p, const tfx_model *m, int batch);
/* Adds that batch to the window: its labels and its mean loss (each example counted with it). */
void tfx_progressive_add(tfx_progressive *p, const int32_t *labels, int batch, double mean_loss);
/* The window's AUC (NAN: not a binary or multi-label classifier, or one class only; multi-label: the mean of the
 * outputs' AUCs that are defined) and mean log loss (NAN: empty). */
void tfx_progressive_get(const tfx_progressive *p, double *auc, double *log_loss);

/* The chief merges the workers' windows: each report carries its window as counts per logit bin, so the
 * union's AUC is the histograms' sum's (pairs within a bin, 1/32 of a logit wide, count half, as ties do). */
#define TFX_PROGRESSIVE_BINS 1024
#define TFX_PROGRESSIVE_LOGIT 16.0 /* bins span logits -16 .. 16; those beyond fall into the end bins */
/* The window's scores into hist [2 * TFX_PROGRESSIVE_BINS]: the negatives' counts per bin, then the positives';
 * returns the examples counted, or 0 (nothing written) when the window holds no binary classifier's scores. */
size_t tfx_progressive_histogram(const tfx_progressive *p, int64_t *hist);
/* The AUC of the examples such a histogram (or a sum of them) counts; NAN with one class only. */
double tfx_progressive_histogram_auc(const int64_t *hist);

/* The window's rolling_log_loss and rolling_auc, a multi-label model's rolling_auc_K of each output, and
 * rolling_examples (the window's size), those defined, as report keys (names borrowed from p) into names/vals
 * (3 + TFX_PROGRESSIVE_MAX_COLS places); returns how many (0 for a NULL p). */
int tfx_progressive_report(const tfx_progressive *p, const char **names, double *vals);

#endif
