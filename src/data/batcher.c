/* The shuffling, sharding batcher: over an in-memory dataset, or over a stream read a window at a time. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rand.h"
#include "data/dataset.h"
#include "data/stream.h"

struct tfx_batcher {
  const tfx_dataset *d;
  size_t *order, n, pos;
  uint64_t seed;
  int shuffle;
  int64_t epoch;
  tfx_stream *stream; /* instead of d: examples read from files a window at a time */
  int rc;             /* the stream's first error, kept until tfx_batcher_status reports it */
  tfx_err err;
  tfx_field csr_buf[TFX_MAX_FIELDS]; /* the last sparse batch (tfx_batcher_next_csr), grown as needed */
  size_t csr_rows[TFX_MAX_FIELDS], csr_cap[TFX_MAX_FIELDS];
  tfx_csr csr[TFX_MAX_FIELDS];
  float *w;     /* the last batch's example weights (the dataset has them), grown to the largest batch */
  size_t w_cap;
};

static void reshuffle(tfx_batcher *b) {
  if (!b->shuffle) {
    return;
  }
  uint64_t key = b->seed ^ ((uint64_t)b->epoch * 0xD1B54A32D192ED03ULL);
  for (size_t i = b->n - 1; i > 0; i--) {
    size_t j = (size_t)(tfx_rand_uniform(key, i) * (double)(i + 1));
    size_t t = b->order[i];
    b->order[i] = b->order[j];
    b->order[j] = t;
  }
}

int tfx_batcher_create(const tfx_dataset *d, int index, int count, uint64_t seed, int shuffle, tfx_batcher **out,
                       tfx_err *err) {
  if (count < 1 || index < 0 || index >= count || d->n < (size_t)count) {
    return tfx_err_set(err, TFX_EINVAL, "shard %d of %d over %zu examples", index, count, d->n);
  }
  tfx_batcher *b = calloc(1, sizeof *b);
  if (!b) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  b->n = (d->n - (size_t)index + (size_t)count - 1) / (size_t)count;
  if (!(b->order = malloc(sizeof(size_t) * b->n))) {
    free(b);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < b->n; i++) {
    b->order[i] = (size_t)index + i * (size_t)count;
  }
  b->d = d;
  b->seed = seed ^ (uint64_t)index * 0x9E37ULL;
  b->shuffle = shuffle;
  reshuffle(b);
  *out = b;
  return TFX_OK;
}

int tfx_batcher_create_shard(const tfx_dataset *d, int index, int count, uint64_t seed, int shuffle, tfx_batcher **out,
                             tfx_err *err) {
  if (count < 1 || index < 0 || index >= count || d->n < 1) {
    return tfx_err_set(err, TFX_EINVAL, "shard %d of %d of %zu examples", index, count, d->n);
  }
  tfx_batcher *b = calloc(1, sizeof *b);
  if (!b || !(b->order = malloc(sizeof(size_t) * d->n))) {
    free(b);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  b->n = d->n;
  for (size_t i = 0; i < b->n; i++) {
    b->order[i] = i; /* the shard's i-th record is the whole set's index + i * count */
  }
  b->d = d;
  b->seed = seed ^ (uint64_t)index * 0x9E37ULL;
  b->shuffle = shuffle;
  reshuffle(b);
  *out = b;
  return TFX_OK;
}

int tfx_batcher_create_stream(tfx_stream *s, tfx_batcher **out, tfx_err *err) {
  tfx_batcher *b = calloc(1, sizeof *b);
  if (!b) {
    tfx_stream_close(s);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  b->stream = s;
  *out = b;
  return TFX_OK;
}

int tfx_batcher_status(const tfx_batcher *b, tfx_err *err) {
  return b->rc ? tfx_err_set(err, b->rc, "%s", b->err.msg) : TFX_OK;
}

void tfx_batcher_fail(tfx_batcher *b, int rc, const char *fmt, ...) {
  if (b->rc) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->err.msg, sizeof b->err.msg, fmt, ap);
  va_end(ap);
  b->rc = b->err.code = rc;
}

void tfx_batcher_destroy(tfx_batcher *b) {
  if (!b) {
    return;
  }
  tfx_stream_close(b->stream);
  free(b->order);
  free(b->w);
  for (int f = 0; f < TFX_MAX_FIELDS; f++) {
    free(b->csr_buf[f].off);
    free(b->csr_buf[f].ids);
    free(b->csr_buf[f].vals);
  }
  free(b);
}

static size_t take_index(tfx_batcher *b) {
  if (b->pos == b->n) {
    b->pos = 0;
    b->epoch++;
    reshuffle(b);
  }
  return b->order[b->pos++];
}

/* The streaming batch: after a read error, zeros (the caller checks tfx_batcher_status before using them). */
static void stream_next(tfx_batcher *b, int batch, float *x, int32_t *y) {
  if (!b->rc && !(b->rc = tfx_stream_next(b->stream, batch, x, y, &b->err))) {
    return;
  }
  memset(y, 0, sizeof(int32_t) * (size_t)batch);
}

/* Example k of a byte dataset as floats, exactly as loading it as float32 would have made them: the byte times
 * data.scale, then (x - mean) / std. */
static void to_floats(const tfx_dataset *d, size_t k, float *out) {
  const uint8_t *src = d->x8 + k * d->dim;
  for (size_t j = 0; j < d->dim; j++) {
    out[j] = (float)(src[j] * d->scale);
  }
  tfx_dataset_normalize(out, d->dim, d->mean, d->std);
}

const float *tfx_batcher_weights(const tfx_batcher *b) {
  return b->d && b->d->w && b->w ? b->w : NULL;
}

/* Example i of the batch is example k of d: its weight into the batch's weights (when d has them). */
static void take_weight(tfx_batcher *b, const tfx_dataset *d, int batch, int i, size_t k) {
  if (!d->w) {
    return;
  }
  if ((size_t)batch > b->w_cap) { /* once, at the first batch: the batch size does not change */
    float *w = realloc(b->w, sizeof(float) * (size_t)batch);
    if (!w) {
      tfx_batcher_fail(b, TFX_ENOMEM, "out of memory for a batch's example weights");
      return;
    }
    b->w = w;
    b->w_cap = (size_t)batch;
  }
  b->w[i] = d->w[k];
}

void tfx_batcher_next(tfx_batcher *b, int batch, float *x, int32_t *y) {
  if (b->stream) {
    stream_next(b, batch, x, y);
    return;
  }
  size_t dim = b->d->dim;
  for (int i = 0; i < batch; i++) {
    size_t k = take_index(b);
    if (b->d->x8) {
      to_floats(b->d, k, x + (size_t)i * dim);
    } else {
      memcpy(x + (size_t)i * dim, b->d->x + k * dim, sizeof(float) * dim);
    }
    y[i] = b->d->y[k];
    take_weight(b, b->d, batch, i, k);
  }
}

/* Grows field f's batch buffers to rows examples and nnz ids; -1 when memory runs out. */
static int csr_reserve(tfx_batcher *b, int f, size_t rows, size_t nnz) {
  tfx_field *c = &b->csr_buf[f];
  if (rows > b->csr_rows[f]) {
    int64_t *off = realloc(c->off, sizeof(int64_t) * (rows + 1));
    if (!off) {
      return -1;
    }
    c->off = off;
    b->csr_rows[f] = rows;
  }
  if (nnz > b->csr_cap[f]) {
    size_t cap = nnz * 2;
    int64_t *ids = realloc(c->ids, sizeof(int64_t) * cap);
    c->ids = ids ? ids : c->ids;
    float *vals = ids ? realloc(c->vals, sizeof(float) * cap) : NULL;
    c->vals = vals ? vals : c->vals;
    if (!ids || !vals) {
      return -1;
    }
    b->csr_cap[f] = cap;
  }
  return 0;
}

/* Appends example k of d's field f as row i of the batch; -1 when memory runs out. */
static int csr_append(tfx_batcher *b, const tfx_dataset *d, int f, int i, size_t k) {
  const tfx_field *src = &d->fields[f];
  tfx_field *dst = &b->csr_buf[f];
  int64_t from = src->off[k], len = src->off[k + 1] - from, at = dst->off[i];
  if (csr_reserve(b, f, 0, (size_t)(at + len))) {
    return -1;
  }
  memcpy(dst->ids + at, src->ids + from, sizeof(int64_t) * (size_t)len);
  for (int64_t j = 0; j < len; j++) {
    dst->vals[at + j] = src->vals ? src->vals[from + j] : 1.0f;
  }
  dst->off[i + 1] = at + len;
  return 0;
}

uint64_t tfx_batcher_bad_records(const tfx_batcher *b) {
  return b->stream ? tfx_stream_bad_records(b->stream) : 0;
}

int tfx_batcher_fields(const tfx_batcher *b) {
  return b->d ? b->d->n_fields : b->stream ? tfx_stream_fields(b->stream) : 0;
}

/* The next example of the batch: from the dataset (shuffled order) or the stream's window; NULL after a stream
 * error (recorded for tfx_batcher_status). */
static const tfx_dataset *next_example(tfx_batcher *b, size_t *k) {
  if (!b->stream) {
    *k = take_index(b);
    return b->d;
  }
  const tfx_dataset *d = NULL;
  if (!b->rc) {
    b->rc = tfx_stream_take(b->stream, &d, k, &b->err);
  }
  return b->rc ? NULL : d;
}

const tfx_csr *tfx_batcher_next_csr(tfx_batcher *b, int batch, float *x, int32_t *y) {
  int nf = tfx_batcher_fields(b), oom = 0;
  for (int f = 0; f < nf; f++) {
    oom |= csr_reserve(b, f, (size_t)batch, 1);
    b->csr_buf[f].off[0] = 0;
  }
  if (!nf || oom) {
    tfx_batcher_fail(b, oom ? TFX_ENOMEM : TFX_EINVAL, "%s",
                     oom ? "out of memory for a sparse batch" : "sparse batches need a sparse in-memory dataset");
    memset(y, 0, sizeof(int32_t) * (size_t)batch);
    return b->csr;
  }
  for (int i = 0; i < batch && !oom; i++) {
    size_t k = 0;
    const tfx_dataset *d = next_example(b, &k);
    if (!d) { /* a stream that failed: its error is the batcher's; the rest of the batch is empty */
      for (int f = 0; f < nf; f++) {
        b->csr_buf[f].off[i + 1] = b->csr_buf[f].off[i];
      }
      y[i] = 0;
      continue;
    }
    for (int f = 0; f < nf; f++) {
      oom |= csr_append(b, d, f, i, k);
    }
    if (x && d->x) {
      memcpy(x + (size_t)i * d->dim, d->x + k * d->dim, sizeof(float) * d->dim);
    }
    y[i] = d->y[k];
    take_weight(b, d, batch, i, k);
  }
  if (oom) {
    tfx_batcher_fail(b, TFX_ENOMEM, "out of memory for a sparse batch");
  }
  for (int f = 0; f < nf; f++) {
    b->csr[f] = (tfx_csr){batch, b->csr_buf[f].off, b->csr_buf[f].ids, b->csr_buf[f].vals};
  }
  return b->csr;
}

void tfx_dataset_csr(const tfx_dataset *d, size_t i, int n, tfx_csr *out) {
  for (int f = 0; f < d->n_fields; f++) {
    out[f] = (tfx_csr){n, d->fields[f].off + i, d->fields[f].ids, d->fields[f].vals};
  }
}

void tfx_batcher_skip(tfx_batcher *b, int64_t batches, int batch) {
  if (b->stream) {
    b->rc = b->rc ? b->rc : tfx_stream_skip(b->stream, batches * batch, &b->err);
    return;
  }
  for (int64_t i = 0; i < batches * batch; i++) {
    take_index(b);
  }
}

int tfx_batcher_ready(const tfx_batcher *b, int batch) {
  return !b->stream || tfx_stream_buffered(b->stream, (size_t)batch);
}

void tfx_batcher_set_idle(tfx_batcher *b, tfx_idle_fn idle, void *ctx) {
  if (b->stream) {
    tfx_stream_set_idle(b->stream, idle, ctx);
  }
}

int tfx_batcher_check_labels(tfx_batcher *b, int classes, int multi_label, tfx_err *err) {
  return b->stream ? tfx_stream_check_labels(b->stream, classes, multi_label, err) : TFX_OK;
}

int64_t tfx_batcher_epoch(const tfx_batcher *b) {
  return b->stream ? tfx_stream_epoch(b->stream) : b->epoch;
}
