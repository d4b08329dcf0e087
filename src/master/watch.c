/* checkpoint.keep_best and training.early_stopping on the chief's evaluations (the rules are src/train/watch.c):
 * a new best is checkpointed at once and named in RUN/checkpoints/best.json (src/store/best.c); spent patience
 * asks the loop to finish the run. Calls ckpt.c; evaluate.c and loop.c call it. */
#include "train/watch.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "master/master_impl.h"
#include "store/best.h"
#include "store/ckpt.h"
#include "store/export.h"

void master__watch_init(master *m) {
  const tfx_config *c = &m->cfg;
  tfx_watch_init(&m->best, c->keep_best_metric, c->keep_best_mode, 0, 0);
  tfx_watch_init(&m->early, c->stop_metric, c->stop_mode, c->stop_min_delta, c->stop_patience);
  tfx_best b;
  if (c->keep_best_metric[0] && tfx_best_read(m->n->run_dir, &b, NULL) == TFX_OK &&
      !strcmp(b.metric, c->keep_best_metric)) {
    tfx_watch_restore(&m->best, b.step, b.value);
  }
}

/* Names the best evaluation's checkpoint in best.json; with export.on_best, exports it. The checkpoint is the one
 * the evaluation scored (evaluate.c scores checkpoints with keep_best), or the final one once the workers are
 * stopped; an evaluation of live variables (lazy tables) is checkpointed at the first step every ps can still
 * write, a few steps later. */
static int keep_best(master *m, int64_t version, double value, tfx_err *err) {
  const tfx_config *c = &m->cfg;
  int64_t at = version, have_step;
  int have_ps;
  char dir[1100];
  tfx_ckpt_dir(m->n->run_dir, version, dir, sizeof dir);
  int scored = tfx_ckpt_verify(dir, &have_step, &have_ps, NULL) == TFX_OK; /* evaluate.c scored this checkpoint */
  int rc = scored || m->finished ? master__checkpoint(m, version, err) : master__checkpoint_now(m, &at, err);
  tfx_best b = {.maximize = m->best.maximize, .value = value, .step = at, .eval_step = version};
  snprintf(b.metric, sizeof b.metric, "%s", c->keep_best_metric);
  if (!rc && !(rc = tfx_best_write(m->n->run_dir, &b, err))) {
    tfx_ckpt_prune(m->n->run_dir, c->keep_max); /* the previous best goes unless among the newest */
    tfx_log(TFX_LOG_INFO, "MASTER-BEST", "checkpoint %lld is the best so far: eval %s %.6g at step %lld",
            (long long)at, b.metric, value, (long long)version);
  }
  if (!rc && c->export_on_best) {
    rc = tfx_export_checkpoint(c, m->n->run_dir, at, "best", err);
  }
  return rc;
}

void master__watch_eval(master *m, int64_t version, const tfx_eval_result *r) {
  const tfx_config *c = &m->cfg;
  tfx_watch next = m->best;
  double value = tfx_eval_metric(r, c->keep_best_metric);
  if (tfx_watch_update(&next, version, value)) {
    tfx_err err;
    if (keep_best(m, version, value, &err)) { /* not the best on disk: a later evaluation may still be */
      tfx_log(TFX_LOG_WARN, "MASTER-BEST-FAIL", "the best evaluation (step %lld) was not kept: %s", (long long)version,
              err.msg);
    } else {
      m->best = next;
    }
  }
  tfx_watch_update(&m->early, version, tfx_eval_metric(r, c->stop_metric));
  if (tfx_watch_exhausted(&m->early) && !m->early_stop && !m->finished) {
    m->early_stop = 1;
    tfx_log(TFX_LOG_INFO, "MASTER-EARLY-STOP",
            "early stopping at step %lld: eval %s has not improved on its best %.6g (step %lld) for %d evaluations "
            "(patience %d, min_delta %g)",
            (long long)version, c->stop_metric, m->early.best, (long long)m->early.best_step, m->early.since,
            c->stop_patience, c->stop_min_delta);
  }
}
