/* eval.distributed on a worker: its slice of the eval set, scored between steps when the chief asks
 * (MSG_EVALUATE), with the dense variables it trains with (the last version it pulled, lent to the eval model) and
 * the rows of lazy tables each eval batch touches, pulled from the ps through a client of the eval model's own.
 * worker.c calls it; the chief merges the slices' sums, confusion matrices and (binary classifiers) scores. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

#include "psclient/psclient.h"
#include "train/classes.h"
#include "train/evaluate.h"
#include "train/labels.h"
#include "worker/worker_impl.h"

int worker__eval_open(worker_eval *e, const tfx_config *cfg, const tfx_psclient *train_ps, const tfx_cluster *cluster,
                      Tfx__Shard *const *shards, size_t n_shards, tfx_err *err) {
  memset(e, 0, sizeof *e);
  if (!cfg->eval_distributed) {
    return TFX_OK;
  }
  int rc = tfx_model_create(cfg, 1000, &e->model, err);
  if (!rc && tfx_psclient_has_lazy(train_ps) &&
      !(rc = tfx_psclient_create(cluster, shards, n_shards, e->model, cfg->request_timeout_s * 1000, &e->ps, err))) {
    tfx_model_set_rows(e->model, TFX_ROWS_BATCH); /* each eval batch's rows pulled from the ps (worker__eval_slice) */
  }
  rc = rc ? rc : tfx_labels_load(e->model, cfg, 1, &e->data, err);
  if (!rc) {
    size_t n = e->data->n ? e->data->n : 1;
    e->scores = malloc(sizeof(float) * n * tfx_model_output_size(e->model));
    e->labels = malloc(sizeof(int64_t) * n);
    rc = e->scores && e->labels ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  return rc;
}

void worker__eval_close(worker_eval *e) {
  tfx_psclient_destroy(e->ps);
  tfx_model_destroy(e->model);
  tfx_dataset_destroy(e->data);
  free(e->scores);
  free(e->labels);
  memset(e, 0, sizeof *e);
}

int worker__eval_slice(worker_eval *e, tfx_model *train, int index, int count, tfx_eval_result *r, tfx_err *err) {
  if (!e->model) {
    return tfx_err_set(err, TFX_ESTATE, "this worker has no eval set (eval.distributed is off in its experiment)");
  }
  if (count < 1 || index < 0 || index >= count) {
    return tfx_err_set(err, TFX_EPROTO, "evaluate: slice %d of %d", index, count);
  }
  for (int i = 0; i < tfx_model_nvars(train); i++) { /* lent, not copied: the eval model only reads them */
    if (!tfx_model_var(train, i)->lazy) {
      tfx_model_var(e->model, i)->value = tfx_model_var(train, i)->value;
    }
  }
  size_t hi;
  tfx_eval_slice(e->data->n, index, count, &e->lo, &hi);
  tfx_eval_span span = {1000, e->lo, hi, e->scores, NULL, e->pm};
  tfx_eval_pass *p = NULL;
  int lent = 0, rc = tfx_eval_pass_create(e->model, e->data, &span, &p, err);
  while (!rc && !(rc = tfx_eval_pass_next(p, &lent, err)) && lent) {
    rc = e->ps ? tfx_psclient_pull_rows(e->ps, err) : TFX_OK; /* the batch's rows of lazy tables */
    rc = rc ? rc : tfx_eval_pass_score(p, err);
  }
  if (!rc) {
    tfx_eval_pass_result(p, r);
  }
  tfx_eval_pass_destroy(p);
  return rc;
}

/* The stat key of a request (NaN when absent). */
static double request_stat(const tfx_envelope *e, const char *key) {
  for (size_t i = 0; i < e->n_stats; i++) {
    if (!strcmp(e->stats[i]->key, key)) {
      return e->stats[i]->value;
    }
  }
  return NAN;
}

/* Describes tensor `name` of dtype and count elements in t, its bytes (copied at send) in p. */
static void add_tensor(Tfx__Tensor *t, int64_t *shape, tfx_payload *p, const char *name, int dtype, size_t count,
                       const void *data) {
  tfx__tensor__init(t);
  t->name = (char *)name;
  t->dtype = (Tfx__DType)dtype;
  *shape = (int64_t)count;
  t->shape = shape;
  t->n_shape = 1;
  t->nbytes = count * tfx_wire_dtype_size(dtype);
  *p = (tfx_payload){data, t->nbytes, 1, NULL, NULL};
}

/* Sends r: its sums in stats, its confusion matrix ("confusion", int64 [classes * tfx_confusion_cols]) and, scored,
 * the slice's scores ("scores", float32 [examples * score_cols]) and labels ("labels", int64 [examples]). */
static void send_result(worker_eval *e, void *sock, const tfx_inmsg *m, const tfx_eval_result *r, int64_t version) {
  tfx_envelope env;
  tfx_reply_init(&env, m);
  const char *keys[] = {"examples", "loss_sum", "correct", "topk", "top_k", "classes", "multi_label", "score_cols"};
  double vals[] = {(double)r->examples, r->loss * (double)r->examples, r->accuracy * (double)r->examples,
                   r->top5 * (double)r->examples, r->top_k, r->classes, r->multi_label, r->scored};
  char pm_keys[TFX_PM_STATS][16];
  double pm_vals[TFX_PM_STATS];
  int n_kv = 8 + tfx_pm_state_stats(e->pm, &r->pm, pm_keys, pm_vals); /* the plugin's metrics: the chief merges */
  Tfx__KeyValue kv[8 + TFX_PM_STATS], *kvp[8 + TFX_PM_STATS];
  for (int i = 0; i < n_kv; i++) {
    tfx__key_value__init(&kv[i]);
    kv[i].key = i < 8 ? (char *)keys[i] : pm_keys[i - 8];
    kv[i].value = i < 8 ? vals[i] : pm_vals[i - 8];
    kvp[i] = &kv[i];
  }
  int64_t cm[TFX_EVAL_MAX_CLASSES * TFX_EVAL_MAX_CLASSES], shapes[3];
  int cols = tfx_confusion_cols(r);
  for (int i = 0; i < r->classes * cols; i++) {
    cm[i] = (int64_t)r->confusion[i / cols][i % cols];
  }
  for (size_t i = 0; r->scored && i < r->examples; i++) {
    e->labels[i] = e->data->y[e->lo + i];
  }
  Tfx__Tensor t[3], *tp[3] = {&t[0], &t[1], &t[2]};
  tfx_payload p[3];
  int n = 0;
  if (r->classes) {
    add_tensor(&t[n], &shapes[n], &p[n], "confusion", TFX__DTYPE__DTYPE_INT64, (size_t)(r->classes * cols), cm);
    n++;
  }
  if (r->scored && r->examples) {
    add_tensor(&t[n], &shapes[n], &p[n], "scores", TFX__DTYPE__DTYPE_FLOAT32, r->examples * (size_t)r->scored,
               e->scores);
    n++;
    add_tensor(&t[n], &shapes[n], &p[n], "labels", TFX__DTYPE__DTYPE_INT64, r->examples, e->labels);
    n++;
  }
  env.step = version;
  env.stats = kvp;
  env.n_stats = (size_t)n_kv;
  env.tensors = tp;
  env.n_tensors = (size_t)n;
  tfx_wire_send(sock, &m->identity, &env, p, n, NULL);
}

void worker__eval_serve(worker_eval *e, void *sock, const tfx_inmsg *m, tfx_model *train, int64_t version) {
  double index = request_stat(m->env, "index"), count = request_stat(m->env, "count");
  tfx_eval_result *r = malloc(sizeof *r);
  tfx_err err = {0};
  int rc = !r ? tfx_err_set(&err, TFX_ENOMEM, "out of memory")
          : !train ? tfx_err_set(&err, TFX_ESTATE, "not training yet")
                   : worker__eval_slice(e, train, isfinite(index) ? (int)index : -1, isfinite(count) ? (int)count : 0,
                                        r, &err);
  if (rc) {
    tfx_server_reply_error(sock, m, rc, err.msg, NULL);
  } else {
    send_result(e, sock, m, r, version);
  }
  free(r);
}
