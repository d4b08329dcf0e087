/* A watched evaluation metric (keep_best, early stopping): the best so far and the patience count. */
#include "train/watch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/classes.h"

void tfx_watch_init(tfx_watch *w, const char *metric, tfx_watch_mode mode, double min_delta, int patience) {
  memset(w, 0, sizeof *w);
  snprintf(w->metric, sizeof w->metric, "%s", metric);
  int lower = !strcmp(metric, "loss") || !strcmp(metric, "log_loss");
  w->maximize = mode == TFX_WATCH_AUTO ? !lower : mode == TFX_WATCH_MAX;
  w->min_delta = min_delta;
  w->patience = patience;
  w->best = NAN;
  w->best_step = -1;
}

void tfx_watch_restore(tfx_watch *w, int64_t step, double value) {
  w->best = value;
  w->best_step = step;
  w->since = 0;
}

int tfx_watch_update(tfx_watch *w, int64_t step, double value) {
  if (!w->metric[0]) {
    return 0;
  }
  int better = isfinite(value) && (isnan(w->best) || (w->maximize ? value - w->min_delta > w->best
                                                                   : value + w->min_delta < w->best));
  if (better) {
    tfx_watch_restore(w, step, value);
  } else {
    w->since++;
  }
  return better;
}

int tfx_watch_exhausted(const tfx_watch *w) {
  return w->metric[0] && w->patience > 0 && w->since >= w->patience;
}

double tfx_eval_metric(const tfx_eval_result *r, const char *metric) {
  if (!strcmp(metric, "loss") || !strcmp(metric, "log_loss")) {
    return r->loss;
  }
  if (!strcmp(metric, "accuracy")) {
    return r->accuracy;
  }
  if (!strcmp(metric, "auc")) {
    return r->has_auc ? r->auc : NAN;
  }
  double v;
  if (tfx_class_metric_named(r, metric, strlen(metric), &v)) {
    return v;
  }
  if (!strncmp(metric, "auc_", 4)) {
    int o = atoi(metric + 4);
    return o >= 0 && o < r->n_auc ? r->auc_k[o] : NAN;
  }
  int k = !strncmp(metric, "top_", 4) ? atoi(metric + 4) : 0;
  return k > 0 && k == r->top_k ? r->top5 : NAN;
}
