/* The worker: register, then pull -> forward/backward -> push on its data shard. */
#include "worker/worker.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "data/dataset.h"
#include "data/epochs.h"
#include "data/source.h"
#include "net/net.h"
#include "observe/notify.h"
#include "psclient/psclient.h"
#include "train/progressive.h"
#include "train/step.h"
#include "worker/timing.h"
#include "worker/worker_impl.h"
#include "train/labels.h"

/* Registers until the master answers start or stop (Envelope.run), within the deadline. */
static int register_with_master(worker *w, tfx_err *err) {
  tfx_notify_ready("worker: registering with the chief");
  int64_t deadline = tfx_now_ms() + (int64_t)w->cfg.register_timeout_s * 1000, last_log = 0;
  while (!tfx_stop_requested()) {
    worker__serve_control(w);
    tfx_envelope env;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REGISTER);
    tfx_err cerr;
    int rc = tfx_client_call(w->master, &env, NULL, 0, &w->plan, 1000, &cerr);
    if (rc == TFX_OK && w->plan.env->run == TFX__RUN_STATE__RUN_START) {
      return TFX_OK;
    }
    if (rc == TFX_OK && w->plan.env->run == TFX__RUN_STATE__RUN_STOP) {
      w->stop = 1;
      return TFX_OK;
    }
    tfx_inmsg_fini(&w->plan);
    if (rc == TFX_EPEER) {
      tfx_client_reset(w->master, NULL);
    }
    if (tfx_now_ms() > deadline) {
      return tfx_err_set(err, TFX_EPEER, "master at %s did not start the run within %d s",
                         tfx_client_endpoint(w->master), w->cfg.register_timeout_s);
    }
    if (tfx_now_ms() - last_log > 5000) {
      last_log = tfx_now_ms();
      tfx_log(TFX_LOG_INFO, "WORKER-WAIT", "waiting for the master at %s to start the run",
              tfx_client_endpoint(w->master));
    }
    tfx_notify_watchdog();
    usleep(200000);
  }
  return tfx_err_set(err, TFX_EINTR, "stopped while registering");
}

/* The ps links accept the frames the experiment from the master implies, as every process of the run derives them
 * (the sockets opened before it came keep the bound they were opened with). */
static int bound_messages(const worker *w, tfx_err *err) {
  size_t largest = 0, ids = 0, before = tfx_wire_max_frame();
  int rc = tfx_model_extent(&w->cfg, &largest, &ids, err);
  if (!rc) {
    tfx_wire_set_max_frame(tfx_net_message_bound(&w->cfg, largest, ids));
  }
  if (!rc && tfx_wire_max_frame() != before) {
    tfx_log(TFX_LOG_INFO, "NET-MAX-MESSAGE", "the ps links accept frames up to %zu bytes (from the experiment)",
            tfx_wire_max_frame());
  }
  return rc;
}

static int stream_idle(void *ctx);

/* The cluster's worker count: the chief's (its register reply), else the TF_CONFIG's (a chief before this
 * field); a sparse TF_CONFIG lists only this worker, so its own count may be short. */
static int count_workers(const worker *w) {
  const tfx_envelope *p = w->plan.env;
  for (size_t i = 0; i < p->n_stats; i++) {
    if (!strcmp(p->stats[i]->key, "workers") && p->stats[i]->value >= 1 && p->stats[i]->value <= 1e6) {
      int n = (int)p->stats[i]->value, listed = tfx_cluster_count(w->n->cluster, TFX_ROLE_WORKER);
      if (n != listed) {
        tfx_log(TFX_LOG_INFO, "WORKER-COUNT", "the chief counts %d workers where TF_CONFIG lists %d (a sparse "
                "cluster spec): this worker reads shard %d of %d", n, listed, w->n->index, n);
      }
      return n;
    }
  }
  return tfx_cluster_count(w->n->cluster, TFX_ROLE_WORKER);
}

/* The metrics computed on the worker: progressive validation (training.progressive_window, or a followed stream)
 * and the plugin's own (model.plugin_metrics), for reports and eval slices. */
static int open_metrics(worker *w, tfx_err *err) {
  int window = w->cfg.progressive_window ? w->cfg.progressive_window : w->cfg.train_follow[0] ? 10000 : 0;
  int multi = tfx_model_multi_label(w->model), cols = multi ? (int)tfx_model_output_size(w->model) : 1;
  int rc = window ? tfx_progressive_create((size_t)window, w->cfg.batch_size, cols, multi, &w->pv, err) : TFX_OK;
  if (!rc && window && !(w->pv_hist = malloc(2 * TFX_PROGRESSIVE_BINS * sizeof *w->pv_hist))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "progressive validation: out of memory for its histogram");
  }
  if (rc || (rc = tfx_pmetrics_open(&w->cfg, &w->pm, err))) {
    return rc;
  }
  tfx_pm_state_init(w->pm, &w->pm_win);
  w->eval.pm = w->pm;
  return TFX_OK;
}

static int setup(worker *w, tfx_err *err) {
  const tfx_envelope *p = w->plan.env;
  tfx_config_init(&w->cfg);
  int n_workers = count_workers(w), rc;
  int64_t epoch_steps = 0; /* the master sends max_steps already capped; the same budget again changes nothing */
  if ((rc = tfx_config_parse(&w->cfg, p->text ? p->text : "", "experiment from the master", err)) ||
      (rc = tfx_epochs_apply(&w->cfg, n_workers, &epoch_steps, err)) ||
      (rc = tfx_model_create(&w->cfg, w->cfg.batch_size, &w->model, err)) || (rc = bound_messages(w, err))) {
    return rc;
  }
  rc = tfx_psclient_create(w->n->cluster, p->shards, p->n_shards, w->model, w->cfg.request_timeout_s * 1000, &w->ps,
                           err);
  if (!rc) {
    tfx_psclient_set_replicas(w->ps, w->cfg.ps_replicas);
    tfx_psclient_set_abort(w->ps, worker__stop_asked, w);
  }
  if (!rc && tfx_psclient_has_lazy(w->ps)) {
    /* Lazy tables: the model reads each batch's rows, which the worker gathers from the ps before it computes
     * (gather_rows) or gets with the push-pull of the step before (rows_with_push). */
    tfx_model_set_rows(w->model, TFX_ROWS_BATCH);
    w->lazy = 1;
    w->rows_with_push = w->cfg.rows_with_push;
  }
  if (!rc && w->cfg.mode != TFX_MODE_SYNC) { /* sync pushes stay whole: the ps averages them per step */
    rc = tfx_psclient_use_parts(w->ps, (size_t)w->cfg.push_part_bytes, err);
  }
  if (rc) {
    return rc;
  }
  size_t dim = tfx_model_input_size(w->model);
  w->n_workers = n_workers;
  if ((rc = worker__open_train(w, p->step, stream_idle, err)) ||
      (rc = worker__eval_open(&w->eval, &w->cfg, w->ps, w->n->cluster, p->shards, p->n_shards, err))) {
    return rc;
  }
  if ((rc = open_metrics(w, err))) {
    return rc;
  }
  int row_input = tfx_model_sparse_input(w->model) && !w->cfg.n_features; /* a LibSVM row: no dense part */
  w->x = row_input ? NULL : malloc(sizeof(float) * dim * (size_t)w->cfg.batch_size);
  w->y = malloc(sizeof(int32_t) * (size_t)w->cfg.batch_size);
  w->acc = calloc((size_t)tfx_model_nvars(w->model), sizeof(float *));
  if ((!row_input && !w->x) || !w->y || !w->acc) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; w->cfg.accumulate > 1 && i < tfx_model_nvars(w->model); i++) {
    if (tfx_model_var(w->model, i)->sparse) {
      return tfx_err_set(err, TFX_ECONFIG, "training.accumulate > 1 with a row-sparse variable is not supported");
    }
    if (!(w->acc[i] = calloc(tfx_model_var(w->model, i)->count, sizeof(float)))) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  w->version = p->step;
  return TFX_OK;
}

static int gather_rows(worker *w, tfx_err *err);

/* Forward/backward over `accumulate` minibatches (or the batch lent with its rows at the last push-pull); leaves
 * the mean grads in the model. With lazy tables the batch is lent first and its rows gathered from the ps
 * (gather_rows), whose failure is returned; a bad input fails the batcher (tfx_batcher_status says why). */
static int compute(worker *w, tfx_step_stats *st, tfx_err *err) {
  const tfx_config *c = &w->cfg;
  tfx_grad_step g = {c->batch_size, c->accumulate, c->clip_value, c->clip_norm, w->x, w->y, w->acc, w->pv,
                     w->pm, &w->pm_win};
  uint64_t seed = (uint64_t)w->version * 1024 + (uint64_t)w->n->index;
  int rc = TFX_OK;
  memset(st, 0, sizeof *st);
  if (!w->lazy) {
    tfx_compute_gradients(w->model, w->batcher, &g, seed, st);
    return TFX_OK;
  }
  if (!w->lent && !tfx_lend_batch(w->model, w->batcher, &g)) {
    rc = gather_rows(w, err);
  }
  w->lent = 0;
  if (!rc && !w->rewind) { /* a batch whose rows were pulled across a rollback: read again after the rewind */
    tfx_compute_lent(w->model, w->batcher, &g, seed, st);
  }
  return rc;
}

/* With rows_with_push, lends the model the next batch before the push-pull, its rows to come in the reply;
 * returns whether the push-pull should ask for them (not when the batch failed: the next step reports it). A
 * stream lends only a batch its window holds: the next may wait for a file to land (data.train.follow), and this
 * step's push must not; that batch then pulls its rows itself. */
static int lend_next(worker *w) {
  const tfx_config *c = &w->cfg;
  if (!w->rows_with_push || !tfx_batcher_ready(w->batcher, c->batch_size)) {
    return 0;
  }
  tfx_grad_step g = {c->batch_size, 1, c->clip_value, c->clip_norm, w->x, w->y, w->acc, w->pv, w->pm, &w->pm_win};
  int bad = tfx_lend_batch(w->model, w->batcher, &g);
  w->lent = 1;
  return !bad;
}

/* Attaches the progressive window as counts per logit bin (the tensor "rolling_hist", int64), which the chief
 * sums over the workers for the merged rolling record; returns the payloads to send (0: no binary window). */
static int attach_window(worker *w, tfx_envelope *env, Tfx__Tensor *meta, Tfx__Tensor **mp, int64_t *shape,
                         tfx_payload *pl) {
  if (!w->pv_hist || !tfx_progressive_histogram(w->pv, w->pv_hist)) {
    return 0;
  }
  *shape = 2 * TFX_PROGRESSIVE_BINS;
  tfx__tensor__init(meta);
  meta->name = "rolling_hist";
  meta->dtype = TFX__DTYPE__DTYPE_INT64;
  meta->shape = shape;
  meta->n_shape = 1;
  meta->nbytes = 2 * TFX_PROGRESSIVE_BINS * sizeof(int64_t);
  *mp = meta;
  env->tensors = mp;
  env->n_tensors = 1;
  *pl = (tfx_payload){w->pv_hist, meta->nbytes, 1, NULL, NULL};
  return 1;
}

/* Sends the master the window's means for `step`, the step-time breakdown and the progressive window
 * (attach_window); a stop answer stops the worker. */
static int report(worker *w, int64_t step, double loss, double acc, double eps, tfx_err *err) {
  enum { MAX = 3 + TFX_TIMING_KEYS + 6 + TFX_PROGRESSIVE_MAX_COLS + TFX_PM_STATS };
  const char *names[MAX] = {"loss", "accuracy", "examples_per_sec", "examples_seen"};
  int64_t seen = w->seen_base + w->steps * (int64_t)w->cfg.batch_size * w->cfg.accumulate; /* in the run's life */
  double vals[MAX] = {loss, acc, eps, (double)seen};
  char pm_keys[TFX_PM_STATS][16];
  int64_t steps = w->timing.window_steps;
  uint64_t bytes = w->obs.bytes_sent + w->obs.bytes_received; /* written by this thread only */
  int n = 4 + tfx_timing_take_window(&w->timing, names + 4, vals + 4);
  if (steps > 0) { /* gradients out and values (or a batch's rows) back, per step of the window */
    names[n] = "wire_bytes_per_step";
    vals[n++] = (double)(bytes - w->reported_bytes) / (double)steps;
  }
  w->reported_bytes = bytes;
  n += tfx_progressive_report(w->pv, names + n, vals + n);
  if (tfx_batcher_bad_records(w->batcher)) { /* data.on_error skip: the bad records it passed over */
    names[n] = "bad_records";
    vals[n++] = (double)tfx_batcher_bad_records(w->batcher);
  }
  int n_pm = tfx_pm_state_stats(w->pm, &w->pm_win, pm_keys, vals + n); /* the plugin's metrics: the chief merges */
  for (int i = 0; i < n_pm; i++) {
    names[n++] = pm_keys[i];
  }
  Tfx__KeyValue kv[MAX], *kvp[MAX];
  for (int i = 0; i < n; i++) {
    tfx__key_value__init(&kv[i]);
    kv[i].key = (char *)names[i];
    kv[i].value = vals[i];
    kvp[i] = &kv[i];
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPORT);
  env.step = step;
  env.stats = kvp;
  env.n_stats = (size_t)n;
  Tfx__Tensor meta, *mp;
  int64_t shape;
  tfx_payload pl;
  int n_pl = attach_window(w, &env, &meta, &mp, &shape, &pl);
  tfx_inmsg m;
  int rc = tfx_client_call(w->master, &env, &pl, n_pl, &m, w->cfg.request_timeout_s * 1000, err);
  if (!rc && m.env->run == TFX__RUN_STATE__RUN_STOP) {
    w->stop = 1;
  }
  tfx_inmsg_fini(&m);
  return rc;
}

/* Registers again (idempotent): a restarted master waits for every worker's registration before it initializes
 * the ps that this worker waits for. A stop answer stops the worker. */
static void announce(worker *w) {
  tfx_envelope env;
  tfx_inmsg r;
  memset(&r, 0, sizeof r); /* a failed send leaves it untouched */
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REGISTER);
  int rc = tfx_client_call(w->master, &env, NULL, 0, &r, 1000, NULL);
  if (rc == TFX_OK && r.env->run == TFX__RUN_STATE__RUN_STOP) {
    w->stop = 1;
  }
  tfx_inmsg_fini(&r);
  if (rc == TFX_EPEER) {
    tfx_client_reset(w->master, NULL);
  }
}

/* Whether a call failed only because a stop signal cut it short (then the worker stops gracefully). */
static int stopped_by_signal(int rc) {
  return rc == TFX_EINTR && tfx_stop_requested();
}

/* A ps that stopped answering (TFX_EPEER) or was rolled back to a checkpoint (TFX_ESTATE) is waited for here
 * rather than by exiting: pulls again until every ps answers, within cluster.register_timeout_s. The pull sets
 * the version the next push is computed from, so no gradient is applied to a step it was not made for. With
 * `rows` (a batch's row pull was cut short) the batch's rows are pulled again too, from the ps that are back. */
static int resync(worker *w, int rows, const tfx_err *why, tfx_err *err) {
  tfx_log(TFX_LOG_WARN, "WORKER-PS-WAIT", "%s; pulling until every ps answers", why->msg);
  int64_t deadline = tfx_now_ms() + (int64_t)w->cfg.register_timeout_s * 1000;
  while (!w->stop && !tfx_stop_requested()) {
    worker__serve_control(w);
    tfx_err perr;
    int rc = worker__pull(w, &perr);
    if (rc == TFX_OK && rows) {
      rc = tfx_psclient_pull_rows(w->ps, &perr);
    }
    if (rc == TFX_OK) {
      tfx_log(TFX_LOG_INFO, "WORKER-PS-BACK", "every ps answers: continuing from step %lld", (long long)w->version);
      return TFX_OK;
    }
    if (stopped_by_signal(rc)) {
      return TFX_OK;
    }
    if ((rc != TFX_EPEER && rc != TFX_ESTATE) || tfx_now_ms() > deadline) {
      return tfx_err_set(err, rc, "%s (waited %d s for the ps)", perr.msg, w->cfg.register_timeout_s);
    }
    announce(w);
    worker__follow_routes(w);
    tfx_notify_watchdog();
    usleep(200000);
  }
  return TFX_OK;
}

/* The rows of the lazy tables the lent batch touches, from the ps that hold them, into the model's batch rows
 * before it computes. A ps that is gone or rolled back is waited for as on the dense path (resync, which then
 * pulls the rows again), and the batch goes on from the version the ps are back at; a stop meanwhile ends the
 * batch (TFX_EINTR). */
static int gather_rows(worker *w, tfx_err *err) {
  tfx_err perr;
  tfx_timing_mark(&w->timing, TFX_TIMING_COMPUTE); /* the data so far */
  int rc = tfx_psclient_pull_rows(w->ps, &perr);
  tfx_timing_mark(&w->timing, TFX_TIMING_ROWS);
  if (rc == TFX_EPEER || rc == TFX_ESTATE) {
    rc = resync(w, 1, &perr, err);
    if (!rc && (w->stop || tfx_stop_requested())) {
      rc = tfx_err_set(err, TFX_EINTR, "stopped while waiting for the ps");
    }
    return rc;
  }
  return rc ? tfx_err_set(err, rc, "%s", perr.msg) : TFX_OK;
}

/* Reports to the master; a master that does not answer is being restarted: the report is skipped (logged) and
 * the next one goes to the new master, which counts it as this worker's registration. A report the master
 * refuses (it knows this worker by another connection) is followed by a new registration. */
static int report_or_skip(worker *w, int64_t step, double loss, double acc, double eps, tfx_err *err) {
  tfx_err rerr;
  int rc = report(w, step, loss, acc, eps, &rerr);
  if (rc == TFX_EPEER) {
    tfx_log(TFX_LOG_WARN, "WORKER-MASTER-LOST", "%s; training on, the next report goes to a restarted master",
            rerr.msg);
    return tfx_client_reset(w->master, err);
  }
  if (rc == TFX_EINVAL) {
    /* The master knows this worker by another connection (a reset socket): register again, report next time. */
    tfx_log(TFX_LOG_WARN, "WORKER-REREGISTER", "%s; registering again", rerr.msg);
    announce(w);
    return TFX_OK;
  }
  return rc ? tfx_err_set(err, rc, "%s", rerr.msg) : TFX_OK;
}

/* The chief's state from a STATUS call. */
typedef enum chief_state { CHIEF_SILENT, CHIEF_TRAINING, CHIEF_WAITING, CHIEF_FINISHED } chief_state;

/* Asks the chief its state and (*step) the global step it last saw. */
static chief_state ask_chief(worker *w, int timeout_ms, int64_t *step) {
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  chief_state state = CHIEF_SILENT;
  if (tfx_client_call(w->master, &env, NULL, 0, &r, timeout_ms, NULL) == TFX_OK) {
    const char *text = r.env->text ? r.env->text : "";
    *step = r.env->step;
    state = !strcmp(text, "finished")              ? CHIEF_FINISHED
            : !strcmp(text, "waiting-for-cluster") ? CHIEF_WAITING
                                                   : CHIEF_TRAINING;
  }
  tfx_inmsg_fini(&r);
  return state;
}

/* Whether the master that worker 0 forked (acting as chief) has exited; the child is left for its waitpid. */
static int forked_chief_exited(const worker *w) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  return w->n->chief_pid > 0 && waitid(P_PID, (id_t)w->n->chief_pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid != 0;
}

/* Waits up to `ms` for control messages (STOP, STATUS) and serves them. */
static void wait_control(worker *w, int ms) {
  if (w->sock) {
    zmq_pollitem_t item = {w->sock, 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, ms);
  } else {
    usleep((useconds_t)ms * 1000);
  }
  worker__serve_control(w);
}

/* At max_steps a worker waits for the chief's verdict instead of exiting: a ps that restarts before the final
 * checkpoint rolls the cluster back to the newest checkpoint, and the steps after it need the workers again.
 * It listens on its control socket (the chief's STOP comes there) and asks the chief each round, registering
 * with one that restarted; when the chief's global step is below max_steps it pulls to see the rollback.
 * Returns 1 to train on (the ps went back below max_steps), 0 to stop (STOP, a signal, the chief finished or
 * exited, or silent for cluster.request_timeout_s). */
static int wait_at_max_steps(worker *w) {
  tfx_log(TFX_LOG_INFO, "WORKER-AT-MAX", "global step %lld reached max_steps: waiting for the chief's final checkpoint",
          (long long)w->version);
  int64_t heard = tfx_now_ms();
  for (;;) {
    wait_control(w, 200);
    if (w->stop || tfx_stop_requested() || forked_chief_exited(w)) {
      return 0;
    }
    int64_t chief_step = w->cfg.max_steps;
    chief_state chief = ask_chief(w, 200, &chief_step);
    heard = chief != CHIEF_SILENT ? tfx_now_ms() : heard;
    if (chief == CHIEF_FINISHED) {
      return 0;
    }
    if (chief == CHIEF_WAITING) {
      announce(w); /* a restarted chief waits for the workers before it resumes from its checkpoint */
    }
    if (chief == CHIEF_SILENT && tfx_now_ms() - heard > (int64_t)w->cfg.request_timeout_s * 1000) {
      tfx_log(TFX_LOG_WARN, "WORKER-CHIEF-GONE", "the chief has not answered for %d s: stopping",
              w->cfg.request_timeout_s);
      return 0;
    }
    tfx_err perr;
    if (tfx_psclient_resend_lost(w->ps, &perr)) { /* first: a promoted backup takes what this worker kept */
      tfx_log(TFX_LOG_WARN, "WORKER-RESEND-FAIL", "at max_steps: %s", perr.msg);
    }
    if (chief == CHIEF_TRAINING && chief_step < w->cfg.max_steps) {
      worker__follow_routes(w); /* a roll-back: each instance back on its own ps, the kept pushes void */
    }
    if (chief == CHIEF_TRAINING && chief_step < w->cfg.max_steps && worker__pull(w, &perr) == TFX_OK &&
        w->version < w->cfg.max_steps) {
      tfx_log(TFX_LOG_WARN, "WORKER-ROLLBACK",
              "the ps went back to step %lld (a ps or the chief restarted before the final checkpoint): training on",
              (long long)w->version);
      return 1;
    }
    tfx_notify_watchdog();
  }
}

/* The first pull: the values and the global step to train from, waiting for a ps that is gone or rolled back.
 * *go is 0 when a stop signal cut it short. */
static int first_pull(worker *w, int *go, tfx_err *err) {
  double t_call = tfx_now_s();
  tfx_err perr;
  int rc = worker__pull(w, &perr);
  *go = 0;
  if (stopped_by_signal(rc)) {
    return TFX_OK;
  }
  if (rc == TFX_EPEER || rc == TFX_ESTATE) {
    rc = resync(w, 0, &perr, err);
  } else if (rc) {
    tfx_err_set(err, rc, "%s", perr.msg);
  }
  if (rc) {
    return rc;
  }
  *go = 1;
  worker__obs_pull(&w->obs, tfx_now_s() - t_call, tfx_psclient_bytes(w->ps));
  tfx_notify_status("worker %d: training from step %lld", w->n->index, (long long)w->version);
  tfx_log(TFX_LOG_INFO, "WORKER-TRAIN", "training from global step %lld", (long long)w->version);
  return TFX_OK;
}

/* A loss above training.thres_loss (or not finite) ends the run, reported to the master first. */
static int check_loss(worker *w, const tfx_step_stats *st, tfx_err *err) {
  if (!isfinite(st->loss) || st->loss > w->cfg.thres_loss) {
    report(w, w->version, st->loss, 0, 0, NULL);
    return tfx_err_set(err, TFX_ELOSS, "training loss %g at step %lld exceeds thres_loss %g", st->loss,
                       (long long)w->version, w->cfg.thres_loss);
  }
  return TFX_OK;
}

/* How a push-pull ended when it returned TFX_OK. */
typedef enum pushed { PUSHED_DONE, PUSHED_AGAIN, PUSHED_STOP } pushed;

/* The step a push is tagged with: the version its gradient was computed from. In async and ssp with replicas, a
 * worker's tags also rise push by push (a promoted backup dedups the pushes resent after a failover by them): just
 * after a failover the promoted copy may stand a little behind the version this worker's last push was made at,
 * until every worker's kept pushes are replayed. */
static int64_t push_step(const worker *w) {
  if (w->cfg.mode == TFX_MODE_SYNC || !w->cfg.ps_replicas || !w->steps) {
    return w->version;
  }
  return w->version > w->last_step ? w->version : w->last_step + 1;
}

/* Pushes the gradients computed at `step` and receives the new values and version: PUSHED_DONE, PUSHED_AGAIN
 * after waiting for a ps that was gone or rolled back (the step is not counted), or PUSHED_STOP when a stop
 * signal cut it short or a ps answered that the chief ended the run (after the chief's STOP to this worker). */
static int push_pull(worker *w, int64_t step, pushed *out, tfx_err *err) {
  int rows = lend_next(w);
  tfx_timing_mark(&w->timing, TFX_TIMING_COMPUTE);
  double t_call = tfx_now_s();
  tfx_err perr;
  int rc = tfx_psclient_push_send(w->ps, step, rows, &perr);
  tfx_timing_mark(&w->timing, TFX_TIMING_PUSH);
  rc = rc ? rc : tfx_psclient_push_recv(w->ps, &w->version, &perr);
  w->lent = w->lent && !rc; /* a failed reply brought no rows: the next step takes a new batch */
  if (rc == TFX_EINTR && !tfx_stop_requested()) {
    worker__serve_control(w); /* a ps that stopped with the run answers so; the chief's STOP came first */
  }
  if (stopped_by_signal(rc) || (rc == TFX_EINTR && w->stop)) {
    *out = PUSHED_STOP;
    return TFX_OK;
  }
  if (rc == TFX_EPEER || rc == TFX_ESTATE) {
    *out = PUSHED_AGAIN;
    return resync(w, 0, &perr, err);
  }
  if (rc) {
    return tfx_err_set(err, rc, "%s", perr.msg);
  }
  worker__obs_push_pull(&w->obs, tfx_now_s() - t_call, w->model, tfx_psclient_bytes(w->ps));
  tfx_timing_mark(&w->timing, TFX_TIMING_WAIT);
  *out = PUSHED_DONE;
  return TFX_OK;
}

static void window_reset(worker *w, window *win) {
  memset(win, 0, sizeof *win);
  win->t0 = tfx_now_ms();
  tfx_pm_state_init(w->pm, &w->pm_win);
}

/* Reports the window's means at `step` (and shows them on the HTTP port); the window starts over once sent. */
static int report_window(worker *w, window *win, int64_t step, tfx_err *err) {
  double eps = win->seen / ((tfx_now_ms() - win->t0 + 1) / 1000.0);
  worker__obs_step(&w->obs, w->version, w->steps, win->loss / win->n, eps);
  int rc = report_or_skip(w, step, win->loss / win->n, win->hits / win->seen, eps, err);
  if (!rc) {
    window_reset(w, win);
  }
  return rc;
}

/* Counts the step computed at `step`; every report_every local steps, reports the window's means. */
static int count_step(worker *w, window *win, const tfx_step_stats *st, int64_t step, tfx_err *err) {
  w->steps++;
  win->loss += st->loss;
  win->hits += st->correct;
  win->seen += st->count;
  win->n++;
  return w->steps % w->cfg.report_every ? TFX_OK : report_window(w, win, step, err);
}

/* While a followed stream waits for its next file (data.train.follow): control messages, the watchdog, and the
 * report of the steps since the last one, so metrics.jsonl shows every example trained on while the stream is
 * dry. Nonzero to stop waiting (a STOP or a signal). */
static int stream_idle(void *ctx) {
  worker *w = ctx;
  worker__serve_control(w);
  tfx_notify_watchdog();
  if (w->win.n > 0 && !w->stop && !tfx_stop_requested()) {
    report_window(w, &w->win, w->last_step, NULL);
  }
  return w->stop || tfx_stop_requested();
}

/* Between steps: the step shown on the HTTP port, control messages, the service status. */
static void after_step(worker *w) {
  worker__obs_step(&w->obs, w->version, w->steps, NAN, NAN);
  worker__serve_control(w);
  tfx_notify_status("worker %d: global step %lld of %lld", w->n->index, (long long)w->version,
                    (long long)w->cfg.max_steps);
}

/* The step loop: first pull, then compute, the loss threshold, push-pull, counters and reports, control. */
static int train_steps(worker *w, tfx_err *err) {
  window_reset(w, &w->win);
  int go, rc = first_pull(w, &go, err);
  if (rc || !go) {
    return rc;
  }
  w->lent = 0; /* a batch lent before a rollback has rows of the old version */
  while (!w->stop && !tfx_stop_requested() && w->version < w->cfg.max_steps) {
    tfx_step_stats st;
    if (w->rewind && (rc = worker__rewind(w, stream_idle, err))) {
      return rc;
    }
    tfx_timing_mark(&w->timing, TFX_TIMING_OTHER);
    rc = compute(w, &st, err);
    tfx_timing_mark(&w->timing, TFX_TIMING_COMPUTE);
    if (!rc && w->rewind) {
      continue; /* a batch whose rows were pulled across a rollback: read again after the rewind */
    }
    if ((rc = rc ? rc : tfx_batcher_status(w->batcher, err)) == TFX_EINTR && (w->stop || tfx_stop_requested())) {
      break; /* stopped while a batch's rows were pulled or waited for, or while a followed stream waited */
    }
    if (rc || (rc = check_loss(w, &st, err))) {
      return rc;
    }
    int64_t step = push_step(w);
    pushed out = PUSHED_DONE;
    if ((rc = push_pull(w, step, &out, err))) {
      return rc;
    }
    if (out == PUSHED_STOP) {
      break;
    }
    if (out == PUSHED_AGAIN) {
      continue;
    }
    w->last_step = step;
    if ((rc = count_step(w, &w->win, &st, step, err))) {
      return rc;
    }
    after_step(w);
  }
  return TFX_OK;
}

/* Trains to max_steps, then stays until the chief's final checkpoint holds (training on after a rollback). */
static int train(worker *w, tfx_err *err) {
  int rc;
  tfx_timing_init(&w->timing);
  while (!(rc = train_steps(w, err)) && !w->stop && !tfx_stop_requested() && wait_at_max_steps(w)) {
  }
  tfx_notify_stopping();
  tfx_timing_log(&w->timing);
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "WORKER-DONE", "stopped at global step %lld after %lld local steps", (long long)w->version,
            (long long)w->steps);
  }
  return rc;
}

static void cleanup(worker *w) {
  worker__obs_stop(&w->obs);
  for (int i = 0; w->acc && w->model && i < tfx_model_nvars(w->model); i++) {
    free(w->acc[i]);
  }
  free(w->acc);
  free(w->x);
  free(w->y);
  tfx_psclient_destroy(w->ps);
  tfx_client_destroy(w->master);
  tfx_net_close(w->sock);
  /* Gradients are sent in place: end ZeroMQ (every socket is closed) before their buffers are freed. */
  tfx_net_shutdown();
  tfx_batcher_destroy(w->batcher);
  tfx_progressive_destroy(w->pv);
  free(w->pv_hist);
  tfx_pmetrics_close(w->pm);
  tfx_dataset_destroy(w->data);
  worker__eval_close(&w->eval);
  tfx_model_destroy(w->model);
  tfx_inmsg_fini(&w->plan);
}

int tfx_worker_run(tfx_node *n, tfx_err *err) {
  worker w;
  memset(&w, 0, sizeof w);
  w.n = n;
  w.cfg = n->cfg;
  w.start_ms = tfx_now_ms();
  w.route_epoch = 1; /* the chief's first plan epoch: its routes are the plan's */
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, n->index);
  openblas_set_num_threads(n->cfg.threads);
  char ep[320], mep[320];
  const char *maddr = tfx_cluster_address(n->cluster, TFX_ROLE_MASTER, 0);
  /* Worker 0 acting as chief (no chief in TF_CONFIG): its address and its --http-port are the master's (forked
   * beside it); no control socket and no HTTP endpoint of its own. Only --http-port: observe.http_port in the
   * shared experiment is the master's too. */
  int is_chief = !strcmp(maddr, tfx_cluster_address(n->cluster, TFX_ROLE_WORKER, n->index));
  int rc = worker__obs_start(&w.obs, n->index, n->bind_host, is_chief ? 0 : n->http_port, err);
  if (rc) {
    pthread_mutex_destroy(&w.obs.lock);
    return rc;
  }
  rc = tfx_address_endpoint(tfx_cluster_address(n->cluster, TFX_ROLE_WORKER, n->index), 1, n->bind_host, ep, sizeof ep,
                            err);
  if (!rc) {
    rc = tfx_address_endpoint(maddr, 0, NULL, mep, sizeof mep, err);
  }
  if (!rc && !is_chief) {
    rc = tfx_server_open(ep, &w.sock, err);
  }
  if (!rc) {
    rc = tfx_client_create(mep, &w.master, err);
  }
  if (!rc) {
    rc = register_with_master(&w, err);
  }
  if (!rc && !w.stop) {
    rc = setup(&w, err);
  }
  if (!rc && !w.stop) {
    rc = train(&w, err);
  }
  cleanup(&w);
  return rc;
}
