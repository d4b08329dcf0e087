/* The experiment index: one SQLite file (ROOT/tfx-runs.sqlite) that lists the runs kept below ROOT, each with
 * its id (the run directory's name), config hash, start and end, status, resolved config and metrics series.
 * It is an index, never the source of truth: every run directory's metrics.jsonl is, and the index can be
 * rebuilt from those files at any time (tfx_runindex_sync). Callers treat every failure here as a warning:
 * training never stops because the index is absent, locked or corrupt.
 *
 * A tfx_runindex is one SQLite connection, owned by one thread. Errors: TFX_ESYS (cannot open or write),
 * TFX_ECORRUPT (not a database, or a damaged one), TFX_ESTATE (locked by another process beyond busy_ms),
 * TFX_EINVAL (a bad --where), TFX_ENOTFOUND (an unknown run). */
#ifndef TFX_RUNINDEX_H
#define TFX_RUNINDEX_H

#include <stdio.h>

#include "common/err.h"

typedef struct tfx_runindex tfx_runindex;

/* One condition of a --where: metric OP value. metric is "NAME" (the last eval value), "KIND.NAME" (e.g.
 * train.loss, validation.heldout.accuracy), or one of the run columns step and seconds. */
typedef struct tfx_run_filter {
  char kind[96], name[64];
  int op; /* index into the operator table */
  double value;
} tfx_run_filter;

#define TFX_RUN_FILTERS_MAX 8

/* Writes ROOT/tfx-runs.sqlite into out (n bytes). */
void tfx_runindex_path(const char *root, char *out, size_t n);
/* Writes the index a run directory registers in (its parent directory's) into out. */
void tfx_runindex_path_for_run(const char *run_dir, char *out, size_t n);
/* Opens or creates the index at path (":memory:" for a scratch one), waiting up to busy_ms for a lock.
 * Caller owns *out; free with tfx_runindex_close. */
int tfx_runindex_open(const char *path, int busy_ms, tfx_runindex **out, tfx_err *err);
/* Closes the connection; NULL does nothing. */
void tfx_runindex_close(tfx_runindex *x);
/* Registers the run in run_dir as "running" from start (seconds since the epoch), with the hash and text of
 * run_dir/config.json; a run registered before keeps its series. */
int tfx_runindex_begin(tfx_runindex *x, const char *run_dir, double start, tfx_err *err);
/* Replaces the run's series with run_dir/metrics.jsonl and sets start/end from its first and last lines.
 * status (may be NULL) overrides; otherwise a known run keeps its status and a new one gets "finished" when its
 * last step reached training.max_steps of its config.json, else "incomplete". Malformed lines are skipped. */
int tfx_runindex_import(tfx_runindex *x, const char *run_dir, const char *status, tfx_err *err);
/* Imports every run directory below root (one holding metrics.jsonl) whose metrics.jsonl changed or that moved
 * since it was indexed, and drops the runs no longer below root; *n_runs gets how many run directories were seen. */
int tfx_runindex_sync(tfx_runindex *x, const char *root, int *n_runs, tfx_err *err);
/* Parses "accuracy>0.88, train.loss<=0.4" (conditions joined by ',' or 'and') into f (at most max); *n gets
 * the count. The text is never put into SQL: names and numbers become bound parameters. */
int tfx_runindex_parse_where(const char *text, tfx_run_filter *f, int max, int *n, tfx_err *err);
/* Prints the table of runs that pass every filter (n may be 0), oldest first; *shown gets the row count. */
int tfx_runindex_list(tfx_runindex *x, const tfx_run_filter *f, int n, FILE *out, int *shown, tfx_err *err);
/* Prints runs a and b side by side: status, steps, time, config hash, the last value of every metric either
 * has (and b - a), then every config key whose value differs. */
int tfx_runindex_compare(tfx_runindex *x, const char *a, const char *b, FILE *out, tfx_err *err);

#endif
