/* A model plugin with metrics of its own (include/tfx/plugin.h's tfx_plugin_metrics), for test_plugin_metrics.sh:
 * a softmax regression on 784 pixels and three metrics whose values a test can check exactly:
 *   seen         (sum)   the examples updated into it;
 *   label0_frac  (mean)  the fraction of examples with label 0;
 *   max_label    (merge) the largest label seen (merged by the plugin's own maximum).
 * Built again with METRICS_BAD set to 1 (a state of 17 doubles), 2 (no update callback) or 3 (max_label's result
 * NaN) to show how tfx refuses or reports a bad table. */
#include <math.h>
#include <stddef.h>
#include <tfx/plugin.h>

static int build(tfx_builder *b, const char *params_json) {
  (void)params_json;
  const int shape[1] = {784};
  if (tfx_builder_input(b, 1, shape)) {
    return 1;
  }
  if (tfx_builder_layer(b, "{\"type\": \"scale\", \"rate\": 0.00392156862745098}")) {
    return 1;
  }
  if (tfx_builder_layer(b, "{\"type\": \"dense\", \"units\": 10}")) {
    return 1;
  }
  return tfx_builder_loss(b, "softmax_cross_entropy") || tfx_builder_metrics(b, "loss,accuracy");
}

static const tfx_plugin plugin = {TFX_PLUGIN_ABI_VERSION, "metrics_plugin", build, NULL};

const tfx_plugin *tfx_plugin_entry(void) {
  return &plugin;
}

static int count(double *state, const tfx_metric_batch *batch, void *ctx) {
  (void)ctx;
  state[0] += batch->n;
  return 0;
}

static int label0(double *state, const tfx_metric_batch *batch, void *ctx) {
  (void)ctx;
  for (int i = 0; i < batch->n; i++) {
    state[0] += batch->labels[i] == 0;
  }
  return 0;
}

/* state[0]: the largest label; state[1]: 1 once any example was seen (a zero state is "none yet"). */
static int max_label(double *state, const tfx_metric_batch *batch, void *ctx) {
  (void)ctx;
  for (int i = 0; i < batch->n; i++) {
    if (!state[1] || batch->labels[i] > state[0]) {
      state[0] = batch->labels[i];
    }
    state[1] = 1;
  }
  return 0;
}

static void max_merge(double *into, const double *from, void *ctx) {
  (void)ctx;
  if (from[1] && (!into[1] || from[0] > into[0])) {
    into[0] = from[0];
    into[1] = 1;
  }
}

static double max_result(const double *state, void *ctx) {
  (void)ctx;
#if METRICS_BAD == 3
  (void)state;
  return NAN;
#else
  return state[0];
#endif
}

static const tfx_metric_def defs[] = {
    {"seen", 1, TFX_METRIC_SUM, METRICS_BAD == 2 ? NULL : count, NULL, NULL, NULL},
#if METRICS_BAD == 1
    {"label0_frac", 17, TFX_METRIC_MEAN, label0, NULL, NULL, NULL},
#else
    {"label0_frac", 1, TFX_METRIC_MEAN, label0, NULL, NULL, NULL},
#endif
    {"max_label", 2, TFX_METRIC_MERGE, max_label, max_merge, max_result, NULL},
};

static const tfx_metric_set set = {TFX_PLUGIN_ABI_VERSION, 3, defs};

const tfx_metric_set *tfx_plugin_metrics(void) {
  return &set;
}
