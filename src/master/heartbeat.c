/* Heartbeats: a STATUS to every worker every 2 s, answered between its steps; a worker silent for longer than
 * the request deadline is named in a log line (once until it answers again) and shown silent on /status. Calls
 * only observe.c of this room; the loop calls it. */
#include "common/log.h"
#include "master/master_impl.h"

/* Reads worker w's answer to the pending heartbeat, if it came. */
static void heard(master *m, int w, int64_t now) {
  worker_peer *wp = &m->workers[w];
  zmq_pollitem_t item = {tfx_client_socket(wp->client), 0, ZMQ_POLLIN, 0};
  if (!wp->hb_pending || zmq_poll(&item, 1, 0) <= 0) {
    return;
  }
  tfx_inmsg r;
  if (tfx_client_recv(wp->client, &r, 1, NULL) == TFX_OK) {
    if (wp->hb_warned) {
      tfx_log(TFX_LOG_INFO, "MASTER-WORKER-BACK", "worker %d answers again", w);
    }
    master__lock(m, 1);
    wp->hb_pending = 0;
    wp->hb_warned = 0;
    wp->hb_seen = now;
    master__lock(m, 0);
  }
  tfx_inmsg_fini(&r);
}

/* Sends worker w a heartbeat; whether it went. */
static int send_heartbeat(worker_peer *wp) {
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  return tfx_client_send(wp->client, &env, NULL, 0, NULL) == TFX_OK;
}

void master__heartbeat(master *m) {
  int64_t now = tfx_now_ms();
  for (int w = 0; w < m->n_workers && !m->finished; w++) {
    worker_peer *wp = &m->workers[w];
    heard(m, w, now);
    if (wp->hb_pending && now - wp->hb_sent > (int64_t)m->cfg.request_timeout_s * 1000 && !wp->hb_warned) {
      master__lock(m, 1);
      wp->hb_warned = 1;
      master__lock(m, 0);
      tfx_log(TFX_LOG_WARN, "MASTER-WORKER-SILENT", "worker %d (%s) has not answered a heartbeat for %d s", w,
              tfx_cluster_address(m->n->cluster, TFX_ROLE_WORKER, w), m->cfg.request_timeout_s);
    }
    if (!wp->hb_pending && now - wp->hb_sent >= 2000) {
      if (send_heartbeat(wp)) {
        wp->hb_pending = 1;
        wp->hb_sent = now;
      }
    } else if (wp->hb_pending && wp->hb_warned && now - wp->hb_sent >= 2000) {
      if (send_heartbeat(wp)) {
        wp->hb_sent = now; /* a silent worker is asked again every 2 s */
      }
    }
  }
}
