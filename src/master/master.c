/* The master (chief): startup, plan, metrics, evaluation, checkpoints, stop. */
#include "master/master.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "config/plugin.h"
#include "data/dataset.h"
#include "data/epochs.h"
#include "data/source.h"
#include "master/master_impl.h"
#include "master/plan.h"
#include "net/net.h"
#include "observe/events.h"
#include "observe/metrics.h"
#include "observe/notify.h"
#include "observe/progress.h"
#include "psclient/psclient.h"
#include "store/ckpt.h"
#include "store/runconfig.h"
#include "train/evaluate.h"

static int open_clients(master *m, tfx_role role, tfx_client ***out, int n, tfx_err *err) {
  *out = calloc((size_t)n + 1, sizeof **out);
  if (!*out) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; i < n; i++) {
    char ep[320];
    int rc = tfx_address_endpoint(tfx_cluster_address(m->n->cluster, role, i), 0, NULL, ep, sizeof ep, err);
    if (!rc) {
      rc = tfx_client_create(ep, &(*out)[i], err);
    }
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

static int setup(master *m, tfx_err *err) {
  tfx_node *n = m->n;
  if (!n->config_path[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "the master needs --config EXPERIMENT.json");
  }
  m->cfg = n->cfg;
  long long stop_at = tfx_hooks_stop_step(n->plugin);
  if (stop_at > 0 && stop_at < m->cfg.max_steps) {
    m->cfg.max_steps = stop_at; /* stop_at_step:N ends the run at N exactly; the workers get it with the experiment */
  }
  if (n->http_port) {
    m->cfg.http_port = n->http_port; /* --http-port wins over observe.http_port */
  }
  m->n_ps = tfx_cluster_count(n->cluster, TFX_ROLE_PS);
  m->n_workers = tfx_cluster_count(n->cluster, TFX_ROLE_WORKER);
  if (m->n_ps < 1 || m->n_workers < 1) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG: the cluster needs at least one ps and one worker");
  }
  if (m->cfg.mode == TFX_MODE_SYNC && m->cfg.replicas_to_aggregate > m->n_workers) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "training.replicas_to_aggregate %d exceeds the %d worker(s): no step could ever complete",
                       m->cfg.replicas_to_aggregate, m->n_workers);
  }
  int rc = tfx_epochs_apply(&m->cfg, m->n_workers, &m->epoch_steps, err);
  if (rc) {
    return rc;
  }
  if ((rc = tfx_model_create(&m->cfg, 1000, &m->model, err)) ||
      (rc = tfx_plan_build(&m->cfg, m->model, m->n_ps, &m->plan, err))) {
    return rc;
  }
  if ((rc = tfx_dataset_load_config(&m->cfg, 1, tfx_model_input_size(m->model), &m->eval, err))) {
    return rc;
  }
  for (int i = 0; i < m->cfg.n_valsets; i++) {
    tfx_config vc = m->cfg;
    snprintf(vc.eval_images, sizeof vc.eval_images, "%s", m->cfg.valsets[i].images);
    snprintf(vc.eval_labels, sizeof vc.eval_labels, "%s", m->cfg.valsets[i].labels);
    if ((rc = tfx_dataset_load_config(&vc, 1, tfx_model_input_size(m->model), &m->valsets[i], err))) {
      return rc;
    }
  }
  /* The saved experiment is checked (a resume keeps its model) before anything is written in the run. */
  m->config_json = tfx_config_to_json(&m->cfg);
  if ((rc = tfx_mkdirs(n->run_dir, err)) ||
      (rc = tfx_run_save_config(n->run_dir, "config.json", m->config_json, n->resume, err)) ||
      (rc = tfx_metrics_open(n->run_dir, &m->metrics, err)) || (rc = tfx_events_open(n->run_dir, &m->events, err))) {
    return rc;
  }
  char ep[320];
  rc = tfx_address_endpoint(tfx_cluster_address(n->cluster, TFX_ROLE_MASTER, 0), 1, n->bind_host, ep, sizeof ep, err);
  if (!rc) {
    rc = tfx_server_open(ep, &m->sock, err);
    m->serve_pending = tfx_master_serve_pending;
  }
  if (!rc) {
    rc = open_clients(m, TFX_ROLE_PS, &m->ps, m->n_ps, err);
  }
  if (!rc) {
    rc = open_clients(m, TFX_ROLE_WORKER, &m->workers, m->n_workers, err);
  }
  m->ps_up = calloc((size_t)m->n_ps, sizeof(int));
  m->registered = calloc((size_t)m->n_workers, sizeof(int));
  m->worker_ids = calloc((size_t)m->n_workers, sizeof(peer_id));
  m->ps_version = calloc((size_t)m->n_ps, sizeof(int64_t));
  m->hb_pending = calloc((size_t)m->n_workers, sizeof(int));
  m->hb_warned = calloc((size_t)m->n_workers, sizeof(int));
  m->hb_sent = calloc((size_t)m->n_workers, sizeof(int64_t));
  m->hb_seen = calloc((size_t)m->n_workers, sizeof(int64_t));
  if (!rc && (!m->ps_up || !m->registered || !m->worker_ids || !m->ps_version || !m->hb_pending || !m->hb_warned ||
              !m->hb_sent || !m->hb_seen)) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "MASTER-START", "listening on %s; %d ps, %d worker(s), mode %s", ep, m->n_ps, m->n_workers,
            tfx_config_choice_name("training.mode", m->cfg.mode));
    tfx_notify_ready("chief: waiting for the parameter servers and workers");
  }
  return rc;
}

static void cleanup(master *m) {
  for (int p = 0; m->ps && p < m->n_ps; p++) {
    tfx_client_destroy(m->ps[p]);
  }
  for (int w = 0; m->workers && w < m->n_workers; w++) {
    tfx_client_destroy(m->workers[w]);
  }
  free(m->ps), free(m->workers), free(m->ps_up), free(m->registered), free(m->worker_ids), free(m->ps_version);
  free(m->hb_pending), free(m->hb_warned), free(m->hb_sent), free(m->hb_seen);
  tfx_net_close(m->sock);
  tfx_plan_fini(&m->plan);
  tfx_model_destroy(m->model);
  tfx_dataset_destroy(m->eval);
  for (int i = 0; i < TFX_MAX_VALSETS; i++) {
    tfx_dataset_destroy(m->valsets[i]);
  }
  tfx_metrics_close(m->metrics);
  tfx_events_close(m->events);
  free(m->config_json);
}

int tfx_master_run(tfx_node *n, tfx_err *err) {
  master m;
  memset(&m, 0, sizeof m);
  m.n = n;
  m.last_acc = NAN;
  tfx_wire_set_sender(TFX__ROLE__ROLE_MASTER, n->index);
  /* Evaluation runs beside the workers: OpenBLAS's default (a spinning thread per core) would take their cores. */
  openblas_set_num_threads(n->cfg.threads);
  tfx_master_observe_init(&m);
  int rc = setup(&m, err);
  if (!rc) {
    rc = tfx_master_observe_start(&m, err);
  }
  if (!rc) {
    rc = tfx_master_wait_cluster(&m, err);
  }
  if (!rc) {
    rc = tfx_master_init_ps(&m, err);
  }
  if (!rc) {
    rc = tfx_master_loop(&m, err);
  }
  if (rc == TFX_EPEER) {
    /* A lost peer is a fault a restart can mend: the ps keep their state and the workers wait for the master
     * that tfx-node local, compose or Kubernetes restarts, which resumes from the newest checkpoint. */
    tfx_log(TFX_LOG_WARN, "MASTER-LEAVE", "leaving the ps and workers running for a restarted master");
  } else {
    tfx_master_stop_all(&m);
  }
  tfx_master_observe_stop(&m);
  cleanup(&m);
  pthread_mutex_destroy(&m.obs.lock);
  return rc;
}

int tfx_master_print_plan(const tfx_config *cfg, int n_ps, FILE *f, tfx_err *err) {
  tfx_model *model;
  tfx_plan plan;
  int rc = tfx_model_create(cfg, 1, &model, err);
  if (rc) {
    return rc;
  }
  rc = tfx_plan_build(cfg, model, n_ps, &plan, err);
  if (!rc) {
    tfx_plan_print(&plan, f);
  }
  tfx_plan_fini(&plan);
  tfx_model_destroy(model);
  return rc;
}
