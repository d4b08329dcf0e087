/* The experiment index on SQLite: the schema, registering runs and importing metrics.jsonl (runquery.c has the
 * queries). Every statement is prepared, with values as bound parameters. */
#include "store/runindex.h"

#include <dirent.h>
#include <json-c/json.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/log.h"
#include "store/runindex_impl.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS runs(id TEXT PRIMARY KEY, dir TEXT NOT NULL, config_hash TEXT, config TEXT,"
    " start_time REAL, end_time REAL, status TEXT, last_step INTEGER, source_size INTEGER DEFAULT -1,"
    " source_mtime REAL DEFAULT -1);"
    "CREATE TABLE IF NOT EXISTS series(run TEXT NOT NULL, kind TEXT NOT NULL, step INTEGER, time REAL,"
    " name TEXT NOT NULL, value REAL);"
    "CREATE INDEX IF NOT EXISTS series_run ON series(run, kind, name, step);";

/* Maps a SQLite result code to a tfx code with the index path and SQLite's message. */
int store__runindex_fail(tfx_runindex *x, int rc, const char *what, tfx_err *err) {
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
    int code = store__runindex_fail(x, rc, "open", err);
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
        free(s);
        fclose(f);
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
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? TFX_OK : store__runindex_fail(x, rc, what, err);
}

int store__runindex_prepare(tfx_runindex *x, const char *sql, sqlite3_stmt **st, tfx_err *err) {
  int rc = sqlite3_prepare_v2(x->db, sql, -1, st, NULL);
  return rc == SQLITE_OK ? TFX_OK : store__runindex_fail(x, rc, "prepare", err);
}

/* A text column ("-" when NULL), borrowed from st until its next step. */
const char *store__runindex_text(sqlite3_stmt *st, int col) {
  const unsigned char *s = sqlite3_column_text(st, col);
  return s ? (const char *)s : "-";
}

/* The run directory as an absolute path (as given when it cannot be resolved) into out, of PATH_MAX bytes. */
static void absolute_dir(const char *run_dir, char *out, size_t n) {
  char real[PATH_MAX];
  snprintf(out, n, "%s", realpath(run_dir, real) ? real : run_dir);
}

int tfx_runindex_begin(tfx_runindex *x, const char *run_dir, double start, tfx_err *err) {
  char id[256], hash[9], dir[PATH_MAX], *config;
  split_run_dir(run_dir, id, sizeof id, NULL, 0);
  absolute_dir(run_dir, dir, sizeof dir);
  read_config(run_dir, &config, hash);
  sqlite3_stmt *st;
  int rc = store__runindex_prepare(
      x,
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
    s->first = s->first ? s->first : t;
    s->last = t;
    s->last_step = st > s->last_step ? st : s->last_step;
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
  absolute_dir(run_dir, dir, sizeof dir);
  read_config(run_dir, &config, hash);
  known_status(x, s->id, known, sizeof known);
  sqlite3_stmt *st;
  int rc = store__runindex_prepare(
      x,
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
  return rc == SQLITE_OK ? TFX_OK : store__runindex_fail(x, rc, sql, err);
}

/* Deletes the run's old series and reads metrics.jsonl into the table, inside the caller's transaction. */
static int replace_series(tfx_runindex *x, FILE *f, import_state *s, tfx_err *err) {
  sqlite3_stmt *del;
  int rc = store__runindex_prepare(x, "DELETE FROM series WHERE run = ?", &del, err);
  if (rc) {
    return rc;
  }
  sqlite3_bind_text(del, 1, s->id, -1, SQLITE_STATIC);
  if ((rc = step_done(x, del, "delete series", err)) ||
      (rc = store__runindex_prepare(
           x, "INSERT INTO series(run, kind, step, time, name, value) VALUES(?, ?, ?, ?, ?, ?)", &s->insert, err))) {
    return rc;
  }
  import_lines(f, s);
  sqlite3_finalize(s->insert);
  return s->insert_rc ? store__runindex_fail(x, s->insert_rc, "insert series", err) : TFX_OK;
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
              !strcmp(store__runindex_text(st, 2), real);
  }
  sqlite3_finalize(st);
  return current;
}

/* Notes id in the temporary table of the run directories this sync found. */
static int note_seen(tfx_runindex *x, const char *id, tfx_err *err) {
  sqlite3_stmt *st;
  int rc = store__runindex_prepare(x, "INSERT OR IGNORE INTO temp.seen(id) VALUES(?)", &st, err);
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
