/* Lazy tables read in place from a checkpoint's row files (rowindex.h). */
#include "store/rowindex.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/ckpt.h"
#include "store/rowfile.h"

#if __BYTE_ORDER != __LITTLE_ENDIAN
#error "row files are little-endian and read as in memory: this host is big-endian"
#endif

#define HEADER_BYTES 24 /* "TFXROWS1", u32 version, u32 tables, i64 step; a delta: + i64 parent step */
#define MAX_CHAIN 100000
#define TRAILER_BYTES 12
#define MAX_ROW_FLOATS (1 << 20)
#define ROWS_HALF 0x100u /* the format word's bit for rows of IEEE halves (rowfile.h) */

typedef struct row_ref {
  int64_t id;
  const unsigned char *at; /* the row's floats in a mapping (unaligned: copied out with memcpy); NULL: deleted */
} row_ref;

typedef struct table {
  char var[160];
  int64_t ids;
  int row_floats;
  int half; /* its rows are IEEE halves (checkpoint.fp16): every file of every chain the same, or refused */
  row_ref *rows;
  size_t n, cap;
} table;

typedef struct mapping {
  void *base;
  size_t len;
} mapping;

struct tfx_rowindex {
  mapping *maps;
  int n_maps, cap_maps;
  table *tables;
  int n_tables;
  size_t rows;
};

/* The variable a shard key belongs to: "emb/embeddings/mod_1" -> "emb/embeddings" (as weights.c reads them). */
static void var_of(const char *key, size_t len, char *out, size_t n) {
  snprintf(out, n, "%.*s", (int)len, key);
  char *mod = strstr(out, "/mod_") ? strstr(out, "/mod_") : strstr(out, "/range_");
  if (mod) {
    *mod = '\0';
  }
}

static table *table_for(tfx_rowindex *x, const char *var, int64_t ids, int row_floats, int half) {
  for (int i = 0; i < x->n_tables; i++) {
    if (!strcmp(x->tables[i].var, var)) {
      const table *t = &x->tables[i];
      return t->ids == ids && t->row_floats == row_floats && t->half == half ? &x->tables[i] : NULL;
    }
  }
  table *t = realloc(x->tables, sizeof *t * (size_t)(x->n_tables + 1));
  if (!t) {
    return NULL;
  }
  x->tables = t;
  t = &t[x->n_tables++];
  memset(t, 0, sizeof *t);
  snprintf(t->var, sizeof t->var, "%s", var);
  t->ids = ids;
  t->row_floats = row_floats;
  t->half = half;
  return t;
}

static int add_row(table *t, int64_t id, const unsigned char *at) {
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    row_ref *r = realloc(t->rows, sizeof *r * cap);
    if (!r) {
      return TFX_ENOMEM;
    }
    t->rows = r;
    t->cap = cap;
  }
  t->rows[t->n++] = (row_ref){id, at};
  return TFX_OK;
}

/* A delta's deleted ids of a table (at *off, moved past them), each added as a row with no values. */
static int index_deleted(table *t, const char *path, const unsigned char *p, size_t end, size_t *off, tfx_err *err) {
  uint64_t n;
  size_t o = *off;
  if (o + 8 > end || (memcpy(&n, p + o, 8), n > (end - o - 8) / 8)) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: deletions past the end", path, t->var);
  }
  o += 8;
  for (uint64_t k = 0; k < n; k++, o += 8) {
    int64_t id;
    memcpy(&id, p + o, 8);
    if (id < 0 || id >= t->ids) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: deleted id %lld outside [0, %lld)", path, t->var,
                         (long long)id, (long long)t->ids);
    }
    if (add_row(t, id, NULL)) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  *off = o;
  return TFX_OK;
}

/* By id; for one id a deletion before a row (a delta that deletes an id and makes it again keeps the row). */
static int cmp_ref(const void *a, const void *b) {
  const row_ref *r = a, *q = b;
  if (r->id != q->id) {
    return (r->id > q->id) - (r->id < q->id);
  }
  return (r->at != NULL) - (q->at != NULL);
}

/* Folds the rows one file added (t->rows[from..n)) into the sorted rows before them: a newer row replaces an
 * older one of its id, a deletion removes it. The rows stay sorted by id with no deletion left. */
static int merge_rows(table *t, size_t from) {
  size_t n_new = t->n - from, a = 0, b = from, k = 0;
  if (n_new > 1) { /* (a table of no rows may have no array yet) */
    qsort(t->rows + from, n_new, sizeof(row_ref), cmp_ref);
  }
  size_t alloc = t->n ? t->n : 1;
  row_ref *out = malloc(sizeof *out * alloc);
  if (!out) {
    return TFX_ENOMEM;
  }
  while (a < from || b < t->n) {
    if (b < t->n && (a == from || t->rows[b].id <= t->rows[a].id)) {
      int64_t id = t->rows[b].id;
      while (b + 1 < t->n && t->rows[b + 1].id == id) {
        b++; /* the last entry of an id in this file stands */
      }
      a += a < from && t->rows[a].id == id; /* replaced or deleted */
      if (t->rows[b].at) {
        out[k++] = t->rows[b];
      }
      b++;
    } else {
      out[k++] = t->rows[a++];
    }
  }
  free(t->rows);
  t->rows = out;
  t->n = k;
  t->cap = alloc;
  return TFX_OK;
}

/* Indexes one table of a mapped file, starting at *off (moved past it). */
static int index_table(tfx_rowindex *x, const char *path, const unsigned char *p, size_t end, size_t *off,
                       int delta, int half, tfx_err *err) {
  uint16_t len;
  int64_t ids;
  uint32_t rf;
  uint64_t n;
  size_t o = *off;
  if (o + 2 > end || (memcpy(&len, p + o, 2), len >= 160) || o + 2 + len + 20 > end) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: offset %zu: a table header past the end", path, o);
  }
  char var[160];
  var_of((const char *)p + o + 2, len, var, sizeof var);
  o += 2 + len;
  memcpy(&ids, p + o, 8);
  memcpy(&rf, p + o + 8, 4);
  o += 12;
  table *t = rf >= 1 && rf <= MAX_ROW_FLOATS && ids >= 0 ? table_for(x, var, ids, (int)rf, half) : NULL;
  if (!t) {
    return tfx_err_set(err, TFX_ECORRUPT,
                       "%s: table %s: another shape or precision than its other partitions or links (or no memory)",
                       path, var);
  }
  size_t before = t->n;
  int rc = delta ? index_deleted(t, path, p, end, &o, err) : TFX_OK;
  if (rc || o + 8 > end) {
    return rc ? rc : tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: no row count", path, var);
  }
  memcpy(&n, p + o, 8);
  o += 8;
  size_t row_bytes = 8 + (half ? 2 : 4) * (size_t)rf;
  if (n > (uint64_t)ids || n > (end - o) / row_bytes) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: %llu rows of %u floats do not fit", path, var,
                       (unsigned long long)n, rf);
  }
  for (uint64_t r = 0; r < n; r++, o += row_bytes) {
    int64_t id;
    memcpy(&id, p + o, 8);
    if (id < 0 || id >= ids) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: id %lld outside [0, %lld)", path, var, (long long)id,
                         (long long)ids);
    }
    if (add_row(t, id, p + o + 8)) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  *off = o;
  return merge_rows(t, before) ? tfx_err_set(err, TFX_ENOMEM, "out of memory") : TFX_OK;
}

/* Maps path read-only (x keeps the mapping until close): *out and *out_len, at least a header and trailer long. */
static int map_file(tfx_rowindex *x, const char *path, const unsigned char **out, size_t *out_len, tfx_err *err) {
  if (x->n_maps == x->cap_maps) {
    int cap = x->cap_maps ? 2 * x->cap_maps : 4;
    mapping *m = realloc(x->maps, sizeof *m * (size_t)cap);
    if (!m) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
    x->maps = m;
    x->cap_maps = cap;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    int rc = tfx_err_sys(err, TFX_ESYS, "open %s", path);
    if (fd >= 0) {
      close(fd);
    }
    return rc;
  }
  size_t len = (size_t)st.st_size;
  void *base = len >= HEADER_BYTES + TRAILER_BYTES ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (base == MAP_FAILED) {
    return len < HEADER_BYTES + TRAILER_BYTES ? tfx_err_set(err, TFX_ECORRUPT, "%s: %zu bytes, no header", path, len)
                                              : tfx_err_sys(err, TFX_ESYS, "mmap %s", path);
  }
  x->maps[x->n_maps++] = (mapping){base, len};
  *out = base;
  *out_len = len;
  return TFX_OK;
}

/* Maps path and indexes its tables: a full file's rows, or a delta's changes over the rows indexed before it. */
static int index_file(tfx_rowindex *x, const char *path, tfx_err *err) {
  const unsigned char *p = NULL;
  size_t len = 0;
  int rc = map_file(x, path, &p, &len, err);
  if (rc) {
    return rc;
  }
  uint32_t version, tables;
  memcpy(&version, p + 8, 4);
  memcpy(&tables, p + 12, 4);
  int half = (version & ROWS_HALF) != 0;
  version &= ~ROWS_HALF;
  if (memcmp(p, "TFXROWS1", 8) || (version != 1 && version != 2)) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: not a row file (bad magic or format %u)", path, version);
  }
  size_t off = HEADER_BYTES + (version == 2 ? 8 : 0), end = len - TRAILER_BYTES;
  if (off > end) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: %zu bytes, no header", path, len);
  }
  for (uint32_t i = 0; !rc && i < tables; i++) {
    rc = index_table(x, path, p, end, &off, version == 2, half, err);
  }
  return rc || off == end ? rc : tfx_err_set(err, TFX_ECORRUPT, "%s: %zu bytes after the last table", path, end - off);
}

/* Indexes ps k's row file of checkpoint dir after the files of the checkpoints it is a delta of, depth links
 * deep (a chain of checkpoint.incremental deltas, base first); a link must be the file of the step its child named
 * (expect), so that the steps fall along the chain and it ends (read_link in ckptchain.c says why). */
static int index_chain(tfx_rowindex *x, const char *dir, int k, int depth, int64_t expect, tfx_err *err) {
  char path[1200], parent_dir[1200];
  int64_t step = 0, parent = -1;
  tfx_ckpt_part_path(path, sizeof path, dir, k, TFX_CKPT_ROWS);
  if (access(path, F_OK)) {
    return depth ? tfx_err_set(err, TFX_ECORRUPT, "%s: a link of an incremental chain is gone", path) : TFX_OK;
  }
  int rc = tfx_rowfile_parent(path, &step, &parent, err);
  if (!rc && depth && step != expect) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: a link of a chain of deltas at step %lld, where its child names step %lld",
                     path, (long long)step, (long long)expect);
  }
  if (!rc && parent >= 0) {
    if (depth > MAX_CHAIN) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: a chain of deltas without a full checkpoint", path);
    }
    tfx_ckpt_sibling(dir, parent, parent_dir, sizeof parent_dir);
    rc = index_chain(x, parent_dir, k, depth + 1, parent, err);
  }
  return rc ? rc : index_file(x, path, err);
}

int tfx_rowindex_open(const char *dir, int n_ps, tfx_rowindex **out, tfx_err *err) {
  tfx_rowindex *x = calloc(1, sizeof *x);
  if (!x) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int rc = TFX_OK;
  for (int k = 0; !rc && k < n_ps; k++) {
    rc = index_chain(x, dir, k, 0, -1, err);
  }
  for (int i = 0; !rc && i < x->n_tables; i++) {
    x->rows += x->tables[i].n;
  }
  if (rc) {
    tfx_rowindex_close(x);
    return rc;
  }
  *out = x;
  return TFX_OK;
}

int tfx_rowindex_get(const tfx_rowindex *x, const char *var, int64_t id, int width, float *out) {
  for (int i = 0; i < x->n_tables; i++) {
    const table *t = &x->tables[i];
    if (strcmp(t->var, var) || width > t->row_floats) {
      continue;
    }
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (t->rows[mid].id < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo < t->n && t->rows[lo].id == id) {
      for (int k = 0; t->half && k < width; k++) { /* unaligned halves, widened one by one */
        uint16_t h;
        memcpy(&h, t->rows[lo].at + 2 * (size_t)k, 2);
        tfx_rowfile_from_half(&h, &out[k], 1);
      }
      if (!t->half) {
        memcpy(out, t->rows[lo].at, sizeof(float) * (size_t)width);
      }
      return 1;
    }
    return 0;
  }
  return 0;
}

size_t tfx_rowindex_rows(const tfx_rowindex *x) {
  return x->rows;
}

size_t tfx_rowindex_bytes(const tfx_rowindex *x) {
  size_t b = sizeof *x + sizeof(table) * (size_t)x->n_tables;
  for (int i = 0; i < x->n_tables; i++) {
    b += sizeof(row_ref) * x->tables[i].cap;
  }
  return b;
}

void tfx_rowindex_close(tfx_rowindex *x) {
  if (!x) {
    return;
  }
  for (int i = 0; i < x->n_maps; i++) {
    munmap(x->maps[i].base, x->maps[i].len);
  }
  for (int i = 0; i < x->n_tables; i++) {
    free(x->tables[i].rows);
  }
  free(x->tables);
  free(x->maps);
  free(x);
}
