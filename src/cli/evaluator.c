/* The evaluator task (TF_CONFIG job "evaluator", outside the training cluster): evaluates every new complete
 * checkpoint of the shared run directory on the eval set and appends its eval line to metrics.jsonl, until the
 * checkpoint at max_steps has been evaluated (or SIGTERM). Answers STATUS on its address meanwhile. */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs.h"
#include "common/log.h"
#include "data/dataset.h"
#include "data/epochs.h"
#include "data/source.h"
#include "net/net.h"
#include "observe/metrics.h"
#include "store/ckpt.h"
#include "store/weights.h"
#include "train/evaluate.h"
#include "train/labels.h"

typedef struct evaluator {
  tfx_node *n;
  void *sock;
  tfx_model *model;
  tfx_dataset *data;
  tfx_metrics *metrics;
  int64_t last, start_ms;
  tfx_pmetrics *pm; /* the plugin's own metrics, or NULL */
} evaluator;

static void answer_status(evaluator *e) {
  tfx_inmsg m;
  if (tfx_wire_recv(e->sock, 1, &m, NULL) == TFX_OK && m.env->type == TFX__MSG_TYPE__MSG_STATUS) {
    tfx_envelope env;
    Tfx__KeyValue kv, *kvp = &kv;
    tfx__key_value__init(&kv);
    kv.key = "uptime_s";
    kv.value = (tfx_now_ms() - e->start_ms) / 1000.0;
    tfx_reply_init(&env, &m);
    env.text = "evaluating";
    env.step = e->last;
    env.stats = &kvp;
    env.n_stats = 1;
    tfx_wire_send(e->sock, &m.identity, &env, NULL, 0, NULL);
  } else {
    tfx_server_reply_error(e->sock, &m, TFX_EPROTO, "an evaluator answers only STATUS", NULL);
  }
  tfx_inmsg_fini(&m);
}

/* Writes the metrics record and the log line of step's evaluation. */
static void record_eval(evaluator *e, int64_t step, const tfx_eval_result *r) {
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, e->n->cfg.metrics, r);
  tfx_eval_report_add_plugin(&rep, e->pm, r, "eval");
  rep.names[rep.n] = "evaluator";
  rep.values[rep.n++] = e->n->index;
  char *json = tfx_eval_confusion_json(e->n->cfg.metrics, r);
  tfx_metrics_write_json(e->metrics, "eval", step, rep.names, rep.values, rep.n, json);
  free(json);
  tfx_log(TFX_LOG_INFO, "EVALUATOR-EVAL", "step %lld: eval loss %.4f accuracy %.4f", (long long)step, r->loss,
          r->accuracy);
}

/* Evaluates the checkpoint at dir/step if it is newer than the last one. Eval data the model cannot score (a
 * label outside its classes, an id outside a table) is logged as an error here and records no accuracy. */
static int evaluate_new(evaluator *e, const char *dir, tfx_err *err) {
  tfx_weights ws;
  int rc = tfx_weights_from_checkpoint(dir, &ws, err);
  if (!rc) {
    rc = tfx_weights_load_model(&ws, e->model, err);
  }
  tfx_eval_result r;
  tfx_err bad = {0};
  if (!rc && tfx_evaluate_range(e->model, e->data, 1000, 0, e->data->n, e->pm, &r, &bad)) {
    const tfx_config *c = &e->n->cfg;
    tfx_log(TFX_LOG_ERROR, "EVALUATOR-EVAL-DATA", "step %lld: eval data %s not scored, no accuracy recorded: %s",
            (long long)ws.step, tfx_config_eval_file(c), bad.msg);
  } else if (!rc) {
    record_eval(e, ws.step, &r);
  }
  if (!rc) {
    e->last = ws.step;
  }
  tfx_weights_fini(&ws);
  return rc;
}

/* The step the run stops at as its chief wrote it (RUN/config.json: a chief started with --max-steps stops before
 * the experiment file's max_steps), or fallback while there is no such file. */
static int64_t run_max_steps(const char *run_dir, int64_t fallback) {
  char path[1100];
  snprintf(path, sizeof path, "%s/config.json", run_dir);
  json_object *root = json_object_from_file(path), *training, *max;
  int64_t v = fallback;
  if (root && json_object_object_get_ex(root, "training", &training) &&
      json_object_object_get_ex(training, "max_steps", &max) && json_object_get_int64(max) > 0) {
    v = json_object_get_int64(max);
  }
  json_object_put(root);
  return v;
}

static int loop(evaluator *e, tfx_err *err) {
  const tfx_config *cfg = &e->n->cfg;
  while (!tfx_stop_requested() && e->last < run_max_steps(e->n->run_dir, cfg->max_steps)) {
    zmq_pollitem_t item = {e->sock, 0, ZMQ_POLLIN, 0};
    if (!e->sock) {
      usleep(1000 * 1000); /* an evaluator outside the cluster has no address to answer STATUS on */
    } else if (zmq_poll(&item, 1, 1000) > 0) {
      answer_status(e);
    }
    char dir[1100];
    int64_t step;
    if (tfx_ckpt_latest(e->n->run_dir, &step, dir, sizeof dir, NULL) || step <= e->last) {
      continue;
    }
    tfx_err eerr;
    if (evaluate_new(e, dir, &eerr)) {
      tfx_log(TFX_LOG_WARN, "EVALUATOR-SKIP", "%s", eerr.msg);
      e->last = step;
    }
  }
  (void)err;
  return TFX_OK;
}

int tfx_evaluator_run(tfx_node *n, tfx_err *err) {
  if (!n->config_path[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "the evaluator needs --config EXPERIMENT.json");
  }
  evaluator e = {n, NULL, NULL, NULL, NULL, -1, tfx_now_ms(), NULL};
  char ep[320];
  tfx_wire_set_sender(TFX__ROLE__ROLE_EVALUATOR, n->index);
  const char *own = tfx_cluster_address(n->cluster, TFX_ROLE_EVALUATOR, n->index);
  int rc = own ? tfx_address_endpoint(own, 1, n->bind_host, ep, sizeof ep, err) : TFX_OK;
  if (!rc && own) { /* TensorFlow's layout puts the evaluator outside the cluster: then it serves no STATUS */
    rc = tfx_server_open(ep, &e.sock, err);
  }
  int64_t epoch_steps = 0; /* the last checkpoint is the budget's step when it comes before max_steps */
  if (!rc) {
    rc = tfx_epochs_apply(&n->cfg, tfx_cluster_count(n->cluster, TFX_ROLE_WORKER), &epoch_steps, err);
  }
  if (!rc) {
    rc = tfx_model_create(&n->cfg, 1000, &e.model, err);
  }
  if (!rc) {
    rc = tfx_labels_load(e.model, &n->cfg, 1, &e.data, err);
  }
  if (!rc) {
    rc = tfx_mkdirs(n->run_dir, err);
  }
  if (!rc) {
    rc = tfx_metrics_open(n->run_dir, &e.metrics, err);
  }
  if (!rc) {
    rc = tfx_pmetrics_open(&n->cfg, &e.pm, err);
  }
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "EVALUATOR-START", "watching %s/checkpoints until step %lld", n->run_dir,
            (long long)n->cfg.max_steps);
  }
  if (!rc) {
    rc = loop(&e, err);
  }
  tfx_metrics_close(e.metrics);
  tfx_pmetrics_close(e.pm);
  tfx_dataset_destroy(e.data);
  tfx_model_destroy(e.model);
  tfx_net_close(e.sock);
  return rc;
}
