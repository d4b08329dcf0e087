/* RUN/metrics.jsonl: one JSON object per line, appended and flushed line by line. A tfx_metrics is owned by
 * one thread. Train lines carry "kind":"train"; eval lines "kind":"eval", "step", "loss", "accuracy". */
#ifndef TFX_METRICS_H
#define TFX_METRICS_H

#include <stdint.h>

#include "common/err.h"
#include "common/fs.h" /* tfx_write_file */

typedef struct tfx_metrics tfx_metrics;

/* Opens (appends to) run_dir/metrics.jsonl; caller owns *out; free with tfx_metrics_close. */
int tfx_metrics_open(const char *run_dir, tfx_metrics **out, tfx_err *err);
/* Closes the file; NULL does nothing. */
void tfx_metrics_close(tfx_metrics *m);
/* The largest step among the records of `kind` ("eval") in run_dir/metrics.jsonl, or -1 when it has none (or the
 * file is missing): where a restarted chief's evaluations left off. */
int64_t tfx_metrics_last_step(const char *run_dir, const char *kind);
/* Appends {"kind": kind, "step": step, "time": t, names[i]: values[i]...} and flushes. */
void tfx_metrics_write(tfx_metrics *m, const char *kind, int64_t step, const char *const *names, const double *values,
                       int n);
/* As tfx_metrics_write, with `json` (borrowed; NULL: none), further fields as JSON text ("\"a\": [1, 2]"), at the
 * end of the record. */
void tfx_metrics_write_json(tfx_metrics *m, const char *kind, int64_t step, const char *const *names,
                            const double *values, int n, const char *json);

#endif
