/* The row pulls of lazy tables: a batch pulls the rows it touches from the ps that hold them (asked by the worker
 * or the master before the model computes on it), into the batch's rows of each table (tfx_var.batch_vals), when
 * they did not ride on the push-pull of the step before (wants.c). */
#include <stdint.h>
#include <string.h>

#include "net/net.h"
#include "psclient/psclient.h"
#include "psclient/psclient_impl.h"

/* Asks ps l for the rows of its lazy tables the lent batch touches; *sent: whether a request went out. */
static int send_row_pull(ps_link *l, int *sent, tfx_err *err) {
  Tfx__Tensor *wants[64];
  char *names[64];
  size_t n = 0;
  *sent = 0;
  int rc = psclient__fill_wants(l, wants, names, 64, &n, err);
  if (rc || !n) {
    return rc;
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.names = names;
  env.n_names = n;
  env.want = wants;
  env.n_want = n;
  env.target = l->target;
  *sent = 1;
  rc = tfx_client_send(l->client, &env, NULL, 0, err);
  psclient__link_sent(l, rc);
  return rc;
}

/* After link p's failover: asks again for the rows of every other link whose row pull went to the lost ps with
 * p's (relinked while waiting by psclient__resend), so its reply comes where it is awaited. */
static int send_lost_row_pulls(tfx_psclient *c, int p, tfx_err *err) {
  int rc = TFX_OK;
  for (int o = 0; o < c->n_ps && !rc; o++) {
    ps_link *l = &c->ps[o];
    rc = o != p && l->state == LINK_LOST && l->row_pull ? send_row_pull(l, &l->row_pull, err) : TFX_OK;
  }
  return rc;
}

/* Copies the rows of a row-pull reply into their tables, checking each tensor against what was asked. */
static int take_rows(tfx_psclient *c, ps_link *l, const tfx_inmsg *m, tfx_err *err) {
  int part = 0, rc = TFX_OK;
  for (size_t i = 0; i < m->env->n_tensors && !rc; i++) {
    const void *data;
    size_t size;
    slot *s = psclient__reply_tensor(l, m, i, &part, &data, &size);
    rc = psclient__take_row_tensor(c, l, m->env->tensors[i], s, data, size, err);
  }
  return rc;
}

int tfx_psclient_pull_rows(tfx_psclient *c, tfx_err *err) {
  int rc = TFX_OK;
  for (int p = 0; p < c->n_ps; p++) {
    c->ps[p].row_pull = 0;
  }
  for (int p = 0; p < c->n_ps && !rc; p++) {
    rc = c->ps[p].client ? psclient__ready(c, p, err) : TFX_OK;
    rc = rc || !c->ps[p].client ? rc : send_row_pull(&c->ps[p], &c->ps[p].row_pull, err);
  }
  for (int p = 0; p < c->n_ps && !rc; p++) {
    int64_t deadline = 0;
    int sent = c->ps[p].row_pull;
    while (sent) {
      tfx_inmsg m;
      rc = tfx_client_recv(c->ps[p].client, &m, c->timeout_ms, err);
      rc = rc ? rc : take_rows(c, &c->ps[p], &m, err);
      if (!rc) {
        psclient__link_state(&c->ps[p], LINK_IDLE, "its rows taken");
      }
      tfx_inmsg_fini(&m);
      sent = rc && psclient__failover(c, p, rc, &deadline); /* replicas: asked again of the backup, */
      rc = sent ? psclient__resend(c, p, INT64_MAX, err) : rc; /* once it has the steps kept for it */
      sent = sent && !rc;
      rc = sent ? send_row_pull(&c->ps[p], &sent, err) : rc;
      rc = rc ? rc : send_lost_row_pulls(c, p, err);
    }
  }
  return rc;
}

int tfx_psclient_has_lazy(const tfx_psclient *c) {
  for (int p = 0; p < c->n_ps; p++) {
    for (int i = 0; i < c->ps[p].n; i++) {
      if (c->ps[p].slots[i].lazy) {
        return 1;
      }
    }
  }
  return 0;
}
