/* dlopen'ed model plugins and their hooks. The builder functions are exported by tfx-node (ENABLE_EXPORTS). */
#include "config/plugin.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>

#include "common/log.h"

struct tfx_plugin_handle {
  void *so;
  const tfx_plugin *api; /* NULL: built-in hooks only */
  char path[TFX_PATH_MAX];
  long long stop_at_step, log_every, last_logged;
  int nan_guard;
};

/* Parses training.hooks into h. */
static int parse_hooks(tfx_plugin_handle *h, const char *spec, tfx_err *err) {
  for (const char *p = spec; *p;) {
    size_t n = strcspn(p, ",");
    char item[64];
    snprintf(item, sizeof item, "%.*s", (int)(n < 63 ? n : 63), p);
    if (!strncmp(item, "stop_at_step:", 13)) {
      h->stop_at_step = atoll(item + 13);
    } else if (!strncmp(item, "log_every:", 10)) {
      h->log_every = atoll(item + 10);
    } else if (!strcmp(item, "nan_guard")) {
      h->nan_guard = 1;
    } else if (n) {
      return tfx_err_set(err, TFX_ECONFIG,
                         "training.hooks: unknown hook '%s' (want stop_at_step:N, nan_guard, log_every:N)", item);
    }
    p += n + (p[n] == ',');
  }
  return TFX_OK;
}

int tfx_hooks_create(const tfx_config *cfg, tfx_plugin_handle **out, tfx_err *err) {
  *out = NULL;
  if (!cfg->hooks[0]) {
    return TFX_OK;
  }
  tfx_plugin_handle *h = calloc(1, sizeof *h);
  if (!h) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int rc = parse_hooks(h, cfg->hooks, err);
  if (rc) {
    return free(h), rc;
  }
  *out = h;
  return TFX_OK;
}

/* The built-in hooks: nonzero to stop. */
static int builtin(tfx_plugin_handle *h, int event, long long step, double loss, double accuracy) {
  if (event != TFX_HOOK_STEP && event != TFX_HOOK_EVAL) {
    return 0;
  }
  if (h->log_every > 0 && step / h->log_every > h->last_logged / h->log_every) {
    h->last_logged = step;
    tfx_log(TFX_LOG_INFO, "HOOK-LOG", "step %lld %s loss %.4f accuracy %.4f", step,
            event == TFX_HOOK_EVAL ? "eval" : "train", loss, accuracy);
  }
  if (h->nan_guard && event == TFX_HOOK_STEP && !isfinite(loss)) {
    tfx_log(TFX_LOG_ERROR, "HOOK-NAN", "training loss is %g at step %lld: stopping", loss, step);
    return 1;
  }
  return h->stop_at_step > 0 && step >= h->stop_at_step;
}

struct tfx_builder {
  tfx_config *cfg;
  tfx_err *err;
  int failed; /* the first failure's code: later calls fail too, so the message stays the first one */
};

/* Records a failure (the message is already in b->err). */
static int result(tfx_builder *b, int rc) {
  if (rc && !b->failed) {
    b->failed = rc;
  }
  return rc;
}

int tfx_builder_input(tfx_builder *b, int rank, const int *shape) {
  if (b->failed) {
    return b->failed;
  }
  if (rank < 1 || rank > 3 || !shape) {
    return result(b, tfx_err_set(b->err, TFX_ECONFIG, "plugin: input rank %d (want 1 to 3)", rank));
  }
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 1) {
      return result(b, tfx_err_set(b->err, TFX_ESHAPE, "plugin: input dim %d is %d", i, shape[i]));
    }
  }
  memcpy(b->cfg->input_shape, shape, sizeof(int) * (size_t)rank);
  b->cfg->input_rank = rank;
  return TFX_OK;
}

/* Copies s into a fixed-size field, failing with the field's name when it does not fit. */
static int copy_field(tfx_builder *b, char *dst, size_t n, const char *s, const char *what) {
  if (strlen(s) >= n) {
    return result(b, tfx_err_set(b->err, TFX_ECONFIG, "plugin: %s '%.40s...' is longer than %zu", what, s, n - 1));
  }
  strcpy(dst, s);
  return TFX_OK;
}

int tfx_builder_variable(tfx_builder *b, const char *name, int rank, const int *shape, const char *initializer,
                         int trainable) {
  if (b->failed) {
    return b->failed;
  }
  tfx_var_spec v = {.trainable = trainable != 0};
  if (rank < 1 || rank > 4 || !shape) {
    return result(b, tfx_err_set(b->err, TFX_ESHAPE, "plugin: variable '%s': rank %d (want 1 to 4)",
                                 name ? name : "(null)", rank));
  }
  size_t len = 0;
  for (int i = 0; i < rank; i++) {
    len += (size_t)snprintf(v.shape + len, sizeof v.shape - len, "%s%d", i ? "," : "", shape[i]);
  }
  int rc = copy_field(b, v.name, sizeof v.name, name ? name : "", "variable name");
  if (!rc && initializer) {
    rc = copy_field(b, v.initializer, sizeof v.initializer, initializer, "initializer");
  }
  return rc ? rc : result(b, tfx_config_add_variable(b->cfg, &v, b->err));
}

int tfx_builder_op(tfx_builder *b, const char *op, const char *name, const char *inputs, const char *variable) {
  if (b->failed) {
    return b->failed;
  }
  tfx_layer_spec l;
  tfx_config_layer_init(&l);
  int rc = copy_field(b, l.type, sizeof l.type, op ? op : "", "op");
  if (!rc && name) {
    rc = copy_field(b, l.name, sizeof l.name, name, "op name");
  }
  if (!rc && inputs) {
    rc = copy_field(b, l.inputs, sizeof l.inputs, inputs, "inputs");
  }
  if (!rc && variable) {
    rc = copy_field(b, l.variable, sizeof l.variable, variable, "variable");
  }
  return rc ? rc : result(b, tfx_config_add_layer(b->cfg, &l, b->err));
}

int tfx_builder_layer(tfx_builder *b, const char *layer_json) {
  if (b->failed) {
    return b->failed;
  }
  return result(b, tfx_config_add_layer_json(b->cfg, layer_json ? layer_json : "", b->err));
}

int tfx_builder_loss(tfx_builder *b, const char *loss) {
  if (b->failed) {
    return b->failed;
  }
  char assignment[96];
  snprintf(assignment, sizeof assignment, "model.loss=%s", loss ? loss : "");
  return result(b, tfx_config_set(b->cfg, assignment, b->err));
}

int tfx_builder_metrics(tfx_builder *b, const char *metrics) {
  if (b->failed) {
    return b->failed;
  }
  return copy_field(b, b->cfg->metrics, sizeof b->cfg->metrics, metrics ? metrics : "", "metrics");
}

static void *open_so(const char *name, const char *base_dir, char *path, size_t n) {
  snprintf(path, n, "%s", name);
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so && name[0] != '/' && base_dir && *base_dir) {
    snprintf(path, n, "%s/%s", base_dir, name);
    so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  return so;
}

/* Lets the plugin declare the model into a copy of cfg (its layers and variables start empty: a re-read
 * experiment already holds the ones an earlier build made) and keeps it only if build and validation pass. */
static int build(tfx_plugin_handle *h, tfx_config *cfg, tfx_err *err) {
  tfx_config *next = malloc(sizeof *next);
  if (!next) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  *next = *cfg;
  next->n_layers = 0;
  next->n_variables = 0;
  tfx_builder b = {next, err, 0};
  tfx_err_clear(err);
  int rc = h->api->build ? h->api->build(&b, cfg->plugin_params[0] ? cfg->plugin_params : "{}") : -1;
  if (b.failed) {
    rc = TFX_ECONFIG;
    if (err) {
      char why[sizeof err->msg];
      snprintf(why, sizeof why, "%s", err->msg);
      const char *base = strrchr(h->path, '/');
      tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: %s", base ? base + 1 : h->path, why);
    }
  } else if (rc) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: build returned %d", h->path, rc);
  } else if (next->n_layers == 0) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: build declared no layers", h->path);
  } else if (!(rc = tfx_config_validate(next, err))) {
    *cfg = *next;
  }
  free(next);
  return rc;
}

int tfx_plugin_load(tfx_config *cfg, const char *base_dir, tfx_plugin_handle **out, tfx_err *err) {
  tfx_plugin_handle *h = calloc(1, sizeof *h);
  if (!h) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int rc = parse_hooks(h, cfg->hooks, err);
  if (rc) {
  } else if (!(h->so = open_so(cfg->plugin, base_dir, h->path, sizeof h->path))) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.plugin '%s': cannot load: %s", cfg->plugin, dlerror());
  } else {
    const tfx_plugin *(*entry)(void) = (const tfx_plugin *(*)(void))dlsym(h->so, "tfx_plugin_entry");
    h->api = entry ? entry() : NULL;
    if (!h->api) {
      rc = tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: no tfx_plugin_entry (or it returned NULL)", h->path);
    } else if (h->api->abi_version != TFX_PLUGIN_ABI_VERSION) {
      rc = tfx_err_set(err, TFX_ECONFIG,
                       "model.plugin %s: ABI version %d, this tfx-node speaks %d (rebuild it against its tfx/plugin.h)",
                       h->path, h->api->abi_version, TFX_PLUGIN_ABI_VERSION);
    } else if (!(rc = build(h, cfg, err))) {
      rc = tfx_plugin_metrics_name(h->so, h->path, cfg->plugin_metrics, sizeof cfg->plugin_metrics, err);
    }
  }
  if (rc) {
    return tfx_plugin_close(h), rc;
  }
  char *abs = realpath(h->path, NULL); /* so that processes started elsewhere find the same file */
  if (abs && strlen(abs) < sizeof cfg->plugin) {
    strcpy(cfg->plugin, abs);
  }
  free(abs);
  tfx_log(TFX_LOG_INFO, "PLUGIN-LOAD", "%s (%s): %d layers, %d declared variables", h->path,
          h->api->name ? h->api->name : "?", cfg->n_layers, cfg->n_variables);
  *out = h;
  return TFX_OK;
}

int tfx_plugin_hook(tfx_plugin_handle *h, int event, long long step, double loss, double accuracy,
                    const char *run_dir) {
  if (!h) {
    return 0;
  }
  int stop = builtin(h, event, step, loss, accuracy);
  if (!h->api || !h->api->hook) {
    return stop;
  }
  tfx_hook_info info = {(tfx_hook_event)event, step, loss, accuracy, run_dir};
  if (h->api->hook(&info)) {
    tfx_log(TFX_LOG_INFO, "PLUGIN-STOP", "%s asked to stop at step %lld", h->path, step);
    stop = 1;
  }
  return stop;
}

void tfx_plugin_close(tfx_plugin_handle *h) {
  if (!h) {
    return;
  }
  if (h->so) {
    dlclose(h->so);
  }
  free(h);
}

long long tfx_hooks_stop_step(const tfx_plugin_handle *h) {
  return h ? h->stop_at_step : 0;
}
