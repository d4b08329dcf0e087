/* The worker's control socket (worker_impl.h): STATUS, STOP and the chief's EVALUATE, answered between steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/wire.h"
#include "worker/worker_impl.h"

/* The most ps instances a status reply names the worker's ledger of ("acked.P"). */
#define WORKER_LEDGER_MAX 64

/* Answers a STATUS (or STOP): state, global step, uptime, local steps, and for each ps instance the pushes it
 * answered ("acked.P", the worker's side of the run's ledger). */
static int reply_status(worker *w, const tfx_inmsg *m) {
  tfx_envelope env;
  tfx_reply_init(&env, m);
  Tfx__KeyValue kv[2 + WORKER_LEDGER_MAX], *kvp[2 + WORKER_LEDGER_MAX];
  char keys[WORKER_LEDGER_MAX][24];
  int n_ps = w->ps ? tfx_cluster_count(w->n->cluster, TFX_ROLE_PS) : 0;
  n_ps = n_ps < WORKER_LEDGER_MAX ? n_ps : WORKER_LEDGER_MAX;
  for (int i = 0; i < 2 + n_ps; i++) {
    tfx__key_value__init(&kv[i]);
    kvp[i] = &kv[i];
  }
  kv[0].key = "uptime_s";
  kv[0].value = (tfx_now_ms() - w->start_ms) / 1000.0;
  kv[1].key = "local_steps";
  kv[1].value = (double)w->steps;
  for (int p = 0; p < n_ps; p++) {
    snprintf(keys[p], sizeof keys[p], "acked.%d", p);
    kv[2 + p].key = keys[p];
    kv[2 + p].value = (double)tfx_psclient_pushes_acked(w->ps, p);
  }
  env.text = (char *)(w->model ? "training" : "registering");
  env.step = w->version;
  env.stats = kvp;
  env.n_stats = 2 + (size_t)n_ps;
  return tfx_wire_send(w->sock, &m->identity, &env, NULL, 0, NULL);
}

void worker__serve_control(worker *w) {
  if (!w->sock) {
    return; /* worker 0 acting as chief: its address belongs to the master */
  }
  while (tfx_net_readable(w->sock)) { /* between steps: no system call while nothing came */
    tfx_inmsg m;
    tfx_err err;
    if (tfx_wire_recv(w->sock, 1, &m, &err) == TFX_OK) {
      if (m.env->type == TFX__MSG_TYPE__MSG_STOP) {
        w->stop = 1;
      }
      if (m.env->type == TFX__MSG_TYPE__MSG_STATUS || m.env->type == TFX__MSG_TYPE__MSG_STOP) {
        reply_status(w, &m);
      } else if (m.env->type == TFX__MSG_TYPE__MSG_EVALUATE) {
        worker__eval_serve(&w->eval, w->sock, &m, w->model, w->version);
      } else {
        tfx_server_reply_error(w->sock, &m, TFX_EPROTO, "a worker answers only STATUS, STOP and EVALUATE", NULL);
      }
    } else {
      worker__obs_bad_frame(&w->obs);
      tfx_server_reply_error(w->sock, &m, TFX_EPROTO, err.msg, NULL);
    }
    tfx_inmsg_fini(&m);
  }
}

void worker__follow_routes(worker *w) {
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  if (!w->cfg.ps_replicas) {
    return;
  }
  int rc = tfx_client_call(w->master, &env, NULL, 0, &r, 500, NULL);
  uint64_t epoch = rc ? 0 : r.env->epoch;
  for (size_t i = 0; epoch > w->route_epoch && i < r.env->n_stats; i++) {
    const char *k = r.env->stats[i]->key ? r.env->stats[i]->key : "";
    tfx_err rerr;
    if (!strcmp(k, "rollback_epoch") && (uint64_t)r.env->stats[i]->value > w->route_epoch) {
      int dropped = tfx_psclient_drop_kept(w->ps); /* the ps went back: those steps are trained again */
      tfx_log(TFX_LOG_WARN, "WORKER-KEPT-VOID",
              "the chief rolled every ps back at plan epoch %llu: %d kept push(es) "
              "dropped",
              (unsigned long long)r.env->stats[i]->value, dropped);
    }
    if (!strncmp(k, "route.", 6) && tfx_psclient_route(w->ps, atoi(k + 6), (int)r.env->stats[i]->value, &rerr)) {
      tfx_log(TFX_LOG_WARN, "WORKER-ROUTES", "ps instance %s: %s", k + 6, rerr.msg);
      epoch = w->route_epoch; /* asked again next round */
    }
  }
  if (epoch > w->route_epoch) {
    tfx_log(TFX_LOG_WARN, "WORKER-ROUTES", "the chief's plan epoch is %llu: the ps links follow its routes",
            (unsigned long long)epoch);
    w->route_epoch = epoch;
  }
  tfx_inmsg_fini(&r);
}

/* Whether the chief named a roll-back (rollback_epoch) past the routes w follows: remembered until w follows them;
 * asked at most once a second, and never of a chief that does not answer within 300 ms. */
static int rolled_back(worker *w) {
  if (!w->cfg.ps_replicas || !w->master) {
    return 0;
  }
  if (w->rollback_seen <= w->route_epoch && tfx_now_ms() - w->rollback_asked >= 1000) {
    w->rollback_asked = tfx_now_ms();
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
    if (tfx_client_call(w->master, &env, NULL, 0, &r, 300, NULL) == TFX_OK) {
      for (size_t i = 0; i < r.env->n_stats; i++) {
        const char *k = r.env->stats[i]->key ? r.env->stats[i]->key : "";
        uint64_t epoch = (uint64_t)r.env->stats[i]->value;
        w->rollback_seen = !strcmp(k, "rollback_epoch") && epoch > w->rollback_seen ? epoch : w->rollback_seen;
      }
    }
    tfx_inmsg_fini(&r);
  }
  return w->rollback_seen > w->route_epoch;
}

int worker__stop_asked(void *ctx) {
  worker *w = ctx;
  if (w->stop || tfx_stop_requested()) {
    return TFX_PSCLIENT_ABORT_STOP;
  }
  return rolled_back(w) ? TFX_PSCLIENT_ABORT_ROLLBACK : TFX_PSCLIENT_WAIT;
}
