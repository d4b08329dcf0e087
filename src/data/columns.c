/* Feature columns over CSV records (columns.h): each categorical column becomes a sparse field (CSR), the numeric
 * ones the dense part; ids are hashed with xxHash's XXH3-64 (seed 0) of their text. */
#include "data/columns.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "common/labelset.h"
#include "common/log.h"
#include "data/csv.h"
#include "data/data_impl.h"
#include "data/example.h"
#include "data/tfrecord.h"

#define MAX_CROSS 4096 /* values of one crossed cell (the product of its keys' values) */

/* A growing CSR field. */
typedef struct field_buf {
  int64_t *off, *ids;
  float *vals;
  size_t n_off, cap_off, nnz, cap;
} field_buf;

/* Where each feature column reads: its key's, weight key's and crossed keys' cells. */
typedef struct plan {
  const tfx_feature_spec *f[TFX_MAX_FEATURES];
  int n, key[TFX_MAX_FEATURES], weight[TFX_MAX_FEATURES], cross[TFX_MAX_FEATURES][8], n_cross[TFX_MAX_FEATURES];
  int sparse[TFX_MAX_FEATURES]; /* the field index of a categorical column, -1 for a numeric one */
  int label, numeric, fields;   /* fields: the categorical columns, each a sparse field */
  int example_w;                /* data.weight_key's column (-1: none) */
} plan;

typedef struct reader {
  const char *path;
  const char *unit; /* where a row is in the file: "line" (CSV) or "record" (TFRecord) */
  const char *label_name;
  size_t line;
  const char *const *names;
  plan p;
  field_buf fb[TFX_MAX_FIELDS];
  float *x;
  int32_t *y;
  float *w; /* example weights (data.weight_key), or NULL */
  size_t n, cap;
  size_t truncated; /* ids past a sequence column's max_len, dropped */
} reader;

/* Grows *p (of *cap elements of size bytes) to hold need. */
static int grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) {
    return 0;
  }
  size_t c = *cap ? *cap * 2 : 1024;
  while (c < need) {
    c *= 2;
  }
  void *q = realloc(*p, c * size);
  if (!q) {
    return -1;
  }
  *p = q;
  *cap = c;
  return 0;
}

/* Appends one id and its weight to a field; -1 when memory runs out. */
static int push_id(field_buf *b, int64_t id, float w) {
  size_t ids_cap = b->cap;
  if (grow((void **)&b->ids, &ids_cap, b->nnz + 1, sizeof(int64_t)) ||
      grow((void **)&b->vals, &b->cap, b->nnz + 1, sizeof(float))) {
    return -1;
  }
  b->ids[b->nnz] = id;
  b->vals[b->nnz++] = w;
  return 0;
}

/* The index of column name in the header, -1 if absent. */
static int column_of(const reader *r, size_t ncols, const char *name) {
  for (size_t i = 0; i < ncols; i++) {
    if (!strcmp(r->names[i], name)) {
      return (int)i;
    }
  }
  return -1;
}

static int need_column(reader *r, size_t ncols, const char *name, const char *what, int *out, tfx_err *err) {
  if ((*out = column_of(r, ncols, name)) < 0) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: no column '%s' (%s) in the header", r->path, name, what);
  }
  return TFX_OK;
}

/* Resolves every column a feature reads, and the label's (by name, else a 0-based or negative index). */
static int make_plan(reader *r, const tfx_config *cfg, size_t ncols, tfx_err *err) {
  plan *p = &r->p;
  int rc = TFX_OK, fields = 0;
  for (int i = 0; !rc && i < cfg->n_features; i++) {
    const tfx_feature_spec *f = p->f[i] = &cfg->features[i];
    int crossed = !strcmp(f->type, "crossed");
    p->sparse[i] = strcmp(f->type, "numeric") ? fields++ : -1;
    p->numeric += p->sparse[i] < 0;
    p->weight[i] = -1;
    if (!crossed) {
      rc = need_column(r, ncols, f->key, f->name, &p->key[i], err);
    }
    if (!rc && f->weight_key[0]) {
      rc = need_column(r, ncols, f->weight_key, f->name, &p->weight[i], err);
    }
    for (const char *k = f->keys; !rc && crossed && *k;) {
      size_t n = strcspn(k, ",");
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)n, k);
      if (p->n_cross[i] == 8) {
        return tfx_err_set(err, TFX_ECONFIG, "feature %s: more than 8 crossed keys", f->name);
      }
      rc = need_column(r, ncols, name, f->name, &p->cross[i][p->n_cross[i]++], err);
      k += n + (k[n] == ',');
    }
  }
  p->n = cfg->n_features;
  p->fields = fields;
  p->example_w = -1;
  if (!rc && cfg->weight_key[0]) {
    rc = need_column(r, ncols, cfg->weight_key, "data.weight_key", &p->example_w, err);
  }
  if (rc) {
    return rc;
  }
  p->label = column_of(r, ncols, r->label_name);
  if (p->label < 0) {
    char *end;
    long k = strtol(r->label_name, &end, 10);
    p->label = *end || k >= (long)ncols || k < -(long)ncols ? -1 : (int)(k < 0 ? (long)ncols + k : k);
  }
  return p->label < 0
             ? tfx_err_set(err, TFX_ECONFIG, "%s: label column '%s' is not in the header", r->path, r->label_name)
             : TFX_OK;
}

static int bad_cell(const reader *r, int col, const char *cell, const char *what, tfx_err *err) {
  return tfx_err_set(err, TFX_ECORRUPT, "%s: %s %zu, column '%s': '%.80s' %s", r->path, r->unit, r->line, r->names[col],
                     cell, what);
}

/* Cuts the next value of a cell (separated by sep; the whole cell when sep is 0) out in place; NULL at the end. */
static char *next_value(char **p, char sep) {
  while (sep && **p == sep) {
    (*p)++;
  }
  if (!**p) {
    return NULL;
  }
  char *v = *p, *end = sep ? strchr(v, sep) : NULL;
  if (end) {
    *end = '\0';
    *p = end + 1;
  } else {
    *p = v + strlen(v);
  }
  return v;
}

/* The id of one value of an identity or hash column. */
static int value_id(const reader *r, const tfx_feature_spec *f, int col, const char *v, int64_t *id, tfx_err *err) {
  if (!strcmp(f->type, "hash")) {
    *id = (int64_t)(XXH3_64bits(v, strlen(v)) % (uint64_t)f->hash_bucket_size);
    return TFX_OK;
  }
  char *end;
  errno = 0;
  long long k = strtoll(v, &end, 10);
  if (end == v || *end || errno) {
    return bad_cell(r, col, v, "is not an integer id", err);
  }
  if (k < 0 || k >= f->num_buckets) {
    char what[96];
    snprintf(what, sizeof what, "is outside the column's ids [0, %lld)", (long long)f->num_buckets);
    return bad_cell(r, col, v, what, err);
  }
  *id = k;
  return TFX_OK;
}

/* The ids (and weights) of an identity or hash column's cell into its field; key and weights are copies of the
 * cells, split in place (cell_w names the weight cell in messages). */
static int split_categorical(reader *r, int i, char *key, char *weights, const char *cell_w, field_buf *b,
                             tfx_err *err) {
  const tfx_feature_spec *f = r->p.f[i];
  char sep = f->separator[0], *p = key, *w = weights;
  int count = 0, rc = TFX_OK;
  for (char *v; !rc && (v = next_value(&p, sep)); count++) {
    int64_t id = 0;
    float weight = 1.0f;
    char *wv = w ? next_value(&w, sep) : NULL;
    if (w && !wv) {
      return bad_cell(r, r->p.weight[i], cell_w, "has fewer weights than the column has ids", err);
    }
    if (wv) {
      char *end;
      weight = strtof(wv, &end);
      if (end == wv || *end || !isfinite(weight)) {
        return bad_cell(r, r->p.weight[i], wv, "is not a finite weight", err);
      }
    }
    if (f->max_len > 0 && count >= f->max_len) {
      r->truncated++; /* a sequence keeps its first max_len values */
      continue;
    }
    if (!(rc = value_id(r, f, r->p.key[i], v, &id, err))) {
      rc = push_id(b, id, weight) ? tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path) : TFX_OK;
    }
  }
  if (!rc && !count && f->required) {
    rc = bad_cell(r, r->p.key[i], "", "is empty, and the column is required", err);
  }
  return rc;
}

/* An identity or hash column's cell into its field, split on copies: a crossed column may read the same cells. */
static int categorical(reader *r, int i, char **cells, field_buf *b, tfx_err *err) {
  const char *cell_w = r->p.weight[i] >= 0 ? cells[r->p.weight[i]] : NULL;
  char *key = strdup(cells[r->p.key[i]]), *weights = cell_w ? strdup(cell_w) : NULL;
  int rc = !key || (cell_w && !weights) ? tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path)
                                        : split_categorical(r, i, key, weights, cell_w, b, err);
  free(key);
  free(weights);
  return rc;
}

/* The hashed tuple of value c (a mixed-radix index over the keys' values) into the field. */
static int push_tuple(field_buf *b, const tfx_feature_spec *f, char *vals[][64], const int *nv, int keys, int c) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (int k = 0, rest = c; k < keys; rest /= nv[k], k++) {
    const char *v = vals[k][rest % nv[k]];
    XXH3_64bits_update(&st, v, strlen(v) + 1); /* with its NUL: ("ab", "c") and ("a", "bc") differ */
  }
  return push_id(b, (int64_t)(XXH3_64bits_digest(&st) % (uint64_t)f->hash_bucket_size), 1.0f);
}

/* The hashed tuples of a crossed column: every combination of its keys' values (TensorFlow's crossed_column),
 * split on copies of the cells. */
static int crossed(reader *r, int i, char **cells, field_buf *b, tfx_err *err) {
  const tfx_feature_spec *f = r->p.f[i];
  char *vals[8][64], *copies[8] = {0};
  int nv[8], total = 1, keys = r->p.n_cross[i], rc = TFX_OK;
  for (int k = 0; !rc && k < keys; k++) {
    char *p = copies[k] = strdup(cells[r->p.cross[i][k]]);
    nv[k] = 0;
    for (char *v; p && nv[k] < 64 && (v = next_value(&p, f->separator[0]));) {
      vals[k][nv[k]++] = v;
    }
    total *= nv[k];
    if (!copies[k]) {
      rc = tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path);
    } else if (total > MAX_CROSS) {
      rc = bad_cell(r, r->p.cross[i][k], cells[r->p.cross[i][k]], "crosses into more than 4096 values", err);
    }
  }
  for (int c = 0; !rc && c < total; c++) {
    rc = push_tuple(b, f, vals, nv, keys, c) ? tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path) : TFX_OK;
  }
  for (int k = 0; k < keys; k++) {
    free(copies[k]);
  }
  return rc;
}

static int numeric(reader *r, int i, const char *cell, float *out, tfx_err *err) {
  const tfx_feature_spec *f = r->p.f[i];
  if (!*cell) {
    *out = (float)f->default_value;
    return f->required ? bad_cell(r, r->p.key[i], cell, "is empty, and the column is required", err) : TFX_OK;
  }
  char *end;
  *out = strtof(cell, &end);
  if (*end || !isfinite(*out)) {
    return bad_cell(r, r->p.key[i], cell, "is not a finite number", err);
  }
  if (!strcmp(f->normalizer, "log1p")) {
    *out = copysignf(log1pf(fabsf(*out)), *out);
  }
  return TFX_OK;
}

/* Reads row r->n's example weight (data.weight_key) from its cell: a finite number >= 0; old: the rows' capacity
 * before this row (the weights grow with the labels). */
static int example_weight(reader *r, const char *cell, size_t old, tfx_err *err) {
  float *w = r->cap == old && r->w ? r->w : realloc(r->w, sizeof(float) * r->cap);
  if (!w) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path);
  }
  r->w = w;
  char *end;
  double v = strtod(cell, &end);
  if (end == cell || *end || !isfinite(v) || v < 0) {
    return bad_cell(r, r->p.example_w, cell, "is not an example weight (a finite number >= 0)", err);
  }
  w[r->n] = (float)v;
  return TFX_OK;
}

static int add_row(reader *r, char **cells, tfx_err *err) {
  size_t dim = r->p.numeric ? (size_t)r->p.numeric : 1, old = r->cap;
  if (grow((void **)&r->y, &r->cap, r->n + 1, sizeof(int32_t))) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path);
  }
  float *x = r->cap == old ? r->x : realloc(r->x, sizeof(float) * dim * r->cap);
  if (!x) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path);
  }
  r->x = x;
  int rc = r->p.example_w >= 0 ? example_weight(r, cells[r->p.example_w], old, err) : TFX_OK;
  if (rc) {
    return rc;
  }
  char *end;
  const char *label = cells[r->p.label];
  long v = strtol(label, &end, 10);
  if (end == label || *end || v < INT32_MIN || v > INT32_MAX) {
    if (tfx_label_set_parse(label, '|', &r->y[r->n])) {
      return bad_cell(r, r->p.label, label, "is not an integer label or a set of classes (1|4)", err);
    }
  } else {
    r->y[r->n] = (int32_t)v;
  }
  x = r->x + r->n * dim;
  x[0] = 0;
  for (int i = 0, num = 0; !rc && i < r->p.n; i++) {
    int s = r->p.sparse[i];
    if (s < 0) {
      rc = numeric(r, i, cells[r->p.key[i]], &x[num++], err);
      continue;
    }
    field_buf *b = &r->fb[s];
    rc = !strcmp(r->p.f[i]->type, "crossed") ? crossed(r, i, cells, b, err) : categorical(r, i, cells, b, err);
    if (!rc && grow((void **)&b->off, &b->cap_off, r->n + 2, sizeof(int64_t))) {
      rc = tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path);
    }
    if (!rc) {
      b->off[r->n + 1] = (int64_t)b->nnz;
    }
  }
  r->n += !rc;
  return rc;
}

/* Hands the rows to a new dataset. */
static int finish(reader *r, tfx_dataset **out, tfx_err *err) {
  size_t dim = r->p.numeric ? (size_t)r->p.numeric : 1;
  int rc = data__dataset_take(r->n, dim, &r->x, &r->y, r->path, out, err);
  if (rc) {
    return rc;
  }
  tfx_dataset *d = *out;
  for (int s = 0; s < r->p.fields; s++) {
    d->fields[s] = (tfx_field){r->fb[s].off, r->fb[s].ids, r->fb[s].vals};
    r->fb[s] = (field_buf){0};
  }
  d->n_fields = r->p.fields;
  d->w = r->w;
  r->w = NULL;
  return TFX_OK;
}

static void reader_free(reader *r) {
  for (int s = 0; s < TFX_MAX_FIELDS; s++) {
    free(r->fb[s].off);
    free(r->fb[s].ids);
    free(r->fb[s].vals);
  }
  free(r->x);
  free(r->y);
  free(r->w);
}

/* Allocates every field's offsets (row 0 starts at 0) for the next chunk. */
static int start_fields(reader *r, tfx_err *err) {
  for (int s = 0; s < r->p.fields; s++) { /* finish() handed the last chunk's buffers over: start new ones */
    if (!r->fb[s].off && !(r->fb[s].off = calloc(1024, sizeof(int64_t)))) {
      return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->path);
    }
    r->fb[s].cap_off = r->fb[s].cap_off ? r->fb[s].cap_off : 1024;
  }
  r->n = r->cap = 0;
  return TFX_OK;
}

#define LIST_SEP '\x1f' /* joins a TFRecord feature's values into one cell, split again as a multi-valued cell */

/* The features a TFRecord's columns read (the label, each key, weight key and crossed key), once each. */
typedef struct record_keys {
  char name[2 * TFX_MAX_FEATURES + 1][64];
  const char *ptr[2 * TFX_MAX_FEATURES + 1];
  size_t n;
} record_keys;

static void add_key(record_keys *k, const char *name, size_t len) {
  for (size_t i = 0; i < k->n; i++) {
    if (strlen(k->name[i]) == len && !strncmp(k->name[i], name, len)) {
      return;
    }
  }
  if (k->n < sizeof k->name / sizeof k->name[0] && len < sizeof k->name[0]) {
    snprintf(k->name[k->n], sizeof k->name[0], "%.*s", (int)len, name);
    k->ptr[k->n] = k->name[k->n];
    k->n++;
  }
}

static void collect_keys(const tfx_config *cfg, record_keys *k) {
  add_key(k, cfg->label_key, strlen(cfg->label_key));
  if (cfg->weight_key[0]) {
    add_key(k, cfg->weight_key, strlen(cfg->weight_key));
  }
  for (int i = 0; i < cfg->n_features; i++) {
    const tfx_feature_spec *f = &cfg->features[i];
    if (f->key[0]) {
      add_key(k, f->key, strlen(f->key));
    }
    if (f->weight_key[0]) {
      add_key(k, f->weight_key, strlen(f->weight_key));
    }
    for (const char *p = f->keys; *p;) {
      size_t n = strcspn(p, ",");
      add_key(k, p, n);
      p += n + (p[n] == ',');
    }
  }
}

/* Appends text to a growing cell; -1 when memory runs out. */
static int cell_put(char **buf, size_t *len, size_t *cap, const char *text, size_t n) {
  if (*len + n + 2 > *cap) {
    size_t c = (*len + n + 2) * 2;
    char *b = realloc(*buf, c);
    if (!b) {
      return -1;
    }
    *buf = b;
    *cap = c;
  }
  memcpy(*buf + *len, text, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

/* A feature of an Example as cell text: its values joined by LIST_SEP (bytes as they are, int64 in decimal,
 * floats to 9 digits); empty when the Example lacks it. */
static int example_cell(const tfx_example *ex, const char *key, char **buf, size_t *cap, tfx_err *err) {
  tfx_feature_kind kind;
  size_t count = 0, len = 0;
  int rc = cell_put(buf, &len, cap, "", 0) ? TFX_ENOMEM : TFX_OK;
  if (rc || tfx_example_find(ex, key, &kind, &count, NULL)) {
    return rc ? tfx_err_set(err, rc, "out of memory") : TFX_OK;
  }
  const int64_t *ints = NULL;
  const float *floats = NULL;
  if (kind == TFX_FEATURE_KIND_INT64) {
    tfx_example_int64s(ex, key, &ints, &count, NULL);
  } else if (kind == TFX_FEATURE_KIND_FLOAT) {
    tfx_example_floats(ex, key, &floats, &count, NULL);
  }
  for (size_t i = 0; !rc && i < count; i++) {
    char num[40], sep = LIST_SEP;
    const uint8_t *data = (const uint8_t *)num;
    size_t n = 0;
    if (kind == TFX_FEATURE_KIND_BYTES) {
      tfx_example_bytes(ex, key, i, &data, &n, NULL);
    } else {
      n = ints ? (size_t)snprintf(num, sizeof num, "%lld", (long long)ints[i])
               : (size_t)snprintf(num, sizeof num, "%.9g", (double)floats[i]);
    }
    rc = (i && cell_put(buf, &len, cap, &sep, 1)) || cell_put(buf, &len, cap, (const char *)data, n) ? TFX_ENOMEM : 0;
  }
  return rc ? tfx_err_set(err, rc, "out of memory") : TFX_OK;
}

/* One Example as cells in the order of keys. */
static int example_cells(reader *r, const uint8_t *data, size_t len, const record_keys *k, char **cells, size_t *caps,
                         tfx_err *err) {
  tfx_example *ex = NULL;
  tfx_err e = {0};
  int rc = tfx_example_unpack(data, len, &ex, &e);
  if (rc) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: record %zu: %s", r->path, r->line, e.msg);
  }
  for (size_t i = 0; !rc && i < k->n; i++) {
    rc = example_cell(ex, k->ptr[i], &cells[i], &caps[i], err);
  }
  tfx_example_destroy(ex);
  return rc;
}

/* cfg with every categorical column multi-valued on LIST_SEP: a TFRecord feature is a list. */
static void as_lists(const tfx_config *cfg, tfx_config *lists) {
  *lists = *cfg;
  for (int i = 0; i < lists->n_features; i++) {
    tfx_feature_spec *f = &lists->features[i];
    if (strcmp(f->type, "numeric")) {
      f->separator[0] = LIST_SEP;
      f->separator[1] = '\0';
    }
  }
}

struct tfx_columns_reader {
  reader r;
  tfx_config lists; /* TFRecord: the experiment with every categorical column a bag (as_lists) */
  record_keys keys;
  tfx_csv_rows *rows;      /* CSV */
  tfx_tfrecord_reader *tr; /* TFRecord */
  char *cells[2 * TFX_MAX_FEATURES + 1];
  size_t caps[2 * TFX_MAX_FEATURES + 1];
  char *path;
};

/* The next record's cells: a CSV row, or an Example's features; *cells NULL at the end of the file. */
static int next_cells(tfx_columns_reader *c, char ***cells, tfx_err *err) {
  if (c->rows) {
    return tfx_csv_rows_next(c->rows, cells, &c->r.line, err);
  }
  const uint8_t *data;
  size_t len;
  int rc = tfx_tfrecord_reader_next(c->tr, &data, &len, err);
  *cells = NULL;
  if (rc || !data) {
    return rc;
  }
  c->r.line++;
  rc = example_cells(&c->r, data, len, &c->keys, c->cells, c->caps, err);
  *cells = rc ? NULL : c->cells;
  return rc;
}

int tfx_columns_open(const tfx_config *cfg, const char *path, tfx_columns_reader **out, tfx_err *err) {
  FILE *f = NULL;
  int rc = data__file_open(path, &f, err);
  return rc ? rc : data__columns_open_file(cfg, f, path, out, err);
}

int data__columns_open_file(const tfx_config *cfg, FILE *f, const char *path, tfx_columns_reader **out, tfx_err *err) {
  tfx_columns_reader *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(path))) {
    fclose(f);
    free(c);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  int csv = cfg->data_format != TFX_FORMAT_TFRECORD, rc;
  size_t ncols = 0;
  c->r = (reader){.path = c->path, .unit = csv ? "line" : "record", .label_name = cfg->label_column};
  if (csv) {
    c->lists = *cfg;
    rc = data__csv_rows_open_file(f, path, &c->rows, err);
    c->r.names = rc ? NULL : tfx_csv_rows_header(c->rows, &ncols);
  } else {
    as_lists(cfg, &c->lists);
    collect_keys(&c->lists, &c->keys);
    c->r.names = c->keys.ptr;
    c->r.label_name = c->lists.label_key;
    ncols = c->keys.n;
    rc = data__tfrecord_open_file(f, path, &c->tr, err);
  }
  rc = rc ? rc : make_plan(&c->r, &c->lists, ncols, err);
  if (rc) {
    tfx_columns_close(c);
    return rc;
  }
  *out = c;
  return TFX_OK;
}

int tfx_columns_read(tfx_columns_reader *c, size_t max, tfx_dataset **out, tfx_err *err) {
  *out = NULL;
  int rc = start_fields(&c->r, err);
  char **cells;
  while (!rc && c->r.n < max && !(rc = next_cells(c, &cells, err)) && cells) {
    rc = add_row(&c->r, cells, err);
  }
  return rc || c->r.n == 0 ? rc : finish(&c->r, out, err);
}

void tfx_columns_close(tfx_columns_reader *c) {
  if (!c) {
    return;
  }
  for (size_t i = 0; i < c->keys.n; i++) {
    free(c->cells[i]);
  }
  if (c->r.truncated) {
    tfx_log(TFX_LOG_INFO, "DATA-SEQ-TRUNCATED", "%s: %zu ids past their sequence column's max_len dropped", c->path,
            c->r.truncated);
  }
  reader_free(&c->r);
  tfx_csv_rows_close(c->rows);
  tfx_tfrecord_reader_close(c->tr);
  free(c->path);
  free(c);
}

/* The whole file through a columns reader. */
static int load_all(const tfx_config *cfg, const char *path, tfx_dataset **out, tfx_err *err) {
  tfx_columns_reader *c = NULL;
  int rc = tfx_columns_open(cfg, path, &c, err);
  if (!rc && !(rc = tfx_columns_read(c, SIZE_MAX, out, err)) && !*out) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: no %ss", path, c->r.unit);
  }
  tfx_columns_close(c);
  return rc;
}

int tfx_columns_load_csv(const tfx_config *cfg, const char *path, tfx_dataset **out, tfx_err *err) {
  tfx_config c = *cfg;
  c.data_format = TFX_FORMAT_CSV;
  return load_all(&c, path, out, err);
}

int tfx_columns_load_tfrecord(const tfx_config *cfg, const char *path, tfx_dataset **out, tfx_err *err) {
  tfx_config c = *cfg;
  c.data_format = TFX_FORMAT_TFRECORD;
  return load_all(&c, path, out, err);
}
