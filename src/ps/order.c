/* Sync steps summed in worker order (training.deterministic): floating-point addition is not associative,
 * so with three or more workers the sum of a step depends on the order its pushes arrive in. With the option,
 * a fresh push that comes before a lower worker's push of the same step is held (the whole message, moved here)
 * and accumulated once every lower worker's push was: the step is summed ((g0 + g1) + g2) + ..., every time.
 * A push that comes in order costs nothing; a held one is summed later, when its turn comes. */
#include <stdlib.h>
#include <string.h>

#include "ps/ps_impl.h"

/* Keeps m (moved out of *m, which is left empty) until its turn; 0, or -1 when out of memory. */
static int hold(ps_state *p, tfx_inmsg *m) {
  if (p->n_held == p->cap_held) {
    int cap = p->cap_held * 2 + 4;
    tfx_inmsg *h = cap <= PS_MAX_WORKERS ? realloc(p->held, sizeof *h * (size_t)cap) : NULL;
    if (!h) {
      return -1;
    }
    p->held = h;
    p->cap_held = cap;
  }
  tfx_inmsg *slot = &p->held[p->n_held++];
  *slot = *m;
  zmq_msg_init(&slot->identity);
  zmq_msg_move(&slot->identity, &m->identity);
  memset(m, 0, sizeof *m);
  return 0;
}

/* Takes held push i out of the list (the caller finishes it). */
static tfx_inmsg take(ps_state *p, int i) {
  tfx_inmsg m = p->held[i];
  memmove(p->held + i, p->held + i + 1, sizeof *p->held * (size_t)(p->n_held - i - 1));
  p->n_held--;
  return m;
}

/* Applies the held pushes whose turn came, lowest worker first, until none is left that may go. */
static void release(ps_state *p) {
  for (int i = 0; i < p->n_held;) {
    if (ps__sync_hold(p, p->held[i].env)) {
      i++;
      continue;
    }
    tfx_inmsg m = take(p, i);
    tfx_err err;
    tfx_err_clear(&err);
    int rc = ps__push(p, &m, &err);
    if (rc && rc != TFX_EPEER) {
      tfx_server_reply_error(p->sock, &m, rc, err.msg, NULL);
    }
    tfx_inmsg_fini(&m);
    i = 0; /* the step may have moved on: look again from the start */
  }
}

int ps__push_ordered(ps_state *p, tfx_inmsg *m, tfx_err *err) {
  if (ps__sync_hold(p, m->env)) {
    if (hold(p, m)) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory holding worker %d's push", ps__worker_of(m->env));
    }
    p->stats.held++;
    return TFX_OK;
  }
  int rc = ps__push(p, m, err);
  if (p->n_held) {
    release(p);
  }
  return rc;
}

void ps__order_drop(ps_state *p, int code, const char *why) {
  while (p->n_held > 0) {
    tfx_inmsg m = take(p, p->n_held - 1);
    if (why) {
      tfx_server_reply_error(p->sock, &m, code, why, NULL);
    }
    tfx_inmsg_fini(&m);
  }
  free(p->held);
  p->held = NULL;
  p->cap_held = 0;
}
