/* Replicated shards (cluster.replicas 1): every plan instance k lives on ps k and, as a backup, on ps k + 1
 * (ring). The master INITs both, routes its calls for k to whichever serves it (Envelope.target), and when ps k is
 * lost promotes the backup (MSG_PROMOTE, a new plan epoch) instead of taking every ps back to a checkpoint. Calls
 * nothing else of the room; pscalls.c, startup.c, evaluate.c and observe.c call it. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/master_impl.h"
#include "master/plan.h"

int master__replicated(const master *m) {
  return m->cfg.ps_replicas > 0 && m->n_ps >= 2;
}

void master__route(const master *m, int p, tfx_envelope *req) {
  if (master__replicated(m)) {
    req->target = p + 1;
    req->epoch = m->epoch;
  }
}

/* Sends req to ps `at` addressed to instance p, over client c; the reply is dropped. */
static int call_instance(master *m, tfx_client *c, int p, tfx_envelope *req, tfx_err *err) {
  tfx_inmsg r;
  master__route(m, p, req);
  int rc = tfx_client_call(c, req, NULL, 0, &r, m->cfg.request_timeout_s * 1000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

/* The master's link to ps x (not to an instance): the instance client while ps x serves its own, else home. */
static tfx_client *ps_link(const master *m, int x) {
  return m->ps[x].at == x ? m->ps[x].client : m->ps[x].home;
}

int master__init_backup(master *m, int p, tfx_envelope *init, tfx_err *err) {
  if (!master__replicated(m)) {
    return TFX_OK;
  }
  int b = m->ps[p].backup, rc = TFX_OK;
  if (m->ps[p].at != p) { /* served by its promoted backup, which the INIT just demoted */
    tfx_envelope env;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PROMOTE);
    rc = call_instance(m, m->ps[p].client, p, &env, err);
  }
  if (rc || b < 0 || m->ps[b].state == MASTER_PS_LOST || !ps_link(m, b)) {
    return rc; /* no live backup: instance p runs without one */
  }
  Tfx__Init body = *init->init;
  Tfx__Init *own = init->init;
  body.as_backup = b == p; /* ps p rejoined as its own shards' backup */
  init->init = &body;
  rc = call_instance(m, ps_link(m, b), p, init, err);
  init->init = own;
  return rc;
}

/* Instance p's primary lost its backup on ps b, which serves no instance (it held backups only, so no poll of
 * the master's sees it go): ps b is marked gone, so master__rejoin asks after it and streams it its backups again
 * once it is back empty. */
static void backup_only_lost(master *m, int p) {
  int b = m->ps[p].backup;
  for (int q = 0; b >= 0 && q < m->n_ps; q++) {
    if (m->ps[q].at == b) {
      return; /* it serves an instance: its loss is seen there (failover or roll-back) */
    }
  }
  if (b < 0 || !m->ps[b].home || m->ps[b].state == MASTER_PS_LOST) {
    return;
  }
  pthread_mutex_lock(&m->obs.lock);
  for (int q = 0; q < m->n_ps; q++) {
    m->ps[q].backup = m->ps[q].backup == b ? -1 : m->ps[q].backup; /* every backup it held */
  }
  m->ps[b].rejoin_asked = 0;
  master__ps_state(m, b, MASTER_PS_LOST, TFX_LOG_WARN, "MASTER-BACKUP-LOST",
                   "ps %d, which held backups only, is lost (ps instance %d has no backup): it is asked to rejoin", b, p);
  pthread_mutex_unlock(&m->obs.lock);
}

void master__note_replica(master *m, int p, const tfx_envelope *status) {
  for (size_t i = 0; master__replicated(m) && i < status->n_stats; i++) {
    if (status->stats[i]->key && !strcmp(status->stats[i]->key, "unreplicated")) {
      int lost = status->stats[i]->value != 0;
      if (lost && !m->ps[p].unreplicated) {
        backup_only_lost(m, p);
      }
      m->ps[p].unreplicated = lost;
    }
  }
}

int master__promote(master *m, int p, const char *why, tfx_err *err) {
  int b = m->ps[p].backup;
  int rc =
      b < 0 ? tfx_err_set(err, TFX_ESTATE, "ps instance %d has no backup left (lost earlier, not re-replicated yet)", p)
      : m->ps[b].state == MASTER_PS_LOST ? tfx_err_set(err, TFX_ESTATE, "ps instance %d has no live backup (ps %d is lost too)", p, b)
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
  int was = m->ps[p].at; /* the ps that served p */
  m->ps[was].rejoin_asked = 0;
  for (int i = 0; i < m->n_ps; i++) {
    m->ps[i].backup = m->ps[i].backup == was ? -1 : m->ps[i].backup; /* backups it held are lost too */
  }
  m->ps[p].at = b;
  m->ps[p].backup = -1;
  m->failovers++;
  m->degraded_at = m->global_step;
  master__ps_state(m, was, MASTER_PS_LOST, TFX_LOG_WARN, "MASTER-FAILOVER",
                   "ps %d lost (%s): its backup on ps %d now serves its shards at plan epoch %llu; nothing is trained "
                   "again", p, why, b, (unsigned long long)m->epoch);
  pthread_mutex_unlock(&m->obs.lock);
  return TFX_OK;
}

void master__rolled_back(master *m) {
  if (!master__replicated(m)) {
    return;
  }
  m->epoch++;
  m->rollback_epoch = m->epoch; /* the workers' kept pushes are void from here (worker__follow_routes) */
  /* Every ps is initialized again from the checkpoint: each instance goes back to its own ps, backed up by the
   * next (a promoted copy left where it was would serve without a backup, its old ps holding a copy never fed). */
  pthread_mutex_lock(&m->obs.lock);
  for (int p = 0; p < m->n_ps; p++) {
    if (m->ps[p].at != p && m->ps[p].home) {
      tfx_client_destroy(m->ps[p].client);
      m->ps[p].client = m->ps[p].home;
      m->ps[p].home = NULL;
      m->ps[p].at = p;
    }
    m->ps[p].backup = tfx_plan_backup(p, m->n_ps, m->cfg.ps_replicas);
    if (m->ps[p].state == MASTER_PS_LOST) {
      master__ps_state(m, p, MASTER_PS_UP, TFX_LOG_WARN, "MASTER-PS-BACK",
                       "ps %d is initialized again from the checkpoint (roll-back, plan epoch %llu)", p,
                       (unsigned long long)m->epoch);
    }
    m->ps[p].rejoin_asked = 0;
    m->ps[p].unreplicated = 0;
    m->ps[p].seen = tfx_client_disconnects(m->ps[p].client);
  }
  pthread_mutex_unlock(&m->obs.lock);
  tfx_log(TFX_LOG_WARN, "MASTER-ROUTES", "roll-back at plan epoch %llu: workers follow the chief's routes",
          (unsigned long long)m->epoch);
}

int master__unreplicated_shards(const master *m) {
  if (!master__replicated(m)) {
    return 0;
  }
  int n = 0;
  for (int i = 0; i < m->plan.n; i++) {
    int p = m->plan.shards[i].ps;
    n += m->ps[p].backup < 0 || m->ps[p].unreplicated;
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

/* Makes ps x the backup of instance p (served by ps m->ps[p].at): INIT of the copy on x, then the primary streams
 * it its state (MSG_REREPLICATE to ps x). */
static int reattach(master *m, int x, int p, tfx_err *err) {
  size_t n;
  Tfx__Shard **mine = tfx_plan_for_ps(&m->plan, p, &n);
  if (!mine) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  tfx_envelope init;
  tfx_wire_request(&init, TFX__MSG_TYPE__MSG_INIT);
  init.text = m->config_json;
  init.shards = mine;
  init.n_shards = n;
  Tfx__Init body = TFX__INIT__INIT;
  body.workers = (uint32_t)m->n_workers;
  body.as_backup = x == p;
  init.init = &body;
  int rc = call_instance(m, m->ps[x].home ? m->ps[x].home : m->ps[x].client, p, &init, err);
  free(mine);
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REREPLICATE);
  Tfx__Rereplicate to = TFX__REREPLICATE__INIT;
  to.to_ps = x;
  env.rereplicate = &to;
  rc = rc ? rc : call_instance(m, m->ps[p].client, p, &env, err);
  if (!rc) {
    m->ps[p].backup = x;
    m->ps[p].unreplicated = 0;
  }
  return rc;
}

/* Ps x answered empty: it backs up again its own old instance (now served elsewhere) and its ring predecessor. */
static void rejoin_one(master *m, int x) {
  int prev = (x + m->n_ps - 1) % m->n_ps, done = 0;
  tfx_err err;
  tfx_err_clear(&err);
  for (int p = 0; p < m->n_ps; p++) {
    int want = (p == x && m->ps[p].at != x) || (p == prev && m->ps[p].at == p);
    if (!want || m->ps[p].backup >= 0 || m->ps[m->ps[p].at].state == MASTER_PS_LOST) {
      continue;
    }
    if (reattach(m, x, p, &err)) {
      tfx_log(TFX_LOG_WARN, "MASTER-REREPLICATE-FAIL", "ps %d could not become the backup of ps instance %d: %s", x,
              p, err.msg);
      return; /* asked again at the next poll */
    }
    done++;
    tfx_log(TFX_LOG_WARN, "MASTER-REREPLICATED",
            "ps %d rejoined: it is the backup of ps instance %d (served by ps %d) again, %d shard(s) unreplicated",
            x, p, m->ps[p].at, master__unreplicated_shards(m));
  }
  pthread_mutex_lock(&m->obs.lock);
  master__ps_state(m, x, MASTER_PS_UP, TFX_LOG_WARN, "MASTER-PS-REJOINED",
                   "ps %d rejoined empty and holds %d backup(s) again", x, done);
  pthread_mutex_unlock(&m->obs.lock);
}

void master__rejoin(master *m) {
  for (int x = 0; master__replicated(m) && x < m->n_ps; x++) {
    tfx_client *c = m->ps[x].home;
    if (m->ps[x].state != MASTER_PS_LOST || !c) {
      continue;
    }
    tfx_inmsg r;
    tfx_err err;
    if (m->ps[x].rejoin_asked && tfx_client_recv(c, &r, 1, &err) == TFX_OK) {
      int empty = r.env->instance_state == TFX__INSTANCE_STATE__INSTANCE_WAITING;
      tfx_inmsg_fini(&r);
      m->ps[x].rejoin_asked = 0;
      if (empty) {
        rejoin_one(m, x);
        continue;
      }
    }
    if (!m->ps[x].rejoin_asked || tfx_client_lost(c)) {
      tfx_envelope env;
      tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
      m->ps[x].rejoin_asked = tfx_client_send(c, &env, NULL, 0, &err) == TFX_OK;
    }
  }
}
