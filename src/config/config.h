/* The experiment: one JSON file in sections (model, data, optimizer, training, placement, checkpoint, eval)
 * read into a plain tfx_config. One option table (path, type, bounds, default) drives parsing, validation,
 * --set overrides and printing. Unknown keys are errors that name the key. json-c never leaves config.c.
 * tfx_config is a plain value owned by the caller (tfx_config_init fills defaults; nothing to free). */
#ifndef TFX_CONFIG_H
#define TFX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Options with a fixed set of values are C enums, parsed once by the option table (redis's createEnumConfig):
 * each X-macro lists (ENUM_VALUE, "option text") in the enum's order, and tfx_config_choice_name turns a value
 * back into its text. */
#define TFX_MODES(X) X(TFX_MODE_SYNC, "sync") X(TFX_MODE_ASYNC, "async") X(TFX_MODE_SSP, "ssp")
#define TFX_OPTIMIZERS(X)                                                                                       \
  X(TFX_OPT_SGD, "sgd")                                                                                         \
  X(TFX_OPT_MOMENTUM, "momentum")                                                                               \
  X(TFX_OPT_ADAGRAD, "adagrad") X(TFX_OPT_RMSPROP, "rmsprop") X(TFX_OPT_ADAM, "adam") X(TFX_OPT_ADAMW, "adamw") \
      X(TFX_OPT_FTRL, "ftrl")
#define TFX_SCHEDULES(X)                  \
  X(TFX_SCHED_CONSTANT, "constant")       \
  X(TFX_SCHED_EXPONENTIAL, "exponential") \
  X(TFX_SCHED_STEP, "step") X(TFX_SCHED_COSINE, "cosine") X(TFX_SCHED_PIECEWISE, "piecewise")
#define TFX_STRATEGIES(X) X(TFX_STRATEGY_ROUND_ROBIN, "round_robin") X(TFX_STRATEGY_GREEDY_BYTES, "greedy_bytes")
#define TFX_PARTITIONS(X) X(TFX_PARTITION_MOD, "mod") X(TFX_PARTITION_RANGE, "range")
#define TFX_LOSSES(X)                                        \
  X(TFX_LOSS_SOFTMAX_CROSS_ENTROPY, "softmax_cross_entropy") \
  X(TFX_LOSS_SIGMOID_CROSS_ENTROPY, "sigmoid_cross_entropy") X(TFX_LOSS_MSE, "mse")
#define TFX_FORMATS(X) \
  X(TFX_FORMAT_IDX, "idx") X(TFX_FORMAT_CSV, "csv") X(TFX_FORMAT_LIBSVM, "libsvm") X(TFX_FORMAT_TFRECORD, "tfrecord")
#define TFX_SHARD_KINDS(X) X(TFX_SHARD_BY_RECORD, "record") X(TFX_SHARD_BY_FILE, "file")
#define TFX_NAN_POLICIES(X) X(TFX_NAN_REJECT, "reject") X(TFX_NAN_SKIP, "skip")
#define TFX_ON_ERRORS(X) X(TFX_ON_ERROR_STOP, "stop") X(TFX_ON_ERROR_SKIP, "skip")
#define TFX_TRANSPORTS(X) X(TFX_TRANSPORT_IPC, "ipc") X(TFX_TRANSPORT_TCP, "tcp")
#define TFX_SEARCH_METHODS(X) X(TFX_SEARCH_RANDOM, "random") X(TFX_SEARCH_GRID, "grid")
/* Which way a watched metric improves (checkpoint.keep_best, training.early_stopping); auto: down for loss and
 * log_loss, up for the others. */
#define TFX_WATCH_MODES(X) X(TFX_WATCH_AUTO, "auto") X(TFX_WATCH_MIN, "min") X(TFX_WATCH_MAX, "max")

#define TFX_CHOICE_VALUE(value, text) value,
/* The most a backup's log of a lazy instance's sync steps holds until a checkpoint holds them, in bytes of received
 * batches (cluster.replicas 1: ps/replog.c keeps it, master/plan.c prints it); past it the oldest are applied. */
#define TFX_REPLICA_LOG_BYTES ((size_t)64 << 20)
/* The largest checkpoint.every_steps under which a lazy table's backup is kept by the checkpoints (ps/rules.c): the
 * workers keep every push since the last one. */
#define TFX_REPLICA_CKPT_STEPS_MAX 4096

typedef enum tfx_mode { TFX_MODES(TFX_CHOICE_VALUE) } tfx_mode;
typedef enum tfx_opt_kind { TFX_OPTIMIZERS(TFX_CHOICE_VALUE) } tfx_opt_kind; /* ftrl: slots "accum", "linear" */
typedef enum tfx_schedule { TFX_SCHEDULES(TFX_CHOICE_VALUE) } tfx_schedule;
typedef enum tfx_strategy { TFX_STRATEGIES(TFX_CHOICE_VALUE) } tfx_strategy;
typedef enum tfx_partition { TFX_PARTITIONS(TFX_CHOICE_VALUE) } tfx_partition;
typedef enum tfx_loss { TFX_LOSSES(TFX_CHOICE_VALUE) } tfx_loss;
typedef enum tfx_format { TFX_FORMATS(TFX_CHOICE_VALUE) } tfx_format;
typedef enum tfx_shard_by { TFX_SHARD_KINDS(TFX_CHOICE_VALUE) } tfx_shard_by;
typedef enum tfx_nan_policy { TFX_NAN_POLICIES(TFX_CHOICE_VALUE) } tfx_nan_policy;
typedef enum tfx_on_error { TFX_ON_ERRORS(TFX_CHOICE_VALUE) } tfx_on_error;
typedef enum tfx_transport { TFX_TRANSPORTS(TFX_CHOICE_VALUE) } tfx_transport;
typedef enum tfx_search_method { TFX_SEARCH_METHODS(TFX_CHOICE_VALUE) } tfx_search_method;
typedef enum tfx_watch_mode { TFX_WATCH_MODES(TFX_CHOICE_VALUE) } tfx_watch_mode;

#define TFX_MAX_CLASS_WEIGHTS 1024
/* The most classes whose counts an evaluation keeps (per-class metrics, the confusion matrix): their matrix is
 * 8 * 128 * 128 bytes = 128 KiB per evaluation (a worker's eval reply sends it as int64); a model with more
 * classes reports no per-class fields. */
#define TFX_MAX_CLASSES 128

#define TFX_MAX_LAYERS 96
#define TFX_PATH_MAX 512

/* training.max_steps of a run that goes on until stopped (a followed directory without max_steps). */
#define TFX_STEPS_FOREVER ((int64_t)1000000000000000000LL)

typedef struct tfx_layer_spec {
  char type[24];        /* dense, conv2d, max_pool2d, avg_pool2d, flatten, relu, ..., dropout */
  char name[64];        /* auto-named type_N when empty */
  char activation[16];  /* fused activation of dense/conv2d: none, relu, tanh, sigmoid, leaky_relu */
  char padding[8];      /* same | valid */
  char initializer[24]; /* kernel initializer */
  /* strides 0: the layer's default (1 for conv2d, pool_size for pooling, as Keras's strides=None) */
  int units, filters, kernel_size, strides, pool_size, input_dim; /* input_dim: embedding vocabulary */
  double rate;                                                    /* dropout rate, leaky_relu alpha, scale factor */
  char inputs[512];  /* comma-separated names of earlier layers or "input"; empty: the previous layer */
  char variable[64]; /* matmul, bias_add, lookup: the model.variables entry the op computes with */
  char combiner[12]; /* embedding_bag: sum | mean | sqrtn | sequence (TensorFlow's embedding_lookup_sparse combiners) */
  int use_bias;      /* embedding_bag: adds a bias of units values (default true: the wide/linear model) */
  int rank;          /* cross: the rank r of its kernel V [d, r] U [r, d] (0: a full [d, d] kernel) */
  char table[64];    /* embedding_bag: an earlier embedding_bag whose table it reads (one id space); empty: its own */
  /* embedding_bag's lazy table on each ps (docs/experiment.md, "Training that never ends"): */
  int64_t max_rows;         /* a hard cap of rows per ps, least recently touched evicted first (0: none) */
  int64_t ttl_steps;        /* rows untouched for this many steps are evicted (0: never) */
  int admit_min_count;      /* a row is made once its id was pushed this many times (0 or 1: at once) */
  double admit_probability; /* else a row is made with this probability per push (1: always) */
} tfx_layer_spec;

#define TFX_MAX_VARIABLES 16

/* A variable declared by the model itself (model.variables, or a plugin's tfx_builder_variable) for the graph
 * ops matmul, bias_add and lookup to use; placed on the ps like any layer's variables. */
typedef struct tfx_var_spec {
  char name[64];
  char shape[48];       /* comma-separated positive dims, e.g. "784,10" */
  char initializer[24]; /* as a layer's initializer; empty: glorot_uniform (rank 2) or zeros */
  int trainable;
} tfx_var_spec;

#define TFX_MAX_FEATURES 64

/* A feature column (TensorFlow's tf.feature_column): how one column of a record (a CSV header name) becomes model
 * input. numeric: a float of the dense input; identity: integer ids in [0, num_buckets); hash: strings or
 * integers hashed (xxHash XXH3-64, seed 0, of the text) into hash_bucket_size buckets; crossed: the tuple of the
 * keys' values hashed likewise. A separator makes the column multi-valued (a bag of ids per record); weight_key
 * names a column of per-id weights. Categorical columns are sparse fields that embedding_bag layers read by name. */
typedef struct tfx_feature_spec {
  char name[64];            /* the name layers read ("inputs"); default: key */
  char key[64];             /* the record's column */
  char type[16];            /* numeric | identity | hash | crossed */
  int64_t num_buckets;      /* identity */
  int64_t hash_bucket_size; /* hash, crossed */
  char keys[192];           /* crossed: comma-separated columns */
  char separator[4];        /* multi-valued: the separator of the values in one cell ("": one value) */
  char weight_key[64];      /* optional: the column of per-value weights */
  int required;             /* an empty cell is an error (else an empty bag, or default_value) */
  double default_value;     /* numeric: the value of an empty cell */
  char normalizer[8];       /* numeric: "" (as is) or log1p (sign(x) * log(1 + |x|), for counts) */
  int64_t max_len;          /* identity, hash: a sequence of at most max_len ids in the cell's order (0: a bag) */
} tfx_feature_spec;

#define TFX_MAX_VALSETS 8

/* A named validation set (tfutils validation targets, Determined's validation): its own files, frequency,
 * number of batches of 1000 (0: the whole set) and aggregation of per-batch metrics. */
typedef struct tfx_valset {
  char name[32];
  char images[TFX_PATH_MAX], labels[TFX_PATH_MAX];
  int64_t every_steps;
  int batches;
  char agg[96]; /* mean (example-weighted) | min | max | sum, or per metric: "accuracy:mean,loss:max" (the
                   "metrics" object {"accuracy": "mean", "loss": "max"}), which also names the metrics reported */
  int first;    /* also at step 0 */
} tfx_valset;

typedef struct tfx_config {
  char name[128]; /* the experiment's top-level "name" (serve answers /v1/models/NAME); "" when absent */
  /* model */
  int input_shape[3];
  int input_rank;
  tfx_layer_spec layers[TFX_MAX_LAYERS];
  int n_layers;
  tfx_var_spec variables[TFX_MAX_VARIABLES];
  int n_variables;
  tfx_feature_spec features[TFX_MAX_FEATURES]; /* model.features: the feature columns (none: the file's row) */
  int n_features;
  tfx_loss loss;
  char class_weights[4096]; /* model.class_weights: comma-separated loss weights of classes 0, 1, ... ("": all 1) */
  double label_smoothing;   /* model.label_smoothing: targets (1 - e) one-hot + e / classes (0: off) */
  int multi_label;          /* model.multi_label: several sigmoid outputs, a label is a set (common/labelset.h) */
  int in_batch_negatives; /* model.in_batch_negatives: a softmax trained against the batch's labels only */
  int logq_correction;    /* model.logq_correction: in-batch logits less log of the label's trained share */
  char metrics[128];         /* model.metrics: reported evaluation metrics, e.g. "loss,accuracy,top_5" */
  char plugin[TFX_PATH_MAX]; /* model.plugin: a shared object that builds the model (see include/tfx/plugin.h) */
  char plugin_params[2048];  /* model.params as JSON text */
  char plugin_metrics[200];  /* model.plugin_metrics: the plugin's own metrics (set by tfx_plugin_load) */
  char hooks[256];           /* built-in hooks: stop_at_step:N, nan_guard, log_every:N (comma-separated) */
  /* data */
  char train_images[TFX_PATH_MAX], train_labels[TFX_PATH_MAX];
  char eval_images[TFX_PATH_MAX], eval_labels[TFX_PATH_MAX];
  double data_scale;
  double data_mean, data_std; /* after scale: x = (x * scale - mean) / std; std > 0 */
  tfx_format data_format;
  char label_column[64];               /* csv: header name or index */
  int data_header;                     /* csv: first line is a header */
  char feature_key[64], label_key[64]; /* tfrecord: tf.train.Example feature names */
  char weight_key[64];                 /* data.weight_key: csv column / tfrecord feature of example weights */
  int data_stream;                     /* read the training files a window at a time */
  char train_follow[TFX_PATH_MAX];     /* data.train.follow: a directory whose files are read as they land */
  tfx_on_error data_on_error;          /* data.on_error: a bad record in streamed training data */
  int progressive_window;              /* training.progressive_window: examples of the rolling AUC / log loss */
  tfx_shard_by shard_by;
  int shuffle_buffer; /* examples per shuffled window when streaming */
  int data_shuffle;   /* shuffle the training examples every epoch; 0: file order */
  /* optimizer */
  tfx_opt_kind optimizer;
  double learning_rate, momentum, beta1, beta2, epsilon, weight_decay;
  double l1, l2, lr_power, initial_accumulator; /* ftrl (McMahan et al. 2013, TensorFlow's Ftrl) */
  int nesterov;
  tfx_schedule schedule;
  char boundaries[256], lr_values[256]; /* piecewise: comma-separated steps and rates */
  double decay_rate;
  int64_t decay_steps, warmup_steps;
  /* training */
  tfx_mode mode;
  char trainable[512]; /* comma-separated variable-name prefixes to train; empty: all */
  int64_t max_steps, steps;
  int epochs; /* passes over the training set (0: no limit); the budget is src/data/epochs.h's */
  int batch_size, replicas_to_aggregate, staleness, accumulate, report_every, threads, ps_apply_threads;
  int push_part_bytes;       /* async/ssp push-pull in parts of this many bytes (0: whole) */
  int rows_with_push;        /* lazy tables: a batch's rows ride on the push-pull of the step before */
  tfx_nan_policy nan_policy; /* a push with NaN/Inf */
  int deterministic;         /* sync: a step sums its gradients in worker order, whatever order they came in */
  int64_t seed;
  double thres_loss, clip_norm, clip_value;
  /* placement */
  tfx_strategy strategy;
  tfx_partition table_partition; /* lazy tables over the ps: mod (id % n_ps) | range (contiguous ids) */
  int64_t min_slice_bytes;
  int max_shards;
  /* checkpoint */
  int64_t ckpt_every_steps, ckpt_every_secs;
  int64_t ckpt_min_interval_secs;
  int max_steps_given;
  /* training.max_steps was set (file, --set or --max-steps): it caps training.epochs */ /* train: periodic
                                                                                            (background) checkpoints
                                                                                            at least this far apart
                                                                                          */
  int keep_max;
  int ckpt_incremental; /* checkpoint.incremental: lazy tables write the rows changed since the last checkpoint */
  int ckpt_full_every;  /* checkpoint.full_every: a full checkpoint after this many deltas */
  int ckpt_fp16;        /* checkpoint.fp16: lazy tables' rows stored as IEEE half in checkpoints */
  int ckpt_background;  /* checkpoint.background: a ps writes its checkpoints from a copy in a writer thread */
  int ckpt_save_initial; /* checkpoint the initial weights at step 0 of a fresh run */
  char keep_best_metric[16]; /* checkpoint.keep_best.metric: keep the best checkpoint by it ("": off) */
  tfx_watch_mode keep_best_mode;
  int export_every_ckpt, export_on_best; /* export.every_checkpoint, export.on_best */
  char export_dir[TFX_PATH_MAX];         /* export.dir ("": RUN/export) */
  /* training.early_stopping: stop after `patience` evaluations without an improvement of more than min_delta */
  char stop_metric[16]; /* "": off */
  tfx_watch_mode stop_mode;
  int stop_patience;
  double stop_min_delta;
  /* search */
  tfx_search_method search_method;
  int search_early_stopping;
  /* warm start */
  char warm_from[TFX_PATH_MAX], warm_restore[512], warm_rename[1024];
  /* validation: named sets besides eval */
  tfx_valset valsets[TFX_MAX_VALSETS];
  int n_valsets;
  /* eval */
  int64_t eval_every_steps;
  int validate_first;
  int eval_distributed; /* eval.distributed: the workers score slices of the eval set, the chief merges */
  /* observe */
  int http_port; /* the master's HTTP port for /metrics, /status and / (0: off) */
  /* cluster timing */
  int register_timeout_s, request_timeout_s;
  int ps_replicas;   /* cluster.replicas: 1 = each ps instance has a backup on the next ps; -1 auto until resolved */
  int replicas_auto; /* cluster.replicas was auto (-1) and tfx_config_resolve_replicas decided it */
  int replica_batch_steps; /* cluster.replica_batch_steps: sync steps a primary forwards to its backup at once */
  tfx_transport local_transport; /* tfx-node local: Unix sockets (default) or TCP */
  int local_pin_cpus;            /* tfx-node local: 1 pins each ps and worker to one CPU, 0 never, -1 auto */
  int64_t max_message_bytes;     /* the largest frame a socket accepts (ZMQ_MAXMSGSIZE); 0: from the model */
  /* security: CURVE key files (see curve.h); none named means plaintext */
  int security_plaintext; /* explicit plaintext (an error if keys are named too) */
  char server_key[TFX_PATH_MAX], client_key[TFX_PATH_MAX], authorized_keys[TFX_PATH_MAX];
} tfx_config;

#define TFX_MAX_PIECES 16

/* Parses the piecewise schedule (optimizer.boundaries, optimizer.values) into bounds[*n_bounds] and
 * values[*n_bounds + 1]; errors name the key and the bad entry. */
int tfx_config_piecewise(const tfx_config *cfg, int64_t bounds[TFX_MAX_PIECES], double values[TFX_MAX_PIECES + 1],
                         int *n_bounds, tfx_err *err);
/* Parses model.class_weights into out[0..*n) (at most max; *n = 0 when empty); errors name the bad entry. */
int tfx_config_class_weights(const tfx_config *cfg, double *out, int max, int *n, tfx_err *err);
/* Fills cfg with every default of the option table. */
void tfx_config_init(tfx_config *cfg);
/* Reads a JSON text over cfg (later sources override earlier ones); errors name the key path. */
int tfx_config_parse(tfx_config *cfg, const char *json, const char *origin, tfx_err *err);
/* Reads the file at path over cfg. */
int tfx_config_load(tfx_config *cfg, const char *path, tfx_err *err);
/* The top-level key of tfx_config_to_json's format version; 2 since pooling layers took strides. */
#define TFX_CONFIG_FORMAT_KEY "tfx_config_format"
#define TFX_CONFIG_FORMAT 2
/* Reads a config that tfx wrote (a run's config.json, an export's model.json) over cfg: as tfx_config_load,
 * and a file without the format key, written before pooling layers took strides, keeps their stride = pool_size
 * (its pooling layers carry the unused default 1). */
int tfx_config_load_saved(tfx_config *cfg, const char *path, tfx_err *err);
/* Applies the environment's TFX_SECURITY_* variables (TFX_SECURITY_SERVER_KEY for security.server_key, ...) and
 * TFX_CLUSTER_MAX_MESSAGE_BYTES (a ps started without the experiment needs it before the master sends one)
 * over cfg: they override the file and are overridden by --set. Errors name the variable. */
int tfx_config_apply_env(tfx_config *cfg, tfx_err *err);
/* Applies one "section.key=value" override, type-checked like the file. */
int tfx_config_set(tfx_config *cfg, const char *assignment, tfx_err *err);
/* Checks cross-field rules (mode names, layer types, positive sizes). */
int tfx_config_validate(const tfx_config *cfg, tfx_err *err);
/* The rules that need the cluster's size (a sync step aggregates at most n_workers replicas), checked wherever it
 * is known before a process starts: a chief from TF_CONFIG, local from its flags. */
int tfx_config_validate_cluster(const tfx_config *cfg, int n_workers, tfx_err *err);
/* Why cluster.replicas auto stays off for this experiment on n_ps ps and n_workers workers (a static string: one
 * ps, no other to hold a backup), or NULL: auto is on wherever there are 2 ps or more, in every mode. */
const char *tfx_config_replicas_off(const tfx_config *cfg, int n_ps, int n_workers);
/* Turns cluster.replicas auto (-1) into 0 or 1 by tfx_config_replicas_off (and marks cfg->replicas_auto); an
 * explicit 0 or 1 is kept. Every role calls it with the cluster's counts, so all decide alike. */
void tfx_config_resolve_replicas(tfx_config *cfg, int n_ps, int n_workers);
/* The number of the feature columns that are categorical (sparse fields), and of the numeric ones (the dense
 * input's width). */
int tfx_config_sparse_fields(const tfx_config *cfg);
int tfx_config_numeric_features(const tfx_config *cfg);
/* 1 when the model reads sparse examples: its first layer is an embedding_bag over the model input (the data
 * pipeline then keeps ids and weights as CSR, never a dense row of input_shape values). */
int tfx_config_sparse_input(const tfx_config *cfg);
/* The eval file an error about the eval data names: IDX's labels file when there is one, else the images (or
 * only) file; borrowed from cfg. */
const char *tfx_config_eval_file(const tfx_config *cfg);
/* The part of tfx_config_validate a ps needs: every option with a fixed set of values (mode, nan_policy,
 * optimizer and schedule, ...) holds one of them; errors name the key. */
int tfx_config_validate_choices(const tfx_config *cfg, tfx_err *err);
/* The option text of value v of the fixed-value option at `key` ("training.mode"), "?" when out of range;
 * static. */
const char *tfx_config_choice_name(const char *key, int v);
/* The resolved experiment as pretty JSON; caller owns; free with free(). */
char *tfx_config_to_json(const tfx_config *cfg);
/* Appends one layer given as a JSON object (as in model.layers). */
int tfx_config_add_layer_json(tfx_config *cfg, const char *json, tfx_err *err);
/* Fills a layer spec with the defaults of model.layers entries (type left empty). */
void tfx_config_layer_init(tfx_layer_spec *l);
/* The stride of a conv2d or pooling layer: its strides, or when 0 the layer's default (pool_size for pooling). */
int tfx_config_layer_strides(const tfx_layer_spec *l);
/* The embedding_bag layer whose table is the variable var ("NAME/embeddings"; an unnamed layer is embedding_bag_N,
 * the N-th unnamed one, as src/nn/model.c names it), or NULL (a plugin's table: no cap, no admission); borrowed
 * from cfg. */
const tfx_layer_spec *tfx_config_table_layer(const tfx_config *cfg, const char *var);
/* The bytes a lazy table's row takes on its ps: dim floats of values and of each of n_slots optimizer slots, the
 * id and the step it was last touched (which links a free row to the next; ps/rowtable.c; its map cell:
 * tfx_table_bound). */
size_t tfx_table_row_bytes(int64_t dim, int n_slots);
/* Rows a slab of a lazy table holds on its ps (ps/rowtable.c makes them SLAB_ROWS at a time). */
#define TFX_TABLE_SLAB_ROWS 4096
/* The cells of a capped table's id map at its final size: max_rows at a load of at most 0.7 (16 bytes a cell). */
size_t tfx_table_map_cells(int64_t max_rows);
/* The evicted ids a capped table remembers for the next incremental checkpoint at most (past them: a full one). */
size_t tfx_table_gone_max(int64_t max_rows);
/* The most a capped lazy table holds on each ps, by part, as ps/rowtable.c lays it out (test_rowtable checks a
 * table never holds more): what plan and the ps's PS-TABLE-CAP state. */
typedef struct tfx_table_bound {
  size_t rows;   /* values, slots, ids, touch steps: whole slabs (values and slots on huge pages past
                    2 MiB: whole ones) */
  size_t map;    /* the id map's cells */
  size_t gone;   /* evicted ids remembered for the next delta (incremental checkpoints) */
  size_t sketch; /* admission's counts */
  size_t copy;   /* with checkpoint.background, the copy of a checkpoint's rows and ids the writer thread writes */
  size_t total;  /* the parts and 64 KiB for the table's own bookkeeping */
} tfx_table_bound;
/* Fills *b for a table of max_rows (> 0) rows of dim floats and n_slots slots, with admission by count or not, with
 * incremental checkpoints or not, written from a copy (checkpoint.background) or not. */
void tfx_table_cap_bound(int64_t max_rows, int64_t dim, int n_slots, int admit, int incremental, int background,
                         tfx_table_bound *b);
/* The fixed size of a table's admission sketch on each ps (admit_min_count > 1; ps/rowtable.h makes it). */
#define TFX_TABLE_SKETCH_BYTES (2 * ((size_t)1 << 21) / 8 + 4 * 16384 * 2)
/* Appends one layer spec (type set) to model.layers. */
int tfx_config_add_layer(tfx_config *cfg, const tfx_layer_spec *l, tfx_err *err);
/* Appends one model variable (as in model.variables) after checking its name and shape. */
int tfx_config_add_variable(tfx_config *cfg, const tfx_var_spec *v, tfx_err *err);
/* Writes the option table (path, type, default, bounds) to stdout for --help. */
void tfx_config_print_options(void);

#endif
