/* The streaming input: a list of files read one window at a time through the readers' chunk interfaces. */
#include "data/stream.h"

#include <dirent.h>
#include <glob.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "common/log.h"
#include "common/rand.h"
#include "data/columns.h"
#include "data/csv.h"
#include "data/data_impl.h"
#include "data/example.h"
#include "data/idx.h"
#include "data/libsvm.h"

typedef struct file_list {
  char **paths;
  size_t n;
} file_list;

struct tfx_stream {
  tfx_format format;
  int sparse;          /* LibSVM rows kept as CSR (a model that reads them with an embedding_bag), or columns */
  int n_fields;        /* the sparse fields of an example: 1 for LibSVM rows, the categorical columns' count */
  tfx_config *columns; /* feature columns (model.features): the experiment they are read with, or NULL */
  char label_column[64], feature_key[64], label_key[64];
  int header;
  double scale, mean, std; /* x = (x * scale - mean) / std */
  size_t dim, window;
  int index, count, by_file, in_order; /* in_order: data.shuffle false (files by name, windows as read) */
  uint64_t seed, file_seed; /* this worker's window shuffles; the file order every worker shares */
  file_list images, labels; /* this shard's files; labels only for IDX */
  size_t *order, next_file; /* file order of this epoch, and the next file to open */
  void *reader;             /* the open file's reader, NULL between files */
  uint64_t record;          /* records seen this epoch, for sharding by record */
  uint64_t file_record;     /* records read from the open file, to name a bad one */
  int classes;              /* labels must be in [0, classes) (0: unchecked): tfx_stream_check_labels */
  int multi_label;          /* labels are sets whose classes must be in [0, classes) */
  unsigned char *dropped;   /* the chunk being read: 1 for a record check_labels refused (on_error skip), or NULL */
  int64_t epoch, kept;      /* completed epochs; examples this shard kept this epoch */
  data__window cur;         /* the window being served, in cur.perm order (the consumer's) */
  size_t pos;               /* the next index of cur.perm to serve */
  data__prefetch *pf;       /* a followed stream's reader thread, from the first take; NULL before and otherwise */
  char follow[TFX_PATH_MAX]; /* data.train.follow: the directory, or "" */
  data__follow_names names;  /* the directory's files taken (any worker's turn: sharding by file, whose turn) */
  FILE *held;                /* the open followed file (its reader's: borrowed while s->reader is open), or NULL */
  int64_t held_size;         /* its size when it was taken */
  tfx_idle_fn idle;          /* called while waiting for a file */
  void *idle_ctx;
  int skip_bad;              /* data.on_error skip */
  atomic_uint_least64_t bad; /* bad records this shard named and skipped (by the reader thread when following) */
};

/* A label check_labels found outside the model's classes, under data.on_error skip: the filters drop it. */

static void list_free(file_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->paths[i]);
  }
  free(l->paths);
  l->paths = NULL;
  l->n = 0;
}

static int list_add(file_list *l, const char *path, tfx_err *err) {
  char **p = realloc(l->paths, (l->n + 1) * sizeof *p);
  if (!p || !(p[l->n] = strdup(path))) {
    if (p) {
      l->paths = p;
    }
    return tfx_err_set(err, TFX_ENOMEM, "out of memory listing %s", path);
  }
  l->paths = p;
  l->n++;
  return TFX_OK;
}

/* Expands one comma-separated entry: a glob pattern (sorted matches) or a plain path. */
static int expand_one(file_list *l, const char *entry, tfx_err *err) {
  if (!strpbrk(entry, "*?[")) {
    return list_add(l, entry, err);
  }
  glob_t g;
  int rc = glob(entry, 0, NULL, &g);
  if (rc == GLOB_NOMATCH) {
    globfree(&g);
    return tfx_err_set(err, TFX_ENOTFOUND, "data: no file matches '%s'", entry);
  }
  for (size_t i = 0; !rc && i < g.gl_pathc; i++) {
    rc = list_add(l, g.gl_pathv[i], err);
  }
  globfree(&g);
  return rc ? (rc == GLOB_NOSPACE ? tfx_err_set(err, TFX_ENOMEM, "glob %s: out of memory", entry) : rc) : TFX_OK;
}

/* The files of a comma-separated list of paths and patterns, in order. */
static int expand(file_list *l, const char *spec, tfx_err *err) {
  char buf[TFX_PATH_MAX];
  snprintf(buf, sizeof buf, "%s", spec);
  int rc = TFX_OK;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
    rc = expand_one(l, tok, err);
  }
  if (!rc && l->n == 0) {
    rc = tfx_err_set(err, TFX_ENOTFOUND, "data: '%s' names no file", spec);
  }
  return rc;
}

int data__files_expand(const char *spec, char ***paths, size_t *n, tfx_err *err) {
  file_list l = {0};
  int rc = expand(&l, spec, err);
  if (rc) {
    list_free(&l);
    return rc;
  }
  *paths = l.paths;
  *n = l.n;
  return TFX_OK;
}

void data__files_free(char **paths, size_t n) {
  file_list l = {paths, n};
  list_free(&l);
}

/* Keeps files index, index + count, ... of l (sharding by file). */
static void keep_shard(file_list *l, int index, int count) {
  size_t k = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (i % (size_t)count == (size_t)index) {
      l->paths[k++] = l->paths[i];
    } else {
      free(l->paths[i]);
    }
  }
  l->n = k;
}

static int list_files(tfx_stream *s, const tfx_config *cfg, tfx_err *err) {
  if (s->follow[0]) { /* the files come as they land; a directory that is not there at the start is a mistake */
    DIR *d = opendir(s->follow);
    if (!d) {
      return tfx_err_sys(err, TFX_ENOTFOUND, "data.train.follow: open directory %s", s->follow);
    }
    closedir(d);
    return TFX_OK;
  }
  int rc = expand(&s->images, cfg->train_images, err);
  if (!rc && s->format == TFX_FORMAT_IDX) {
    rc = expand(&s->labels, cfg->train_labels, err);
    if (!rc && s->labels.n != s->images.n) {
      return tfx_err_set(err, TFX_ECONFIG, "data.train: %zu image files but %zu label files", s->images.n, s->labels.n);
    }
  }
  if (rc || !s->by_file) {
    return rc;
  }
  if (s->images.n < (size_t)s->count) {
    return tfx_err_set(err, TFX_ECONFIG, "data.shard_by file: %zu file(s) for %d workers; every worker needs one",
                       s->images.n, s->count);
  }
  keep_shard(&s->images, s->index, s->count);
  if (s->format == TFX_FORMAT_IDX) {
    keep_shard(&s->labels, s->index, s->count);
  }
  return TFX_OK;
}

static void close_reader(tfx_stream *s) {
  s->held = NULL;
  if (!s->reader) {
    return;
  }
  if (s->columns) {
    tfx_columns_close(s->reader);
    s->reader = NULL;
    return;
  }
  switch (s->format) {
    case TFX_FORMAT_IDX:
      tfx_idx_close(s->reader);
      break;
    case TFX_FORMAT_CSV:
      tfx_csv_close(s->reader);
      break;
    case TFX_FORMAT_LIBSVM:
      tfx_libsvm_close(s->reader);
      break;
    default:
      tfx_example_close(s->reader);
  }
  s->reader = NULL;
}

/* The reader of file f (path), which it takes. */
static int open_file(tfx_stream *s, FILE *f, const char *path, tfx_err *err) {
  if (s->columns) {
    return data__columns_open_file(s->columns, f, path, (tfx_columns_reader **)&s->reader, err);
  }
  switch (s->format) {
    case TFX_FORMAT_CSV:
      return data__csv_open_file(f, path, s->label_column, s->header, (tfx_csv_reader **)&s->reader, err);
    case TFX_FORMAT_LIBSVM:
      return data__libsvm_open_file(f, path, s->dim, (tfx_libsvm_reader **)&s->reader, err);
    default:
      return data__example_open_file(f, path, s->feature_key, s->label_key, 1.0, (tfx_example_reader **)&s->reader,
                                     err);
  }
}

/* Opens the reader of this shard's file `file`: a followed one through data__follow_open (one open, checked, read
 * from; held for its end's check), IDX as its image and label pair, the others by path. */
static int open_reader(tfx_stream *s, size_t file, tfx_err *err) {
  const char *path = s->images.paths[file];
  s->file_record = 0;
  if (s->format == TFX_FORMAT_IDX && !s->columns) {
    return tfx_idx_open(path, s->labels.paths[file], s->scale, s->dim, (tfx_idx_reader **)&s->reader, err);
  }
  FILE *f = NULL;
  int rc = s->follow[0] ? data__follow_open(path, &f, &s->held_size, err) : data__file_open(path, &f, err);
  rc = rc ? rc : open_file(s, f, path, err);
  s->held = !rc && s->follow[0] ? f : NULL;
  return rc;
}

static int read_chunk(tfx_stream *s, tfx_dataset **out, tfx_err *err) {
  if (s->columns) {
    return tfx_columns_read(s->reader, s->window, out, err);
  }
  switch (s->format) {
    case TFX_FORMAT_IDX:
      return tfx_idx_read_chunk(s->reader, s->window, out, err);
    case TFX_FORMAT_CSV:
      return tfx_csv_read(s->reader, s->window, out, err);
    case TFX_FORMAT_LIBSVM:
      return s->sparse ? tfx_libsvm_read_sparse(s->reader, s->window, out, err)
                       : tfx_libsvm_read(s->reader, s->window, out, err);
    default:
      return tfx_example_read(s->reader, s->window, out, err);
  }
}

/* A new epoch's file order: shuffled from the experiment seed and the epoch number, the same on every worker
 * (sharding by record counts records in this order). */
static void shuffle_files(tfx_stream *s) {
  size_t n = s->images.n;
  for (size_t i = 0; i < n; i++) {
    s->order[i] = i;
  }
  uint64_t key = s->file_seed ^ ((uint64_t)s->epoch * 0xA24BAED4963EE407ULL);
  for (size_t i = n - 1; !s->in_order && i > 0 && i < n; i--) {
    size_t j = (size_t)(tfx_rand_uniform(key, i) * (double)(i + 1));
    size_t t = s->order[i];
    s->order[i] = s->order[j];
    s->order[j] = t;
  }
  s->next_file = 0;
  s->record = 0;
  s->kept = 0;
}

/* A followed directory: waits for the next file after the last one taken (sharding by file: the next of this
 * shard's turns), adds it to the shard's files and opens it. */
static int follow_file(tfx_stream *s, tfx_err *err) {
  char name[256], path[TFX_PATH_MAX + 260];
  for (int mine = 0; !mine;) {
    int rc = data__follow_wait(s->follow, &s->names, name, sizeof name, s->pf, err);
    if (rc || (rc = data__follow_take(&s->names, name, err))) {
      return rc;
    }
    mine = !s->by_file || (s->names.n_taken - 1) % (uint64_t)s->count == (uint64_t)s->index;
  }
  snprintf(path, sizeof path, "%s/%s", s->follow, name);
  size_t *order = realloc(s->order, (s->images.n + 1) * sizeof *order);
  if (!order) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory following %s", path);
  }
  s->order = order;
  int rc = list_add(&s->images, path, err);
  if (rc) {
    return rc;
  }
  s->order[s->images.n - 1] = s->images.n - 1;
  s->next_file = s->images.n;
  char shown[TFX_PATH_MAX + 260];
  tfx_log_escape(path, strlen(path), shown, sizeof shown); /* a name may hold a newline */
  tfx_log(TFX_LOG_INFO, "DATA-FOLLOW", "reading %s", shown);
  return open_reader(s, s->images.n - 1, err); /* a link, a FIFO or an unreadable file: a bad file, skipped whole */
}

/* Moves to the next file (or the next epoch after the last one) and opens it. */
static int advance_file(tfx_stream *s, tfx_err *err) {
  close_reader(s);
  if (s->follow[0]) {
    return follow_file(s, err);
  }
  if (s->next_file == s->images.n) {
    if (s->kept == 0) {
      return tfx_err_set(err, TFX_ECONFIG, "data: shard %d of %d got no example from %zu file(s)", s->index, s->count,
                         s->images.n);
    }
    s->epoch++;
    shuffle_files(s);
  }
  return open_reader(s, s->order[s->next_file++], err);
}

/* Moves example i of field f down to row k (rows before k already moved; *at: the field's next free id). */
static void move_row(tfx_field *f, size_t i, size_t k, int64_t *at, double scale) {
  int64_t from = f->off[i], len = f->off[i + 1] - from;
  memmove(f->ids + *at, f->ids + from, sizeof(int64_t) * (size_t)len);
  for (int64_t j = 0; j < len; j++) {
    f->vals[*at + j] = (float)(f->vals[from + j] * scale);
  }
  f->off[k] = *at;
  *at += len;
}

/* filter_chunk of a sparse chunk: this shard's records' ids and weights (and dense part) moved down in place;
 * a LibSVM row's values scaled, feature columns' numeric part scaled and normalized. */
static void filter_sparse(tfx_stream *s, tfx_dataset *d) {
  size_t k = 0;
  int64_t at[TFX_MAX_FIELDS] = {0};
  double vscale = s->columns ? 1.0 : s->scale;
  for (size_t i = 0; i < d->n; i++, s->record++) {
    if ((!s->by_file && s->record % (uint64_t)s->count != (uint64_t)s->index) || (s->dropped && s->dropped[i])) {
      continue;
    }
    for (int f = 0; f < d->n_fields; f++) {
      move_row(&d->fields[f], i, k, &at[f], vscale);
    }
    if (d->x) {
      memmove(d->x + k * d->dim, d->x + i * d->dim, sizeof(float) * d->dim);
    }
    d->y[k++] = d->y[i];
  }
  for (int f = 0; f < d->n_fields; f++) {
    d->fields[f].off[k] = at[f];
  }
  d->n = k;
  for (size_t i = 0; s->columns && d->x && i < k * d->dim; i++) {
    d->x[i] = (float)(d->x[i] * s->scale);
  }
  if (s->columns && d->x) {
    tfx_dataset_normalize(d->x, k * d->dim, s->mean, s->std);
  }
}

/* Keeps this shard's records of the chunk (sharding by record), in place; checks their width. */
static int filter_chunk(tfx_stream *s, tfx_dataset *d, size_t file, tfx_err *err) {
  if (s->sparse) {
    filter_sparse(s, d);
    return TFX_OK;
  }
  if (d->dim != s->dim) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: %zu values per example, the model's input takes %zu",
                       s->images.paths[file], d->dim, s->dim);
  }
  size_t k = 0;
  for (size_t i = 0; i < d->n; i++, s->record++) {
    if ((s->by_file || s->record % (uint64_t)s->count == (uint64_t)s->index) && !(s->dropped && s->dropped[i])) {
      memmove(d->x + k * d->dim, d->x + i * d->dim, sizeof(float) * d->dim);
      d->y[k++] = d->y[i];
    }
  }
  d->n = k;
  if (s->format != TFX_FORMAT_IDX && s->scale != 1.0) {
    for (size_t i = 0; i < k * d->dim; i++) {
      d->x[i] = (float)(d->x[i] * s->scale);
    }
  }
  tfx_dataset_normalize(d->x, k * d->dim, s->mean, s->std);
  return TFX_OK;
}

/* The window's serving order, shuffled, into w->perm (a window's own: one may wait in the reader's queue). */
static int shuffle_window(const tfx_stream *s, data__window *w, tfx_err *err) {
  size_t n = w->d->n, *perm = malloc(n * sizeof *perm);
  if (!perm) {
    return tfx_err_set(err, TFX_ENOMEM, "data: out of memory for a window of %zu", n);
  }
  for (size_t i = 0; i < n; i++) {
    perm[i] = i;
  }
  uint64_t key = s->seed ^ (s->record * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)s->epoch;
  for (size_t i = n - 1; !s->in_order && i > 0; i--) {
    size_t j = (size_t)(tfx_rand_uniform(key, i) * (double)(i + 1));
    size_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  w->perm = perm;
  return TFX_OK;
}

/* Whether this worker names and counts a bad record: with sharding by file the one reading it; by record every
 * worker reads every line, so worker 0 alone (each bad record is counted once in the cluster). */
static int reporter(const tfx_stream *s) {
  return s->by_file || s->index == 0;
}

/* Names and counts a bad record (the reader's or the label check's message) under data.on_error skip, when this
 * worker is the one to (mine). */
static void name_bad(tfx_stream *s, const char *msg, const char *what, int mine) {
  if (mine) {
    uint64_t bad = atomic_fetch_add(&s->bad, 1) + 1;
    char shown[sizeof((tfx_err *)0)->msg * 4];
    tfx_log_escape(msg, strlen(msg), shown, sizeof shown); /* file names and record bytes are the data's */
    tfx_log(TFX_LOG_WARN, "DATA-BAD-RECORD", "%s; %s (data.on_error skip; %llu bad so far)", shown, what,
            (unsigned long long)bad);
  }
}

/* Checks a chunk's labels as it is read, naming the file and record of the first outside [0, classes), as the
 * whole-file loaders do (rather than later, at the batch, as "example N of the batch"); under data.on_error
 * skip each is named, counted and marked in s->dropped for the filters to drop. */
/* The first class of a multi-label label outside [0, classes), or -1 when it has none. */
static int class_outside(int32_t y, int classes) {
  uint32_t out = y >= 0 ? (y >= classes ? 1u : 0u) : tfx_label_bits(y) >> classes;
  if (!out) {
    return -1;
  }
  if (y >= 0) {
    return y;
  }
  int k = classes;
  while (!(out & 1u)) {
    out >>= 1;
    k++;
  }
  return k;
}

/* Why record i of the chunk (file) has a label outside the classes, into err; TFX_OK when it has none. */
static int bad_label(const tfx_stream *s, const tfx_dataset *d, size_t i, size_t file, tfx_err *err) {
  unsigned long long rec = (unsigned long long)(s->file_record + i + 1);
  int k = s->multi_label ? class_outside(d->y[i], s->classes) : -1;
  if (s->multi_label && k >= 0) {
    return tfx_err_set(err, TFX_EINVAL, "%s: record %llu: its label set names class %d, outside the model's %d "
                       "outputs [0, %d) (model.multi_label)", s->images.paths[file], rec, k, s->classes, s->classes);
  }
  if (!s->multi_label && (d->y[i] < 0 || d->y[i] >= s->classes)) {
    return tfx_err_set(err, TFX_EINVAL, "%s: record %llu: label %d is outside the model's %d classes [0, %d)",
                       s->images.paths[file], rec, (int)d->y[i], s->classes, s->classes);
  }
  return TFX_OK;
}

static int check_labels(tfx_stream *s, tfx_dataset *d, size_t file, tfx_err *err) {
  for (size_t i = 0; s->classes > 0 && i < d->n; i++) {
    int rc = bad_label(s, d, i, file, err);
    if (rc) {
      if (!s->skip_bad) {
        return rc;
      }
      if (!s->dropped && !(s->dropped = calloc(d->n, 1))) { /* no label value can mark it: any int32 is a set */
        return tfx_err_set(err, TFX_ENOMEM, "out of memory");
      }
      name_bad(s, err->msg, "skipped", s->by_file || (s->record + i) % (uint64_t)s->count == (uint64_t)s->index);
      s->dropped[i] = 1;
    }
  }
  s->file_record += d->n;
  return TFX_OK;
}

/* data.on_error skip: whether a reader's error rc is a bad record passed over (named and counted): a parse error
 * (CSV and LibSVM go on at the next line), or a file that cannot be opened or read on (TFRecord, IDX, feature
 * columns: the rest of the file is skipped). A read or memory error always stops. */
static int skip_bad(tfx_stream *s, int rc, const tfx_err *err) {
  if (!s->skip_bad || (rc != TFX_ECORRUPT && rc != TFX_ESHAPE && rc != TFX_EINVAL && rc != TFX_ENOTFOUND)) {
    return 0;
  }
  int per_line = s->reader && !s->columns && (s->format == TFX_FORMAT_CSV || s->format == TFX_FORMAT_LIBSVM);
  name_bad(s, err->msg,
           per_line    ? "skipped"
           : s->reader ? "the rest of the file skipped"
                       : "the file skipped whole",
           reporter(s));
  if (!per_line) {
    close_reader(s);
  }
  return 1;
}

/* Reads the next non-empty window of this shard's examples into *w (empty on error); the reader thread's
 * data__produce_fn when following. */
static int produce(void *ctx, data__window *w, tfx_err *err) {
  tfx_stream *s = ctx;
  for (int rc;;) {
    tfx_dataset *d = NULL;
    if (!s->reader && (rc = advance_file(s, err))) {
      if (skip_bad(s, rc, err)) {
        continue;
      }
      return rc;
    }
    if ((rc = read_chunk(s, &d, err))) {
      if (skip_bad(s, rc, err)) {
        continue;
      }
      return rc;
    }
    if (!d) {
      if (s->held) {
        data__follow_end(s->held, s->images.paths[s->order[s->next_file - 1]], s->held_size);
      }
      close_reader(s);
      continue;
    }
    size_t file = s->order[s->next_file - 1];
    rc = check_labels(s, d, file, err);
    rc = rc ? rc : filter_chunk(s, d, file, err);
    free(s->dropped);
    s->dropped = NULL;
    if (rc || d->n == 0) {
      tfx_dataset_destroy(d);
      if (rc) {
        return rc;
      }
      continue;
    }
    s->kept += (int64_t)d->n;
    w->d = d;
    if ((rc = shuffle_window(s, w, err))) {
      data__window_free(w);
    }
    return rc;
  }
}

/* The next window into s->cur: read now, or a followed stream's from its reader thread (started at the first). */
static int refill(tfx_stream *s, tfx_err *err) {
  data__window_free(&s->cur);
  s->pos = 0;
  if (!s->follow[0]) {
    return produce(s, &s->cur, err);
  }
  int rc = s->pf ? TFX_OK : data__prefetch_start(produce, s, s->follow, &s->pf, err);
  return rc ? rc : data__prefetch_take(s->pf, s->idle, s->idle_ctx, &s->cur, err);
}

/* The index in the window of the next example, refilling when the window is spent. */
static int take(tfx_stream *s, size_t *k, tfx_err *err) {
  if (!s->cur.d || s->pos == s->cur.d->n) {
    int rc = refill(s, err);
    if (rc) {
      return rc;
    }
  }
  *k = s->cur.perm[s->pos++];
  return TFX_OK;
}

int tfx_stream_take(tfx_stream *s, const tfx_dataset **d, size_t *k, tfx_err *err) {
  int rc = take(s, k, err);
  *d = rc ? NULL : s->cur.d;
  return rc;
}

int tfx_stream_buffered(const tfx_stream *s, size_t n) {
  size_t held = s->cur.d ? s->cur.d->n - s->pos : 0;
  return held >= n || (s->pf && held + data__prefetch_queued(s->pf, n - held) >= n);
}

int tfx_stream_fields(const tfx_stream *s) {
  return s->sparse ? s->n_fields : 0;
}

int tfx_stream_next(tfx_stream *s, int batch, float *x, int32_t *y, tfx_err *err) {
  for (int i = 0; i < batch; i++) {
    size_t k;
    int rc = take(s, &k, err);
    if (rc) {
      return rc;
    }
    memcpy(x + (size_t)i * s->dim, s->cur.d->x + k * s->dim, sizeof(float) * s->dim);
    y[i] = s->cur.d->y[k];
  }
  return TFX_OK;
}

int tfx_stream_skip(tfx_stream *s, int64_t n, tfx_err *err) {
  for (int64_t i = 0; i < n; i++) {
    size_t k;
    int rc = take(s, &k, err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

int tfx_stream_open(const tfx_config *cfg, int index, int count, size_t dim, tfx_stream **out, tfx_err *err) {
  if (count < 1 || index < 0 || index >= count || dim == 0) {
    return tfx_err_set(err, TFX_EINVAL, "stream: shard %d of %d, dim %zu", index, count, dim);
  }
  tfx_stream *s = calloc(1, sizeof *s);
  if (!s) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  *s = (tfx_stream){.format = cfg->data_format,
                    .header = cfg->data_header,
                    .scale = cfg->data_scale,
                    .dim = dim,
                    .window = (size_t)cfg->shuffle_buffer,
                    .in_order = !cfg->data_shuffle,
                    .index = index,
                    .count = count,
                    .by_file = cfg->shard_by == TFX_SHARD_BY_FILE,
                    .seed = (uint64_t)cfg->seed ^ (uint64_t)index * 0x9E37ULL,
                    .file_seed = (uint64_t)cfg->seed};
  s->mean = cfg->data_mean;
  s->std = cfg->data_std;
  s->sparse = tfx_config_sparse_input(cfg) && (s->format == TFX_FORMAT_LIBSVM || cfg->n_features > 0);
  s->n_fields = cfg->n_features > 0 ? tfx_config_sparse_fields(cfg) : 1;
  if (cfg->n_features > 0 && !(s->columns = malloc(sizeof *cfg))) {
    free(s);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (s->columns) {
    *s->columns = *cfg;
  }
  snprintf(s->label_column, sizeof s->label_column, "%s", cfg->label_column);
  snprintf(s->feature_key, sizeof s->feature_key, "%s", cfg->feature_key);
  snprintf(s->label_key, sizeof s->label_key, "%s", cfg->label_key);
  snprintf(s->follow, sizeof s->follow, "%s", cfg->train_follow);
  s->skip_bad = cfg->data_on_error == TFX_ON_ERROR_SKIP;
  int rc = list_files(s, cfg, err);
  if (!rc && !s->follow[0] && !(s->order = malloc(s->images.n * sizeof *s->order))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (!rc && !s->follow[0]) { /* read at tfx_stream_check_labels or the first take; a followed directory: the take */
    shuffle_files(s);
  }
  if (rc) {
    tfx_stream_close(s);
    return rc;
  }
  *out = s;
  return TFX_OK;
}

uint64_t tfx_stream_bad_records(const tfx_stream *s) {
  return atomic_load(&s->bad);
}

int tfx_stream_check_labels(tfx_stream *s, int classes, int multi_label, tfx_err *err) {
  s->classes = classes;
  s->multi_label = multi_label;
  /* The first window is read now, with the check (it used to be read at open, before it, and went unchecked), so
   * that a bad first file still fails at the start. */
  return s->follow[0] || s->cur.d ? TFX_OK : refill(s, err);
}

void tfx_stream_set_idle(tfx_stream *s, tfx_idle_fn idle, void *ctx) {
  s->idle = idle;
  s->idle_ctx = ctx;
}

int64_t tfx_stream_epoch(const tfx_stream *s) {
  return s->epoch;
}

size_t tfx_stream_files(const tfx_stream *s) {
  return s->images.n;
}

void tfx_stream_close(tfx_stream *s) {
  if (!s) {
    return;
  }
  data__prefetch_stop(s->pf); /* first: the reader thread uses everything below */
  close_reader(s);
  list_free(&s->images);
  list_free(&s->labels);
  data__window_free(&s->cur);
  free(s->order);
  free(s->columns);
  data__follow_names_fini(&s->names);
  free(s);
}
