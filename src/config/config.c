/* The experiment option table and its json-c reader and writer. */
#include "config/config.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "config/hparams_impl.h"

typedef enum opt_type { OPT_INT, OPT_I64, OPT_DBL, OPT_STR, OPT_BOOL } opt_type;

typedef struct option {
  const char *path;
  opt_type type;
  size_t offset, size;
  double min, max;
  const char *def;
  const char *help;
} option;

#define O(field) offsetof(tfx_config, field), sizeof(((tfx_config *)0)->field)
#define FMNIST "/usr/share/datasets/fashion-mnist/"
#define BIG 1e18

static const option options[] = {
    {"model.loss", OPT_STR, O(loss), 0, 0, "softmax_cross_entropy",
     "softmax_cross_entropy | sigmoid_cross_entropy | mse"},
    {"model.metrics", OPT_STR, O(metrics), 0, 0, "loss,accuracy,top_5",
     "evaluation metrics reported: loss, accuracy, top_K (comma-separated)"},
    {"model.plugin", OPT_STR, O(plugin), 0, 0, "",
     "shared object whose tfx_plugin_entry builds the model and hooks the run"},
    {"data.train.images", OPT_STR, O(train_images), 0, 0, FMNIST "train-images-idx3-ubyte.gz", "IDX images (.gz ok)"},
    {"data.train.labels", OPT_STR, O(train_labels), 0, 0, FMNIST "train-labels-idx1-ubyte.gz", "IDX labels"},
    {"data.eval.images", OPT_STR, O(eval_images), 0, 0, FMNIST "t10k-images-idx3-ubyte.gz", "IDX images"},
    {"data.eval.labels", OPT_STR, O(eval_labels), 0, 0, FMNIST "t10k-labels-idx1-ubyte.gz", "IDX labels"},
    {"data.scale", OPT_DBL, O(data_scale), 0, BIG, "0.00392156862745098", "feature multiplier"},
    {"data.mean", OPT_DBL, O(data_mean), -BIG, BIG, "0", "subtracted after scale: x = (x * scale - mean) / std"},
    {"data.std", OPT_DBL, O(data_std), -BIG, BIG, "1", "divides after the mean (must be > 0)"},
    {"data.format", OPT_STR, O(data_format), 0, 0, "idx",
     "idx (images + labels) | csv | libsvm | tfrecord (the *.images path is the file)"},
    {"data.label_column", OPT_STR, O(label_column), 0, 0, "-1", "csv: label column, header name or index (-1: last)"},
    {"data.header", OPT_BOOL, O(data_header), 0, 1, "true", "csv: the first line is a header"},
    {"data.stream", OPT_BOOL, O(data_stream), 0, 1, "false",
     "read the training files a window at a time (files larger than memory); images may be a glob or a list"},
    {"data.shard_by", OPT_STR, O(shard_by), 0, 0, "record", "record | file: how workers split the training data"},
    {"data.shuffle_buffer", OPT_INT, O(shuffle_buffer), 1, 1e8, "10000", "streaming: examples per shuffled window"},
    {"data.feature_key", OPT_STR, O(feature_key), 0, 0, "image", "tfrecord: the Example feature holding the inputs"},
    {"data.label_key", OPT_STR, O(label_key), 0, 0, "label", "tfrecord: the Example feature holding the label"},
    {"optimizer.name", OPT_STR, O(optimizer), 0, 0, "adam", "sgd | momentum | adagrad | rmsprop | adam | adamw | ftrl"},
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
    {"optimizer.schedule", OPT_STR, O(schedule), 0, 0, "constant",
     "constant | exponential | step | cosine | piecewise"},
    {"optimizer.boundaries", OPT_STR, O(boundaries), 0, 0, "", "piecewise: steps where the rate changes, [2000, 4000]"},
    {"optimizer.values", OPT_STR, O(lr_values), 0, 0, "", "piecewise: rates before, between, after the boundaries"},
    {"optimizer.decay_rate", OPT_DBL, O(decay_rate), 0, 1, "0.5", "exponential/step decay factor"},
    {"optimizer.decay_steps", OPT_I64, O(decay_steps), 1, BIG, "1000", "steps per decay"},
    {"optimizer.warmup_steps", OPT_I64, O(warmup_steps), 0, BIG, "0", "linear warmup steps"},
    {"training.mode", OPT_STR, O(mode), 0, 0, "sync", "sync | async | ssp"},
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
    {"training.report_every", OPT_INT, O(report_every), 1, 1000000, "100", "steps between metric reports"},
    {"training.threads", OPT_INT, O(threads), 1, 256, "1", "OpenBLAS and model threads per process"},
    {"training.ps_apply_threads", OPT_INT, O(ps_apply_threads), 1, 2, "1",
     "threads a ps uses to update one large shard"},
    {"training.push_part_bytes", OPT_INT, O(push_part_bytes), 0, 1 << 30, "524288",
     "async/ssp: a push-pull to one ps of at least 4x this goes in pipelined parts of about this size (0: never)"},
    {"training.nan_policy", OPT_STR, O(nan_policy), 0, 0, "reject",
     "a push with NaN/Inf gradients: reject (error reply) | skip (dropped, success reply); each counted at the ps"},
    {"training.seed", OPT_I64, O(seed), 0, BIG, "42", "experiment seed"},
    {"training.thres_loss", OPT_DBL, O(thres_loss), 0, BIG, "1e6", "abort when the training loss exceeds this"},
    {"training.clip_norm", OPT_DBL, O(clip_norm), 0, BIG, "0", "clip gradients by global norm (0: off)"},
    {"training.clip_value", OPT_DBL, O(clip_value), 0, BIG, "0", "clip gradients by value (0: off)"},
    {"placement.strategy", OPT_STR, O(strategy), 0, 0, "round_robin", "round_robin | greedy_bytes"},
    {"placement.min_slice_bytes", OPT_I64, O(min_slice_bytes), 0, BIG, "0", "partition variables above this (0: off)"},
    {"placement.max_shards", OPT_INT, O(max_shards), 1, 1024, "1", "max slices per variable"},
    {"placement.table_partition", OPT_STR, O(table_partition), 0, 0, "mod",
     "lazy tables (embedding_bag): mod (ps k holds ids % n_ps == k: hot ids spread) | range (contiguous ids)"},
    {"checkpoint.every_steps", OPT_I64, O(ckpt_every_steps), 0, BIG, "1000", "0: only at the end"},
    {"checkpoint.every_secs", OPT_I64, O(ckpt_every_secs), 0, BIG, "0", "also checkpoint every N seconds (0: off)"},
    {"checkpoint.min_interval_secs", OPT_I64, O(ckpt_min_interval_secs), 0, BIG, "10",
     "train: periodic checkpoints start at least N s apart (one asked meanwhile is taken at the first step after)"},
    {"checkpoint.keep_max", OPT_INT, O(keep_max), 1, 1000, "3", "checkpoints kept"},
    {"search.method", OPT_STR, O(search_method), 0, 0, "random", "tfx-node search: random | grid"},
    {"search.early_stopping", OPT_BOOL, O(search_early_stopping), 0, 1, "true",
     "stop trials below the median at a validation point"},
    {"warm_start.from", OPT_STR, O(warm_from), 0, 0, "",
     "run, checkpoint or export directory to start from (fresh runs only)"},
    {"warm_start.to_restore", OPT_STR, O(warm_restore), 0, 0, "",
     "comma-separated variable-name prefixes to take (empty: all found)"},
    {"warm_start.rename", OPT_STR, O(warm_rename), 0, 0, "",
     "load_param_dict: comma-separated source:model name pairs"},
    {"eval.every_steps", OPT_I64, O(eval_every_steps), 0, BIG, "500", "0: only at the end"},
    {"eval.validate_first", OPT_BOOL, O(validate_first), 0, 1, "false", "evaluate at step 0"},
    {"observe.http_port", OPT_INT, O(http_port), 0, 65535, "0",
     "the master serves /metrics, /status and / here (0: off)"},
    {"cluster.register_timeout_s", OPT_INT, O(register_timeout_s), 1, 86400, "60", "wait for peers"},
    {"cluster.request_timeout_s", OPT_INT, O(request_timeout_s), 1, 86400, "60", "deadline of one request"},
    {"cluster.local_transport", OPT_STR, O(local_transport), 0, 0, "ipc",
     "tfx-node local: ipc (Unix sockets in a private 0700 directory, no keys needed) | tcp (loopback, CURVE)"},
    {"security.plaintext", OPT_BOOL, O(security_plaintext), 0, 1, "false",
     "true: plain TCP on purpose (no keys); otherwise plaintext only when no key is named, with a warning"},
    {"security.server_key", OPT_STR, O(server_key), 0, 0, "",
     "CURVE key file of the cluster's servers (NAME.key, mode 0600; a client-only tool may give NAME.pub)"},
    {"security.client_key", OPT_STR, O(client_key), 0, 0, "",
     "this node's CURVE client key file (NAME.key, 0600; default: security.server_key)"},
    {"security.authorized_keys", OPT_STR, O(authorized_keys), 0, 0, "",
     "public key file or directory of *.pub files the servers admit (default: the client key)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

#define L(field) offsetof(tfx_layer_spec, field), sizeof(((tfx_layer_spec *)0)->field)
static const option layer_options[] = {
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
    {"combiner", OPT_STR, L(combiner), 0, 0, "sum", "embedding_bag: sum | mean | sqrtn"},
    {"use_bias", OPT_BOOL, L(use_bias), 0, 1, "true", "embedding_bag: add a bias of units values"},
};
#define N_LAYER_OPTIONS (sizeof layer_options / sizeof layer_options[0])

#define VS(field) offsetof(tfx_var_spec, field), sizeof(((tfx_var_spec *)0)->field)
static const option var_options[] = {
    {"name", OPT_STR, VS(name), 0, 0, "", "the variable's name (matmul, bias_add and lookup name it)"},
    {"shape", OPT_STR, VS(shape), 0, 0, "", "1 to 4 positive dims, e.g. [784, 10]"},
    {"initializer", OPT_STR, VS(initializer), 0, 0, "", "as a layer's (default glorot_uniform for rank 2, else zeros)"},
    {"trainable", OPT_BOOL, VS(trainable), 0, 1, "true", "false: kept as initialized or restored"},
};
#define N_VAR_OPTIONS (sizeof var_options / sizeof var_options[0])

#define F(field) offsetof(tfx_feature_spec, field), sizeof(((tfx_feature_spec *)0)->field)
static const option feature_options[] = {
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
};
#define N_FEATURE_OPTIONS (sizeof feature_options / sizeof feature_options[0])

#define V(field) offsetof(tfx_valset, field), sizeof(((tfx_valset *)0)->field)
static const option valset_options[] = {
    {"name", OPT_STR, V(name), 0, 0, "", "the set's name: its records are kind validation.NAME"},
    {"images", OPT_STR, V(images), 0, 0, "", "the set's (images) file"},
    {"labels", OPT_STR, V(labels), 0, 0, "", "its labels file (IDX)"},
    {"every_steps", OPT_I64, V(every_steps), 0, BIG, "500", "evaluate every N steps"},
    {"batches", OPT_INT, V(batches), 0, 1 << 20, "0", "batches of 1000 examples evaluated (0: all)"},
    {"agg", OPT_STR, V(agg), 0, 0, "mean", "mean | min | max | sum of per-batch metrics, or per metric"},
    {"first", OPT_BOOL, V(first), 0, 1, "false", "also at step 0"},
};
#define N_VALSET_OPTIONS (sizeof valset_options / sizeof valset_options[0])

static const option *find(const option *table, size_t n, const char *path) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(table[i].path, path) == 0) {
      return &table[i];
    }
  }
  return NULL;
}

static int set_string(void *base, const option *o, const char *s, const char *where, tfx_err *err) {
  if (strlen(s) >= o->size) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: value too long", where);
  }
  strcpy((char *)base + o->offset, s);
  return TFX_OK;
}

static int set_number(void *base, const option *o, double v, const char *where, tfx_err *err) {
  if (!(v >= o->min && v <= o->max)) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: %g out of range [%g, %g]", where, v, o->min, o->max);
  }
  char *p = (char *)base + o->offset;
  if (o->type == OPT_DBL) {
    *(double *)p = v;
  } else if (o->type == OPT_I64) {
    *(int64_t *)p = (int64_t)v;
  } else {
    *(int *)p = (int)v;
  }
  return TFX_OK;
}

/* Sets one option from a JSON value, checking the type; `where` names the key in errors. */
static int set_json(void *base, const option *o, json_object *v, const char *where, tfx_err *err) {
  json_type t = json_object_get_type(v);
  switch (o->type) {
    case OPT_STR:
      if (t != json_type_string) {
        return tfx_err_set(err, TFX_ECONFIG, "%s: expected a string", where);
      }
      return set_string(base, o, json_object_get_string(v), where, err);
    case OPT_BOOL:
      if (t != json_type_boolean) {
        return tfx_err_set(err, TFX_ECONFIG, "%s: expected true or false", where);
      }
      *(int *)((char *)base + o->offset) = json_object_get_boolean(v);
      return TFX_OK;
    case OPT_DBL:
      if (t != json_type_double && t != json_type_int) {
        return tfx_err_set(err, TFX_ECONFIG, "%s: expected a number", where);
      }
      return set_number(base, o, json_object_get_double(v), where, err);
    default: {
      if (t != json_type_int) {
        return tfx_err_set(err, TFX_ECONFIG, "%s: expected an integer", where);
      }
      /* Range-check in double, store the exact int64: a double would round integers above 2^53. */
      int64_t i = json_object_get_int64(v);
      int rc = set_number(base, o, (double)i, where, err);
      if (!rc && o->type == OPT_I64) {
        *(int64_t *)((char *)base + o->offset) = i;
      }
      return rc;
    }
  }
}

static int set_default(void *base, const option *o) {
  json_object *v = NULL;
  if (o->type == OPT_STR) {
    v = json_object_new_string(o->def);
  } else if (o->type == OPT_BOOL) {
    v = json_object_new_boolean(strcmp(o->def, "true") == 0);
  } else if (o->type == OPT_DBL) {
    v = json_object_new_double(strtod(o->def, NULL));
  } else {
    v = json_object_new_int64(strtoll(o->def, NULL, 10));
  }
  int rc = set_json(base, o, v, o->path, NULL);
  json_object_put(v);
  return rc;
}

/* A JSON list as comma-separated text in a string option, which round-trips through tfx_config_to_json: strings
 * or integers (model.variables shape, layer inputs), or with `numbers` set, integers or floats only
 * (optimizer.boundaries and values). */
static int set_list(void *base, const option *o, json_object *arr, const char *where, int numbers, tfx_err *err) {
  char buf[256] = "";
  size_t len = 0, n = json_object_array_length(arr);
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(arr, i);
    int is_int = json_object_is_type(e, json_type_int), is_double = json_object_is_type(e, json_type_double);
    if (numbers ? !is_int && !is_double : !is_int && !json_object_is_type(e, json_type_string)) {
      return tfx_err_set(err, TFX_ECONFIG, "%s[%zu]: expected %s", where, i,
                         numbers ? "a number" : "a string or an integer");
    }
    len += is_double ? (size_t)snprintf(buf + len, sizeof buf - len, "%s%.17g", i ? "," : "", json_object_get_double(e))
                     : (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "," : "", json_object_get_string(e));
    if (len >= sizeof buf) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: %s", where, numbers ? "too many entries" : "value too long");
    }
  }
  return set_string(base, o, buf, where, err);
}

/* Sets one option of a list-valued key from a string or a JSON list. */
static int set_json_or_list(void *base, const option *o, json_object *v, const char *where, tfx_err *err) {
  if (o->type == OPT_STR && json_object_is_type(v, json_type_array)) {
    return set_list(base, o, v, where, 0, err);
  }
  return set_json(base, o, v, where, err);
}

static void layer_defaults(tfx_layer_spec *l) {
  memset(l, 0, sizeof *l);
  for (size_t i = 0; i < N_LAYER_OPTIONS; i++) {
    set_default(l, &layer_options[i]);
  }
}

void tfx_config_init(tfx_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < N_OPTIONS; i++) {
    set_default(cfg, &options[i]);
  }
  cfg->input_shape[0] = 28;
  cfg->input_shape[1] = 28;
  cfg->input_shape[2] = 1;
  cfg->input_rank = 3;
}

static int parse_layer(tfx_layer_spec *l, json_object *obj, int i, tfx_err *err) {
  char where[96];
  if (!json_object_is_type(obj, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d]: expected an object", i);
  }
  layer_defaults(l);
  json_object_object_foreach(obj, key, val) {
    snprintf(where, sizeof where, "model.layers[%d].%s", i, key);
    const option *o = find(layer_options, N_LAYER_OPTIONS, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
    }
    int rc = set_json_or_list(l, o, val, where, err);
    if (rc) {
      return rc;
    }
  }
  if (!l->type[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d].type: missing", i);
  }
  return TFX_OK;
}

static int parse_layers(tfx_config *cfg, json_object *arr, tfx_err *err) {
  if (!json_object_is_type(arr, json_type_array)) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers: expected a list of layers");
  }
  size_t n = json_object_array_length(arr);
  if (n > TFX_MAX_LAYERS) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers: %zu layers, at most %d", n, TFX_MAX_LAYERS);
  }
  tfx_layer_spec tmp[TFX_MAX_LAYERS];
  for (size_t i = 0; i < n; i++) {
    int rc = parse_layer(&tmp[i], json_object_array_get_idx(arr, i), (int)i, err);
    if (rc) {
      return rc;
    }
  }
  memcpy(cfg->layers, tmp, n * sizeof tmp[0]);
  cfg->n_layers = (int)n;
  return TFX_OK;
}

/* Checks a variable's name (unique) and shape ("784,10": 1 to 4 positive dims). */
static int check_variable(const tfx_config *cfg, const tfx_var_spec *v, int i, tfx_err *err) {
  if (!v->name[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "model.variables[%d].name: missing", i);
  }
  for (int k = 0; k < i; k++) {
    if (!strcmp(cfg->variables[k].name, v->name)) {
      return tfx_err_set(err, TFX_ECONFIG, "model.variables[%d]: '%s' declared twice", i, v->name);
    }
  }
  int rank = 0;
  for (const char *p = v->shape; *p; rank++) {
    char *end;
    long d = strtol(p, &end, 10);
    if (end == p || d < 1 || d > (1L << 30) || (*end && *end != ',') || rank == 4) {
      return tfx_err_set(err, TFX_ESHAPE, "model.variables[%d] '%s': shape '%s' (want 1 to 4 positive dims)", i,
                         v->name, v->shape);
    }
    p = end + (*end == ',');
  }
  if (rank == 0) {
    return tfx_err_set(err, TFX_ESHAPE, "model.variables[%d] '%s': shape missing", i, v->name);
  }
  return TFX_OK; /* the initializer is checked where the variable is built (tfx_model_create) */
}

static int parse_variable(tfx_var_spec *v, json_object *obj, int i, tfx_err *err) {
  char where[96];
  if (!json_object_is_type(obj, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "model.variables[%d]: expected an object", i);
  }
  memset(v, 0, sizeof *v);
  for (size_t k = 0; k < N_VAR_OPTIONS; k++) {
    set_default(v, &var_options[k]);
  }
  json_object_object_foreach(obj, key, val) {
    snprintf(where, sizeof where, "model.variables[%d].%s", i, key);
    const option *o = find(var_options, N_VAR_OPTIONS, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
    }
    int rc = set_json_or_list(v, o, val, where, err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

static int parse_variables(tfx_config *cfg, json_object *arr, tfx_err *err) {
  size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
  if (!json_object_is_type(arr, json_type_array) || n > TFX_MAX_VARIABLES) {
    return tfx_err_set(err, TFX_ECONFIG, "model.variables: expected a list of at most %d variables", TFX_MAX_VARIABLES);
  }
  tfx_config next = *cfg;
  next.n_variables = 0;
  for (size_t i = 0; i < n; i++) {
    tfx_var_spec v;
    int rc = parse_variable(&v, json_object_array_get_idx(arr, i), (int)i, err);
    if (rc || (rc = tfx_config_add_variable(&next, &v, err))) {
      return rc;
    }
  }
  memcpy(cfg->variables, next.variables, sizeof cfg->variables);
  cfg->n_variables = next.n_variables;
  return TFX_OK;
}

int tfx_config_add_variable(tfx_config *cfg, const tfx_var_spec *v, tfx_err *err) {
  if (cfg->n_variables >= TFX_MAX_VARIABLES) {
    return tfx_err_set(err, TFX_ECONFIG, "model.variables: more than %d variables", TFX_MAX_VARIABLES);
  }
  int rc = check_variable(cfg, v, cfg->n_variables, err);
  if (!rc) {
    cfg->variables[cfg->n_variables++] = *v;
  }
  return rc;
}

static int is_agg(const char *a, size_t n) {
  return (n == 4 && !strncmp(a, "mean", 4)) ||
         (n == 3 && (!strncmp(a, "min", 3) || !strncmp(a, "max", 3) || !strncmp(a, "sum", 3)));
}

/* A metric name of model.metrics: loss, accuracy or top_K (1 <= K <= 100). */
static int is_metric(const char *m, size_t n) {
  if ((n == 4 && !strncmp(m, "loss", 4)) || (n == 8 && !strncmp(m, "accuracy", 8)) ||
      (n == 3 && !strncmp(m, "auc", 3)) || (n == 8 && !strncmp(m, "log_loss", 8))) {
    return 1;
  }
  int k = n > 4 && !strncmp(m, "top_", 4) ? atoi(m + 4) : 0;
  return k >= 1 && k <= 100 && strspn(m + 4, "0123456789") == n - 4;
}

/* agg is one aggregation for every metric, or "metric:agg,..." naming the metrics reported. */
static int check_agg(const char *agg, int i, tfx_err *err) {
  if (!strchr(agg, ':')) {
    return is_agg(agg, strlen(agg))
               ? TFX_OK
               : tfx_err_set(err, TFX_ECONFIG, "validation[%d].agg: '%s' (want mean, min, max or sum)", i, agg);
  }
  for (const char *p = agg; *p;) {
    size_t n = strcspn(p, ","), k = strcspn(p, ":");
    if (k >= n || !is_metric(p, k) || !is_agg(p + k + 1, n - k - 1)) {
      return tfx_err_set(err, TFX_ECONFIG,
                         "validation[%d].metrics: '%.*s' (want loss, accuracy or top_K, each mean, min, max or sum)", i,
                         (int)n, p);
    }
    p += n + (p[n] == ',');
  }
  return TFX_OK;
}

/* "metrics": {"accuracy": "mean", "loss": "max"} becomes agg "accuracy:mean,loss:max" (checked later). */
static int metrics_agg(tfx_valset *v, json_object *obj, const char *where, tfx_err *err) {
  if (!json_object_is_type(obj, json_type_object) || json_object_object_length(obj) == 0) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: expected an object of metric: aggregation", where);
  }
  size_t len = 0;
  v->agg[0] = '\0';
  json_object_object_foreach(obj, key, val) {
    if (!json_object_is_type(val, json_type_string)) {
      return tfx_err_set(err, TFX_ECONFIG, "%s.%s: expected mean, min, max or sum", where, key);
    }
    len += (size_t)snprintf(v->agg + len, sizeof v->agg - len, "%s%s:%s", len ? "," : "", key,
                            json_object_get_string(val));
    if (len >= sizeof v->agg) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: too many metrics", where);
    }
  }
  return TFX_OK;
}

static int parse_valset(tfx_valset *v, json_object *obj, int i, tfx_err *err) {
  char where[96];
  if (!json_object_is_type(obj, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "validation[%d]: expected an object", i);
  }
  memset(v, 0, sizeof *v);
  for (size_t k = 0; k < N_VALSET_OPTIONS; k++) {
    set_default(v, &valset_options[k]);
  }
  json_object_object_foreach(obj, key, val) {
    snprintf(where, sizeof where, "validation[%d].%s", i, key);
    if (!strcmp(key, "metrics")) {
      int rc = metrics_agg(v, val, where, err);
      if (rc) {
        return rc;
      }
      continue;
    }
    const option *o = find(valset_options, N_VALSET_OPTIONS, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
    }
    int rc = set_json(v, o, val, where, err);
    if (rc) {
      return rc;
    }
  }
  if (!v->name[0] || !v->images[0] || !v->labels[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "validation[%d]: name, images and labels are required", i);
  }
  return check_agg(v->agg, i, err);
}

/* Checks one feature column: a known type, the buckets its type needs, a unique name. */
static int check_feature(const tfx_config *cfg, tfx_feature_spec *f, int i, tfx_err *err) {
  static const char *const types[] = {"numeric", "identity", "hash", "crossed"};
  int known = 0;
  for (int k = 0; k < 4; k++) {
    known |= !strcmp(f->type, types[k]);
  }
  if (!known) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features[%d].type: '%s' (want numeric, identity, hash or crossed)", i,
                       f->type);
  }
  if (!f->name[0]) {
    snprintf(f->name, sizeof f->name, "%s", f->key);
  }
  if (!f->name[0] || (strcmp(f->type, "crossed") ? !f->key[0] : !f->keys[0])) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features[%d]: %s required", i,
                       strcmp(f->type, "crossed") ? "key" : "keys (the crossed columns) and name");
  }
  if (!strcmp(f->type, "identity") ? f->num_buckets < 1 : strcmp(f->type, "numeric") && f->hash_bucket_size < 1) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features[%d] (%s): %s must be >= 1", i, f->name,
                       !strcmp(f->type, "identity") ? "num_buckets" : "hash_bucket_size");
  }
  if (f->normalizer[0] && strcmp(f->normalizer, "log1p")) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features[%d] (%s): normalizer '%s' (want log1p, or none)", i, f->name,
                       f->normalizer);
  }
  for (int k = 0; k < i; k++) {
    if (!strcmp(cfg->features[k].name, f->name)) {
      return tfx_err_set(err, TFX_ECONFIG, "model.features[%d]: the name '%s' is taken", i, f->name);
    }
  }
  return TFX_OK;
}

static int parse_features(tfx_config *cfg, json_object *arr, tfx_err *err) {
  size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
  if (!json_object_is_type(arr, json_type_array) || n > TFX_MAX_FEATURES) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features: expected a list of at most %d columns", TFX_MAX_FEATURES);
  }
  tfx_config next = *cfg;
  for (size_t i = 0; i < n; i++) {
    json_object *obj = json_object_array_get_idx(arr, i);
    tfx_feature_spec *f = &next.features[i];
    memset(f, 0, sizeof *f);
    for (size_t k = 0; k < N_FEATURE_OPTIONS; k++) {
      set_default(f, &feature_options[k]);
    }
    if (!json_object_is_type(obj, json_type_object)) {
      return tfx_err_set(err, TFX_ECONFIG, "model.features[%zu]: expected an object", i);
    }
    json_object_object_foreach(obj, key, val) {
      char where[96];
      snprintf(where, sizeof where, "model.features[%zu].%s", i, key);
      const option *o = find(feature_options, N_FEATURE_OPTIONS, key);
      int rc = o ? set_json(f, o, val, where, err) : tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
      if (rc) {
        return rc;
      }
    }
    int rc = check_feature(&next, f, (int)i, err);
    if (rc) {
      return rc;
    }
  }
  memcpy(cfg->features, next.features, sizeof cfg->features);
  cfg->n_features = (int)n;
  return TFX_OK;
}

int tfx_config_sparse_fields(const tfx_config *cfg) {
  int n = 0;
  for (int i = 0; i < cfg->n_features; i++) {
    n += strcmp(cfg->features[i].type, "numeric") != 0;
  }
  return n;
}

int tfx_config_numeric_features(const tfx_config *cfg) {
  return cfg->n_features - tfx_config_sparse_fields(cfg);
}

static int parse_valsets(tfx_config *cfg, json_object *arr, tfx_err *err) {
  size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
  if (!json_object_is_type(arr, json_type_array) || n > TFX_MAX_VALSETS) {
    return tfx_err_set(err, TFX_ECONFIG, "validation: expected a list of at most %d sets", TFX_MAX_VALSETS);
  }
  tfx_valset tmp[TFX_MAX_VALSETS];
  for (size_t i = 0; i < n; i++) {
    int rc = parse_valset(&tmp[i], json_object_array_get_idx(arr, i), (int)i, err);
    if (rc) {
      return rc;
    }
  }
  memcpy(cfg->valsets, tmp, n * sizeof tmp[0]);
  cfg->n_valsets = (int)n;
  return TFX_OK;
}

static int parse_shape(tfx_config *cfg, json_object *arr, tfx_err *err) {
  size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
  if (n < 1 || n > 3) {
    return tfx_err_set(err, TFX_ECONFIG, "model.input_shape: expected 1 to 3 positive integers");
  }
  int shape[3];
  for (size_t i = 0; i < n; i++) {
    json_object *d = json_object_array_get_idx(arr, i);
    if (!json_object_is_type(d, json_type_int) || json_object_get_int(d) < 1) {
      return tfx_err_set(err, TFX_ECONFIG, "model.input_shape[%zu]: expected a positive integer", i);
    }
    shape[i] = json_object_get_int(d);
  }
  memcpy(cfg->input_shape, shape, n * sizeof(int));
  cfg->input_rank = (int)n;
  return TFX_OK;
}

static int is_section(const char *path) {
  size_t n = strlen(path);
  for (size_t i = 0; i < N_OPTIONS; i++) {
    if (strncmp(options[i].path, path, n) == 0 && options[i].path[n] == '.') {
      return 1;
    }
  }
  return strcmp(path, "model") == 0;
}

static int set_path(tfx_config *cfg, const char *path, json_object *val, tfx_err *err);

static int parse_object(tfx_config *cfg, json_object *obj, const char *prefix, tfx_err *err) {
  json_object_object_foreach(obj, key, val) {
    char path[256];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", key);
    int rc = set_path(cfg, path, val, err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

static int set_path(tfx_config *cfg, const char *path, json_object *val, tfx_err *err) {
  cfg->max_steps_given |= strcmp(path, "training.max_steps") == 0;
  if (strcmp(path, "model.layers") == 0) {
    return parse_layers(cfg, val, err);
  }
  if (strcmp(path, "model.input_shape") == 0) {
    return parse_shape(cfg, val, err);
  }
  if (strcmp(path, "model.variables") == 0) {
    return parse_variables(cfg, val, err);
  }
  if (strcmp(path, "validation") == 0) {
    return parse_valsets(cfg, val, err);
  }
  if (strcmp(path, "model.features") == 0) {
    return parse_features(cfg, val, err);
  }
  if (strcmp(path, "model.params") == 0) {
    const char *text = json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (strlen(text) >= sizeof cfg->plugin_params) {
      return tfx_err_set(err, TFX_ECONFIG, "model.params: too long");
    }
    strcpy(cfg->plugin_params, text);
    return TFX_OK;
  }
  if (strcmp(path, "name") == 0 || strcmp(path, "description") == 0 || strcmp(path, "hyperparameters") == 0 ||
      strcmp(path, TFX_CONFIG_FORMAT_KEY) == 0) {
    return TFX_OK;
  }
  if (is_section(path)) {
    if (!json_object_is_type(val, json_type_object)) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: expected an object (a section)", path);
    }
    return parse_object(cfg, val, path, err);
  }
  const option *o = find(options, N_OPTIONS, path);
  if (!o) {
    return tfx_err_set(err, TFX_ECONFIG, "unknown key '%s'", path);
  }
  if (json_object_is_type(val, json_type_array) &&
      (o->offset == offsetof(tfx_config, boundaries) || o->offset == offsetof(tfx_config, lr_values))) {
    return set_list(cfg, o, val, path, 1, err);
  }
  return set_json(cfg, o, val, path, err);
}

static json_object *parse_text(const char *json, const char *origin, tfx_err *err) {
  json_tokener *tok = json_tokener_new();
  if (!tok) {
    tfx_err_set(err, TFX_ENOMEM, "out of memory");
    return NULL;
  }
  /* -1: json-c reads up to and including the NUL, which completes a bare number or literal ("32", "true"). */
  json_object *root = json_tokener_parse_ex(tok, json, -1);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t end = json_tokener_get_parse_end(tok), len = strlen(json);
  /* After a trailing comment the parse end counts the NUL too: past the text, where strspn must not look. */
  end = end < len ? end : len;
  if (root && jerr == json_tokener_success) {
    end += strspn(json + end, " \t\r\n");
  }
  if (!root || jerr != json_tokener_success || json[end]) {
    tfx_err_set(err, TFX_ECONFIG, "%s: malformed JSON at offset %zu: %s", origin, end,
                jerr == json_tokener_success ? "unexpected text after the value" : json_tokener_error_desc(jerr));
    json_object_put(root);
    root = NULL;
  }
  json_tokener_free(tok);
  return root;
}

int tfx_config_parse(tfx_config *cfg, const char *json, const char *origin, tfx_err *err) {
  json_object *root = parse_text(json, origin, err);
  if (!root) {
    return err ? err->code : TFX_ECONFIG;
  }
  int rc = TFX_OK;
  if (!json_object_is_type(root, json_type_object)) {
    rc = tfx_err_set(err, TFX_ECONFIG, "%s: expected a JSON object", origin);
  } else {
    tfx_config next = *cfg;
    rc = tfx_hparams_apply_defaults(root, err);
    if (!rc) {
      rc = parse_object(&next, root, "", err);
    }
    if (!rc) {
      *cfg = next;
    }
  }
  json_object_put(root);
  return rc;
}

/* The whole file at path as a string the caller frees, or NULL (err set). */
static char *read_config_text(const char *path, tfx_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    tfx_err_sys(err, TFX_ECONFIG, "experiment '%s'", path);
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 0, len = 0, n;
  int rc = TFX_OK;
  do {
    if (len + 4096 + 1 > cap) {
      char *grown = realloc(buf, cap = cap * 2 + 8192);
      if (!grown) {
        rc = tfx_err_set(err, TFX_ENOMEM, "out of memory reading '%s'", path);
        break;
      }
      buf = grown;
    }
    n = fread(buf + len, 1, 4096, f);
    len += n;
  } while (n > 0);
  fclose(f);
  if (rc) {
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}

int tfx_config_load(tfx_config *cfg, const char *path, tfx_err *err) {
  char *text = read_config_text(path, err);
  int rc = text ? tfx_config_parse(cfg, text, path, err) : err ? err->code : TFX_ECONFIG;
  free(text);
  return rc;
}

/* Whether the JSON text carries the format marker that tfx_config_to_json writes. */
static int has_format_marker(const char *text) {
  json_object *root = parse_text(text, "", NULL), *marker;
  int has = root && json_object_is_type(root, json_type_object) &&
            json_object_object_get_ex(root, TFX_CONFIG_FORMAT_KEY, &marker);
  json_object_put(root);
  return has;
}

int tfx_config_load_saved(tfx_config *cfg, const char *path, tfx_err *err) {
  char *text = read_config_text(path, err);
  int rc = text ? tfx_config_parse(cfg, text, path, err) : err ? err->code : TFX_ECONFIG;
  int legacy = !rc && !has_format_marker(text), fixed = 0;
  for (int i = 0; legacy && i < cfg->n_layers; i++) { /* before pooling had strides, dumps wrote an unused 1 */
    tfx_layer_spec *l = &cfg->layers[i];
    if (strstr(l->type, "pool2d") && l->strides == 1) {
      l->strides = 0, fixed++;
    }
  }
  if (fixed) {
    tfx_log(TFX_LOG_INFO, "CONFIG-LEGACY-POOL",
            "%s predates pooling strides: its %d pooling layer(s) keep stride = pool_size", path, fixed);
  }
  free(text);
  return rc;
}

int tfx_config_set(tfx_config *cfg, const char *assignment, tfx_err *err) {
  const char *eq = strchr(assignment, '=');
  if (!eq || eq == assignment) {
    return tfx_err_set(err, TFX_ECONFIG, "--set '%s': expected key=value", assignment);
  }
  char path[256];
  snprintf(path, sizeof path, "%.*s", (int)(eq - assignment), assignment);
  json_object *val = parse_text(eq + 1, path, NULL);
  if (!val) {
    val = json_object_new_string(eq + 1);
  }
  tfx_config next = *cfg;
  int rc = set_path(&next, path, val, err);
  if (!rc) {
    *cfg = next;
  }
  json_object_put(val);
  return rc;
}

void tfx_config_layer_init(tfx_layer_spec *l) {
  layer_defaults(l);
}

int tfx_config_sparse_input(const tfx_config *cfg) {
  const tfx_layer_spec *l = &cfg->layers[0];
  if (cfg->n_features > 0) {
    return 1; /* feature columns: read by their own reader (categorical as CSR, numeric dense) */
  }
  return cfg->n_layers > 0 && !strcmp(l->type, "embedding_bag") && (!l->inputs[0] || !strcmp(l->inputs, "input"));
}

const char *tfx_config_eval_file(const tfx_config *cfg) {
  return cfg->eval_labels[0] ? cfg->eval_labels : cfg->eval_images;
}

int tfx_config_layer_strides(const tfx_layer_spec *l) {
  if (l->strides) {
    return l->strides;
  }
  return strstr(l->type, "pool2d") ? l->pool_size : 1;
}

int tfx_config_add_layer(tfx_config *cfg, const tfx_layer_spec *l, tfx_err *err) {
  if (cfg->n_layers >= TFX_MAX_LAYERS) {
    return tfx_err_set(err, TFX_ECONFIG, "model: more than %d layers", TFX_MAX_LAYERS);
  }
  if (!l->type[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d].type: missing", cfg->n_layers);
  }
  cfg->layers[cfg->n_layers++] = *l;
  return TFX_OK;
}

/* TFX_SECURITY_SERVER_KEY for security.server_key: the option path in upper case, '.' as '_', TFX_ first. */
static void env_name(const char *path, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "TFX_");
  for (; *path && k + 1 < n; path++) {
    out[k++] = *path == '.' ? '_' : (char)(*path >= 'a' && *path <= 'z' ? *path - 'a' + 'A' : *path);
  }
  out[k] = '\0';
}

int tfx_config_apply_env(tfx_config *cfg, tfx_err *err) {
  tfx_config next = *cfg;
  for (size_t i = 0; i < N_OPTIONS; i++) {
    char name[96];
    env_name(options[i].path, name, sizeof name);
    const char *v = strncmp(options[i].path, "security.", 9) ? NULL : getenv(name);
    if (!v) {
      continue;
    }
    json_object *val = options[i].type == OPT_STR ? NULL : parse_text(v, name, NULL);
    if (!val) {
      val = json_object_new_string(v);
    }
    int rc = set_json(&next, &options[i], val, name, err);
    json_object_put(val);
    if (rc) {
      return rc;
    }
  }
  *cfg = next;
  return TFX_OK;
}

int tfx_config_add_layer_json(tfx_config *cfg, const char *json, tfx_err *err) {
  if (cfg->n_layers >= TFX_MAX_LAYERS) {
    return tfx_err_set(err, TFX_ECONFIG, "model: more than %d layers", TFX_MAX_LAYERS);
  }
  json_object *obj = parse_text(json, "plugin layer", err);
  if (!obj) {
    return TFX_ECONFIG;
  }
  int rc = parse_layer(&cfg->layers[cfg->n_layers], obj, cfg->n_layers, err);
  if (!rc) {
    cfg->n_layers++;
  }
  json_object_put(obj);
  return rc;
}

static const char *const modes[] = {"sync", "async", "ssp", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "adagrad", "rmsprop", "adam", "adamw", "ftrl", NULL};
static const char *const schedules[] = {"constant", "exponential", "step", "cosine", "piecewise", NULL};
static const char *const strategies[] = {"round_robin", "greedy_bytes", NULL};
static const char *const table_partitions[] = {"mod", "range", NULL};
static const char *const losses[] = {"softmax_cross_entropy", "sigmoid_cross_entropy", "mse", NULL};
static const char *const formats[] = {"idx", "csv", "libsvm", "tfrecord", NULL};
static const char *const shard_kinds[] = {"record", "file", NULL};
static const char *const nan_policies[] = {"reject", "skip", NULL};
static const char *const transports[] = {"ipc", "tcp", NULL};

static int one_of(const char *v, const char *const *allowed, const char *key, tfx_err *err) {
  for (int i = 0; allowed[i]; i++) {
    if (strcmp(v, allowed[i]) == 0) {
      return TFX_OK;
    }
  }
  return tfx_err_set(err, TFX_ECONFIG, "%s: unknown value '%s'", key, v);
}

/* Parses comma-separated numbers into out[0..*n); errors name the key and the entry. */
static int parse_numbers(const char *text, const char *key, double *out, int max, int *n, tfx_err *err) {
  *n = 0;
  for (const char *p = text; *p;) {
    char *end;
    double v = strtod(p, &end);
    if (end == p || !isfinite(v) || (*end && *end != ',')) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: entry %d ('%s') is not a number", key, *n, p);
    }
    if (*n == max) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: more than %d entries", key, max);
    }
    out[(*n)++] = v;
    p = *end ? end + 1 : end;
  }
  return TFX_OK;
}

int tfx_config_piecewise(const tfx_config *cfg, int64_t bounds[TFX_MAX_PIECES], double values[TFX_MAX_PIECES + 1],
                         int *n_bounds, tfx_err *err) {
  double b[TFX_MAX_PIECES];
  int nb, nv, rc;
  if ((rc = parse_numbers(cfg->boundaries, "optimizer.boundaries", b, TFX_MAX_PIECES, &nb, err)) ||
      (rc = parse_numbers(cfg->lr_values, "optimizer.values", values, TFX_MAX_PIECES + 1, &nv, err))) {
    return rc;
  }
  if (nv != nb + 1) {
    return tfx_err_set(err, TFX_ECONFIG, "optimizer.values: %d rates for %d boundaries (need one more rate)", nv, nb);
  }
  for (int i = 0; i < nb; i++) {
    if (b[i] != floor(b[i]) || b[i] < 0 || (i && b[i] <= b[i - 1])) {
      return tfx_err_set(err, TFX_ECONFIG, "optimizer.boundaries[%d] = %g: expected increasing steps >= 0", i, b[i]);
    }
    bounds[i] = (int64_t)b[i];
  }
  for (int i = 0; i < nv; i++) {
    if (values[i] < 0) {
      return tfx_err_set(err, TFX_ECONFIG, "optimizer.values[%d] = %g: a rate cannot be negative", i, values[i]);
    }
  }
  *n_bounds = nb;
  return TFX_OK;
}

static int validate_schedule(const tfx_config *cfg, tfx_err *err) {
  if (strcmp(cfg->schedule, "piecewise") != 0) {
    return TFX_OK;
  }
  int64_t bounds[TFX_MAX_PIECES];
  double values[TFX_MAX_PIECES + 1];
  int n;
  return tfx_config_piecewise(cfg, bounds, values, &n, err);
}

int tfx_config_validate_choices(const tfx_config *cfg, tfx_err *err) {
  int rc;
  if ((rc = one_of(cfg->mode, modes, "training.mode", err)) ||
      (rc = one_of(cfg->nan_policy, nan_policies, "training.nan_policy", err))) {
    return rc;
  }
  if ((rc = one_of(cfg->optimizer, optimizers, "optimizer.name", err))) {
    return rc;
  }
  if ((rc = one_of(cfg->schedule, schedules, "optimizer.schedule", err)) || (rc = validate_schedule(cfg, err))) {
    return rc;
  }
  if ((rc = one_of(cfg->strategy, strategies, "placement.strategy", err)) ||
      (rc = one_of(cfg->table_partition, table_partitions, "placement.table_partition", err))) {
    return rc;
  }
  if ((rc = one_of(cfg->loss, losses, "model.loss", err))) {
    return rc;
  }
  if ((rc = one_of(cfg->local_transport, transports, "cluster.local_transport", err))) {
    return rc;
  }
  if ((rc = one_of(cfg->data_format, formats, "data.format", err)) ||
      (rc = one_of(cfg->shard_by, shard_kinds, "data.shard_by", err))) {
    return rc;
  }
  return TFX_OK;
}

int tfx_config_validate(const tfx_config *cfg, tfx_err *err) {
  int rc = tfx_config_validate_choices(cfg, err);
  if (rc) {
    return rc;
  }
  if (!(cfg->data_std > 0)) {
    return tfx_err_set(err, TFX_ECONFIG, "data.std: %g must be > 0 (features become (x * scale - mean) / std)",
                       cfg->data_std);
  }
  if (cfg->n_layers == 0 && !cfg->plugin[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers: the model has no layers");
  }
  int streamed = cfg->data_stream || !strcmp(cfg->shard_by, "file");
  if (tfx_config_sparse_input(cfg) && !cfg->n_features && (cfg->data_mean != 0 || cfg->data_std != 1)) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "sparse input (an embedding_bag): data.mean and data.std would make every feature nonzero; "
                       "use data.scale");
  }
  if (tfx_config_sparse_input(cfg) && streamed && !cfg->n_features && strcmp(cfg->data_format, "libsvm")) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "data.stream / shard_by file: an embedding_bag over the input streams LibSVM "
                       "files (or declare model.features)");
  }
  for (const char *p = cfg->metrics; *p;) {
    size_t n = strcspn(p, ",");
    if (!is_metric(p, n)) {
      return tfx_err_set(err, TFX_ECONFIG, "model.metrics: '%.*s' (want loss, accuracy, top_K, auc or log_loss)",
                         (int)n, p);
    }
    p += n + (p[n] == ',');
  }
  return TFX_OK;
}

static json_object *section(json_object *root, const char *path, char *leaf, size_t n) {
  TFX_ASSERT(strlen(path) < 256);
  json_object *node = root, *next;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  char *part = buf, *dot;
  while ((dot = strchr(part, '.'))) {
    *dot = '\0';
    if (!json_object_object_get_ex(node, part, &next)) {
      next = json_object_new_object();
      json_object_object_add(node, part, next);
    }
    node = next;
    part = dot + 1;
  }
  snprintf(leaf, n, "%s", part);
  return node;
}

static json_object *value_json(const void *base, const option *o) {
  const char *p = (const char *)base + o->offset;
  switch (o->type) {
    case OPT_STR:
      return json_object_new_string(p);
    case OPT_BOOL:
      return json_object_new_boolean(*(const int *)p);
    case OPT_DBL:
      return json_object_new_double(*(const double *)p);
    case OPT_I64:
      return json_object_new_int64(*(const int64_t *)p);
    default:
      return json_object_new_int(*(const int *)p);
  }
}

/* A checked shape "784,10" as the JSON list [784, 10]. */
static json_object *dims_json(const char *shape) {
  json_object *arr = json_object_new_array();
  for (const char *p = shape; *p;) {
    char *end;
    long long d = strtoll(p, &end, 10);
    if (end == p) {
      break; /* not reached: shapes are checked when they enter the config */
    }
    json_object_array_add(arr, json_object_new_int64(d));
    p = end + (*end == ',');
  }
  return arr;
}

static json_object *layers_json(const tfx_config *cfg) {
  json_object *arr = json_object_new_array();
  for (int i = 0; i < cfg->n_layers; i++) {
    json_object *l = json_object_new_object();
    for (size_t k = 0; k < N_LAYER_OPTIONS; k++) {
      json_object_object_add(l, layer_options[k].path, value_json(&cfg->layers[i], &layer_options[k]));
    }
    json_object_array_add(arr, l);
  }
  return arr;
}

char *tfx_config_to_json(const tfx_config *cfg) {
  json_object *root = json_object_new_object(), *model = json_object_new_object(), *shape = json_object_new_array();
  for (int i = 0; i < cfg->input_rank; i++) {
    json_object_array_add(shape, json_object_new_int(cfg->input_shape[i]));
  }
  json_object_object_add(model, "input_shape", shape);
  json_object_object_add(model, "layers", layers_json(cfg));
  json_object *vars = json_object_new_array();
  for (int i = 0; i < cfg->n_variables; i++) {
    json_object *v = json_object_new_object();
    for (size_t k = 0; k < N_VAR_OPTIONS; k++) {
      json_object *val = strcmp(var_options[k].path, "shape") ? value_json(&cfg->variables[i], &var_options[k])
                                                              : dims_json(cfg->variables[i].shape);
      json_object_object_add(v, var_options[k].path, val);
    }
    json_object_array_add(vars, v);
  }
  json_object_object_add(model, "variables", vars);
  json_object *params = cfg->plugin_params[0] ? json_tokener_parse(cfg->plugin_params) : NULL;
  if (params) {
    json_object_object_add(model, "params", params);
  }
  json_object *feats = json_object_new_array();
  for (int i = 0; i < cfg->n_features; i++) {
    json_object *f = json_object_new_object();
    for (size_t k = 0; k < N_FEATURE_OPTIONS; k++) {
      json_object_object_add(f, feature_options[k].path, value_json(&cfg->features[i], &feature_options[k]));
    }
    json_object_array_add(feats, f);
  }
  json_object_object_add(model, "features", feats);
  json_object_object_add(root, TFX_CONFIG_FORMAT_KEY, json_object_new_int(TFX_CONFIG_FORMAT));
  json_object_object_add(root, "model", model);
  json_object *vals = json_object_new_array();
  for (int i = 0; i < cfg->n_valsets; i++) {
    json_object *v = json_object_new_object();
    for (size_t k = 0; k < N_VALSET_OPTIONS; k++) {
      json_object_object_add(v, valset_options[k].path, value_json(&cfg->valsets[i], &valset_options[k]));
    }
    json_object_array_add(vals, v);
  }
  json_object_object_add(root, "validation", vals);
  char leaf[256];
  for (size_t i = 0; i < N_OPTIONS; i++) {
    json_object *node = section(root, options[i].path, leaf, sizeof leaf);
    json_object_object_add(node, leaf, value_json(cfg, &options[i]));
  }
  char *s = strdup(json_object_to_json_string_ext(
      root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(root);
  return s;
}

/* Prints one option table: path (after prefix), type, default and meaning, nothing cut. */
static void print_table(const char *title, const char *prefix, const option *table, size_t n) {
  static const char *const tnames[] = {"int", "int", "number", "string", "bool"};
  printf("\n%s\n", title);
  for (size_t i = 0; i < n; i++) {
    const option *o = &table[i];
    char path[96];
    snprintf(path, sizeof path, "%s%s", prefix, o->path);
    printf("%-34s %-7s %-10s %s\n", path, tnames[o->type], o->def[0] ? o->def : "\"\"", o->help);
  }
}

void tfx_config_print_options(void) {
  printf("%-34s %-7s %-10s %s\n", "option", "type", "default", "meaning");
  print_table("# the experiment's sections (--set KEY=VALUE)", "", options, N_OPTIONS);
  print_table("# model.layers[N]: each layer", "model.layers[].", layer_options, N_LAYER_OPTIONS);
  print_table("# model.features[N]: feature columns (sparse models)", "model.features[].", feature_options,
              N_FEATURE_OPTIONS);
  print_table("# model.variables[N]: variables the graph ops use", "model.variables[].", var_options, N_VAR_OPTIONS);
  print_table("# validation[N]: named validation sets", "validation[].", valset_options, N_VALSET_OPTIONS);
  printf(
      "\n# hyperparameters: {NAME: SPEC}, referenced as \"$NAME\" anywhere in the experiment\n"
      "%-34s %s\n%-34s %s\n%-34s %s\n%-34s %s\n%-34s %s\n",
      "hyperparameters.NAME.type", "constant (value) | int (min, max) | float | log_float (min, max) | categorical",
      "hyperparameters.NAME.value", "constant: the value", "hyperparameters.NAME.min / max", "the range searched",
      "hyperparameters.NAME.values", "categorical: the choices", "hyperparameters.NAME.default",
      "what a plain run uses (else the constant, the minimum or the first value)");
}
