/* Declarations private to src/data: shared between its modules, not for callers outside the folder. */
#ifndef TFX_DATA_IMPL_H
#define TFX_DATA_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "data/columns.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/example.h"
#include "data/libsvm.h"
#include "data/tfrecord.h"

/* A new dataset of the n examples of dim floats a reader holds: takes *x and *y (set to NULL); caller owns *out
 * (free with tfx_dataset_destroy). TFX_ENOMEM naming path when memory runs out; then nothing is taken. */
int data__dataset_take(size_t n, size_t dim, float **x, int32_t **y, const char *path, tfx_dataset **out, tfx_err *err);
/* Expands a comma-separated list of paths and glob patterns (sorted matches) into files, in order; caller owns
 * *paths (free with data__files_free). TFX_ENOTFOUND when a pattern matches nothing or no file is named. */
int data__files_expand(const char *spec, char ***paths, size_t *n, tfx_err *err);
/* Frees a list from data__files_expand; NULL does nothing. */
void data__files_free(char **paths, size_t n);
/* Opens path for reading; caller owns *out (fclose, or hand it to a reader's _file open). TFX_ENOTFOUND when it
 * does not exist, TFX_ESYS otherwise, naming path. */
int data__file_open(const char *path, FILE **out, tfx_err *err);

/* The readers over a file already open (a followed file, opened once and checked: follow.c), f read from where it
 * stands and named path in messages; each takes ownership of f on every path, as its path open would open it.
 * Caller owns *out (free with the reader's close). */
int data__csv_open_file(FILE *f, const char *path, const char *label_column, int has_header, tfx_csv_reader **out,
                        tfx_err *err);
int data__csv_rows_open_file(FILE *f, const char *path, tfx_csv_rows **out, tfx_err *err);
int data__libsvm_open_file(FILE *f, const char *path, size_t dim, tfx_libsvm_reader **out, tfx_err *err);
int data__tfrecord_open_file(FILE *f, const char *path, tfx_tfrecord_reader **out, tfx_err *err);
int data__example_open_file(FILE *f, const char *path, const char *feature_key, const char *label_key, double scale,
                            tfx_example_reader **out, tfx_err *err);
int data__columns_open_file(const tfx_config *cfg, FILE *f, const char *path, tfx_columns_reader **out, tfx_err *err);

/* The names a followed stream took from its directory (any worker's turn), in the order taken, which is name order
 * (each sorts after the one before), and the files it named as landed late, sorted. Zeroed is empty; owned by the
 * stream (data__follow_names_fini). */
typedef struct data__follow_names {
  char **taken;
  size_t n_taken;
  char **late;
  size_t n_late;
} data__follow_names;
/* The name of the last file taken ("" before the first); borrowed until the next take. */
const char *data__follow_last(const data__follow_names *names);
/* Adds name, which sorts after every name taken, to the names taken. TFX_ENOMEM. */
int data__follow_take(data__follow_names *names, const char *name, tfx_err *err);
/* Frees the lists and zeroes names. */
void data__follow_names_fini(data__follow_names *names);
/* data.train.follow: the first regular file of dir whose name sorts after the last one taken (strcmp order) and
 * does not start with '.', into name[len] (*found 1), or *found 0 when none has landed yet. A regular file sorting
 * at or before the last one taken that was not taken (it landed late: never read) is named in a DATA-FOLLOW-LATE
 * warning, once (names->late). TFX_ENOTFOUND naming dir when it cannot be read; TFX_ENOMEM. */
int data__follow_next(const char *dir, data__follow_names *names, char *name, size_t len, int *found, tfx_err *err);
/* Opens path, a file just taken from a followed directory, for its reader: once, without following a link and
 * without blocking (a FIFO), and it must then be a regular file, so that what is read is what was checked; its size
 * into *size. Caller owns *out (fclose, or a reader's _file open). TFX_ENOTFOUND when it cannot be opened
 * (unreadable), TFX_EINVAL for a link or another kind of file, each naming the path escaped. */
int data__follow_open(const char *path, FILE **out, int64_t *size, tfx_err *err);
/* At the end of a followed file f (opened by data__follow_open, size bytes then; borrowed): names it in a
 * DATA-FOLLOW-TRUNCATED warning when it is shorter now (cut while it was read: rows were lost, positions shift). */
void data__follow_end(FILE *f, const char *path, int64_t size);

/* A window of a stream: its examples and their serving order (d->n indices). Owned by whoever holds it. */
typedef struct data__window {
  tfx_dataset *d;
  size_t *perm;
} data__window;
/* Frees a window's dataset and order and zeroes it; an empty window does nothing. */
void data__window_free(data__window *w);

/* A followed stream's reader thread (prefetch.c): it calls produce(ctx, &window, err) over and over, queueing up to
 * two windows ahead (memory: those two, the one being read and the one served, each at most data.shuffle_buffer
 * examples), and stops after the first error (kept, and returned by every take after). */
typedef struct data__prefetch data__prefetch;
typedef int (*data__produce_fn)(void *ctx, data__window *w, tfx_err *err);
/* Starts the reader thread, *out set before it runs (produce may read it); dir names what it follows in messages.
 * Caller owns *out (data__prefetch_stop). */
int data__prefetch_start(data__produce_fn produce, void *ctx, const char *dir, data__prefetch **out, tfx_err *err);
/* The next window, caller owns *w: waits while the reader parses; once the reader looked at the directory after
 * this call and found no file, calls idle(ctx) every 100 ms (nonzero: TFX_EINTR "stopped while waiting for a file
 * in DIR"). After the reader's error, that error. Consumer thread only. */
int data__prefetch_take(data__prefetch *p, tfx_idle_fn idle, void *ctx, data__window *w, tfx_err *err);
/* The examples of the queued windows, counted until `enough` (a take of that many would not wait). */
size_t data__prefetch_queued(data__prefetch *p, size_t enough);
/* Producer side: the number of the consumer's last request for a look at the directory; take it before looking. */
uint64_t data__prefetch_ticket(data__prefetch *p);
/* Producer side: the look with `ticket` found no file; waits up to 100 ms or until the consumer asks again.
 * Returns nonzero when the thread is to stop. */
int data__prefetch_dry(data__prefetch *p, uint64_t ticket);
/* Stops and joins the reader thread, frees the queued windows and p; NULL does nothing. */
void data__prefetch_stop(data__prefetch *p);
/* data__follow_next from the reader thread of p, looking again each time the consumer asks or every 100 ms until
 * such a file lands; a directory that cannot be read (removed, to be made again) is waited for, named once in a
 * DATA-FOLLOW-GONE warning. TFX_EINTR when the thread is stopped. */
int data__follow_wait(const char *dir, data__follow_names *names, char *name, size_t len, data__prefetch *p,
                      tfx_err *err);

#endif
