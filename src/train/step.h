/* The gradient half of a training step, shared by the single-process trainer and the workers: `k` minibatches
 * from a batcher through forward, loss and backward, their mean gradient, then clipping. */
#ifndef TFX_STEP_H
#define TFX_STEP_H

#include <stdint.h>

#include "data/dataset.h"
#include "nn/model.h"

typedef struct tfx_grad_step {
  int batch, accumulate; /* minibatch size, minibatches per step */
  double clip_value, clip_norm;
  float *x;    /* [batch, input] scratch, borrowed */
  int32_t *y;  /* [batch] scratch, borrowed */
  float **acc; /* one buffer per variable when accumulate > 1 (dense variables only), borrowed */
  struct tfx_progressive *pv; /* progressive validation: each minibatch scored before its update, or NULL */
  const struct tfx_pmetrics *pm;  /* a plugin's own metrics (train/pmetrics.h), or NULL */
  struct tfx_pm_state *pm_state;  /* where each minibatch is added to them (with pm) */
} tfx_grad_step;

/* Leaves the mean (then clipped) gradient of `accumulate` minibatches in the model's grads; dropout seeds come
 * from `seed`. *st gets the mean loss and the summed hits. The rows of lazy tables come from the model's own
 * tables (tfx_model_gather_rows: one process); a worker, whose rows are on its ps, lends each batch
 * (tfx_lend_batch), gathers its rows, then computes on it (tfx_compute_lent). */
void tfx_compute_gradients(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g, uint64_t seed, tfx_step_stats *st);

/* Lends the model the next minibatch (x, y into g's scratch; a sparse batch through tfx_model_set_csr, which lists
 * the rows of lazy tables it touches for the caller to fill) and checks its labels; nonzero when the input failed
 * (tfx_batcher_status says why). */
int tfx_lend_batch(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g);
/* The (clipped) gradient of the minibatch lent last (tfx_lend_batch), as tfx_compute_gradients with accumulate 1;
 * nothing is computed when the batcher has failed. */
void tfx_compute_lent(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g, uint64_t seed, tfx_step_stats *st);

#endif
