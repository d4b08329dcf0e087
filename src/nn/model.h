/* A model: a sequence of layers built from the experiment's model section, its variables (stable names,
 * shapes, trainable flags) and its step buffers, allocated once for a maximum batch and reused: forward,
 * loss and backward never allocate. A model is owned by one thread; with training.threads > 1 it starts a
 * worker pool of that many threads (tfx_par) for its element loops, and results are the same bit for bit
 * whatever the thread count. Errors: TFX_ECONFIG / TFX_ESHAPE naming
 * the layer and the mismatch. */
#ifndef TFX_MODEL_H
#define TFX_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/csr.h"
#include "config/config.h"
#include "nn/par.h"

/* The element type of a variable's values, grads and optimizer slots: float32 is the one the model computes in. */
typedef enum tfx_dtype {
  TFX_DTYPE_FLOAT32, /* the zero value: a variable is float32 unless it says otherwise */
} tfx_dtype;

typedef struct tfx_var {
  char name[96];
  tfx_dtype dtype;
  int rank;
  int64_t shape[4];
  size_t count;
  int trainable;
  char init[32];
  int64_t fan_in, fan_out;
  float *value;   /* the values the model computes with: storage, or borrowed read-only memory (a received
                     frame used in place, see tfx_psclient) */
  float *storage; /* owned by the model */
  float *grad;    /* owned by the model; for a sparse variable only the rows listed in `rows` */
  int assign;     /* not optimized but computed by the model (batch-norm moving statistics): pushed as values
                    the ps assigns */
  int sparse;     /* row-sparse gradient (embedding tables): grad holds n_rows rows, never the whole table */
  size_t mapped;  /* storage is a tfx_map_zeroed mapping of this many bytes (a lazy table), else 0 */
  int lazy;       /* an embedding bag's table: a parameter server holds it row by row, and a batch needs only
                     the rows it touches (listed in `rows` when the batch is lent, tfx_model_set_csr) */
  int64_t *rows;  /* sparse: the touched rows, ascending (owned by the model) */
  size_t n_rows;
  /* A lazy table read from the lent batch's rows (TFX_ROWS_BATCH: a worker, the master's evaluation), not the
   * table. batch_ids: its unique ids, ascending; batch_vals: their values, row k at batch_vals + k * width, which
   * the caller fills before forward. Sized for the batch's ids and reused batch after batch (owned by the model): the
   * copy costs the rows of one batch, never pages of the table. */
  int64_t *batch_ids;
  float *batch_vals;
  size_t n_batch;
} tfx_var;

typedef struct tfx_model tfx_model;

typedef struct tfx_step_stats {
  double loss; /* mean over the batch */
  int correct; /* argmax hits */
  int top5;    /* top-K hits: K is model.metrics's top_K (5 when absent) */
  int count;
} tfx_step_stats;

/* The TensorFlow name of a dtype ("float32"); static, "unknown" for a value outside the enum. */
const char *tfx_dtype_name(tfx_dtype dtype);
/* The bytes of one value of a dtype (0 for a value outside the enum). */
size_t tfx_dtype_size(tfx_dtype dtype);
/* The examples an evaluation batch holds (the master's and the evaluator's models are built for it). */
#define TFX_EVAL_BATCH 1000
/* How large a step's tensors can get, for the model of cfg (built to measure, nothing initialized or touched):
 * *largest, the bytes of the largest tensor of one variable (a dense variable whole, any slice being smaller; a
 * lazy table the rows a batch of the larger of training.batch_size and TFX_EVAL_BATCH may touch, at 1024 ids an
 * example, at most the table), and *ids, how many row ids of lazy tables one message may list. */
int tfx_model_extent(const tfx_config *cfg, size_t *largest, size_t *ids, tfx_err *err);
/* Builds and shape-checks the model for batches up to max_batch; caller owns *out; free with
 * tfx_model_destroy. */
int tfx_model_create(const tfx_config *cfg, int max_batch, tfx_model **out, tfx_err *err);
/* Frees the model; NULL does nothing. */
void tfx_model_destroy(tfx_model *m);
/* Initializes every variable from the seed and its name. */
void tfx_model_init_vars(tfx_model *m, uint64_t seed);
/* The number of variables. */
int tfx_model_nvars(const tfx_model *m);
/* The first index of the ascending rows[0..n) whose value is >= x (n if none). */
size_t tfx_rows_lower_bound(const int64_t *rows, size_t n, int64_t x);
/* The number of gradient values a variable holds now (all, or the touched rows of a sparse one). */
size_t tfx_var_grad_count(const tfx_var *v);
/* The i-th variable (borrowed from the model). */
tfx_var *tfx_model_var(tfx_model *m, int i);
/* The variable with this name (borrowed), or NULL. */
tfx_var *tfx_model_find_var(tfx_model *m, const char *name);
/* The number of float inputs per example, and the number of classes (outputs) per example. */
size_t tfx_model_input_size(const tfx_model *m);
/* The model's worker pool (borrowed; NULL with one thread), to split optimizer updates the same way. */
tfx_par *tfx_model_par(tfx_model *m);
/* The number of classes a label may name: the outputs, or 2 for one sigmoid output. */
int tfx_model_label_classes(const tfx_model *m);
/* 1 when the model's labels are sets of classes (model.multi_label: common/labelset.h), else 0. */
int tfx_model_multi_label(const tfx_model *m);
/* The number of outputs per example. */
size_t tfx_model_output_size(const tfx_model *m);
/* Runs the forward pass on x [batch, input] (borrowed); returns the logits (borrowed from the model). An
 * embedding id outside its table gives a zero row and no gradient: tfx_model_input_status reports it. */
const float *tfx_model_forward(tfx_model *m, const float *x, int batch, int training, uint64_t step);
/* Loss and accuracy of the last forward against labels; with grad != 0 also seeds backward. A label outside
 * [0, classes) adds no loss, no gradient and no hit: check them first with tfx_model_check_labels. */
void tfx_model_loss(tfx_model *m, const int32_t *labels, int batch, int grad, tfx_step_stats *st);
/* Lends the model the weights of the next training batch's examples (data.weight_key; borrowed until the next
 * call; NULL: all 1). With grad, tfx_model_loss weighs example b's loss by w[b] times its class's weight
 * (model.class_weights) and smooths its targets (model.label_smoothing), Keras's way: the mean over the batch of
 * the weighted losses. Without grad (evaluation) the loss is the plain one, comparable across experiments. */
void tfx_model_set_example_weights(tfx_model *m, const float *w);
/* TFX_EINVAL naming the layer, the first embedding id of the last forward outside its table and the table's
 * size, with that id's example (its position in the batch) in *example (NULL allowed; written only on this
 * error, which the caller prefixes with the example's name); TFX_OK if every id was inside. */
int tfx_model_input_status(const tfx_model *m, int *example, tfx_err *err);
/* TFX_EINVAL naming the first label outside [0, classes) and the class count, with its position in the batch
 * in *example (NULL allowed; written only on this error); TFX_OK if all are inside. */
int tfx_model_check_labels(const tfx_model *m, const int32_t *labels, int batch, int *example, tfx_err *err);
/* 1 when the model reads sparse fields (it has an embedding_bag): feed them with tfx_model_set_csr, then call
 * forward and backward with x the dense part (NULL for a LibSVM row). */
int tfx_model_sparse_input(const tfx_model *m);
/* Lends the model the sparse batch, one CSR per field (borrowed until the next call), its next forward and
 * backward read; grows the bag buffers to their ids (TFX_ENOMEM naming the layer when that fails). */
int tfx_model_set_csr(tfx_model *m, const tfx_csr *fields, int n_fields, tfx_err *err);
/* Where forward reads the rows of lazy tables from (tfx_model_set_rows). */
typedef enum tfx_rows {
  TFX_ROWS_TABLE, /* the table itself, in value: a process that holds the whole table (the default) */
  TFX_ROWS_BATCH, /* the lent batch's rows, batch_vals, which the caller fills after tfx_model_set_csr and before
                     forward: from its parameter servers, a checkpoint's row files, or tfx_model_gather_rows */
} tfx_rows;
/* Sets where forward reads the rows of lazy tables from, from the next tfx_model_set_csr on; with TFX_ROWS_BATCH
 * tfx_model_set_csr lists each lazy table's rows the batch touches in its batch_ids. */
void tfx_model_set_rows(tfx_model *m, tfx_rows rows);
/* With TFX_ROWS_BATCH, copies the lent batch's rows of each lazy table (batch_ids) from the table's own values
 * into batch_vals: a process that holds its tables gathers them as a worker gathers them from its ps; does
 * nothing with TFX_ROWS_TABLE. */
void tfx_model_gather_rows(tfx_model *m);
/* Backward pass after forward+loss: writes every variable's grad (overwrites). */
void tfx_model_backward(tfx_model *m, const float *x, int batch);
/* For a binary classifier (one sigmoid output, or two softmax classes): a score of class 1 per example of the
 * last forward into out [batch], ordered as its probability (for AUC), and returns 1; for a multi-label model each
 * output's logit into out [batch, outputs], returning the outputs; returns 0 (nothing written) otherwise. */
int tfx_model_scores(const tfx_model *m, int batch, float *out);
/* The predicted class of each example of the last forward into out [batch]: the first largest logit, or for one
 * sigmoid output 1 when its logit is above 0 (probability above 0.5, Keras's threshold), or for a multi-label model
 * the set (common/labelset.h) of the outputs above 0; returns the number of classes a label may name, or 0
 * (nothing written) for a regression (mse) model. */
int tfx_model_predictions(const tfx_model *m, int batch, int32_t *out);
/* The probabilities of the last tfx_model_loss [batch, outputs]: softmax, or each output's sigmoid (one sigmoid
 * output, model.multi_label); borrowed from the model until its next loss. */
const float *tfx_model_probs(const tfx_model *m);
/* Softmax probabilities of the last forward into out [batch, classes]. */
void tfx_model_probabilities(const tfx_model *m, int batch, float *out);
/* Prints the layer table: output shapes, variables, parameter counts, bytes. */
void tfx_model_print(const tfx_model *m, FILE *f);
/* The K of the top-K hits the model counts (tfx_step_stats.top5). */
int tfx_model_top_k(const tfx_model *m);
/* The total number of parameters. */
size_t tfx_model_param_count(const tfx_model *m);
/* Clips every trainable grad by value (if > 0) then by global norm (if > 0); returns the norm before. */
double tfx_model_clip(tfx_model *m, double clip_value, double clip_norm);

#endif
