/* A plugin's own metrics (include/tfx/plugin.h's tfx_plugin_metrics): the table checked once, here, for the
 * process that builds the model (tfx_plugin_load names them in model.plugin_metrics) and for the workers and
 * evaluators that open the same file to compute them. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <tfx/plugin.h>

#include "config/plugin.h"

/* Names a record already uses (built-in metrics and fields), which a plugin metric may not take. */
static const char *const taken[] = {"loss",  "accuracy", "examples", "auc",    "log_loss", "precision", "recall",
                                    "f1",    "worker",   "step",     "kind",   "time",     "examples_per_sec",
                                    "learning_rate", "examples_seen", "bad_records", "per_class"};

/* Why name cannot be a metric's record key, or NULL. */
static const char *bad_name(const char *name) {
  if (!name || !*name) {
    return "has no name";
  }
  if (strlen(name) > 23 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name) ||
      name[0] < 'a' || name[0] > 'z') {
    return "is not [a-z][a-z0-9_]* of up to 23 characters";
  }
  for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
    if (!strcmp(name, taken[i])) {
      return "is a built-in metric's name";
    }
  }
  static const char *const prefixes[] = {"top", "precision_", "recall_", "f1_", "auc_", "rolling_", "validation"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) {
      return "starts like a built-in metric's name";
    }
  }
  return NULL;
}

/* Why metric d is unusable, or NULL. */
static const char *bad_metric(const tfx_metric_def *d) {
  const char *why = bad_name(d->name);
  if (why) {
    return why;
  }
  if (d->state_size < 1 || d->state_size > TFX_METRIC_STATE_MAX) {
    return "state_size is not 1 .. TFX_METRIC_STATE_MAX doubles";
  }
  if (!d->update) {
    return "has no update callback";
  }
  if (d->aggregation != TFX_METRIC_SUM && d->aggregation != TFX_METRIC_MEAN && d->aggregation != TFX_METRIC_MERGE) {
    return "has an unknown aggregation (want TFX_METRIC_SUM, TFX_METRIC_MEAN or TFX_METRIC_MERGE)";
  }
  return d->aggregation == TFX_METRIC_MERGE && !d->merge ? "aggregates by merge but has no merge callback" : NULL;
}

int tfx_plugin_metrics_check(const tfx_metric_set *set, const char *path, char *names, size_t n, tfx_err *err) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (set->abi_version != TFX_PLUGIN_ABI_VERSION) {
    return tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: tfx_plugin_metrics has ABI version %d, this tfx-node "
                       "speaks %d", base, set->abi_version, TFX_PLUGIN_ABI_VERSION);
  }
  if (set->n < 1 || set->n > TFX_METRICS_MAX || !set->metrics) {
    return tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: tfx_plugin_metrics declares %d metrics (want 1 to %d)",
                       base, set->n, TFX_METRICS_MAX);
  }
  size_t len = 0;
  names[0] = '\0';
  for (int i = 0; i < set->n; i++) {
    const tfx_metric_def *d = &set->metrics[i];
    const char *why = bad_metric(d);
    for (int j = 0; !why && j < i; j++) {
      why = strcmp(d->name, set->metrics[j].name) ? NULL : "is declared twice";
    }
    if (why) {
      return tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: metric %d '%.24s' %s", base, i,
                         d->name ? d->name : "(null)", why);
    }
    len += (size_t)snprintf(names + len, n > len ? n - len : 0, "%s%s", i ? "," : "", d->name);
  }
  return len < n ? TFX_OK : tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: metric names too long", base);
}

/* The table of an opened plugin (NULL when it exports none). */
static const tfx_metric_set *table_of(void *so) {
  const tfx_metric_set *(*fn)(void) = (const tfx_metric_set *(*)(void))dlsym(so, "tfx_plugin_metrics");
  return fn ? fn() : NULL;
}

int tfx_plugin_metrics_name(void *so, const char *path, char *names, size_t n, tfx_err *err) {
  const tfx_metric_set *set = table_of(so);
  names[0] = '\0';
  return set ? tfx_plugin_metrics_check(set, path, names, n, err) : TFX_OK;
}

int tfx_plugin_metrics_open(const tfx_config *cfg, void **so, const tfx_metric_set **out, tfx_err *err) {
  *so = NULL;
  *out = NULL;
  if (!cfg->plugin_metrics[0]) {
    return TFX_OK;
  }
  if (!cfg->plugin[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "model.plugin_metrics names %s but model.plugin is empty",
                       cfg->plugin_metrics);
  }
  void *h = dlopen(cfg->plugin, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    return tfx_err_set(err, TFX_ECONFIG, "model.plugin '%s' (for its metrics %s): cannot load: %s", cfg->plugin,
                       cfg->plugin_metrics, dlerror());
  }
  const tfx_metric_set *set = table_of(h);
  char names[sizeof cfg->plugin_metrics];
  int rc = set ? tfx_plugin_metrics_check(set, cfg->plugin, names, sizeof names, err)
               : tfx_err_set(err, TFX_ECONFIG, "model.plugin %s: no tfx_plugin_metrics, but the experiment names "
                             "its metrics %s", cfg->plugin, cfg->plugin_metrics);
  if (!rc && strcmp(names, cfg->plugin_metrics)) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.plugin %s declares the metrics %s here, the experiment %s (another "
                     "build of the plugin?)", cfg->plugin, names, cfg->plugin_metrics);
  }
  if (rc) {
    dlclose(h);
    return rc;
  }
  *so = h;
  *out = set;
  return TFX_OK;
}
