/* Building Prometheus text-format (0.0.4) bodies: a growable text buffer, metric families whose samples carry
 * role and index labels, and fixed-bucket histograms. The text is owned by the caller (free()). A histogram
 * is plain data: its owner guards it with its own lock when another thread renders it. */
#ifndef TFX_PROM_H
#define TFX_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "common/text.h"

/* Upper bounds (seconds) of the latency buckets, from 0.5 ms to 10 s; +Inf is implied. */
#define TFX_PROM_BUCKETS 14
extern const double tfx_prom_latency_bounds[TFX_PROM_BUCKETS];

/* A histogram over tfx_prom_latency_bounds: counts[i] holds the observations in bucket i alone (not
 * cumulative; counts[TFX_PROM_BUCKETS] is the +Inf bucket). Zero-initialise it. */
typedef struct tfx_prom_hist {
  uint64_t counts[TFX_PROM_BUCKETS + 1];
  uint64_t count;
  double sum;
} tfx_prom_hist;

/* Appends the "# HELP" and "# TYPE" lines of a family (type: gauge, counter or histogram). */
void tfx_prom_family(tfx_text *t, const char *name, const char *help, const char *type);
/* Appends one sample name{role,index} value of the family just opened; NaN is written as NaN. */
void tfx_prom_sample(tfx_text *t, const char *name, const char *role, int index, double value);
/* Appends "# HELP", "# TYPE" and one sample {role,index} of a gauge or counter ("counter" names end in _total);
 * NaN is written as NaN. */
void tfx_prom_metric(tfx_text *t, const char *name, const char *help, const char *type, const char *role, int index,
                     double value);
/* Records one observation (seconds) in h. */
void tfx_prom_hist_observe(tfx_prom_hist *h, double seconds);
/* Appends a whole histogram family: cumulative name_bucket{le=...} lines, name_sum and name_count. */
void tfx_prom_histogram(tfx_text *t, const char *name, const char *help, const char *role, int index,
                        const tfx_prom_hist *h);

#endif
