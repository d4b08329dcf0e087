/* The run's ledger: each ps instance counts the worker pushes it took over the run's life (a promoted backup goes
 * on from its primary's count: "ledger_pushes" in its status), each worker counts the pushes each instance answered
 * ("acked.P" in its status, asked while it waits at max_steps). At the end of the run the chief writes both side
 * by side: in a run that lost nothing they are equal; a push lost with a ps (a roll-back) shows as acked above
 * applied. Calls pscalls.c and observe.c of this room; the loop calls it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/text.h"
#include "master/master_impl.h"

/* Adds a worker's STATUS reply's "acked.P" counts to each instance's ledger_acked. */
static void note_worker(master *m, const tfx_envelope *reply) {
  for (size_t i = 0; i < reply->n_stats; i++) {
    const char *k = reply->stats[i]->key ? reply->stats[i]->key : "";
    int p = strncmp(k, "acked.", 6) ? -1 : atoi(k + 6);
    if (p >= 0 && p < m->n_ps) {
      m->ps[p].ledger_acked += (int64_t)reply->stats[i]->value;
    }
  }
}

int master__ledger_workers(master *m) {
  for (int p = 0; p < m->n_ps; p++) {
    m->ps[p].ledger_acked = 0;
  }
  for (int w = 0; w < m->n_workers; w++) {
    tfx_envelope env;
    tfx_inmsg r;
    tfx_err err;
    memset(&r, 0, sizeof r); /* a failed send leaves it untouched */
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
    int rc = m->workers[w].client ? tfx_client_call(m->workers[w].client, &env, NULL, 0, &r,
                                                    m->cfg.request_timeout_s * 1000 + MASTER_LEDGER_SLACK_MS, &err)
                                  : TFX_EPEER;
    if (!rc) {
      note_worker(m, r.env);
    }
    tfx_inmsg_fini(&r);
    if (rc) {
      tfx_log(TFX_LOG_WARN, "MASTER-LEDGER", "no ledger for this run: worker %d did not tell its side (%s)", w,
              m->workers[w].client ? err.msg : "no link");
      return 0;
    }
  }
  return 1;
}

/* A status reply of instance p (ctx: the master): its ledger. */
static void note_applied(void *ctx, int p, const tfx_envelope *e) {
  master *m = ctx;
  for (size_t i = 0; i < e->n_stats; i++) {
    if (e->stats[i]->key && !strcmp(e->stats[i]->key, "ledger_pushes")) {
      m->ps[p].ledger_applied = (int64_t)e->stats[i]->value;
    }
  }
}

void master__ledger_write(master *m) {
  for (int p = 0; p < m->n_ps; p++) {
    m->ps[p].ledger_applied = -1;
  }
  tfx_envelope env;
  tfx_err err;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  int rc = master__call_ps(m, &env, m->cfg.request_timeout_s * 1000, note_applied, m, &err);
  if (rc == TFX_EPEER) { /* a link that dropped since the last poll (a ps lost and back): the poll takes it first */
    tfx_err perr;
    master__poll_versions(m, &perr);
    rc = master__call_ps(m, &env, m->cfg.request_timeout_s * 1000, note_applied, m, &err);
  }
  if (rc) {
    tfx_log(TFX_LOG_WARN, "MASTER-LEDGER", "no ledger for this run: %s", err.msg);
    return;
  }
  tfx_text t = {0};
  int balanced = 1;
  tfx_text_put(&t, "\"instances\": [");
  for (int p = 0; p < m->n_ps; p++) {
    const ps_peer *q = &m->ps[p];
    tfx_text_put(&t, "%s{\"instance\": %d, \"applied\": %lld, \"acked\": %lld}", p ? ", " : "", p,
                 (long long)q->ledger_applied, (long long)q->ledger_acked);
    balanced &= q->ledger_applied == q->ledger_acked;
  }
  tfx_text_put(&t, "]");
  if (t.s) {
    master__record(m, "ledger", m->global_step, NULL, NULL, 0, t.s);
  }
  m->ledger_written = 1;
  tfx_log(balanced ? TFX_LOG_INFO : TFX_LOG_WARN, "MASTER-LEDGER", "step %lld: %s%s", (long long)m->global_step,
          t.s ? t.s : "(out of memory)", balanced ? "" : ": pushes the workers saw answered were not all kept");
  free(t.s);
}
