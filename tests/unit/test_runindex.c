/* The experiment index: import from metrics.jsonl, status, --where parsing and filtering, compare, and the
 * index being corrupt or locked (real SQLite files in a temporary directory). */
#include <sqlite3.h>
#include <string.h>

#include "store/runindex.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("runindex");
}

TestSuite(runindex, .init = setup, .fini = tmpdir_remove);

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

/* Makes tmp/NAME with a config.json (max_steps) and a metrics.jsonl of the given lines. */
static void make_run(const char *name, int max_steps, const char *lines) {
  char path[256], config[128];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  cr_assert_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/%s/config.json", tmp, name);
  snprintf(config, sizeof config, "{\"training\": {\"max_steps\": %d, \"batch_size\": 64}}", max_steps);
  write_text(path, config);
  snprintf(path, sizeof path, "%s/%s/metrics.jsonl", tmp, name);
  write_text(path, lines);
}

static tfx_runindex *open_index(void) {
  char path[256];
  tfx_runindex_path(tmp, path, sizeof path);
  tfx_runindex *x = NULL;
  tfx_err err;
  cr_assert_eq(tfx_runindex_open(path, 1000, &x, &err), TFX_OK, "%s", err.msg);
  return x;
}

static tfx_runindex *open_synced(int expect_runs) {
  tfx_runindex *x = open_index();
  tfx_err err;
  int n = -1;
  cr_assert_eq(tfx_runindex_sync(x, tmp, &n, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(n, expect_runs);
  return x;
}

/* The table for the filters in where (NULL: none); caller frees. */
static char *list(tfx_runindex *x, const char *where, int *shown) {
  tfx_run_filter f[TFX_RUN_FILTERS_MAX];
  int n = 0;
  tfx_err err;
  if (where) {
    cr_assert_eq(tfx_runindex_parse_where(where, f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_OK, "%s", err.msg);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  cr_assert_eq(tfx_runindex_list(x, f, n, out, shown, &err), TFX_OK, "%s", err.msg);
  fclose(out);
  return text;
}

static const char r1_lines[] =
    "{\"kind\": \"train\", \"step\": 50, \"time\": 1000.0, \"loss\": 0.9, \"accuracy\": 0.7}\n"
    "{\"kind\": \"eval\", \"step\": 50, \"time\": 1010.0, \"loss\": 0.5, \"accuracy\": 0.85}\n"
    "{\"kind\": \"train\", \"step\": 100, \"time\": 1020.0, \"loss\": 0.4, \"accuracy\": 0.9}\n"
    "{\"kind\": \"eval\", \"step\": 100, \"time\": 1030.0, \"loss\": 0.35, \"accuracy\": 0.9}\n";
static const char r2_lines[] =
    "{\"kind\": \"train\", \"step\": 50, \"time\": 2000.0, \"loss\": 1.2, \"accuracy\": 0.6}\n"
    "{\"kind\": \"eval\", \"step\": 50, \"time\": 2040.5, \"loss\": 0.6, \"accuracy\": 0.8}\n";

Test(runindex, path_of_a_run_is_its_parents_index) {
  char out[256];
  tfx_runindex_path_for_run("runs/exp/r1/", out, sizeof out);
  cr_assert_str_eq(out, "runs/exp/tfx-runs.sqlite");
  tfx_runindex_path_for_run("r1", out, sizeof out);
  cr_assert_str_eq(out, "./tfx-runs.sqlite");
}

Test(runindex, import_derives_status_and_lists_last_eval) {
  make_run("r1", 100, r1_lines);
  make_run("r2", 100, r2_lines);
  tfx_runindex *x = open_synced(2);
  int shown = 0;
  char *table = list(x, NULL, &shown);
  cr_assert_eq(shown, 2);
  cr_assert(strstr(table, "r1 ") && strstr(table, "finished") && strstr(table, "0.9000"), "%s", table);
  cr_assert(strstr(table, "r2 ") && strstr(table, "incomplete") && strstr(table, "40.5"), "%s", table);
  free(table);
  tfx_runindex_close(x);
}

Test(runindex, where_filters_on_last_eval_and_other_kinds) {
  make_run("r1", 100, r1_lines);
  make_run("r2", 100, r2_lines);
  tfx_runindex *x = open_synced(2);
  int shown = 0;
  char *table = list(x, "accuracy>0.88", &shown);
  cr_assert_eq(shown, 1);
  cr_assert(strstr(table, "\nr1 ") && !strstr(table, "\nr2 "), "%s", table);
  free(table);
  table = list(x, "train.loss >= 1 and step<=50", &shown);
  cr_assert_eq(shown, 1);
  cr_assert(strstr(table, "\nr2 "), "%s", table);
  free(table);
  table = list(x, "accuracy>0.5, seconds<35", &shown);
  cr_assert_eq(shown, 1, "%s", table);
  free(table);
  table = list(x, "no_such_metric>0", &shown);
  cr_assert_eq(shown, 0);
  free(table);
  tfx_runindex_close(x);
}

Test(runindex, where_rejects_what_is_not_name_op_number) {
  tfx_run_filter f[TFX_RUN_FILTERS_MAX];
  int n = 0;
  tfx_err err;
  cr_assert_eq(tfx_runindex_parse_where("accuracy>>1", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "expected a number at offset 9"), "%s", err.msg);
  cr_assert_eq(tfx_runindex_parse_where("'; DROP TABLE runs; --", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "expected a metric name at offset 0"), "%s", err.msg);
  cr_assert_eq(tfx_runindex_parse_where("accuracy>0.5; DROP TABLE runs", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "expected ',' or 'and' at offset 12"), "%s", err.msg);
  cr_assert_eq(tfx_runindex_parse_where("loss ~ 3", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "expected one of"), "%s", err.msg);
  cr_assert_eq(tfx_runindex_parse_where("loss<nan", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_EINVAL);
  cr_assert_eq(tfx_runindex_parse_where("  ", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_EINVAL);
  cr_assert_eq(
      tfx_runindex_parse_where("validation.held_out.accuracy>=0.8,loss<1e-1", f, TFX_RUN_FILTERS_MAX, &n, &err), TFX_OK,
      "%s", err.msg);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(f[0].kind, "validation.held_out");
  cr_assert_str_eq(f[0].name, "accuracy");
  cr_assert_str_eq(f[1].kind, "eval");
  cr_assert_float_eq(f[1].value, 0.1, 1e-12);
}

Test(runindex, malformed_lines_are_skipped_and_sync_reimports_changed_runs) {
  make_run("r1", 100,
           "{\"kind\": \"eval\", \"step\": 10, \"time\": 5.0, \"accuracy\": 0.5}\nnot json\n"
           "{\"kind\": \"eval\", \"step\": 20, \"time\": 6.0, \"accu");
  tfx_runindex *x = open_synced(1);
  int shown = 0;
  char *table = list(x, "accuracy=0.5", &shown);
  cr_assert_eq(shown, 1, "%s", table);
  free(table);
  char path[256];
  snprintf(path, sizeof path, "%s/r1/metrics.jsonl", tmp);
  write_text(path, r1_lines);
  tfx_runindex_close(x);
  x = open_synced(1);
  table = list(x, "accuracy=0.9 and step=100", &shown);
  cr_assert_eq(shown, 1, "%s", table);
  cr_assert(strstr(table, "finished"), "%s", table);
  free(table);
  tfx_runindex_close(x);
}

Test(runindex, begin_marks_running_and_import_sets_the_final_status) {
  make_run("r1", 1000, r1_lines);
  char dir[256];
  snprintf(dir, sizeof dir, "%s/r1", tmp);
  tfx_runindex *x = open_index();
  tfx_err err;
  cr_assert_eq(tfx_runindex_begin(x, dir, 999.0, &err), TFX_OK, "%s", err.msg);
  int shown = 0;
  char *table = list(x, NULL, &shown);
  cr_assert(strstr(table, "running"), "%s", table);
  free(table);
  cr_assert_eq(tfx_runindex_import(x, dir, "stopped", &err), TFX_OK, "%s", err.msg);
  table = list(x, "seconds>30", &shown); /* from the registered start 999 to the last line at 1030 */
  cr_assert_eq(shown, 1, "%s", table);
  cr_assert(strstr(table, "stopped"), "%s", table);
  free(table);
  tfx_runindex_close(x);
}

Test(runindex, compare_shows_metrics_and_config_differences) {
  make_run("r1", 100, r1_lines);
  make_run("r2", 200, r2_lines);
  tfx_runindex *x = open_synced(2);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  tfx_err err;
  cr_assert_eq(tfx_runindex_compare(x, "r1", "r2", out, &err), TFX_OK, "%s", err.msg);
  fclose(out);
  cr_assert(strstr(text, "eval.accuracy") && strstr(text, "-0.1"), "%s", text);
  cr_assert(strstr(text, "config training.max_steps") && strstr(text, "200"), "%s", text);
  cr_assert_null(strstr(text, "batch_size"), "%s", text);
  free(text);
  out = open_memstream(&text, &len);
  cr_assert_eq(tfx_runindex_compare(x, "r1", "r9", out, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "no run 'r9'"), "%s", err.msg);
  fclose(out);
  free(text);
  tfx_runindex_close(x);
}

Test(runindex, a_corrupt_index_is_named) {
  char path[256];
  tfx_runindex_path(tmp, path, sizeof path);
  write_text(path, "this is not an SQLite database, but it is long enough to have a header of one......\n");
  tfx_runindex *x = NULL;
  tfx_err err;
  cr_assert_eq(tfx_runindex_open(path, 100, &x, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, path) && strstr(err.msg, "not a database"), "%s", err.msg);
  cr_assert_null(x);
}

Test(runindex, a_locked_index_is_reported_not_waited_on_forever) {
  make_run("r1", 100, r1_lines);
  char path[256];
  tfx_runindex_path(tmp, path, sizeof path);
  tfx_runindex *x = open_synced(1);
  sqlite3 *other;
  cr_assert_eq(sqlite3_open(path, &other), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
  char dir[256];
  snprintf(dir, sizeof dir, "%s/r1", tmp);
  tfx_err err;
  cr_assert_eq(tfx_runindex_import(x, dir, NULL, &err), TFX_ESTATE);
  cr_assert(strstr(err.msg, "locked by another process"), "%s", err.msg);
  tfx_runindex *y = NULL;
  cr_assert_eq(tfx_runindex_open(path, 50, &y, &err), TFX_ESTATE);
  sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(other);
  cr_assert_eq(tfx_runindex_import(x, dir, NULL, &err), TFX_OK, "%s", err.msg);
  tfx_runindex_close(x);
}

Test(runindex, a_removed_or_renamed_run_is_followed) {
  make_run("r1", 100, r1_lines);
  make_run("r2", 100, r2_lines);
  tfx_runindex *x = open_synced(2);
  tfx_runindex_close(x);
  char path[256], moved[256];
  snprintf(path, sizeof path, "%s/r2/metrics.jsonl", tmp);
  cr_assert_eq(remove(path), 0);
  x = open_synced(1);
  int shown = 0;
  char *table = list(x, NULL, &shown);
  cr_assert_eq(shown, 1, "%s", table);
  cr_assert_null(strstr(table, "\nr2 "), "%s", table);
  free(table);
  tfx_runindex_close(x);
  /* The same run under another directory name is a new run; the old name leaves. */
  snprintf(path, sizeof path, "%s/r1", tmp);
  snprintf(moved, sizeof moved, "%s/r1-renamed", tmp);
  cr_assert_eq(rename(path, moved), 0);
  x = open_synced(1);
  table = list(x, "accuracy=0.9", &shown);
  cr_assert_eq(shown, 1, "%s", table);
  cr_assert(strstr(table, "\nr1-renamed "), "%s", table);
  free(table);
  tfx_runindex_close(x);
}
