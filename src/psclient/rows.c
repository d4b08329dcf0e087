/* The rows of lazy tables: each batch pulls the rows it touches from the ps that hold them (the model's row
 * source), into a worker's copy whose pages are dropped once it has cached enough rows. */
#include <string.h>

#include "common/mem.h"
#include "net/net.h"
#include "psclient/psclient.h"
#include "psclient/psclient_impl.h"

/* A worker's copy of a lazy table is a cache of the rows of recent batches: once this many rows were pulled into
 * it, its pages go back to the kernel (one madvise per table), so it holds at most about this many rows' pages
 * (4 KiB each at worst: 256 MiB), whatever the table declares. */
#define TFX_ROW_CACHE_ROWS 65536

/* Asks ps l for the rows of its lazy tables this batch touches; *sent: whether a request went out. */
static int send_row_pull(ps_link *l, int *sent, tfx_err *err) {
  Tfx__Tensor *wants[64];
  char *names[64];
  size_t n = 0;
  *sent = 0;
  for (int i = 0; i < l->n && n < 64; i++) {
    slot *s = &l->slots[i];
    long rows = s->lazy ? psclient__lazy_select(s, 0) : 0;
    if (rows < 0) {
      return tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory for %zu rows", s->var->name, s->var->n_rows);
    }
    if (rows == 0) {
      continue;
    }
    tfx__tensor__init(&s->want);
    s->want.name = s->key;
    s->want.rows = s->ids;
    s->want.n_rows = (size_t)rows;
    wants[n] = &s->want;
    names[n++] = s->key;
  }
  if (!n) {
    return TFX_OK;
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.names = names;
  env.n_names = n;
  env.want = wants;
  env.n_want = n;
  env.target = l->target;
  *sent = 1;
  return tfx_client_send(l->client, &env, NULL, 0, err);
}

/* Copies the rows of a row-pull reply into their tables, checking each tensor against what was asked. */
static int take_rows(tfx_psclient *c, ps_link *l, const tfx_inmsg *m, tfx_err *err) {
  int part = 0;
  for (size_t i = 0; i < m->env->n_tensors; i++) {
    const Tfx__Tensor *t = m->env->tensors[i];
    const void *data;
    size_t size;
    slot *s = psclient__reply_tensor(l, m, i, &part, &data, &size);
    tfx_var *v = s ? s->var : NULL;
    size_t width = v ? v->count / (size_t)v->shape[0] : 0;
    if (!s || !s->lazy || t->n_rows != s->want.n_rows || size != t->n_rows * width * sizeof(float) ||
        (t->n_rows && memcmp(t->rows, s->want.rows, sizeof(int64_t) * t->n_rows))) {
      return tfx_err_set(err, TFX_ESHAPE, "%s: row reply '%.64s' is not the %zu rows asked for",
                         tfx_client_endpoint(l->client), t->name, s ? s->want.n_rows : 0);
    }
    for (size_t k = 0; k < t->n_rows; k++) {
      memcpy(v->value + (size_t)t->rows[k] * width, (const float *)data + k * width, sizeof(float) * width);
    }
    c->row_bytes += size;
    c->cached_rows += t->n_rows;
  }
  return TFX_OK;
}

/* Drops the pages of every lazy table's copy (their rows are pulled again when a batch touches them). */
static void drop_rows(tfx_psclient *c) {
  for (int i = 0; c->lazy_model && i < tfx_model_nvars(c->lazy_model); i++) {
    tfx_var *v = tfx_model_var(c->lazy_model, i);
    if (v->lazy && v->mapped) {
      tfx_mem_drop(v->storage, v->mapped);
    }
  }
}

int tfx_psclient_pull_rows(tfx_psclient *c, tfx_err *err) {
  int rc = TFX_OK;
  if (c->cached_rows > TFX_ROW_CACHE_ROWS) {
    drop_rows(c);
    c->cached_rows = 0;
  }
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
      tfx_inmsg_fini(&m);
      sent = rc && psclient__failover(c, p, rc, &deadline); /* replicas: asked again of the backup */
      rc = sent ? send_row_pull(&c->ps[p], &sent, err) : rc;
    }
  }
  return rc;
}

int tfx_psclient_row_source(void *ctx, tfx_model *m, tfx_err *err) {
  (void)m;
  return tfx_psclient_pull_rows(ctx, err);
}

void tfx_psclient_lend_rows(tfx_psclient *c, tfx_model *m) {
  if (!tfx_psclient_has_lazy(c)) {
    return;
  }
  tfx_model_set_row_source(m, tfx_psclient_row_source, c);
  c->lazy_model = m;
  for (int i = 0; i < tfx_model_nvars(m); i++) {
    tfx_var *v = tfx_model_var(m, i);
    if (v->lazy) { /* scattered rows: 4 KiB pages, so the copy costs the rows touched */
      tfx_mem_small_pages(v->storage, v->mapped);
    }
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
