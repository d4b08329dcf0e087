/* A plugin's own metrics (include/tfx/plugin.h's tfx_plugin_metrics) while training and evaluating: the states,
 * updated batch by batch from the model's probabilities and the labels, merged across batches, reports and eval
 * slices (sum, mean or the plugin's merge), sent as report/reply stats, and turned into record fields.
 *
 * Ownership: the caller owns a tfx_pmetrics (open/close); a tfx_pm_state is plain data (copy it freely).
 * Thread-safety: one thread calls a tfx_pmetrics at a time. Errors: TFX_ECONFIG from open (config/plugin.h);
 * TFX_EPROTO from tfx_pm_state_read when a peer's stats do not fit the table. A failed update or a value that is
 * not finite is logged (PLUGIN-METRIC, naming the plugin and the metric) and its field left out, never fatal. */
#ifndef TFX_PMETRICS_H
#define TFX_PMETRICS_H

#include <stdint.h>
#include <tfx/plugin.h>

#include "config/config.h"
#include "nn/model.h"

/* The states of every plugin metric of an experiment over some examples. */
typedef struct tfx_pm_state {
  int n;           /* metrics (0: none) */
  double examples; /* examples added (the divisor of TFX_METRIC_MEAN) */
  unsigned failed; /* bit i: metric i's update failed on some batch */
  double s[TFX_METRICS_MAX][TFX_METRIC_STATE_MAX];
} tfx_pm_state;

typedef struct tfx_pmetrics tfx_pmetrics;

/* Opens the metrics cfg->plugin_metrics names (*out NULL when none: every function below accepts NULL and does
 * nothing). Caller owns *out; free with tfx_pmetrics_close. */
int tfx_pmetrics_open(const tfx_config *cfg, tfx_pmetrics **out, tfx_err *err);
/* Metrics from a table already at hand (set borrowed for p's life; plugin names it in messages): checked as
 * open checks a plugin's. Caller owns *out; free with tfx_pmetrics_close. */
int tfx_pmetrics_wrap(const tfx_metric_set *set, const char *plugin, tfx_pmetrics **out, tfx_err *err);
/* Unloads; NULL does nothing. */
void tfx_pmetrics_close(tfx_pmetrics *p);
/* A zero state for p's metrics (n 0 for a NULL p). */
void tfx_pm_state_init(const tfx_pmetrics *p, tfx_pm_state *s);
/* Adds the last tfx_model_loss's batch (its probabilities, labels [batch], weights [batch] or NULL) to s. */
void tfx_pmetrics_update(const tfx_pmetrics *p, tfx_pm_state *s, const tfx_model *m, const int32_t *labels,
                         const float *weights, int batch, int training);
/* Merges from into into by each metric's aggregation (an empty state changes nothing). */
void tfx_pmetrics_merge(const tfx_pmetrics *p, tfx_pm_state *into, const tfx_pm_state *from);
/* Appends each metric's value of s (names borrowed from p) to names/vals, at most room; returns how many. A
 * failed or not finite one is logged with `what` (e.g. "eval at step 200") and left out. */
int tfx_pmetrics_values(const tfx_pmetrics *p, const tfx_pm_state *s, const char *what, const char **names,
                        double *vals, int room);

/* The most stats a state takes on the wire: examples, failed and every state double. */
#define TFX_PM_STATS (2 + TFX_METRICS_MAX * TFX_METRIC_STATE_MAX)
/* Writes s as stats ("pm_examples", "pm_failed", "pm_I_J") into keys/vals (room for TFX_PM_STATS); returns how
 * many (0 for an empty s). */
int tfx_pm_state_stats(const tfx_pmetrics *p, const tfx_pm_state *s, char keys[][16], double *vals);
/* Reads a state written by tfx_pm_state_stats through stat (NaN for a missing key) into *out: TFX_OK with an
 * empty state when the stats carry none, TFX_EPROTO when they carry a part of one or a bad value. */
int tfx_pm_state_read(const tfx_pmetrics *p, double (*stat)(const void *ctx, const char *key), const void *ctx,
                      tfx_pm_state *out, tfx_err *err);

#endif
