/* The experiment read from JSON text, files, --set assignments and the environment, through the option tables
 * (options.c): sections here, the model's lists in lists.c. json-c never leaves src/config. */
#include "config/config.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "config/config_impl.h"
#include "config/hparams_impl.h"

void tfx_config_init(tfx_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  config__defaults(cfg, config__options, config__n_options);
  cfg->input_shape[0] = 28;
  cfg->input_shape[1] = 28;
  cfg->input_shape[2] = 1;
  cfg->input_rank = 3;
}

typedef int (*list_parser)(tfx_config *cfg, json_object *val, tfx_err *err);

/* The keys that are not options of the table: the model's lists and params (each with its parser), and keys read
 * elsewhere or only kept (NULL: accepted as they are). */
static const struct special {
  const char *path;
  list_parser parse;
  int file_only; /* read from the experiment file only: --set refuses it */
} specials[] = {
    {"model.layers", config__parse_layers},
    {"model.input_shape", config__parse_shape},
    {"model.variables", config__parse_variables},
    {"model.features", config__parse_features},
    {"model.params", config__parse_params},
    {"validation", config__parse_valsets},
    {"name", config__parse_name, 1},
    {"description", NULL, 1},
    {"hyperparameters", NULL, 1},
    {"provenance", NULL, 1},
    {TFX_CONFIG_FORMAT_KEY, NULL, 1},
};
#define N_SPECIALS (sizeof specials / sizeof specials[0])

/* Whether path names a section: a prefix, before a '.', of an option's or a special key's path. */
static int is_section(const char *path) {
  size_t n = strlen(path);
  for (size_t i = 0; i < config__n_options; i++) {
    if (strncmp(config__options[i].path, path, n) == 0 && config__options[i].path[n] == '.') {
      return 1;
    }
  }
  for (size_t i = 0; i < N_SPECIALS; i++) {
    if (strncmp(specials[i].path, path, n) == 0 && specials[i].path[n] == '.') {
      return 1;
    }
  }
  return 0;
}

static const struct special *find_special(const char *path) {
  for (size_t i = 0; i < N_SPECIALS; i++) {
    if (strcmp(specials[i].path, path) == 0) {
      return &specials[i];
    }
  }
  return NULL;
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
  const struct special *sp = find_special(path);
  if (sp) {
    return sp->parse ? sp->parse(cfg, val, err) : TFX_OK;
  }
  if (is_section(path)) {
    if (!json_object_is_type(val, json_type_object)) {
      return tfx_err_set(err, TFX_ECONFIG, "%s: expected an object (a section)", path);
    }
    return parse_object(cfg, val, path, err);
  }
  const config__option *o = config__find(config__options, config__n_options, path);
  if (!o) {
    return tfx_err_set(err, TFX_ECONFIG, "unknown key '%s'", path);
  }
  if (json_object_is_type(val, json_type_array) &&
      (o->offset == offsetof(tfx_config, boundaries) || o->offset == offsetof(tfx_config, lr_values) ||
       o->offset == offsetof(tfx_config, class_weights))) {
    return config__set_list(cfg, o, val, path, 1, err);
  }
  return config__set_json(cfg, o, val, path, err);
}

int tfx_config_parse(tfx_config *cfg, const char *json, const char *origin, tfx_err *err) {
  json_object *root = config__json_parse(json, origin, err);
  if (!root) {
    return err ? err->code : TFX_ECONFIG;
  }
  int rc = TFX_OK;
  if (!json_object_is_type(root, json_type_object)) {
    rc = tfx_err_set(err, TFX_ECONFIG, "%s: expected a JSON object", origin);
  } else {
    tfx_config next = *cfg;
    rc = config__hparams_apply_defaults(root, err);
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
  json_object *root = config__json_parse(text, "", NULL), *marker;
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
      l->strides = 0;
      fixed++;
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
  json_object *val = config__json_parse(eq + 1, path, NULL);
  if (!val) {
    val = json_object_new_string(eq + 1);
  }
  tfx_config next = *cfg;
  const struct special *sp = find_special(path);
  int rc;
  if (sp && sp->file_only) {
    rc = tfx_err_set(err, TFX_ECONFIG, "--set %s: not an option (tfx reads '%s' from the experiment file only)", path,
                     path);
  } else {
    rc = strchr(path, '[') ? config__set_entry(&next, path, val, err) : set_path(&next, path, val, err);
  }
  if (!rc) {
    *cfg = next;
  }
  json_object_put(val);
  return rc;
}

/* TFX_SECURITY_SERVER_KEY for security.server_key: the config__option path in upper case, '.' as '_', TFX_ first. */
static void env_name(const char *path, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "TFX_");
  for (; *path && k + 1 < n; path++) {
    out[k++] = *path == '.' ? '_' : (char)(*path >= 'a' && *path <= 'z' ? *path - 'a' + 'A' : *path);
  }
  out[k] = '\0';
}

int tfx_config_apply_env(tfx_config *cfg, tfx_err *err) {
  tfx_config next = *cfg;
  for (size_t i = 0; i < config__n_options; i++) {
    char name[96];
    env_name(config__options[i].path, name, sizeof name);
    const char *path = config__options[i].path;
    const char *v = strncmp(path, "security.", 9) && strcmp(path, "cluster.max_message_bytes") ? NULL : getenv(name);
    if (!v) {
      continue;
    }
    json_object *val = config__options[i].type == OPT_STR || config__options[i].type == OPT_ENUM
                           ? NULL
                           : config__json_parse(v, name, NULL);
    if (!val) {
      val = json_object_new_string(v);
    }
    int rc = config__set_json(&next, &config__options[i], val, name, err);
    json_object_put(val);
    if (rc) {
      return rc;
    }
  }
  *cfg = next;
  return TFX_OK;
}
