/* The master's requests to every ps: one request to each with the replies collected (serving the master's own
 * socket while it waits), and the version poll built on it. Calls serve.c (to serve while waiting), startup.c
 * (a ps back empty rolls every ps back) and observe.c; the loop and the checkpoints call it. */
#include <math.h>
#include <string.h>

#include "common/log.h"
#include "master/master_impl.h"

/* Waits for ps p's reply while still serving the master's own socket, so workers blocked on a report or a
 * registration are answered and never wait on the ps that waits on them. */
static int await_ps(master *m, int p, tfx_inmsg *r, int timeout_ms, tfx_err *err) {
  tfx_client *c = m->ps[p].client;
  int64_t deadline = tfx_now_ms() + timeout_ms;
  for (;;) {
    zmq_pollitem_t items[2] = {{tfx_client_socket(c), 0, ZMQ_POLLIN, 0}, {m->sock, 0, ZMQ_POLLIN, 0}};
    int64_t left = deadline - tfx_now_ms();
    if (left <= 0) {
      return tfx_err_set(err, TFX_EPEER, "%s: no reply within %d ms", tfx_client_endpoint(c), timeout_ms);
    }
    if (zmq_poll(items, m->sock ? 2 : 1, (long)left) < 0) {
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

int master__call_ps(master *m, tfx_envelope *req, int timeout_ms, master__on_reply *on_reply, void *ctx, tfx_err *err) {
  int rc = TFX_OK;
  for (int p = 0; p < m->n_ps && !rc; p++) {
    rc = tfx_client_send(m->ps[p].client, req, NULL, 0, err);
  }
  for (int p = 0; p < m->n_ps && !rc; p++) {
    tfx_inmsg r;
    memset(&r, 0, sizeof r);
    rc = await_ps(m, p, &r, timeout_ms, err);
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
  master__observe_ps(m, p, e);
  if (m->running && e->text && !strcmp(e->text, "waiting-for-plan")) {
    m->ps_lost = 1;
  }
}

int master__poll_versions(master *m, tfx_err *err) {
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  m->ps_lost = 0;
  int rc = master__call_ps(m, &env, m->cfg.request_timeout_s * 1000, note_version, m, err);
  if (rc) {
    return rc;
  }
  if (m->ps_lost) {
    /* A ps came back empty (restarted): every ps rolls back to the newest complete checkpoint, so that the
     * cluster is at one consistent step; workers that were ahead fail their next push and re-register. */
    tfx_log(TFX_LOG_WARN, "MASTER-PS-LOST", "a ps lost its state: rolling every ps back to the newest checkpoint");
    if ((rc = master__init_ps(m, err))) {
      return rc;
    }
    return master__poll_versions(m, err);
  }
  int64_t lo = m->ps[0].version;
  int64_t hi = lo;
  for (int p = 1; p < m->n_ps; p++) {
    lo = m->ps[p].version < lo ? m->ps[p].version : lo;
    hi = m->ps[p].version > hi ? m->ps[p].version : hi;
  }
  m->global_step = lo;
  m->max_version = hi;
  master__observe(m, "step", lo, NAN, NAN, NAN);
  return TFX_OK;
}
