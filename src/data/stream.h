/* Streaming input: the training files are read a window at a time, never loaded whole, so a dataset larger
 * than memory trains. The files are data.train.images (a glob pattern such as "train-*.tfrecord" or a
 * comma-separated list; for IDX, data.train.labels names the label files the same way, paired in sorted order).
 *
 * Sharding across `count` workers is deterministic: by record (worker i keeps the records whose index in the
 * epoch is i modulo count) or by file (worker i reads files i, i + count, ...), data.shard_by. Shuffling is
 * tf.data's: the file order is reshuffled every epoch from the seed, and the records are shuffled within a
 * window of data.shuffle_buffer examples. The stream repeats for ever; epochs are counted.
 *
 * With data.train.follow the files are those of a directory, taken in name order as they land (data__follow_next)
 * and never again: no epochs, no shuffle of the file order; the stream waits (calling its idle function) while no
 * new file has landed. Where a worker stands is a count of examples (tfx_stream_skip replays it), so a resumed run
 * neither repeats nor skips a file as long as the directory keeps the files it read.
 *
 * A followed stream reads and parses on a reader thread of its own (prefetch.c), started at the first take and
 * joined by tfx_stream_close, up to two windows ahead; the order is the same as read on the step.
 *
 * Ownership: the caller owns the stream. Thread-safety: one thread at a time (the reader thread is internal). Errors: TFX_ENOTFOUND (no file
 * matches), TFX_ECONFIG (fewer files than workers when sharding by file, unpaired IDX files, an empty shard),
 * TFX_ESHAPE (a file whose examples do not fit the model's input), and every reader's error, naming the file and
 * the offset or line. */
#ifndef TFX_STREAM_H
#define TFX_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "config/config.h"
#include "data/dataset.h"

typedef struct tfx_stream tfx_stream;

/* Opens the training files of cfg for shard `index` of `count`, examples of `dim` floats; the first file is
 * opened (and checked) now. Caller owns *out; close with tfx_stream_close. */
int tfx_stream_open(const tfx_config *cfg, int index, int count, size_t dim, tfx_stream **out, tfx_err *err);
/* The next example of this shard: the window holding it (borrowed until the next call) and its index there
 * (sparse streams: copy its rows with the CSR arrays of (*d)->fields). */
int tfx_stream_take(tfx_stream *s, const tfx_dataset **d, size_t *k, tfx_err *err);
/* The number of sparse fields the stream's examples carry (1: LibSVM rows kept as CSR; 0: dense). */
int tfx_stream_fields(const tfx_stream *s);
/* Copies the next `batch` examples into x [batch, dim] and y [batch], crossing windows, files and epochs. */
int tfx_stream_next(tfx_stream *s, int batch, float *x, int32_t *y, tfx_err *err);
/* Whether the next n examples are in the windows read already (the reader thread's queue too), so taking them
 * reads no file and never waits. */
int tfx_stream_buffered(const tfx_stream *s, size_t n);
/* Skips `n` examples as if they were taken (resume). */
int tfx_stream_skip(tfx_stream *s, int64_t n, tfx_err *err);
/* Checks every label read against [0, classes) (0: no check; multi_label: every class of a set), failing the
 * window with the file and record (data.on_error skip: naming, counting and dropping the record instead); reads
 * the first window now (not a followed directory), with the reader's or the check's error. */
int tfx_stream_check_labels(tfx_stream *s, int classes, int multi_label, tfx_err *err);
/* Bad records this shard named and skipped under data.on_error skip (0 with stop). */
uint64_t tfx_stream_bad_records(const tfx_stream *s);
/* Sets what a followed stream (data.train.follow) calls while it waits for a file; ctx borrowed. */
void tfx_stream_set_idle(tfx_stream *s, tfx_idle_fn idle, void *ctx);
/* Completed epochs so far. */
int64_t tfx_stream_epoch(const tfx_stream *s);
/* The number of files this shard reads. */
size_t tfx_stream_files(const tfx_stream *s);
/* Closes the open file and frees the stream; NULL does nothing. */
void tfx_stream_close(tfx_stream *s);

#endif
