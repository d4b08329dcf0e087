/* A plugin's own metrics: states, updates, merges, values and their wire form. */
#include "train/pmetrics.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "config/plugin.h"

struct tfx_pmetrics {
  void *so;
  const tfx_metric_set *set;
  char plugin[TFX_PATH_MAX];
};

int tfx_pmetrics_wrap(const tfx_metric_set *set, const char *plugin, tfx_pmetrics **out, tfx_err *err) {
  char names[256];
  int rc = tfx_plugin_metrics_check(set, plugin, names, sizeof names, err);
  tfx_pmetrics *p = rc ? NULL : calloc(1, sizeof *p);
  if (rc || !p) {
    return rc ? rc : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  p->set = set;
  snprintf(p->plugin, sizeof p->plugin, "%s", strrchr(plugin, '/') ? strrchr(plugin, '/') + 1 : plugin);
  *out = p;
  return TFX_OK;
}

int tfx_pmetrics_open(const tfx_config *cfg, tfx_pmetrics **out, tfx_err *err) {
  *out = NULL;
  void *so;
  const tfx_metric_set *set;
  int rc = tfx_plugin_metrics_open(cfg, &so, &set, err);
  if (rc || !so) {
    return rc;
  }
  if ((rc = tfx_pmetrics_wrap(set, cfg->plugin, out, err))) {
    dlclose(so);
    return rc;
  }
  (*out)->so = so;
  tfx_log(TFX_LOG_INFO, "PLUGIN-METRICS", "%s: %s", (*out)->plugin, cfg->plugin_metrics);
  return TFX_OK;
}

void tfx_pmetrics_close(tfx_pmetrics *p) {
  if (p && p->so) {
    dlclose(p->so);
  }
  free(p);
}

void tfx_pm_state_init(const tfx_pmetrics *p, tfx_pm_state *s) {
  memset(s, 0, sizeof *s);
  s->n = p ? p->set->n : 0;
}

void tfx_pmetrics_update(const tfx_pmetrics *p, tfx_pm_state *s, const tfx_model *m, const int32_t *labels,
                         const float *weights, int batch, int training) {
  if (!p || batch < 1) {
    return;
  }
  tfx_metric_batch b = {batch, (int)tfx_model_output_size(m), tfx_model_probs(m), (const int *)labels, weights,
                        training, tfx_model_multi_label(m)};
  for (int i = 0; i < s->n; i++) {
    const tfx_metric_def *d = &p->set->metrics[i];
    if (!(s->failed & (1u << i)) && d->update(s->s[i], &b, d->ctx)) {
      s->failed |= 1u << i;
    }
  }
  s->examples += batch;
}

void tfx_pmetrics_merge(const tfx_pmetrics *p, tfx_pm_state *into, const tfx_pm_state *from) {
  if (!p || from->examples <= 0) {
    return;
  }
  if (into->examples <= 0) {
    *into = *from;
    return;
  }
  for (int i = 0; i < into->n && i < from->n; i++) {
    const tfx_metric_def *d = &p->set->metrics[i];
    if (d->aggregation == TFX_METRIC_MERGE) {
      d->merge(into->s[i], from->s[i], d->ctx);
      continue;
    }
    for (int j = 0; j < d->state_size; j++) {
      into->s[i][j] += from->s[i][j];
    }
  }
  into->examples += from->examples;
  into->failed |= from->failed;
}

/* Metric i's value of s (NaN: failed, or no examples for a mean). */
static double value_of(const tfx_pmetrics *p, const tfx_pm_state *s, int i) {
  const tfx_metric_def *d = &p->set->metrics[i];
  if (s->failed & (1u << i)) {
    return NAN;
  }
  double v = d->result ? d->result(s->s[i], d->ctx) : s->s[i][0];
  return d->aggregation == TFX_METRIC_MEAN ? (s->examples > 0 ? v / s->examples : NAN) : v;
}

int tfx_pmetrics_values(const tfx_pmetrics *p, const tfx_pm_state *s, const char *what, const char **names,
                        double *vals, int room) {
  int n = 0;
  for (int i = 0; p && i < s->n && n < room; i++) {
    const char *name = p->set->metrics[i].name;
    double v = value_of(p, s, i);
    if (!isfinite(v)) {
      tfx_log(TFX_LOG_ERROR, "PLUGIN-METRIC", "%s: metric %s %s over %.0f examples (%s): left out", p->plugin, name,
              s->failed & (1u << i) ? "failed (its update returned nonzero, or its state was NaN)" : "is not finite",
              s->examples, what);
      continue;
    }
    names[n] = name;
    vals[n++] = v;
  }
  return n;
}

int tfx_pm_state_stats(const tfx_pmetrics *p, const tfx_pm_state *s, char keys[][16], double *vals) {
  if (!p || s->examples <= 0) {
    return 0;
  }
  unsigned failed = s->failed; /* a NaN state goes as its metric failed: on the wire NaN is a missing key, which
                                * would drop every metric's state, not that one's */
  for (int i = 0; i < s->n; i++) {
    for (int j = 0; j < p->set->metrics[i].state_size; j++) {
      failed |= isnan(s->s[i][j]) ? 1u << i : 0;
    }
  }
  int n = 0;
  snprintf(keys[n], 16, "pm_examples");
  vals[n++] = s->examples;
  snprintf(keys[n], 16, "pm_failed");
  vals[n++] = failed;
  for (int i = 0; i < s->n; i++) {
    for (int j = 0; j < p->set->metrics[i].state_size; j++) {
      snprintf(keys[n], 16, "pm_%d_%d", i, j);
      vals[n++] = failed & (1u << i) ? 0 : s->s[i][j];
    }
  }
  return n;
}

int tfx_pm_state_read(const tfx_pmetrics *p, double (*stat)(const void *ctx, const char *key), const void *ctx,
                      tfx_pm_state *out, tfx_err *err) {
  tfx_pm_state_init(p, out);
  double ex = stat(ctx, "pm_examples"), failed = stat(ctx, "pm_failed");
  if (!p || isnan(ex)) {
    return TFX_OK;
  }
  if (!(ex > 0) || !(failed >= 0 && failed < (double)(1u << TFX_METRICS_MAX))) {
    return tfx_err_set(err, TFX_EPROTO, "plugin metric states: pm_examples %g, pm_failed %g", ex, failed);
  }
  out->examples = ex;
  out->failed = (unsigned)failed;
  for (int i = 0; i < out->n; i++) {
    for (int j = 0; j < p->set->metrics[i].state_size; j++) {
      char key[16];
      snprintf(key, sizeof key, "pm_%d_%d", i, j);
      out->s[i][j] = stat(ctx, key);
      if (isnan(out->s[i][j])) {
        tfx_pm_state_init(p, out);
        return tfx_err_set(err, TFX_EPROTO, "plugin metric states: %s missing (metric %s)", key,
                           p->set->metrics[i].name);
      }
    }
  }
  return TFX_OK;
}
