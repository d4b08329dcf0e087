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

#if __BYTE_ORDER != __LITTLE_ENDIAN
#error "row files are little-endian and read as in memory: this host is big-endian"
#endif

#define HEADER_BYTES 24 /* "TFXROWS1", u32 version, u32 tables, i64 step */
#define TRAILER_BYTES 12
#define MAX_ROW_FLOATS (1 << 20)

typedef struct row_ref {
  int64_t id;
  const unsigned char *at; /* the row's floats in a mapping (unaligned: copied out with memcpy) */
} row_ref;

typedef struct table {
  char var[160];
  int64_t ids;
  int row_floats;
  row_ref *rows;
  size_t n, cap;
} table;

typedef struct mapping {
  void *base;
  size_t len;
} mapping;

struct tfx_rowindex {
  mapping *maps;
  int n_maps;
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

static table *table_for(tfx_rowindex *x, const char *var, int64_t ids, int row_floats) {
  for (int i = 0; i < x->n_tables; i++) {
    if (!strcmp(x->tables[i].var, var)) {
      return x->tables[i].ids == ids && x->tables[i].row_floats == row_floats ? &x->tables[i] : NULL;
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

/* Indexes one table of a mapped file, starting at *off (moved past it). */
static int index_table(tfx_rowindex *x, const char *path, const unsigned char *p, size_t end, size_t *off,
                       tfx_err *err) {
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
  memcpy(&n, p + o + 12, 8);
  o += 20;
  size_t row_bytes = 8 + 4 * (size_t)rf;
  if (rf < 1 || rf > MAX_ROW_FLOATS || ids < 0 || n > (uint64_t)ids || n > (end - o) / row_bytes) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: %llu rows of %u floats do not fit", path, var,
                       (unsigned long long)n, rf);
  }
  table *t = table_for(x, var, ids, (int)rf);
  if (!t) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: table %s: another shape than its other partitions (or no memory)",
                       path, var);
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
  x->rows += n;
  *off = o;
  return TFX_OK;
}

/* Maps path and indexes its tables. */
static int index_file(tfx_rowindex *x, const char *path, tfx_err *err) {
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
  const unsigned char *p = base;
  uint32_t tables;
  memcpy(&tables, p + 12, 4);
  if (memcmp(p, "TFXROWS1", 8)) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: not a row file (bad magic)", path);
  }
  uint32_t version;
  memcpy(&version, p + 8, 4);
  if (version != 1) { /* format 2: a delta (checkpoint.incremental), whose rows need its chain read first */
    return tfx_err_set(err, TFX_EINVAL,
                       "%s: a delta of an incremental checkpoint (row file format %u), not read in place; export the "
                       "run (export reads the chain) and serve or predict from the export",
                       path, version);
  }
  size_t off = HEADER_BYTES, end = len - TRAILER_BYTES;
  int rc = TFX_OK;
  for (uint32_t i = 0; !rc && i < tables; i++) {
    rc = index_table(x, path, p, end, &off, err);
  }
  return rc || off == end ? rc : tfx_err_set(err, TFX_ECORRUPT, "%s: %zu bytes after the last table", path, end - off);
}

static int cmp_ref(const void *a, const void *b) {
  int64_t x = ((const row_ref *)a)->id, y = ((const row_ref *)b)->id;
  return (x > y) - (x < y);
}

int tfx_rowindex_open(const char *dir, int n_ps, tfx_rowindex **out, tfx_err *err) {
  tfx_rowindex *x = calloc(1, sizeof *x);
  if (!x || !(x->maps = calloc((size_t)(n_ps > 0 ? n_ps : 1), sizeof *x->maps))) {
    free(x);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int rc = TFX_OK;
  for (int k = 0; !rc && k < n_ps; k++) {
    char path[1200];
    tfx_ckpt_part_path(path, sizeof path, dir, k, TFX_CKPT_ROWS);
    rc = access(path, F_OK) ? TFX_OK : index_file(x, path, err);
  }
  for (int i = 0; !rc && i < x->n_tables; i++) {
    qsort(x->tables[i].rows, x->tables[i].n, sizeof(row_ref), cmp_ref);
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
      memcpy(out, t->rows[lo].at, sizeof(float) * (size_t)width);
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
