/* Per-class counts of an evaluation: the confusion matrix (labels by predicted class) and the precision, recall
 * and F1 it gives, per class or averaged over the classes (sklearn's macro average; class 1 of a binary
 * classifier, as Keras's Precision and Recall at threshold 0.5); a multi-label model's per class (its output above
 * 0 against its bit in the label set), averaged the same way. Counts add, so slices scored apart (eval.distributed)
 * merge exactly. Pure: no files, no allocation; the counts live in the borrowed tfx_eval_result. */
#ifndef TFX_TRAIN_CLASSES_H
#define TFX_TRAIN_CLASSES_H

#include <stdio.h>

#include "train/evaluate.h"

typedef enum tfx_class_stat { TFX_CLASS_PRECISION, TFX_CLASS_RECALL, TFX_CLASS_F1 } tfx_class_stat;

/* Starts r's counts for a model whose labels name `classes` classes (0, or more than TFX_EVAL_MAX_CLASSES: no
 * counts are kept); multi_label: labels and predictions are sets (common/labelset.h), counted per class. */
void tfx_confusion_init(tfx_eval_result *r, int classes, int multi_label);
/* Counts batch examples: example b's label labels[b] predicted as pred[b] (classes inside [0, r->classes), or
 * sets of them). */
void tfx_confusion_add(tfx_eval_result *r, const int32_t *labels, const int32_t *pred, int batch);
/* The columns of r's confusion matrix that hold counts: its classes, or 4 (tp, fp, fn, tn) for sets. */
int tfx_confusion_cols(const tfx_eval_result *r);
/* Precision, recall or F1 of class k, from r's counts (0 when its denominator is 0, as Keras and sklearn say);
 * k < 0: class 1 of a binary classifier, else the mean over the classes present in the labels or the predictions.
 * NaN when r keeps no counts or k is not one of its classes. */
double tfx_class_metric(const tfx_eval_result *r, tfx_class_stat stat, int k);
/* The value of the per-class metric name[0..len) (precision, recall, f1, precision_K, recall_K, f1_K) into *v:
 * returns 1 when name is one (*v may be NaN: no counts, or no class K), else 0 (*v untouched). */
int tfx_class_metric_named(const tfx_eval_result *r, const char *name, size_t len, double *v);
/* Prints the classification report (each class's precision, recall, F1 and support, then the mean) and the
 * confusion matrix to f; nothing when r keeps no counts. */
void tfx_confusion_print(const tfx_eval_result *r, FILE *f);

#endif
