/* Row files of lazy tables (rowfile.h). */
#include "store/rowfile.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fs.h"

#if __BYTE_ORDER != __LITTLE_ENDIAN
#error "row files are little-endian and written as in memory: this host is big-endian"
#endif

#define ROWS_MAGIC "TFXROWS1"
#define ROWS_END "TFXEND\0\0"
#define MAX_ROW_FLOATS (1 << 20)
#define ROWS_HALF 0x100u /* the format word's bit for rows stored as IEEE half (TFX_ROWFILE_FP16) */

struct tfx_rowfile {
  FILE *f;
  char path[1100], tmp[1110];
  uint32_t crc;
  uint64_t bytes;
  int row_floats, failed, version;
  uint16_t *half; /* TFX_ROWFILE_FP16: a row as halves, [MAX_ROW_FLOATS] once the first table starts */
};

void tfx_rowfile_to_half(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t x;
    memcpy(&x, &in[i], 4);
    uint32_t sign = (x >> 16) & 0x8000, mag = x & 0x7fffffff;
    if (mag > 0x7f800000) { /* NaN stays a (quiet) NaN */
      out[i] = (uint16_t)(sign | 0x7e00);
    } else if (mag >= 0x477ff000) { /* rounds to 65520 or more: saturates at the largest half, 65504 */
      out[i] = (uint16_t)(sign | 0x7bff);
    } else if (mag >= 0x38800000) { /* normal: rebias the exponent, round the mantissa to nearest even */
      uint32_t h = (mag - 0x38000000) >> 13, rest = mag & 0x1fff;
      h += rest > 0x1000 || (rest == 0x1000 && (h & 1));
      out[i] = (uint16_t)(sign | h);
    } else { /* subnormal or zero: the value in units of 2^-24, rounded to nearest even */
      float a;
      memcpy(&a, &mag, 4);
      float q = a * 16777216.0f; /* exact: a power of two */
      uint32_t h = (uint32_t)q;
      float frac = q - (float)h;
      h += frac > 0.5f || (frac == 0.5f && (h & 1));
      out[i] = (uint16_t)(sign | h);
    }
  }
}

void tfx_rowfile_from_half(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t sign = (uint32_t)(in[i] & 0x8000) << 16, e = (in[i] >> 10) & 0x1f, m = in[i] & 0x3ff, x;
    if (e == 0x1f) {
      x = sign | 0x7f800000 | (m << 13);
    } else if (e) {
      x = sign | ((e + 112) << 23) | (m << 13);
    } else {
      float v = (float)m / 16777216.0f; /* subnormal (or zero): m x 2^-24, exact */
      memcpy(&x, &v, 4);
      x |= sign;
    }
    memcpy(&out[i], &x, 4);
  }
}

/* Writes n bytes and folds them into the running checksum. */
static int put(tfx_rowfile *w, const void *p, size_t n, tfx_err *err) {
  if (w->failed || fwrite(p, 1, n, w->f) != n) {
    w->failed = 1;
    return tfx_err_sys(err, TFX_ESYS, "write %s", w->tmp);
  }
  w->crc = (uint32_t)crc32(w->crc, p, (uInt)n);
  w->bytes += n;
  return TFX_OK;
}

int tfx_rowfile_create(const char *path, int64_t step, int n_tables, tfx_rowfile **out, tfx_err *err) {
  return tfx_rowfile_create_delta(path, step, -1, n_tables, out, err);
}

int tfx_rowfile_create_delta(const char *path, int64_t step, int64_t parent, int n_tables, tfx_rowfile **out,
                             tfx_err *err) {
  return tfx_rowfile_create_as(path, step, parent, n_tables, 0, out, err);
}

int tfx_rowfile_create_as(const char *path, int64_t step, int64_t parent, int n_tables, unsigned flags,
                          tfx_rowfile **out, tfx_err *err) {
  if (parent >= step) {
    return tfx_err_set(err, TFX_EINVAL, "row file %s: a delta at step %lld cannot follow step %lld", path,
                       (long long)step, (long long)parent);
  }
  tfx_rowfile *w = calloc(1, sizeof *w);
  if (!w) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  snprintf(w->path, sizeof w->path, "%s", path);
  snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
  if (!(w->f = tfx_fopen_write(w->tmp, "wb"))) {
    int rc = tfx_err_sys(err, TFX_ESYS, "open %s", w->tmp);
    free(w);
    return rc;
  }
  uint32_t version = parent < 0 ? 1 : 2, tables = (uint32_t)n_tables;
  uint32_t format = version | (flags & TFX_ROWFILE_FP16 ? ROWS_HALF : 0);
  w->version = (int)version;
  if ((flags & TFX_ROWFILE_FP16) && !(w->half = malloc(2 * (size_t)MAX_ROW_FLOATS))) {
    tfx_rowfile_abort(w);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int rc = put(w, ROWS_MAGIC, 8, err);
  rc = rc ? rc : put(w, &format, 4, err);
  rc = rc ? rc : put(w, &tables, 4, err);
  rc = rc ? rc : put(w, &step, 8, err);
  rc = rc || version == 1 ? rc : put(w, &parent, 8, err);
  if (rc) {
    tfx_rowfile_abort(w);
    return rc;
  }
  *out = w;
  return TFX_OK;
}

int tfx_rowfile_table(tfx_rowfile *w, const char *name, int64_t ids, int row_floats, uint64_t n_rows, tfx_err *err) {
  const int64_t none = 0;
  return tfx_rowfile_table_delta(w, name, ids, row_floats, &none, 0, n_rows, err);
}

int tfx_rowfile_table_delta(tfx_rowfile *w, const char *name, int64_t ids, int row_floats, const int64_t *deleted,
                            uint64_t n_deleted, uint64_t n_rows, tfx_err *err) {
  uint16_t len = (uint16_t)strlen(name);
  uint32_t rf = (uint32_t)row_floats;
  if (len >= 160 || row_floats < 1 || row_floats > MAX_ROW_FLOATS) {
    return tfx_err_set(err, TFX_EINVAL, "row file %s: table '%.64s' (name or row size out of range)", w->path, name);
  }
  w->row_floats = row_floats;
  int rc = put(w, &len, 2, err);
  rc = rc ? rc : put(w, name, len, err);
  rc = rc ? rc : put(w, &ids, 8, err);
  rc = rc ? rc : put(w, &rf, 4, err);
  if (w->version == 1 && n_deleted) {
    return tfx_err_set(err, TFX_EINVAL, "row file %s: a full file records no deletion", w->path);
  }
  if (w->version == 2) {
    rc = rc ? rc : put(w, &n_deleted, 8, err);
    rc = rc || !n_deleted ? rc : put(w, deleted, 8 * (size_t)n_deleted, err);
  }
  return rc ? rc : put(w, &n_rows, 8, err);
}

int tfx_rowfile_row(tfx_rowfile *w, int64_t id, const float *row, tfx_err *err) {
  int rc = put(w, &id, 8, err);
  if (w->half) {
    tfx_rowfile_to_half(row, w->half, (size_t)w->row_floats);
    return rc ? rc : put(w, w->half, 2 * (size_t)w->row_floats, err);
  }
  return rc ? rc : put(w, row, sizeof(float) * (size_t)w->row_floats, err);
}

int tfx_rowfile_finish(tfx_rowfile *w, uint32_t *crc, uint64_t *bytes, tfx_err *err) {
  uint32_t body = w->crc;
  int rc = put(w, ROWS_END, 8, err);
  rc = rc ? rc : put(w, &body, 4, err);
  if (!rc && (fflush(w->f) || fsync(fileno(w->f)))) {
    rc = tfx_err_sys(err, TFX_ESYS, "sync %s", w->tmp);
  }
  int closed = fclose(w->f);
  w->f = NULL;
  if (!rc && (closed || rename(w->tmp, w->path))) {
    rc = tfx_err_sys(err, TFX_ESYS, "write %s", w->path);
  }
  if (rc) {
    unlink(w->tmp);
  } else {
    *crc = w->crc;
    *bytes = w->bytes;
  }
  free(w->half);
  free(w);
  return rc;
}

void tfx_rowfile_abort(tfx_rowfile *w) {
  if (!w) {
    return;
  }
  if (w->f) {
    fclose(w->f);
  }
  unlink(w->tmp);
  free(w->half);
  free(w);
}

/* A reader: the file, its size, the offset and the running checksum of what was read. */
typedef struct reader {
  FILE *f;
  const char *path;
  uint64_t size, at;
  uint32_t crc;
  uint32_t version; /* 1: full; 2: a delta (deletions before each table's rows) */
  int fp16;         /* the format word's ROWS_HALF bit */
  uint16_t *half;   /* rows stored as IEEE half (the format's ROWS_HALF bit): a row read, before widening */
} reader;

/* Reads n bytes (folded into the checksum); TFX_ECORRUPT naming the offset when the file ends first. */
static int get(reader *r, void *p, size_t n, const char *what, tfx_err *err) {
  if (r->at + n > r->size || fread(p, 1, n, r->f) != n) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: truncated at offset %llu (reading %s)", r->path,
                       (unsigned long long)r->at, what);
  }
  r->crc = (uint32_t)crc32(r->crc, p, (uInt)n);
  r->at += n;
  return TFX_OK;
}

/* A delta's deleted ids of a table, each given to fn with no row. */
static int read_deleted(reader *r, const char *name, int64_t ids, uint32_t rf, tfx_rowfile_fn fn, void *ctx,
                        tfx_err *err) {
  uint64_t n = 0;
  int rc = get(r, &n, 8, "the table's deletion count", err);
  if (!rc && n > (r->size - r->at) / 8) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: table '%s': %llu deletions do not fit the file", r->path, name,
                     (unsigned long long)n);
  }
  for (uint64_t k = 0; k < n && !rc; k++) {
    int64_t id = 0;
    rc = get(r, &id, 8, "a deleted id", err);
    if (!rc && (id < 0 || id >= ids)) {
      rc = tfx_err_set(err, TFX_ECORRUPT, "%s: table '%s': deleted id %lld outside [0, %lld)", r->path, name,
                       (long long)id, (long long)ids);
    }
    rc = rc ? rc : fn(name, ids, (int)rf, id, NULL, ctx);
  }
  return rc;
}

/* Reads one table's header and rows, calling fn for each row. */
static int read_table(reader *r, float *row, tfx_rowfile_fn fn, void *ctx, tfx_err *err) {
  uint16_t len = 0;
  char name[160];
  int64_t ids = 0;
  uint32_t rf = 0;
  uint64_t n = 0;
  int rc = get(r, &len, 2, "a table name length", err);
  if (!rc && len >= sizeof name) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: table name of %u bytes at offset %llu", r->path, len,
                     (unsigned long long)r->at);
  }
  rc = rc ? rc : get(r, name, len, "a table name", err);
  rc = rc ? rc : get(r, &ids, 8, "the table's ids", err);
  rc = rc ? rc : get(r, &rf, 4, "the table's row size", err);
  if (!rc) {
    name[len] = '\0';
  }
  if (!rc && r->version == 2) {
    rc = rf < 1 || rf > MAX_ROW_FLOATS || ids < 1
             ? tfx_err_set(err, TFX_ECORRUPT, "%s: table '%s' of %lld ids x %u floats", r->path, name, (long long)ids,
                           rf)
             : read_deleted(r, name, ids, rf, fn, ctx, err);
  }
  rc = rc ? rc : get(r, &n, 8, "the table's row count", err);
  if (rc) {
    return rc;
  }
  uint64_t row_bytes = 8 + (r->fp16 ? 2 : 4) * (uint64_t)rf;
  if (rf < 1 || rf > MAX_ROW_FLOATS || ids < 1 || n > (uint64_t)ids || n > (r->size - r->at) / row_bytes) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: table '%s': %llu rows of %u floats of %lld ids do not fit the file",
                       r->path, name, (unsigned long long)n, rf, (long long)ids);
  }
  for (uint64_t k = 0; k < n && !rc; k++) {
    int64_t id = 0;
    rc = get(r, &id, 8, "a row id", err);
    if (r->fp16) {
      rc = rc ? rc : get(r, r->half, 2 * (size_t)rf, "a row", err);
      tfx_rowfile_from_half(r->half, row, rc ? 0 : rf);
    } else {
      rc = rc ? rc : get(r, row, 4 * (size_t)rf, "a row", err);
    }
    if (!rc && (id < 0 || id >= ids)) {
      rc = tfx_err_set(err, TFX_ECORRUPT, "%s: table '%s': id %lld outside [0, %lld)", r->path, name, (long long)id,
                       (long long)ids);
    }
    rc = rc ? rc : fn(name, ids, (int)rf, id, row, ctx);
  }
  return rc;
}

/* Reads the trailer and checks the checksum and that nothing follows. */
static int read_trailer(reader *r, tfx_err *err) {
  uint32_t body = r->crc, stored = 0;
  char end[8] = {0};
  int rc = get(r, end, 8, "the trailer", err);
  rc = rc ? rc : get(r, &stored, 4, "the checksum", err);
  if (!rc && (memcmp(end, ROWS_END, 8) || stored != body)) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: trailer or checksum mismatch", r->path);
  }
  if (!rc && r->at != r->size) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: %llu bytes after the trailer", r->path,
                     (unsigned long long)(r->size - r->at));
  }
  return rc;
}

/* Opens path and reads its header: version, table count, step and (a delta) parent. */
static int read_header(reader *r, uint32_t *tables, int64_t *step, int64_t *parent, tfx_err *err) {
  if (!r->f) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "open %s", r->path);
  }
  fseek(r->f, 0, SEEK_END);
  r->size = (uint64_t)ftell(r->f);
  fseek(r->f, 0, SEEK_SET);
  char magic[8] = {0};
  int rc = get(r, magic, 8, "the header", err);
  rc = rc ? rc : get(r, &r->version, 4, "the version", err);
  rc = rc ? rc : get(r, tables, 4, "the table count", err);
  rc = rc ? rc : get(r, step, 8, "the step", err);
  r->fp16 = !rc && (r->version & ROWS_HALF);
  r->version &= ~ROWS_HALF;
  if (!rc && (memcmp(magic, ROWS_MAGIC, 8) || (r->version != 1 && r->version != 2))) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: not a row file of format 1 or 2", r->path);
  }
  *parent = -1;
  rc = rc || r->version == 1 ? rc : get(r, parent, 8, "the parent step", err);
  if (!rc && *parent >= *step) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: a delta at step %lld after step %lld", r->path, (long long)*step,
                     (long long)*parent);
  }
  return rc;
}

int tfx_rowfile_parent(const char *path, int64_t *step, int64_t *parent, tfx_err *err) {
  reader r = {fopen(path, "rb"), path, 0, 0, 0, 0};
  uint32_t tables = 0;
  int rc = read_header(&r, &tables, step, parent, err);
  if (r.f) {
    fclose(r.f);
  }
  return rc;
}

int tfx_rowfile_is_fp16(const char *path) {
  reader r = {fopen(path, "rb"), path, 0, 0, 0, 0};
  uint32_t tables = 0;
  int64_t step, parent;
  int rc = read_header(&r, &tables, &step, &parent, NULL);
  if (r.f) {
    fclose(r.f);
  }
  return rc ? -1 : r.fp16;
}

int tfx_rowfile_read(const char *path, tfx_rowfile_fn fn, void *ctx, int64_t *step, tfx_err *err) {
  reader r = {fopen(path, "rb"), path, 0, 0, 0, 0};
  uint32_t tables = 0;
  int64_t parent = -1;
  int rc = read_header(&r, &tables, step, &parent, err);
  float *row = rc ? NULL : malloc(4 * (size_t)MAX_ROW_FLOATS);
  r.half = rc || !r.fp16 ? NULL : malloc(2 * (size_t)MAX_ROW_FLOATS);
  if (!rc && (!row || (r.fp16 && !r.half))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (uint32_t t = 0; t < tables && !rc; t++) {
    rc = read_table(&r, row, fn, ctx, err);
  }
  rc = rc ? rc : read_trailer(&r, err);
  free(row);
  free(r.half);
  if (r.f) {
    fclose(r.f);
  }
  return rc;
}
