/* The worker's training data: opened at the position a run resumes from, and opened again at the step a rollback
 * went back to, so a worker that lived through a rollback reads what a restarted one would; and the pull of the
 * values that notices the rollback. */
#include "common/log.h"
#include "train/labels.h"
#include "worker/worker_impl.h"

/* The batches of this worker's share that the global step `step` stands for: every step takes one from each
 * worker in sync; in async the steps are shared out among the workers. */
static int64_t batches_at(const worker *w, int64_t step) {
  return w->cfg.mode == TFX_MODE_SYNC ? step : step / w->n_workers;
}

int worker__open_train(worker *w, int64_t step, tfx_idle_fn idle, tfx_err *err) {
  int rc = tfx_labels_train_input(w->model, &w->cfg, w->n->index, w->n_workers, &w->data, &w->batcher, err);
  if (rc) {
    return rc;
  }
  int64_t done = batches_at(w, step);
  tfx_batcher_set_idle(w->batcher, idle, w);
  tfx_batcher_skip(w->batcher, done * w->cfg.accumulate, w->cfg.batch_size);
  /* examples_seen counts the run's life: the batches before `done`, then this process's steps from here on */
  w->seen_base = (done - w->steps) * w->cfg.accumulate * w->cfg.batch_size;
  return TFX_OK;
}

int worker__pull(worker *w, tfx_err *err) {
  int64_t before = w->version;
  int rc = tfx_psclient_pull(w->ps, 0, &w->version, err);
  if (rc == TFX_OK && w->version < before) {
    w->rewind = 1; /* kept until the rewind, also when the ps do not agree yet */
  }
  /* Two ps a step apart: a worker died between its pushes of that step, and only a push completes it (waiting
   * here, every worker restarted in that window waited forever); further apart: a rollback under way. */
  if (rc == TFX_OK && w->cfg.mode == TFX_MODE_SYNC && tfx_psclient_steps_apart(w->ps) > 1) {
    rc = tfx_err_set(err, TFX_ESTATE, "the ps answer steps apart (the chief is rolling them back)");
  }
  return rc;
}

int worker__rewind(worker *w, tfx_idle_fn idle, tfx_err *err) {
  w->rewind = 0;
  w->lent = 0; /* a lent batch belongs to the batcher that goes */
  tfx_log(TFX_LOG_WARN, "WORKER-REWIND",
          "the cluster went back to step %lld: reading the training data again from batch %lld of this worker's "
          "share, as a restarted worker would",
          (long long)w->version, (long long)(batches_at(w, w->version) * w->cfg.accumulate));
  tfx_batcher_destroy(w->batcher);
  tfx_dataset_destroy(w->data);
  w->batcher = NULL;
  w->data = NULL;
  return worker__open_train(w, w->version, idle, err);
}
