/* Datasets in memory (features as float32 or the file's bytes, integer labels, sparse fields) as every reader
 * fills them (IDX: idx.h), and a batcher: seeded shuffle per epoch, deterministic sharding across N workers by
 * record index, batches that wrap into the next epoch. */
#ifndef TFX_DATASET_H
#define TFX_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "common/csr.h"
#include "common/err.h"

#define TFX_MAX_FIELDS 64

/* One sparse field of a dataset, CSR over its examples (owned by the dataset). */
typedef struct tfx_field {
  int64_t *off, *ids; /* [n + 1], [nnz] */
  float *vals;        /* [nnz], or NULL */
} tfx_field;

typedef struct tfx_dataset {
  size_t n;    /* examples */
  size_t dim;  /* floats per example */
  float *x;    /* [n, dim]; NULL when the examples are kept as bytes (x8) */
  int32_t *y;  /* [n] */
  float *w;    /* [n] example weights (data.weight_key), or NULL: all 1 */
  uint8_t *x8; /* [n, dim] the IDX file's bytes, converted per batch as (byte * scale - mean) / std; or NULL */
  double scale, mean, std;
  /* Sparse fields (a LibSVM row: one field, x NULL; feature columns: one per categorical column, beside the
   * dense x of the numeric ones): example i of field f holds the ids fields[f].ids[off[i]..off[i+1]) with their
   * weights (vals, or NULL: all 1). Memory grows with the nonzeros, never with the ids' range. */
  int n_fields;
  tfx_field fields[TFX_MAX_FIELDS];
} tfx_dataset;

typedef struct tfx_batcher tfx_batcher;
typedef struct tfx_stream tfx_stream;
/* Called while a followed stream waits for its next file (data.train.follow); a nonzero return stops the wait
 * (the batch fails with TFX_EINTR). */
typedef int (*tfx_idle_fn)(void *ctx);

/* x[0..n) = (x - mean) / std in place (data.mean, data.std, applied after data.scale); nothing for 0 and 1. */
void tfx_dataset_normalize(float *x, size_t n, double mean, double std);
/* Frees a dataset; NULL does nothing. */
void tfx_dataset_destroy(tfx_dataset *d);

/* A batcher over a dataset that holds only shard `index` of `count` (tfx_dataset_load_idx_shard): the same
 * batches, in the same order, as tfx_batcher_create over the whole set. Caller owns *out. */
int tfx_batcher_create_shard(const tfx_dataset *d, int index, int count, uint64_t seed, int shuffle, tfx_batcher **out,
                             tfx_err *err);
/* A batcher over shard `index` of `count` (records i with i % count == index); caller owns; free with
 * tfx_batcher_destroy. The dataset is borrowed and must outlive the batcher. */
int tfx_batcher_create(const tfx_dataset *d, int index, int count, uint64_t seed, int shuffle, tfx_batcher **out,
                       tfx_err *err);
/* A batcher over a stream (stream.h), which it takes over (closed on error too); caller owns *out. */
int tfx_batcher_create_stream(tfx_stream *s, tfx_batcher **out, tfx_err *err);
/* TFX_OK, or the first error a streaming batcher met (a corrupt or vanished file); its batches since are zeros. */
int tfx_batcher_status(const tfx_batcher *b, tfx_err *err);
/* Records the batcher's first error (later ones are dropped) for tfx_batcher_status to report. */
void tfx_batcher_fail(tfx_batcher *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Frees a batcher; NULL does nothing. */
void tfx_batcher_destroy(tfx_batcher *b);
/* Copies the next `batch` examples into x [batch, dim] and y [batch]; wraps (and reshuffles) at epoch end. */
void tfx_batcher_next(tfx_batcher *b, int batch, float *x, int32_t *y);
/* The next `batch` examples of a sparse dataset: one CSR batch per field (an array of d->n_fields, borrowed from
 * the batcher until its next call), their dense part into x [batch, dim] when the set has one (x may be NULL
 * otherwise) and their labels into y [batch]; wraps (and reshuffles) at epoch end like tfx_batcher_next. */
const tfx_csr *tfx_batcher_next_csr(tfx_batcher *b, int batch, float *x, int32_t *y);
/* The example weights of the batch the batcher gave last (borrowed until its next batch), or NULL when its dataset
 * has none (all 1). */
const float *tfx_batcher_weights(const tfx_batcher *b);
/* Bad records its stream named and skipped (data.on_error skip); 0 for a dataset in memory. */
uint64_t tfx_batcher_bad_records(const tfx_batcher *b);
/* The number of sparse fields of the batcher's dataset (0: dense, or a stream). */
int tfx_batcher_fields(const tfx_batcher *b);
/* Whether the next batch of `batch` examples is at hand: always over a dataset; over a stream, when the window read
 * already holds it (taking it then reads no file and never waits for one to land). */
int tfx_batcher_ready(const tfx_batcher *b, int batch);
/* Examples [i, i + n) of a sparse dataset as CSR views into its arrays, one per field, into out[d->n_fields]. */
void tfx_dataset_csr(const tfx_dataset *d, size_t i, int n, tfx_csr *out);
/* Skips ahead as if `batches` batches of size `batch` were taken (resume). */
void tfx_batcher_skip(tfx_batcher *b, int64_t batches, int batch);
/* Sets what a followed stream calls while it waits for a file (ctx borrowed for the batcher's life); nothing for
 * other batchers. */
void tfx_batcher_set_idle(tfx_batcher *b, tfx_idle_fn idle, void *ctx);
/* A streaming batcher checks each label as its file is read against [0, classes) (multi_label: each class of a
 * set), naming the file and record of a bad one (an in-memory set is checked whole when loaded:
 * tfx_labels_check); nothing for other batchers. A stream reads its first window now: that read's error. */
int tfx_batcher_check_labels(tfx_batcher *b, int classes, int multi_label, tfx_err *err);
/* Completed epochs so far. */
int64_t tfx_batcher_epoch(const tfx_batcher *b);

#endif
