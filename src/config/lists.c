/* The experiment's lists: model.layers, model.variables, model.features, validation sets and model.input_shape,
 * each entry read through its option table; a list is replaced whole or not at all. */
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/config_impl.h"

static void layer_defaults(tfx_layer_spec *l) {
  memset(l, 0, sizeof *l);
  config__defaults(l, config__layer_options, config__n_layer_options);
}

static int parse_layer(tfx_layer_spec *l, json_object *obj, int i, tfx_err *err) {
  char where[96];
  if (!json_object_is_type(obj, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d]: expected an object", i);
  }
  layer_defaults(l);
  json_object_object_foreach(obj, key, val) {
    snprintf(where, sizeof where, "model.layers[%d].%s", i, key);
    const config__option *o = config__find(config__layer_options, config__n_layer_options, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
    }
    int rc = config__set_json_or_list(l, o, val, where, err);
    if (rc) {
      return rc;
    }
  }
  if (!l->type[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d].type: missing", i);
  }
  return TFX_OK;
}

int config__parse_layers(tfx_config *cfg, json_object *arr, tfx_err *err) {
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
  config__defaults(v, config__var_options, config__n_var_options);
  json_object_object_foreach(obj, key, val) {
    snprintf(where, sizeof where, "model.variables[%d].%s", i, key);
    const config__option *o = config__find(config__var_options, config__n_var_options, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
    }
    int rc = config__set_json_or_list(v, o, val, where, err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

int config__parse_variables(tfx_config *cfg, json_object *arr, tfx_err *err) {
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

/* agg is one aggregation for every metric, or "metric:agg,..." naming the metrics reported. */
static int check_agg(const char *agg, int i, tfx_err *err) {
  if (!strchr(agg, ':')) {
    return config__is_agg(agg, strlen(agg))
               ? TFX_OK
               : tfx_err_set(err, TFX_ECONFIG, "validation[%d].agg: '%s' (want mean, min, max or sum)", i, agg);
  }
  for (const char *p = agg; *p;) {
    size_t n = strcspn(p, ","), k = strcspn(p, ":");
    if (k >= n || !config__is_metric(p, k) || !config__is_agg(p + k + 1, n - k - 1)) {
      return tfx_err_set(err, TFX_ECONFIG,
                         "validation[%d].metrics: '%.*s' (want " TFX_METRIC_NAMES ", each mean, min, max or sum; "
                         "the per-class ones count the whole set)",
                         i, (int)n, p);
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
  config__defaults(v, config__valset_options, config__n_valset_options);
  json_object_object_foreach(obj, key, val) {
    snprintf(where, sizeof where, "validation[%d].%s", i, key);
    if (!strcmp(key, "metrics")) {
      int rc = metrics_agg(v, val, where, err);
      if (rc) {
        return rc;
      }
      continue;
    }
    const config__option *o = config__find(config__valset_options, config__n_valset_options, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
    }
    int rc = config__set_json(v, o, val, where, err);
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
  if (f->max_len > 0 && strcmp(f->type, "identity") && strcmp(f->type, "hash")) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features[%d] (%s): max_len is for identity and hash columns", i,
                       f->name);
  }
  if (!strcmp(f->normalizer, "none")) {
    f->normalizer[0] = '\0'; /* as it is, the same as leaving it out */
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

int config__parse_features(tfx_config *cfg, json_object *arr, tfx_err *err) {
  size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
  if (!json_object_is_type(arr, json_type_array) || n > TFX_MAX_FEATURES) {
    return tfx_err_set(err, TFX_ECONFIG, "model.features: expected a list of at most %d columns", TFX_MAX_FEATURES);
  }
  tfx_config next = *cfg;
  for (size_t i = 0; i < n; i++) {
    json_object *obj = json_object_array_get_idx(arr, i);
    tfx_feature_spec *f = &next.features[i];
    memset(f, 0, sizeof *f);
    config__defaults(f, config__feature_options, config__n_feature_options);
    if (!json_object_is_type(obj, json_type_object)) {
      return tfx_err_set(err, TFX_ECONFIG, "model.features[%zu]: expected an object", i);
    }
    json_object_object_foreach(obj, key, val) {
      char where[96];
      snprintf(where, sizeof where, "model.features[%zu].%s", i, key);
      const config__option *o = config__find(config__feature_options, config__n_feature_options, key);
      int rc = o ? config__set_json(f, o, val, where, err) : tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", where);
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

int config__parse_valsets(tfx_config *cfg, json_object *arr, tfx_err *err) {
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

int config__parse_shape(tfx_config *cfg, json_object *arr, tfx_err *err) {
  size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
  if (n < 1 || n > 3) {
    return tfx_err_set(err, TFX_ECONFIG, "model.input_shape: expected 1 to 3 positive integers");
  }
  int shape[3];
  int64_t values = 1; /* every size the model computes from the shape is an int (json-c would clamp silently) */
  for (size_t i = 0; i < n; i++) {
    json_object *d = json_object_array_get_idx(arr, i);
    int64_t v = json_object_is_type(d, json_type_int) ? json_object_get_int64(d) : 0;
    if (v < 1) {
      return tfx_err_set(err, TFX_ECONFIG, "model.input_shape[%zu]: expected a positive integer", i);
    }
    if (v > INT_MAX || (values *= v) > INT_MAX) {
      return tfx_err_set(err, TFX_ECONFIG, "model.input_shape[%zu]: %lld makes the input over the bound of %d values",
                         i, (long long)v, INT_MAX);
    }
    shape[i] = (int)v;
  }
  memcpy(cfg->input_shape, shape, n * sizeof(int));
  cfg->input_rank = (int)n;
  return TFX_OK;
}

void tfx_config_layer_init(tfx_layer_spec *l) {
  layer_defaults(l);
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

int tfx_config_add_layer_json(tfx_config *cfg, const char *json, tfx_err *err) {
  if (cfg->n_layers >= TFX_MAX_LAYERS) {
    return tfx_err_set(err, TFX_ECONFIG, "model: more than %d layers", TFX_MAX_LAYERS);
  }
  json_object *obj = config__json_parse(json, "plugin layer", err);
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

int config__parse_params(tfx_config *cfg, json_object *val, tfx_err *err) {
  const char *text = json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  if (strlen(text) >= sizeof cfg->plugin_params) {
    return tfx_err_set(err, TFX_ECONFIG, "model.params: too long");
  }
  strcpy(cfg->plugin_params, text);
  return TFX_OK;
}

int config__parse_name(tfx_config *cfg, json_object *val, tfx_err *err) {
  const char *text = json_object_get_string(val);
  if (!json_object_is_type(val, json_type_string) || strlen(text) >= sizeof cfg->name) {
    return tfx_err_set(err, TFX_ECONFIG, "name: want a string of at most %zu bytes", sizeof cfg->name - 1);
  }
  strcpy(cfg->name, text);
  return TFX_OK;
}

/* The lists --set may index: model.layers[N].KEY and the like, each with its table, entries and checker. */
typedef struct indexed_list {
  const char *name;
  const config__option *table;
  const size_t *n_opts;
  size_t offset, stride, count_offset;
} indexed_list;

#define LIST(path, tbl, n, arr, count) \
  { path, tbl, &n, offsetof(tfx_config, arr), sizeof(((tfx_config *)0)->arr[0]), offsetof(tfx_config, count) }
static const indexed_list indexed[] = {
    LIST("model.layers", config__layer_options, config__n_layer_options, layers, n_layers),
    LIST("model.variables", config__var_options, config__n_var_options, variables, n_variables),
    LIST("model.features", config__feature_options, config__n_feature_options, features, n_features),
    LIST("validation", config__valset_options, config__n_valset_options, valsets, n_valsets),
};

/* Checks entry i of a list after one of its keys changed, as parsing the whole list would. */
static int recheck(tfx_config *cfg, const indexed_list *l, int i, tfx_err *err) {
  if (l->table == config__var_options) {
    return check_variable(cfg, &cfg->variables[i], i, err);
  }
  if (l->table == config__feature_options) {
    return check_feature(cfg, &cfg->features[i], i, err);
  }
  if (l->table == config__valset_options) {
    return check_agg(cfg->valsets[i].agg, i, err);
  }
  return TFX_OK;
}

int config__set_entry(tfx_config *cfg, const char *path, json_object *val, tfx_err *err) {
  for (size_t k = 0; k < sizeof indexed / sizeof indexed[0]; k++) {
    const indexed_list *l = &indexed[k];
    size_t n = strlen(l->name);
    char key[64];
    int i = -1, end = 0;
    if (strncmp(path, l->name, n) || sscanf(path + n, "[%d].%63[a-z_]%n", &i, key, &end) != 2 || path[n + end]) {
      continue;
    }
    int count = *(const int *)((const char *)cfg + l->count_offset);
    if (i < 0 || i >= count) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: the experiment has %d entries in %s", path, count, l->name);
    }
    const config__option *o = config__find(l->table, *l->n_opts, key);
    if (!o) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: unknown key", path);
    }
    char *entry = (char *)cfg + l->offset + (size_t)i * l->stride;
    int rc = config__set_json_or_list(entry, o, val, path, err);
    return rc ? rc : recheck(cfg, l, i, err);
  }
  return tfx_err_set(err, TFX_ECONFIG, "unknown key '%s' (lists are indexed as model.layers[N].KEY)", path);
}

const tfx_layer_spec *tfx_config_table_layer(const tfx_config *cfg, const char *var) {
  const char *slash = strrchr(var, '/');
  size_t len = slash ? (size_t)(slash - var) : strlen(var);
  char name[80];
  for (int i = 0, unnamed = 0; i < cfg->n_layers; i++) {
    const tfx_layer_spec *l = &cfg->layers[i];
    if (strcmp(l->type, "embedding_bag") != 0) {
      continue;
    }
    if (l->name[0]) {
      snprintf(name, sizeof name, "%s", l->name);
    } else {
      snprintf(name, sizeof name, "embedding_bag_%d", ++unnamed);
    }
    if (strlen(name) == len && !strncmp(name, var, len)) {
      return l;
    }
  }
  return NULL;
}

size_t tfx_table_row_bytes(int64_t dim, int n_slots) {
  return (size_t)dim * (size_t)(1 + n_slots) * sizeof(float) + 2 * sizeof(int64_t);
}

size_t tfx_table_map_cells(int64_t max_rows) {
  return (size_t)(max_rows * 10 + 6) / 7;
}

size_t tfx_table_gone_max(int64_t max_rows) {
  return max_rows / 2 > 0 ? (size_t)(max_rows / 2) : 1;
}

void tfx_table_cap_bound(int64_t max_rows, int64_t dim, int n_slots, int admit, int incremental, int background,
                         tfx_table_bound *b) {
  const size_t huge = (size_t)2 << 20, cell = 16, first_map = 1024;
  size_t slab_rows = ((size_t)max_rows + TFX_TABLE_SLAB_ROWS - 1) / TFX_TABLE_SLAB_ROWS * TFX_TABLE_SLAB_ROWS;
  size_t values = slab_rows * (size_t)dim * (size_t)(1 + n_slots) * sizeof(float);
  values = values > huge ? (values + huge - 1) / huge * huge : values;
  b->rows = values + slab_rows * (tfx_table_row_bytes(dim, n_slots) - (size_t)dim * (size_t)(1 + n_slots) * 4);
  size_t cells = tfx_table_map_cells(max_rows);
  b->map = (cells > first_map ? cells : first_map) * cell;
  b->gone = incremental ? tfx_table_gone_max(max_rows) * sizeof(int64_t) : 0;
  b->sketch = admit ? TFX_TABLE_SKETCH_BYTES : 0;
  size_t copied = sizeof(int64_t) + (size_t)dim * (size_t)(1 + n_slots) * sizeof(float); /* an id and its row */
  b->copy = background ? (size_t)max_rows * copied : 0;
  b->total = b->rows + b->map + b->gone + b->sketch + b->copy + (64 << 10); /* + the struct, the first map, the slab list */
}
