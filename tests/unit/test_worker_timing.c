/* The worker's step-time breakdown (src/worker/timing.c): phases, steps, windows. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "worker/timing.h"

/* One step: `compute_us` in compute, `exchange_us` waiting for the replies, 0.5 ms in a row pull and in the
 * push (sleeps are lower bounds, never upper). */
static void step(tfx_timing *t, int compute_us, int exchange_us) {
  tfx_timing_mark(t, TFX_TIMING_OTHER);
  usleep(500);
  tfx_timing_mark(t, TFX_TIMING_ROWS);
  usleep((useconds_t)compute_us);
  tfx_timing_mark(t, TFX_TIMING_COMPUTE);
  usleep(500);
  tfx_timing_mark(t, TFX_TIMING_PUSH);
  usleep((useconds_t)exchange_us);
  tfx_timing_mark(t, TFX_TIMING_WAIT);
}

Test(timing, empty_window_writes_nothing) {
  tfx_timing t;
  tfx_timing_init(&t);
  const char *names[TFX_TIMING_KEYS];
  double ms[TFX_TIMING_KEYS];
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 0);
}

Test(timing, window_has_the_phases_and_their_sum) {
  tfx_timing t;
  tfx_timing_init(&t);
  step(&t, 2000, 1000);
  step(&t, 2000, 1000);
  const char *names[TFX_TIMING_KEYS];
  double ms[TFX_TIMING_KEYS];
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 7);
  const char *want[] = {"row_pull_ms", "compute_ms", "push_ms", "wait_ms", "other_ms", "push_pull_ms", "step_ms"};
  for (int i = 0; i < 7; i++) {
    cr_assert_str_eq(names[i], want[i]);
  }
  cr_assert_geq(ms[0], 0.5, "row_pull %g ms per step after sleeping 0.5 ms", ms[0]);
  cr_assert_geq(ms[1], 2.0, "compute %g ms per step after sleeping 2 ms", ms[1]);
  cr_assert_geq(ms[2], 0.5, "push %g ms per step after sleeping 0.5 ms", ms[2]);
  cr_assert_geq(ms[3], 1.0, "wait %g ms per step after sleeping 1 ms", ms[3]);
  cr_assert_float_eq(ms[5], ms[2] + ms[3], 1e-9);
  cr_assert_float_eq(ms[6], ms[0] + ms[1] + ms[2] + ms[3] + ms[4], 1e-9);
  cr_assert_eq(t.total_steps, 2);
}

Test(timing, a_new_window_starts_after_each_take) {
  tfx_timing t;
  tfx_timing_init(&t);
  step(&t, 0, 0);
  const char *names[TFX_TIMING_KEYS];
  double ms[TFX_TIMING_KEYS];
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 7);
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 0, "the window was not reset");
  step(&t, 3000, 0);
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 7);
  cr_assert_geq(ms[1], 3.0, "the second window holds only its own step");
  cr_assert_eq(t.total_steps, 2, "totals run across windows");
  tfx_timing_log(&t);
}
