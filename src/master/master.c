/* The master (chief): its entry point and its setup (experiment, model and plan, eval data, run directory,
 * sockets), then the phases in order: wait for the cluster and start the ps (startup.c), the step loop
 * (loop.c), the stop. Also `tfx-node plan`. Calls the other files of the room; none calls it. */
#include "master/master.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "config/plugin.h"
#include "data/dataset.h"
#include "data/epochs.h"
#include "data/source.h"
#include "master/master_impl.h"
#include "master/plan.h"
#include "nn/optim.h"
#include "net/net.h"
#include "observe/events.h"
#include "observe/metrics.h"
#include "observe/notify.h"
#include "observe/progress.h"
#include "psclient/psclient.h"
#include "store/ckpt.h"
#include "store/runconfig.h"
#include "train/evaluate.h"
#include "train/labels.h"

/* Opens a DEALER to task i of role into *out. */
static int open_client(master *m, tfx_role role, int i, tfx_client **out, tfx_err *err) {
  char ep[320];
  int rc = tfx_address_endpoint(tfx_cluster_address(m->n->cluster, role, i), 0, NULL, ep, sizeof ep, err);
  return rc ? rc : tfx_client_create(ep, out, err);
}

/* Logs whether this run's ps shards have backups (cluster.replicas), and what auto would say (MASTER-REPLICAS). */
static void log_replicas(const master *m) {
  const char *off = tfx_config_replicas_off(&m->cfg, m->n_ps, m->n_workers);
  if (m->cfg.ps_replicas && m->n_ps >= 2) {
    tfx_log(TFX_LOG_INFO, "MASTER-REPLICAS", "cluster.replicas on: every ps shard has a backup on the next ps%s%s",
            off ? "; it costs more here than where auto turns it on: " : "", off ? off : "");
  } else {
    tfx_log(TFX_LOG_INFO, "MASTER-REPLICAS", "cluster.replicas off: %s",
            off ? off : "set to 0 (a lost ps rolls every ps back to the newest checkpoint)");
  }
}

/* The experiment as this run uses it: the hooks' stop step, --http-port, the cluster's size, the epoch budget. */
static int setup_config(master *m, tfx_err *err) {
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
  int rc = tfx_config_validate_cluster(&m->cfg, m->n_workers, err);
  log_replicas(m);
  return rc ? rc : tfx_epochs_apply(&m->cfg, m->n_workers, &m->epoch_steps, err);
}

/* The model, its plan over the ps, the eval set and the validation sets. */
static int setup_model(master *m, tfx_err *err) {
  int rc;
  if ((rc = tfx_model_create(&m->cfg, 1000, &m->model, err)) ||
      (rc = tfx_plan_build(&m->cfg, m->model, m->n_ps, &m->plan, err))) {
    return rc;
  }
  if ((rc = tfx_labels_load(m->model, &m->cfg, 1, &m->eval, err))) {
    return rc;
  }
  for (int i = 0; i < m->cfg.n_valsets; i++) {
    tfx_config vc = m->cfg;
    snprintf(vc.eval_images, sizeof vc.eval_images, "%s", m->cfg.valsets[i].images);
    snprintf(vc.eval_labels, sizeof vc.eval_labels, "%s", m->cfg.valsets[i].labels);
    if ((rc = tfx_labels_load(m->model, &vc, 1, &m->valsets[i], err))) {
      return rc;
    }
  }
  return TFX_OK;
}

/* The run directory: the saved experiment (checked first: a resume keeps its model), metrics.jsonl, events. */
static int setup_run_dir(master *m, tfx_err *err) {
  tfx_node *n = m->n;
  m->config_json = tfx_config_to_json(&m->cfg);
  int rc;
  if ((rc = tfx_mkdirs(n->run_dir, err)) ||
      (rc = tfx_run_save_config(n->run_dir, "config.json", m->config_json, n->resume, err)) ||
      (rc = tfx_metrics_open(n->run_dir, &m->metrics, err)) || (rc = tfx_events_open(n->run_dir, &m->events, err))) {
    return rc;
  }
  return tfx_pmetrics_open(&m->cfg, &m->pm, err);
}

/* The master's ROUTER (bound at ep) and one peer struct with a DEALER per ps and per worker. */
static int setup_sockets(master *m, char *ep, size_t n, tfx_err *err) {
  int rc = tfx_address_endpoint(tfx_cluster_address(m->n->cluster, TFX_ROLE_MASTER, 0), 1, m->n->bind_host, ep, n, err);
  if (!rc) {
    rc = tfx_server_open(ep, &m->sock, err);
  }
  if (rc) {
    return rc;
  }
  /* Plan epochs go on rising across restarted masters (workers follow a chief's routes only at a newer epoch,
   * and the ps refuse a promote of an older one): this master's first is the wall clock in ms. */
  m->epoch = (uint64_t)(tfx_wall_s() * 1000.0);
  m->lost_ps = -1;
  m->ps = calloc((size_t)m->n_ps, sizeof *m->ps);
  m->workers = calloc((size_t)m->n_workers, sizeof *m->workers);
  if (!m->ps || !m->workers) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int p = 0; !rc && p < m->n_ps; p++) {
    m->ps[p].at = p;
    m->ps[p].backup = tfx_plan_backup(p, m->n_ps, 1);
    rc = open_client(m, TFX_ROLE_PS, p, &m->ps[p].client, err);
  }
  for (int w = 0; !rc && w < m->n_workers; w++) {
    rc = open_client(m, TFX_ROLE_WORKER, w, &m->workers[w].client, err);
  }
  return rc;
}

static int setup(master *m, tfx_err *err) {
  char ep[320];
  int rc = setup_config(m, err);
  if (!rc) {
    rc = setup_model(m, err);
  }
  if (!rc) {
    rc = setup_run_dir(m, err);
  }
  if (!rc) {
    rc = setup_sockets(m, ep, sizeof ep, err);
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
    tfx_client_destroy(m->ps[p].client);
    tfx_client_destroy(m->ps[p].home);
  }
  for (int w = 0; m->workers && w < m->n_workers; w++) {
    tfx_client_destroy(m->workers[w].client);
  }
  free(m->ps);
  master__rolling_fini(m);
  free(m->workers);
  tfx_net_close(m->sock);
  tfx_plan_fini(&m->plan);
  tfx_model_destroy(m->model);
  tfx_dataset_destroy(m->eval);
  for (int i = 0; i < TFX_MAX_VALSETS; i++) {
    tfx_dataset_destroy(m->valsets[i]);
  }
  tfx_metrics_close(m->metrics);
  tfx_events_close(m->events);
  tfx_pmetrics_close(m->pm);
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
  master__observe_init(&m);
  int rc = setup(&m, err);
  if (!rc) {
    rc = master__observe_start(&m, err);
  }
  if (!rc) {
    rc = master__wait_cluster(&m, err);
  }
  if (!rc) {
    rc = master__init_ps(&m, err);
  }
  if (!rc && m.cfg.ckpt_save_initial && m.start_step == 0) {
    rc = master__checkpoint(&m, 0, err); /* the initial weights, before any worker has the plan */
  }
  if (!rc) {
    rc = master__loop(&m, err);
  }
  if (rc == TFX_EPEER) {
    /* A lost peer is a fault a restart can mend: the ps keep their state and the workers wait for the master
     * that tfx-node local, compose or Kubernetes restarts, which resumes from the newest checkpoint. */
    tfx_log(TFX_LOG_WARN, "MASTER-LEAVE", "leaving the ps and workers running for a restarted master");
  } else {
    master__stop_all(&m);
  }
  master__observe_stop(&m);
  cleanup(&m);
  pthread_mutex_destroy(&m.obs.lock);
  return rc;
}

/* The memory a capped lazy table may take on each ps (tfx_table_cap_bound: its rows in whole slabs, its id map,
 * the evicted ids a delta remembers, its admission sketch, as the ps states it in PS-TABLE-CAP), its age limit and
 * admission: one line per capped table. */
static void print_caps(const tfx_config *cfg, const tfx_plan *plan, FILE *f) {
  tfx_optim opt;
  tfx_optim_init(&opt, cfg);
  int title = 0;
  for (int i = 0; i < plan->n; i++) {
    const Tfx__Shard *s = &plan->shards[i];
    const tfx_layer_spec *l = s->lazy && s->n_shape == 2 ? tfx_config_table_layer(cfg, s->var) : NULL;
    int first = 1;
    for (int k = 0; k < i && first; k++) {
      first = strcmp(plan->shards[k].var, s->var) != 0;
    }
    if (!l || !first || (!l->max_rows && l->ttl_steps <= 0 && l->admit_min_count <= 1)) {
      continue;
    }
    size_t row = tfx_table_row_bytes(s->shape[1], tfx_optim_slots(&opt));
    fprintf(f, "%s  %-32s ", title++ ? "" : "table caps (each ps holding a share):\n", s->var);
    if (l->max_rows) {
      tfx_table_bound b;
      tfx_table_cap_bound(l->max_rows, s->shape[1], tfx_optim_slots(&opt), l->admit_min_count > 1,
                          cfg->ckpt_incremental, cfg->ckpt_background, &b);
      const double mib = 1048576.0;
      fprintf(f,
              "max_rows %lld x %zu bytes a row = %.2f MiB of rows in whole slabs + map %.2f + evicted ids %.2f + "
              "sketch %.2f + checkpoint copy %.2f = %.2f MiB a ps at most",
              (long long)l->max_rows, row, b.rows / mib, b.map / mib, b.gone / mib, b.sketch / mib, b.copy / mib,
              b.total / mib);
    } else {
      fprintf(f, "no max_rows (up to every id of its share: %zu bytes a row)", row);
    }
    fprintf(f, "; ttl_steps %lld; admission %s (sketch %zu KiB)\n", (long long)l->ttl_steps,
            l->admit_min_count > 1 ? "by count" : l->admit_probability < 1 ? "by probability" : "off",
            l->admit_min_count > 1 ? TFX_TABLE_SKETCH_BYTES / 1024 : (size_t)0);
  }
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
    print_caps(cfg, &plan, f);
  }
  tfx_plan_fini(&plan);
  tfx_model_destroy(model);
  return rc;
}
