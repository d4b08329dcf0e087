/* src/train/pmetrics.c: a plugin's own metrics — the table checks (config/plugin_metrics.c), the merge of states
 * by each aggregation (sum, example-weighted mean, the plugin's own merge), values (a NaN or failed one left out)
 * and the states' wire form as report stats. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "train/evaluate.h"
#include "train/pmetrics.h"

static int add_n(double *state, const tfx_metric_batch *b, void *ctx) {
  (void)ctx;
  state[0] += b->n;
  return 0;
}

static void keep_max(double *into, const double *from, void *ctx) {
  (void)ctx;
  into[0] = from[0] > into[0] ? from[0] : into[0];
}

static double ratio(const double *state, void *ctx) {
  (void)ctx;
  return state[1] ? state[0] / state[1] : NAN;
}

static const tfx_metric_def defs[] = {
    {"count", 1, TFX_METRIC_SUM, add_n, NULL, NULL, NULL},
    {"frac", 1, TFX_METRIC_MEAN, add_n, NULL, NULL, NULL},
    {"peak", 1, TFX_METRIC_MERGE, add_n, keep_max, NULL, NULL},
    {"hit_rate", 2, TFX_METRIC_SUM, add_n, NULL, ratio, NULL},
};
static const tfx_metric_set set = {TFX_PLUGIN_ABI_VERSION, 4, defs};

static tfx_pm_state state(const tfx_pmetrics *p, double examples, double count, double frac, double peak, double hits,
                          double tries) {
  tfx_pm_state s;
  tfx_pm_state_init(p, &s);
  s.examples = examples;
  s.s[0][0] = count;
  s.s[1][0] = frac;
  s.s[2][0] = peak;
  s.s[3][0] = hits;
  s.s[3][1] = tries;
  return s;
}

Test(pmetrics, merge_by_aggregation) {
  tfx_pmetrics *p = NULL;
  cr_assert_eq(tfx_pmetrics_wrap(&set, "/x/libt.so", &p, NULL), TFX_OK);
  tfx_pm_state a = state(p, 10, 10, 3, 7, 1, 4), b = state(p, 30, 30, 6, 5, 3, 4), none;
  tfx_pm_state_init(p, &none);
  tfx_pmetrics_merge(p, &a, &none); /* an empty state changes nothing */
  cr_assert_eq(a.examples, 10);
  tfx_pmetrics_merge(p, &a, &b);
  const char *names[8];
  double v[8];
  cr_assert_eq(tfx_pmetrics_values(p, &a, "test", names, v, 8), 4);
  cr_assert_str_eq(names[0], "count");
  cr_assert_eq(v[0], 40);                     /* sum */
  cr_assert_float_eq(v[1], 9.0 / 40, 1e-12); /* mean: the summed state over every example */
  cr_assert_eq(v[2], 7);                      /* the plugin's merge: a maximum, not 12 */
  cr_assert_float_eq(v[3], 4.0 / 8, 1e-12);  /* result() of the summed state */
  tfx_pm_state empty;
  tfx_pm_state_init(p, &empty);
  tfx_pmetrics_merge(p, &empty, &b); /* into an empty state: a copy (a merge with zeros would be wrong for max) */
  cr_assert_eq(empty.s[2][0], 5);
  tfx_pmetrics_close(p);
}

Test(pmetrics, nan_and_failed_left_out) {
  tfx_pmetrics *p = NULL;
  cr_assert_eq(tfx_pmetrics_wrap(&set, "libt.so", &p, NULL), TFX_OK);
  tfx_pm_state a = state(p, 10, 10, 3, 7, 1, 0); /* hit_rate: 1 / 0 tries is NaN */
  a.failed = 1u << 2;                            /* peak's update failed */
  const char *names[8];
  double v[8];
  cr_assert_eq(tfx_pmetrics_values(p, &a, "test", names, v, 8), 2);
  cr_assert_str_eq(names[1], "frac");
  cr_assert_eq(tfx_pmetrics_values(p, &a, "test", names, v, 1), 1); /* room for one */
  tfx_pmetrics_close(p);
}

static double lookup(const void *ctx, const char *key) {
  const tfx_eval_report *r = ctx;
  for (int i = 0; i < r->n; i++) {
    if (!strcmp(r->names[i], key)) {
      return r->values[i];
    }
  }
  return NAN;
}

Test(pmetrics, stats_round_trip) {
  tfx_pmetrics *p = NULL;
  cr_assert_eq(tfx_pmetrics_wrap(&set, "libt.so", &p, NULL), TFX_OK);
  tfx_pm_state a = state(p, 10, 10, 3, 7, 1, 4), back;
  char keys[TFX_PM_STATS][16];
  static tfx_eval_report r; /* a borrowed key/value list */
  r.n = tfx_pm_state_stats(p, &a, keys, r.values);
  cr_assert_eq(r.n, 2 + 5);
  for (int i = 0; i < r.n; i++) {
    r.names[i] = keys[i];
  }
  cr_assert_eq(tfx_pm_state_read(p, lookup, &r, &back, NULL), TFX_OK);
  cr_assert_eq(memcmp(&a, &back, sizeof a), 0);
  r.n--; /* a state cut short */
  tfx_err err = {0};
  cr_assert_eq(tfx_pm_state_read(p, lookup, &r, &back, &err), TFX_EPROTO);
  cr_assert(strstr(err.msg, "pm_3_1 missing (metric hit_rate)"), "%s", err.msg);
  a.s[1][0] = NAN; /* frac's update added NaN: frac alone is left out, as in one process */
  r.n = tfx_pm_state_stats(p, &a, keys, r.values);
  cr_assert_eq(tfx_pm_state_read(p, lookup, &r, &back, &err), TFX_OK, "%s", err.msg);
  const char *names[8];
  double v[8];
  cr_assert_eq(tfx_pmetrics_values(p, &back, "test", names, v, 8), 3, "count, peak and hit_rate stay");
  cr_assert(!strcmp(names[0], "count") && v[0] == 10 && !strcmp(names[1], "peak"), "%s %g %s", names[0], v[0],
            names[1]);
  r.n = 0; /* no states at all: an empty one */
  cr_assert_eq(tfx_pm_state_read(p, lookup, &r, &back, NULL), TFX_OK);
  cr_assert_eq(back.examples, 0);
  tfx_pmetrics_close(p);
}

/* wrap refuses table t naming want. */
static void refused(const tfx_metric_def *d, int n, const char *want) {
  tfx_metric_set t = {TFX_PLUGIN_ABI_VERSION, n, d};
  tfx_pmetrics *p = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_pmetrics_wrap(&t, "/a/libbad.so", &p, &err), TFX_ECONFIG, "%s", want);
  cr_assert_null(p);
  cr_assert(strstr(err.msg, want), "%s (want %s)", err.msg, want);
  cr_assert(strstr(err.msg, "libbad.so"), "%s", err.msg);
}

Test(pmetrics, bad_tables_refused_by_name) {
  tfx_metric_def d[2] = {defs[0], defs[1]};
  d[1].state_size = TFX_METRIC_STATE_MAX + 1;
  refused(d, 2, "metric 1 'frac' state_size");
  d[1] = defs[1];
  d[1].update = NULL;
  refused(d, 2, "metric 1 'frac' has no update callback");
  d[1] = defs[2];
  d[1].merge = NULL;
  refused(d, 2, "metric 1 'peak' aggregates by merge but has no merge callback");
  d[1] = defs[0];
  refused(d, 2, "metric 1 'count' is declared twice");
  d[1].name = "loss";
  refused(d, 2, "'loss' is a built-in metric's name");
  d[1].name = "Bad-Name";
  refused(d, 2, "is not [a-z][a-z0-9_]*");
  refused(d, 0, "declares 0 metrics");
  refused(d, TFX_METRICS_MAX + 1, "declares 9 metrics");
}

/* model.plugin_metrics (written by the process that built the model) without a plugin to load them from, or with
 * one that cannot be loaded on this machine, is refused naming both. */
Test(pmetrics, open_names_what_is_missing) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  snprintf(cfg.plugin_metrics, sizeof cfg.plugin_metrics, "seen");
  tfx_pmetrics *p = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_pmetrics_open(&cfg, &p, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.plugin_metrics names seen but model.plugin is empty"), "%s", err.msg);
  snprintf(cfg.plugin, sizeof cfg.plugin, "/nonexistent/libm.so");
  cr_assert_eq(tfx_pmetrics_open(&cfg, &p, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.plugin '/nonexistent/libm.so' (for its metrics seen): cannot load"), "%s", err.msg);
  cr_assert_null(p);
  cfg.plugin_metrics[0] = '\0'; /* none named: nothing is loaded */
  cr_assert_eq(tfx_pmetrics_open(&cfg, &p, &err), TFX_OK);
  cr_assert_null(p);
}
