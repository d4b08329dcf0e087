/* Prometheus text: families with role/index labels, NaN, and histograms (cumulative buckets ending in +Inf,
 * _sum and _count). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "observe/prom.h"

Test(prom, metric_writes_help_type_and_a_labelled_sample) {
  tfx_text t = {0};
  tfx_prom_metric(&t, "tfx_x_total", "Things.", "counter", "worker", 3, 42);
  tfx_prom_metric(&t, "tfx_y", "Unknown yet.", "gauge", "ps", 0, NAN);
  cr_assert_str_eq(t.s,
                   "# HELP tfx_x_total Things.\n# TYPE tfx_x_total counter\n"
                   "tfx_x_total{role=\"worker\",index=\"3\"} 42\n"
                   "# HELP tfx_y Unknown yet.\n# TYPE tfx_y gauge\ntfx_y{role=\"ps\",index=\"0\"} NaN\n");
  free(t.s);
}

Test(prom, histogram_buckets_are_cumulative_and_end_in_inf) {
  tfx_prom_hist h;
  memset(&h, 0, sizeof h);
  tfx_prom_hist_observe(&h, 0.0001); /* first bucket */
  tfx_prom_hist_observe(&h, 0.001);  /* exactly on a bound: le is inclusive */
  tfx_prom_hist_observe(&h, 0.3);
  tfx_prom_hist_observe(&h, 60); /* above every bound: only +Inf */
  tfx_text t = {0};
  tfx_prom_histogram(&t, "tfx_lat_seconds", "Latency.", "worker", 1, &h);
  cr_assert(strstr(t.s, "# TYPE tfx_lat_seconds histogram\n"), "%s", t.s);
  cr_assert(strstr(t.s, "tfx_lat_seconds_bucket{role=\"worker\",index=\"1\",le=\"0.0005\"} 1\n"), "%s", t.s);
  cr_assert(strstr(t.s, "tfx_lat_seconds_bucket{role=\"worker\",index=\"1\",le=\"0.001\"} 2\n"), "%s", t.s);
  cr_assert(strstr(t.s, "tfx_lat_seconds_bucket{role=\"worker\",index=\"1\",le=\"0.25\"} 2\n"), "%s", t.s);
  cr_assert(strstr(t.s, "tfx_lat_seconds_bucket{role=\"worker\",index=\"1\",le=\"0.5\"} 3\n"), "%s", t.s);
  cr_assert(strstr(t.s, "tfx_lat_seconds_bucket{role=\"worker\",index=\"1\",le=\"10\"} 3\n"), "%s", t.s);
  cr_assert(strstr(t.s, "tfx_lat_seconds_bucket{role=\"worker\",index=\"1\",le=\"+Inf\"} 4\n"), "%s", t.s);
  const char *sum = strstr(t.s, "tfx_lat_seconds_sum{role=\"worker\",index=\"1\"} ");
  cr_assert_not_null(sum, "%s", t.s);
  cr_assert_float_eq(strtod(strchr(sum, '}') + 2, NULL), 60.3011, 1e-9);
  cr_assert(strstr(t.s, "tfx_lat_seconds_count{role=\"worker\",index=\"1\"} 4\n"), "%s", t.s);
  free(t.s);
}

Test(prom, text_grows_past_its_first_allocation) {
  tfx_text t = {0};
  for (int i = 0; i < 2000; i++) {
    tfx_text_put(&t, "line %04d\n", i);
  }
  cr_assert_eq(t.len, 2000 * 10);
  cr_assert_eq(strncmp(t.s + 1999 * 10, "line 1999\n", 10), 0);
  free(t.s);
}
