/* The worker's step-time breakdown (src/worker/timing.c): phases, steps, windows. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "worker/timing.h"

/* One step: `compute_us` in compute, `exchange_us` in push_pull (sleeps are lower bounds, never upper). */
static void step(tfx_timing *t, int compute_us, int exchange_us) {
  tfx_timing_mark(t, TFX_TIMING_OTHER);
  usleep((useconds_t)compute_us);
  tfx_timing_mark(t, TFX_TIMING_COMPUTE);
  usleep((useconds_t)exchange_us);
  tfx_timing_mark(t, TFX_TIMING_PUSH_PULL);
}

Test(timing, empty_window_writes_nothing) {
  tfx_timing t;
  tfx_timing_init(&t);
  const char *names[TFX_TIMING_N + 1];
  double ms[TFX_TIMING_N + 1];
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 0);
}

Test(timing, window_has_the_phases_and_their_sum) {
  tfx_timing t;
  tfx_timing_init(&t);
  step(&t, 2000, 1000);
  step(&t, 2000, 1000);
  const char *names[TFX_TIMING_N + 1];
  double ms[TFX_TIMING_N + 1];
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 4);
  cr_assert_str_eq(names[0], "compute_ms");
  cr_assert_str_eq(names[1], "push_pull_ms");
  cr_assert_str_eq(names[2], "other_ms");
  cr_assert_str_eq(names[3], "step_ms");
  cr_assert_geq(ms[0], 2.0, "compute %g ms per step after sleeping 2 ms", ms[0]);
  cr_assert_geq(ms[1], 1.0, "push_pull %g ms per step after sleeping 1 ms", ms[1]);
  cr_assert_float_eq(ms[3], ms[0] + ms[1] + ms[2], 1e-9);
  cr_assert_eq(t.total_steps, 2);
}

Test(timing, a_new_window_starts_after_each_take) {
  tfx_timing t;
  tfx_timing_init(&t);
  step(&t, 0, 0);
  const char *names[TFX_TIMING_N + 1];
  double ms[TFX_TIMING_N + 1];
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 4);
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 0, "the window was not reset");
  step(&t, 3000, 0);
  cr_assert_eq(tfx_timing_take_window(&t, names, ms), 4);
  cr_assert_geq(ms[0], 3.0, "the second window holds only its own step");
  cr_assert_eq(t.total_steps, 2, "totals run across windows");
  tfx_timing_log(&t);
}
