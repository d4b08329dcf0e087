/* The monotonic clock: milliseconds that never jump with the wall clock, for deadlines, rates and timeouts.
 * Thread-safe; no errors. */
#ifndef TFX_CLOCK_H
#define TFX_CLOCK_H

#include <stdint.h>

/* Monotonic milliseconds. */
int64_t tfx_now_ms(void);

#endif
