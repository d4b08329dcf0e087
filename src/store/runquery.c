/* The experiment index's queries: --where parsing, the runs table, and two runs compared. The list query is
 * built from fixed fragments and whitelisted operators only; names and numbers are bound parameters. */
#include <ctype.h>
#include <json-c/json.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/text.h"
#include "store/ckpt.h"
#include "store/runindex.h"
#include "store/runindex_impl.h"

/* The --where operators as typed (longest first, so ">=" is not read as ">") and as SQL. */
static const char *const ops_text[] = {">=", "<=", "!=", "==", ">", "<", "="};
static const char *const ops_sql[] = {">=", "<=", "!=", "=", ">", "<", "="};
#define N_OPS 7

/* Reads one "NAME OP NUMBER" at *p into f, advancing *p. */
static int parse_condition(const char *text, const char **p, tfx_run_filter *f, tfx_err *err) {
  const char *s = *p, *name = s;
  while (isalnum((unsigned char)*s) || *s == '_' || *s == '.' || *s == '/' || *s == '-') {
    s++;
  }
  size_t len = (size_t)(s - name);
  if (!len || len >= sizeof f->kind || !isalpha((unsigned char)*name) || name[len - 1] == '.') {
    return tfx_err_set(err, TFX_EINVAL, "--where '%s': expected a metric name at offset %d", text, (int)(name - text));
  }
  const char *dot = memrchr(name, '.', len);
  if (dot && (size_t)(name + len - dot - 1) >= sizeof f->name) {
    return tfx_err_set(err, TFX_EINVAL, "--where '%s': metric name too long at offset %d", text, (int)(name - text));
  }
  snprintf(f->kind, sizeof f->kind, "%.*s", dot ? (int)(dot - name) : 4, dot ? name : "eval");
  snprintf(f->name, sizeof f->name, "%.*s", dot ? (int)(name + len - dot - 1) : (int)len, dot ? dot + 1 : name);
  while (*s == ' ') {
    s++;
  }
  f->op = -1;
  for (int i = 0; i < N_OPS && f->op < 0; i++) {
    f->op = strncmp(s, ops_text[i], strlen(ops_text[i])) ? -1 : i;
  }
  if (f->op < 0) {
    return tfx_err_set(err, TFX_EINVAL, "--where '%s': expected one of > >= < <= = == != at offset %d", text,
                       (int)(s - text));
  }
  s += strlen(ops_text[f->op]);
  char *end;
  f->value = strtod(s, &end);
  if (end == s || !isfinite(f->value)) {
    return tfx_err_set(err, TFX_EINVAL, "--where '%s': expected a number at offset %d", text, (int)(s - text));
  }
  *p = end;
  return TFX_OK;
}

/* Skips spaces and one joiner (',' or the word "and"); 1 if a joiner was found. */
static int skip_joiner(const char **p) {
  const char *s = *p;
  while (*s == ' ') {
    s++;
  }
  int joined = 0;
  if (*s == ',') {
    s++;
    joined = 1;
  } else if (!strncasecmp(s, "and", 3) && s[3] && !isalnum((unsigned char)s[3])) {
    s += 3;
    joined = 1;
  }
  while (*s == ' ') {
    s++;
  }
  *p = s;
  return joined;
}

int tfx_runindex_parse_where(const char *text, tfx_run_filter *f, int max, int *n, tfx_err *err) {
  const char *p = text;
  int count = 0;
  while (*p == ' ') {
    p++;
  }
  while (*p) {
    if (count == max) {
      return tfx_err_set(err, TFX_EINVAL, "--where '%s': at most %d conditions", text, max);
    }
    int rc = parse_condition(text, &p, &f[count++], err);
    if (rc) {
      return rc;
    }
    if (!skip_joiner(&p) && *p) {
      return tfx_err_set(err, TFX_EINVAL, "--where '%s': expected ',' or 'and' at offset %d", text, (int)(p - text));
    }
  }
  if (!count) {
    return tfx_err_set(err, TFX_EINVAL, "--where is empty: want e.g. 'accuracy>0.88'");
  }
  *n = count;
  return TFX_OK;
}

/* The last value of a series of run r (SQL fragment; binds kind then name). */
#define LAST_VALUE                                                                \
  "(SELECT value FROM series s WHERE s.run = r.id AND s.kind = ? AND s.name = ? " \
  "ORDER BY s.step DESC, s.rowid DESC LIMIT 1)"

/* Builds the list query: fixed fragments and whitelisted operators only. */
static void list_sql(const tfx_run_filter *f, int n, tfx_text *q) {
  tfx_text_put(q, "SELECT id, status, last_step, " LAST_VALUE ", " LAST_VALUE
                  ", end_time - start_time, config_hash, start_time, dir FROM runs r WHERE 1");
  for (int i = 0; i < n; i++) {
    const char *lhs = !strcmp(f[i].kind, "eval") && !strcmp(f[i].name, "step")      ? "r.last_step"
                      : !strcmp(f[i].kind, "eval") && !strcmp(f[i].name, "seconds") ? "(r.end_time - r.start_time)"
                                                                                    : LAST_VALUE;
    tfx_text_put(q, " AND %s %s ?", lhs, ops_sql[f[i].op]);
  }
  tfx_text_put(q, " ORDER BY start_time, id");
}

static void bind_filters(sqlite3_stmt *st, const tfx_run_filter *f, int n) {
  int k = 1;
  sqlite3_bind_text(st, k++, "eval", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, k++, "accuracy", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, k++, "eval", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, k++, "loss", -1, SQLITE_STATIC);
  for (int i = 0; i < n; i++) {
    int column = !strcmp(f[i].kind, "eval") && (!strcmp(f[i].name, "step") || !strcmp(f[i].name, "seconds"));
    if (!column) {
      sqlite3_bind_text(st, k++, f[i].kind, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, k++, f[i].name, -1, SQLITE_STATIC);
    }
    sqlite3_bind_double(st, k++, f[i].value);
  }
}

/* A number column as text ("-" when NULL). */
static const char *num(sqlite3_stmt *st, int col, const char *fmt, char *buf, size_t n) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) {
    return "-";
  }
  snprintf(buf, n, fmt, sqlite3_column_double(st, col));
  return buf;
}

static void print_row(sqlite3_stmt *st, FILE *out) {
  char acc[32], loss[32], secs[32], started[32] = "-", ck[32] = "-";
  time_t t0 = (time_t)sqlite3_column_double(st, 7);
  struct tm tm;
  if (sqlite3_column_type(st, 7) != SQLITE_NULL && localtime_r(&t0, &tm)) {
    strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", &tm);
  }
  int64_t step;
  char cdir[1100];
  if (tfx_ckpt_latest(store__runindex_text(st, 8), &step, cdir, sizeof cdir, NULL) == TFX_OK) {
    snprintf(ck, sizeof ck, "%lld", (long long)step);
  }
  fprintf(out, "%-24s %-10s %8lld %9s %9s %8s %8s %-8s %s\n", store__runindex_text(st, 0), store__runindex_text(st, 1),
          (long long)sqlite3_column_int64(st, 2), num(st, 3, "%.4f", acc, sizeof acc),
          num(st, 4, "%.4f", loss, sizeof loss), num(st, 5, "%.1f", secs, sizeof secs), ck, store__runindex_text(st, 6),
          started);
}

int tfx_runindex_list(tfx_runindex *x, const tfx_run_filter *f, int n, FILE *out, int *shown, tfx_err *err) {
  tfx_text q = {0};
  list_sql(f, n, &q);
  if (!q.s) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  sqlite3_stmt *st;
  int rc = store__runindex_prepare(x, q.s, &st, err), rows = 0, src;
  free(q.s);
  if (rc) {
    return rc;
  }
  bind_filters(st, f, n);
  fprintf(out, "%-24s %-10s %8s %9s %9s %8s %8s %-8s %s\n", "run", "status", "step", "accuracy", "loss", "seconds",
          "ckpt", "config", "started");
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    print_row(st, out);
    rows++;
  }
  sqlite3_finalize(st);
  if (src != SQLITE_DONE) {
    return store__runindex_fail(x, src, "list runs", err);
  }
  *shown = rows;
  return TFX_OK;
}

/* Copies one row of a run's columns for compare; 0 if the run is unknown. */
static int run_summary(tfx_runindex *x, const char *id, char cols[4][64], char **config) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(x->db,
                         "SELECT status, last_step, end_time - start_time, config_hash, config FROM runs WHERE id = ?",
                         -1, &st, NULL)) {
    return 0;
  }
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  int found = sqlite3_step(st) == SQLITE_ROW;
  if (found) {
    char buf[32];
    snprintf(cols[0], 64, "%s", store__runindex_text(st, 0));
    snprintf(cols[1], 64, "%lld", (long long)sqlite3_column_int64(st, 1));
    snprintf(cols[2], 64, "%s", num(st, 2, "%.1f", buf, sizeof buf));
    snprintf(cols[3], 64, "%s", store__runindex_text(st, 3));
    *config = sqlite3_column_text(st, 4) ? strdup((const char *)sqlite3_column_text(st, 4)) : NULL;
  }
  sqlite3_finalize(st);
  return found;
}

/* Prints "kind.name  a  b  b-a" for every series either run has (its last value). */
static int compare_metrics(tfx_runindex *x, const char *a, const char *b, FILE *out, tfx_err *err) {
  sqlite3_stmt *st;
  int rc = store__runindex_prepare(
      x,
      "SELECT k.kind, k.name,"
      " (SELECT value FROM series s WHERE s.run = ?1 AND s.kind = k.kind AND s.name = k.name"
      "  ORDER BY s.step DESC, s.rowid DESC LIMIT 1),"
      " (SELECT value FROM series s WHERE s.run = ?2 AND s.kind = k.kind AND s.name = k.name"
      "  ORDER BY s.step DESC, s.rowid DESC LIMIT 1)"
      " FROM (SELECT DISTINCT kind, name FROM series WHERE run IN (?1, ?2)) k ORDER BY k.kind, k.name",
      &st, err);
  if (rc) {
    return rc;
  }
  sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
  int src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    char key[200], va[32], vb[32], d[32] = "-";
    snprintf(key, sizeof key, "%s.%s", store__runindex_text(st, 0), store__runindex_text(st, 1));
    if (sqlite3_column_type(st, 2) != SQLITE_NULL && sqlite3_column_type(st, 3) != SQLITE_NULL) {
      snprintf(d, sizeof d, "%+.6g", sqlite3_column_double(st, 3) - sqlite3_column_double(st, 2));
    }
    fprintf(out, "%-36s %16s %16s %14s\n", key, num(st, 2, "%.6g", va, sizeof va), num(st, 3, "%.6g", vb, sizeof vb),
            d);
  }
  sqlite3_finalize(st);
  return src == SQLITE_DONE ? TFX_OK : store__runindex_fail(x, src, "compare series", err);
}

/* Flattens a JSON config into "a.b.c" -> JSON text of the leaf (arrays are leaves) in flat. */
static void flatten(json_object *o, const char *prefix, json_object *flat) {
  if (!json_object_is_type(o, json_type_object)) {
    json_object_object_add(flat, prefix,
                           json_object_new_string(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)));
    return;
  }
  json_object_object_foreach(o, key, val) {
    char path[512];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", key);
    flatten(val, path, flat);
  }
}

static json_object *flat_config(const char *config) {
  json_object *o = config ? json_tokener_parse(config) : NULL, *flat = json_object_new_object();
  if (o) {
    flatten(o, "", flat);
  }
  json_object_put(o);
  return flat;
}

/* Prints the config keys whose values differ ("-" where one run lacks the key). */
static void compare_configs(const char *ca, const char *cb, FILE *out) {
  json_object *fa = flat_config(ca), *fb = flat_config(cb), *v;
  json_object_object_foreach(fa, key, va) {
    const char *sa = json_object_get_string(va);
    const char *sb = json_object_object_get_ex(fb, key, &v) ? json_object_get_string(v) : "-";
    if (strcmp(sa, sb)) {
      fprintf(out, "config %-29s %16s %16s\n", key, sa, sb);
    }
  }
  json_object_object_foreach(fb, key2, vb) {
    if (!json_object_object_get_ex(fa, key2, &v)) {
      fprintf(out, "config %-29s %16s %16s\n", key2, "-", json_object_get_string(vb));
    }
  }
  json_object_put(fa);
  json_object_put(fb);
}

int tfx_runindex_compare(tfx_runindex *x, const char *a, const char *b, FILE *out, tfx_err *err) {
  char ca[4][64], cb[4][64], *config_a = NULL, *config_b = NULL;
  if (!run_summary(x, a, ca, &config_a)) {
    return tfx_err_set(err, TFX_ENOTFOUND, "runs --compare: no run '%s' in %s", a, x->path);
  }
  if (!run_summary(x, b, cb, &config_b)) {
    free(config_a);
    return tfx_err_set(err, TFX_ENOTFOUND, "runs --compare: no run '%s' in %s", b, x->path);
  }
  static const char *const rows[] = {"status", "step", "seconds", "config hash"};
  fprintf(out, "%-36s %16s %16s %14s\n", "", a, b, "b - a");
  for (int i = 0; i < 4; i++) {
    fprintf(out, "%-36s %16s %16s\n", rows[i], ca[i], cb[i]);
  }
  int rc = compare_metrics(x, a, b, out, err);
  if (!rc) {
    compare_configs(config_a, config_b, out);
  }
  free(config_a);
  free(config_b);
  return rc;
}
