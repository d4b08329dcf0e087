/* eval.distributed: every worker scores its slice of the eval set between two of its steps (MSG_EVALUATE) and the
 * chief merges the slices: the sums of the example-weighted loss, the hits and the top-K hits, the confusion
 * matrices (per-class metrics), and for a binary classifier every example's score and label, from which the AUC of
 * the whole set is computed exactly as one process computes it (AUC does not average over slices; the scores cost
 * 8 bytes an example on the wire). The chief's socket is served while the replies come (a worker may be reporting
 * meanwhile). Calls serve.c; evaluate.c calls it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/clock.h"
#include "master/master_impl.h"

/* The sums of the slices: examples, loss, hits, top-K hits; the smallest version a worker scored with; the
 * summed confusion matrix; the scores and labels of the slices that came (binary classifiers). */
typedef struct slice_sums {
  double examples, loss, correct, topk, top_k;
  int64_t version;
  int classes; /* -1: no reply yet */
  int multi_label;
  double confusion[TFX_EVAL_MAX_CLASSES][TFX_EVAL_MAX_CLASSES];
  float *scores;
  int32_t *labels;
  size_t n_scored; /* examples: scores holds n_scored x cols */
  int cols;
  int unscored; /* a slice came without scores: no AUC */
  const tfx_pmetrics *pm; /* the plugin's own metrics (borrowed from the master), or NULL */
  tfx_pm_state pm_state;  /* their merged states */
} slice_sums;

/* The elements of tensor `name` of reply r if it has that dtype (their count in *n), else NULL. */
static const void *reply_tensor(const tfx_inmsg *r, const char *name, int dtype, size_t *n) {
  for (size_t i = 0, part = 0; i < r->env->n_tensors; i++) {
    const Tfx__Tensor *t = r->env->tensors[i];
    size_t size = 0;
    const void *data = t->nbytes ? tfx_inmsg_part(r, (int)part++, &size) : NULL;
    if (!strcmp(t->name, name) && (int)t->dtype == dtype && data) {
      *n = size / tfx_wire_dtype_size(dtype);
      return data;
    }
  }
  return NULL;
}

/* Adds worker w's confusion matrix to *s; TFX_EPROTO when it disagrees with the others'. */
static int add_counts(int w, const tfx_inmsg *r, slice_sums *s, tfx_err *err) {
  double k = master__stat(r->env, "classes"), multi = master__stat(r->env, "multi_label");
  size_t n_cm = 0;
  const unsigned char *cm = reply_tensor(r, "confusion", TFX__DTYPE__DTYPE_INT64, &n_cm); /* frames: unaligned */
  int classes = isfinite(k) && k >= 0 && k <= TFX_EVAL_MAX_CLASSES ? (int)k : -2;
  int cols = multi == 1 ? 4 : classes;
  if (classes < 0 || (s->classes >= 0 && (classes != s->classes || (multi == 1) != s->multi_label)) ||
      n_cm != (size_t)(classes * cols)) {
    return tfx_err_set(err, TFX_EPROTO, "worker %d: %g classes and %zu counts (want %d classes)", w, k, n_cm,
                       s->classes);
  }
  s->multi_label = multi == 1;
  s->classes = classes;
  for (size_t i = 0; i < n_cm; i++) {
    int64_t v;
    memcpy(&v, cm + i * sizeof v, sizeof v);
    s->confusion[i / (size_t)cols][i % (size_t)cols] += (double)v;
  }
  return TFX_OK;
}

/* Appends worker w's scores and labels (a slice without them, or with other columns: no AUC for the set). */
static int add_scores(const tfx_inmsg *r, slice_sums *s, size_t examples, tfx_err *err) {
  size_t n_sc = 0, n_lb = 0;
  double c = master__stat(r->env, "score_cols");
  size_t cols = isfinite(c) && c >= 1 && c <= TFX_EVAL_MAX_CLASSES ? (size_t)c : 0;
  const void *sc = reply_tensor(r, "scores", TFX__DTYPE__DTYPE_FLOAT32, &n_sc);
  const unsigned char *lb = reply_tensor(r, "labels", TFX__DTYPE__DTYPE_INT64, &n_lb); /* frames: unaligned */
  if (!sc || !lb || !cols || n_sc != examples * cols || n_lb != examples || (s->cols && cols != (size_t)s->cols)) {
    s->unscored = 1;
    return TFX_OK;
  }
  s->cols = (int)cols;
  float *scores = realloc(s->scores, sizeof(float) * (s->n_scored + examples + 1) * cols);
  s->scores = scores ? scores : s->scores;
  int32_t *labels = scores ? realloc(s->labels, sizeof(int32_t) * (s->n_scored + examples + 1)) : NULL;
  s->labels = labels ? labels : s->labels;
  if (!labels) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory for %zu scores", s->n_scored + examples);
  }
  memcpy(s->scores + s->n_scored * cols, sc, sizeof(float) * examples * cols);
  for (size_t i = 0; i < examples; i++) {
    int64_t v;
    memcpy(&v, lb + i * sizeof v, sizeof v);
    s->labels[s->n_scored + i] = (int32_t)v;
  }
  s->n_scored += examples;
  return TFX_OK;
}

int master__disteval_on(const master *m) {
  const char *chief = tfx_cluster_address(m->n->cluster, TFX_ROLE_MASTER, 0);
  const char *w0 = m->n_workers > 0 ? tfx_cluster_address(m->n->cluster, TFX_ROLE_WORKER, 0) : NULL;
  int w0_is_chief = chief && w0 && !strcmp(chief, w0); /* no chief task: worker 0's address is the chief's */
  return m->cfg.eval_distributed && !m->finished && m->n_workers > 0 && !w0_is_chief;
}

/* Sends MSG_EVALUATE (slice w of n) to worker w over a DEALER of its own. */
static int ask(master *m, int w, tfx_client **c, tfx_err *err) {
  char ep[320];
  int rc = tfx_address_endpoint(tfx_cluster_address(m->n->cluster, TFX_ROLE_WORKER, w), 0, NULL, ep, sizeof ep, err);
  if (rc || (rc = tfx_client_create(ep, c, err))) {
    return rc;
  }
  Tfx__KeyValue kv[2], *kvp[2] = {&kv[0], &kv[1]};
  tfx__key_value__init(&kv[0]);
  tfx__key_value__init(&kv[1]);
  kv[0].key = "index";
  kv[0].value = w;
  kv[1].key = "count";
  kv[1].value = m->n_workers;
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_EVALUATE);
  env.stats = kvp;
  env.n_stats = 2;
  return tfx_client_send(*c, &env, NULL, 0, err);
}

/* Adds worker w's reply to *s; TFX_EPROTO when its sums are missing. */
static int add_reply(int w, const tfx_inmsg *r, slice_sums *s, tfx_err *err) {
  double ex = master__stat(r->env, "examples"), loss = master__stat(r->env, "loss_sum");
  double correct = master__stat(r->env, "correct"), topk = master__stat(r->env, "topk");
  if (!isfinite(ex) || !isfinite(loss) || !isfinite(correct) || !isfinite(topk)) {
    return tfx_err_set(err, TFX_EPROTO, "worker %d: an evaluation reply without its sums", w);
  }
  tfx_pm_state pm;
  int rc = add_counts(w, r, s, err);
  rc = rc ? rc : add_scores(r, s, (size_t)ex, err);
  rc = rc ? rc : tfx_pm_state_read(s->pm, master__env_stat, r->env, &pm, err);
  if (rc) {
    return rc;
  }
  tfx_pmetrics_merge(s->pm, &s->pm_state, &pm);
  s->examples += ex;
  s->loss += loss;
  s->correct += correct;
  s->topk += topk;
  s->top_k = master__stat(r->env, "top_k");
  s->version = r->env->step < s->version ? r->env->step : s->version;
  return TFX_OK;
}

/* Collects every worker's reply within the request deadline, serving the chief's socket between polls. */
static int collect(master *m, tfx_client **c, slice_sums *s, tfx_err *err) {
  int n = m->n_workers, left = n, rc = TFX_OK;
  int64_t deadline = tfx_now_ms() + m->cfg.request_timeout_s * 1000LL;
  char *got = calloc((size_t)n, 1);
  zmq_pollitem_t *items = calloc((size_t)n, sizeof *items);
  if (!got || !items) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  while (!rc && left > 0) {
    for (int w = 0; w < n; w++) {
      items[w] = (zmq_pollitem_t){got[w] ? NULL : tfx_client_socket(c[w]), 0, got[w] ? 0 : ZMQ_POLLIN, 0};
    }
    zmq_poll(items, n, 20);
    for (int w = 0; !rc && w < n; w++) {
      if (!got[w] && (items[w].revents & ZMQ_POLLIN)) {
        tfx_inmsg r;
        rc = tfx_client_recv(c[w], &r, 1000, err); /* readable: returns at once */
        rc = rc ? rc : add_reply(w, &r, s, err);
        tfx_inmsg_fini(&r);
        got[w] = 1;
        left--;
      }
    }
    master__serve_pending(m);
    if (!rc && left > 0 && tfx_now_ms() > deadline) {
      rc = tfx_err_set(err, TFX_EPEER, "%d of %d workers did not score their slice within %d s", left, n,
                       m->cfg.request_timeout_s);
    }
  }
  free(got);
  free(items);
  return rc;
}

/* The merged result of s (examples > 0) into *out. */
static void merged(const slice_sums *s, tfx_eval_result *out) {
  out->loss = s->loss / s->examples;
  out->accuracy = s->correct / s->examples;
  out->top5 = s->topk / s->examples;
  out->top_k = (int)s->top_k;
  out->ranked = 0; /* recall@K (train/recall.h) is counted by one evaluator over the whole set */
  out->examples = (size_t)s->examples;
  out->classes = s->classes > 0 ? s->classes : 0;
  out->multi_label = s->multi_label;
  memcpy(out->confusion, s->confusion, sizeof out->confusion);
  out->pm = s->pm_state;
  int whole = !s->unscored && s->n_scored == out->examples;
  tfx_eval_auc(s->scores, s->labels, s->n_scored, whole ? s->cols : 0, out);
}

int master__evaluate_workers(master *m, int64_t *version, tfx_eval_result *out, tfx_err *err) {
  tfx_client **c = calloc((size_t)m->n_workers, sizeof *c);
  slice_sums *s = calloc(1, sizeof *s);
  int rc = c && s ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  if (s) {
    s->version = INT64_MAX;
    s->classes = -1;
    s->pm = m->pm;
    tfx_pm_state_init(m->pm, &s->pm_state);
  }
  for (int w = 0; !rc && w < m->n_workers; w++) {
    rc = ask(m, w, &c[w], err);
  }
  rc = rc ? rc : collect(m, c, s, err);
  for (int w = 0; c && w < m->n_workers; w++) {
    tfx_client_destroy(c[w]);
  }
  free(c);
  if (!rc && s->examples < 1) {
    rc = tfx_err_set(err, TFX_EINVAL, "the workers scored no example");
  }
  if (!rc) {
    merged(s, out);
    *version = s->version;
  }
  if (s) {
    free(s->scores);
    free(s->labels);
  }
  free(s);
  return rc;
}
