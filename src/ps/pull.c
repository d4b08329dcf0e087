/* Pulls of the parameter server: answered at once, or parked until their version (or the staleness bound). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ps/ps_impl.h"

static void free_pending(pending_pull *q) {
  zmq_msg_close(&q->identity);
  for (size_t i = 0; i < q->n_names; i++) {
    free(q->names[i]);
  }
  free(q->names);
  for (size_t i = 0; i < q->n_want; i++) {
    free(q->want[i]->name);
    free(q->want[i]->rows);
    free(q->want[i]);
  }
  free(q->want);
}

/* Copies the request's row wants into q (a parked pull outlives its message); 0, or -1 when out of memory. */
static int keep_wants(pending_pull *q, const tfx_envelope *e) {
  if (!e->n_want) {
    return 0;
  }
  if (!(q->want = calloc(e->n_want, sizeof *q->want))) {
    return -1;
  }
  for (size_t i = 0; i < e->n_want; i++) {
    Tfx__Tensor *t = calloc(1, sizeof *t);
    if (!t) {
      return -1;
    }
    q->want[q->n_want++] = t;
    tfx__tensor__init(t);
    t->name = strdup(e->want[i]->name);
    t->rows = malloc(sizeof(int64_t) * e->want[i]->n_rows);
    if (!t->name || !t->rows) {
      return -1;
    }
    memcpy(t->rows, e->want[i]->rows, sizeof(int64_t) * e->want[i]->n_rows);
    t->n_rows = e->want[i]->n_rows;
  }
  return 0;
}

int ps__park(ps_state *p, tfx_inmsg *m, int64_t min_version, int changed_only, tfx_err *err) {
  if (p->n_pending == p->cap_pending) {
    int cap = ps__park_capacity(p->cap_pending);
    if (!cap) {
      return tfx_err_set(err, TFX_ESTATE, "too many parked pulls");
    }
    pending_pull *g = realloc(p->pending, sizeof *g * (size_t)cap);
    if (!g) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
    p->pending = g;
    p->cap_pending = cap;
  }
  pending_pull *q = &p->pending[p->n_pending];
  memset(q, 0, sizeof *q);
  zmq_msg_init(&q->identity);
  zmq_msg_copy(&q->identity, &m->identity);
  q->request_id = m->env->request_id;
  q->min_version = min_version;
  q->changed_only = changed_only;
  q->worker = ps__worker_of(m->env);
  q->since = ps__since(m->env);
  q->deadline = tfx_now_ms() + (int64_t)p->cfg.request_timeout_s * 1000;
  q->names = calloc(m->env->n_names + 1, sizeof(char *)); /* a push-pull names none: all shards */
  for (size_t i = 0; q->names && i < m->env->n_names; i++) {
    if (!(q->names[q->n_names] = strdup(m->env->names[i]))) {
      break;
    }
    q->n_names++;
  }
  p->n_pending++;
  if (keep_wants(q, m->env)) {
    free_pending(q);
    p->n_pending--;
    return tfx_err_set(err, TFX_ENOMEM, "out of memory keeping a pull's rows");
  }
  return TFX_OK;
}

int ps__pull(ps_state *p, tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (ps__pull_ready(p, e->step, ps__worker_of(e))) {
    return ps__send_values(p, &m->identity, e->request_id, ps__worker_of(e), e->names, e->n_names, 0, ps__since(e),
                           e->want, e->n_want, err);
  }
  return ps__park(p, m, e->step, 0, err);
}

static void remove_pending(ps_state *p, int i) {
  free_pending(&p->pending[i]);
  p->pending[i] = p->pending[--p->n_pending];
}

/* After an update: answers parked pulls that became ready and a parked checkpoint. */
void ps__service(ps_state *p) {
  ps__ckpt_service(p);
  for (int i = 0; i < p->n_pending;) {
    pending_pull *q = &p->pending[i];
    if (!ps__pull_ready(p, q->min_version, q->worker)) {
      i++;
      continue;
    }
    tfx_err err;
    if (ps__send_values(p, &q->identity, q->request_id, q->worker, q->names, q->n_names, q->changed_only, q->since,
                        q->want, q->n_want, &err)) {
      tfx_log(TFX_LOG_WARN, "PS-PULL-FAIL", "%s", err.msg);
    }
    remove_pending(p, i);
  }
}

void ps__expire_pulls(ps_state *p) {
  int64_t now = tfx_now_ms();
  for (int i = 0; i < p->n_pending;) {
    pending_pull *q = &p->pending[i];
    if (q->deadline > now) {
      i++;
      continue;
    }
    char text[160];
    snprintf(text, sizeof text, "pull for version %lld timed out: the ps is at %lld", (long long)q->min_version,
             (long long)p->version);
    tfx_log(TFX_LOG_WARN, "PS-PULL-TIMEOUT", "worker %d: %s", q->worker, text); /* logged before the reply leaves */
    tfx_envelope env;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLY);
    env.request_id = q->request_id;
    env.code = TFX_EPEER;
    env.error = text;
    tfx_wire_send(p->sock, &q->identity, &env, NULL, 0, NULL);
    remove_pending(p, i);
  }
}

void ps__fail_pending(ps_state *p, int code, const char *text) {
  while (p->n_pending) {
    pending_pull *q = &p->pending[p->n_pending - 1];
    tfx_envelope env;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLY);
    env.request_id = q->request_id;
    env.code = code;
    env.error = (char *)text;
    tfx_wire_send(p->sock, &q->identity, &env, NULL, 0, NULL);
    remove_pending(p, p->n_pending - 1);
  }
}

void ps__drop_pending(ps_state *p) {
  while (p->n_pending) {
    remove_pending(p, p->n_pending - 1);
  }
  free(p->pending);
  p->pending = NULL;
  p->cap_pending = 0;
}
