/* Evaluation of a model over a whole dataset: loss and accuracy averaged over examples. */
#ifndef TFX_EVALUATE_H
#define TFX_EVALUATE_H

#include "dataset.h"
#include "model.h"

typedef struct tfx_eval_result {
  double loss, accuracy, top5;
  size_t examples;
} tfx_eval_result;

/* Runs the model (borrowed, its current weights) over every example of d in batches of at most the model's
 * batch size `batch`; writes example-weighted means into *out. */
void tfx_evaluate(tfx_model *m, const tfx_dataset *d, int batch, tfx_eval_result *out);

/* As tfx_evaluate over the first max_examples (0: all), aggregating per-batch loss and accuracy by agg:
 * "mean" (example-weighted), "min", "max" or "sum". */
void tfx_evaluate_agg(tfx_model *m, const tfx_dataset *d, int batch, size_t max_examples, const char *agg,
                      tfx_eval_result *out);

#endif
