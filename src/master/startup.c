/* The master's start: waiting (bounded) for every ps and worker, then starting every ps with its part of the
 * plan, fresh, resumed from the newest complete checkpoint, or warm-started (training.warm_from). Calls serve.c
 * (workers register while the master waits) and observe.c; master.c and pscalls.c (a ps back empty) call it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/log.h"
#include "master/master_impl.h"
#include "master/rules.h"
#include "observe/metrics.h"
#include "observe/notify.h"
#include "store/ckpt.h"
#include "store/warmstart.h"

static void probe_ps(master *m) {
  for (int p = 0; p < m->n_ps; p++) {
    if (m->ps[p].state != MASTER_PS_STARTING) {
      continue;
    }
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
    if (tfx_client_call(m->ps[p].client, &env, NULL, 0, &r, 200, NULL) == TFX_OK) {
      master__lock(m, 1);
      master__ps_state(m, p, MASTER_PS_UP, TFX_LOG_INFO, "MASTER-PS-UP", "ps %d at %s answers", p,
                       tfx_client_endpoint(m->ps[p].client));
      master__lock(m, 0);
    }
    tfx_inmsg_fini(&r);
  }
}

/* Appends "role index (address)" to buf for one missing peer; counts it. */
static void name_missing(master *m, tfx_role role, int i, char *buf, size_t n, size_t *len, int *count) {
  if (*len >= n) {
    return;
  }
  (*count)++;
  *len += (size_t)snprintf(buf + *len, n - *len, "%s%s %d (%s)", *count > 1 ? ", " : "",
                           role == TFX_ROLE_PS ? "ps" : "worker", i, tfx_cluster_address(m->n->cluster, role, i));
}

/* Names in buf every ps that has not answered and every worker that has not registered; returns how many. */
static int missing(master *m, char *buf, size_t n) {
  int count = 0;
  size_t len = 0;
  buf[0] = '\0';
  for (int p = 0; p < m->n_ps; p++) {
    if (m->ps[p].state == MASTER_PS_STARTING) {
      name_missing(m, TFX_ROLE_PS, p, buf, n, &len, &count);
    }
  }
  for (int w = 0; w < m->n_workers && !m->over; w++) {
    if (!m->workers[w].registered) {
      name_missing(m, TFX_ROLE_WORKER, w, buf, n, &len, &count);
    }
  }
  return count;
}

/* Whether the run this master resumes already reached max_steps (a master restarted after the final checkpoint,
 * the workers gone): then it needs only the ps, to evaluate the final step. */
static int run_over(master *m) {
  char dir[1100];
  int64_t step = 0;
  int have = m->n->resume && tfx_ckpt_resume_point(m->n->run_dir, &step, dir, sizeof dir, NULL) == TFX_OK;
  if (!master__run_over(have, step, m->cfg.max_steps, m->cfg.steps > 0)) {
    return 0;
  }
  tfx_log(TFX_LOG_INFO, "MASTER-AT-MAX", "%s is at max_steps %lld: waiting for the ps only, to evaluate it", dir,
          (long long)m->cfg.max_steps);
  return 1;
}

int master__wait_cluster(master *m, tfx_err *err) {
  m->over = run_over(m);
  int64_t start = tfx_now_ms();
  int64_t deadline = start + (int64_t)m->cfg.register_timeout_s * 1000;
  int64_t last_log = start;
  char who[1024];
  tfx_progress_init(&m->progress, 0, m->cfg.max_steps);
  while (!tfx_stop_requested()) {
    probe_ps(m);
    master__serve(m, 100);
    tfx_notify_watchdog();
    if (!missing(m, who, sizeof who)) {
      return TFX_OK;
    }
    if (tfx_now_ms() > deadline) {
      return tfx_err_set(err, TFX_EPEER, "gave up after %d s waiting for: %s", m->cfg.register_timeout_s, who);
    }
    if (tfx_now_ms() - last_log >= 3000) {
      last_log = tfx_now_ms();
      tfx_log(TFX_LOG_INFO, "MASTER-WAIT", "still waiting for: %s", who);
    }
  }
  return tfx_err_set(err, TFX_EINTR, "stopped while waiting for the cluster");
}

static int init_one(master *m, int p, const char *restore_dir, tfx_err *err) {
  size_t n;
  Tfx__Shard **mine = tfx_plan_for_ps(&m->plan, p, &n);
  if (!mine) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  char path[1200] = "";
  if (restore_dir) {
    tfx_ckpt_part_path(path, sizeof path, restore_dir, p, TFX_CKPT_SHARD);
  }
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = m->config_json;
  env.shards = mine;
  env.n_shards = n;
  env.path = path;
  Tfx__Init init = TFX__INIT__INIT;
  init.workers = (uint32_t)m->n_workers;
  env.init = &init;
  master__route(m, p, &env);
  int rc = tfx_client_call(m->ps[p].client, &env, NULL, 0, &r, m->cfg.request_timeout_s * 1000, err);
  tfx_inmsg_fini(&r);
  if (!rc) {
    rc = master__init_backup(m, p, &env, err);
  }
  free(mine);
  return rc;
}

/* Fills e with the checkpoint entries of ps p's shards of the model's values; returns how many. */
static int warm_entries(master *m, int p, tfx_ckpt_entry *e) {
  int k = 0;
  for (int i = 0; i < m->plan.n; i++) {
    const Tfx__Shard *s = &m->plan.shards[i];
    tfx_var *v = tfx_model_find_var(m->model, s->var);
    if (s->ps != p || !v) {
      continue;
    }
    size_t row = v->count / (size_t)v->shape[0];
    tfx_ckpt_slice slice = {.key = s->key,
                            .rank = v->rank,
                            .dims = v->shape,
                            .row_begin = s->row_begin,
                            .row_end = s->row_end,
                            .count = row * (size_t)(s->row_end - s->row_begin),
                            .value = v->value + row * (size_t)s->row_begin};
    k += tfx_ckpt_slice_entries(&e[k], &slice);
  }
  return k;
}

/* Warm start of a fresh distributed run: fresh values plus the warm-started ones, written as checkpoint 0 in the
 * plan's shards, which every ps then restores (so the ps need no new message for it). */
static int write_warm_checkpoint(master *m, char *dir, size_t n, tfx_err *err) {
  tfx_model_init_vars(m->model, (uint64_t)m->cfg.seed);
  int rc = tfx_warm_start(&m->cfg, m->model, NULL, err);
  tfx_ckpt_dir(m->n->run_dir, 0, dir, n);
  if (rc || (rc = tfx_mkdirs(dir, err))) {
    return rc;
  }
  uint32_t crc[1024];
  uint64_t bytes[1024];
  tfx_ckpt_entry *e = calloc((size_t)m->plan.n + 1, sizeof *e);
  if (!e || m->n_ps > 1024) {
    free(e);
    return tfx_err_set(err, TFX_ENOMEM, "warm start bookkeeping");
  }
  for (int p = 0; p < m->n_ps && !rc; p++) {
    int k = warm_entries(m, p, e);
    char path[1200];
    tfx_ckpt_part_path(path, sizeof path, dir, p, TFX_CKPT_SHARD);
    rc = tfx_ckpt_write(path, 0, e, k, &crc[p], &bytes[p], err);
  }
  free(e);
  return rc ? rc : tfx_ckpt_write_manifest(dir, 0, m->n_ps, crc, bytes, err);
}

/* Where the ps start from: *have = 1 with the checkpoint dir and its *step (resumed, or the warm start's
 * checkpoint 0), or *have = 0 for a fresh start. Checkpoints that exist but none usable are an error. */
static int find_start(master *m, char *dir, size_t n, int *have, int64_t *step, tfx_err *err) {
  int nps = 0;
  *step = 0;
  int found = m->n->resume ? tfx_ckpt_resume_point(m->n->run_dir, step, dir, n, err) : TFX_ENOTFOUND;
  if (found != TFX_OK && found != TFX_ENOTFOUND) {
    return found; /* checkpoints exist and none is usable: never start over on top of them */
  }
  *have = found == TFX_OK;
  if (!*have && m->cfg.warm_from[0]) {
    int rc = write_warm_checkpoint(m, dir, n, err);
    if (rc) {
      return rc;
    }
    *have = 1;
    *step = 0;
  }
  int verified = *have ? tfx_ckpt_verify(dir, step, &nps, err) : TFX_OK;
  if (verified) {
    return verified;
  }
  if (*have && nps != m->n_ps) { /* each ps finds its shards by key in every file, lazy rows by id */
    tfx_log(TFX_LOG_INFO, "MASTER-RESUME-REPARTITION",
            "%s was written by %d ps; the cluster has %d: each ps takes "
            "its shards and rows from every file",
            dir, nps, m->n_ps);
  }
  return TFX_OK;
}

/* The run starts at start_step: max_steps of relative training, and the first steps of evaluation, checkpoints
 * and validation after it. */
static void set_start(master *m, int64_t start_step) {
  m->start_step = start_step;
  m->global_step = m->start_step;
  if (m->cfg.steps > 0) {
    /* Relative training (Estimator's `steps`): the workers get the absolute step through the experiment. */
    m->cfg.max_steps = m->start_step + m->cfg.steps;
    if (m->epoch_steps > 0 && m->epoch_steps < m->cfg.max_steps) {
      m->cfg.max_steps = m->epoch_steps; /* training.epochs counts from step 0 and still caps */
    }
    free(m->config_json);
    m->config_json = tfx_config_to_json(&m->cfg);
  }
  m->last_ckpt_ms = tfx_now_ms();
  /* An evaluation point passed while no chief was there (the run resumed or adopted beyond it) is not skipped. */
  m->next_eval =
      master__first_eval(m->start_step, tfx_metrics_last_step(m->n->run_dir, "eval"), m->cfg.eval_every_steps);
  m->next_ckpt = master__next_multiple(m->start_step, m->cfg.ckpt_every_steps);
  for (int i = 0; i < m->cfg.n_valsets; i++) {
    int first = m->cfg.valsets[i].first && m->start_step == 0;
    m->next_val[i] = first ? 0 : master__next_multiple(m->start_step, m->cfg.valsets[i].every_steps);
  }
}

/* What every ps said of its state before this master starts it. */
typedef struct live_ps {
  int *serving;
  int64_t *shards, *want, *version;
} live_ps;

/* Asks ps p its state into l; 0 when it does not answer (the ps have just answered the cluster wait). */
static int status_of(master *m, int p, live_ps *l) {
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  int ok = tfx_client_call(m->ps[p].client, &env, NULL, 0, &r, 1000, NULL) == TFX_OK && r.env;
  if (ok) {
    double shards = master__stat(r.env, "shards");
    l->serving[p] = r.env->instance_state == TFX__INSTANCE_STATE__INSTANCE_SERVING ||
                    r.env->instance_state == TFX__INSTANCE_STATE__INSTANCE_UNREPLICATED;
    l->shards[p] = isfinite(shards) ? (int64_t)shards : -1;
    l->version[p] = r.env->step;
  }
  tfx_inmsg_fini(&r);
  return ok;
}

/* The step at which this master adopts the ps's live state (master__adopt_step), or -1. Only a master that
 * resumes and has not started the ps yet adopts (a rollback restores on purpose), and not under relative
 * training, whose max_steps the ps got from the master that started them. The ps are asked a few times: in
 * sync mode they may be between the halves of one step. */
static int64_t live_step(master *m, int64_t ckpt_step) {
  if (m->running || !m->n->resume || m->cfg.steps > 0) {
    return -1;
  }
  int n = m->n_ps;
  live_ps l = {calloc((size_t)n, sizeof *l.serving), calloc((size_t)n, sizeof *l.shards),
               calloc((size_t)n, sizeof *l.want), calloc((size_t)n, sizeof *l.version)};
  int64_t step = -1;
  for (int i = 0; l.serving && l.shards && l.want && l.version && i < m->plan.n; i++) {
    l.want[m->plan.shards[i].ps]++;
  }
  int ok = l.serving && l.shards && l.want && l.version;
  for (int tries = 0; ok && step < 0 && tries < 5; tries++) {
    for (int p = 0; ok && p < n; p++) {
      ok = status_of(m, p, &l);
    }
    step = ok ? master__adopt_step(n, l.serving, l.shards, l.want, l.version, ckpt_step) : -1;
  }
  free(l.serving);
  free(l.shards);
  free(l.want);
  free(l.version);
  return step;
}

int master__init_ps(master *m, tfx_err *err) {
  char dir[1100];
  int64_t step = 0;
  int have = 0;
  int rc = find_start(m, dir, sizeof dir, &have, &step, err);
  int64_t live = rc ? -1 : live_step(m, have ? step : -1);
  for (int p = 0; !rc && live < 0 && p < m->n_ps; p++) {
    rc = init_one(m, p, have ? dir : NULL, err);
  }
  if (rc) {
    return rc;
  }
  set_start(m, live >= 0 ? live : have ? step : 0);
  if (live >= 0) { /* the multiples the ps wrote by themselves while no chief was there are collected too */
    m->next_ckpt = master__next_multiple(have ? step : 0, m->cfg.ckpt_every_steps);
  }
  m->running = 1;
  tfx_progress_init(&m->progress, m->start_step, m->cfg.max_steps);
  if (live >= 0) {
    tfx_log(TFX_LOG_INFO, "MASTER-ADOPT", "every ps serves the plan at step %lld: adopting their state (%s%s)",
            (long long)live, have ? "newest checkpoint: " : "no checkpoint yet", have ? dir : "");
  } else if (have) {
    tfx_log(TFX_LOG_INFO, "MASTER-RESUME", "resuming from %s at step %lld", dir, (long long)step);
  } else {
    tfx_log(TFX_LOG_INFO, "MASTER-FRESH", "fresh start: %d shard(s) on %d ps", m->plan.n, m->n_ps);
  }
  return TFX_OK;
}
