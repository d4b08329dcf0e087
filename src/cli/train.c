/* The single-process trainer: the same model, data pipeline and update rules as the cluster, in one loop. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <tfx/plugin.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/mem.h"
#include "config/plugin.h"
#include "data/dataset.h"
#include "data/epochs.h"
#include "data/source.h"
#include "net/net.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "observe/events.h"
#include "observe/metrics.h"
#include "observe/progress.h"
#include "store/best.h"
#include "store/ckpt.h"
#include "store/export.h"
#include "store/runconfig.h"
#include "store/warmstart.h"
#include "store/weights.h"
#include "train/evaluate.h"
#include "train/labels.h"
#include "train/pmetrics.h"
#include "train/step.h"
#include "train/watch.h"

typedef struct trainer {
  tfx_config cfg;
  tfx_model *model, *eval_model;
  tfx_optim opt;
  float *slots[2 * TFX_MAX_LAYERS][2];
  float *acc[2 * TFX_MAX_LAYERS];
  tfx_dataset *train, *eval, *valsets[TFX_MAX_VALSETS];
  tfx_batcher *batcher;
  tfx_metrics *metrics;
  tfx_events *events;
  float *x;
  int32_t *y;
  int64_t step, last_ckpt_ms;
  int64_t last_write_ms; /* when the last periodic checkpoint started (0: none yet in this process) */
  const char *run_dir;
  struct tfx_plugin_handle *plugin;
  int stop, resume;
  pid_t ckpt_pid;    /* a periodic checkpoint being written in the background, or 0 */
  int64_t ckpt_step; /* its step */
  int ckpt_done;     /* that child has exited (status in ckpt_status), not yet reaped */
  int ckpt_status;
  int ckpt_due; /* a periodic checkpoint is asked for and waits for the previous one to finish */
  int64_t saved_step; /* the step of the newest checkpoint written or being written (-1: none) */
  int64_t eval_step;  /* the step last evaluated (-1: none) */
  tfx_watch best, early; /* checkpoint.keep_best, training.early_stopping */
  tfx_pmetrics *pm;      /* the plugin's own metrics, or NULL */
  tfx_pm_state pm_train; /* their states over the training steps since the last train record */
} trainer;

/* A metrics line and the same scalars in the TensorBoard event file. */
static void record(trainer *t, const char *kind, int64_t step, const char *const *names, const double *values, int n,
                   const char *json) {
  tfx_metrics_write_json(t->metrics, kind, step, names, values, n, json);
  tfx_events_write(t->events, kind, step, names, values, n);
}

static int reap(trainer *t, tfx_err *err);

static void trainer_free(trainer *t) {
  tfx_err ignored = {0};
  reap(t, &ignored); /* a run that failed still lets its last periodic checkpoint finish */
  for (int i = 0; t->model && i < tfx_model_nvars(t->model); i++) {
    free(t->slots[i][0]);
    free(t->slots[i][1]);
    free(t->acc[i]);
  }
  tfx_model_destroy(t->model);
  tfx_model_destroy(t->eval_model);
  tfx_batcher_destroy(t->batcher);
  tfx_dataset_destroy(t->train);
  tfx_dataset_destroy(t->eval);
  for (int i = 0; i < TFX_MAX_VALSETS; i++) {
    tfx_dataset_destroy(t->valsets[i]);
  }
  tfx_metrics_close(t->metrics);
  tfx_events_close(t->events);
  tfx_pmetrics_close(t->pm);
  free(t->x);
  free(t->y);
}

/* Saves variables and slots as a one-shard checkpoint (ps-0) with its manifest. */
static int save(trainer *t, tfx_err *err) {
  int nv = tfx_model_nvars(t->model), ns = tfx_optim_slots(&t->opt), n = 0;
  tfx_ckpt_entry *e = calloc((size_t)nv * 3, sizeof *e);
  if (!e) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; i < nv; i++) {
    tfx_var *v = tfx_model_var(t->model, i);
    tfx_ckpt_slice slice = {.key = v->name,
                            .rank = v->rank,
                            .dims = v->shape,
                            .row_end = v->shape[0],
                            .version = (uint64_t)t->step,
                            .count = v->count,
                            .value = v->value,
                            .slots = t->slots[i],
                            .n_slots = ns};
    n += tfx_ckpt_slice_entries(&e[n], &slice);
  }
  char dir[1100], path[1200];
  tfx_ckpt_dir(t->run_dir, t->step, dir, sizeof dir);
  tfx_ckpt_part_path(path, sizeof path, dir, 0, TFX_CKPT_SHARD);
  uint32_t crc;
  uint64_t bytes;
  int rc = tfx_mkdirs(dir, err);
  if (!rc) {
    rc = tfx_ckpt_write(path, t->step, e, n, &crc, &bytes, err);
  }
  if (!rc) {
    rc = tfx_ckpt_write_manifest(dir, t->step, 1, &crc, &bytes, err);
  }
  if (!rc && t->cfg.export_every_ckpt) {
    rc = tfx_export_checkpoint(&t->cfg, t->run_dir, t->step, NULL, err);
  }
  free(e);
  if (!rc) {
    tfx_ckpt_prune(t->run_dir, t->cfg.keep_max);
  }
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "TRAIN-CKPT", "checkpoint at step %lld: %s", (long long)t->step, dir);
  }
  return rc;
}

/* Puts the values and slots back onto huge pages once the checkpoint's forked copy is gone: the copy-on-write
 * of its snapshot split them into small pages, and the kernel's slow merge left a trainer at ~0.7x its speed for
 * the rest of a run (Debian LR: 226 k examples/s without periodic checkpoints, 162 k with them). */
static void rehuge(trainer *t) {
  for (int i = 0; i < tfx_model_nvars(t->model); i++) {
    tfx_var *v = tfx_model_var(t->model, i);
    tfx_mem_collapse(v->storage, v->lazy ? v->mapped : sizeof(float) * v->count);
    for (int s = 0; s < tfx_optim_slots(&t->opt); s++) {
      tfx_mem_collapse(t->slots[i][s], sizeof(float) * v->count);
    }
  }
}

/* Waits for the background checkpoint, if one is being written: TFX_ESYS when it failed (its own ERROR line
 * says why), else the checkpoint hook runs for its step. */
static int reap(trainer *t, tfx_err *err) {
  if (!t->ckpt_pid) {
    return TFX_OK;
  }
  int status = t->ckpt_status, seen = t->ckpt_done;
  pid_t pid = t->ckpt_pid;
  t->ckpt_pid = 0;
  while (!t->ckpt_done && waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return tfx_err_sys(err, TFX_ESYS, "waiting for the checkpoint at step %lld", (long long)t->ckpt_step);
    }
  }
  t->ckpt_done = 0;
  if (!seen) {
    rehuge(t);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    return tfx_err_set(err, TFX_ESYS, "the checkpoint at step %lld was not written (see the error above)",
                       (long long)t->ckpt_step);
  }
  t->stop |= tfx_plugin_hook(t->plugin, TFX_HOOK_CHECKPOINT, t->ckpt_step, NAN, NAN, t->run_dir);
  return TFX_OK;
}

/* Whether the background checkpoint is still being written (its exit, once seen, is kept for reap). */
static int writing(trainer *t) {
  if (!t->ckpt_pid || t->ckpt_done) {
    return 0;
  }
  t->ckpt_done = waitpid(t->ckpt_pid, &t->ckpt_status, WNOHANG) == t->ckpt_pid;
  if (t->ckpt_done) {
    rehuge(t);
  }
  return !t->ckpt_done;
}

/* The checkpoint at the current step, written now; training goes on only after it is on disk. */
static int save_now(trainer *t, tfx_err *err) {
  int rc = reap(t, err);
  if (!rc && t->saved_step != t->step && !(rc = save(t, err))) { /* one at a step is kept (keep_best took it) */
    t->saved_step = t->step;
    t->stop |= tfx_plugin_hook(t->plugin, TFX_HOOK_CHECKPOINT, t->step, NAN, NAN, t->run_dir);
  }
  return rc;
}

/* A periodic checkpoint, written by a forked copy of this process from its copy-on-write snapshot of the values
 * and slots while training goes on: a large table costs no pause. The child ignores the terminal's signals (a
 * Ctrl-C stops the trainer, which waits for it, then writes its final checkpoint) and holds no descriptor of
 * ours (the run lock goes with this process). Without fork, the checkpoint is written in place. */
static int save_background(trainer *t, tfx_err *err) {
  int rc = reap(t, err);
  if (rc) {
    return rc;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    return save_now(t, err);
  }
  if (pid == 0) {
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    close_range(3, ~0U, 0);
    tfx_err e = {0};
    if (save(t, &e)) {
      tfx_log(TFX_LOG_ERROR, "TRAIN-CKPT-FAIL", "checkpoint at step %lld: %s", (long long)t->step, e.msg);
      _exit(1);
    }
    _exit(0);
  }
  t->ckpt_pid = pid;
  t->ckpt_step = t->step;
  t->saved_step = t->step;
  return TFX_OK;
}

/* The weight named name in ws, or NULL. */
static const tfx_weight *weight_named(const tfx_weights *ws, const char *name) {
  for (int i = 0; i < ws->n; i++) {
    if (!strcmp(ws->w[i].name, name)) {
      return &ws->w[i];
    }
  }
  return NULL;
}

/* Resumes from the newest usable checkpoint, whoever wrote it: this trainer (one shard) or a cluster (variables
 * partitioned over several ps, joined back whole); optimizer slots are restored where the checkpoint has them. */
static int restore(trainer *t, tfx_err *err) {
  char dir[1100];
  int64_t step;
  int found = t->resume ? tfx_ckpt_resume_point(t->run_dir, &step, dir, sizeof dir, err) : TFX_ENOTFOUND;
  if (found) {
    return found == TFX_ENOTFOUND ? TFX_OK : found; /* none: a fresh run; none usable: refuse to start over */
  }
  tfx_weights ws;
  int rc = tfx_weights_with_slots(dir, &ws, err);
  for (int i = 0; !rc && i < tfx_model_nvars(t->model); i++) {
    tfx_var *v = tfx_model_var(t->model, i);
    const tfx_weight *w = weight_named(&ws, v->name);
    if (!w || w->count != v->count) {
      rc = tfx_err_set(err, TFX_ESHAPE, "%s: variable %s missing or of another size", dir, v->name);
      break;
    }
    memcpy(v->value, w->data, sizeof(float) * v->count);
    for (int s = 0; s < tfx_optim_slots(&t->opt); s++) {
      char name[200];
      snprintf(name, sizeof name, "%s@%s", v->name, tfx_optim_slot_name(s));
      const tfx_weight *sw = weight_named(&ws, name);
      if (sw && sw->count == v->count) {
        memcpy(t->slots[i][s], sw->data, sizeof(float) * v->count);
      }
    }
  }
  if (!rc) {
    t->step = step;
    t->saved_step = step;
    tfx_log(TFX_LOG_INFO, "TRAIN-RESUME", "resumed from %s at step %lld", dir, (long long)step);
  }
  tfx_weights_fini(&ws);
  return rc;
}

/* The model, its evaluation twin (batches of 1000), a warm start on a fresh run, optimizer slots and the
 * accumulation buffers. */
static int setup_model(trainer *t, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  int rc;
  if ((rc = tfx_model_create(c, c->batch_size, &t->model, err)) ||
      (rc = tfx_model_create(c, 1000, &t->eval_model, err))) {
    return rc;
  }
  tfx_model_init_vars(t->model, (uint64_t)c->seed);
  /* A batch reads the rows of lazy tables it touches, gathered from the model's own tables as a worker gathers
   * them from its ps (tfx_compute_gradients). */
  tfx_model_set_rows(t->model, TFX_ROWS_BATCH);
  char dir[1100];
  int64_t at;
  if (c->warm_from[0] && tfx_ckpt_latest(t->run_dir, &at, dir, sizeof dir, NULL) != TFX_OK &&
      (rc = tfx_warm_start(c, t->model, NULL, err))) {
    return rc;
  }
  tfx_optim_init(&t->opt, c);
  for (int i = 0; i < tfx_model_nvars(t->model); i++) {
    size_t n = tfx_model_var(t->model, i)->count;
    for (int s = 0; s < tfx_optim_slots(&t->opt); s++) {
      if (!(t->slots[i][s] = tfx_calloc_large(n, sizeof(float)))) {
        return tfx_err_set(err, TFX_ENOMEM, "optimizer slots of %s (%zu values): out of memory",
                           tfx_model_var(t->model, i)->name, n);
      }
    }
    if (c->accumulate > 1 && tfx_model_var(t->model, i)->sparse) {
      return tfx_err_set(err, TFX_ECONFIG, "training.accumulate > 1 with the row-sparse variable %s is not supported",
                         tfx_model_var(t->model, i)->name);
    }
    if (c->accumulate > 1 && !(t->acc[i] = calloc(n, sizeof(float)))) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  return TFX_OK;
}

/* The training input, the eval set, the named validation sets and the batch buffers. */
static int setup_data(trainer *t, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  size_t dim = tfx_model_input_size(t->model);
  int rc;
  if ((rc = tfx_labels_train_input(t->model, c, 0, 1, &t->train, &t->batcher, err)) ||
      (rc = tfx_labels_load(t->model, c, 1, &t->eval, err))) {
    return rc;
  }
  for (int i = 0; i < c->n_valsets; i++) {
    tfx_config vc = *c;
    snprintf(vc.eval_images, sizeof vc.eval_images, "%s", c->valsets[i].images);
    snprintf(vc.eval_labels, sizeof vc.eval_labels, "%s", c->valsets[i].labels);
    if ((rc = tfx_labels_load(t->model, &vc, 1, &t->valsets[i], err))) {
      return rc;
    }
  }
  int sparse = tfx_model_sparse_input(t->model) && c->n_features == 0; /* a LibSVM row has no dense part */
  t->x = sparse ? NULL : malloc(sizeof(float) * dim * (size_t)c->batch_size);
  t->y = malloc(sizeof(int32_t) * (size_t)c->batch_size);
  if ((!sparse && !t->x) || !t->y) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  rc = tfx_pmetrics_open(c, &t->pm, err);
  tfx_pm_state_init(t->pm, &t->pm_train);
  return rc;
}

/* The watches from the experiment; a resumed run's best is the one best.json names (same metric). */
static void setup_watch(trainer *t) {
  const tfx_config *c = &t->cfg;
  tfx_watch_init(&t->best, c->keep_best_metric, c->keep_best_mode, 0, 0);
  tfx_watch_init(&t->early, c->stop_metric, c->stop_mode, c->stop_min_delta, c->stop_patience);
  tfx_best b;
  if (c->keep_best_metric[0] && tfx_best_read(t->run_dir, &b, NULL) == TFX_OK &&
      !strcmp(b.metric, c->keep_best_metric)) {
    tfx_watch_restore(&t->best, b.step, b.value);
  }
}

static int setup(trainer *t, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  int rc;
  if ((rc = setup_model(t, err)) || (rc = setup_data(t, err))) {
    return rc;
  }
  char *json = tfx_config_to_json(c); /* checked (a resume keeps its model) before anything is written */
  rc = tfx_mkdirs(t->run_dir, err);
  rc = rc ? rc : tfx_run_save_config(t->run_dir, "config.json", json, t->resume, err);
  free(json);
  if (rc || (rc = tfx_metrics_open(t->run_dir, &t->metrics, err)) ||
      (rc = tfx_events_open(t->run_dir, &t->events, err))) {
    return rc;
  }
  if (!rc) {
    rc = restore(t, err);
  }
  setup_watch(t);
  if (!rc) {
    tfx_batcher_skip(t->batcher, t->step * c->accumulate, c->batch_size);
  }
  return rc;
}

/* Lends the trained values to the evaluation model (which has its own, larger, batch buffers): it only reads
 * them, so no second copy of a large table is made. */
static void sync_eval_model(trainer *t) {
  for (int i = 0; i < tfx_model_nvars(t->model); i++) {
    tfx_model_var(t->eval_model, i)->value = tfx_model_var(t->model, i)->value;
  }
}

/* The best checkpoint so far: a checkpoint at this step (unless one is written or being written here), best.json
 * naming it, the previous best pruned unless among the newest keep_max, and with export.on_best its export. */
static int keep_best(trainer *t, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  int rc = t->saved_step == t->step ? reap(t, err) : save_now(t, err);
  tfx_best b = {.maximize = t->best.maximize, .value = t->best.best, .step = t->step, .eval_step = t->step};
  snprintf(b.metric, sizeof b.metric, "%s", c->keep_best_metric);
  if (!rc && !(rc = tfx_best_write(t->run_dir, &b, err))) {
    tfx_ckpt_prune(t->run_dir, c->keep_max);
    tfx_log(TFX_LOG_INFO, "TRAIN-BEST", "step %lld is the best checkpoint so far: eval %s %.6g", (long long)t->step,
            b.metric, b.value);
  }
  if (!rc && c->export_on_best) {
    rc = tfx_export_checkpoint(c, t->run_dir, t->step, "best", err);
  }
  return rc;
}

/* Feeds an evaluation to the watches: a new best is kept; early stopping's patience spent stops the loop. */
static int watch_eval(trainer *t, const tfx_eval_result *r, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  int rc = TFX_OK;
  if (tfx_watch_update(&t->best, t->step, tfx_eval_metric(r, c->keep_best_metric))) {
    rc = keep_best(t, err);
  }
  tfx_watch_update(&t->early, t->step, tfx_eval_metric(r, c->stop_metric));
  if (!rc && tfx_watch_exhausted(&t->early) && !t->stop) {
    t->stop = 1;
    tfx_log(TFX_LOG_INFO, "TRAIN-EARLY-STOP",
            "early stopping at step %lld: eval %s has not improved on its best %.6g (step %lld) for %d evaluations "
            "(patience %d, min_delta %g)",
            (long long)t->step, c->stop_metric, t->early.best, (long long)t->early.best_step, t->early.since,
            c->stop_patience, c->stop_min_delta);
  }
  return rc;
}

/* Evaluates the current weights on the eval data into *acc; eval data the model cannot score (a label outside
 * its classes, an id outside a table) is logged as an error and gives no record and a NaN accuracy. Fails only
 * when a best checkpoint (keep_best) could not be written. */
static int evaluate(trainer *t, double *acc, tfx_err *fail) {
  sync_eval_model(t);
  tfx_eval_result r;
  tfx_err err = {0};
  t->eval_step = t->step;
  if (tfx_evaluate_range(t->eval_model, t->eval, 1000, 0, t->eval->n, t->pm, &r, &err)) {
    tfx_log(TFX_LOG_ERROR, "TRAIN-EVAL-DATA", "step %lld: eval data %s not scored, no accuracy recorded: %s",
            (long long)t->step, tfx_config_eval_file(&t->cfg), err.msg);
    *acc = NAN;
    return TFX_OK;
  }
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, t->cfg.metrics, &r);
  tfx_eval_report_add_plugin(&rep, t->pm, &r, "eval");
  char *json = tfx_eval_confusion_json(t->cfg.metrics, &r);
  record(t, "eval", t->step, rep.names, rep.values, rep.n, json);
  free(json);
  tfx_log(TFX_LOG_INFO, "TRAIN-EVAL", "step %lld eval loss %.4f accuracy %.4f", (long long)t->step, r.loss, r.accuracy);
  t->stop |= tfx_plugin_hook(t->plugin, TFX_HOOK_EVAL, t->step, r.loss, r.accuracy, t->run_dir);
  *acc = r.accuracy;
  return watch_eval(t, &r, fail);
}

/* Evaluates the named validation sets due at this step (every one with force) on the current weights. */
static void validate(trainer *t, int force) {
  for (int i = 0; i < t->cfg.n_valsets; i++) {
    const tfx_valset *v = &t->cfg.valsets[i];
    int due = force || (t->step > 0 && v->every_steps && t->step % v->every_steps == 0) || (v->first && t->step == 0);
    if (!due) {
      continue;
    }
    sync_eval_model(t);
    tfx_eval_result r;
    tfx_err err = {0};
    if (tfx_evaluate_agg(t->eval_model, t->valsets[i], 1000, (size_t)v->batches * 1000, v->agg, t->pm, &r, &err)) {
      tfx_log(TFX_LOG_ERROR, "TRAIN-VALIDATE-DATA", "step %lld: validation set %s (%s) not scored: %s",
              (long long)t->step, v->name, v->labels[0] ? v->labels : v->images, err.msg);
      continue;
    }
    char kind[64];
    snprintf(kind, sizeof kind, "validation.%s", v->name);
    tfx_eval_report rep;
    tfx_eval_report_init(&rep, tfx_valset_metrics(v, t->cfg.metrics), &r);
    tfx_eval_report_add_plugin(&rep, t->pm, &r, kind);
    char *json = tfx_eval_confusion_json(tfx_valset_metrics(v, t->cfg.metrics), &r);
    record(t, kind, t->step, rep.names, rep.values, rep.n, json);
    free(json);
  }
}

/* One optimizer step over `accumulate` minibatches; returns the mean loss and hits into *st. Fails, changing
 * nothing, when the input failed (a streamed file turned out corrupt). */
static int step_once(trainer *t, tfx_step_stats *st, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  int nv = tfx_model_nvars(t->model);
  tfx_grad_step g = {c->batch_size, c->accumulate, c->clip_value, c->clip_norm, t->x, t->y, t->acc, NULL,
                     t->pm, &t->pm_train};
  tfx_step_stats sum;
  tfx_compute_gradients(t->model, t->batcher, &g, (uint64_t)t->step, &sum);
  int rc = tfx_batcher_status(t->batcher, err), n_dense = 0;
  tfx_optim_target dense[2 * TFX_MAX_LAYERS + TFX_MAX_VARIABLES];
  for (int i = 0; !rc && i < nv; i++) {
    tfx_var *v = tfx_model_var(t->model, i);
    if (!v->trainable) {
      continue;
    }
    if (v->sparse) {
      tfx_optim_apply_rows(&t->opt, t->step, v->value, v->grad, 1.0f, t->slots[i], v->rows, v->n_rows,
                           v->count / (size_t)v->shape[0]);
    } else {
      dense[n_dense++] = (tfx_optim_target){v->value, v->grad, t->slots[i], v->count};
    }
  }
  /* The dense variables in one update split over the model's worker pool (same result as one by one). */
  if (!rc) {
    tfx_optim_apply_all(tfx_model_par(t->model), &t->opt, t->step, dense, n_dense, 1.0f);
  }
  *st = sum;
  return rc;
}

/* The sums of the steps since the last train record. */
typedef struct window {
  double loss, hits, seen, steps;
} window;

/* Counts a step; every report_every steps and at max_steps, writes the window's train record, shows progress and
 * runs the step hook. */
static void count_step(trainer *t, window *win, const tfx_step_stats *st, tfx_progress *prog, int64_t max_steps,
                       double acc) {
  const tfx_config *c = &t->cfg;
  win->loss += st->loss;
  win->hits += st->correct;
  win->seen += st->count;
  win->steps++;
  if (t->step % c->report_every == 0 || t->step == max_steps) {
    const char *names[4 + TFX_METRICS_MAX] = {"loss", "accuracy", "examples_per_sec", "learning_rate"};
    double eps = tfx_progress_rate(prog, t->step) * c->batch_size * c->accumulate;
    double vals[4 + TFX_METRICS_MAX] = {win->loss / win->steps, win->hits / win->seen, eps,
                                        tfx_optim_lr(&t->opt, t->step)};
    int n = 4 + tfx_pmetrics_values(t->pm, &t->pm_train, "train", names + 4, vals + 4, TFX_METRICS_MAX);
    tfx_pm_state_init(t->pm, &t->pm_train);
    record(t, "train", t->step, names, vals, n, NULL);
    tfx_progress_show(prog, t->step, vals[0], acc, eps);
    t->stop |= tfx_plugin_hook(t->plugin, TFX_HOOK_STEP, t->step, vals[0], vals[1], t->run_dir);
    memset(win, 0, sizeof *win);
  }
}

/* Asks for a periodic checkpoint (by steps or by time) and starts one in the background when it may. */
static int checkpoint_if_due(trainer *t, int64_t max_steps, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  int by_time = c->ckpt_every_secs > 0 && tfx_now_ms() - t->last_ckpt_ms >= c->ckpt_every_secs * 1000;
  if (((c->ckpt_every_steps && t->step % c->ckpt_every_steps == 0) || by_time) && t->step < max_steps) {
    t->ckpt_due = 1;
  }
  t->ckpt_due &= t->saved_step != t->step; /* keep_best has just taken this step's */
  if (t->step % 32 == 0 && !t->ckpt_due) {
    writing(t); /* a finished writer is noticed within 32 steps, its pages made huge again */
  }
  /* A checkpoint asked for at step s is taken at the first step >= s where the previous one is on disk and
   * checkpoint.min_interval_secs have passed since it started (a fast trainer asking every 1000 steps would
   * otherwise spend its time copying pages for the writer); the first one has no previous to wait for. */
  if (t->ckpt_due && t->step < max_steps && !writing(t) &&
      (!t->last_write_ms || tfx_now_ms() - t->last_write_ms >= c->ckpt_min_interval_secs * 1000)) {
    t->last_ckpt_ms = tfx_now_ms();
    t->last_write_ms = t->last_ckpt_ms;
    t->ckpt_due = 0;
    return save_background(t, err);
  }
  return TFX_OK;
}

static int loop(trainer *t, int64_t max_steps, tfx_err *err) {
  const tfx_config *c = &t->cfg;
  tfx_progress prog;
  tfx_progress_init(&prog, t->step, max_steps);
  window win = {0, 0, 0, 0};
  double acc = NAN;
  int rc = TFX_OK;
  if (c->validate_first && t->step == 0 && (rc = evaluate(t, &acc, err))) {
    return rc;
  }
  if (t->step == 0) {
    validate(t, 0);
  }
  if (c->ckpt_save_initial && t->step == 0 && (rc = save_now(t, err))) { /* checkpoint.save_initial */
    return rc;
  }
  t->stop |= tfx_plugin_hook(t->plugin, TFX_HOOK_TRAIN_BEGIN, t->step, NAN, NAN, t->run_dir);
  while (t->step < max_steps && !tfx_stop_requested() && !t->stop) {
    tfx_step_stats st;
    if ((rc = step_once(t, &st, err))) {
      return rc;
    }
    t->step++;
    if (!isfinite(st.loss) || st.loss > c->thres_loss) {
      return tfx_err_set(err, TFX_ELOSS,
                         "training loss %g at step %lld exceeds thres_loss %g; the last good checkpoint is kept",
                         st.loss, (long long)t->step, c->thres_loss);
    }
    count_step(t, &win, &st, &prog, max_steps, acc);
    if (c->eval_every_steps && t->step % c->eval_every_steps == 0 && t->step < max_steps &&
        (rc = evaluate(t, &acc, err))) {
      return rc;
    }
    if (t->step < max_steps) {
      validate(t, 0);
    }
    if ((rc = checkpoint_if_due(t, max_steps, err))) {
      return rc;
    }
  }
  rc = t->eval_step == t->step ? TFX_OK : evaluate(t, &acc, err); /* early stopping has just scored it */
  validate(t, 1);
  rc = rc ? rc : save_now(t, err); /* "done:" only once the final checkpoint is on disk (not before an ENOSPC) */
  if (!rc) {
    tfx_progress_done(&prog, t->step, acc, "eval data refused, see the log"); /* the only way to a NaN here */
  }
  tfx_plugin_hook(t->plugin, TFX_HOOK_TRAIN_END, t->step, NAN, acc, t->run_dir);
  return rc;
}

int tfx_train_run(tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  trainer t;
  memset(&t, 0, sizeof t);
  t.cfg = n->cfg;
  t.run_dir = n->run_dir;
  t.plugin = n->plugin;
  t.resume = n->resume;
  t.saved_step = -1;
  t.eval_step = -1;
  openblas_set_num_threads(t.cfg.threads);
  if (o->max_steps > 0) {
    t.cfg.max_steps = o->max_steps;
    t.cfg.max_steps_given = 1; /* as `local` does: config.json (and the run index) say where the run stops */
  }
  long long stop_at = tfx_hooks_stop_step(n->plugin);
  if (stop_at > 0 && stop_at < t.cfg.max_steps) {
    t.cfg.max_steps = stop_at; /* stop_at_step:N stops at N exactly, as TensorFlow's StopAtStepHook */
  }
  int64_t epoch_steps = 0; /* before setup, so the schedule and config.json see the capped max_steps */
  int rc = tfx_epochs_apply(&t.cfg, 0, &epoch_steps, err);
  int64_t max_steps = t.cfg.max_steps;
  if (!rc) {
    rc = setup(&t, err);
  }
  if (!rc && t.cfg.steps > 0) {
    max_steps = t.step + t.cfg.steps;
  }
  if (epoch_steps > 0 && epoch_steps < max_steps) {
    max_steps = epoch_steps; /* training.epochs counts from step 0 and caps --max-steps and training.steps */
  }
  t.last_ckpt_ms = tfx_now_ms();
  if (!rc) {
    int64_t start = tfx_now_ms();
    rc = loop(&t, max_steps, err);
    if (!rc) {
      tfx_log(TFX_LOG_INFO, "TRAIN-DONE", "trained to step %lld in %.1f s", (long long)t.step,
              (tfx_now_ms() - start) / 1000.0);
    }
  }
  trainer_free(&t);
  return rc;
}
