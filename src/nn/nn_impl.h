/* Declarations private to src/nn: the layer record and the per-kind forward/backward functions. */
#ifndef TFX_NN_IMPL_H
#define TFX_NN_IMPL_H

#include <stdint.h>

#include "model.h"

typedef enum lkind { L_DENSE, L_CONV, L_MAXPOOL, L_AVGPOOL, L_FLATTEN, L_ACT, L_DROPOUT, L_EMBED, L_BN } lkind;
typedef enum act { A_NONE, A_RELU, A_TANH, A_SIGMOID, A_LEAKY, A_SOFTMAX } act;

typedef struct layer {
  lkind kind;
  act act;
  float alpha, rate;
  char name[64];
  int in_rank, ih, iw, ic;
  int out_rank, oh, ow, oc;
  int k, stride, pad_t, pad_l, pool;
  tfx_var *w, *b;
  tfx_var *mmean, *mvar; /* batch norm: moving statistics (assigned, not optimized) */
  float *bn;             /* batch norm: per channel mean and 1/std of the last training batch */
  float *out, *dout;     /* [batch, out_size], owned by the model */
  float *cols;           /* conv: im2col, then its gradient */
  int32_t *argmax;       /* max pool: the input index of each output */
  float *mask;           /* dropout: the kept-and-scaled mask */
  int vocab;             /* embedding: rows of the table; l->oc / (ih*iw*ic) is its width */
  int32_t *ids;          /* embedding: the clamped row of each input position */
  uint64_t seed;
} layer;

/* Elements per example of a layer's input and output. */
static inline int layer_in_size(const layer *l) {
  return l->ih * l->iw * l->ic;
}
static inline int layer_out_size(const layer *l) {
  return l->oh * l->ow * l->oc;
}

/* Forward of one layer on in [batch, in_size] into l->out. */
void tfx_layer_forward(layer *l, const float *in, int batch, int training, uint64_t step);
/* Backward of one layer: reads l->dout (and may overwrite it), writes grads and, if din, the input grad.
 * Must follow this layer's forward on the same `in`: conv reuses the im2col columns that forward left in l->cols. */
void tfx_layer_backward(layer *l, const float *in, float *din, int batch);

#endif
