/* TensorFlow Serving's REST API on libmicrohttpd (serve.h). */
#include <json-c/json.h>
#include <microhttpd.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "cli/serve.h"
#include "common/clock.h"
#include "common/text.h"
#include "observe/http.h"
#include "observe/prom.h"

/* The counters of /metrics: field, metric name, help. */
#define SERVE_COUNTERS(X)                                                                              \
  X(requests, "tfx_serve_requests_total", "predict requests answered (any status)")                   \
  X(errors, "tfx_serve_errors_total", "predict requests refused (4xx) or failed (5xx)")              \
  X(predicted, "tfx_serve_instances_total", "instances predicted")                                  \
  X(swaps, "tfx_serve_model_swaps_total", "newer checkpoints swapped in")                            \
  X(swap_failures, "tfx_serve_model_swap_failures_total", "newer checkpoints that could not be loaded")

typedef struct counters {
#define FIELD(f, name, help) uint64_t f;
  SERVE_COUNTERS(FIELD)
#undef FIELD
} counters;

struct tfx_serve_http {
  struct MHD_Daemon *daemon;
  tfx_serve_queue *q;
  tfx_config *cfg;
  size_t dim;
  char name[128], status_path[200], predict_path[220];
  pthread_mutex_t mu; /* guards what follows: the HTTP and scorer threads and the watcher write it */
  counters c;
  tfx_prom_hist latency;
  int64_t step;
  double written_at;
  int have_model;
  tfx_serve_deadlines *deadlines; /* each request's headers in within TFX_SERVE_HEADER_MS */
};

/* One connection's request: its body as it arrives, then the job it waits on. */
typedef struct request {
  tfx_serve_http *h;
  struct MHD_Connection *conn;
  char *body;
  size_t len, cap;
  int too_large, waiting;
  int64_t t0_ms;
  double t0;
  tfx_serve_job job;
} request;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, char *body, const char *type) {
  if (!body) {
    return MHD_NO;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  enum MHD_Result rc = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return rc;
}

/* {"error": msg} with the status code. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned code, const char *msg) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "error", json_object_new_string(msg));
  char *body = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(o);
  return reply(c, code, body, "application/json");
}

/* Counts a predict request answered with code after `seconds`. */
static void count_request(tfx_serve_http *h, unsigned code, double seconds, size_t instances) {
  pthread_mutex_lock(&h->mu);
  h->c.requests++;
  h->c.errors += code >= 400;
  h->c.predicted += code < 400 ? instances : 0;
  tfx_prom_hist_observe(&h->latency, seconds);
  pthread_mutex_unlock(&h->mu);
}

static char *status_body(tfx_serve_http *h) {
  int64_t step = tfx_serve_queue_step(h->q);
  tfx_text t = {0};
  tfx_text_put(&t,
               "{\"model_version_status\": [{\"version\": \"%lld\", \"state\": \"AVAILABLE\", \"status\": "
               "{\"error_code\": \"OK\", \"error_message\": \"\"}}], \"name\": \"%s\", \"step\": %lld}\n",
               (long long)step, h->name, (long long)step);
  return t.s;
}

static char *metrics_body(tfx_serve_http *h) {
  tfx_text t = {0};
  pthread_mutex_lock(&h->mu);
  counters c = h->c;
  tfx_prom_hist lat = h->latency;
  double written = h->written_at;
  pthread_mutex_unlock(&h->mu);
  uint64_t batches, instances;
  tfx_serve_queue_counts(h->q, &batches, &instances);
#define METRIC(f, name, help) tfx_prom_metric(&t, name, help, "counter", "serve", 0, (double)c.f);
  SERVE_COUNTERS(METRIC)
#undef METRIC
  tfx_prom_metric(&t, "tfx_serve_batches_total", "batches scored (requests that arrive together share one)",
                  "counter", "serve", 0, (double)batches);
  tfx_prom_metric(&t, "tfx_serve_header_timeouts_total", "connections closed: their headers not in within 10 s",
                  "counter", "serve", 0, (double)tfx_serve_deadlines_closed(h->deadlines));
  tfx_prom_histogram(&t, "tfx_serve_request_seconds", "predict latency, body received to answer queued", "serve", 0,
                     &lat);
  tfx_prom_metric(&t, "tfx_serve_model_step", "the step of the checkpoint served", "gauge", "serve", 0,
                  (double)tfx_serve_queue_step(h->q));
  tfx_prom_metric(&t, "tfx_serve_model_age_seconds", "seconds since the served checkpoint was written", "gauge",
                  "serve", 0, written > 0 ? (double)time(NULL) - written : 0);
  return t.s;
}

/* v as "%.9g" prints it, into out (at least 24 bytes): a probability in [1e-4, 1) (nearly every one) by integer
 * arithmetic (the same digits: every float of that range was compared), checked to read back as v, anything else by
 * snprintf. printf was half of the server's CPU on
 * 64-instance requests of a 35-class model. Returns the length. */
static int float_text(char *out, float v) {
  if ((double)v >= 1e-4 && v < 1.0f) {
    int zeros = 0; /* zeros after the point before the first significant digit */
    double scale = 1e9;
    while ((double)v * scale < 1e8) {
      scale *= 10;
      zeros++;
    }
    long long digits = (long long)nearbyint((double)v * scale); /* exact (24 + 28 bits): ties to even, as printf */
    if (digits < 1000000000LL) { /* (one that rounds up to 10^9 is left to snprintf) */
      int len = 2 + zeros + 9;
      memcpy(out, "0.0000", 2 + (size_t)zeros);
      for (int i = len - 1; i >= 2 + zeros; i--, digits /= 10) {
        out[i] = (char)('0' + digits % 10);
      }
      while (out[len - 1] == '0') {
        len--;
      }
      out[len] = '\0';
      if (strtof(out, NULL) == v) {
        return len;
      }
    }
  }
  return snprintf(out, 24, "%.9g", v);
}

/* The k highest of p[0..n) into top[0..k) (indexes, highest first; ties: the lower index first). */
static void top_of(const float *p, size_t n, size_t k, size_t *top) {
  size_t have = 0;
  for (size_t c = 0; c < n; c++) {
    if (have == k && !(p[c] > p[top[k - 1]])) {
      continue;
    }
    size_t at = have < k ? have++ : k - 1;
    while (at > 0 && p[c] > p[top[at - 1]]) {
      top[at] = top[at - 1];
      at--;
    }
    top[at] = c;
  }
}

/* The top_k answer: {"predictions": [{"labels": [l0, ...], "scores": [p0, ...]}, ...], "step": S}, each instance's
 * K most probable labels, highest first (K at most the classes). */
static char *top_k_body(const tfx_serve_job *j, size_t n) {
  size_t k = (size_t)j->top_k < j->classes ? (size_t)j->top_k : j->classes;
  size_t *top = malloc(sizeof *top * k);
  tfx_text t = {0};
  tfx_text_put(&t, "{\"predictions\": [");
  for (size_t i = 0; top && i < n; i++) {
    const float *p = j->probs + i * j->classes;
    char num[32];
    top_of(p, j->classes, k, top);
    tfx_text_put(&t, "%s{\"labels\": [", i ? ", " : "");
    for (size_t c = 0; c < k; c++) {
      tfx_text_put(&t, "%s%zu", c ? ", " : "", top[c]);
    }
    tfx_text_put(&t, "], \"scores\": [");
    for (size_t c = 0; c < k; c++) {
      float_text(num, p[top[c]]);
      tfx_text_put(&t, "%s%s", c ? ", " : "", num);
    }
    tfx_text_put(&t, "]}");
  }
  tfx_text_put(&t, "], \"step\": %lld}\n", (long long)j->step);
  if (!top) {
    free(t.s);
    return NULL; /* (the connection is closed: no memory for an answer) */
  }
  free(top);
  return t.s;
}

/* The predict answer: {"predictions": [[p0, ...], ...], "step": S}, floats printed to round-trip. */
static char *predictions_body(const tfx_serve_job *j, size_t n) {
  if (j->top_k > 0) {
    return top_k_body(j, n);
  }
  tfx_text t = {0};
  tfx_text_put(&t, "{\"predictions\": [");
  char *row = malloc(j->classes * 26 + 4);
  if (!row) {
    free(t.s);
    return NULL; /* (the connection is closed: no memory for an answer) */
  }
  for (size_t i = 0; i < n; i++) {
    size_t len = 0;
    for (size_t k = 0; k < j->classes; k++) {
      if (k) {
        memcpy(row + len, ", ", 2);
        len += 2;
      }
      len += (size_t)float_text(row + len, j->probs[i * j->classes + k]);
    }
    row[len] = '\0';
    tfx_text_put(&t, "%s[%s]", i ? ", " : "", row);
  }
  free(row);
  tfx_text_put(&t, "], \"step\": %lld}\n", (long long)j->step);
  return t.s;
}

/* The scorer thread's callback: the predictions are in; the connection answers when MHD calls it again. */
static void job_done(tfx_serve_job *job, void *ctx) {
  (void)job;
  request *r = ctx;
  MHD_resume_connection(r->conn);
}

/* Answers a resumed predict request from its finished job. */
static enum MHD_Result answer_job(request *r) {
  tfx_serve_job *j = &r->job;
  size_t n = j->classes ? r->len : 0; /* the instance count was kept in len once the body was parsed */
  unsigned code = j->rc == TFX_OK ? MHD_HTTP_OK
                  : j->rc == TFX_EINVAL ? MHD_HTTP_BAD_REQUEST
                  : j->rc == TFX_EPEER  ? MHD_HTTP_SERVICE_UNAVAILABLE
                                        : MHD_HTTP_INTERNAL_SERVER_ERROR;
  count_request(r->h, code, now_s() - r->t0, n);
  if (code != MHD_HTTP_OK) {
    return reply_error(r->conn, code, j->error);
  }
  return reply(r->conn, code, predictions_body(j, n), "application/json");
}

/* Parses the body and queues it; the connection is suspended until the scorer thread calls back. */
static enum MHD_Result start_predict(request *r) {
  tfx_serve_http *h = r->h;
  if (r->too_large) {
    count_request(h, 413, now_s() - r->t0, 0);
    return reply_error(r->conn, 413, "the body is over 64 MiB");
  }
  tfx_err err = {0};
  tfx_dataset *d = NULL;
  if (tfx_serve_parse(h->cfg, h->dim, r->body ? r->body : "", r->len, &d, &r->job.top_k, &err)) {
    count_request(h, err.code == TFX_EINVAL ? MHD_HTTP_BAD_REQUEST : 500, now_s() - r->t0, 0);
    return reply_error(r->conn, err.code == TFX_EINVAL ? MHD_HTTP_BAD_REQUEST : 500, err.msg);
  }
  free(r->body);
  r->body = NULL;
  r->len = d->n;
  r->job.data = d;
  r->job.done = job_done;
  r->job.ctx = r;
  r->waiting = 1;
  MHD_suspend_connection(r->conn);
  tfx_serve_queue_submit(h->q, &r->job);
  return MHD_YES;
}

/* Appends an upload chunk (past the limit, the body is dropped and answered 413). */
static void take_upload(request *r, const char *data, size_t n) {
  if (r->too_large || r->len + n > TFX_SERVE_MAX_BODY) {
    r->too_large = 1;
    free(r->body);
    r->body = NULL;
    return;
  }
  if (r->len + n + 1 > r->cap) {
    size_t cap = (r->len + n + 1) * 2;
    char *b = realloc(r->body, cap);
    if (!b) {
      r->too_large = 1;
      return;
    }
    r->body = b;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
  r->body[r->len] = '\0';
}

static enum MHD_Result route(request *r, const char *url, const char *method) {
  tfx_serve_http *h = r->h;
  int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (!strcmp(url, h->predict_path)) {
    return post ? start_predict(r) : reply_error(r->conn, MHD_HTTP_METHOD_NOT_ALLOWED, "predict takes POST");
  }
  if (get && !strcmp(url, h->status_path)) {
    return reply(r->conn, MHD_HTTP_OK, status_body(h), "application/json");
  }
  if (get && !strcmp(url, "/metrics")) {
    return reply(r->conn, MHD_HTTP_OK, metrics_body(h), "text/plain; version=0.0.4; charset=utf-8");
  }
  char msg[400];
  snprintf(msg, sizeof msg, "%s %.200s: not found (this server serves model '%s': GET %s, POST %s, GET /metrics)",
           method, url, h->name, h->status_path, h->predict_path);
  return reply_error(r->conn, MHD_HTTP_NOT_FOUND, msg);
}

/* The Content-Length headers of a request: how many, and whether they disagree. */
typedef struct lengths {
  int n, differ;
  char first[32];
} lengths;

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  lengths *l = cls;
  if (key && !strcasecmp(key, "Content-Length")) {
    if (l->n++ == 0) {
      snprintf(l->first, sizeof l->first, "%s", value ? value : "");
    } else {
      l->differ |= strcmp(l->first, value ? value : "") != 0;
    }
  }
  return MHD_YES;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
  (void)version;
  request *r = *state;
  if (!r) {
    if (!(r = calloc(1, sizeof *r))) {
      return MHD_NO;
    }
    r->h = cls;
    r->conn = c;
    r->t0 = now_s();
    *state = r;
    tfx_serve_deadlines_mark(r->h->deadlines, c, 1);
    lengths l = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &l);
    /* RFC 7230 3.3.2: lengths that disagree leave the body's end to whoever reads it (request smuggling) */
    return l.differ ? reply_error(c, MHD_HTTP_BAD_REQUEST, "Content-Length headers that differ") : MHD_YES;
  }
  if (*upload_size) {
    take_upload(r, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  return r->waiting ? answer_job(r) : route(r, url, method);
}

static void completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
  tfx_serve_http *h = cls;
  (void)why;
  tfx_serve_deadlines_mark(h->deadlines, c, 0); /* a kept-alive connection's next request: its headers are due */
  request *r = *state;
  if (r) {
    free(r->body);
    free(r->job.probs);
    tfx_dataset_destroy(r->job.data);
    free(r);
    *state = NULL;
  }
}

int tfx_serve_http_start(const char *host, int port, const char *name, const tfx_config *cfg, size_t dim,
                         tfx_serve_queue *q, tfx_serve_http **out, tfx_err *err) {
  struct sockaddr_storage sa;
  int rc = tfx_http_resolve(host, port, &sa, err);
  if (rc) {
    return rc;
  }
  tfx_serve_http *h = calloc(1, sizeof *h);
  if (!h || !(h->cfg = malloc(sizeof *h->cfg))) {
    free(h);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  *h->cfg = *cfg;
  h->q = q;
  h->dim = dim;
  pthread_mutex_init(&h->mu, NULL);
  snprintf(h->name, sizeof h->name, "%s", name);
  snprintf(h->status_path, sizeof h->status_path, "/v1/models/%s", name);
  snprintf(h->predict_path, sizeof h->predict_path, "/v1/models/%s:predict", name);
  if ((rc = tfx_serve_deadlines_create(TFX_SERVE_HEADER_MS, &h->deadlines, err))) {
    free(h->cfg);
    free(h);
    return rc;
  }
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                   (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  h->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, answer, h, MHD_OPTION_SOCK_ADDR,
                               (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)2048,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_NOTIFY_COMPLETED, completed,
                               h, MHD_OPTION_NOTIFY_CONNECTION, tfx_serve_deadlines_notify, h->deadlines,
                               MHD_OPTION_END);
  if (!h->daemon) {
    tfx_serve_deadlines_destroy(h->deadlines);
    pthread_mutex_destroy(&h->mu);
    free(h->cfg);
    free(h);
    return tfx_err_sys(err, TFX_ESYS, "serve: HTTP server on %s:%d", host && *host ? host : "*", port);
  }
  *out = h;
  return TFX_OK;
}

void tfx_serve_http_model(tfx_serve_http *h, int64_t step, double written_at) {
  pthread_mutex_lock(&h->mu);
  h->c.swaps += h->have_model;
  h->have_model = 1;
  h->step = step;
  h->written_at = written_at;
  pthread_mutex_unlock(&h->mu);
}

void tfx_serve_http_swap_failed(tfx_serve_http *h) {
  pthread_mutex_lock(&h->mu);
  h->c.swap_failures++;
  pthread_mutex_unlock(&h->mu);
}

void tfx_serve_http_stop(tfx_serve_http *h) {
  if (!h) {
    return;
  }
  MHD_quiesce_daemon(h->daemon);
  tfx_serve_queue_stop(h->q); /* answers every suspended request, so none is left when the daemon stops */
  MHD_stop_daemon(h->daemon);
  tfx_serve_deadlines_destroy(h->deadlines);
  pthread_mutex_destroy(&h->mu);
  free(h->cfg);
  free(h);
}
