/* Replicated shards (cluster.replicas 1, #27): every plan instance k lives on ps k and, as a backup, on ps k + 1
 * (ring). The master INITs both, routes its calls for k to whichever serves it (Envelope.target), and when ps k is
 * lost promotes the backup (MSG_PROMOTE, a new plan epoch) instead of taking every ps back to a checkpoint. Calls
 * nothing else of the room; pscalls.c, startup.c, evaluate.c and observe.c call it. */
#include <string.h>

#include "common/log.h"
#include "master/master_impl.h"

int master__replicated(const master *m) {
  return m->cfg.ps_replicas > 0 && m->n_ps >= 2;
}

void master__route(const master *m, int p, tfx_envelope *req) {
  if (master__replicated(m)) {
    req->target = p + 1;
    req->epoch = m->epoch;
  }
}

/* The ps that backs instance p up (the plan's ring: tfx_plan_backup). */
static int backup_of(const master *m, int p) {
  return tfx_plan_backup(p, m->n_ps, 1);
}

/* Sends req to ps `at` addressed to instance p, over client c; the reply is dropped. */
static int call_instance(master *m, tfx_client *c, int p, tfx_envelope *req, tfx_err *err) {
  tfx_inmsg r;
  master__route(m, p, req);
  int rc = tfx_client_call(c, req, NULL, 0, &r, m->cfg.request_timeout_s * 1000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

int master__init_backup(master *m, int p, tfx_envelope *init, tfx_err *err) {
  if (!master__replicated(m)) {
    return TFX_OK;
  }
  int b = backup_of(m, p);
  if (m->ps[p].at != p) { /* served by its promoted backup, which the INIT just demoted */
    tfx_envelope env;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PROMOTE);
    return call_instance(m, m->ps[p].client, p, &env, err);
  }
  if (m->ps[b].at != b) {
    return TFX_OK; /* ps b is lost: instance p runs without a backup */
  }
  return call_instance(m, m->ps[b].client, p, init, err);
}

void master__note_replica(master *m, int p, const tfx_envelope *status) {
  for (size_t i = 0; master__replicated(m) && m->ps[p].at == p && i < status->n_stats; i++) {
    if (status->stats[i]->key && !strcmp(status->stats[i]->key, "unreplicated")) {
      m->ps[p].unreplicated = status->stats[i]->value != 0;
    }
  }
}

int master__promote(master *m, int p, const char *why, tfx_err *err) {
  int b = backup_of(m, p);
  int rc = m->ps[p].at != p || m->ps[b].at != b
               ? tfx_err_set(err, TFX_ESTATE, "ps instance %d has no live backup (ps %d is lost too)", p, b)
           : m->ps[p].unreplicated
               ? tfx_err_set(err, TFX_ESTATE, "ps instance %d had lost its backup on ps %d before it was lost", p, b)
               : TFX_OK;
  if (rc) {
    tfx_log(TFX_LOG_WARN, "MASTER-NO-FAILOVER", "ps %d lost (%s) and not promoted: %s", p, why, err->msg);
    return rc;
  }
  char ep[320];
  tfx_client *c = NULL;
  rc = tfx_address_endpoint(tfx_cluster_address(m->n->cluster, TFX_ROLE_PS, b), 0, NULL, ep, sizeof ep, err);
  rc = rc ? rc : tfx_client_create(ep, &c, err);
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PROMOTE);
  m->epoch++;
  rc = rc ? rc : call_instance(m, c, p, &env, err);
  if (rc) {
    tfx_log(TFX_LOG_WARN, "MASTER-NO-FAILOVER", "ps %d lost (%s) and its backup not promoted: %s", p, why, err->msg);
    m->epoch--;
    tfx_client_destroy(c);
    return rc;
  }
  pthread_mutex_lock(&m->obs.lock); /* the HTTP thread reads failovers */
  tfx_client_destroy(m->ps[p].home);
  m->ps[p].home = m->ps[p].client;
  m->ps[p].client = c;
  m->ps[p].seen = tfx_client_disconnects(c);
  m->ps[p].at = b;
  m->failovers++;
  m->degraded_at = m->global_step;
  pthread_mutex_unlock(&m->obs.lock);
  tfx_log(TFX_LOG_WARN, "MASTER-FAILOVER",
          "ps %d lost (%s): its backup on ps %d now serves its shards at plan epoch %llu; nothing is trained again", p,
          why, b, (unsigned long long)m->epoch);
  return TFX_OK;
}

int master__unreplicated_shards(const master *m) {
  if (!master__replicated(m)) {
    return 0;
  }
  int n = 0;
  for (int i = 0; i < m->plan.n; i++) {
    int p = m->plan.shards[i].ps;
    int b = backup_of(m, p);
    n += m->ps[p].at != p || m->ps[b].at != b;
  }
  return n;
}

int64_t master__replication_lag(const master *m) {
  int64_t lag = m->global_step - m->degraded_at;
  return master__unreplicated_shards(m) > 0 && lag > 0 ? lag : 0;
}

const char *master__replica_status(const master *m) {
  if (!master__replicated(m)) {
    return "off";
  }
  return master__unreplicated_shards(m) ? "degraded" : "replicated";
}
