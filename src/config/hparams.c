/* Hyperparameter specs: defaults for plain runs, sampling and grids for searches. */
#include "config/hparams.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/hparams_impl.h"

/* splitmix64: well-mixed even for neighbouring seeds (trial k and k+1). */
static double uniform(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return (double)((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

static const char *spec_type(json_object *spec) {
  json_object *t;
  return json_object_object_get_ex(spec, "type", &t) ? json_object_get_string(t) : "";
}

static double num(json_object *spec, const char *key) {
  json_object *v;
  return json_object_object_get_ex(spec, key, &v) ? json_object_get_double(v) : 0;
}

/* The "values" array of a categorical spec, or NULL (json-c asserts on the array length of anything else:
 * found by fuzz_config with "values": 252). Borrowed from spec. */
static json_object *values_of(json_object *spec) {
  json_object *v;
  return json_object_object_get_ex(spec, "values", &v) && json_object_is_type(v, json_type_array) ? v : NULL;
}

/* The number of grid points of a spec (categorical: its values; ranges: 3; constant: 1). */
static int grid_points(json_object *spec) {
  const char *t = spec_type(spec);
  if (!strcmp(t, "categorical")) {
    return values_of(spec) ? (int)json_object_array_length(values_of(spec)) : 0;
  }
  if (!strcmp(t, "int") && num(spec, "max") - num(spec, "min") < 2) {
    return (int)(num(spec, "max") - num(spec, "min")) + 1;
  }
  return strcmp(t, "constant") ? 3 : 1;
}

/* The value of a spec at position u in [0,1] (random) or grid point k of n. New reference; NULL if bad. */
static json_object *value_at(json_object *spec, double u) {
  const char *t = spec_type(spec);
  double lo = num(spec, "min"), hi = num(spec, "max");
  json_object *v;
  if (!strcmp(t, "constant")) {
    return json_object_object_get_ex(spec, "value", &v) ? json_object_get(v) : NULL;
  }
  if (!strcmp(t, "int")) {
    return json_object_new_int64((int64_t)floor(lo + u * (hi - lo + 1 - 1e-9)));
  }
  if (!strcmp(t, "float")) {
    return json_object_new_double(lo + u * (hi - lo));
  }
  if (!strcmp(t, "log_float") && lo > 0 && hi > 0) {
    return json_object_new_double(exp(log(lo) + u * (log(hi) - log(lo))));
  }
  if (!strcmp(t, "categorical") && (v = values_of(spec)) && json_object_array_length(v) > 0) {
    size_t n = json_object_array_length(v), k = (size_t)(u * (double)n);
    return json_object_get(json_object_array_get_idx(v, k < n ? k : n - 1));
  }
  return NULL;
}

/* The value a plain run uses: "default", else the constant, the lower bound or the first value. */
static json_object *default_value(json_object *spec) {
  json_object *d;
  if (json_object_object_get_ex(spec, "default", &d)) {
    return json_object_get(d);
  }
  return value_at(spec, 0.0);
}

/* Replaces every "$NAME" string below node with the chosen value (values: NAME -> value). */
static int substitute(json_object *node, json_object *values, tfx_err *err) {
  if (json_object_is_type(node, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(node); i++) {
      json_object *c = json_object_array_get_idx(node, i), *v;
      const char *s = json_object_is_type(c, json_type_string) ? json_object_get_string(c) : NULL;
      if (s && s[0] == '$') {
        if (!json_object_object_get_ex(values, s + 1, &v)) {
          return tfx_err_set(err, TFX_ECONFIG, "unknown hyperparameter '%s'", s);
        }
        json_object_array_put_idx(node, i, json_object_get(v));
      } else if (substitute(c, values, err)) {
        return TFX_ECONFIG;
      }
    }
  } else if (json_object_is_type(node, json_type_object)) {
    json_object_object_foreach(node, key, c) {
      json_object *v;
      const char *s = json_object_is_type(c, json_type_string) ? json_object_get_string(c) : NULL;
      if (s && s[0] == '$') {
        if (!json_object_object_get_ex(values, s + 1, &v)) {
          return tfx_err_set(err, TFX_ECONFIG, "%s: unknown hyperparameter '%s'", key, s);
        }
        json_object_object_add(node, key, json_object_get(v));
      } else if (substitute(c, values, err)) {
        return TFX_ECONFIG;
      }
    }
  }
  return TFX_OK;
}

/* Builds NAME -> value for every spec with pick(spec, index, ctx); NULL (error set) on a bad spec. */
static json_object *choose(json_object *hps, json_object *(*pick)(json_object *, int, void *), void *ctx,
                           tfx_err *err) {
  json_object *values = json_object_new_object();
  int i = 0;
  json_object_object_foreach(hps, name, spec) {
    json_object *v = json_object_is_type(spec, json_type_object) ? pick(spec, i++, ctx) : NULL;
    if (!v) {
      tfx_err_set(err, TFX_ECONFIG,
                  "hyperparameters.%s: expected {type: constant|int|float|log_float|categorical, ...}", name);
      json_object_put(values);
      return NULL;
    }
    json_object_object_add(values, name, v);
  }
  return values;
}

static json_object *pick_default(json_object *spec, int i, void *ctx) {
  (void)i, (void)ctx;
  return default_value(spec);
}

int config__hparams_apply_defaults(json_object *root, tfx_err *err) {
  json_object *hps;
  if (!json_object_object_get_ex(root, "hyperparameters", &hps)) {
    return TFX_OK;
  }
  if (!json_object_is_type(hps, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "hyperparameters: expected an object");
  }
  json_object *values = choose(hps, pick_default, NULL, err);
  if (!values) {
    return TFX_ECONFIG;
  }
  int rc = substitute(root, values, err);
  json_object_put(values);
  return rc;
}

typedef struct sampler {
  uint64_t state;
  int grid, trial, stride;
} sampler;

static json_object *pick_trial(json_object *spec, int i, void *ctx) {
  sampler *s = ctx;
  (void)i;
  if (!s->grid) {
    return value_at(spec, uniform(&s->state));
  }
  int n = grid_points(spec), k = (s->trial / s->stride) % (n > 0 ? n : 1);
  s->stride *= n > 0 ? n : 1;
  return value_at(spec, n > 1 ? (double)k / (double)(n - 1) * (1 - 1e-9) : 0);
}

static int grid_size(json_object *hps) {
  int total = 1;
  json_object_object_foreach(hps, name, spec) {
    (void)name;
    total *= json_object_is_type(spec, json_type_object) ? grid_points(spec) : 1;
  }
  return total;
}

static char *summarize(json_object *values) {
  char buf[1024] = "";
  size_t len = 0;
  json_object_object_foreach(values, name, v) {
    len += (size_t)snprintf(buf + len, sizeof buf - len < 2 ? 0 : sizeof buf - len, "%s%s=%s", len ? " " : "", name,
                            json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    if (len >= sizeof buf) {
      break;
    }
  }
  return strdup(buf);
}

int tfx_hparams_trial(const char *experiment, tfx_search_method method, uint64_t seed, int trial, char **out,
                      char **summary, tfx_err *err) {
  json_object *root = json_tokener_parse(experiment), *hps, *values = NULL;
  int rc = TFX_OK, grid = method == TFX_SEARCH_GRID;
  if (!root || !json_object_object_get_ex(root, "hyperparameters", &hps) ||
      !json_object_is_type(hps, json_type_object)) {
    json_object_put(root);
    return tfx_err_set(err, TFX_ECONFIG, "search: the experiment declares no hyperparameters");
  }
  if (grid && trial >= grid_size(hps)) {
    rc = tfx_err_set(err, TFX_ENOTFOUND, "search: the grid has %d points", grid_size(hps));
  }
  sampler s = {seed * 0x9E3779B97F4A7C15ULL + (uint64_t)trial * 0xD1B54A32D192ED03ULL + 1, grid, trial, 1};
  if (!rc && !(values = choose(hps, pick_trial, &s, err))) {
    rc = TFX_ECONFIG;
  }
  if (!rc) {
    rc = substitute(root, values, err);
  }
  if (!rc) {
    json_object_object_del(root, "hyperparameters");
    *out = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY));
    *summary = summarize(values);
  }
  json_object_put(values);
  json_object_put(root);
  return rc;
}
