/* Declarations private to src/data: shared between its modules, not for callers outside the folder. */
#ifndef TFX_DATA_IMPL_H
#define TFX_DATA_IMPL_H

#include <stdint.h>

#include "data/dataset.h"

/* A new dataset of the n examples of dim floats a reader holds: takes *x and *y (set to NULL); caller owns *out
 * (free with tfx_dataset_destroy). TFX_ENOMEM naming path when memory runs out; then nothing is taken. */
int data__dataset_take(size_t n, size_t dim, float **x, int32_t **y, const char *path, tfx_dataset **out, tfx_err *err);
/* Expands a comma-separated list of paths and glob patterns (sorted matches) into files, in order; caller owns
 * *paths (free with data__files_free). TFX_ENOTFOUND when a pattern matches nothing or no file is named. */
int data__files_expand(const char *spec, char ***paths, size_t *n, tfx_err *err);
/* Frees a list from data__files_expand; NULL does nothing. */
void data__files_free(char **paths, size_t n);

/* data.train.follow: the first regular file of dir whose name sorts after `after` (strcmp order) and does not
 * start with '.', into name[len] (*found 1), or *found 0 when none has landed yet; *older gets the number of such
 * files sorting at or before `after` (0 when after is ""). TFX_ENOTFOUND naming dir when it cannot be read. */
int data__follow_next(const char *dir, const char *after, char *name, size_t len, int *found, uint64_t *older,
                      tfx_err *err);
/* Whether path, a file just taken from a followed directory, may be read: opened without following a link and
 * without blocking (a FIFO), it must be a regular file. TFX_ENOTFOUND when it cannot be opened (unreadable),
 * TFX_EINVAL for a link or another kind of file, each naming the path escaped. */
int data__follow_check(const char *path, tfx_err *err);

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
 * DATA-FOLLOW-GONE warning; more files at or before `after` than the `taken` so far are named in a
 * DATA-FOLLOW-LATE warning (once for each count, kept in *late_named). TFX_EINTR when the thread is stopped. */
int data__follow_wait(const char *dir, const char *after, uint64_t taken, uint64_t *late_named, char *name, size_t len,
                      data__prefetch *p, tfx_err *err);

#endif
