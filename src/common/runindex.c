/* The experiment index on SQLite. Every statement is prepared with bound parameters; the only SQL text built
 * at run time is chosen from the fixed fragments below (never from user input). */
#include "runindex.h"

#include <ctype.h>
#include <dirent.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "ckpt.h"
#include "log.h"
#include "prom.h"

struct tfx_runindex {
  sqlite3 *db;
  char path[1024];
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS runs(id TEXT PRIMARY KEY, dir TEXT NOT NULL, config_hash TEXT, config TEXT,"
    " start_time REAL, end_time REAL, status TEXT, last_step INTEGER, source_size INTEGER DEFAULT -1,"
    " source_mtime REAL DEFAULT -1);"
    "CREATE TABLE IF NOT EXISTS series(run TEXT NOT NULL, kind TEXT NOT NULL, step INTEGER, time REAL,"
    " name TEXT NOT NULL, value REAL);"
    "CREATE INDEX IF NOT EXISTS series_run ON series(run, kind, name, step);";

/* The --where operators as typed (longest first, so ">=" is not read as ">") and as SQL. */
static const char *const ops_text[] = {">=", "<=", "!=", "==", ">", "<", "="};
static const char *const ops_sql[] = {">=", "<=", "!=", "=", ">", "<", "="};
#define N_OPS 7

/* Maps a SQLite result code to a tfx code with the index path and SQLite's message. */
static int db_fail(tfx_runindex *x, int rc, const char *what, tfx_err *err) {
  int code = rc == SQLITE_BUSY || rc == SQLITE_LOCKED      ? TFX_ESTATE
             : rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT ? TFX_ECORRUPT
             : rc == SQLITE_NOMEM                          ? TFX_ENOMEM
                                                           : TFX_ESYS;
  const char *why = code == TFX_ESTATE ? "locked by another process" : x->db ? sqlite3_errmsg(x->db) : "";
  return tfx_err_set(err, code, "run index %s: %s: %s", x->path, what, why);
}

void tfx_runindex_path(const char *root, char *out, size_t n) {
  snprintf(out, n, "%s/tfx-runs.sqlite", root);
}

/* The run directory's name without trailing slashes into id; its parent into parent (may be NULL). */
static void split_run_dir(const char *run_dir, char *id, size_t n_id, char *parent, size_t n_parent) {
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", run_dir);
  size_t len = strlen(tmp);
  while (len > 1 && tmp[len - 1] == '/') {
    tmp[--len] = 0;
  }
  char *slash = strrchr(tmp, '/');
  snprintf(id, n_id, "%s", slash ? slash + 1 : tmp);
  if (parent) {
    if (!slash) {
      snprintf(parent, n_parent, ".");
    } else {
      *slash = 0;
      snprintf(parent, n_parent, "%s", slash == tmp ? "/" : tmp);
    }
  }
}

void tfx_runindex_path_for_run(const char *run_dir, char *out, size_t n) {
  char id[256], parent[1024];
  split_run_dir(run_dir, id, sizeof id, parent, sizeof parent);
  tfx_runindex_path(parent, out, n);
}

int tfx_runindex_open(const char *path, int busy_ms, tfx_runindex **out, tfx_err *err) {
  tfx_runindex *x = calloc(1, sizeof *x);
  if (!x) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  snprintf(x->path, sizeof x->path, "%s", path);
  int rc = sqlite3_open_v2(path, &x->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(x->db, busy_ms);
    rc = sqlite3_exec(x->db, schema, NULL, NULL, NULL);
  }
  if (rc != SQLITE_OK) {
    int code = db_fail(x, rc, "open", err);
    tfx_runindex_close(x);
    return code;
  }
  *out = x;
  return TFX_OK;
}

void tfx_runindex_close(tfx_runindex *x) {
  if (!x) {
    return;
  }
  sqlite3_close(x->db);
  free(x);
}

/* The whole file as a string (caller frees), or NULL. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  char *s = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n + 4096 + 1 > cap) {
      char *g = realloc(s, cap = cap * 2 + 8192);
      if (!g) {
        free(s), fclose(f);
        return NULL;
      }
      s = g;
    }
    got = fread(s + n, 1, cap - n - 1, f);
    n += got;
  } while (got > 0);
  fclose(f);
  s[n] = 0;
  if (len) {
    *len = n;
  }
  return s;
}

/* Reads run_dir/config.json into *config (caller frees; NULL if absent) and its CRC-32 into hash. */
static void read_config(const char *run_dir, char **config, char hash[9]) {
  char path[1100];
  size_t len = 0;
  snprintf(path, sizeof path, "%s/config.json", run_dir);
  *config = slurp(path, &len);
  hash[0] = 0;
  if (*config) {
    snprintf(hash, 9, "%08lx", crc32(0L, (const Bytef *)*config, (uInt)len));
  }
}

/* Runs one statement to completion and finalizes it. */
static int step_done(tfx_runindex *x, sqlite3_stmt *st, const char *what, tfx_err *err) {
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? TFX_OK : db_fail(x, rc, what, err);
}

static int prepare(tfx_runindex *x, const char *sql, sqlite3_stmt **st, tfx_err *err) {
  int rc = sqlite3_prepare_v2(x->db, sql, -1, st, NULL);
  return rc == SQLITE_OK ? TFX_OK : db_fail(x, rc, "prepare", err);
}

/* A text column ("-" when NULL), borrowed from st until its next step. */
static const char *text_col(sqlite3_stmt *st, int col) {
  const unsigned char *s = sqlite3_column_text(st, col);
  return s ? (const char *)s : "-";
}

int tfx_runindex_begin(tfx_runindex *x, const char *run_dir, double start, tfx_err *err) {
  char id[256], hash[9], dir[PATH_MAX], *config;
  split_run_dir(run_dir, id, sizeof id, NULL, 0);
  snprintf(dir, sizeof dir, "%s", realpath(run_dir, dir) ? dir : run_dir);
  read_config(run_dir, &config, hash);
  sqlite3_stmt *st;
  int rc = prepare(x,
                   "INSERT INTO runs(id, dir, config_hash, config, start_time, status) VALUES(?, ?, ?, ?, ?, 'running')"
                   " ON CONFLICT(id) DO UPDATE SET dir = excluded.dir, config_hash = excluded.config_hash,"
                   " config = excluded.config, status = 'running', end_time = NULL",
                   &st, err);
  if (!rc) {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, dir, -1, SQLITE_TRANSIENT);
    hash[0] ? sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 3);
    config ? sqlite3_bind_text(st, 4, config, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 4);
    sqlite3_bind_double(st, 5, start);
    rc = step_done(x, st, "register run", err);
  }
  free(config);
  return rc;
}

/* What one import learns from metrics.jsonl besides the series. */
typedef struct import_state {
  sqlite3_stmt *insert;
  const char *id;
  double first, last;
  long long last_step;
  int bad_lines, insert_rc;
} import_state;

/* Inserts the numeric fields of one metrics line; returns 0 for a malformed line. */
static int import_line(import_state *s, const char *line) {
  json_object *o = json_tokener_parse(line), *kind, *step, *when;
  int ok = o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, "kind", &kind) &&
           json_object_is_type(kind, json_type_string) && json_object_object_get_ex(o, "step", &step) &&
           json_object_object_get_ex(o, "time", &when);
  if (ok) {
    long long st = (long long)json_object_get_int64(step);
    double t = json_object_get_double(when);
    s->first = s->first ? s->first : t, s->last = t, s->last_step = st > s->last_step ? st : s->last_step;
    json_object_object_foreach(o, key, val) {
      if (!strcmp(key, "kind") || !strcmp(key, "step") || !strcmp(key, "time") ||
          !(json_object_is_type(val, json_type_double) || json_object_is_type(val, json_type_int))) {
        continue;
      }
      sqlite3_reset(s->insert);
      sqlite3_bind_text(s->insert, 1, s->id, -1, SQLITE_STATIC);
      sqlite3_bind_text(s->insert, 2, json_object_get_string(kind), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(s->insert, 3, st);
      sqlite3_bind_double(s->insert, 4, t);
      sqlite3_bind_text(s->insert, 5, key, -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(s->insert, 6, json_object_get_double(val));
      int rc = sqlite3_step(s->insert);
      s->insert_rc = rc != SQLITE_DONE ? rc : s->insert_rc;
    }
  }
  json_object_put(o);
  return ok;
}

/* Reads every line of f into the series table. */
static void import_lines(FILE *f, import_state *s) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) > 0 && !s->insert_rc) {
    if (n > 1 && !import_line(s, line)) {
      s->bad_lines++;
    }
  }
  free(line);
}

/* training.max_steps of a config text, or -1. */
static long long config_max_steps(const char *config) {
  json_object *o = config ? json_tokener_parse(config) : NULL, *tr, *ms;
  long long v = -1;
  if (o && json_object_object_get_ex(o, "training", &tr) && json_object_object_get_ex(tr, "max_steps", &ms)) {
    v = (long long)json_object_get_int64(ms);
  }
  json_object_put(o);
  return v;
}

/* The status an import leaves: the caller's, else finished when max_steps was reached, else the known one. */
static const char *import_status(const char *status, const char *known, long long last_step, const char *config) {
  if (status) {
    return status;
  }
  long long max = config_max_steps(config);
  if (max > 0 && last_step >= max) {
    return "finished";
  }
  return known ? known : "incomplete";
}

/* The status the index holds for id into out (empty if none). */
static void known_status(tfx_runindex *x, const char *id, char *out, size_t n) {
  sqlite3_stmt *st;
  out[0] = 0;
  if (sqlite3_prepare_v2(x->db, "SELECT status FROM runs WHERE id = ?", -1, &st, NULL) != SQLITE_OK) {
    return;
  }
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
    snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
}

/* Upserts the run's row after its series were imported. */
static int store_run(tfx_runindex *x, const char *run_dir, const import_state *s, const char *status,
                     const struct stat *sb, tfx_err *err) {
  char hash[9], dir[PATH_MAX], *config, known[32];
  snprintf(dir, sizeof dir, "%s", realpath(run_dir, dir) ? dir : run_dir);
  read_config(run_dir, &config, hash);
  known_status(x, s->id, known, sizeof known);
  sqlite3_stmt *st;
  int rc = prepare(x,
                   "INSERT INTO runs(id, dir, config_hash, config, start_time, end_time, status, last_step,"
                   " source_size, source_mtime) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET"
                   " dir = excluded.dir, config_hash = excluded.config_hash, config = excluded.config,"
                   " start_time = COALESCE(runs.start_time, excluded.start_time), end_time = excluded.end_time,"
                   " status = excluded.status, last_step = excluded.last_step, source_size = excluded.source_size,"
                   " source_mtime = excluded.source_mtime",
                   &st, err);
  if (!rc) {
    sqlite3_bind_text(st, 1, s->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, dir, -1, SQLITE_TRANSIENT);
    hash[0] ? sqlite3_bind_text(st, 3, hash, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 3);
    config ? sqlite3_bind_text(st, 4, config, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, 4);
    s->first ? sqlite3_bind_double(st, 5, s->first) : sqlite3_bind_null(st, 5);
    s->last ? sqlite3_bind_double(st, 6, s->last) : sqlite3_bind_null(st, 6);
    sqlite3_bind_text(st, 7, import_status(status, known[0] ? known : NULL, s->last_step, config), -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 8, s->last_step);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)sb->st_size);
    sqlite3_bind_double(st, 10, (double)sb->st_mtim.tv_sec + sb->st_mtim.tv_nsec / 1e9);
    rc = step_done(x, st, "store run", err);
  }
  free(config);
  return rc;
}

static int exec(tfx_runindex *x, const char *sql, tfx_err *err) {
  int rc = sqlite3_exec(x->db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? TFX_OK : db_fail(x, rc, sql, err);
}

/* Deletes the run's old series and reads metrics.jsonl into the table, inside the caller's transaction. */
static int replace_series(tfx_runindex *x, FILE *f, import_state *s, tfx_err *err) {
  sqlite3_stmt *del;
  int rc = prepare(x, "DELETE FROM series WHERE run = ?", &del, err);
  if (rc) {
    return rc;
  }
  sqlite3_bind_text(del, 1, s->id, -1, SQLITE_STATIC);
  if ((rc = step_done(x, del, "delete series", err)) ||
      (rc = prepare(x, "INSERT INTO series(run, kind, step, time, name, value) VALUES(?, ?, ?, ?, ?, ?)", &s->insert,
                    err))) {
    return rc;
  }
  import_lines(f, s);
  sqlite3_finalize(s->insert);
  return s->insert_rc ? db_fail(x, s->insert_rc, "insert series", err) : TFX_OK;
}

int tfx_runindex_import(tfx_runindex *x, const char *run_dir, const char *status, tfx_err *err) {
  char path[1100], id[256];
  snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
  split_run_dir(run_dir, id, sizeof id, NULL, 0);
  struct stat sb;
  FILE *f = fopen(path, "r");
  if (!f || fstat(fileno(f), &sb)) {
    if (f) {
      fclose(f);
    }
    return tfx_err_sys(err, TFX_ENOTFOUND, "run index: read %s", path);
  }
  import_state s = {.id = id};
  int rc = exec(x, "BEGIN IMMEDIATE", err);
  if (!rc && !(rc = replace_series(x, f, &s, err)) && !(rc = store_run(x, run_dir, &s, status, &sb, err))) {
    rc = exec(x, "COMMIT", err);
  }
  if (rc) {
    sqlite3_exec(x->db, "ROLLBACK", NULL, NULL, NULL);
  }
  fclose(f);
  if (!rc && s.bad_lines) {
    tfx_log(TFX_LOG_WARN, "RUNINDEX-BAD-LINES", "%s: skipped %d malformed line(s)", path, s.bad_lines);
  }
  return rc;
}

/* Whether the index holds id at dir (resolved) with exactly this metrics.jsonl size and mtime. */
static int is_current(tfx_runindex *x, const char *id, const char *dir, const struct stat *sb) {
  sqlite3_stmt *st;
  char real[PATH_MAX];
  int current = 0;
  if (!realpath(dir, real) ||
      sqlite3_prepare_v2(x->db, "SELECT source_size, source_mtime, dir FROM runs WHERE id = ?", -1, &st, NULL)) {
    return 0;
  }
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) {
    current = sqlite3_column_int64(st, 0) == (sqlite3_int64)sb->st_size &&
              sqlite3_column_double(st, 1) == (double)sb->st_mtim.tv_sec + sb->st_mtim.tv_nsec / 1e9 &&
              !strcmp(text_col(st, 2), real);
  }
  sqlite3_finalize(st);
  return current;
}

/* Notes id in the temporary table of the run directories this sync found. */
static int note_seen(tfx_runindex *x, const char *id, tfx_err *err) {
  sqlite3_stmt *st;
  int rc = prepare(x, "INSERT OR IGNORE INTO temp.seen(id) VALUES(?)", &st, err);
  if (!rc) {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = step_done(x, st, "note run", err);
  }
  return rc;
}

/* Scans root: imports what changed and notes every run directory found in temp.seen; *n gets their count. */
static int scan_root(tfx_runindex *x, DIR *d, const char *root, int *n, tfx_err *err) {
  struct dirent *de;
  int rc = TFX_OK;
  while ((de = readdir(d)) && !rc) {
    char dir[1400], path[1500];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s/%s", root, de->d_name);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (de->d_name[0] == '.' || stat(path, &sb) || !S_ISREG(sb.st_mode)) {
      continue;
    }
    (*n)++;
    rc = note_seen(x, de->d_name, err);
    if (!rc && !is_current(x, de->d_name, dir, &sb)) {
      rc = tfx_runindex_import(x, dir, NULL, err);
    }
  }
  return rc;
}

int tfx_runindex_sync(tfx_runindex *x, const char *root, int *n_runs, tfx_err *err) {
  DIR *d = opendir(root);
  if (!d) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "runs --root %s", root);
  }
  int n = 0;
  int rc = exec(x, "CREATE TEMP TABLE IF NOT EXISTS seen(id TEXT PRIMARY KEY); DELETE FROM temp.seen", err);
  if (!rc) {
    rc = scan_root(x, d, root, &n, err);
  }
  closedir(d);
  /* Runs whose directory is gone leave the index too: it lists what is below root. */
  if (!rc) {
    rc = exec(x,
              "DELETE FROM series WHERE run NOT IN (SELECT id FROM temp.seen);"
              "DELETE FROM runs WHERE id NOT IN (SELECT id FROM temp.seen)",
              err);
  }
  if (!rc) {
    *n_runs = n;
  }
  return rc;
}

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
    s++, joined = 1;
  } else if (!strncasecmp(s, "and", 3) && s[3] && !isalnum((unsigned char)s[3])) {
    s += 3, joined = 1;
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
  sqlite3_bind_text(st, k++, "eval", -1, SQLITE_STATIC), sqlite3_bind_text(st, k++, "accuracy", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, k++, "eval", -1, SQLITE_STATIC), sqlite3_bind_text(st, k++, "loss", -1, SQLITE_STATIC);
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
  if (tfx_ckpt_latest(text_col(st, 8), &step, cdir, sizeof cdir, NULL) == TFX_OK) {
    snprintf(ck, sizeof ck, "%lld", (long long)step);
  }
  fprintf(out, "%-24s %-10s %8lld %9s %9s %8s %8s %-8s %s\n", text_col(st, 0), text_col(st, 1),
          (long long)sqlite3_column_int64(st, 2), num(st, 3, "%.4f", acc, sizeof acc),
          num(st, 4, "%.4f", loss, sizeof loss), num(st, 5, "%.1f", secs, sizeof secs), ck, text_col(st, 6), started);
}

int tfx_runindex_list(tfx_runindex *x, const tfx_run_filter *f, int n, FILE *out, int *shown, tfx_err *err) {
  tfx_text q = {0};
  list_sql(f, n, &q);
  if (!q.s) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  sqlite3_stmt *st;
  int rc = prepare(x, q.s, &st, err), rows = 0, src;
  free(q.s);
  if (rc) {
    return rc;
  }
  bind_filters(st, f, n);
  fprintf(out, "%-24s %-10s %8s %9s %9s %8s %8s %-8s %s\n", "run", "status", "step", "accuracy", "loss", "seconds",
          "ckpt", "config", "started");
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    print_row(st, out), rows++;
  }
  sqlite3_finalize(st);
  if (src != SQLITE_DONE) {
    return db_fail(x, src, "list runs", err);
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
    snprintf(cols[0], 64, "%s", text_col(st, 0));
    snprintf(cols[1], 64, "%lld", (long long)sqlite3_column_int64(st, 1));
    snprintf(cols[2], 64, "%s", num(st, 2, "%.1f", buf, sizeof buf));
    snprintf(cols[3], 64, "%s", text_col(st, 3));
    *config = sqlite3_column_text(st, 4) ? strdup((const char *)sqlite3_column_text(st, 4)) : NULL;
  }
  sqlite3_finalize(st);
  return found;
}

/* Prints "kind.name  a  b  b-a" for every series either run has (its last value). */
static int compare_metrics(tfx_runindex *x, const char *a, const char *b, FILE *out, tfx_err *err) {
  sqlite3_stmt *st;
  int rc = prepare(x,
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
  sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC), sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
  int src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    char key[200], va[32], vb[32], d[32] = "-";
    snprintf(key, sizeof key, "%s.%s", text_col(st, 0), text_col(st, 1));
    if (sqlite3_column_type(st, 2) != SQLITE_NULL && sqlite3_column_type(st, 3) != SQLITE_NULL) {
      snprintf(d, sizeof d, "%+.6g", sqlite3_column_double(st, 3) - sqlite3_column_double(st, 2));
    }
    fprintf(out, "%-36s %16s %16s %14s\n", key, num(st, 2, "%.6g", va, sizeof va), num(st, 3, "%.6g", vb, sizeof vb),
            d);
  }
  sqlite3_finalize(st);
  return src == SQLITE_DONE ? TFX_OK : db_fail(x, src, "compare series", err);
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
  json_object_put(fa), json_object_put(fb);
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
  free(config_a), free(config_b);
  return rc;
}
