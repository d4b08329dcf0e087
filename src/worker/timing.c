/* The worker's step-time breakdown (see timing.h). */
#include "worker/timing.h"

#include <string.h>

#include "common/clock.h"
#include "common/log.h"

static const char *const phase_keys[TFX_TIMING_N] = {"row_pull_ms", "compute_ms", "push_ms", "wait_ms", "other_ms"};

void tfx_timing_init(tfx_timing *t) {
  memset(t, 0, sizeof *t);
  t->last_ns = tfx_now_ns();
}

void tfx_timing_mark(tfx_timing *t, tfx_timing_phase p) {
  int64_t now = tfx_now_ns(), d = now - t->last_ns;
  t->last_ns = now;
  t->window_ns[p] += d;
  t->total_ns[p] += d;
  if (p == TFX_TIMING_WAIT) {
    t->window_steps++;
    t->total_steps++;
  }
}

int tfx_timing_take_window(tfx_timing *t, const char **names, double *ms_per_step) {
  if (t->window_steps == 0) {
    return 0;
  }
  double step = 0;
  for (int p = 0; p < TFX_TIMING_N; p++) {
    names[p] = phase_keys[p];
    ms_per_step[p] = (double)t->window_ns[p] / 1e6 / (double)t->window_steps;
    step += ms_per_step[p];
    t->window_ns[p] = 0;
  }
  names[TFX_TIMING_N] = "push_pull_ms";
  ms_per_step[TFX_TIMING_N] = ms_per_step[TFX_TIMING_PUSH] + ms_per_step[TFX_TIMING_WAIT];
  names[TFX_TIMING_N + 1] = "step_ms";
  ms_per_step[TFX_TIMING_N + 1] = step;
  t->window_steps = 0;
  return TFX_TIMING_KEYS;
}

void tfx_timing_log(const tfx_timing *t) {
  double ms[TFX_TIMING_N], step = 0;
  for (int p = 0; p < TFX_TIMING_N; p++) {
    ms[p] = t->total_steps ? (double)t->total_ns[p] / 1e6 / (double)t->total_steps : 0;
    step += ms[p];
  }
  double share = step > 0 ? 100 / step : 0;
  tfx_log(TFX_LOG_INFO, "WORKER-TIMING",
          "steps=%lld step_ms=%.4f row_pull_ms=%.4f compute_ms=%.4f push_ms=%.4f wait_ms=%.4f other_ms=%.4f "
          "(row_pull %.0f%%, compute %.0f%%, push %.0f%%, wait %.0f%%, other %.0f%%)",
          (long long)t->total_steps, step, ms[0], ms[1], ms[2], ms[3], ms[4], ms[0] * share, ms[1] * share,
          ms[2] * share, ms[3] * share, ms[4] * share);
}
