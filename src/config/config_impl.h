/* Declarations private to src/config: the option tables (options.c), their typed setters (values.c), the strict
 * JSON reader (json.c), the model's lists (lists.c) and the metric names the rules accept (rules.c).
 * Calls go one way: config.c -> lists.c -> rules.c, values.c -> options.c; dump.c -> values.c; json.c alone. */
#ifndef TFX_CONFIG_IMPL_H
#define TFX_CONFIG_IMPL_H

#include <json-c/json.h>
#include <stddef.h>

#include "common/err.h"
#include "config/config.h"

typedef enum config__opt_type { OPT_INT, OPT_I64, OPT_DBL, OPT_STR, OPT_BOOL, OPT_ENUM } config__opt_type;

/* One option: its path, type, place in the struct, bounds (numbers), default (as text), meaning and, for
 * OPT_ENUM, the NULL-terminated texts of the enum's values in order. */
typedef struct config__option {
  const char *path;
  config__opt_type type;
  size_t offset, size;
  double min, max;
  const char *def;
  const char *help;
  const char *const *choices;
} config__option;

/* The tables of options.c: the sections, a layer, a variable, a feature column, a validation set. */
extern const config__option config__options[], config__layer_options[], config__var_options[],
    config__feature_options[], config__valset_options[];
extern const size_t config__n_options, config__n_layer_options, config__n_var_options, config__n_feature_options,
    config__n_valset_options;

/* The option at `path` in table[0..n), or NULL; borrowed from the static table. */
const config__option *config__find(const config__option *table, size_t n, const char *path);
/* The number of choices of an OPT_ENUM option (0 for other types). */
int config__choice_count(const config__option *o);

/* Sets option o of the struct at base from a JSON value, checking type, bounds and choices; `where` names the key
 * in errors. */
int config__set_json(void *base, const config__option *o, json_object *v, const char *where, tfx_err *err);
/* Sets o to its default. */
int config__set_default(void *base, const config__option *o);
/* Sets every option of table[0..n) at base to its default. */
void config__defaults(void *base, const config__option *table, size_t n);
/* A JSON list as comma-separated text in a string option: strings or integers, or numbers only with `numbers`. */
int config__set_list(void *base, const config__option *o, json_object *arr, const char *where, int numbers,
                     tfx_err *err);
/* config__set_json, or config__set_list for a list given to a string option. */
int config__set_json_or_list(void *base, const config__option *o, json_object *v, const char *where, tfx_err *err);
/* Option o of the struct at base as a new JSON value; caller owns (json_object_put). */
json_object *config__value_json(const void *base, const config__option *o);

/* Parses text as exactly one JSON value (whitespace around it only; trailing text is an error naming the offset);
 * errors start with `origin`. Caller owns the result (json_object_put); NULL with err set on failure. */
json_object *config__json_parse(const char *text, const char *origin, tfx_err *err);

/* Parses model.layers, model.input_shape, model.variables, model.features and validation into cfg (all or
 * nothing); errors name the entry and key. */
int config__parse_layers(tfx_config *cfg, json_object *arr, tfx_err *err);
int config__parse_variables(tfx_config *cfg, json_object *arr, tfx_err *err);
int config__parse_features(tfx_config *cfg, json_object *arr, tfx_err *err);
int config__parse_valsets(tfx_config *cfg, json_object *arr, tfx_err *err);
int config__parse_shape(tfx_config *cfg, json_object *arr, tfx_err *err);
/* Sets one key of one entry of a list: model.layers[N].KEY, model.variables[N].KEY, model.features[N].KEY or
 * validation[N].KEY (N an existing entry), checked as the whole list would be. */
int config__set_entry(tfx_config *cfg, const char *path, json_object *val, tfx_err *err);
/* Keeps model.params (any JSON, for a plugin) as compact text. */
int config__parse_params(tfx_config *cfg, json_object *val, tfx_err *err);
/* The experiment's top-level "name" (a string, at most 127 bytes) into cfg->name. */
int config__parse_name(tfx_config *cfg, json_object *val, tfx_err *err);

/* The metric names a watch (keep_best, early_stopping) or model.metrics accepts, for error messages. */
#define TFX_METRIC_NAMES \
  "loss, accuracy, top_K, auc, log_loss, precision, recall, f1, precision_K, recall_K, f1_K or auc_K"
/* Whether text[0..n) is a metric name (loss, accuracy, auc, log_loss, top_K, precision, recall, f1, their _K per
 * class, per_class) or an aggregation (mean, min, max, sum). */
int config__is_metric(const char *m, size_t n);
int config__is_agg(const char *a, size_t n);

#endif
