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
} tfx_grad_step;

/* Leaves the mean (then clipped) gradient of `accumulate` minibatches in the model's grads; dropout seeds come
 * from `seed`. *st gets the mean loss and the summed hits. */
void tfx_compute_gradients(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g, uint64_t seed, tfx_step_stats *st);

#endif
