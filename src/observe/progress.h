/* The one-line progress display: step/max, loss, last eval accuracy, examples/s and ETA; updated in place on a
 * terminal, printed as plain lines otherwise. Writes to stdout. A tfx_progress is a plain value. */
#ifndef TFX_PROGRESS_H
#define TFX_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tfx_progress {
  int64_t start_ms, last_ms, start_step, max_steps, last_step;
  int tty;
} tfx_progress;

/* Starts the clock at start_step of max_steps. */
void tfx_progress_init(tfx_progress *p, int64_t start_step, int64_t max_steps);
/* Steps per second since the previous call (or since the start). */
double tfx_progress_rate(tfx_progress *p, int64_t step);
/* A max_steps from this on is no end anyone waits for (a followed stream without one): shown without it. */
#define TFX_PROGRESS_ENDLESS ((int64_t)1 << 53)
/* An ETA this long or longer (seconds, a year) says nothing: shown as "-". */
#define TFX_PROGRESS_MAX_ETA_S (365.0 * 86400)
/* The line for this step into out[n], elapsed seconds since the start (acc may be NaN: no eval yet). */
void tfx_progress_format(const tfx_progress *p, int64_t step, double loss, double acc, double ex_per_s, double elapsed,
                         char *out, size_t n);
/* Shows the line for this step (acc may be NaN: no eval yet). */
void tfx_progress_show(const tfx_progress *p, int64_t step, double loss, double acc, double ex_per_s);
/* Ends the line and prints the summary; a NaN acc prints as "n/a (why)" (why borrowed, NULL: "no evaluation"). */
void tfx_progress_done(const tfx_progress *p, int64_t step, double acc, const char *why);

#endif
