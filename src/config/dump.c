/* The resolved experiment as JSON (config.json, an export's model.json) and the option table as --help-options
 * text. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "config/config.h"
#include "config/config_impl.h"

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

/* A list of n entries (stride bytes apart from first) as a JSON array of objects, one key per option of table; a
 * variable's shape "784,10" as the list [784, 10]. */
static json_object *list_json(const void *first, size_t stride, int n, const config__option *table, size_t n_opts) {
  json_object *arr = json_object_new_array();
  for (int i = 0; i < n; i++) {
    const char *entry = (const char *)first + (size_t)i * stride;
    json_object *o = json_object_new_object();
    for (size_t k = 0; k < n_opts; k++) {
      int shape = table == config__var_options && !strcmp(table[k].path, "shape");
      json_object_object_add(
          o, table[k].path,
          shape ? dims_json(((const tfx_var_spec *)entry)->shape) : config__value_json(entry, &table[k]));
    }
    json_object_array_add(arr, o);
  }
  return arr;
}

/* model.input_shape as the model reads it: with feature columns, the dense input is their numeric columns
 * ([count], at least 1), not the IDX default [28, 28, 1]. */
static json_object *shape_json(const tfx_config *cfg) {
  json_object *shape = json_object_new_array();
  if (cfg->n_features > 0) {
    int numeric = tfx_config_numeric_features(cfg);
    json_object_array_add(shape, json_object_new_int(numeric > 0 ? numeric : 1));
    return shape;
  }
  for (int i = 0; i < cfg->input_rank; i++) {
    json_object_array_add(shape, json_object_new_int(cfg->input_shape[i]));
  }
  return shape;
}

char *tfx_config_to_json(const tfx_config *cfg) {
  json_object *root = json_object_new_object(), *model = json_object_new_object();
  json_object_object_add(model, "input_shape", shape_json(cfg));
  json_object_object_add(
      model, "layers",
      list_json(cfg->layers, sizeof cfg->layers[0], cfg->n_layers, config__layer_options, config__n_layer_options));
  json_object_object_add(model, "variables",
                         list_json(cfg->variables, sizeof cfg->variables[0], cfg->n_variables, config__var_options,
                                   config__n_var_options));
  json_object *params = cfg->plugin_params[0] ? json_tokener_parse(cfg->plugin_params) : NULL;
  if (params) {
    json_object_object_add(model, "params", params);
  }
  json_object_object_add(model, "features",
                         list_json(cfg->features, sizeof cfg->features[0], cfg->n_features, config__feature_options,
                                   config__n_feature_options));
  json_object_object_add(root, TFX_CONFIG_FORMAT_KEY, json_object_new_int(TFX_CONFIG_FORMAT));
  if (cfg->name[0]) {
    json_object_object_add(root, "name", json_object_new_string(cfg->name));
  }
  json_object_object_add(root, "model", model);
  json_object_object_add(root, "validation",
                         list_json(cfg->valsets, sizeof cfg->valsets[0], cfg->n_valsets, config__valset_options,
                                   config__n_valset_options));
  char leaf[256];
  for (size_t i = 0; i < config__n_options; i++) {
    const config__option *o = &config__options[i];
    json_object *node = section(root, o->path, leaf, sizeof leaf);
    int idx_only = !strcmp(leaf, "labels") && cfg->data_format != TFX_FORMAT_IDX; /* one file holds both */
    json_object_object_add(node, leaf, idx_only ? json_object_new_string("") : config__value_json(cfg, o));
  }
  char *s = strdup(json_object_to_json_string_ext(
      root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(root);
  return s;
}

/* Prints one config__option table: path (after prefix), type, default and meaning, nothing cut. */
static void print_table(const char *title, const char *prefix, const config__option *table, size_t n) {
  static const char *const tnames[] = {"int", "int", "number", "string", "bool", "choice"};
  printf("\n%s\n", title);
  for (size_t i = 0; i < n; i++) {
    const config__option *o = &table[i];
    char path[96];
    snprintf(path, sizeof path, "%s%s", prefix, o->path);
    printf("%-34s %-7s %-10s %s\n", path, tnames[o->type], o->def[0] ? o->def : "\"\"", o->help);
  }
}

void tfx_config_print_options(void) {
  printf("%-34s %-7s %-10s %s\n", "config__option", "type", "default", "meaning");
  print_table("# the experiment's sections (--set KEY=VALUE)", "", config__options, config__n_options);
  printf("%-34s %-7s %-10s %s\n%-34s %-7s %-10s %s\n", "model.input_shape", "list", "[28,28,1]",
         "the model input's shape: 1 to 3 positive dims", "model.params", "object", "{}",
         "a plugin's parameters (any JSON), handed to its build");
  print_table("# model.layers[N]: each layer", "model.layers[].", config__layer_options, config__n_layer_options);
  print_table("# model.features[N]: feature columns (sparse models)", "model.features[].", config__feature_options,
              config__n_feature_options);
  print_table("# model.variables[N]: variables the graph ops use", "model.variables[].", config__var_options,
              config__n_var_options);
  print_table("# validation[N]: named validation sets", "validation[].", config__valset_options,
              config__n_valset_options);
  printf("%-34s %-7s %-10s %s\n", "validation[].metrics", "object", "-",
         "per metric aggregation, {\"accuracy\": \"mean\", \"loss\": \"max\"}: also names the metrics reported");
  printf("\n# lists' entries are set as --set model.layers[N].KEY=VALUE (N an entry of the experiment)\n");
  printf(
      "\n# hyperparameters: {NAME: SPEC}, referenced as \"$NAME\" anywhere in the experiment\n"
      "%-34s %s\n%-34s %s\n%-34s %s\n%-34s %s\n%-34s %s\n",
      "hyperparameters.NAME.type", "constant (value) | int (min, max) | float | log_float (min, max) | categorical",
      "hyperparameters.NAME.value", "constant: the value", "hyperparameters.NAME.min / max", "the range searched",
      "hyperparameters.NAME.values", "categorical: the choices", "hyperparameters.NAME.default",
      "what a plain run uses (else the constant, the minimum or the first value)");
}
