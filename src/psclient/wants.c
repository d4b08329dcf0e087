/* The row requests of lazy tables (Envelope.want) for the batch lent to the model, and the rows of a reply taken
 * into the batch's rows (tfx_var.batch_vals): shared by the row pulls (rows.c) and the push-pulls that carry them
 * (psclient.c); calls neither. */
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
  for (size_t k = 0; k < v->n_batch; k++) { /* without a branch: ids of every ps alternate */
    s->want_at[n] = (uint32_t)k;
    s->want_ids[n] = v->batch_ids[k];
    n += (size_t)psclient__holds(s, v->batch_ids[k]);
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

