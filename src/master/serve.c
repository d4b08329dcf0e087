/* Serving the master's own socket (a ROUTER): workers' REGISTER and REPORT, anyone's STATUS. A report is
 * recorded (metrics.jsonl, the progress line, /metrics) and checked against thres_loss. Calls only observe.c
 * and rules.c of this room; the loop, the startup and the waits on a ps (pscalls.c) call it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <tfx/plugin.h>

#include "common/log.h"
#include "config/plugin.h"
#include "master/master_impl.h"
#include "master/rules.h"
#include "train/progressive.h"

/* The register reply: start (with the plan, the experiment and the step) or stop. It names the number of workers
 * ("workers"), which a worker under a sparse TF_CONFIG (only the tasks it talks to) cannot count itself. */
static int reply_register(master *m, const tfx_inmsg *in) {
  tfx_envelope env;
  tfx_reply_init(&env, in);
  Tfx__KeyValue kv, *kvp = &kv;
  tfx__key_value__init(&kv);
  kv.key = "workers";
  kv.value = m->n_workers;
  env.flag = m->finished ? 2 : m->running ? 1 : 0;
  if (m->running && !m->finished) {
    env.text = m->config_json;
    env.step = m->global_step;
    env.shards = m->plan.ptrs;
    env.n_shards = (size_t)m->plan.n;
    env.stats = &kvp;
    env.n_stats = 1;
  }
  return tfx_wire_send(m->sock, &in->identity, &env, NULL, 0, NULL);
}

double master__env_stat(const void *ctx, const char *key) {
  return master__stat(ctx, key);
}

double master__stat(const tfx_envelope *e, const char *key) {
  for (size_t i = 0; i < e->n_stats; i++) {
    if (!strcmp(e->stats[i]->key, key)) {
      return e->stats[i]->value;
    }
  }
  return NAN;
}

/* Appends a report's rolling_auc_K (a multi-label model's outputs; names borrowed from e) to names/vals, at most
 * room; returns how many. */
static int rolling_outputs(const tfx_envelope *e, const char **names, double *vals, int room) {
  int n = 0;
  for (size_t i = 0; i < e->n_stats && n < room; i++) {
    if (!strncmp(e->stats[i]->key, "rolling_auc_", 12) && isfinite(e->stats[i]->value)) {
      names[n] = e->stats[i]->key;
      vals[n++] = e->stats[i]->value;
    }
  }
  return n;
}

/* Writes a report's train line: loss, accuracy, throughput, the worker, and the worker's step-time breakdown
 * (src/worker/timing.h), examples_seen (its examples in the run's whole life), progressive validation's
 * rolling_log_loss, rolling_auc, rolling_examples and rolling_auc_K, and the plugin's own metrics when the report
 * has them. */
static void record_report(master *m, const tfx_envelope *e, double loss, double acc, double eps) {
  static const char *const timing[] = {"row_pull_ms",         "compute_ms",    "push_ms",          "wait_ms",
                                       "other_ms",            "push_pull_ms",  "step_ms",          "wire_bytes_per_step",
                                       "examples_seen",       "rolling_log_loss", "rolling_auc",
                                       "rolling_examples",    "bad_records"};
  enum { MAX = 17 + TFX_METRICS_MAX + TFX_PROGRESSIVE_MAX_COLS };
  const char *names[MAX] = {"loss", "accuracy", "examples_per_sec", "worker"};
  double vals[MAX] = {loss, acc, eps, e->sender_index};
  int n = 4;
  for (int i = 0; i < 13; i++) {
    double v = master__stat(e, timing[i]);
    if (isfinite(v)) {
      names[n] = timing[i];
      vals[n++] = v;
    }
  }
  n += rolling_outputs(e, names + n, vals + n, TFX_PROGRESSIVE_MAX_COLS);
  tfx_pm_state pm; /* the plugin's own metrics over the worker's window */
  tfx_err err;
  if (tfx_pm_state_read(m->pm, master__env_stat, e, &pm, &err)) {
    tfx_log(TFX_LOG_WARN, "MASTER-BAD-REPORT", "worker %d: %s", e->sender_index, err.msg);
  }
  char what[48];
  snprintf(what, sizeof what, "train, worker %d", e->sender_index);
  n += tfx_pmetrics_values(m->pm, &pm, what, names + n, vals + n, TFX_METRICS_MAX);
  master__record(m, "train", e->step, names, vals, n, NULL);
}

/* Keeps a worker's last rolling metrics and bad-record count for /metrics. */
static void note_worker(master *m, const tfx_envelope *e) {
  if (e->sender_index < 0 || e->sender_index >= m->n_workers) {
    return;
  }
  worker_peer *w = &m->workers[e->sender_index];
  double auc = master__stat(e, "rolling_auc"), ll = master__stat(e, "rolling_log_loss");
  double bad = master__stat(e, "bad_records");
  master__lock(m, 1);
  if (isfinite(ll)) {
    w->has_rolling = 1;
    w->rolling_auc = auc;
    w->rolling_log_loss = ll;
  }
  if (isfinite(bad)) {
    w->bad_records = bad;
  }
  master__lock(m, 0);
}

static void on_report(master *m, const tfx_inmsg *in) {
  const tfx_envelope *e = in->env;
  double loss = master__stat(e, "loss");
  double acc = master__stat(e, "accuracy");
  double eps = master__stat(e, "examples_per_sec");
  int has_loss = 0;
  for (size_t i = 0; i < e->n_stats; i++) {
    has_loss |= !strcmp(e->stats[i]->key, "loss");
  }
  if (!has_loss) {
    tfx_log(TFX_LOG_WARN, "MASTER-BAD-REPORT", "report from %d without a loss: dropped", e->sender_index);
    return;
  }
  record_report(m, e, loss, acc, eps);
  note_worker(m, e);
  master__rolling_note(m, in, master__stat(e, "rolling_examples"), master__stat(e, "rolling_log_loss"));
  m->last_loss = loss;
  if (!isfinite(loss) || loss > m->cfg.thres_loss) {
    m->abort_code = TFX_ELOSS;
    snprintf(m->abort_msg, sizeof m->abort_msg, "worker %d reported training loss %g at step %lld (thres_loss %g)",
             e->sender_index, loss, (long long)e->step, m->cfg.thres_loss);
  }
  /* One progress line per report step for the cluster (every worker reports the same step), labelled as the
   * single-process trainer labels it: a sync report at version v comes after the step that makes v + 1. */
  int64_t shown = e->step + (m->cfg.mode == TFX_MODE_SYNC);
  if (shown > m->progress_step) {
    m->progress_step = shown;
    tfx_progress_show(&m->progress, shown < m->cfg.max_steps ? shown : m->cfg.max_steps, loss, m->last_acc,
                      eps * m->n_workers);
  }
  master__observe(m, "train", e->step, loss, acc, eps * m->n_workers);
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_STEP, e->step, loss, acc, m->n->run_dir);
}

static int reply_status(master *m, const tfx_inmsg *in) {
  tfx_envelope env;
  tfx_reply_init(&env, in);
  enum { N_FIXED = 4, N_ROUTES = 64, N_MAX = N_FIXED + 3 * N_ROUTES };
  Tfx__KeyValue kv[N_MAX], *kvp[N_MAX];
  char keys[3 * N_ROUTES][32];
  const char *names[] = {"uptime_s", "workers_registered", "last_eval_accuracy", "rollback_epoch"};
  int reg = 0;
  for (int w = 0; w < m->n_workers; w++) {
    reg += m->workers[w].registered;
  }
  double vals[] = {(tfx_now_ms() - m->progress.start_ms) / 1000.0, reg, m->last_acc, (double)m->rollback_epoch};
  int n = 0;
  for (; n < N_FIXED; n++) {
    tfx__key_value__init(&kv[n]);
    kv[n].key = (char *)names[n];
    kv[n].value = vals[n];
    kvp[n] = &kv[n];
  }
  for (int p = 0; master__replicated(m) && p < m->n_ps && p < N_ROUTES; p++, n++) {
    snprintf(keys[p], sizeof keys[p], "route.%d", p); /* which ps serves plan instance p (workers follow it) */
    tfx__key_value__init(&kv[n]);
    kv[n].key = keys[p];
    kv[n].value = m->ps[p].at;
    kvp[n] = &kv[n];
  }
  for (int p = 0; m->ledger_written && p < m->n_ps && p < N_ROUTES; p++) { /* the run's ledger, once written */
    const char *side[2] = {"applied", "acked"};
    int64_t count[2] = {m->ps[p].ledger_applied, m->ps[p].ledger_acked};
    for (int s = 0; s < 2; s++, n++) {
      char *key = keys[N_ROUTES + 2 * p + s];
      snprintf(key, sizeof keys[0], "ledger.%s.%d", side[s], p);
      tfx__key_value__init(&kv[n]);
      kv[n].key = key;
      kv[n].value = (double)count[s];
      kvp[n] = &kv[n];
    }
  }
  env.text = (char *)(m->finished ? "finished" : m->running ? "training" : "waiting-for-cluster");
  env.step = m->global_step;
  env.epoch = master__replicated(m) ? m->epoch : 0;
  env.stats = kvp;
  env.n_stats = (size_t)n;
  return tfx_wire_send(m->sock, &in->identity, &env, NULL, 0, NULL);
}

/* Counts a dropped frame or report and says whether to log it. */
static int count_dropped(master *m) {
  return master__log_drop(++m->bad_frames);
}

/* Marks worker w registered (under the lock: /status reads it) and remembers its routing identity. */
static void remember_worker(master *m, int w, const tfx_inmsg *in) {
  worker_peer *wp = &m->workers[w];
  master__lock(m, 1);
  wp->registered = 1;
  master__lock(m, 0);
  size_t n = in->has_identity ? zmq_msg_size((zmq_msg_t *)&in->identity) : 0;
  wp->id.n = n <= sizeof wp->id.bytes ? n : 0;
  if (wp->id.n) {
    memcpy(wp->id.bytes, zmq_msg_data((zmq_msg_t *)&in->identity), wp->id.n);
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
  if (!why && m->workers[w].registered) {
    const peer_id *id = &m->workers[w].id;
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

static void serve_register(master *m, int w, const tfx_inmsg *in) {
  if (!m->workers[w].registered) {
    tfx_log(TFX_LOG_INFO, "MASTER-REGISTER", "worker %d registered", w);
  }
  remember_worker(m, w, in);
  reply_register(m, in);
}

static void serve_report(master *m, int w, const tfx_inmsg *in) {
  if (!report_from_member(m, in)) {
    tfx_server_reply_error(m->sock, in, TFX_EINVAL, "report refused: not a member of this cluster", NULL);
    return;
  }
  if (!m->workers[w].registered) {
    remember_worker(m, w, in); /* a worker that registered with an earlier master (this one was restarted) */
  }
  on_report(m, in);
  tfx_envelope env;
  tfx_reply_init(&env, in);
  env.flag = m->finished || m->abort_code;
  tfx_wire_send(m->sock, &in->identity, &env, NULL, 0, NULL);
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
    serve_register(m, w, &in);
  } else if (e->type == TFX__MSG_TYPE__MSG_REPORT) {
    serve_report(m, w, &in);
  } else if (e->type == TFX__MSG_TYPE__MSG_STATUS) {
    reply_status(m, &in);
  } else {
    tfx_server_reply_error(m->sock, &in, TFX_EPROTO, "unexpected message for the master", NULL);
  }
  tfx_inmsg_fini(&in);
}

void master__serve(master *m, int timeout_ms) {
  zmq_pollitem_t item = {m->sock, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&item, 1, timeout_ms) > 0) {
    master__serve_pending(m);
  }
}

void master__serve_pending(master *m) {
  zmq_pollitem_t item = {m->sock, 0, ZMQ_POLLIN, 0};
  while (zmq_poll(&item, 1, 0) > 0) {
    serve_one(m);
  }
}
