/* What the master records and shows: the observed state and the HTTP endpoint (/metrics in Prometheus text
 * format, /status in JSON, / a self-contained live page with plots of loss and accuracy against step and of
 * throughput against time, and the cluster table), the run's row in the experiment index, and the metrics
 * record (metrics.jsonl and the TensorBoard events). Calls no other file of the room. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/master_impl.h"
#include "net/curve.h"
#include "net/linkwatch.h"
#include "observe/events.h"
#include "observe/http.h"
#include "observe/prom.h"
#include "store/runindex.h"

typedef tfx_text buf;
#define put tfx_text_put

static void gauge(buf *b, const master *m, const char *name, const char *help, const char *type, double v) {
  tfx_prom_metric(b, name, help, type, "master", m->n->index, v);
}

/* Restarts of the task (role, index) in RUN/logs/restarts.txt, which the tfx-node local supervisor keeps. */
static int restarts_of(const char *text, const char *role, int index) {
  char want[64];
  int n = snprintf(want, sizeof want, "%s %d ", role, index);
  for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    if (!strncmp(line, want, (size_t)n)) {
      return atoi(line + n);
    }
  }
  return 0;
}

static void restarts(buf *b, const master *m) {
  char path[1100], text[4096] = "";
  snprintf(path, sizeof path, "%s/logs/restarts.txt", m->n->run_dir);
  FILE *f = fopen(path, "r");
  if (f) {
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
  }
  tfx_prom_family(b, "tfx_restarts_total", "Restarts of each process by the tfx-node local supervisor.", "counter");
  tfx_prom_sample(b, "tfx_restarts_total", "master", 0, restarts_of(text, "master", 0));
  for (int p = 0; p < m->n_ps; p++) {
    tfx_prom_sample(b, "tfx_restarts_total", "ps", p, restarts_of(text, "ps", p));
  }
  for (int w = 0; w < m->n_workers; w++) {
    tfx_prom_sample(b, "tfx_restarts_total", "worker", w, restarts_of(text, "worker", w));
  }
}

/* One sample of tfx_link_info for the link from the master to a peer: its transport and security. */
static void link_info(buf *b, const master *m, tfx_role role, int index) {
  const char *addr = tfx_cluster_address(m->n->cluster, role, index);
  int unix_sock = tfx_address_is_unix(addr);
  const char *security = tfx_curve_enabled() ? "curve" : unix_sock ? "unix-socket-permissions" : "plaintext";
  put(b, "tfx_link_info{role=\"%s\",index=\"%d\",transport=\"%s\",security=\"%s\"} 1\n", tfx_role_name(role), index,
      unix_sock ? "ipc" : "tcp", security);
}

static void links(buf *b, const master *m) {
  tfx_prom_family(b, "tfx_link_info",
                  "The transport (ipc: Unix socket, tcp) and security (curve, unix-socket-permissions, plaintext) of "
                  "the master's link to each peer.",
                  "gauge");
  for (int p = 0; p < m->n_ps; p++) {
    link_info(b, m, TFX_ROLE_PS, p);
  }
  for (int w = 0; w < m->n_workers; w++) {
    link_info(b, m, TFX_ROLE_WORKER, w);
  }
}

/* A family per counter of the ps's STATUS replies (MASTER_PS_STATS), with a sample per ps. */
static void ps_counters(buf *b, const master *m) {
#define X(field, metric, help)                                 \
  tfx_prom_family(b, metric, help, "counter");                 \
  for (int p = 0; p < m->n_ps && p < OBS_MAX_PS; p++) {        \
    tfx_prom_sample(b, metric, "ps", p, m->ps[p].stats.field); \
  }
  MASTER_PS_STATS(X)
#undef X
}

/* Where the model is served while it trains (TFX_SERVE_URL: `tfx-node local --serve-port`, or set by a deployment
 * beside its server), when it is an http(s) URL with nothing to escape; NULL otherwise. */
static const char *serve_url(void) {
  const char *url = getenv("TFX_SERVE_URL");
  if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) || strlen(url) > 512 ||
      strpbrk(url, "\"\\<>'& \t\r\n")) {
    return NULL;
  }
  return url;
}

/* Every field of the last eval record (model.metrics: f1, auc, precision_3, ...) as a sample of tfx_eval_metric. */
static void eval_fields(buf *b, const master *m) {
  tfx_prom_family(b, "tfx_eval_metric", "Each metric of the last evaluation (model.metrics), by name.", "gauge");
  for (int i = 0; i < m->obs.n_fields; i++) {
    if (isfinite(m->obs.field_values[i])) {
      put(b, "tfx_eval_metric{role=\"master\",index=\"%d\",metric=\"%s\"} %.9g\n", m->n->index,
          m->obs.field_names[i], m->obs.field_values[i]);
    }
  }
  tfx_prom_family(b, "tfx_train_metric",
                  "Each field of the last train record (a worker's report: loss, timing, plugin metrics), by name.",
                  "gauge");
  for (int i = 0; i < m->obs.n_train_fields; i++) {
    if (isfinite(m->obs.train_values[i])) {
      put(b, "tfx_train_metric{role=\"master\",index=\"%d\",metric=\"%s\"} %.9g\n", m->n->index,
          m->obs.train_names[i], m->obs.train_values[i]);
    }
  }
}

/* Progressive validation over the workers: the merged rolling record's AUC and log loss over the union of their
 * windows (rolling.c; before the first, the mean of their last), and the bad records they skipped. */
static void render_rolling(buf *b, const master *m) {
  double auc = 0, ll = 0, bad = 0;
  int n = 0;
  for (int w = 0; w < m->n_workers; w++) {
    const worker_peer *p = &m->workers[w];
    auc += p->has_rolling ? p->rolling_auc : 0;
    ll += p->has_rolling ? p->rolling_log_loss : 0;
    n += p->has_rolling;
    bad += p->bad_records;
  }
  const merged_window *g = &m->merged;
  gauge(b, m, "tfx_rolling_auc", "Progressive validation: AUC over the workers' last examples, merged.", "gauge",
        g->has ? g->auc : n ? auc / n : NAN);
  gauge(b, m, "tfx_rolling_log_loss", "Progressive validation: log loss over the workers' last examples, merged.",
        "gauge", g->has ? g->log_loss : n ? ll / n : NAN);
  gauge(b, m, "tfx_rolling_examples", "Progressive validation: the examples of the merged window.", "gauge",
        g->has ? g->examples : NAN);
  gauge(b, m, "tfx_bad_records_total", "Bad training records skipped (data.on_error skip).", "counter", bad);
}

static char *render_metrics(master *m) {
  buf b = {0};
  observed *o = &m->obs;
  int reg = 0;
  for (int w = 0; w < m->n_workers; w++) {
    reg += m->workers[w].registered;
  }
  render_rolling(&b, m);
  gauge(&b, m, "tfx_global_step", "Global training step (the smallest ps version).", "gauge", (double)o->step);
  gauge(&b, m, "tfx_max_steps", "The step the run stops at.", "gauge", (double)m->cfg.max_steps);
  gauge(&b, m, "tfx_train_loss", "Training loss of the last worker report.", "gauge", o->loss);
  gauge(&b, m, "tfx_train_accuracy", "Training accuracy of the last worker report.", "gauge", o->accuracy);
  gauge(&b, m, "tfx_eval_loss", "Loss of the last evaluation.", "gauge", o->eval_loss);
  gauge(&b, m, "tfx_eval_accuracy", "Accuracy of the last evaluation.", "gauge", o->eval_accuracy);
  eval_fields(&b, m);
  gauge(&b, m, "tfx_examples_per_second", "Training throughput of the cluster.", "gauge", o->examples_per_sec);
  gauge(&b, m, "tfx_workers_registered", "Workers registered with the master.", "gauge", reg);
  gauge(&b, m, "tfx_parameter_servers", "Parameter servers in the cluster.", "gauge", m->n_ps);
  gauge(&b, m, "tfx_reports_total", "Worker metric reports received.", "counter", (double)o->reports);
  gauge(&b, m, "tfx_checkpoints_total", "Complete checkpoints written.", "counter", (double)o->checkpoints);
  gauge(&b, m, "tfx_checkpoint_retries_total",
        "Checkpoint requests asked again further ahead (a ps had passed the step).", "counter",
        (double)o->ckpt_retries);
  gauge(&b, m, "tfx_checkpoint_failures_total", "Periodic checkpoints that failed (each is asked again).", "counter",
        (double)o->ckpt_failures);
  gauge(&b, m, "tfx_seconds_since_checkpoint", "Seconds since the last complete checkpoint (or the start).", "gauge",
        (double)(tfx_now_ms() - (o->last_ckpt_ms ? o->last_ckpt_ms : o->start_ms)) / 1000.0);
  gauge(&b, m, "tfx_uptime_seconds", "Seconds since the master started.", "gauge",
        (double)(tfx_now_ms() - o->start_ms) / 1000.0);
  gauge(&b, m, "tfx_failovers_total", "Backups promoted to primary after their ps was lost (cluster.replicas 1).",
        "counter", (double)m->failovers);
  gauge(&b, m, "tfx_shards_unreplicated", "Plan shards without a live backup now (0 when replicated or off).", "gauge",
        master__unreplicated_shards(m));
  gauge(&b, m, "tfx_replication_lag_steps",
        "Steps trained since a shard lost its backup (0: every acknowledged push is on two ps).", "gauge",
        master__replication_lag(m));
  ps_counters(&b, m);
  restarts(&b, m);
  links(&b, m);
  gauge(&b, m, "tfx_ipc_links_sized_total",
        "The master's Unix-socket connections whose kernel buffers were raised to 4 MiB (ZeroMQ sizes only TCP).",
        "counter", (double)tfx_linkwatch_sized());
  return b.s;
}

static const char *state_of(const master *m) {
  return m->finished ? "finished" : m->running ? "training" : "waiting-for-cluster";
}

static char *render_status(master *m) {
  buf b = {0};
  observed *o = &m->obs;
  put(&b,
      "{\"role\": \"master\", \"state\": \"%s\", \"step\": %lld, \"max_steps\": %lld, \"mode\": \"%s\", "
      "\"replicas\": {\"status\": \"%s\", \"failovers\": %lld, \"shards_unreplicated\": %d}, \"workers\": [",
      state_of(m), (long long)o->step, (long long)m->cfg.max_steps, tfx_config_choice_name("training.mode", m->cfg.mode),
      master__replica_status(m), (long long)m->failovers, master__unreplicated_shards(m));
  for (int w = 0; w < m->n_workers; w++) {
    put(&b, "%s{\"index\": %d, \"address\": \"%s\", \"registered\": %s, \"silent\": %s}", w ? ", " : "", w,
        tfx_cluster_address(m->n->cluster, TFX_ROLE_WORKER, w), m->workers[w].registered ? "true" : "false",
        m->workers[w].hb_warned ? "true" : "false");
  }
  put(&b, "], \"ps\": [");
  for (int p = 0; p < m->n_ps; p++) {
    put(&b, "%s{\"index\": %d, \"address\": \"%s\", \"up\": %s, \"state\": \"%s\", \"version\": %lld, \"served_by\": %d}",
        p ? ", " : "", p, tfx_cluster_address(m->n->cluster, TFX_ROLE_PS, p),
        m->ps[p].state != MASTER_PS_STARTING ? "true" : "false", master__ps_state_name(m->ps[p].state),
        (long long)m->ps[p].version, m->ps[p].at);
  }
  put(&b, "], \"plan\": [");
  for (int i = 0; i < m->plan.n; i++) {
    const Tfx__Shard *s = &m->plan.shards[i];
    put(&b, "%s{\"key\": \"%s\", \"ps\": %d, \"backup\": %d, \"rows\": [%lld, %lld]}", i ? ", " : "", s->key, s->ps,
        tfx_plan_backup(s->ps, m->n_ps, m->plan.replicas), (long long)s->row_begin, (long long)s->row_end);
  }
  put(&b, "], \"history\": {\"train\": [");
  for (int i = 0; i < o->n_train; i++) {
    put(&b, "%s[%g, %g, %g, %g]", i ? ", " : "", o->train[i][0], isfinite(o->train[i][1]) ? o->train[i][1] : -1,
        o->train[i][2], o->train[i][3]);
  }
  put(&b, "], \"eval\": [");
  for (int i = 0; i < o->n_eval; i++) {
    put(&b, "%s[%g, %g, %g]", i ? ", " : "", o->eval[i][0], isfinite(o->eval[i][1]) ? o->eval[i][1] : -1,
        o->eval[i][2]);
  }
  const char *serve = serve_url();
  put(&b, "]}, \"serve\": %s%s%s}\n", serve ? "\"" : "", serve ? serve : "null", serve ? "\"" : "");
  return b.s;
}

/* The page: no external resources; it polls /status and draws with a canvas. */
static const char page[] =
    "<!doctype html><html><head><meta charset=utf-8><title>tfx</title><style>body{font:14px sans-serif;margin:16px}"
    "canvas{border:1px solid #ccc;margin:4px}td,th{padding:2px 8px;text-align:left}</style></head><body>"
    "<h2>tfx run <span id=st></span></h2><p id=sv></p><canvas id=loss width=420 height=220></canvas>"
    "<canvas id=acc width=420 height=220></canvas><canvas id=eps width=420 height=220></canvas><table id=tab></table>"
    "<script>function plot(id,title,pts,color){const c=document.getElementById(id),g=c.getContext('2d');"
    "g.clearRect(0,0,c.width,c.height);g.fillStyle='#000';g.fillText(title,8,14);if(pts.length<1)return;"
    "let xs=pts.map(p=>p[0]),ys=pts.map(p=>p[1]),x0=Math.min(...xs),x1=Math.max(...xs)||1,y0=Math.min(...ys),"
    "y1=Math.max(...ys);if(y1==y0)y1=y0+1;if(x1==x0)x1=x0+1;g.strokeStyle=color;g.lineWidth=2;g.beginPath();"
    "pts.forEach((p,i)=>{const x=30+(p[0]-x0)/(x1-x0)*(c.width-40),y=c.height-20-(p[1]-y0)/(y1-y0)*(c.height-40);"
    "i?g.lineTo(x,y):g.moveTo(x,y)});g.stroke();g.fillText(y1.toPrecision(3),2,24);g.fillText(y0.toPrecision(3),2,c."
    "height-20);}"
    "async function tick(){const s=await (await fetch('/status')).json();document.getElementById('st').textContent="
    "s.state+' step '+s.step+'/'+s.max_steps;if(s.serve)document.getElementById('sv').innerHTML="
    "'served at <a href=\"'+s.serve+'\">'+s.serve+'</a>';const h=s.history;plot('loss','training "
    "loss',h.train.map(p=>[p[0],p[1]]),'#c33');"
    "plot('acc','eval accuracy',h.eval.map(p=>[p[0],p[2]]),'#36c');let e=[],a=h.train[0];"
    /* Workers report the same step at nearly the same time: rate over gaps of at least half a second. */
    "for(const b of h.train.slice(1)){if(b[3]>a[3]+0.5&&b[0]>a[0]){e.push([b[3],(b[0]-a[0])/(b[3]-a[3])]);a=b;}}"
    "plot('eps','steps/s against time',e,'#393');let t='<tr><th>task</th><th>address</th><th>state</th></tr>';"
    "s.ps.forEach(p=>t+='<tr><td>ps '+p.index+'</td><td>'+p.address+'</td><td>'+(p.up?'up, version "
    "'+p.version:'down')+'</td></tr>');"
    "s.workers.forEach(w=>t+='<tr><td>worker "
    "'+w.index+'</td><td>'+w.address+'</td><td>'+(w.registered?(w.silent?'silent':'training'):'missing')+'</td></tr>');"
    "document.getElementById('tab').innerHTML=t;}tick();setInterval(tick,2000);</script></body></html>\n";

static char *render(const char *path, const char **type, void *ctx) {
  master *m = ctx;
  char *body = NULL;
  pthread_mutex_lock(&m->obs.lock);
  if (!strcmp(path, "/metrics")) {
    body = render_metrics(m);
    *type = "text/plain; version=0.0.4; charset=utf-8";
  } else if (!strcmp(path, "/status")) {
    body = render_status(m);
    *type = "application/json";
  } else if (!strcmp(path, "/")) {
    body = strdup(page);
    *type = "text/html; charset=utf-8";
  }
  pthread_mutex_unlock(&m->obs.lock);
  return body;
}

void master__observe_init(master *m) {
  pthread_mutex_init(&m->obs.lock, NULL);
  m->obs.start_ms = tfx_now_ms();
  m->obs.loss = NAN;
  m->obs.accuracy = NAN;
  m->obs.eval_loss = NAN;
  m->obs.eval_accuracy = NAN;
  m->obs.examples_per_sec = NAN;
}

void master__lock(master *m, int lock) {
  if (lock) {
    pthread_mutex_lock(&m->obs.lock);
  } else {
    pthread_mutex_unlock(&m->obs.lock);
  }
}

/* Opens the experiment index of the run's parent directory; NULL (after a warning) when it cannot be used. */
static tfx_runindex *open_index(const master *m) {
  char path[1100];
  tfx_runindex_path_for_run(m->n->run_dir, path, sizeof path);
  tfx_runindex *x = NULL;
  tfx_err err;
  if (tfx_runindex_open(path, 2000, &x, &err)) {
    tfx_log(TFX_LOG_WARN, "MASTER-INDEX", "%s; the run goes on (metrics.jsonl is the record)", err.msg);
    return NULL;
  }
  return x;
}

/* Registers the run in the index as running (a warning if that fails). */
static void index_begin(master *m) {
  tfx_runindex *x = open_index(m);
  tfx_err err;
  if (x && tfx_runindex_begin(x, m->n->run_dir, tfx_wall_s(), &err)) { /* wall time: when, for a person */
    tfx_log(TFX_LOG_WARN, "MASTER-INDEX", "%s; the run goes on (metrics.jsonl is the record)", err.msg);
  }
  tfx_runindex_close(x);
}

/* Stores the run's series and how it ended in the index (a warning if that fails). */
static void index_end(master *m) {
  const char *status = m->abort_code                          ? "failed"
                       : m->global_step >= m->cfg.max_steps   ? "finished"
                       : tfx_stop_requested() || m->hook_stop ? "stopped"
                                                              : "failed";
  tfx_runindex *x = open_index(m);
  tfx_err err;
  if (x && tfx_runindex_import(x, m->n->run_dir, status, &err)) {
    tfx_log(TFX_LOG_WARN, "MASTER-INDEX", "%s; `tfx-node runs` rebuilds it from metrics.jsonl", err.msg);
  }
  tfx_runindex_close(x);
}

int master__observe_start(master *m, tfx_err *err) {
  index_begin(m);
  if (!m->cfg.http_port) {
    return TFX_OK;
  }
  int rc = tfx_http_start(m->n->bind_host, m->cfg.http_port, render, m, &m->http, err);
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "MASTER-HTTP", "serving /metrics, /status and / at http://127.0.0.1:%d/", m->cfg.http_port);
  }
  return rc;
}

void master__observe_stop(master *m) {
  tfx_http_stop(m->http);
  m->http = NULL;
  if (m->metrics) {
    index_end(m);
  }
}

/* Stores a STATUS statistic in the ps_stats field of the same name (others are ignored). */
static void set_ps_stat(ps_stats *st, const char *key, double value) {
#define X(field, metric, help) \
  if (!strcmp(key, #field)) {  \
    st->field = value;         \
  }
  MASTER_PS_STATS(X)
#undef X
}

void master__observe_ps(master *m, int p, const tfx_envelope *status) {
  if (p < 0 || p >= OBS_MAX_PS) {
    return;
  }
  pthread_mutex_lock(&m->obs.lock);
  for (size_t i = 0; i < status->n_stats; i++) {
    if (status->stats[i]->key) {
      set_ps_stat(&m->ps[p].stats, status->stats[i]->key, status->stats[i]->value);
    }
  }
  pthread_mutex_unlock(&m->obs.lock);
}

/* The row of a series of OBS_POINTS rows to write next: the next free one, or the last after dropping the
 * oldest. */
static int next_point(double *rows, size_t row_size, int *n) {
  if (*n < OBS_POINTS) {
    return (*n)++;
  }
  memmove(rows, (char *)rows + row_size, row_size * (OBS_POINTS - 1));
  return OBS_POINTS - 1;
}

void master__observe(master *m, const char *kind, int64_t step, double loss, double accuracy, double eps) {
  observed *o = &m->obs;
  pthread_mutex_lock(&o->lock);
  if (!strcmp(kind, "train")) {
    o->loss = loss;
    o->accuracy = accuracy;
    o->examples_per_sec = eps;
    o->reports++;
    int i = next_point(&o->train[0][0], sizeof o->train[0], &o->n_train);
    o->train[i][0] = (double)step;
    o->train[i][1] = loss;
    o->train[i][2] = accuracy;
    o->train[i][3] = (double)(tfx_now_ms() - o->start_ms) / 1000.0;
  } else if (!strcmp(kind, "eval")) {
    o->eval_loss = loss;
    o->eval_accuracy = accuracy;
    int i = next_point(&o->eval[0][0], sizeof o->eval[0], &o->n_eval);
    o->eval[i][0] = (double)step;
    o->eval[i][1] = loss;
    o->eval[i][2] = accuracy;
  } else if (!strcmp(kind, "checkpoint")) {
    o->checkpoints++;
    o->last_ckpt_ms = tfx_now_ms();
  } else if (step > o->step) {
    o->step = step;
  }
  pthread_mutex_unlock(&o->lock);
}

/* Keeps the fields of an eval record (or of a train record: train) for /metrics. */
static void keep_fields(master *m, int train, const char *const *names, const double *values, int n) {
  observed *o = &m->obs;
  int room = train ? (int)(sizeof o->train_values / sizeof o->train_values[0]) : TFX_EVAL_MAX_FIELDS;
  char(*keys)[24] = train ? o->train_names : o->field_names;
  double *vals = train ? o->train_values : o->field_values;
  int *kept = train ? &o->n_train_fields : &o->n_fields;
  pthread_mutex_lock(&o->lock);
  *kept = 0;
  for (int i = 0; i < n && *kept < room; i++) {
    snprintf(keys[*kept], sizeof keys[0], "%s", names[i]);
    vals[(*kept)++] = values[i];
  }
  pthread_mutex_unlock(&o->lock);
}

void master__record(master *m, const char *kind, int64_t step, const char *const *names, const double *values, int n,
                    const char *json) {
  tfx_metrics_write_json(m->metrics, kind, step, names, values, n, json);
  tfx_events_write(m->events, kind, step, names, values, n);
  if (!strcmp(kind, "eval") || !strcmp(kind, "train")) {
    keep_fields(m, kind[0] == 't', names, values, n);
  }
}
