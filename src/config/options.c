/* The experiment's option tables (path, type, bounds, default, meaning): the data that drives parsing,
 * validation, --set, the environment and printing; and the texts of the fixed-value options' enums. */
#include <stddef.h>
#include <string.h>

#include "config/config.h"
#include "config/config_impl.h"

#define CHOICE_TEXT(value, text) text,
static const char *const modes[] = {TFX_MODES(CHOICE_TEXT) NULL};
static const char *const optimizers[] = {TFX_OPTIMIZERS(CHOICE_TEXT) NULL};
static const char *const schedules[] = {TFX_SCHEDULES(CHOICE_TEXT) NULL};
static const char *const strategies[] = {TFX_STRATEGIES(CHOICE_TEXT) NULL};
static const char *const table_partitions[] = {TFX_PARTITIONS(CHOICE_TEXT) NULL};
static const char *const losses[] = {TFX_LOSSES(CHOICE_TEXT) NULL};
static const char *const formats[] = {TFX_FORMATS(CHOICE_TEXT) NULL};
static const char *const shard_kinds[] = {TFX_SHARD_KINDS(CHOICE_TEXT) NULL};
static const char *const nan_policies[] = {TFX_NAN_POLICIES(CHOICE_TEXT) NULL};
static const char *const on_errors[] = {TFX_ON_ERRORS(CHOICE_TEXT) NULL};
static const char *const transports[] = {TFX_TRANSPORTS(CHOICE_TEXT) NULL};
static const char *const search_methods[] = {TFX_SEARCH_METHODS(CHOICE_TEXT) NULL};
static const char *const watch_modes[] = {TFX_WATCH_MODES(CHOICE_TEXT) NULL};

#define O(field) offsetof(tfx_config, field), sizeof(((tfx_config *)0)->field)
#define FMNIST "/usr/share/datasets/fashion-mnist/"
#define BIG 1e18

const config__option config__options[] = {
    {"model.loss", OPT_ENUM, O(loss), 0, 0, "softmax_cross_entropy",
     "softmax_cross_entropy | sigmoid_cross_entropy | mse", losses},
    {"model.class_weights", OPT_STR, O(class_weights), 0, 0, "",
     "loss weight of each class, [w0, w1, ...] (one per class; empty: all 1)"},
    {"model.label_smoothing", OPT_DBL, O(label_smoothing), 0, 1, "0",
     "softmax/sigmoid cross-entropy: targets become (1 - e) * onehot + e / classes (sigmoid: e / 2)"},
    {"model.in_batch_negatives", OPT_BOOL, O(in_batch_negatives), 0, 1, "false",
     "softmax_cross_entropy over a catalogue (retrieval): training scores each example against the batch's own labels "
     "only (in-batch softmax), evaluation against every class"},
    {"model.logq_correction", OPT_BOOL, O(logq_correction), 0, 1, "true",
     "in_batch_negatives: subtract log Q(item), the item's share of the labels trained so far (Yi et al. 2019)"},
    {"model.multi_label", OPT_BOOL, O(multi_label), 0, 1, "false",
     "each example has a set of classes (CSV \"1|4\", LibSVM 1,4): one sigmoid_cross_entropy output per class "
     "(up to 31), loss the mean over outputs, accuracy the exact match"},
    {"model.metrics", OPT_STR, O(metrics), 0, 0, "loss,accuracy,top_5",
     "evaluation metrics reported (comma-separated): loss, accuracy, top_K, auc, log_loss, precision, recall, f1 "
     "(class 1 of a binary classifier, else the mean over classes), precision_K, recall_K, f1_K (class K), auc_K "
     "(output K of a multi_label model), per_class (those of every class), confusion (the confusion matrix in eval "
     "records); per-class counts up to 128 classes; above, recall_K is recall@K (K 1, 5, 10, 20, 50, 100) and "
     "baseline_recall_K the popularity ranking's (labels numbered most popular first)"},
    {"model.plugin", OPT_STR, O(plugin), 0, 0, "",
     "shared object whose tfx_plugin_entry builds the model and hooks the run"},
    {"model.plugin_metrics", OPT_STR, O(plugin_metrics), 0, 0, "",
     "the metrics model.plugin's tfx_plugin_metrics declares (written by the process that loads the plugin; "
     "workers and evaluators load the plugin to compute them only when this is not empty)"},
    {"data.train.images", OPT_STR, O(train_images), 0, 0, FMNIST "train-images-idx3-ubyte.gz", "IDX images (.gz ok)"},
    {"data.train.labels", OPT_STR, O(train_labels), 0, 0, FMNIST "train-labels-idx1-ubyte.gz", "IDX labels"},
    {"data.eval.images", OPT_STR, O(eval_images), 0, 0, FMNIST "t10k-images-idx3-ubyte.gz", "IDX images"},
    {"data.eval.labels", OPT_STR, O(eval_labels), 0, 0, FMNIST "t10k-labels-idx1-ubyte.gz", "IDX labels"},
    {"data.scale", OPT_DBL, O(data_scale), 0, BIG, "0.00392156862745098", "feature multiplier"},
    {"data.mean", OPT_DBL, O(data_mean), -BIG, BIG, "0", "subtracted after scale: x = (x * scale - mean) / std"},
    {"data.std", OPT_DBL, O(data_std), -BIG, BIG, "1", "divides after the mean (must be > 0)"},
    {"data.format", OPT_ENUM, O(data_format), 0, 0, "idx",
     "idx (images + labels) | csv | libsvm | tfrecord (the *.images path is the file)", formats},
    {"data.label_column", OPT_STR, O(label_column), 0, 0, "-1", "csv: label column, header name or index (-1: last)"},
    {"data.header", OPT_BOOL, O(data_header), 0, 1, "true", "csv: the first line is a header"},
    {"data.train.follow", OPT_STR, O(train_follow), 0, 0, "",
     "a directory followed for ever: its files read as they land, in name order, each once ('.' names never); "
     "no epochs, no max_steps: the run goes on until stopped"},
    {"data.on_error", OPT_ENUM, O(data_on_error), 0, 0, "stop",
     "a bad record in streamed or followed training data: stop (the run fails naming file and record) | skip (a "
     "DATA-BAD-RECORD warning naming them, counted in bad_records; CSV and LibSVM skip the record, TFRecord, IDX "
     "and feature columns the rest of its file)",
     on_errors},
    {"data.stream", OPT_BOOL, O(data_stream), 0, 1, "false",
     "read the training files a window at a time (files larger than memory); images may be a glob or a list"},
    {"data.shard_by", OPT_ENUM, O(shard_by), 0, 0, "record", "record | file: how workers split the training data",
     shard_kinds},
    {"data.shuffle", OPT_BOOL, O(data_shuffle), 0, 1, "true",
     "shuffle the training examples (and, streaming, the files) every epoch; false: file order, each worker its shard"},
    {"data.shuffle_buffer", OPT_INT, O(shuffle_buffer), 1, 1e8, "10000", "streaming: examples per shuffled window"},
    {"data.feature_key", OPT_STR, O(feature_key), 0, 0, "image", "tfrecord: the Example feature holding the inputs"},
    {"data.label_key", OPT_STR, O(label_key), 0, 0, "label", "tfrecord: the Example feature holding the label"},
    {"data.weight_key", OPT_STR, O(weight_key), 0, 0, "",
     "per-example loss weights: csv column (header name or index) / tfrecord float feature (empty: all 1)"},
    {"optimizer.name", OPT_ENUM, O(optimizer), 0, 0, "adam", "sgd | momentum | adagrad | rmsprop | adam | adamw | ftrl",
     optimizers},
    {"optimizer.learning_rate", OPT_DBL, O(learning_rate), 0, 10, "0.001", "base learning rate"},
    {"optimizer.momentum", OPT_DBL, O(momentum), 0, 1, "0.9", "momentum / rmsprop decay"},
    {"optimizer.nesterov", OPT_BOOL, O(nesterov), 0, 1, "false", "Nesterov momentum"},
    {"optimizer.beta1", OPT_DBL, O(beta1), 0, 1, "0.9", "Adam beta1"},
    {"optimizer.beta2", OPT_DBL, O(beta2), 0, 1, "0.999", "Adam beta2"},
    {"optimizer.epsilon", OPT_DBL, O(epsilon), 0, 1, "1e-7", "Adam/Adagrad/RMSProp epsilon"},
    {"optimizer.weight_decay", OPT_DBL, O(weight_decay), 0, 1, "0", "L2 (AdamW: decoupled) weight decay"},
    {"optimizer.l1", OPT_DBL, O(l1), 0, BIG, "0", "ftrl: L1 strength (exact zeros below it)"},
    {"optimizer.l2", OPT_DBL, O(l2), 0, BIG, "0", "ftrl: L2 strength"},
    {"optimizer.lr_power", OPT_DBL, O(lr_power), -BIG, 0, "-0.5", "ftrl: the rate's power of the squared-gradient sum"},
    {"optimizer.initial_accumulator", OPT_DBL, O(initial_accumulator), 0, BIG, "0.1",
     "ftrl: the squared-gradient sum a weight starts with"},
    {"optimizer.schedule", OPT_ENUM, O(schedule), 0, 0, "constant",
     "constant | exponential | step | cosine | piecewise", schedules},
    {"optimizer.boundaries", OPT_STR, O(boundaries), 0, 0, "", "piecewise: steps where the rate changes, [2000, 4000]"},
    {"optimizer.values", OPT_STR, O(lr_values), 0, 0, "", "piecewise: rates before, between, after the boundaries"},
    {"optimizer.decay_rate", OPT_DBL, O(decay_rate), 0, 1, "0.5", "exponential/step decay factor"},
    {"optimizer.decay_steps", OPT_I64, O(decay_steps), 1, BIG, "1000", "steps per decay"},
    {"optimizer.warmup_steps", OPT_I64, O(warmup_steps), 0, BIG, "0", "linear warmup steps"},
    {"training.mode", OPT_ENUM, O(mode), 0, 0, "sync", "sync | async | ssp", modes},
    {"training.max_steps", OPT_I64, O(max_steps), 1, BIG, "1000", "absolute global step to stop at"},
    {"training.epochs", OPT_INT, O(epochs), 0, 1e6, "0",
     "stop after this many passes over the training set (0: no limit; a max_steps given still caps it)"},
    {"training.steps", OPT_I64, O(steps), 0, BIG, "0", "train this many more steps from where the run stands (0: off)"},
    {"training.hooks", OPT_STR, O(hooks), 0, 0, "",
     "built-in hooks: stop_at_step:N, nan_guard, log_every:N (comma-separated)"},
    {"training.trainable", OPT_STR, O(trainable), 0, 0, "",
     "train only variables whose names start with one of these comma-separated prefixes"},
    {"training.batch_size", OPT_INT, O(batch_size), 1, 65536, "64", "per-worker minibatch"},
    {"training.replicas_to_aggregate", OPT_INT, O(replicas_to_aggregate), 0, 1024, "0", "sync: 0 = all workers"},
    {"training.staleness", OPT_INT, O(staleness), 0, 1000000, "4", "ssp: max steps ahead of the slowest"},
    {"training.accumulate", OPT_INT, O(accumulate), 1, 1024, "1", "minibatches per push"},
    {"training.progressive_window", OPT_INT, O(progressive_window), 0, 1e7, "0",
     "progressive validation: each batch scored before it is trained on; train records carry rolling_auc and "
     "rolling_log_loss over a worker's last N examples (0: off, but 10000 with data.train.follow)"},
    {"training.report_every", OPT_INT, O(report_every), 1, 1000000, "100", "steps between metric reports"},
    {"training.threads", OPT_INT, O(threads), 1, 256, "1", "OpenBLAS and model threads per process"},
    {"training.ps_apply_threads", OPT_INT, O(ps_apply_threads), 1, 2, "1",
     "threads a ps uses to update one large shard"},
    {"training.rows_with_push", OPT_BOOL, O(rows_with_push), 0, 1, "true",
     "lazy tables: the next batch's rows ride on the push-pull of the step before (false: a row pull per batch)"},
    {"training.push_part_bytes", OPT_INT, O(push_part_bytes), 0, 1 << 30, "524288",
     "async/ssp: a push-pull to one ps of at least 4x this goes in pipelined parts of about this size (0: never)"},
    {"training.nan_policy", OPT_ENUM, O(nan_policy), 0, 0, "reject",
     "a push with NaN/Inf gradients: reject (error reply) | skip (dropped, success reply); each counted at the ps",
     nan_policies},
    {"training.deterministic", OPT_BOOL, O(deterministic), 0, 1, "false",
     "sync with every worker aggregated: a ps sums a step's gradients in worker order, not arrival order, so a run "
     "is bit-identical whatever the timing (a push that comes before a lower worker's waits for it)"},
    {"training.seed", OPT_I64, O(seed), 0, BIG, "42", "experiment seed"},
    {"training.thres_loss", OPT_DBL, O(thres_loss), 0, BIG, "1e6", "abort when the training loss exceeds this"},
    {"training.clip_norm", OPT_DBL, O(clip_norm), 0, BIG, "0", "clip gradients by global norm (0: off)"},
    {"training.clip_value", OPT_DBL, O(clip_value), 0, BIG, "0", "clip gradients by value (0: off)"},
    {"placement.strategy", OPT_ENUM, O(strategy), 0, 0, "round_robin", "round_robin | greedy_bytes", strategies},
    {"placement.min_slice_bytes", OPT_I64, O(min_slice_bytes), 0, BIG, "0", "partition variables above this (0: off)"},
    {"placement.max_shards", OPT_INT, O(max_shards), 1, 1024, "1", "max slices per variable"},
    {"placement.table_partition", OPT_ENUM, O(table_partition), 0, 0, "mod",
     "lazy tables (embedding_bag): mod (ps k holds ids % n_ps == k: hot ids spread) | range (contiguous ids)",
     table_partitions},
    {"checkpoint.every_steps", OPT_I64, O(ckpt_every_steps), 0, BIG, "1000", "0: only at the end"},
    {"checkpoint.every_secs", OPT_I64, O(ckpt_every_secs), 0, BIG, "0", "also checkpoint every N seconds (0: off)"},
    {"checkpoint.min_interval_secs", OPT_I64, O(ckpt_min_interval_secs), 0, BIG, "10",
     "train: periodic checkpoints start at least N s apart (one asked meanwhile is taken at the first step after)"},
    {"checkpoint.save_initial", OPT_BOOL, O(ckpt_save_initial), 0, 1, "false",
     "a fresh run checkpoints its initial weights at step 0 (ckpt-000000000000) before the first step"},
    {"checkpoint.keep_max", OPT_INT, O(keep_max), 1, 1000, "3", "checkpoints kept"},
    {"checkpoint.incremental", OPT_BOOL, O(ckpt_incremental), 0, 1, "false",
     "lazy tables write only the rows changed (and evicted) since the last checkpoint, chained to a full one"},
    {"checkpoint.fp16", OPT_BOOL, O(ckpt_fp16), 0, 1, "false",
     "lazy tables' rows (values and optimizer slots) stored as IEEE half in checkpoints: half the bytes, about 3 "
     "significant digits (saturating at 65504); a restore widens them; a change starts a new chain (full)"},
    {"checkpoint.background", OPT_BOOL, O(ckpt_background), 0, 1, "true",
     "a ps copies its checkpoint at the step (values, slots, rows) and a writer thread checksums, writes and fsyncs "
     "it while the ps goes on (false: written in the ps's thread, steps wait)"},
    {"checkpoint.full_every", OPT_INT, O(ckpt_full_every), 1, 100000, "10",
     "incremental: a full checkpoint after this many deltas"},
    {"checkpoint.keep_best.metric", OPT_STR, O(keep_best_metric), 0, 0, "",
     "keep the best checkpoint by this eval metric (loss, accuracy, auc, log_loss, top_K, precision, recall, f1, "
     "precision_K, recall_K, f1_K) beside keep_max "
     "(RUN/checkpoints/best.json names it; empty: off)"},
    {"checkpoint.keep_best.mode", OPT_ENUM, O(keep_best_mode), 0, 0, "auto",
     "auto (min for loss and log_loss, else max) | min | max", watch_modes},
    {"export.every_checkpoint", OPT_BOOL, O(export_every_ckpt), 0, 1, "false",
     "export every checkpoint as it is written, to EXPORT_DIR/STEP"},
    {"export.on_best", OPT_BOOL, O(export_on_best), 0, 1, "false",
     "export each new best checkpoint (checkpoint.keep_best) to EXPORT_DIR/best"},
    {"export.dir", OPT_STR, O(export_dir), 0, 0, "", "where exports go as training goes (empty: RUN/export)"},
    {"training.early_stopping.metric", OPT_STR, O(stop_metric), 0, 0, "",
     "stop when this eval metric (as checkpoint.keep_best.metric) has not improved for patience evaluations "
     "(empty: off)"},
    {"training.early_stopping.mode", OPT_ENUM, O(stop_mode), 0, 0, "auto",
     "auto (min for loss and log_loss, else max) | min | max", watch_modes},
    {"training.early_stopping.patience", OPT_INT, O(stop_patience), 1, 1e6, "5",
     "evaluations without an improvement before stopping"},
    {"training.early_stopping.min_delta", OPT_DBL, O(stop_min_delta), 0, BIG, "0", "an improvement must exceed this"},
    {"search.method", OPT_ENUM, O(search_method), 0, 0, "random", "tfx-node search: random | grid", search_methods},
    {"search.early_stopping", OPT_BOOL, O(search_early_stopping), 0, 1, "true",
     "stop trials below the median at a validation point"},
    {"warm_start.from", OPT_STR, O(warm_from), 0, 0, "",
     "run, checkpoint or export directory to start from (fresh runs only)"},
    {"warm_start.to_restore", OPT_STR, O(warm_restore), 0, 0, "",
     "comma-separated variable-name prefixes to take (empty: all found)"},
    {"warm_start.rename", OPT_STR, O(warm_rename), 0, 0, "",
     "load_param_dict: comma-separated source:model name pairs"},
    {"eval.every_steps", OPT_I64, O(eval_every_steps), 0, BIG, "500", "0: only at the end"},
    {"eval.distributed", OPT_BOOL, O(eval_distributed), 0, 1, "false",
     "clusters: each worker scores its slice of the eval set between steps and the chief merges the sums "
     "(loss, accuracy, top_K, per-class counts and auc exactly: each worker sends its scores)"},
    {"eval.validate_first", OPT_BOOL, O(validate_first), 0, 1, "false", "evaluate at step 0"},
    {"observe.http_port", OPT_INT, O(http_port), 0, 65535, "0",
     "the master serves /metrics, /status and / here (0: off)"},
    {"cluster.register_timeout_s", OPT_INT, O(register_timeout_s), 1, 86400, "60", "wait for peers"},
    {"cluster.request_timeout_s", OPT_INT, O(request_timeout_s), 1, 86400, "60", "deadline of one request"},
    {"cluster.replicas", OPT_INT, O(ps_replicas), -1, 1, "-1",
     "1: every ps shard has a backup on the next ps (ring), promoted when its primary dies (no rollback); -1 auto: "
     "on where it is cheap (sync, 2+ ps, every worker aggregated, deterministic or 2 workers, no embedding table; "
     "MASTER-REPLICAS says)"},
    {"cluster.replica_batch_steps", OPT_INT, O(replica_batch_steps), 1, 64, "16",
     "cluster.replicas 1, sync: a primary forwards its summed steps to the backup every this many steps, in one "
     "message (1: every step), or, dense shards whose steps the pushes rebuild, a snapshot of its values and slots; "
     "workers keep each push until its ps says the backup holds it (up to 2 x this + 2)"},
    {"cluster.local_transport", OPT_ENUM, O(local_transport), 0, 0, "ipc",
     "tfx-node local: ipc (Unix sockets in a private 0700 directory, no keys needed) | tcp (loopback, CURVE)",
     transports},
    {"cluster.local_pin_cpus", OPT_INT, O(local_pin_cpus), -1, 1, "-1",
     "tfx-node local: 1 pins each ps and worker to one CPU of local's own (ps i and worker i share one when there "
     "are as many ps as CPUs); -1 auto: where they outnumber the CPUs and run one thread each; 0 off"},
    {"cluster.max_message_bytes", OPT_I64, O(max_message_bytes), 0, 2147483648.0, "0",
     "largest message frame every socket accepts, from anyone (0: the largest frame the model's steps move, "
     "with margin; TFX_CLUSTER_MAX_MESSAGE_BYTES)"},
    {"security.plaintext", OPT_BOOL, O(security_plaintext), 0, 1, "false",
     "true: plain TCP on purpose (no keys); otherwise plaintext only when no key is named, with a warning"},
    {"security.server_key", OPT_STR, O(server_key), 0, 0, "",
     "CURVE key file of the cluster's servers (NAME.key, mode 0600; a client-only tool may give NAME.pub)"},
    {"security.client_key", OPT_STR, O(client_key), 0, 0, "",
     "this node's CURVE client key file (NAME.key, 0600; default: security.server_key)"},
    {"security.authorized_keys", OPT_STR, O(authorized_keys), 0, 0, "",
     "public key file or directory of *.pub files the servers admit (default: the client key)"},
};
const size_t config__n_options = sizeof config__options / sizeof config__options[0];

#define L(field) offsetof(tfx_layer_spec, field), sizeof(((tfx_layer_spec *)0)->field)
const config__option config__layer_options[] = {
    {"type", OPT_STR, L(type), 0, 0, "",
     "dense conv2d max_pool2d avg_pool2d flatten dropout batch_norm embedding embedding_bag fm bi_interaction "
     "concat add matmul bias_add lookup scale relu tanh sigmoid leaky_relu softmax"},
    {"name", OPT_STR, L(name), 0, 0, "", "the layer's name (default TYPE_N); variables are NAME/kernel, ..."},
    {"activation", OPT_STR, L(activation), 0, 0, "none", "fused activation of dense, conv2d, matmul, bias_add"},
    {"padding", OPT_STR, L(padding), 0, 0, "valid", "conv2d and pooling: same | valid"},
    {"initializer", OPT_STR, L(initializer), 0, 0, "", "kernel initializer, e.g. glorot_uniform, zeros, uniform:0.05"},
    {"units", OPT_INT, L(units), 1, 1 << 24, "1", "outputs of dense, embedding (width), embedding_bag, matmul"},
    {"filters", OPT_INT, L(filters), 1, 1 << 16, "1", "conv2d: output channels"},
    {"kernel_size", OPT_INT, L(kernel_size), 1, 64, "3", "conv2d: square kernel side"},
    {"strides", OPT_INT, L(strides), 0, 64, "0", "conv2d and pooling (0: 1 for conv2d, pool_size for pooling)"},
    {"pool_size", OPT_INT, L(pool_size), 1, 64, "2", "pooling window side"},
    {"rate", OPT_DBL, L(rate), 0, 1, "0", "dropout rate, leaky_relu alpha, scale factor, batch_norm momentum"},
    {"input_dim", OPT_INT, L(input_dim), 1, 1 << 30, "1",
     "embedding: vocabulary rows; embedding_bag: table rows (1: its input's size)"},
    {"inputs", OPT_STR, L(inputs), 0, 0, "",
     "earlier layers by name, comma-separated, or input; embedding_bag: a feature column (default: the previous)"},
    {"variable", OPT_STR, L(variable), 0, 0, "", "matmul, bias_add, lookup: the model.variables entry used"},
    {"combiner", OPT_STR, L(combiner), 0, 0, "sum",
     "embedding_bag: sum | mean | sqrtn | sequence (a row per position of a max_len column)"},
    {"use_bias", OPT_BOOL, L(use_bias), 0, 1, "true", "embedding_bag: add a bias of units values"},
    {"rank", OPT_INT, L(rank), 0, 1 << 16, "0", "cross: the rank of its kernel V U (0: full)"},
    {"table", OPT_STR, L(table), 0, 0, "",
     "embedding_bag: an earlier embedding_bag whose table it shares (same rows and units; empty: its own table)"},
    {"max_rows", OPT_I64, L(max_rows), 0, 1099511627776.0 /* 2^40: the most ids a table has */, "0",
     "embedding_bag: hard cap of rows per ps, the least recently touched evicted first (0: none)"},
    {"ttl_steps", OPT_I64, L(ttl_steps), 0, BIG, "0", "embedding_bag: evict rows untouched for N steps (0: never)"},
    {"admit_min_count", OPT_INT, L(admit_min_count), 0, 1000000, "0",
     "embedding_bag: make a row once its id was pushed N times (a fixed-memory counting sketch; 0: at once)"},
    {"admit_probability", OPT_DBL, L(admit_probability), 0, 1, "1",
     "embedding_bag: make a row for a new id with this probability per push (1: always)"},
};
const size_t config__n_layer_options = sizeof config__layer_options / sizeof config__layer_options[0];

#define VS(field) offsetof(tfx_var_spec, field), sizeof(((tfx_var_spec *)0)->field)
const config__option config__var_options[] = {
    {"name", OPT_STR, VS(name), 0, 0, "", "the variable's name (matmul, bias_add and lookup name it)"},
    {"shape", OPT_STR, VS(shape), 0, 0, "", "1 to 4 positive dims, e.g. [784, 10]"},
    {"initializer", OPT_STR, VS(initializer), 0, 0, "", "as a layer's (default glorot_uniform for rank 2, else zeros)"},
    {"trainable", OPT_BOOL, VS(trainable), 0, 1, "true", "false: kept as initialized or restored"},
};
const size_t config__n_var_options = sizeof config__var_options / sizeof config__var_options[0];

#define F(field) offsetof(tfx_feature_spec, field), sizeof(((tfx_feature_spec *)0)->field)
const config__option config__feature_options[] = {
    {"name", OPT_STR, F(name), 0, 0, "", "what layers read in inputs (default: key)"},
    {"key", OPT_STR, F(key), 0, 0, "", "the CSV column or Example feature read"},
    {"type", OPT_STR, F(type), 0, 0, "", "numeric | identity | hash | crossed"},
    {"num_buckets", OPT_I64, F(num_buckets), 0, (double)(1LL << 40), "0", "identity: ids in [0, num_buckets)"},
    {"hash_bucket_size", OPT_I64, F(hash_bucket_size), 0, (double)(1LL << 40), "0",
     "hash, crossed: buckets of XXH3-64 of the value's text"},
    {"keys", OPT_STR, F(keys), 0, 0, "", "crossed: the comma-separated columns whose tuple is hashed"},
    {"separator", OPT_STR, F(separator), 0, 0, "", "multi-valued cells: the separator of the values"},
    {"weight_key", OPT_STR, F(weight_key), 0, 0, "", "the column of per-value weights"},
    {"required", OPT_BOOL, F(required), 0, 1, "false", "an empty cell is an error"},
    {"default_value", OPT_DBL, F(default_value), -BIG, BIG, "0", "numeric: the value of an empty cell"},
    {"normalizer", OPT_STR, F(normalizer), 0, 0, "", "numeric: log1p, or none"},
    {"max_len", OPT_I64, F(max_len), 0, 4096, "0",
     "identity, hash: a sequence column, its first max_len values in order (the rest dropped, counted)"},
};
const size_t config__n_feature_options = sizeof config__feature_options / sizeof config__feature_options[0];

#define V(field) offsetof(tfx_valset, field), sizeof(((tfx_valset *)0)->field)
const config__option config__valset_options[] = {
    {"name", OPT_STR, V(name), 0, 0, "", "the set's name: its records are kind validation.NAME"},
    {"images", OPT_STR, V(images), 0, 0, "", "the set's (images) file"},
    {"labels", OPT_STR, V(labels), 0, 0, "", "its labels file (IDX)"},
    {"every_steps", OPT_I64, V(every_steps), 0, BIG, "500", "evaluate every N steps"},
    {"batches", OPT_INT, V(batches), 0, 1 << 20, "0", "batches of 1000 examples evaluated (0: all)"},
    {"agg", OPT_STR, V(agg), 0, 0, "mean", "mean | min | max | sum of per-batch metrics, or per metric"},
    {"first", OPT_BOOL, V(first), 0, 1, "false", "also at step 0"},
};
const size_t config__n_valset_options = sizeof config__valset_options / sizeof config__valset_options[0];

int config__choice_count(const config__option *o) {
  int n = 0;
  while (o->choices && o->choices[n]) {
    n++;
  }
  return n;
}

const char *tfx_config_choice_name(const char *key, int v) {
  const config__option *o = config__find(config__options, config__n_options, key);
  return o && o->type == OPT_ENUM && v >= 0 && v < config__choice_count(o) ? o->choices[v] : "?";
}

const config__option *config__find(const config__option *table, size_t n, const char *path) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(table[i].path, path) == 0) {
      return &table[i];
    }
  }
  return NULL;
}
