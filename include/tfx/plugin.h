/* tfx plugin API: write a model in C the way tensorfx's ModelBuilder or Determined's trials let you, and hooks
 * into the training life cycle (Estimator's SessionRunHooks).
 *
 * A plugin is a shared object that exports `tfx_plugin_entry`. The experiment names it:
 *   "model": {"plugin": "libmymodel.so", "params": {...}}
 * tfx loads it with dlopen in the process that reads the experiment (the chief, or `tfx-node train`) and calls
 * `build` with the params as JSON text. `build` declares the model:
 *   - its own variables (tfx_builder_variable: name, shape, initializer, trainable), placed on the ps by the
 *     device setter like every layer's variables;
 *   - the forward pass as a graph of tfx's layers and ops, each reading earlier ones by name (tfx_builder_op,
 *     tfx_builder_layer): matmul / bias_add / lookup on declared variables, activations, scale, concat, add,
 *     and every layer of the experiment format (dense, conv2d, embedding, ...). The last one gives the logits;
 *   - the loss and the metrics reported (tfx_builder_loss, tfx_builder_metrics).
 * Backward is derived by tfx: every op has its gradient, a lookup's table gets a row-sparse one, and a value
 * read by several ops gets the sum of their gradients. The model becomes part of the experiment (model.variables
 * and model.layers, see README.md), which the chief sends to the ps and workers as JSON: they need no copy of
 * the plugin (started from TF_CONFIG alone they never load it).
 * `hook`, when not NULL, is called at train begin/end, after every metrics report, after every evaluation and
 * after every checkpoint; returning nonzero asks the run to stop (it checkpoints and ends normally).
 *
 * Errors: every tfx_builder_* function returns 0 on success and nonzero on bad input; after the first failure
 * every later call fails too and the plugin is refused with that first reason, even if build returns 0. A plugin built
 * against another TFX_PLUGIN_ABI_VERSION is refused with a clear error (`tfx-node` exits with status 2). Not
 * thread-safe: tfx calls build and hook from one thread. Strings passed in are borrowed until the call returns. */
#ifndef TFX_PLUGIN_API_H
#define TFX_PLUGIN_API_H

/* 2: variables, graph ops and metrics (1: a plain list of layers). */
#define TFX_PLUGIN_ABI_VERSION 2

typedef struct tfx_builder tfx_builder;

/* Sets the input shape of one example: 1 to 3 dimensions (height, width, channels for images). */
int tfx_builder_input(tfx_builder *b, int rank, const int *shape);
/* Declares a variable named `name` of shape[0..rank) (1 to 4 positive dims) for matmul ([inputs, units]),
 * bias_add ([channels]) or lookup ([vocabulary, dim], row-sparse updates). initializer: as in the experiment
 * (zeros, ones, constant:V, uniform:A, normal:S, truncated_normal:S, glorot_uniform, glorot_normal, he_uniform,
 * he_normal); NULL: glorot_uniform for rank 2, zeros otherwise. trainable 0 keeps it fixed. */
int tfx_builder_variable(tfx_builder *b, const char *name, int rank, const int *shape, const char *initializer,
                         int trainable);
/* Appends one op named `name` (NULL: type_N) reading `inputs`: comma-separated names of earlier ops or "input"
 * (NULL: the previous op; the model input for the first). op: matmul, bias_add or lookup (on the declared
 * `variable`), concat or add (two or more inputs), relu, tanh, sigmoid, leaky_relu, softmax, flatten. */
int tfx_builder_op(tfx_builder *b, const char *op, const char *name, const char *inputs, const char *variable);
/* Appends a layer given as a JSON object, exactly as in the experiment's model.layers, e.g.
 * {"type": "dense", "units": 128, "activation": "relu", "inputs": "embed"} or {"type": "scale", "rate": 0.5}. */
int tfx_builder_layer(tfx_builder *b, const char *layer_json);
/* Sets the loss: softmax_cross_entropy, sigmoid_cross_entropy or mse. */
int tfx_builder_loss(tfx_builder *b, const char *loss);
/* Names the evaluation metrics reported, comma-separated, as model.metrics: loss, accuracy, top_K, auc, log_loss,
 * precision, recall, f1, precision_K, recall_K, f1_K, auc_K, per_class (e.g. "accuracy,top_3,f1"). */
int tfx_builder_metrics(tfx_builder *b, const char *metrics);

typedef enum tfx_hook_event {
  TFX_HOOK_TRAIN_BEGIN,
  TFX_HOOK_STEP,       /* a training metrics report: step, loss, accuracy */
  TFX_HOOK_EVAL,       /* an evaluation: step, loss, accuracy on the eval set */
  TFX_HOOK_CHECKPOINT, /* a complete checkpoint at step */
  TFX_HOOK_TRAIN_END,
} tfx_hook_event;

typedef struct tfx_hook_info {
  tfx_hook_event event;
  long long step;
  double loss, accuracy;
  const char *run_dir;
} tfx_hook_info;

typedef struct tfx_plugin {
  int abi_version; /* TFX_PLUGIN_ABI_VERSION */
  const char *name;
  /* Declares the model from params_json (the experiment's model.params, "{}" if absent); 0 on success. */
  int (*build)(tfx_builder *b, const char *params_json);
  /* Optional: sees every event; returns nonzero to request a stop. */
  int (*hook)(const tfx_hook_info *info);
} tfx_plugin;

/* The one symbol a plugin must export. */
const tfx_plugin *tfx_plugin_entry(void);

/* Metrics of the plugin's own (optional): a plugin that also exports `tfx_plugin_metrics` adds training and
 * evaluation metrics, recorded beside the built-in ones (metrics.jsonl train and eval records, TensorBoard,
 * /metrics' tfx_eval_metric and tfx_train_metric) under their names. Each metric keeps a small state of doubles,
 * zeroed by tfx before the first batch; `update` adds one batch of predictions and labels to it (on a worker's
 * training batches between two reports, on an evaluator's or worker's slice of the eval set); the states of
 * several processes are combined by `aggregation`, then `result` gives the value:
 *   TFX_METRIC_SUM   states add up element by element; value result(state) (NULL: state[0]);
 *   TFX_METRIC_MEAN  states add up, value result(state) / examples (NULL result: state[0] / examples): the
 *                    example-weighted mean of what update summed;
 *   TFX_METRIC_MERGE the plugin's `merge(into, from)` combines two states (e.g. a maximum); value result(state).
 * The process that loads the model plugin (the chief, `tfx-node train`) checks the table and names the metrics in
 * the experiment (model.plugin_metrics); workers and evaluators then load the same file to compute them. A table
 * with a missing callback, a state larger than TFX_METRIC_STATE_MAX or a name that is not [a-z][a-z0-9_]* (or a
 * built-in metric's) is refused naming the plugin and the metric (exit status 2); an update returning nonzero or a
 * value that is NaN or infinite is logged naming the metric (PLUGIN-METRIC) and the value left out of the record.
 * Callbacks run on the thread that computes (one at a time per process) and must not keep the pointers. */
#define TFX_METRIC_STATE_MAX 16 /* doubles of state a metric may keep */
#define TFX_METRICS_MAX 8       /* metrics a plugin may declare */

typedef enum tfx_metric_aggregation { TFX_METRIC_SUM, TFX_METRIC_MEAN, TFX_METRIC_MERGE } tfx_metric_aggregation;

/* One batch: n examples of `outputs` probabilities each (softmax; a single sigmoid output's P(class 1); each
 * output's sigmoid for model.multi_label) and their labels (a class index; model.multi_label: the set as bits,
 * bit k for class k: labels[i] & (1 << k), bit 31 set). weights: data.weight_key's example weights, or NULL. */
typedef struct tfx_metric_batch {
  int n, outputs;
  const float *probs;
  const int *labels;
  const float *weights;
  int training; /* 1: a training batch (the forward pass with dropout); 0: evaluation */
  int multi_label;
} tfx_metric_batch;

typedef struct tfx_metric_def {
  const char *name; /* the record's key, up to 23 characters */
  int state_size;   /* doubles, 1 .. TFX_METRIC_STATE_MAX */
  tfx_metric_aggregation aggregation;
  /* Adds a batch to state; nonzero marks the metric failed for this record. */
  int (*update)(double *state, const tfx_metric_batch *batch, void *ctx);
  /* TFX_METRIC_MERGE only (required there): combines from into into. */
  void (*merge)(double *into, const double *from, void *ctx);
  /* The value of a (merged) state; NULL: state[0]. */
  double (*result)(const double *state, void *ctx);
  void *ctx; /* handed to every callback */
} tfx_metric_def;

typedef struct tfx_metric_set {
  int abi_version; /* TFX_PLUGIN_ABI_VERSION */
  int n;           /* 1 .. TFX_METRICS_MAX */
  const tfx_metric_def *metrics;
} tfx_metric_set;

/* The optional symbol that declares the metrics. */
const tfx_metric_set *tfx_plugin_metrics(void);

#endif
