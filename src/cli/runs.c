/* tfx-node runs [--root DIR] [--where COND] [--compare RUN RUN] [--rebuild]: the runs below DIR from the
 * experiment index DIR/tfx-runs.sqlite, brought up to date from every run's metrics.jsonl first. The files are
 * the source of truth: when the index is absent, locked or corrupt, the same table comes from a scratch index
 * built in memory from them, after a warning. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "store/runindex.h"

/* Opens the index file (recreated with rebuild) and syncs it with the run directories. */
static int open_file_index(const char *root, int rebuild, tfx_runindex **x, int *n_runs, tfx_err *err) {
  char path[1100];
  tfx_runindex_path(root, path, sizeof path);
  if (rebuild && unlink(path) && errno != ENOENT) {
    return tfx_err_sys(err, TFX_ESYS, "runs --rebuild: remove %s", path);
  }
  int rc = tfx_runindex_open(path, 2000, x, err);
  if (!rc && (rc = tfx_runindex_sync(*x, root, n_runs, err))) {
    tfx_runindex_close(*x);
    *x = NULL;
  }
  return rc;
}

/* The index to query: the file, or a scratch one in memory when the file cannot be used. */
static int open_index(const char *root, int rebuild, tfx_runindex **x, int *n_runs, tfx_err *err) {
  tfx_err ferr;
  int rc = open_file_index(root, rebuild, x, n_runs, &ferr);
  if (rc == TFX_ENOTFOUND) {
    return tfx_err_set(err, rc, "%s", ferr.msg);
  }
  if (!rc) {
    return TFX_OK;
  }
  tfx_log(TFX_LOG_WARN, "RUNS-INDEX", "%s; listing from the metrics.jsonl files instead%s", ferr.msg,
          rc == TFX_ECORRUPT ? " (--rebuild recreates the index)" : "");
  if ((rc = tfx_runindex_open(":memory:", 0, x, err))) {
    return rc;
  }
  if ((rc = tfx_runindex_sync(*x, root, n_runs, err))) {
    tfx_runindex_close(*x);
    *x = NULL;
  }
  return rc;
}

int tfx_runs_run(const tfx_cli_opts *o, tfx_err *err) {
  const char *root = o->target[0] ? o->target : "runs";
  struct stat sb;
  if (stat(root, &sb) || !S_ISDIR(sb.st_mode)) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "runs --root %s: not a directory", root);
  }
  tfx_run_filter f[TFX_RUN_FILTERS_MAX];
  int n_filters = 0, n_runs = 0, shown = 0, rc;
  if (o->where[0] && (rc = tfx_runindex_parse_where(o->where, f, TFX_RUN_FILTERS_MAX, &n_filters, err))) {
    return rc;
  }
  if (o->compare[0][0] && !o->compare[1][0]) {
    return tfx_err_set(err, TFX_EINVAL, "--compare needs two runs: --compare RUN RUN");
  }
  tfx_runindex *x = NULL;
  if ((rc = open_index(root, o->rebuild, &x, &n_runs, err))) {
    return rc;
  }
  if (o->compare[0][0]) {
    rc = tfx_runindex_compare(x, o->compare[0], o->compare[1], stdout, err);
  } else if (!(rc = tfx_runindex_list(x, f, n_filters, stdout, &shown, err))) {
    printf("%d of %d run(s) under %s\n", shown, n_runs, root);
  }
  tfx_runindex_close(x);
  return rc;
}
