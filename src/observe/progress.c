/* Progress line. */
#include "observe/progress.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"

void tfx_progress_init(tfx_progress *p, int64_t start_step, int64_t max_steps) {
  p->start_ms = p->last_ms = tfx_now_ms();
  p->start_step = p->last_step = start_step;
  p->max_steps = max_steps;
  p->tty = isatty(STDOUT_FILENO);
}

double tfx_progress_rate(tfx_progress *p, int64_t step) {
  int64_t now = tfx_now_ms();
  double dt = (double)(now - p->last_ms) / 1000.0, rate = dt > 0 ? (double)(step - p->last_step) / dt : 0;
  p->last_ms = now;
  p->last_step = step;
  return rate;
}

void tfx_progress_format(const tfx_progress *p, int64_t step, double loss, double acc, double ex_per_s, double elapsed,
                         char *out, size_t n) {
  double per_step = step > p->start_step ? elapsed / (double)(step - p->start_step) : 0;
  double eta = per_step * (double)(p->max_steps - step);
  char accs[16] = "-", of[32] = "", etas[32] = "-";
  if (!isnan(acc)) {
    snprintf(accs, sizeof accs, "%.4f", acc);
  }
  if (p->max_steps < TFX_PROGRESS_ENDLESS) { /* a followed stream's max_steps is no end anyone waits for */
    snprintf(of, sizeof of, "/%lld", (long long)p->max_steps);
  }
  if (p->max_steps < TFX_PROGRESS_ENDLESS && eta >= 0 && eta < TFX_PROGRESS_MAX_ETA_S) {
    snprintf(etas, sizeof etas, "%.0fs", eta);
  }
  snprintf(out, n, "step %lld%s  loss %.4f  eval_acc %s  %.0f ex/s  ETA %s", (long long)step, of, loss, accs, ex_per_s,
           etas);
}

void tfx_progress_show(const tfx_progress *p, int64_t step, double loss, double acc, double ex_per_s) {
  char line[256];
  tfx_progress_format(p, step, loss, acc, ex_per_s, (double)(tfx_now_ms() - p->start_ms) / 1000.0, line, sizeof line);
  printf("%s%s%s", p->tty ? "\r\033[K" : "", line, p->tty ? "" : "\n");
  fflush(stdout);
}

void tfx_progress_done(const tfx_progress *p, int64_t step, double acc, const char *why) {
  double elapsed = (double)(tfx_now_ms() - p->start_ms) / 1000.0;
  char accs[128];
  if (isnan(acc)) {
    snprintf(accs, sizeof accs, "n/a (%s)", why ? why : "no evaluation");
  } else {
    snprintf(accs, sizeof accs, "%.4f", acc);
  }
  printf("%sdone: step %lld, eval accuracy %s, %.1f s\n", p->tty ? "\n" : "", (long long)step, accs, elapsed);
  fflush(stdout);
}
