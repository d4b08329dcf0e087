/* Model plugins (include/tfx/plugin.h): dlopen, ABI check, the builder that fills the experiment's model, and
 * the hook calls. A tfx_plugin_handle is owned by the process that loaded it (tfx_node.plugin). */
#ifndef TFX_PLUGIN_H
#define TFX_PLUGIN_H

#include "config/config.h"

typedef struct tfx_plugin_handle tfx_plugin_handle;

/* Loads cfg->plugin (as given, else beside the experiment file base_dir), checks its ABI version and lets it
 * build the model into cfg (replacing model.layers). Caller owns *out; free with tfx_plugin_close. Errors
 * (TFX_ECONFIG) name the file and what is wrong: missing, no tfx_plugin_entry, wrong ABI, build failed. */
int tfx_plugin_load(tfx_config *cfg, const char *base_dir, tfx_plugin_handle **out, tfx_err *err);
/* Creates the hooks of an experiment without a plugin: the built-in ones of training.hooks (stop_at_step:N,
 * nan_guard, log_every:N). *out is NULL when there are none. Errors name the unknown hook. */
int tfx_hooks_create(const tfx_config *cfg, tfx_plugin_handle **out, tfx_err *err);
/* Calls the built-in hooks, then the plugin's hook (if any) for an event (a tfx_hook_event); returns nonzero if it asks
 * to stop. A NULL handle does nothing. */
/* The step training.hooks' stop_at_step:N names (0: none): the trainer and the master stop there exactly, as
 * TensorFlow's StopAtStepHook does, rather than at the next report. */
long long tfx_hooks_stop_step(const tfx_plugin_handle *h);
int tfx_plugin_hook(tfx_plugin_handle *h, int event, long long step, double loss, double accuracy, const char *run_dir);
/* Checks a plugin's metric table (include/tfx/plugin.h: names, state sizes, callbacks, aggregation) and joins
 * its names with ',' into names[n]. TFX_ECONFIG naming the plugin file and the metric, and what is wrong. */
struct tfx_metric_set;
int tfx_plugin_metrics_check(const struct tfx_metric_set *set, const char *path, char *names, size_t n,
                             tfx_err *err);
/* The names of the metrics the opened plugin `so` (path, for messages) declares, checked, into names[n] ("":
 * it exports no tfx_plugin_metrics); TFX_ECONFIG as tfx_plugin_metrics_check. */
int tfx_plugin_metrics_name(void *so, const char *path, char *names, size_t n, tfx_err *err);
/* Opens cfg->plugin for the metrics cfg->plugin_metrics names (a worker or an evaluator, which never builds the
 * model); both outputs NULL when it names none. Caller owns *so (dlclose); *out is borrowed from it. TFX_ECONFIG
 * naming the file: cannot load, no table, a bad table, or other metrics than the experiment names. */
int tfx_plugin_metrics_open(const tfx_config *cfg, void **so, const struct tfx_metric_set **out, tfx_err *err);
/* Unloads the plugin; NULL does nothing. */
void tfx_plugin_close(tfx_plugin_handle *h);

#endif
