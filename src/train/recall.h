/* Retrieval metrics of a softmax model over a catalogue of items (more classes than per-class counts keep,
 * TFX_EVAL_MAX_CLASSES): recall@K, the share of examples whose label is among the K highest scores, and the
 * popularity baseline's, the share whose label is below K (a label set numbered by popularity, most popular
 * first, as scripts/debian_deps.py writes it: the baseline ranks the items by their labels). Reported as the
 * metrics recall_K and baseline_recall_K for K in 1, 5, 10, 20, 50, 100 (with fewer classes, recall_K is class
 * K's recall: train/classes.h). One-process and chief evaluations count them; a worker's slice does not send
 * them. Thread-compatible; no errors. */
#ifndef TFX_RECALL_H
#define TFX_RECALL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"
#include "train/evaluate.h"

/* Starts r's counts: ranked when m is a softmax model of more than TFX_EVAL_MAX_CLASSES outputs. */
void tfx_recall_init(const tfx_model *m, tfx_eval_result *r);
/* Counts the hits of the last tfx_model_loss's batch (its probabilities, borrowed from m) into r. */
void tfx_recall_add(const tfx_model *m, const int32_t *labels, int batch, tfx_eval_result *r);
/* Turns r's counts of n examples into shares. */
void tfx_recall_finish(tfx_eval_result *r, size_t n);
/* 1 and *v for the metric name[0..len) (recall_K, baseline_recall_K) when r is ranked and K is counted; else 0. */
int tfx_recall_named(const tfx_eval_result *r, const char *name, size_t len, double *v);

#endif
