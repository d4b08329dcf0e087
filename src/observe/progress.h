/* The one-line progress display: step/max, loss, last eval accuracy, examples/s and ETA; updated in place on a
 * terminal, printed as plain lines otherwise. Writes to stdout. A tfx_progress is a plain value. */
#ifndef TFX_PROGRESS_H
#define TFX_PROGRESS_H

#include <stdint.h>

typedef struct tfx_progress {
  int64_t start_ms, last_ms, start_step, max_steps, last_step;
  int tty;
} tfx_progress;

/* Starts the clock at start_step of max_steps. */
void tfx_progress_init(tfx_progress *p, int64_t start_step, int64_t max_steps);
/* Steps per second since the previous call (or since the start). */
double tfx_progress_rate(tfx_progress *p, int64_t step);
/* Shows the line for this step (acc may be NaN: no eval yet). */
void tfx_progress_show(const tfx_progress *p, int64_t step, double loss, double acc, double ex_per_s);
/* Ends the line and prints the summary; a NaN acc prints as "n/a (why)" (why borrowed, NULL: "no evaluation"). */
void tfx_progress_done(const tfx_progress *p, int64_t step, double acc, const char *why);

#endif
