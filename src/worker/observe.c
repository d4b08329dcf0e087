/* The worker's HTTP endpoint: /metrics and /status from what the training thread records. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/net.h"
#include "observe/http.h"
#include "worker/worker_impl.h"

static void metric(tfx_text *t, const worker_obs *o, const char *name, const char *help, const char *type, double v) {
  tfx_prom_metric(t, name, help, type, "worker", o->index, v);
}

static char *render_metrics(const worker_obs *o) {
  tfx_text t = {0};
  metric(&t, o, "tfx_global_step", "Global step this worker last saw (the smallest ps version).", "gauge",
         (double)o->version);
  metric(&t, o, "tfx_worker_steps_total", "Steps this worker computed and pushed.", "counter", (double)o->steps);
  metric(&t, o, "tfx_train_loss", "Mean training loss over the last report interval.", "gauge", o->loss);
  metric(&t, o, "tfx_examples_per_second", "This worker's training throughput.", "gauge", o->examples_per_sec);
  metric(&t, o, "tfx_bytes_sent_total", "Gradient tensor bytes pushed to the ps.", "counter", (double)o->bytes_sent);
  metric(&t, o, "tfx_bytes_received_total", "Variable tensor bytes received from the ps.", "counter",
         (double)o->bytes_received);
  metric(&t, o, "tfx_rejected_frames_total", "Malformed control frames dropped.", "counter", (double)o->bad_frames);
  metric(&t, o, "tfx_uptime_seconds", "Seconds since the worker started.", "gauge",
         (double)(tfx_now_ms() - o->start_ms) / 1000.0);
  tfx_prom_histogram(&t, "tfx_pull_latency_seconds", "Time of a pull of every variable from the ps.", "worker",
                     o->index, &o->pull);
  tfx_prom_histogram(&t, "tfx_push_latency_seconds",
                     "Time of a push round trip: gradients to every ps, the updated values back.", "worker", o->index,
                     &o->push_pull);
  return t.s;
}

static char *render_status(const worker_obs *o) {
  tfx_text t = {0};
  tfx_text_put(&t,
               "{\"role\": \"worker\", \"index\": %d, \"state\": \"%s\", \"step\": %lld, \"local_steps\": %lld, "
               "\"pushes\": %llu, \"push_seconds_mean\": %.6f}\n",
               o->index, o->training ? "training" : "registering", (long long)o->version, (long long)o->steps,
               (unsigned long long)o->push_pull.count,
               o->push_pull.count ? o->push_pull.sum / (double)o->push_pull.count : 0.0);
  return t.s;
}

static char *render(const char *path, const char **type, void *ctx) {
  worker_obs *o = ctx;
  char *body = NULL;
  pthread_mutex_lock(&o->lock);
  if (!strcmp(path, "/metrics")) {
    body = render_metrics(o);
    *type = "text/plain; version=0.0.4; charset=utf-8";
  } else if (!strcmp(path, "/status")) {
    body = render_status(o);
    *type = "application/json";
  }
  pthread_mutex_unlock(&o->lock);
  return body;
}

int worker__obs_start(worker_obs *o, int index, const char *host, int port, tfx_err *err) {
  memset(o, 0, sizeof *o);
  pthread_mutex_init(&o->lock, NULL);
  o->index = index;
  o->start_ms = tfx_now_ms();
  o->loss = o->examples_per_sec = NAN;
  if (port <= 0) {
    return TFX_OK;
  }
  int rc = tfx_http_start(host, port, render, o, &o->http, err);
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "WORKER-HTTP", "serving /metrics and /status at http://127.0.0.1:%d/", port);
  }
  return rc;
}

void worker__obs_stop(worker_obs *o) {
  tfx_http_stop(o->http);
  o->http = NULL;
  pthread_mutex_destroy(&o->lock);
}

void worker__obs_pull(worker_obs *o, double seconds, uint64_t received) {
  pthread_mutex_lock(&o->lock);
  tfx_prom_hist_observe(&o->pull, seconds);
  o->bytes_received += received;
  o->training = 1;
  pthread_mutex_unlock(&o->lock);
}

/* The gradient bytes one push sends: what tfx_psclient puts on the wire for each pushed variable. */
static uint64_t push_bytes(const tfx_model *model) {
  uint64_t bytes = 0;
  for (int i = 0; i < tfx_model_nvars(model); i++) {
    const tfx_var *v = tfx_model_var((tfx_model *)model, i);
    if (!v->trainable && !v->assign) {
      continue;
    }
    bytes += v->sparse ? v->n_rows * (v->count / (size_t)v->shape[0]) * sizeof(float) : v->count * sizeof(float);
  }
  return bytes;
}

void worker__obs_push_pull(worker_obs *o, double seconds, const tfx_model *model, uint64_t received) {
  uint64_t sent = push_bytes(model);
  pthread_mutex_lock(&o->lock);
  tfx_prom_hist_observe(&o->push_pull, seconds);
  o->bytes_sent += sent;
  o->bytes_received += received;
  pthread_mutex_unlock(&o->lock);
}

void worker__obs_step(worker_obs *o, int64_t version, int64_t steps, double loss, double examples_per_sec) {
  pthread_mutex_lock(&o->lock);
  o->version = version;
  o->steps = steps;
  if (!isnan(loss)) {
    o->loss = loss;
    o->examples_per_sec = examples_per_sec;
  }
  pthread_mutex_unlock(&o->lock);
}

void worker__obs_bad_frame(worker_obs *o) {
  pthread_mutex_lock(&o->lock);
  o->bad_frames++;
  pthread_mutex_unlock(&o->lock);
}
