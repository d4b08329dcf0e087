/* IDX files (the MNIST family), plain or gzip through zlib: whole, in chunks, or one worker's shard as bytes. */
#include "data/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data_impl.h"

/* Reads n bytes; after is how many more the caller wants past these (for the error message only). */
static int read_exact(gzFile f, void *buf, size_t n, size_t after, const char *path, size_t off, tfx_err *err) {
  size_t got = 0;
  while (got < n) {
    unsigned chunk = n - got > (1u << 30) ? 1u << 30 : (unsigned)(n - got);
    int r = gzread(f, (char *)buf + got, chunk);
    if (r <= 0) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: truncated at offset %zu (want %zu more bytes)", path, off + got,
                         n - got + after);
    }
    got += (size_t)r;
  }
  return TFX_OK;
}

static int read_header(gzFile f, const char *path, int *rank, int64_t dims[4], size_t *count, tfx_err *err) {
  uint8_t magic[4], raw[16];
  int rc = read_exact(f, magic, 4, 0, path, 0, err);
  if (rc) {
    return rc;
  }
  if (magic[0] || magic[1] || magic[2] != 0x08) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: offset 0: bad IDX magic %02x%02x%02x%02x (want unsigned byte data)",
                       path, magic[0], magic[1], magic[2], magic[3]);
  }
  if (magic[3] < 1 || magic[3] > 4) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: offset 3: rank %d", path, magic[3]);
  }
  *rank = magic[3];
  if ((rc = read_exact(f, raw, 4 * (size_t)*rank, 0, path, 4, err))) {
    return rc;
  }
  *count = 1;
  for (int i = 0; i < *rank; i++) {
    dims[i] = (int64_t)raw[4 * i] << 24 | raw[4 * i + 1] << 16 | raw[4 * i + 2] << 8 | raw[4 * i + 3];
    if (dims[i] <= 0 || dims[i] > (1 << 28)) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: offset %d: dim %lld", path, 4 + 4 * i, (long long)dims[i]);
    }
    if (*count > ((size_t)1 << 34) / (size_t)dims[i]) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: offset %d: the dims hold too many elements (too large)", path,
                         4 + 4 * i);
    }
    *count *= (size_t)dims[i];
  }
  return TFX_OK;
}

/* Reads past the data so that zlib reaches the end of a gzip stream and checks its CRC32 and length. */
static int check_end(gzFile f, const char *path, size_t off, tfx_err *err) {
  char extra;
  int errnum = Z_OK;
  gzread(f, &extra, 1);
  const char *msg = gzerror(f, &errnum);
  if (errnum != Z_OK) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: offset %zu: %s", path, off, msg);
  }
  return TFX_OK;
}

/* Reads count bytes into a new buffer that grows as the data arrives: a header that claims more than the file
 * holds costs no more memory than the file (fuzz_idx: a 16-byte file claimed 16 GiB). Caller owns *out. */
static int read_data(gzFile f, size_t count, const char *path, size_t off, uint8_t **out, tfx_err *err) {
  size_t got = 0, cap = 0;
  uint8_t *buf = NULL;
  while (got < count) {
    size_t want = cap ? cap * 2 : (size_t)1 << 20;
    cap = want < count ? want : count;
    uint8_t *grown = realloc(buf, cap);
    if (!grown) {
      free(buf);
      return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory for %zu bytes", path, cap);
    }
    buf = grown;
    int rc = read_exact(f, buf + got, cap - got, count - cap, path, off + got, err);
    if (rc) {
      free(buf);
      return rc;
    }
    got = cap;
  }
  *out = buf ? buf : malloc(1);
  return *out ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
}

int tfx_idx_read(const char *path, uint8_t **data, int *rank, int64_t dims[4], tfx_err *err) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "open %s", path);
  }
  size_t count = 0;
  int rc = read_header(f, path, rank, dims, &count, err);
  uint8_t *buf = NULL;
  if (!rc) {
    rc = read_data(f, count, path, 4 + 4 * (size_t)*rank, &buf, err);
  }
  if (!rc) {
    rc = check_end(f, path, 4 + 4 * (size_t)*rank + count, err);
  }
  gzclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  *data = buf;
  return TFX_OK;
}

int tfx_dataset_load_idx(const char *images, const char *labels, double scale, size_t expect_dim, tfx_dataset **out,
                         tfx_err *err) {
  uint8_t *img = NULL, *lab = NULL;
  int ri = 0, rl = 0, rc;
  int64_t di[4], dl[4];
  tfx_dataset *d = NULL;
  if ((rc = tfx_idx_read(images, &img, &ri, di, err)) || (rc = tfx_idx_read(labels, &lab, &rl, dl, err))) {
    goto done;
  }
  size_t dim = 1;
  for (int i = 1; i < ri; i++) {
    dim *= (size_t)di[i];
  }
  if (rl != 1 || dl[0] != di[0]) {
    rc = tfx_err_set(err, TFX_ESHAPE, "%s: %lld labels for %lld images in %s", labels, (long long)dl[0],
                     (long long)di[0], images);
    goto done;
  }
  if (expect_dim && dim != expect_dim) {
    rc = tfx_err_set(err, TFX_ESHAPE, "%s: %zu values per example, the model's input takes %zu", images, dim,
                     expect_dim);
    goto done;
  }
  d = calloc(1, sizeof *d);
  if (!d || !(d->x = malloc(sizeof(float) * dim * (size_t)di[0])) ||
      !(d->y = malloc(sizeof(int32_t) * (size_t)di[0]))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    goto done;
  }
  d->n = (size_t)di[0];
  d->dim = dim;
  for (size_t i = 0; i < d->n * dim; i++) {
    d->x[i] = (float)(img[i] * scale);
  }
  for (size_t i = 0; i < d->n; i++) {
    d->y[i] = lab[i];
  }
  *out = d;
  d = NULL;
done:
  tfx_dataset_destroy(d);
  free(img);
  free(lab);
  return rc;
}

struct tfx_idx_reader {
  gzFile img, lab;
  char *images, *labels;
  size_t dim, total, done, img_off, lab_off;
  double scale;
  uint8_t *buf;
  size_t buf_cap;
};

/* Opens both files and checks that their headers agree with each other and with expect_dim. */
static int idx_open_pair(tfx_idx_reader *r, size_t expect_dim, tfx_err *err) {
  int ri, rl, rc;
  int64_t di[4], dl[4];
  size_t ci, cl;
  if (!(r->img = gzopen(r->images, "rb")) || !(r->lab = gzopen(r->labels, "rb"))) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "open %s", r->img ? r->labels : r->images);
  }
  if ((rc = read_header(r->img, r->images, &ri, di, &ci, err)) ||
      (rc = read_header(r->lab, r->labels, &rl, dl, &cl, err))) {
    return rc;
  }
  r->dim = ci / (size_t)di[0];
  r->total = (size_t)di[0];
  r->img_off = 4 + 4 * (size_t)ri;
  r->lab_off = 4 + 4 * (size_t)rl;
  if (rl != 1 || dl[0] != di[0]) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: %lld labels for %lld images in %s", r->labels, (long long)dl[0],
                       (long long)di[0], r->images);
  }
  if (expect_dim && r->dim != expect_dim) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: %zu values per example, the model's input takes %zu", r->images, r->dim,
                       expect_dim);
  }
  return TFX_OK;
}

int tfx_idx_open(const char *images, const char *labels, double scale, size_t expect_dim, tfx_idx_reader **out,
                 tfx_err *err) {
  tfx_idx_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->images = strdup(images)) || !(r->labels = strdup(labels))) {
    tfx_idx_close(r);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", images);
  }
  r->scale = scale;
  int rc = idx_open_pair(r, expect_dim, err);
  if (rc) {
    tfx_idx_close(r);
    return rc;
  }
  *out = r;
  return TFX_OK;
}

/* Reads n examples' pixels and labels into d (already sized). */
static int idx_fill(tfx_idx_reader *r, tfx_dataset *d, size_t n, tfx_err *err) {
  size_t bytes = n * r->dim;
  if (bytes > r->buf_cap) {
    uint8_t *b = realloc(r->buf, bytes);
    if (!b) {
      return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", r->images);
    }
    r->buf = b;
    r->buf_cap = bytes;
  }
  size_t left = r->total - r->done - n; /* examples after this chunk, for the truncation message */
  int rc = read_exact(r->img, r->buf, bytes, left * r->dim, r->images, r->img_off + r->done * r->dim, err);
  for (size_t i = 0; !rc && i < bytes; i++) {
    d->x[i] = (float)(r->buf[i] * r->scale);
  }
  if (!rc && !(rc = read_exact(r->lab, r->buf, n, left, r->labels, r->lab_off + r->done, err))) {
    for (size_t i = 0; i < n; i++) {
      d->y[i] = r->buf[i];
    }
  }
  return rc;
}

int tfx_idx_read_chunk(tfx_idx_reader *r, size_t max, tfx_dataset **out, tfx_err *err) {
  *out = NULL;
  size_t n = r->total - r->done < max ? r->total - r->done : max;
  if (n == 0) {
    return TFX_OK;
  }
  tfx_dataset *d = calloc(1, sizeof *d);
  if (!d || !(d->x = malloc(sizeof(float) * n * r->dim)) || !(d->y = malloc(sizeof(int32_t) * n))) {
    tfx_dataset_destroy(d);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory for %zu examples", r->images, n);
  }
  d->n = n;
  d->dim = r->dim;
  int rc = idx_fill(r, d, n, err);
  if (rc) {
    tfx_dataset_destroy(d);
    return rc;
  }
  r->done += n;
  *out = d;
  return TFX_OK;
}

size_t tfx_idx_count(const tfx_idx_reader *r) {
  return r->total;
}

void tfx_idx_close(tfx_idx_reader *r) {
  if (!r) {
    return;
  }
  if (r->img) {
    gzclose(r->img);
  }
  if (r->lab) {
    gzclose(r->lab);
  }
  free(r->images);
  free(r->labels);
  free(r->buf);
  free(r);
}

/* Keeps records index, index + count, ... of img ([n, dim] bytes) and lab at the front of both, in order. */
static size_t keep_shard(uint8_t *img, uint8_t *lab, size_t n, size_t dim, int index, int count) {
  size_t k = 0;
  for (size_t i = (size_t)index; i < n; i += (size_t)count, k++) {
    memmove(img + k * dim, img + i * dim, dim);
    lab[k] = lab[i];
  }
  return k;
}

int tfx_dataset_load_idx_shard(const char *images, const char *labels, double scale, double mean, double std,
                               size_t expect_dim, int index, int count, tfx_dataset **out, tfx_err *err) {
  uint8_t *img = NULL, *lab = NULL;
  int ri = 0, rl = 0;
  int64_t di[4] = {0}, dl[4] = {0};
  int rc = tfx_idx_read(images, &img, &ri, di, err);
  rc = rc ? rc : tfx_idx_read(labels, &lab, &rl, dl, err);
  size_t dim = 1;
  for (int i = 1; !rc && i < ri; i++) {
    dim *= (size_t)di[i];
  }
  if (!rc && (rl != 1 || dl[0] != di[0])) {
    rc = tfx_err_set(err, TFX_ESHAPE, "%s: %lld labels for %lld images in %s", labels, (long long)dl[0],
                     (long long)di[0], images);
  } else if (!rc && expect_dim && dim != expect_dim) {
    rc = tfx_err_set(err, TFX_ESHAPE, "%s: %zu values per example, the model's input takes %zu", images, dim,
                     expect_dim);
  } else if (!rc && (count < 1 || index < 0 || index >= count || (size_t)di[0] < (size_t)count)) {
    rc =
        tfx_err_set(err, TFX_EINVAL, "shard %d of %d over %lld examples of %s", index, count, (long long)di[0], images);
  }
  tfx_dataset *d = rc ? NULL : calloc(1, sizeof *d);
  if (!rc && (!d || !(d->y = malloc(sizeof(int32_t) * (size_t)di[0])))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (!rc) {
    d->n = keep_shard(img, lab, (size_t)di[0], dim, index, count);
    d->dim = dim;
    for (size_t i = 0; i < d->n; i++) {
      d->y[i] = lab[i];
    }
    uint8_t *small = realloc(img, d->n * dim); /* the other workers' records are not kept */
    d->x8 = small ? small : img;
    img = NULL;
    d->scale = scale;
    d->mean = mean;
    d->std = std;
    *out = d;
    d = NULL;
  }
  tfx_dataset_destroy(d);
  free(img);
  free(lab);
  return rc;
}
