/* TensorBoard event files: RUN/events.out.tfevents.<time>.<host>.<pid>.tfx, TFRecord-framed tensorflow.Event
 * records (encoded with protobuf-c), the first one `file_version: "brain.Event:2"`, then one Event per metrics
 * line with a scalar per field ("eval/accuracy", ...; a line that names its worker puts its series under that
 * worker's tags: "train/loss/worker_1"). Scalars of exactly 0 are written (simple_value is in a oneof, as in
 * TensorFlow's summary.proto). A tfx_events is owned by one thread. */
#ifndef TFX_EVENTS_H
#define TFX_EVENTS_H

#include <stdint.h>

#include "common/err.h"

typedef struct tfx_events tfx_events;

/* Names the event file in run_dir, created at the first tfx_events_write (a run refused before its first event
 * leaves none; if it cannot be created, one EVENTS-OPEN warning and no events); caller owns *out; close with
 * tfx_events_close. */
int tfx_events_open(const char *run_dir, tfx_events **out, tfx_err *err);
/* Appends an Event at step (one per 32 values) with a scalar "kind/name" for each value (non-finite values are
 * skipped), flushed. */
void tfx_events_write(tfx_events *e, const char *kind, int64_t step, const char *const *names, const double *values,
                      int n);
/* Closes the file; NULL does nothing. */
void tfx_events_close(tfx_events *e);

#endif
