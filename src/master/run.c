/* The master's phases: wait for the cluster, initialize, run, checkpoint, stop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>

#include "common/fs.h"
#include "common/log.h"
#include "config/plugin.h"
#include "master/master_impl.h"
#include "observe/notify.h"
#include "store/ckpt.h"
#include "store/warmstart.h"

static int reply_register(master *m, const tfx_inmsg *in) {
  tfx_envelope env;
  tfx_reply_init(&env, in);
  env.flag = m->finished ? 2 : m->running ? 1 : 0;
  if (m->running && !m->finished) {
    env.text = m->config_json, env.step = m->global_step;
    env.shards = m->plan.ptrs, env.n_shards = (size_t)m->plan.n;
  }
  return tfx_wire_send(m->sock, &in->identity, &env, NULL, 0, NULL);
}

static double stat_of(const tfx_envelope *e, const char *key) {
  for (size_t i = 0; i < e->n_stats; i++) {
    if (!strcmp(e->stats[i]->key, key)) {
      return e->stats[i]->value;
    }
  }
  return NAN;
}

static void on_report(master *m, const tfx_inmsg *in) {
  const tfx_envelope *e = in->env;
  double loss = stat_of(e, "loss"), acc = stat_of(e, "accuracy"), eps = stat_of(e, "examples_per_sec");
  int has_loss = 0;
  for (size_t i = 0; i < e->n_stats; i++) {
    has_loss |= !strcmp(e->stats[i]->key, "loss");
  }
  if (!has_loss) {
    tfx_log(TFX_LOG_WARN, "MASTER-BAD-REPORT", "report from %d without a loss: dropped", e->sender_index);
    return;
  }
  /* The worker's step-time breakdown (src/worker/timing.h) goes to metrics.jsonl when the report has it. */
  static const char *const timing[] = {"compute_ms", "push_pull_ms", "other_ms", "step_ms", "wire_bytes_per_step"};
  const char *names[9] = {"loss", "accuracy", "examples_per_sec", "worker"};
  double vals[9] = {loss, acc, eps, e->sender_index};
  int n = 4;
  for (int i = 0; i < 5; i++) {
    double v = stat_of(e, timing[i]);
    if (isfinite(v)) {
      names[n] = timing[i], vals[n++] = v;
    }
  }
  tfx_master_record(m, "train", e->step, names, vals, n);
  m->last_loss = loss;
  if (!isfinite(loss) || loss > m->cfg.thres_loss) {
    m->abort_code = TFX_ELOSS;
    snprintf(m->abort_msg, sizeof m->abort_msg, "worker %d reported training loss %g at step %lld (thres_loss %g)",
             e->sender_index, loss, (long long)e->step, m->cfg.thres_loss);
  }
  /* One progress line per report step for the cluster (every worker reports the same step), labelled as the
   * single-process trainer labels it: a sync report at version v comes after the step that makes v + 1. */
  int64_t shown = e->step + (m->cfg.mode != TFX_MODE_SYNC ? 0 : 1);
  if (shown > m->progress_step) {
    m->progress_step = shown;
    tfx_progress_show(&m->progress, shown < m->cfg.max_steps ? shown : m->cfg.max_steps, loss, m->last_acc,
                      eps * m->n_workers);
  }
  tfx_master_observe(m, "train", e->step, loss, acc, eps * m->n_workers);
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_STEP, e->step, loss, acc, m->n->run_dir);
}

static int reply_status(master *m, const tfx_inmsg *in) {
  tfx_envelope env;
  tfx_reply_init(&env, in);
  Tfx__KeyValue kv[3], *kvp[3];
  const char *names[] = {"uptime_s", "workers_registered", "last_eval_accuracy"};
  int reg = 0;
  for (int w = 0; w < m->n_workers; w++) {
    reg += m->registered[w];
  }
  double vals[] = {(tfx_now_ms() - m->progress.start_ms) / 1000.0, reg, m->last_acc};
  for (int i = 0; i < 3; i++) {
    tfx__key_value__init(&kv[i]), kv[i].key = (char *)names[i], kv[i].value = vals[i], kvp[i] = &kv[i];
  }
  env.text = (char *)(m->finished ? "finished" : m->running ? "training" : "waiting-for-cluster");
  env.step = m->global_step, env.stats = kvp, env.n_stats = 3;
  return tfx_wire_send(m->sock, &in->identity, &env, NULL, 0, NULL);
}

/* Counts a dropped frame or report and says whether to log it: the first 10, then at powers of two, as the ps. */
static int count_dropped(master *m) {
  int64_t n = ++m->bad_frames;
  return n <= 10 || (n & (n - 1)) == 0;
}

static void remember_worker(master *m, int w, const tfx_inmsg *in) {
  peer_id *id = &m->worker_ids[w];
  size_t n = in->has_identity ? zmq_msg_size((zmq_msg_t *)&in->identity) : 0;
  id->n = n <= sizeof id->bytes ? n : 0;
  if (id->n) {
    memcpy(id->bytes, zmq_msg_data((zmq_msg_t *)&in->identity), id->n);
  }
}

/* Whether a report comes from a member: a worker index of this cluster, sending from the identity it registered
 * with (a worker this master never saw, registered with an earlier master, is adopted), at a step the run can
 * have reached. Anything else is dropped with a rate-limited MASTER-BAD-REPORT and changes nothing. */
static int report_from_member(master *m, const tfx_inmsg *in) {
  const tfx_envelope *e = in->env;
  int w = e->sender_index;
  int64_t limit = (m->cfg.max_steps > m->max_version ? m->cfg.max_steps : m->max_version) + 1000;
  const char *why = e->sender_role != TFX__ROLE__ROLE_WORKER || w < 0 || w >= m->n_workers
                        ? "not a worker of this cluster"
                    : e->step < 0 || e->step > limit ? "a step out of range"
                                                     : NULL;
  if (!why && m->registered[w]) {
    const peer_id *id = &m->worker_ids[w];
    size_t n = in->has_identity ? zmq_msg_size((zmq_msg_t *)&in->identity) : 0;
    if (id->n && (n != id->n || memcmp(id->bytes, zmq_msg_data((zmq_msg_t *)&in->identity), n))) {
      why = "not the connection the worker registered from";
    }
  }
  if (why && count_dropped(m)) {
    tfx_log(TFX_LOG_WARN, "MASTER-BAD-REPORT", "report (role %d, index %d, step %lld) dropped: %s (%lld so far)",
            (int)e->sender_role, w, (long long)e->step, why, (long long)m->bad_frames);
  }
  return !why;
}

/* Handles one message on the master's ROUTER. */
static void serve_one(master *m) {
  tfx_inmsg in;
  tfx_err err;
  if (tfx_wire_recv(m->sock, 1, &in, &err)) {
    if (count_dropped(m)) {
      tfx_log(TFX_LOG_WARN, "MASTER-BAD-FRAME", "dropped: %s (%lld so far)", err.msg, (long long)m->bad_frames);
    }
    tfx_server_reply_error(m->sock, &in, TFX_EPROTO, err.msg, NULL);
    tfx_inmsg_fini(&in);
    return;
  }
  const tfx_envelope *e = in.env;
  int w = e->sender_index;
  if (e->type == TFX__MSG_TYPE__MSG_REGISTER && e->sender_role == TFX__ROLE__ROLE_WORKER && w >= 0 &&
      w < m->n_workers) {
    if (!m->registered[w]) {
      tfx_log(TFX_LOG_INFO, "MASTER-REGISTER", "worker %d registered", w);
    }
    tfx_master_lock(m, 1);
    m->registered[w] = 1;
    tfx_master_lock(m, 0);
    remember_worker(m, w, &in);
    reply_register(m, &in);
  } else if (e->type == TFX__MSG_TYPE__MSG_REPORT) {
    if (!report_from_member(m, &in)) {
      tfx_server_reply_error(m->sock, &in, TFX_EINVAL, "report refused: not a member of this cluster", NULL);
      tfx_inmsg_fini(&in);
      return;
    }
    if (!m->registered[w]) {
      /* A worker that registered with an earlier master (this one was restarted). */
      tfx_master_lock(m, 1);
      m->registered[w] = 1;
      tfx_master_lock(m, 0);
      remember_worker(m, w, &in);
    }
    on_report(m, &in);
    tfx_envelope env;
    tfx_reply_init(&env, &in);
    env.flag = m->finished || m->abort_code;
    tfx_wire_send(m->sock, &in.identity, &env, NULL, 0, NULL);
  } else if (e->type == TFX__MSG_TYPE__MSG_STATUS) {
    reply_status(m, &in);
  } else {
    tfx_server_reply_error(m->sock, &in, TFX_EPROTO, "unexpected message for the master", NULL);
  }
  tfx_inmsg_fini(&in);
}

static void serve(master *m, int timeout_ms) {
  zmq_pollitem_t item = {m->sock, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&item, 1, timeout_ms) > 0) {
    while (zmq_poll(&item, 1, 0) > 0) {
      serve_one(m);
    }
  }
}

void tfx_master_serve_pending(master *m) {
  zmq_pollitem_t item = {m->sock, 0, ZMQ_POLLIN, 0};
  while (zmq_poll(&item, 1, 0) > 0) {
    serve_one(m);
  }
}

static void note_version(master *m, int p, const tfx_envelope *e) {
  tfx_master_lock(m, 1);
  m->ps_version[p] = e->step;
  tfx_master_lock(m, 0);
  tfx_master_observe_ps(m, p, e);
  if (m->running && e->text && !strcmp(e->text, "waiting-for-plan")) {
    m->ps_lost = 1;
  }
}

/* Reads every ps's version; global_step is the smallest. */
int tfx_master_poll_versions(master *m, tfx_err *err) {
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  m->ps_lost = 0;
  int rc = tfx_master_call_ps(m, &env, m->cfg.request_timeout_s * 1000, note_version, err);
  if (rc) {
    return rc;
  }
  if (m->ps_lost) {
    /* A ps came back empty (restarted): every ps rolls back to the newest complete checkpoint, so that the
     * cluster is at one consistent step; workers that were ahead fail their next push and re-register. */
    tfx_log(TFX_LOG_WARN, "MASTER-PS-LOST", "a ps lost its state: rolling every ps back to the newest checkpoint");
    if ((rc = tfx_master_init_ps(m, err))) {
      return rc;
    }
    return tfx_master_poll_versions(m, err);
  }
  int64_t lo = m->ps_version[0], hi = lo;
  for (int p = 1; p < m->n_ps; p++) {
    lo = m->ps_version[p] < lo ? m->ps_version[p] : lo;
    hi = m->ps_version[p] > hi ? m->ps_version[p] : hi;
  }
  m->global_step = lo, m->max_version = hi;
  tfx_master_observe(m, "step", lo, NAN, NAN, NAN);
  return TFX_OK;
}

static void probe_ps(master *m) {
  for (int p = 0; p < m->n_ps; p++) {
    if (m->ps_up[p]) {
      continue;
    }
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
    if (tfx_client_call(m->ps[p], &env, NULL, 0, &r, 200, NULL) == TFX_OK) {
      tfx_master_lock(m, 1);
      m->ps_up[p] = 1;
      tfx_master_lock(m, 0);
      tfx_log(TFX_LOG_INFO, "MASTER-PS-UP", "ps %d at %s answers", p, tfx_client_endpoint(m->ps[p]));
    }
    tfx_inmsg_fini(&r);
  }
}

static int missing(master *m, char *buf, size_t n) {
  int count = 0;
  size_t len = 0;
  buf[0] = '\0';
  for (int p = 0; p < m->n_ps; p++) {
    if (!m->ps_up[p] && len < n) {
      count++, len += (size_t)snprintf(buf + len, n - len, "%sps %d (%s)", count > 1 ? ", " : "", p,
                                       tfx_cluster_address(m->n->cluster, TFX_ROLE_PS, p));
    }
  }
  for (int w = 0; w < m->n_workers; w++) {
    if (!m->registered[w] && len < n) {
      count++, len += (size_t)snprintf(buf + len, n - len, "%sworker %d (%s)", count > 1 ? ", " : "", w,
                                       tfx_cluster_address(m->n->cluster, TFX_ROLE_WORKER, w));
    }
  }
  return count;
}

int tfx_master_wait_cluster(master *m, tfx_err *err) {
  int64_t start = tfx_now_ms(), deadline = start + (int64_t)m->cfg.register_timeout_s * 1000, last_log = start;
  char who[1024];
  tfx_progress_init(&m->progress, 0, m->cfg.max_steps);
  while (!tfx_stop_requested()) {
    probe_ps(m);
    serve(m, 100);
    tfx_notify_watchdog();
    if (!missing(m, who, sizeof who)) {
      return TFX_OK;
    }
    if (tfx_now_ms() > deadline) {
      return tfx_err_set(err, TFX_EPEER, "gave up after %d s waiting for: %s", m->cfg.register_timeout_s, who);
    }
    if (tfx_now_ms() - last_log >= 3000) {
      last_log = tfx_now_ms();
      tfx_log(TFX_LOG_INFO, "MASTER-WAIT", "still waiting for: %s", who);
    }
  }
  return tfx_err_set(err, TFX_EINTR, "stopped while waiting for the cluster");
}

static int init_one(master *m, int p, const char *restore_dir, tfx_err *err) {
  size_t n;
  Tfx__Shard **mine = tfx_plan_for_ps(&m->plan, p, &n);
  if (!mine) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  char path[1200] = "";
  if (restore_dir) {
    snprintf(path, sizeof path, "%s/ps-%d.shard", restore_dir, p);
  }
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = m->config_json, env.shards = mine, env.n_shards = n, env.path = path, env.flag = m->n_workers;
  int rc = tfx_client_call(m->ps[p], &env, NULL, 0, &r, m->cfg.request_timeout_s * 1000, err);
  tfx_inmsg_fini(&r);
  free(mine);
  return rc;
}

/* Warm start of a fresh distributed run: fresh values plus the warm-started ones, written as checkpoint 0 in the
 * plan's shards, which every ps then restores (so the ps need no new message for it). */
static int write_warm_checkpoint(master *m, char *dir, size_t n, tfx_err *err) {
  tfx_model_init_vars(m->model, (uint64_t)m->cfg.seed);
  int rc = tfx_warm_start(&m->cfg, m->model, NULL, err);
  tfx_ckpt_dir(m->n->run_dir, 0, dir, n);
  if (rc || (rc = tfx_mkdirs(dir, err))) {
    return rc;
  }
  uint32_t crc[1024];
  uint64_t bytes[1024];
  tfx_ckpt_entry *e = calloc((size_t)m->plan.n + 1, sizeof *e);
  if (!e || m->n_ps > 1024) {
    return free(e), tfx_err_set(err, TFX_ENOMEM, "warm start bookkeeping");
  }
  for (int p = 0; p < m->n_ps && !rc; p++) {
    int k = 0;
    for (int i = 0; i < m->plan.n; i++) {
      const Tfx__Shard *s = &m->plan.shards[i];
      tfx_var *v = tfx_model_find_var(m->model, s->var);
      if (s->ps != p || !v) {
        continue;
      }
      size_t row = v->count / (size_t)v->shape[0];
      snprintf(e[k].name, sizeof e[k].name, "%s", s->key);
      e[k].rank = v->rank, memcpy(e[k].dims, v->shape, sizeof v->shape);
      e[k].row_begin = s->row_begin, e[k].row_end = s->row_end;
      e[k].count = row * (size_t)(s->row_end - s->row_begin), e[k].data = v->value + row * (size_t)s->row_begin;
      k++;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/ps-%d.shard", dir, p);
    rc = tfx_ckpt_write(path, 0, e, k, &crc[p], &bytes[p], err);
  }
  free(e);
  return rc ? rc : tfx_ckpt_write_manifest(dir, 0, m->n_ps, crc, bytes, err);
}

int tfx_master_init_ps(master *m, tfx_err *err) {
  char dir[1100];
  int64_t step = 0;
  int found = m->n->resume ? tfx_ckpt_resume_point(m->n->run_dir, &step, dir, sizeof dir, err) : TFX_ENOTFOUND;
  if (found != TFX_OK && found != TFX_ENOTFOUND) {
    return found; /* checkpoints exist and none is usable: never start over on top of them */
  }
  int have = found == TFX_OK, nps = 0;
  if (!have && m->cfg.warm_from[0]) {
    int rc = write_warm_checkpoint(m, dir, sizeof dir, err);
    if (rc) {
      return rc;
    }
    have = 1, step = 0;
  }
  int verified = have ? tfx_ckpt_verify(dir, &step, &nps, err) : TFX_OK;
  if (verified) {
    return verified;
  }
  if (have && nps != m->n_ps) { /* each ps finds its shards by key in every file, lazy rows by id */
    tfx_log(TFX_LOG_INFO, "MASTER-RESUME-REPARTITION",
            "%s was written by %d ps; the cluster has %d: each ps takes "
            "its shards and rows from every file",
            dir, nps, m->n_ps);
  }
  for (int p = 0; p < m->n_ps; p++) {
    int rc = init_one(m, p, have ? dir : NULL, err);
    if (rc) {
      return rc;
    }
  }
  m->start_step = have ? step : 0;
  m->global_step = m->start_step;
  if (m->cfg.steps > 0) {
    /* Relative training (Estimator's `steps`): the workers get the absolute step through the experiment. */
    m->cfg.max_steps = m->start_step + m->cfg.steps;
    if (m->epoch_steps > 0 && m->epoch_steps < m->cfg.max_steps) {
      m->cfg.max_steps = m->epoch_steps; /* training.epochs counts from step 0 and still caps */
    }
    free(m->config_json);
    m->config_json = tfx_config_to_json(&m->cfg);
  }
  m->last_ckpt_ms = tfx_now_ms();
  int64_t ev = m->cfg.eval_every_steps, ck = m->cfg.ckpt_every_steps;
  m->next_eval = ev ? (m->start_step / ev + 1) * ev : INT64_MAX;
  m->next_ckpt = ck ? (m->start_step / ck + 1) * ck : INT64_MAX;
  for (int i = 0; i < m->cfg.n_valsets; i++) {
    int64_t every = m->cfg.valsets[i].every_steps;
    m->next_val[i] = m->cfg.valsets[i].first && m->start_step == 0 ? 0
                     : every                                       ? (m->start_step / every + 1) * every
                                                                   : INT64_MAX;
  }
  m->running = 1;
  tfx_progress_init(&m->progress, m->start_step, m->cfg.max_steps);
  if (have) {
    tfx_log(TFX_LOG_INFO, "MASTER-RESUME", "resuming from %s at step %lld", dir, (long long)step);
  } else {
    tfx_log(TFX_LOG_INFO, "MASTER-FRESH", "fresh start: %d shard(s) on %d ps", m->plan.n, m->n_ps);
  }
  return TFX_OK;
}

typedef struct ckpt_acc {
  uint32_t crc[1024], rows_crc[1024];
  uint64_t bytes[1024], rows_bytes[1024]; /* rows: the ps's row file of lazy tables (0: none) */
  int64_t step[1024];
} ckpt_acc;

static ckpt_acc *acc_now;

static void on_ckpt_reply(master *m, int p, const tfx_envelope *e) {
  (void)m;
  if (p >= 1024) {
    return;
  }
  double crc = stat_of(e, "crc32"), bytes = stat_of(e, "bytes");
  acc_now->crc[p] = isfinite(crc) ? (uint32_t)crc : 0;
  acc_now->bytes[p] = isfinite(bytes) ? (uint64_t)bytes : 0;
  double rows_crc = stat_of(e, "rows_crc32"), rows_bytes = stat_of(e, "rows_bytes");
  acc_now->rows_crc[p] = isfinite(rows_crc) ? (uint32_t)rows_crc : 0;
  acc_now->rows_bytes[p] = isfinite(rows_bytes) ? (uint64_t)rows_bytes : 0;
  acc_now->step[p] = e->step;
}

int tfx_master_checkpoint(master *m, int64_t at, tfx_err *err) {
  char dir[1100];
  int64_t have_step;
  int have_ps;
  tfx_ckpt_dir(m->n->run_dir, at, dir, sizeof dir);
  if (tfx_ckpt_verify(dir, &have_step, &have_ps, NULL) == TFX_OK) {
    return TFX_OK; /* already complete: keep it */
  }
  int rc = tfx_mkdirs(dir, err);
  if (rc) {
    return rc;
  }
  ckpt_acc *acc = calloc(1, sizeof *acc);
  if (!acc || m->n_ps > 1024) {
    return free(acc), tfx_err_set(err, TFX_ENOMEM, "checkpoint bookkeeping");
  }
  acc_now = acc;
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_CHECKPOINT);
  env.step = at, env.path = dir;
  rc = tfx_master_call_ps(m, &env, m->cfg.request_timeout_s * 1000, on_ckpt_reply, err);
  for (int p = 0; !rc && p < m->n_ps; p++) {
    if (acc->step[p] != acc->step[0] && m->cfg.mode == TFX_MODE_SYNC) {
      rc = tfx_err_set(err, TFX_ESTATE, "checkpoint %lld: ps 0 wrote step %lld, ps %d step %lld; discarded",
                       (long long)at, (long long)acc->step[0], p, (long long)acc->step[p]);
    }
  }
  if (!rc) {
    rc = tfx_ckpt_write_manifest_rows(dir, at, m->n_ps, acc->crc, acc->bytes, acc->rows_crc, acc->rows_bytes, err);
  }
  free(acc);
  if (rc) {
    return rc;
  }
  tfx_ckpt_prune(m->n->run_dir, m->cfg.keep_max);
  tfx_log(TFX_LOG_INFO, "MASTER-CKPT", "checkpoint at step %lld: %s", (long long)at, dir);
  tfx_master_observe(m, "checkpoint", at, NAN, NAN, NAN);
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_CHECKPOINT, at, NAN, NAN, m->n->run_dir);
  return TFX_OK;
}

#define CKPT_ATTEMPTS 8

static void count_ckpt(master *m, int64_t *counter) {
  pthread_mutex_lock(&m->obs.lock);
  (*counter)++;
  pthread_mutex_unlock(&m->obs.lock);
}

/* A periodic checkpoint at the first step every ps can still write. Sync asks for the step after the newest the
 * master knows; when a ps has already passed it (an evaluation ran meanwhile, or the ps moved on while the request
 * travelled), the versions are polled again and the request moves further ahead, up to CKPT_ATTEMPTS times. */
static int periodic_checkpoint(master *m, int64_t *written, tfx_err *err) {
  int sync = m->cfg.mode == TFX_MODE_SYNC, rc = TFX_OK;
  for (int attempt = 0; attempt < CKPT_ATTEMPTS; attempt++) {
    if (attempt && (rc = tfx_master_poll_versions(m, err))) {
      return rc;
    }
    int64_t at = m->max_version + (sync ? 1 + 2 * attempt : 0); /* sync: a step still ahead, written exactly */
    if (sync && at < m->next_ckpt && m->next_ckpt < m->cfg.max_steps) {
      at = m->next_ckpt; /* asked a little ahead (see ckpt_lead): the ps hold at exactly that step */
    }
    if (at >= m->cfg.max_steps) {
      at = m->cfg.max_steps;
    }
    rc = tfx_master_checkpoint(m, at, err);
    *written = at;
    if (rc != TFX_ESTATE) {
      return rc;
    }
    count_ckpt(m, &m->obs.ckpt_retries);
    tfx_log(TFX_LOG_INFO, "MASTER-CKPT-AHEAD", "%s: asking again further ahead", err->msg);
  }
  return rc;
}

/* How many steps before a periodic checkpoint's step the master asks for it. Sync ps hold a checkpoint request
 * until they reach its step and write exactly that step, so asking ahead (a quarter of the interval, and at least
 * three times the steps the last tick took) means an evaluation or a slow tick can never let the step pass; async
 * writes where the ps stand, so it asks on the step. */
static int64_t ckpt_lead(master *m) {
  int64_t tick = m->global_step - m->tick_step;
  m->tick_step = m->global_step;
  if (m->cfg.mode != TFX_MODE_SYNC) {
    return 0;
  }
  int64_t every = m->cfg.ckpt_every_steps, lead = every / 4;
  lead = 3 * tick > lead ? 3 * tick : lead;
  return lead >= every ? (every > 1 ? every - 1 : 1) : lead < 1 ? 1 : lead;
}

static void periodic(master *m) {
  tfx_master_validate(m, 0);
  if (m->global_step >= m->next_eval && tfx_cluster_count(m->n->cluster, TFX_ROLE_EVALUATOR) == 0) {
    tfx_master_evaluate(m);
    while (m->next_eval <= m->global_step) {
      m->next_eval += m->cfg.eval_every_steps;
    }
  }
  int by_time = m->cfg.ckpt_every_secs > 0 && tfx_now_ms() - m->last_ckpt_ms >= m->cfg.ckpt_every_secs * 1000;
  /* A step at max_steps is the final checkpoint's (tfx_master_finish). */
  int due = (m->global_step + ckpt_lead(m) >= m->next_ckpt && m->next_ckpt < m->cfg.max_steps) || by_time;
  if (due && m->global_step < m->cfg.max_steps && tfx_now_ms() >= m->ckpt_retry_at) {
    tfx_err err;
    int64_t written = 0;
    if (periodic_checkpoint(m, &written, &err)) {
      /* Not skipped: asked again at the next tick after a second, until it is written (or the run ends, whose
       * final checkpoint then holds everything). */
      m->ckpt_retry_at = tfx_now_ms() + 1000;
      count_ckpt(m, &m->obs.ckpt_failures);
      tfx_log(TFX_LOG_WARN, "MASTER-CKPT-FAIL", "%s; asking again in 1 s", err.msg);
      return;
    }
    m->last_ckpt_ms = tfx_now_ms();
    while (m->next_ckpt <= m->global_step || m->next_ckpt <= written) {
      m->next_ckpt += m->cfg.ckpt_every_steps;
    }
  }
}

/* Heartbeats: a STATUS to every worker every 2 s, answered between its steps; a worker silent for longer than
 * the request deadline is named in a log line (once until it answers again). */
static void heartbeat(master *m) {
  int64_t now = tfx_now_ms();
  for (int w = 0; w < m->n_workers && !m->finished; w++) {
    tfx_client *c = m->workers[w];
    zmq_pollitem_t item = {tfx_client_socket(c), 0, ZMQ_POLLIN, 0};
    if (m->hb_pending[w] && zmq_poll(&item, 1, 0) > 0) {
      tfx_inmsg r;
      if (tfx_client_recv(c, &r, 1, NULL) == TFX_OK) {
        if (m->hb_warned[w]) {
          tfx_log(TFX_LOG_INFO, "MASTER-WORKER-BACK", "worker %d answers again", w);
        }
        tfx_master_lock(m, 1);
        m->hb_pending[w] = m->hb_warned[w] = 0, m->hb_seen[w] = now;
        tfx_master_lock(m, 0);
      }
      tfx_inmsg_fini(&r);
    }
    if (m->hb_pending[w] && now - m->hb_sent[w] > (int64_t)m->cfg.request_timeout_s * 1000 && !m->hb_warned[w]) {
      tfx_master_lock(m, 1);
      m->hb_warned[w] = 1;
      tfx_master_lock(m, 0);
      tfx_log(TFX_LOG_WARN, "MASTER-WORKER-SILENT", "worker %d (%s) has not answered a heartbeat for %d s", w,
              tfx_cluster_address(m->n->cluster, TFX_ROLE_WORKER, w), m->cfg.request_timeout_s);
    }
    if (!m->hb_pending[w] && now - m->hb_sent[w] >= 2000) {
      tfx_envelope env;
      tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
      if (tfx_client_send(c, &env, NULL, 0, NULL) == TFX_OK) {
        m->hb_pending[w] = 1, m->hb_sent[w] = now;
      }
    } else if (m->hb_pending[w] && m->hb_warned[w] && now - m->hb_sent[w] >= 2000) {
      tfx_envelope env;
      tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
      if (tfx_client_send(c, &env, NULL, 0, NULL) == TFX_OK) {
        m->hb_sent[w] = now;
      }
    }
  }
}

/* Whether the cluster has an evaluator task (which then evaluates instead of the master). */
static int has_evaluator(const master *m) {
  return tfx_cluster_count(m->n->cluster, TFX_ROLE_EVALUATOR) > 0;
}

/* Why the master has no final eval accuracy, for the "done:" line. */
static const char *no_acc_reason(const master *m) {
  if (has_evaluator(m)) {
    return "the evaluator task evaluates";
  }
  return m->eval_refused ? "eval data refused, see the log" : "no evaluation, see the log";
}

/* Stops the workers, then (unless `checkpointed`) checkpoints where the ps stand, and evaluates. */
static int finish(master *m, int checkpointed, tfx_err *err) {
  m->finished = 1;
  for (int w = 0; w < m->n_workers; w++) {
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STOP);
    tfx_client_call(m->workers[w], &env, NULL, 0, &r, 500, NULL);
    tfx_inmsg_fini(&r);
    /* Done with the workers: a socket left open would keep reconnecting to a worker that has exited, and
     * libzmq resolves its host name in the I/O thread every ps request shares (a slow DNS answer for a
     * vanished container stalls the final checkpoint and evaluation). */
    tfx_client_destroy(m->workers[w]);
    m->workers[w] = NULL;
  }
  int rc = checkpointed ? TFX_OK : tfx_master_poll_versions(m, err);
  if (!rc && !checkpointed) {
    rc = tfx_master_checkpoint(m, m->max_version, err);
  }
  if (!has_evaluator(m)) {
    tfx_master_evaluate(m); /* else the evaluator does */
  }
  tfx_master_validate(m, 1);
  tfx_progress_done(&m->progress, m->global_step, m->last_acc, no_acc_reason(m));
  tfx_plugin_hook(m->n->plugin, TFX_HOOK_TRAIN_END, m->global_step, m->last_loss, m->last_acc, m->n->run_dir);
  return rc;
}

/* Polls the ps versions; a ps that does not answer (TFX_EPEER: dead, being restarted) is waited for, up to
 * cluster.register_timeout_s from the first miss (*lost_since), before the master gives up. */
static int poll_or_wait(master *m, int64_t *lost_since, tfx_err *err) {
  tfx_err perr;
  int rc = tfx_master_poll_versions(m, &perr);
  if (rc == TFX_EPEER && (!*lost_since || tfx_now_ms() - *lost_since < m->cfg.register_timeout_s * 1000LL)) {
    if (!*lost_since) {
      *lost_since = tfx_now_ms();
      tfx_log(TFX_LOG_WARN, "MASTER-PS-WAIT", "%s; waiting up to %d s for it", perr.msg, m->cfg.register_timeout_s);
    }
    return TFX_OK;
  }
  if (!rc && *lost_since) {
    tfx_log(TFX_LOG_INFO, "MASTER-PS-BACK", "every ps answers again");
    *lost_since = 0;
  }
  return rc ? tfx_err_set(err, rc, "%s", perr.msg) : TFX_OK;
}

/* The run reached max_steps: the final checkpoint is taken while the workers wait at max_steps, then they are
 * stopped. A ps lost meanwhile (no answer, or back empty) sends the loop back to training: the cluster rolls back
 * to the newest checkpoint and the waiting workers train on. Returns 1 when the loop should go on. */
static int finish_at_max_steps(master *m, int *attempts, int *rc, tfx_err *err) {
  tfx_err cerr;
  int ck = tfx_master_checkpoint(m, m->max_version, &cerr);
  if ((ck == TFX_EPEER || ck == TFX_ESTATE) && ++*attempts < CKPT_ATTEMPTS && !tfx_stop_requested()) {
    tfx_log(TFX_LOG_WARN, "MASTER-FINAL-RETRY",
            "final checkpoint at step %lld: %s; the workers wait at max_steps, asking again (%d of %d)",
            (long long)m->max_version, cerr.msg, *attempts, CKPT_ATTEMPTS);
    return 1;
  }
  *rc = finish(m, ck == TFX_OK, err);
  return 0;
}

int tfx_master_loop(master *m, tfx_err *err) {
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_TRAIN_BEGIN, m->start_step, NAN, NAN, m->n->run_dir);
  tfx_notify_status("chief: training from step %lld", (long long)m->start_step);
  if (m->cfg.validate_first && m->start_step == 0) {
    tfx_master_evaluate(m), tfx_master_validate(m, 1);
  }
  int64_t last_poll = 0, lost_since = 0;
  int final_attempts = 0;
  while (!tfx_stop_requested() && !m->abort_code) {
    serve(m, 50);
    if (tfx_now_ms() - last_poll < 200) {
      continue;
    }
    last_poll = tfx_now_ms();
    int rc = poll_or_wait(m, &lost_since, err);
    if (rc == TFX_EINTR && tfx_stop_requested()) {
      break; /* a stop signal cut a call short: stop gracefully below */
    }
    if (rc) {
      return rc;
    }
    if (lost_since) {
      continue;
    }
    tfx_notify_status("chief: step %lld of %lld, eval accuracy %.4f", (long long)m->global_step,
                      (long long)m->cfg.max_steps, m->last_acc);
    if (m->global_step >= m->cfg.max_steps) {
      if (!finish_at_max_steps(m, &final_attempts, &rc, err)) {
        return rc;
      }
      continue;
    }
    if (m->hook_stop) {
      tfx_log(TFX_LOG_INFO, "MASTER-HOOK-STOP", "a plugin hook asked to stop at step %lld", (long long)m->global_step);
      return finish(m, 0, err);
    }
    heartbeat(m);
    periodic(m);
  }
  if (m->abort_code) {
    m->finished = 1;
    return tfx_err_set(err, m->abort_code, "%s; the last good checkpoint is kept", m->abort_msg);
  }
  tfx_log(TFX_LOG_INFO, "MASTER-SIGNAL", "stop requested: checkpointing and stopping the cluster");
  return finish(m, 0, err);
}

void tfx_master_stop_all(master *m) {
  m->finished = 1;
  for (int i = 0; i < m->n_workers + m->n_ps; i++) {
    tfx_client *c = i < m->n_workers ? (m->workers ? m->workers[i] : NULL) : (m->ps ? m->ps[i - m->n_workers] : NULL);
    if (!c) {
      continue;
    }
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STOP);
    tfx_client_call(c, &env, NULL, 0, &r, 300, NULL);
    tfx_inmsg_fini(&r);
  }
}
