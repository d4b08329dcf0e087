/* The monotonic clock: milliseconds that never jump with the wall clock, for deadlines, rates and timeouts; and
 * the wall clock, for records.
 * Thread-safe; no errors. */
#ifndef TFX_CLOCK_H
#define TFX_CLOCK_H

#include <stdint.h>

/* Monotonic milliseconds. */
int64_t tfx_now_ms(void);
/* Monotonic nanoseconds (step-time breakdowns summed over a run). */
int64_t tfx_now_ns(void);
/* Monotonic microseconds as a double (spin budgets, busy time). */
double tfx_now_us(void);
/* Monotonic seconds as a double (latency histograms). */
double tfx_now_s(void);
/* Wall-clock seconds since the epoch (for records a person reads: when a run started). */
double tfx_wall_s(void);

#endif
