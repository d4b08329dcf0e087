/* The master's evaluation: it pulls the variables through the workers' client code (src/psclient) and scores
 * the eval set (eval lines) and the named validation sets that are due ("validation.NAME" lines), and feeds the
 * eval set's scores to keep_best and early stopping. Calls observe.c and watch.c of this room; the loop calls it. */
#include "train/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>

#include "common/log.h"
#include "config/plugin.h"
#include "data/dataset.h"
#include "master/master_impl.h"
#include "observe/progress.h"
#include "psclient/psclient.h"
#include "store/ckpt.h"
#include "store/weights.h"

/* Whether a stopping master's evaluation should stop waiting for the ps (ctx: the master). */
static int eval_abort(void *ctx) {
  master *m = ctx;
  return tfx_now_ms() >= master__stop_deadline(m);
}

/* Pulls every variable from the ps into the master's model, through the workers' client code; the client stays
 * (*pc, the caller's: end_pull) to pull each batch's rows of lazy tables as they are evaluated (evaluate_span). */
static int pull_model(master *m, int64_t *version, tfx_psclient **pc, tfx_err *err) {
  *pc = NULL;
  int rc = tfx_psclient_create(m->n->cluster, m->plan.ptrs, (size_t)m->plan.n, m->model,
                               m->cfg.request_timeout_s * 1000, pc, err);
  if (!rc) {
    tfx_psclient_set_replicas(*pc, master__replicated(m));
    tfx_psclient_set_abort(*pc, eval_abort, m);
  }
  for (int p = 0; !rc && p < m->n_ps; p++) {
    rc = tfx_psclient_route(*pc, p, m->ps[p].at, err); /* instances served by a promoted backup */
  }
  if (!rc && !(rc = tfx_psclient_pull(*pc, 0, version, err)) && tfx_psclient_has_lazy(*pc)) {
    tfx_model_set_rows(m->model, TFX_ROWS_BATCH); /* each batch's rows pulled from the ps (evaluate_span) */
  }
  return rc;
}

/* Ends an evaluation's pull: the model reads its own tables again. */
static void end_pull(master *m, tfx_psclient *pc) {
  tfx_model_set_rows(m->model, TFX_ROWS_TABLE);
  tfx_psclient_destroy(pc);
}

/* Evaluates span of d with the master's model, each batch's rows of lazy tables pulled from the ps through pc
 * (NULL, or a plan without lazy tables: the model's own values) before it is scored. */
static int evaluate_span(master *m, tfx_psclient *pc, const tfx_dataset *d, const tfx_eval_span *span,
                         tfx_eval_result *r, tfx_err *err) {
  int rows = pc && tfx_psclient_has_lazy(pc), lent = 0;
  tfx_eval_pass *p = NULL;
  int rc = tfx_eval_pass_create(m->model, d, span, &p, err);
  while (!rc && !(rc = tfx_eval_pass_next(p, &lent, err)) && lent) {
    rc = rows ? tfx_psclient_pull_rows(pc, err) : TFX_OK;
    rc = rc ? rc : tfx_eval_pass_score(p, err);
  }
  if (!rc) {
    tfx_eval_pass_result(p, r);
  }
  tfx_eval_pass_destroy(p);
  return rc;
}

/* Whether the eval set scores a checkpoint rather than the live variables: with keep_best while the workers
 * train, so that the best checkpoint is exactly what was scored (lazy tables are always pulled). */
static int scores_checkpoints(const master *m) {
  for (int i = 0; i < tfx_model_nvars(m->model); i++) {
    if (tfx_model_var(m->model, i)->lazy) {
      return 0;
    }
  }
  return m->cfg.keep_best_metric[0] && !m->finished;
}

/* Takes a checkpoint now (the first step every ps can still write) and loads its variables into the model. */
static int load_checkpoint(master *m, int64_t *version, tfx_err *err) {
  int64_t at = 0;
  char dir[1100];
  tfx_weights ws;
  int rc = master__checkpoint_now(m, &at, err);
  tfx_ckpt_dir(m->n->run_dir, at, dir, sizeof dir);
  if (!rc && !(rc = tfx_weights_from_checkpoint(dir, &ws, err))) {
    rc = tfx_weights_load_model(&ws, m->model, err);
    tfx_weights_fini(&ws);
  }
  if (!rc) {
    *version = at;
  }
  return rc;
}

/* The eval set scored by the workers (eval.distributed; keep_best scores checkpoints on the chief instead): 1 with
 * *r and *version filled, 0 when the chief scores it (off, or the workers failed: logged). */
static int by_workers(master *m, int64_t *version, tfx_eval_result *r, int64_t *ms) {
  if (scores_checkpoints(m) || !master__disteval_on(m)) {
    return 0;
  }
  tfx_err err;
  int64_t start = tfx_now_ms();
  if (master__evaluate_workers(m, version, r, &err)) {
    tfx_log(TFX_LOG_WARN, "MASTER-DISTEVAL-FALLBACK", "the workers did not score the eval set (%s): the chief does",
            err.msg);
    return 0;
  }
  *ms = tfx_now_ms() - start;
  return 1;
}

int master__evaluate(master *m) {
  tfx_err err;
  int64_t version = 0, ms = 0, start = tfx_now_ms();
  tfx_psclient *pc = NULL;
  tfx_eval_result r;
  int rc = TFX_OK, workers = by_workers(m, &version, &r, &ms);
  if (!workers) {
    rc = scores_checkpoints(m) ? load_checkpoint(m, &version, &err) : pull_model(m, &version, &pc, &err);
  }
  if (rc) {
    end_pull(m, pc);
    tfx_log(TFX_LOG_WARN, "MASTER-EVAL-FAIL", "cannot pull the variables: %s", err.msg);
    return rc;
  }
  tfx_eval_span span = {1000, 0, m->eval->n, NULL, NULL, m->pm};
  rc = workers ? TFX_OK : evaluate_span(m, pc, m->eval, &span, &r, &err);
  end_pull(m, pc);
  ms = workers ? ms : tfx_now_ms() - start;
  if (rc) {
    tfx_log(TFX_LOG_ERROR, "MASTER-EVAL-DATA", "step %lld: eval data %s not scored, no accuracy recorded: %s",
            (long long)version, tfx_config_eval_file(&m->cfg), err.msg);
    m->last_acc = NAN; /* not the accuracy of an earlier step either */
    m->eval_refused = 1;
    return rc;
  }
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, m->cfg.metrics, &r);
  tfx_eval_report_add_plugin(&rep, m->pm, &r, "eval");
  char *json = tfx_eval_confusion_json(m->cfg.metrics, &r);
  master__record(m, "eval", version, rep.names, rep.values, rep.n, json);
  free(json);
  m->last_acc = r.accuracy;
  m->eval_step = version;
  m->eval_refused = 0;
  master__observe(m, "eval", version, r.loss, r.accuracy, NAN);
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_EVAL, version, r.loss, r.accuracy, m->n->run_dir);
  tfx_log(TFX_LOG_INFO, "MASTER-EVAL", "step %lld: eval loss %.4f accuracy %.4f over %zu examples in %.2f s (%s)",
          (long long)version, r.loss, r.accuracy, r.examples, ms / 1000.0, workers ? "by the workers" : "by the chief");
  master__watch_eval(m, version, &r);
  return TFX_OK;
}

void master__validate(master *m, int force) {
  int due = 0;
  for (int i = 0; i < m->cfg.n_valsets; i++) {
    due |= force || m->global_step >= m->next_val[i];
  }
  if (!due) {
    return;
  }
  tfx_err err;
  int64_t version = 0;
  tfx_psclient *pc;
  int rc = pull_model(m, &version, &pc, &err);
  for (int i = 0; !rc && i < m->cfg.n_valsets; i++) {
    const tfx_valset *v = &m->cfg.valsets[i];
    if (!force && m->global_step < m->next_val[i]) {
      continue;
    }
    while (m->next_val[i] <= m->global_step) {
      m->next_val[i] = v->every_steps ? m->next_val[i] + v->every_steps : INT64_MAX;
    }
    tfx_eval_result r;
    size_t n =
        v->batches && (size_t)v->batches * 1000 < m->valsets[i]->n ? (size_t)v->batches * 1000 : m->valsets[i]->n;
    tfx_eval_span span = {1000, 0, n, NULL, v->agg, m->pm};
    if (evaluate_span(m, pc, m->valsets[i], &span, &r, &err)) {
      tfx_log(TFX_LOG_ERROR, "MASTER-VALIDATE-DATA", "step %lld: validation set %s (%s) not scored: %s",
              (long long)version, v->name, v->labels[0] ? v->labels : v->images, err.msg);
      continue;
    }
    char line[64];
    snprintf(line, sizeof line, "validation.%s", v->name);
    tfx_eval_report rep;
    tfx_eval_report_init(&rep, tfx_valset_metrics(v, m->cfg.metrics), &r);
    tfx_eval_report_add_plugin(&rep, m->pm, &r, line);
    char *json = tfx_eval_confusion_json(tfx_valset_metrics(v, m->cfg.metrics), &r);
    master__record(m, line, version, rep.names, rep.values, rep.n, json);
    free(json);
    tfx_log(TFX_LOG_INFO, "MASTER-VALIDATE", "step %lld %s: loss %.4f accuracy %.4f (%s over %zu)", (long long)version,
            v->name, r.loss, r.accuracy, v->agg, r.examples);
  }
  end_pull(m, pc);
  if (rc) {
    tfx_log(TFX_LOG_WARN, "MASTER-VALIDATE-FAIL", "cannot pull the variables: %s", err.msg);
  }
}
