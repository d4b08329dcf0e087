/* The master's step loop: serve the workers, poll the ps versions (waiting out a lost ps), heartbeats,
 * evaluation and periodic checkpoints, and at max_steps (or a stop) the final checkpoint and the end of the
 * run. Calls serve.c, pscalls.c, ckpt.c, evaluate.c, heartbeat.c and rules.c; master.c calls it. */
#include <limits.h>
#include <math.h>
#include <tfx/plugin.h>

#include "common/log.h"
#include "config/plugin.h"
#include "master/master_impl.h"
#include "master/rules.h"
#include "observe/notify.h"

/* Whether the cluster has an evaluator task (which then evaluates instead of the master). */
static int has_evaluator(const master *m) {
  return tfx_cluster_count(m->n->cluster, TFX_ROLE_EVALUATOR) > 0;
}

/* What the loop does between polls once the run is going: validation and evaluation when due, then the
 * periodic checkpoint when due. */
static void periodic(master *m) {
  master__validate(m, 0);
  if (m->global_step >= m->next_eval && !has_evaluator(m)) {
    master__evaluate(m);
    while (m->next_eval <= m->global_step) {
      m->next_eval += m->cfg.eval_every_steps;
    }
  }
  master__checkpoint_if_due(m);
}

/* Why the master has no final eval accuracy, for the "done:" line. */
static const char *no_acc_reason(const master *m) {
  if (has_evaluator(m)) {
    return "the evaluator task evaluates";
  }
  if (m->eval_missed) {
    return "the final step was not evaluated, see the log";
  }
  return m->eval_refused ? "eval data refused, see the log" : "no evaluation, see the log";
}

/* Sends STOP to every worker and closes its socket. */
static void stop_workers(master *m) {
  for (int w = 0; w < m->n_workers; w++) {
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STOP);
    tfx_client_call(m->workers[w].client, &env, NULL, 0, &r, 500, NULL);
    tfx_inmsg_fini(&r);
    /* Done with the workers: a socket left open would keep reconnecting to a worker that has exited, and
     * libzmq resolves its host name in the I/O thread every ps request shares (a slow DNS answer for a
     * vanished container stalls the final checkpoint and evaluation). */
    tfx_client_destroy(m->workers[w].client);
    m->workers[w].client = NULL;
  }
}

/* The final evaluation scores the step the run ends at, or says that it could not: an earlier step's accuracy
 * is never reported as the run's. A ps lost meanwhile is waited for (one back empty is restored from the newest
 * checkpoint by the version poll) and the evaluation asked again, up to cluster.register_timeout_s. */
static int final_evaluate(master *m, tfx_err *err) {
  int64_t final_step = m->global_step;
  int64_t first_fail = 0;
  for (;;) {
    int rc = master__evaluate(m);
    if (master__final_eval_done(rc, m->eval_refused, m->eval_step, final_step)) {
      return TFX_OK;
    }
    first_fail = first_fail ? first_fail : tfx_now_ms();
    if (tfx_stop_requested() || !master__final_eval_retry(first_fail, tfx_now_ms(), m->cfg.register_timeout_s)) {
      m->last_acc = NAN;
      m->eval_missed = 1;
      return tfx_err_set(err, rc ? rc : TFX_ESTATE, "the final step %lld was not evaluated within %d s (%s)",
                         (long long)final_step, m->cfg.register_timeout_s,
                         rc ? tfx_strerror(rc) : "the ps stand at an earlier step");
    }
    tfx_log(TFX_LOG_WARN, "MASTER-EVAL-RETRY", "the final evaluation of step %lld did not stand: asking again",
            (long long)final_step);
    tfx_err perr;
    master__poll_versions(m, &perr); /* a ps back empty is restored from the newest checkpoint */
    master__serve(m, 500);
  }
}

/* Whether a ps said that updates could not be applied (out of memory, PS-NOMEM): the model is then not what
 * training asked for, and the run does not end as a success (err says so). */
static int updates_lost(master *m, tfx_err *err) {
  double lost = 0;
  for (int p = 0; p < m->n_ps && p < OBS_MAX_PS; p++) {
    lost += m->ps[p].stats.update_failures;
  }
  if (lost > 0) {
    tfx_err_set(err, TFX_ENOMEM,
                "%.0f update(s) could not be applied on the ps (out of memory: PS-NOMEM in their "
                "logs): the model is not what training asked for; its checkpoints are kept",
                lost);
  }
  return lost > 0;
}

/* Stops the workers, then (unless `checkpointed`) checkpoints where the ps stand, and evaluates the final step. */
static int finish(master *m, int checkpointed, tfx_err *err) {
  /* The workers' side of the ledger before they are told the run is over: each waits at max_steps, serving its
   * control socket, until the chief's status says finished. A run stopped short has pushes in flight: no ledger. */
  int ledger = m->global_step >= m->cfg.max_steps && !tfx_stop_requested() && master__ledger_workers(m);
  m->finished = 1;
  stop_workers(m);
  if (ledger) {
    master__ledger_write(m);
  }
  int rc = checkpointed ? TFX_OK : master__poll_versions(m, err);
  if (!rc && !checkpointed) {
    master__collect_written(m, tfx_now_ms(), INT_MAX); /* the multiples passed since the last tick first */
    rc = master__checkpoint(m, m->max_version, err);
  }
  int saved = rc == TFX_OK;
  if (!has_evaluator(m)) { /* else the evaluator does */
    int ev = final_evaluate(m, rc ? NULL : err);
    rc = rc ? rc : ev;
  }
  master__validate(m, 1);
  int lost = saved && !rc ? updates_lost(m, err) : 0;
  rc = lost ? TFX_ENOMEM : rc;
  saved = saved && !lost;
  if (saved) { /* a run whose final checkpoint failed is not "done": its error says why (ENOSPC, say) */
    tfx_progress_done(&m->progress, m->global_step, m->last_acc, no_acc_reason(m));
  }
  tfx_plugin_hook(m->n->plugin, TFX_HOOK_TRAIN_END, m->global_step, m->last_loss, m->last_acc, m->n->run_dir);
  return rc;
}

/* Polls the ps versions; a ps that does not answer (TFX_EPEER: dead, being restarted) is waited for, up to
 * cluster.register_timeout_s from the first miss (*lost_since), before the master gives up. */
static int poll_or_wait(master *m, int64_t *lost_since, tfx_err *err) {
  tfx_err perr;
  int rc = master__poll_versions(m, &perr);
  if (master__ps_wait(rc, *lost_since, tfx_now_ms(), m->cfg.register_timeout_s)) {
    if (!*lost_since) {
      *lost_since = tfx_now_ms();
      tfx_log(TFX_LOG_WARN, "MASTER-PS-WAIT", "%s; waiting up to %d s for it", perr.msg, m->cfg.register_timeout_s);
    }
    return TFX_OK;
  }
  if (!rc && *lost_since) {
    tfx_log(TFX_LOG_INFO, "MASTER-PS-BACK", "every ps answers again");
    *lost_since = 0;
  }
  return rc ? tfx_err_set(err, rc, "%s", perr.msg) : TFX_OK;
}

/* The run reached max_steps: the final checkpoint is taken while the workers wait at max_steps, then they are
 * stopped. A ps lost meanwhile (no answer, or back empty) sends the loop back to training: the cluster rolls back
 * to the newest checkpoint and the waiting workers train on. Returns 1 when the loop should go on. */
static int finish_at_max_steps(master *m, int *attempts, int *rc, tfx_err *err) {
  tfx_err cerr;
  master__collect_written(m, tfx_now_ms(), INT_MAX); /* the multiples passed since the last tick first */
  int ck = master__checkpoint(m, m->max_version, &cerr);
  ++*attempts;
  if (master__final_retry(ck, *attempts, tfx_stop_requested())) {
    tfx_log(TFX_LOG_WARN, "MASTER-FINAL-RETRY",
            "final checkpoint at step %lld: %s; the workers wait at max_steps, asking again (%d of %d)",
            (long long)m->max_version, cerr.msg, *attempts, MASTER_CKPT_ATTEMPTS);
    return 1;
  }
  *rc = finish(m, ck == TFX_OK, err);
  return 0;
}

/* The start of the loop: the train-begin hook, and the evaluations of validate_first at step 0. */
static void begin(master *m) {
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_TRAIN_BEGIN, m->start_step, NAN, NAN, m->n->run_dir);
  tfx_notify_status("chief: training from step %lld", (long long)m->start_step);
  if (m->cfg.validate_first && m->start_step == 0) {
    master__evaluate(m);
    master__validate(m, 1);
  }
}

int master__loop(master *m, tfx_err *err) {
  master__watch_init(m);
  if (has_evaluator(m) && (m->cfg.keep_best_metric[0] || m->cfg.stop_metric[0])) {
    tfx_log(TFX_LOG_WARN, "MASTER-WATCH-OFF",
            "checkpoint.keep_best and training.early_stopping follow the chief's evaluations, and with an evaluator "
            "task the chief does not evaluate: they are off in this run");
  }
  if (m->over) {
    tfx_log(TFX_LOG_INFO, "MASTER-OVER", "the run reached max_steps %lld before this master started: finishing",
            (long long)m->cfg.max_steps);
    return finish(m, 1, err);
  }
  begin(m);
  int64_t last_poll = 0;
  int64_t lost_since = 0;
  int final_attempts = 0;
  while (!tfx_stop_requested() && !m->abort_code) {
    master__serve(m, 50);
    if (tfx_now_ms() - last_poll < 200) {
      continue;
    }
    last_poll = tfx_now_ms();
    int rc = poll_or_wait(m, &lost_since, err);
    if (rc == TFX_EINTR && tfx_stop_requested()) {
      break; /* a stop signal cut a call short: stop gracefully below */
    }
    if (rc) {
      return rc;
    }
    if (lost_since) {
      continue;
    }
    tfx_notify_status("chief: step %lld of %lld, eval accuracy %.4f", (long long)m->global_step,
                      (long long)m->cfg.max_steps, m->last_acc);
    if (m->global_step >= m->cfg.max_steps) {
      if (!finish_at_max_steps(m, &final_attempts, &rc, err)) {
        return rc;
      }
      continue;
    }
    if (m->hook_stop) {
      tfx_log(TFX_LOG_INFO, "MASTER-HOOK-STOP", "a plugin hook asked to stop at step %lld", (long long)m->global_step);
      return finish(m, 0, err);
    }
    if (m->early_stop) { /* MASTER-EARLY-STOP said why: the final checkpoint and evaluation, exit 0 */
      return finish(m, 0, err);
    }
    master__heartbeat(m);
    periodic(m);
  }
  if (m->abort_code) {
    m->finished = 1;
    return tfx_err_set(err, m->abort_code, "%s; the last good checkpoint is kept", m->abort_msg);
  }
  tfx_log(TFX_LOG_INFO, "MASTER-SIGNAL", "stop requested: checkpointing and stopping the cluster");
  return finish(m, 0, err);
}

/* Sends STOP to one peer (best effort). */
static void stop_peer(tfx_client *c) {
  if (!c) {
    return;
  }
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STOP);
  tfx_client_call(c, &env, NULL, 0, &r, 300, NULL);
  tfx_inmsg_fini(&r);
}

void master__stop_all(master *m) {
  m->finished = 1;
  for (int w = 0; m->workers && w < m->n_workers; w++) {
    stop_peer(m->workers[w].client);
  }
  for (int p = 0; m->ps && p < m->n_ps; p++) {
    stop_peer(m->ps[p].client);
    stop_peer(m->ps[p].home); /* a ps whose shards its backup took over: restarted empty, or gone */
  }
}
