/* The master's requests to every ps: one request to each with the replies collected (serving the master's own
 * socket while it waits), and the version poll built on it. Calls serve.c (to serve while waiting), startup.c
 * (a ps back empty rolls every ps back) and observe.c; the loop and the checkpoints call it. */
#include <math.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "master/master_impl.h"
#include "master/rules.h"

/* Waits for ps p's reply while still serving the master's own socket, so workers blocked on a report or a
 * registration are answered and never wait on the ps that waits on them. */
static int await_ps(master *m, int p, tfx_inmsg *r, int timeout_ms, tfx_err *err) {
  tfx_client *c = m->ps[p].client;
  int64_t now = tfx_now_ms(), deadline = now + timeout_ms;
  for (;;) {
    int64_t stop = master__stop_deadline(m);
    stop = stop < now + MASTER_STOP_LAST_MS ? now + MASTER_STOP_LAST_MS : stop; /* past it: a last short window */
    if (tfx_now_ms() >= stop) {
      if (!m->stop_gave_up++) {
        tfx_log(TFX_LOG_WARN, "MASTER-PS-UNRESPONSIVE", "ps %d (%s) has not answered %d s after the stop: giving up on it",
                p, tfx_client_endpoint(c), MASTER_STOP_GRACE_MS / 1000);
      }
      return tfx_err_set(err, TFX_EPEER, "ps %d (%s) did not answer within %d s of the stop signal", p,
                         tfx_client_endpoint(c), MASTER_STOP_GRACE_MS / 1000);
    }
    zmq_pollitem_t items[2] = {{tfx_client_socket(c), 0, ZMQ_POLLIN, 0}, {m->sock, 0, ZMQ_POLLIN, 0}};
    int64_t left = deadline - tfx_now_ms();
    if (left <= 0) {
      return tfx_err_set(err, TFX_EPEER, "%s: no reply within %d ms", tfx_client_endpoint(c), timeout_ms);
    }
    if (tfx_client_lost(c)) { /* the ps died with the request: its backup takes over, or it is rolled back */
      return tfx_err_set(err, TFX_EPEER, "%s: the connection was lost before the reply", tfx_client_endpoint(c));
    }
    long slice = left > 20 ? 20 : (long)left; /* without replicas too: a request lost with its ps never returns */
    if (zmq_poll(items, m->sock ? 2 : 1, slice) < 0) {
      continue; /* a signal: the master still wants this reply (a stop checkpoints after it), within the deadline */
    }
    if (m->sock && (items[1].revents & ZMQ_POLLIN)) {
      master__serve_pending(m);
    }
    if (items[0].revents & ZMQ_POLLIN) {
      return tfx_client_recv(c, r, (int)(left > 1 ? left : 1), err);
    }
  }
}

int64_t master__stop_deadline(master *m) {
  if (!tfx_stop_requested()) {
    return INT64_MAX;
  }
  m->stop_seen_ms = m->stop_seen_ms ? m->stop_seen_ms : tfx_now_ms();
  return m->stop_seen_ms + MASTER_STOP_GRACE_MS;
}

int master__call_ps(master *m, tfx_envelope *req, int timeout_ms, master__on_reply *on_reply, void *ctx, tfx_err *err) {
  int rc = TFX_OK;
  m->lost_ps = -1;
  for (int p = 0; p < m->n_ps && !rc; p++) {
    master__route(m, p, req);
    if (master__replicated(m) && tfx_client_disconnects(m->ps[p].client) != m->ps[p].seen) {
      m->lost_ps = p; /* its connection dropped since it last answered: it died, maybe with a request */
      m->ps[p].seen = tfx_client_disconnects(m->ps[p].client);
      return tfx_err_set(err, TFX_EPEER, "%s: the connection was lost", tfx_client_endpoint(m->ps[p].client));
    }
    rc = tfx_client_send(m->ps[p].client, req, NULL, 0, err);
    m->lost_ps = rc ? p : -1;
  }
  for (int p = 0; p < m->n_ps && !rc; p++) {
    tfx_inmsg r;
    memset(&r, 0, sizeof r);
    rc = await_ps(m, p, &r, timeout_ms, err);
    m->lost_ps = rc == TFX_EPEER ? p : m->lost_ps;
    if (!rc && on_reply) {
      on_reply(ctx, p, r.env);
    }
    tfx_inmsg_fini(&r);
  }
  return rc;
}

/* A version poll's reply from ps p (ctx: the master). */
static void note_version(void *ctx, int p, const tfx_envelope *e) {
  master *m = ctx;
  master__lock(m, 1);
  m->ps[p].version = e->step;
  master__lock(m, 0);
  master__note_replica(m, p, e);
  master__observe_ps(m, p, e);
  if (m->running && e->instance_state == TFX__INSTANCE_STATE__INSTANCE_WAITING) {
    m->ps_lost = 1;
    m->lost_ps = p;
  }
}

/* Rolls every ps back to the newest complete checkpoint at a new plan epoch (the caller named why), then polls. */
static int roll_back(master *m, tfx_err *err) {
  master__rolled_back(m);
  int rc = master__init_ps(m, err);
  return rc ? rc : master__poll_versions(m, err);
}

int master__poll_versions(master *m, tfx_err *err) {
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  m->ps_lost = 0;
  master__rejoin(m);
  int rc = master__call_ps(m, &env, m->cfg.request_timeout_s * 1000, note_version, m, err);
  int lost = m->lost_ps;
  tfx_err perr;
  if ((rc == TFX_EPEER || (!rc && m->ps_lost)) && lost >= 0 && master__replicated(m) &&
      master__promote(m, lost, rc ? err->msg : "it came back empty", &perr) == TFX_OK) {
    return master__poll_versions(m, err);
  }
  if (rc) {
    return rc;
  }
  if (m->ps_lost) {
    /* A ps came back empty (restarted): every ps rolls back to the newest complete checkpoint, so that the
     * cluster is at one consistent step; workers that were ahead fail their next push and re-register. With
     * replicas, only when the ps and its backup are both lost. */
    tfx_log(TFX_LOG_WARN, "MASTER-PS-LOST", "a ps lost its state%s: rolling every ps back to the newest checkpoint",
            master__replicated(m) ? " and so did its backup" : "");
    return roll_back(m, err);
  }
  int64_t lo = m->ps[0].version;
  int64_t hi = lo;
  for (int p = 1; p < m->n_ps; p++) {
    lo = m->ps[p].version < lo ? m->ps[p].version : lo;
    hi = m->ps[p].version > hi ? m->ps[p].version : hi;
  }
  if (m->running && master__replicated(m) && m->cfg.mode == TFX_MODE_SYNC &&
      master__apart_stuck(lo, hi, tfx_now_ms(), MASTER_APART_STUCK_MS, &m->apart_since, &m->apart_lo)) {
    tfx_log(TFX_LOG_WARN, "MASTER-PS-APART",
            "the ps stand at steps %lld to %lld, the lowest not moving for %d s: a promoted backup the workers' kept "
            "pushes cannot bring up (a worker lost with them); rolling every ps back to the newest checkpoint",
            (long long)lo, (long long)hi, MASTER_APART_STUCK_MS / 1000);
    m->apart_since = 0;
    return roll_back(m, err);
  }
  m->global_step = lo;
  m->max_version = hi;
  master__observe(m, "step", lo, NAN, NAN, NAN);
  return TFX_OK;
}
