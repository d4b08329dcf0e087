/* The rows of lazy tables: each batch pulls the rows it touches from the ps that hold them (the model's row
 * source), into the batch's rows of each table (tfx_var.batch_vals), either in a row pull of their own or riding
 * on the push-pull of the step before. */
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "psclient/psclient.h"
#include "psclient/psclient_impl.h"

/* Selects into s->want_ids the ids of the lent batch (the variable's batch_ids) that this ps holds, and into
 * s->want_at their rows among batch_ids; returns how many, or -1 when memory runs out. */
static long select_wants(slot *s) {
  const tfx_var *v = s->var;
  if (v->n_batch > s->want_cap) {
    int64_t *ids = realloc(s->want_ids, sizeof *ids * v->n_batch);
    s->want_ids = ids ? ids : s->want_ids;
    uint32_t *at = ids ? realloc(s->want_at, sizeof *at * v->n_batch) : NULL;
    s->want_at = at ? at : s->want_at;
    if (!at) {
      return -1;
    }
    s->want_cap = v->n_batch;
  }
  size_t n = 0;
  for (size_t k = 0; k < v->n_batch; k++) {
    int64_t id = v->batch_ids[k];
    if (psclient__holds(s, id)) {
      s->want_at[n] = (uint32_t)k;
      s->want_ids[n++] = id;
    }
  }
  return (long)n;
}

int psclient__fill_wants(ps_link *l, Tfx__Tensor **wants, char **names, size_t cap, size_t *n_out, tfx_err *err) {
  size_t n = 0;
  for (int i = 0; i < l->n; i++) {
    slot *s = &l->slots[i];
    s->want.n_rows = 0;
    long rows = s->lazy && s->var->batch_ids ? select_wants(s) : 0;
    if (rows < 0) {
      return tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory for %zu rows", s->var->name, s->var->n_batch);
    }
    if (rows == 0) {
      continue;
    }
    if (n == cap) {
      return tfx_err_set(err, TFX_EINVAL, "table %s: a batch asks %s for the rows of more than %zu lazy tables",
                         s->var->name, tfx_client_endpoint(l->client), cap);
    }
    tfx__tensor__init(&s->want);
    s->want.name = s->key;
    s->want.rows = s->want_ids;
    s->want.n_rows = (size_t)rows;
    wants[n] = &s->want;
    names[n++] = s->key;
  }
  *n_out = n;
  return TFX_OK;
}

int psclient__take_row_tensor(tfx_psclient *c, ps_link *l, const Tfx__Tensor *t, slot *s, const void *data,
                              size_t size, tfx_err *err) {
  tfx_var *v = s ? s->var : NULL;
  size_t width = v ? v->count / (size_t)v->shape[0] : 0;
  if (!s || !s->lazy || !v->batch_vals || t->n_rows != s->want.n_rows ||
      size != t->n_rows * width * sizeof(float) ||
      (t->n_rows && memcmp(t->rows, s->want.rows, sizeof(int64_t) * t->n_rows))) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: row reply '%.64s' is not the %zu rows asked for",
                       tfx_client_endpoint(l->client), t->name, s ? s->want.n_rows : 0);
  }
  for (size_t k = 0; k < t->n_rows; k++) {
    memcpy(v->batch_vals + (size_t)s->want_at[k] * width, (const float *)data + k * width, sizeof(float) * width);
  }
  c->row_bytes += size;
  return TFX_OK;
}

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
  *sent = 1;
  return tfx_client_send(l->client, &env, NULL, 0, err);
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
    rc = c->ps[p].client ? send_row_pull(&c->ps[p], &c->ps[p].row_pull, err) : TFX_OK;
  }
  for (int p = 0; p < c->n_ps && !rc; p++) {
    if (!c->ps[p].row_pull) {
      continue;
    }
    tfx_inmsg m;
    rc = tfx_client_recv(c->ps[p].client, &m, c->timeout_ms, err);
    rc = rc ? rc : take_rows(c, &c->ps[p], &m, err);
    tfx_inmsg_fini(&m);
  }
  return rc;
}

int tfx_psclient_row_source(void *ctx, tfx_model *m, tfx_err *err) {
  (void)m;
  return tfx_psclient_pull_rows(ctx, err);
}

void tfx_psclient_lend_rows(tfx_psclient *c, tfx_model *m) {
  if (tfx_psclient_has_lazy(c)) {
    tfx_model_set_row_source(m, tfx_psclient_row_source, c);
  }
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
