/* Declarations private to src/nn: the model and layer records, the per-kind forward/backward functions and the
 * graph wiring (graph.c) of layers with named inputs, merges and ops on declared variables. */
#ifndef TFX_NN_IMPL_H
#define TFX_NN_IMPL_H

#include <stdint.h>

#include "common/csr.h"
#include "nn/model.h"
#include "nn/par.h"

/* The layer kinds and the type each is written as in model.layers (L_ACT: the activation layers, named by their
 * function; L_FM is also written bi_interaction, its vector form): one list for the parser and the printer. */
#define NN_LAYER_KINDS(X)                                                                                       \
  X(L_DENSE, "dense")                                                                                           \
  X(L_CONV, "conv2d")                                                                                           \
  X(L_MAXPOOL, "max_pool2d")                                                                                    \
  X(L_AVGPOOL, "avg_pool2d")                                                                                    \
  X(L_FLATTEN, "flatten")                                                                                       \
  X(L_ACT, "activation")                                                                                        \
  X(L_DROPOUT, "dropout")                                                                                       \
  X(L_EMBED, "embedding")                                                                                       \
  X(L_BN, "batch_norm")                                                                                         \
  X(L_MATMUL, "matmul")         /* x W with a declared variable W [in, units] (no bias), optional activation */ \
  X(L_BIAS, "bias_add")         /* x + b with a declared variable b [channels], optional activation */          \
  X(L_LOOKUP, "lookup")         /* embedding lookup in a declared table [vocab, dim]: row-sparse gradient */    \
  X(L_SCALE, "scale")           /* x * rate */                                                                  \
  X(L_CONCAT, "concat")         /* rank-1 inputs side by side */                                                \
  X(L_ADD, "add")               /* the sum of equally shaped inputs */                                          \
  X(L_EMBAG, "embedding_bag")   /* a combined row per example over a sparse field (tfx_csr), plus a bias */     \
  X(L_FM, "fm")                 /* factorization machine over field embeddings: pairwise term or vector */      \
  X(L_CROSS, "cross")           /* DCN-v2: x0 * (xl W + b) + xl, W full or low rank (cross.c) */                \
  X(L_DOT, "dot_interaction")   /* DLRM: the pairwise dots of its inputs, upper triangle (dot.c) */             \
  X(L_ATTN, "target_attention") /* DIN: sequence rows pooled by attention to a target (attention.c) */

#define NN_KIND_VALUE(kind, name) kind,
typedef enum lkind { NN_LAYER_KINDS(NN_KIND_VALUE) L_NKINDS } lkind;

#define NN_MAX_SHARE 8    /* embedding bags reading one table (model.layers[].table) */
#define TFX_MAX_INPUTS 40 /* inputs of one merge layer (a DeepFM over Criteo's 26 fields and more) */
typedef enum act { A_NONE, A_RELU, A_TANH, A_SIGMOID, A_LEAKY, A_SOFTMAX } act;

typedef struct layer {
  lkind kind;
  int in[TFX_MAX_INPUTS]; /* producer layers; -1 is the model input */
  int n_in;
  int consumers;  /* layers that read this one's output (several: their input gradients are summed) */
  int needs_grad; /* it or a layer below it has variables: backward runs through it */
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
  int32_t *ids;          /* embedding: the row of each input position, -1 for an id outside the table */
  int n_bad_ids;         /* embedding: ids outside the table in the last forward; bad_id is the first */
  float bad_id;
  int bad_example; /* embedding: the batch position of the example holding bad_id */
  uint64_t seed;
  tfx_par *par;           /* the model's worker pool (borrowed; NULL: one thread) */
  float *dbpart;          /* layers with a bias: the bias gradient of each of TFX_NN_CHUNKS row chunks */
  const tfx_csr *csr;     /* embedding bag: the sparse batch of the current step (borrowed) */
  int combiner;           /* embedding bag: 0 sum, 1 mean, 2 sqrtn */
  int field;              /* embedding bag: the sparse field it reads */
  float *bag_scale;       /* embedding bag: [batch] the combiner's factor of each example */
  struct bag_pair *pairs; /* embedding bag: (id, position, example) of each valid id, sorted in backward */
  size_t pairs_cap;
  const struct bag_pair *sorted; /* embedding bag: the lent batch's pairs once sorted (NULL: not yet) */
  size_t n_sorted;
  int32_t *row_of;     /* embedding bag read from the batch's rows: the row in w->batch_vals of each id of the batch */
  size_t batch_cap;    /* embedding bag: the ids row_of has room for */
  int from_batch;      /* embedding bag: reads its rows from w->batch_vals (TFX_ROWS_BATCH) */
  tfx_var *u;          /* cross of low rank: the second factor [rank, d] (w is [d, rank]) */
  struct layer *owner; /* embedding bag: the bag whose table it reads (itself unless model.layers[].table names one) */
  struct layer *mates[NN_MAX_SHARE]; /* a table's owner: every bag reading its table, itself first */
  int n_mates;                       /* a table's owner: how many (1: the table is not shared) */
} layer;

/* Row chunks of a bias gradient: each sums its rows, then the chunks are added in order, so the result does
 * not depend on how many threads share the chunks. */
#define TFX_NN_CHUNKS 16

struct tfx_model {
  layer layers[TFX_MAX_LAYERS];
  int n_layers;
  tfx_var vars[2 * TFX_MAX_LAYERS + TFX_MAX_VARIABLES];
  int n_vars;
  int n_declared; /* vars[0, n_declared) are the model's declared variables (model.variables) */
  int max_batch;
  int loss;                /* 0 softmax CE, 1 sigmoid CE, 2 MSE */
  int top_k;               /* the K of the top-K hits counted (model.metrics top_K; 5 when absent) */
  float *class_w;          /* model.class_weights, one per class (owned), or NULL: all 1 */
  float smoothing;         /* model.label_smoothing */
  int multi_label;         /* model.multi_label: labels are sets (common/labelset.h), one sigmoid output a class */
  const float *example_w;  /* the batch's example weights (tfx_model_set_example_weights, borrowed), or NULL */
  int in_batch;            /* model.in_batch_negatives: training's softmax runs over the batch's labels only */
  int logq;                /* model.logq_correction: those logits less log Q(label), Q from label_count */
  int64_t *label_count;    /* in_batch: the labels trained so far, per class (owned), and their total */
  int64_t label_total;
  int32_t *batch_labels;   /* in_batch: the batch's distinct valid labels (owned, [max_batch]) */
  int32_t *label_mark;     /* in_batch: per class, the batch's column + 1 while a batch is scored (owned) */
  int in_rank, ih, iw, ic; /* the model input */
  float *probs;
  float *scratch;            /* an input gradient on its way into a producer with several consumers */
  tfx_par *par;              /* the worker pool of cfg->threads > 1 (owned), else NULL */
  tfx_rows rows;             /* where forward reads the rows of lazy tables from (tfx_model_set_rows) */
  int n_fields; /* the sparse fields: the categorical feature columns, or the one of a LibSVM row ("input") */
  char field_name[TFX_MAX_FEATURES][64];
  int64_t field_dim[TFX_MAX_FEATURES];
  int field_len[TFX_MAX_FEATURES]; /* a sequence column's max_len (0: a bag) */
};

/* Elements per example of a layer's input and output. */
static inline int layer_in_size(const layer *l) {
  return l->ih * l->iw * l->ic;
}
static inline int layer_out_size(const layer *l) {
  return l->oh * l->ow * l->oc;
}

/* The smallest part of an element loop worth handing to another thread (a hand-off costs a few microseconds). */
#define PAR_GRAIN_FLOATS 16384

/* The grain, in rows of `width` floats, of a loop over rows split over the worker pool. */
static inline size_t nn__grain_rows(size_t width) {
  return width >= PAR_GRAIN_FLOATS ? 1 : PAR_GRAIN_FLOATS / width;
}

/* Forward of one layer on in [batch, in_size] into l->out. */
void nn__layer_forward(layer *l, const float *in, int batch, int training, uint64_t step);
/* Backward of one layer: reads l->dout (and may overwrite it), writes grads and, if din, the input grad.
 * Must follow this layer's forward on the same `in`: conv reuses the im2col columns that forward left in l->cols. */
void nn__layer_backward(layer *l, const float *in, float *din, int batch);
/* Max or average pooling forward of in into l->out (pool.c). */
void nn__pool_forward(layer *l, const float *in, int batch);
/* Pooling backward: the input gradient din from l->dout (pool.c). */
void nn__pool_backward(layer *l, float *din, int batch);

/* The sequence combiner of an embedding bag: a row per position [max_len, units], in the cell's order. */
#define NN_COMBINER_SEQUENCE 3

/* Embedding bag: grows the step buffers for a batch of n ids; -1 when memory runs out. */
int nn__embag_reserve(layer *l, size_t nnz);
/* Embedding bag forward of l->csr into l->out: bias + combiner(sum of weight * row) per example. */
void nn__embag_forward(layer *l, int batch);
/* Embedding bag read from the batch's rows, called on a table's owner: the valid ids of every bag reading the
 * table, ascending and unique, into l->w->batch_ids / n_batch, and each id's row among them into each bag's row_of
 * (before forward). */
void nn__embag_batch_rows(layer *l, int batch);
/* Embedding bag backward: the bias gradient from l->dout and, on a table's owner (the first of the bags reading
 * it, so the last whose backward runs), the touched rows of every reader (ascending, duplicates summed). */
void nn__embag_backward(layer *l, int batch);

/* 1 for the layers the graph runs from several inputs (concat, add, fm, and the recommendation layers). */
static inline int layer_is_merge(const layer *l) {
  return l->kind == L_CONCAT || l->kind == L_ADD || l->kind == L_FM || l->kind == L_CROSS || l->kind == L_DOT ||
         l->kind == L_ATTN;
}

/* Where a merge layer's backward hands the gradient g [batch, n] (row stride `stride`) of its input producer p: the
 * graph's give (graph.c: copied when p has one reader, added otherwise), with its context. */
typedef struct nn_grad_sink {
  void (*give)(void *ctx, int p, const float *g, int batch, int n, int stride);
  void *ctx;
} nn_grad_sink;

/* cross.c: shape and variables of a cross layer (rank: of its kernel, 0 for full), its step floats per example, and
 * forward / backward (the input gradients go to the producers through the sink). */
int nn__cross_shape(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err);
size_t nn__cross_cols(const layer *l);
void nn__cross_forward(tfx_model *m, layer *l, const float *x, int batch);
void nn__cross_backward(tfx_model *m, layer *l, const float *x, int batch, const nn_grad_sink *sink);
/* dot.c: shape of a dot_interaction (n inputs of one width k -> n(n-1)/2 dots), forward and backward. */
int nn__dot_shape(tfx_model *m, layer *l, tfx_err *err);
size_t nn__dot_cols(const layer *l);
void nn__dot_forward(tfx_model *m, layer *l, const float *x, int batch);
void nn__dot_backward(tfx_model *m, layer *l, const float *x, int batch, const nn_grad_sink *sink);
/* attention.c: shape of a target_attention (a sequence bag [L, k] and a target [k] -> [2k]), forward, backward. */
int nn__attn_shape(tfx_model *m, layer *l, tfx_err *err);
size_t nn__attn_cols(const layer *l);
void nn__attn_forward(tfx_model *m, layer *l, const float *x, int batch);
void nn__attn_backward(tfx_model *m, layer *l, const float *x, int batch, const nn_grad_sink *sink);

/* Resolves layer i's inputs (names of earlier layers, "input", or the previous layer) and copies the first
 * input's shape into l; counts consumers. Errors (TFX_ECONFIG) name the layer and the unknown input. */
int nn__graph_link(tfx_model *m, int i, const tfx_layer_spec *s, tfx_err *err);
/* Shape of a merge (concat, add) or an op on a declared variable (matmul, bias_add, lookup); binds the
 * variable. Errors (TFX_ESHAPE / TFX_ECONFIG) name the layer, the variable and both shapes. */
int nn__graph_shape(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err);
/* Declares cfg's model.variables as the model's first variables. Errors name the variable. */
int nn__graph_declare(tfx_model *m, const tfx_config *cfg, tfx_err *err);
/* After every layer is built: checks each declared variable feeds an op and every layer but the last is read;
 * marks which layers backward runs through. */
int nn__graph_finish(tfx_model *m, tfx_err *err);
/* Forward of a merge layer from its inputs' outputs (x is the model input). */
void nn__graph_merge_forward(tfx_model *m, layer *l, const float *x, int batch);
/* The whole backward pass over the graph, summing the gradients of layers read by several others. */
void nn__graph_backward(tfx_model *m, const float *x, int batch);

/* loss.c: reads model.class_weights (one per class of the finished model) and model.label_smoothing. */
int nn__loss_setup(tfx_model *m, const tfx_config *cfg, tfx_err *err);
/* Softmax over each of `rows` rows of `width` values of z into p (p may be z); loss.c's, shared with the softmax
 * layer. */
void nn__softmax_rows(const float *z, float *p, size_t rows, size_t width);

#endif
