/* eval.distributed on a worker: its slice of the eval set, scored between steps when the chief asks
 * (MSG_EVALUATE), with the dense variables it trains with (the last version it pulled, lent to the eval model) and
 * the rows of lazy tables each eval batch touches, pulled from the ps through a client of the eval model's own.
 * worker.c calls it; the chief merges the slices' sums. */
#include <math.h>
#include <string.h>

#include "net/net.h"

#include "psclient/psclient.h"
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
    tfx_psclient_lend_rows(e->ps, e->model);
  }
  return rc ? rc : tfx_labels_load(e->model, cfg, 1, &e->data, err);
}

void worker__eval_close(worker_eval *e) {
  tfx_psclient_destroy(e->ps);
  tfx_model_destroy(e->model);
  tfx_dataset_destroy(e->data);
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
  size_t lo, hi;
  tfx_eval_slice(e->data->n, index, count, &lo, &hi);
  return tfx_evaluate_range(e->model, e->data, 1000, lo, hi, r, err);
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

void worker__eval_serve(worker_eval *e, void *sock, const tfx_inmsg *m, tfx_model *train, int64_t version) {
  double index = request_stat(m->env, "index"), count = request_stat(m->env, "count");
  tfx_eval_result r;
  tfx_err err = {0};
  int rc = !train ? tfx_err_set(&err, TFX_ESTATE, "not training yet")
                     : worker__eval_slice(e, train, isfinite(index) ? (int)index : -1,
                                          isfinite(count) ? (int)count : 0, &r, &err);
  if (rc) {
    tfx_server_reply_error(sock, m, rc, err.msg, NULL);
    return;
  }
  tfx_envelope env;
  tfx_reply_init(&env, m);
  const char *keys[] = {"examples", "loss_sum", "correct", "topk", "top_k"};
  double vals[] = {(double)r.examples, r.loss * (double)r.examples, r.accuracy * (double)r.examples,
                   r.top5 * (double)r.examples, r.top_k};
  Tfx__KeyValue kv[5], *kvp[5];
  for (int i = 0; i < 5; i++) {
    tfx__key_value__init(&kv[i]);
    kv[i].key = (char *)keys[i];
    kv[i].value = vals[i];
    kvp[i] = &kv[i];
  }
  env.step = version;
  env.stats = kvp;
  env.n_stats = 5;
  tfx_wire_send(sock, &m->identity, &env, NULL, 0, NULL);
}
