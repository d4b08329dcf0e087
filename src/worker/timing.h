/* Where a worker's step time goes, per report window and in total: row_pull (a batch's rows of lazy tables pulled
 * in a round trip of their own; rows that ride on the push-pull cost nothing here), compute (data, forward,
 * backward, clip), push (the gradients handed to every ps link), wait (until every reply is in and taken: the
 * ps's work, the wire both ways and, in sync mode, the other workers' gradients), other (reports, control,
 * bookkeeping between steps). push_pull_ms (push + wait) is reported too, as before the split.
 * A tfx_timing is plain storage owned by the worker's thread; nothing here fails or allocates. */
#ifndef TFX_WORKER_TIMING_H
#define TFX_WORKER_TIMING_H

#include <stdint.h>

typedef enum {
  TFX_TIMING_ROWS,
  TFX_TIMING_COMPUTE,
  TFX_TIMING_PUSH,
  TFX_TIMING_WAIT,
  TFX_TIMING_OTHER,
  TFX_TIMING_N
} tfx_timing_phase;

/* The report keys tfx_timing_take_window writes at most: each phase, push_pull_ms and step_ms. */
#define TFX_TIMING_KEYS (TFX_TIMING_N + 2)

typedef struct tfx_timing {
  int64_t last_ns;
  int64_t window_ns[TFX_TIMING_N], total_ns[TFX_TIMING_N];
  int64_t window_steps, total_steps;
} tfx_timing;

/* Zeroes t and starts its clock. */
void tfx_timing_init(tfx_timing *t);
/* Charges the time since the previous mark to phase p; TFX_TIMING_WAIT also counts one step (the worker marks
 * OTHER at the top of its loop, ROWS after a row pull, COMPUTE after the gradients, PUSH once the requests are
 * out, WAIT once the replies are in). */
void tfx_timing_mark(tfx_timing *t, tfx_timing_phase p);
/* Writes the window's mean ms per step of each phase, of push + wait and of the whole step as report keys (names
 * are static strings; room for TFX_TIMING_KEYS), then starts a new window; returns how many were written (0
 * before the first step). */
int tfx_timing_take_window(tfx_timing *t, const char **names, double *ms_per_step);
/* Logs WORKER-TIMING: the run's mean ms per step of each phase and their shares. */
void tfx_timing_log(const tfx_timing *t);

#endif
