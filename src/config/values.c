/* The option table's typed setters: one option from a JSON value (type and bounds checked), its default, a list
 * as comma-separated text; and an option's value as JSON. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/config_impl.h"

static int set_string(void *base, const config__option *o, const char *s, const char *where, tfx_err *err) {
  if (strlen(s) >= o->size) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: value too long", where);
  }
  strcpy((char *)base + o->offset, s);
  return TFX_OK;
}

static int set_number(void *base, const config__option *o, double v, const char *where, tfx_err *err) {
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

/* An OPT_ENUM option: the index of `text` among its choices, stored as the enum; errors name the key. */
static int set_choice(void *base, const config__option *o, const char *text, const char *where, tfx_err *err) {
  for (int i = 0; o->choices[i]; i++) {
    if (strcmp(text, o->choices[i]) == 0) {
      *(int *)((char *)base + o->offset) = i;
      return TFX_OK;
    }
  }
  return tfx_err_set(err, TFX_ECONFIG, "%s: unknown value '%s'", where, text);
}

/* Sets one option from a JSON value, checking the type; `where` names the key in errors. */
int config__set_json(void *base, const config__option *o, json_object *v, const char *where, tfx_err *err) {
  json_type t = json_object_get_type(v);
  switch (o->type) {
    case OPT_STR:
      if (t != json_type_string) {
        return tfx_err_set(err, TFX_ECONFIG, "%s: expected a string", where);
      }
      return set_string(base, o, json_object_get_string(v), where, err);
    case OPT_ENUM:
      if (t != json_type_string) {
        return tfx_err_set(err, TFX_ECONFIG, "%s: expected a string", where);
      }
      return set_choice(base, o, json_object_get_string(v), where, err);
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

int config__set_default(void *base, const config__option *o) {
  json_object *v = NULL;
  if (o->type == OPT_STR || o->type == OPT_ENUM) {
    v = json_object_new_string(o->def);
  } else if (o->type == OPT_BOOL) {
    v = json_object_new_boolean(strcmp(o->def, "true") == 0);
  } else if (o->type == OPT_DBL) {
    v = json_object_new_double(strtod(o->def, NULL));
  } else {
    v = json_object_new_int64(strtoll(o->def, NULL, 10));
  }
  int rc = config__set_json(base, o, v, o->path, NULL);
  json_object_put(v);
  return rc;
}

/* A JSON list as comma-separated text in a string option, which round-trips through tfx_config_to_json: strings
 * or integers (model.variables shape, layer inputs), or with `numbers` set, integers or floats only
 * (optimizer.boundaries and values). */
int config__set_list(void *base, const config__option *o, json_object *arr, const char *where, int numbers,
                     tfx_err *err) {
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

/* Sets one config__option of a list-valued key from a string or a JSON list. */
int config__set_json_or_list(void *base, const config__option *o, json_object *v, const char *where, tfx_err *err) {
  if (o->type == OPT_STR && json_object_is_type(v, json_type_array)) {
    return config__set_list(base, o, v, where, 0, err);
  }
  return config__set_json(base, o, v, where, err);
}

json_object *config__value_json(const void *base, const config__option *o) {
  const char *p = (const char *)base + o->offset;
  switch (o->type) {
    case OPT_STR:
      return json_object_new_string(p);
    case OPT_ENUM: {
      int v = *(const int *)p;
      return json_object_new_string(v >= 0 && v < config__choice_count(o) ? o->choices[v] : "?");
    }
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

void config__defaults(void *base, const config__option *table, size_t n) {
  for (size_t i = 0; i < n; i++) {
    config__set_default(base, &table[i]);
  }
}
