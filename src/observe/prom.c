/* Prometheus text exposition. */
#include "observe/prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const double tfx_prom_latency_bounds[TFX_PROM_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};

void tfx_prom_family(tfx_text *t, const char *name, const char *help, const char *type) {
  tfx_text_put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void tfx_prom_sample(tfx_text *t, const char *name, const char *role, int index, double value) {
  if (isnan(value)) {
    tfx_text_put(t, "%s{role=\"%s\",index=\"%d\"} NaN\n", name, role, index);
  } else {
    tfx_text_put(t, "%s{role=\"%s\",index=\"%d\"} %.17g\n", name, role, index, value);
  }
}

void tfx_prom_metric(tfx_text *t, const char *name, const char *help, const char *type, const char *role, int index,
                     double value) {
  tfx_prom_family(t, name, help, type);
  tfx_prom_sample(t, name, role, index, value);
}

void tfx_prom_hist_observe(tfx_prom_hist *h, double seconds) {
  int i = 0;
  while (i < TFX_PROM_BUCKETS && seconds > tfx_prom_latency_bounds[i]) {
    i++;
  }
  h->counts[i]++;
  h->count++;
  h->sum += seconds;
}

void tfx_prom_histogram(tfx_text *t, const char *name, const char *help, const char *role, int index,
                        const tfx_prom_hist *h) {
  tfx_prom_family(t, name, help, "histogram");
  uint64_t cumulative = 0;
  for (int i = 0; i <= TFX_PROM_BUCKETS; i++) {
    cumulative += h->counts[i];
    if (i < TFX_PROM_BUCKETS) {
      tfx_text_put(t, "%s_bucket{role=\"%s\",index=\"%d\",le=\"%g\"} %llu\n", name, role, index,
                   tfx_prom_latency_bounds[i], (unsigned long long)cumulative);
    } else {
      tfx_text_put(t, "%s_bucket{role=\"%s\",index=\"%d\",le=\"+Inf\"} %llu\n", name, role, index,
                   (unsigned long long)cumulative);
    }
  }
  tfx_text_put(t, "%s_sum{role=\"%s\",index=\"%d\"} %.17g\n", name, role, index, h->sum);
  tfx_text_put(t, "%s_count{role=\"%s\",index=\"%d\"} %llu\n", name, role, index, (unsigned long long)h->count);
}
