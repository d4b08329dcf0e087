/* The experiment's cross-field rules (tfx_config_validate), the piecewise schedule's lists, and what the
 * experiment implies (sparse input, feature counts, a layer's strides). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/config_impl.h"

int config__is_agg(const char *a, size_t n) {
  return (n == 4 && !strncmp(a, "mean", 4)) ||
         (n == 3 && (!strncmp(a, "min", 3) || !strncmp(a, "max", 3) || !strncmp(a, "sum", 3)));
}

/* Whether m[0..n) is prefix followed by a decimal K in [lo, hi]. */
static int indexed(const char *m, size_t n, const char *prefix, int lo, int hi) {
  size_t p = strlen(prefix);
  if (n <= p || n > p + 3 || strncmp(m, prefix, p) || strspn(m + p, "0123456789") < n - p) {
    return 0;
  }
  int k = atoi(m + p);
  return k >= lo && k <= hi;
}

/* A metric name of model.metrics: loss, accuracy, auc, log_loss, top_K (1 <= K <= 100), precision, recall, f1,
 * precision_K, recall_K, f1_K (a class, 0 <= K < TFX_MAX_CLASSES), auc_K (a multi-label output), per_class (those
 * of every class) or confusion (the confusion matrix in eval records). */
int config__is_metric(const char *m, size_t n) {
  static const char *const plain[] = {"loss",      "accuracy", "auc",      "log_loss", "precision",
                                      "recall",    "f1",       "per_class", "confusion"};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
    if (n == strlen(plain[i]) && !strncmp(m, plain[i], n)) {
      return 1;
    }
  }
  const int last = TFX_MAX_CLASSES - 1;
  return indexed(m, n, "top_", 1, 100) || indexed(m, n, "precision_", 0, last) || indexed(m, n, "recall_", 0, last) ||
         indexed(m, n, "f1_", 0, last) || indexed(m, n, "auc_", 0, 30);
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
  if (cfg->schedule != TFX_SCHED_PIECEWISE) {
    return TFX_OK;
  }
  int64_t bounds[TFX_MAX_PIECES];
  double values[TFX_MAX_PIECES + 1];
  int n;
  return tfx_config_piecewise(cfg, bounds, values, &n, err);
}

/* Every fixed-value option of cfg holds one of its enum's values (a struct filled by code, not by the parser,
 * may not). */
static int check_choices(const tfx_config *cfg, tfx_err *err) {
  for (size_t i = 0; i < config__n_options; i++) {
    const config__option *o = &config__options[i];
    if (o->type != OPT_ENUM) {
      continue;
    }
    int v = *(const int *)((const char *)cfg + o->offset);
    if (v < 0 || v >= config__choice_count(o)) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown value %d", o->path, v);
    }
  }
  return TFX_OK;
}

int tfx_config_validate_choices(const tfx_config *cfg, tfx_err *err) {
  int rc = check_choices(cfg, err);
  return rc ? rc : validate_schedule(cfg, err);
}

const char *tfx_config_replicas_off(const tfx_config *cfg, int n_ps, int n_workers) {
  (void)cfg, (void)n_workers;
  return n_ps < 2 ? "one ps (no other to hold a backup)" : NULL;
}

void tfx_config_resolve_replicas(tfx_config *cfg, int n_ps, int n_workers) {
  if (cfg->ps_replicas < 0) {
    cfg->replicas_auto = 1;
    cfg->ps_replicas = tfx_config_replicas_off(cfg, n_ps, n_workers) ? 0 : 1;
  }
}

int tfx_config_validate_cluster(const tfx_config *cfg, int n_workers, tfx_err *err) {
  if (cfg->mode == TFX_MODE_SYNC && cfg->replicas_to_aggregate > n_workers) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "training.replicas_to_aggregate %d exceeds the %d worker(s): no step could ever complete",
                       cfg->replicas_to_aggregate, n_workers);
  }
  return TFX_OK;
}

/* The keys of a stream that never ends: a followed directory takes no epochs and no IDX pairs; the lazy-table
 * keys (max_rows, ttl_steps, admission) belong to embedding_bag layers. */
static int validate_endless(const tfx_config *cfg, tfx_err *err) {
  if (cfg->train_follow[0] && cfg->epochs > 0) {
    return tfx_err_set(err, TFX_ECONFIG, "data.train.follow: a followed directory never ends; training.epochs %d "
                       "cannot be counted (stop it with max_steps or a signal)", cfg->epochs);
  }
  if (cfg->train_follow[0] && cfg->data_format == TFX_FORMAT_IDX) {
    return tfx_err_set(err, TFX_ECONFIG, "data.train.follow: IDX comes as image and label file pairs; follow "
                       "reads csv, libsvm or tfrecord files");
  }
  for (int i = 0; i < cfg->n_layers; i++) {
    const tfx_layer_spec *l = &cfg->layers[i];
    int lazy_keys = l->max_rows || l->ttl_steps || l->admit_min_count > 1 || l->admit_probability < 1;
    if (lazy_keys && strcmp(l->type, "embedding_bag") != 0) {
      return tfx_err_set(err, TFX_ECONFIG,
                         "model.layers[%d]: max_rows, ttl_steps and admit_* apply to embedding_bag tables, not %s", i,
                         l->type);
    }
  }
  return TFX_OK;
}

int tfx_config_class_weights(const tfx_config *cfg, double *out, int max, int *n, tfx_err *err) {
  int rc = parse_numbers(cfg->class_weights, "model.class_weights", out, max, n, err);
  for (int i = 0; !rc && i < *n; i++) {
    if (out[i] < 0) {
      rc = tfx_err_set(err, TFX_ECONFIG, "model.class_weights[%d] = %g: a weight cannot be negative", i, out[i]);
    }
  }
  return rc;
}

/* The watched metric at `key` names a metric model.metrics could (empty: off). */
static int check_watch(const char *metric, const char *key, tfx_err *err) {
  if (metric[0] && (!config__is_metric(metric, strlen(metric)) || !strcmp(metric, "per_class") ||
                    !strcmp(metric, "confusion"))) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: '%s' (want " TFX_METRIC_NAMES ")", key, metric);
  }
  return TFX_OK;
}

/* The rules of keep_best, early stopping, exports as training goes and the loss weights. */
static int validate_trainer(const tfx_config *cfg, tfx_err *err) {
  int rc, n;
  double w[TFX_MAX_CLASS_WEIGHTS];
  if ((rc = check_watch(cfg->keep_best_metric, "checkpoint.keep_best.metric", err)) ||
      (rc = check_watch(cfg->stop_metric, "training.early_stopping.metric", err)) ||
      (rc = tfx_config_class_weights(cfg, w, TFX_MAX_CLASS_WEIGHTS, &n, err))) {
    return rc;
  }
  if (cfg->multi_label && (cfg->loss != TFX_LOSS_SIGMOID_CROSS_ENTROPY || cfg->class_weights[0])) {
    return tfx_err_set(err, TFX_ECONFIG, "model.multi_label: needs model.loss sigmoid_cross_entropy%s",
                       cfg->class_weights[0] ? " and no model.class_weights" : "");
  }
  if (cfg->label_smoothing > 0 && cfg->loss == TFX_LOSS_MSE) {
    return tfx_err_set(err, TFX_ECONFIG, "model.label_smoothing: smooths cross-entropy targets; model.loss is mse");
  }
  if (cfg->export_on_best && !cfg->keep_best_metric[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "export.on_best: needs checkpoint.keep_best.metric (best by what?)");
  }
  int columns = cfg->n_features > 0 && !cfg->data_stream && cfg->shard_by == TFX_SHARD_BY_RECORD &&
                (cfg->data_format == TFX_FORMAT_CSV || cfg->data_format == TFX_FORMAT_TFRECORD);
  if (cfg->weight_key[0] && !columns) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "data.weight_key '%s': example weights are read by the feature columns (model.features) of "
                       "csv and tfrecord data held in memory (data.format %s%s)",
                       cfg->weight_key, tfx_config_choice_name("data.format", cfg->data_format),
                       cfg->n_features ? ", streamed" : ", no model.features");
  }
  return TFX_OK;
}

int tfx_config_validate(const tfx_config *cfg, tfx_err *err) {
  int rc = tfx_config_validate_choices(cfg, err);
  if (!rc) {
    rc = validate_endless(cfg, err);
  }
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
  int streamed = cfg->data_stream || cfg->shard_by == TFX_SHARD_BY_FILE;
  if (tfx_config_sparse_input(cfg) && !cfg->n_features && (cfg->data_mean != 0 || cfg->data_std != 1)) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "sparse input (an embedding_bag): data.mean and data.std would make every feature nonzero; "
                       "use data.scale");
  }
  if (tfx_config_sparse_input(cfg) && streamed && !cfg->n_features && cfg->data_format != TFX_FORMAT_LIBSVM) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "data.stream / shard_by file: an embedding_bag over the input streams LibSVM "
                       "files (or declare model.features)");
  }
  for (const char *p = cfg->metrics; *p;) {
    size_t n = strcspn(p, ",");
    if (!config__is_metric(p, n)) {
      return tfx_err_set(err, TFX_ECONFIG, "model.metrics: '%.*s' (want " TFX_METRIC_NAMES ", per_class or confusion)", (int)n,
                         p);
    }
    p += n + (p[n] == ',');
  }
  return validate_trainer(cfg, err);
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

int tfx_config_sparse_input(const tfx_config *cfg) {
  const tfx_layer_spec *l = &cfg->layers[0];
  if (cfg->n_features > 0) {
    return 1; /* feature columns: read by their own reader (categorical as CSR, numeric dense) */
  }
  return cfg->n_layers > 0 && !strcmp(l->type, "embedding_bag") && (!l->inputs[0] || !strcmp(l->inputs, "input"));
}

const char *tfx_config_eval_file(const tfx_config *cfg) {
  /* Only IDX has a labels file; other formats hold labels and inputs in one file (a CSV eval error would name the
   * default IDX labels file). */
  return cfg->data_format == TFX_FORMAT_IDX && cfg->eval_labels[0] ? cfg->eval_labels : cfg->eval_images;
}

int tfx_config_layer_strides(const tfx_layer_spec *l) {
  if (l->strides) {
    return l->strides;
  }
  return strstr(l->type, "pool2d") ? l->pool_size : 1;
}
