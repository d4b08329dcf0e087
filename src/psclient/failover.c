/* Failover of the client's links (cluster.replicas 1): ps k's shards have a backup on ps k + 1 (and, once
 * they are served there and ps k rejoined, on ps k again). A request
 * whose ps died (the link dropped, or the ps came back empty) is sent again, once accepted, to the backup, which
 * refuses it until the master promoted it; a push is tagged with its worker and step, so the ps applies a resent
 * push once (sync: a second arrival of the step is dropped and answered with the step's values). After a roll-back
 * (no replicas) the links are checked to answer at one step. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/net.h"
#include "psclient/psclient_impl.h"

int psclient__relink(tfx_psclient *c, int p, int at, tfx_err *err) {
  ps_link *l = &c->ps[p];
  char ep[320];
  tfx_client *nc = NULL;
  int rc = tfx_address_endpoint(tfx_cluster_address(c->cluster, TFX_ROLE_PS, at), 0, NULL, ep, sizeof ep, err);
  rc = rc ? rc : tfx_client_create(ep, &nc, err);
  if (rc) {
    return rc;
  }
  tfx_client_destroy(l->client);
  l->client = nc;
  l->at = at;
  l->moved = at != p; /* at its own ps again (the chief's routes): a failure there moves it to the backup */
  if (l->state == LINK_WAITING) { /* its request went with the old connection */
    psclient__link_state(l, LINK_LOST, "relinked while waiting for a reply");
  }
  l->seen = tfx_client_disconnects(nc);
  l->since = -1;
  return TFX_OK;
}

/* Moves link p to the instance's backup: from its own ps to the next on the ring; from there back to its own ps,
 * which holds the backup once it rejoined (re-replication), so a second failure is followed too. */
static int to_backup(tfx_psclient *c, int p, tfx_err *err) {
  int at = c->ps[p].at == p ? (p + 1) % c->n_ps : p;
  int rc = psclient__relink(c, p, at, err);
  c->ps[p].moved = 1;
  if (!rc) {
    tfx_log(TFX_LOG_WARN, "PSCLIENT-FAILOVER", "ps %d lost: its shards are asked of its backup, ps %d", p, at);
  }
  return rc;
}

int psclient__ready(tfx_psclient *c, int p, tfx_err *err) {
  ps_link *l = &c->ps[p];
  if (!c->replicas || tfx_client_disconnects(l->client) == l->seen) {
    return TFX_OK;
  }
  return to_backup(c, p, err);
}

int psclient__failover(tfx_psclient *c, int p, int rc, int64_t *deadline) {
  ps_link *l = &c->ps[p];
  if (!c->replicas || (rc != TFX_EPEER && rc != TFX_ESTATE) || (c->abort && c->abort(c->abort_ctx))) {
    return 0;
  }
  if (!*deadline) {
    *deadline = tfx_now_ms() + c->timeout_ms;
  }
  if (tfx_now_ms() > *deadline) {
    return 0;
  }
  if ((l->at == p && !l->moved) || tfx_client_disconnects(l->client) != l->seen) {
    return to_backup(c, p, NULL) == TFX_OK;
  }
  usleep(20000); /* the backup is not promoted yet: the master confirms the loss first */
  return 1;
}

int64_t tfx_psclient_steps_apart(const tfx_psclient *c) {
  int64_t lo = INT64_MAX, hi = -1;
  for (int p = 0; p < c->n_ps; p++) {
    if (c->ps[p].client && c->ps[p].since >= 0) {
      lo = c->ps[p].since < lo ? c->ps[p].since : lo;
      hi = c->ps[p].since > hi ? c->ps[p].since : hi;
    }
  }
  return hi < 0 ? 0 : hi - lo;
}

int psclient__next_reply(tfx_psclient *c, const char *left) {
  zmq_pollitem_t items[64];
  int at[64], n = 0;
  for (int p = 0; p < c->n_ps && n < 64; p++) {
    if (left[p] && tfx_client_lost(c->ps[p].client)) {
      return p;
    }
    if (left[p]) {
      items[n] = (zmq_pollitem_t){tfx_client_socket(c->ps[p].client), 0, ZMQ_POLLIN, 0};
      at[n++] = p;
    }
  }
  int64_t deadline = tfx_now_ms() + c->timeout_ms;
  while (n && tfx_now_ms() < deadline) {
    if (c->abort && (c->aborted = c->abort(c->abort_ctx)) != TFX_PSCLIENT_WAIT) {
      return -2;
    }
    if (zmq_poll(items, n, 50) < 0 && errno != EINTR) {
      break;
    }
    for (int i = 0; i < n; i++) {
      if ((items[i].revents & ZMQ_POLLIN) || tfx_client_lost(c->ps[at[i]].client)) {
        return at[i];
      }
    }
  }
  return n ? at[0] : -1;
}
