/* Where a worker's step time goes, per report window and in total: compute (data, forward, backward, clip),
 * push_pull (the gradients out to every ps and the updated values back: one round trip, which in sync mode
 * also holds the wait for the other workers' gradients), other (reports, control, bookkeeping between steps).
 * A tfx_timing is plain storage owned by the worker's thread; nothing here fails or allocates. */
#ifndef TFX_WORKER_TIMING_H
#define TFX_WORKER_TIMING_H

#include <stdint.h>

typedef enum { TFX_TIMING_COMPUTE, TFX_TIMING_PUSH_PULL, TFX_TIMING_OTHER, TFX_TIMING_N } tfx_timing_phase;

typedef struct tfx_timing {
  int64_t last_ns;
  int64_t window_ns[TFX_TIMING_N], total_ns[TFX_TIMING_N];
  int64_t window_steps, total_steps;
} tfx_timing;

/* Zeroes t and starts its clock. */
void tfx_timing_init(tfx_timing *t);
/* Charges the time since the previous mark to phase p; TFX_TIMING_PUSH_PULL also counts one step (the worker
 * marks OTHER at the top of its loop, COMPUTE after the gradients, PUSH_PULL after the round trip). */
void tfx_timing_mark(tfx_timing *t, tfx_timing_phase p);
/* Writes the window's mean ms per step of each phase and of the whole step as report keys (names are static
 * strings; room for 4), then starts a new window; returns how many were written (0 before the first step). */
int tfx_timing_take_window(tfx_timing *t, const char **names, double *ms_per_step);
/* Logs WORKER-TIMING: the run's mean ms per step of each phase and their shares. */
void tfx_timing_log(const tfx_timing *t);

#endif
