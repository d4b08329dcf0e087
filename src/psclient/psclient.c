/* Pull and push across every ps of the plan. */
#include "psclient/psclient.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/mem.h"
#include "net/net.h"
#include "psclient/psclient_impl.h"

static void release_held(ps_link *l);

static int map_shard(const Tfx__Shard *s, tfx_model *m, slot *out, tfx_err *err) {
  tfx_var *v = tfx_model_find_var(m, s->var);
  if (!v) {
    return tfx_err_set(err, TFX_ESHAPE, "plan shard '%.64s': the model has no variable '%.64s'", s->key, s->var);
  }
  if ((int)s->n_shape != v->rank || s->row_begin < 0 || s->row_end > v->shape[0] || s->row_begin >= s->row_end) {
    return tfx_err_set(err, TFX_ESHAPE, "plan shard '%.64s': does not fit variable %s", s->key, v->name);
  }
  for (int d = 0; d < v->rank; d++) {
    if (s->shape[d] != v->shape[d]) {
      return tfx_err_set(err, TFX_ESHAPE, "plan shard '%.64s': dim %d is %lld, variable has %lld", s->key, d,
                         (long long)s->shape[d], (long long)v->shape[d]);
    }
  }
  size_t row = v->count / (size_t)v->shape[0];
  out->lazy = s->lazy;
  out->mod_n = s->mod_n > 1 ? s->mod_n : 1;
  out->mod_r = s->mod_n > 1 ? s->mod_r : 0;
  out->mod_mask = (out->mod_n & (out->mod_n - 1)) == 0 ? out->mod_n - 1 : -1;
  snprintf(out->key, sizeof out->key, "%s", s->key);
  out->var = v;
  out->rank = v->rank;
  out->row_begin = s->row_begin;
  out->row_end = s->row_end;
  out->offset = row * (size_t)s->row_begin;
  out->count = row * (size_t)(s->row_end - s->row_begin);
  memcpy(out->shape, v->shape, sizeof v->shape);
  out->shape[0] = s->row_end - s->row_begin;
  return TFX_OK;
}

/* Allocates the push envelope arrays of one ps (filled by fill_push before every push). */
static int prepare_push(ps_link *l, tfx_err *err) {
  l->metas = calloc((size_t)l->n + 1, sizeof *l->metas);
  l->ptrs = calloc((size_t)l->n + 1, sizeof *l->ptrs);
  l->payloads = calloc((size_t)l->n + 1, sizeof *l->payloads);
  if (!l->metas || !l->ptrs || !l->payloads) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; i < l->n; i++) {
    l->n_push += l->slots[i].var->trainable || l->slots[i].var->assign;
  }
  return TFX_OK;
}

/* Selects into s->ids the ids of the variable's gradient `rows` that this ps holds and gathers their gradient
 * rows into s->rows; returns how many, or -1 when memory runs out. */
static long select_grads(slot *s) {
  tfx_var *v = s->var;
  size_t width = v->count / (size_t)v->shape[0], n = 0;
  if (v->n_rows > s->ids_cap) {
    int64_t *ids = realloc(s->ids, sizeof(int64_t) * v->n_rows);
    s->ids = ids ? ids : s->ids;
    uint32_t *at = ids ? realloc(s->grad_at, sizeof(uint32_t) * v->n_rows) : NULL;
    s->grad_at = at ? at : s->grad_at;
    float *rows = at ? realloc(s->rows, sizeof(float) * v->n_rows * width) : NULL;
    s->rows = rows ? rows : s->rows;
    if (!rows) {
      return -1;
    }
    s->ids_cap = v->n_rows;
  }
  for (size_t k = 0; k < v->n_rows; k++) { /* without a branch: ids of every ps alternate */
    s->grad_at[n] = (uint32_t)k;
    s->ids[n] = v->rows[k];
    n += (size_t)psclient__holds(s, v->rows[k]);
  }
  for (size_t j = 0; j < n; j++) {
    memcpy(s->rows + j * width, v->grad + (size_t)s->grad_at[j] * width, sizeof(float) * width);
  }
  return (long)n;
}

/* Describes this step's gradients of one ps, in place over the grad buffers: dense slices whole, row-sparse
 * ones as the touched rows that fall in the slice (a contiguous run of the ascending row list), a lazy table's
 * as its rows of this ps, gathered. */
static int fill_push(ps_link *l) {
  int n = 0;
  for (int i = 0; i < 2 * l->n; i++) { /* small tensors first (TFX_WIRE_SMALL), then the large ones */
    slot *s = &l->slots[i % l->n];
    tfx_var *v = s->var;
    if ((!v->trainable && !v->assign) || (!v->sparse && s->count * sizeof(float) > TFX_WIRE_SMALL) != (i >= l->n)) {
      continue;
    }
    Tfx__Tensor *t = &l->metas[n];
    tfx__tensor__init(t);
    t->name = s->key;
    t->shape = s->shape;
    t->n_shape = (size_t)s->rank;
    const float *g = (v->assign ? v->value : v->grad) + s->offset; /* statistics travel as values to assign */
    size_t bytes = s->count * sizeof(float);
    if (s->lazy) {
      long rows = select_grads(s);
      if (rows <= 0) {
        continue; /* no row of this ps in the batch (or no memory: the step pushes nothing here) */
      }
      t->rows = s->ids;
      t->n_rows = (size_t)rows;
      g = s->rows;
      bytes = (size_t)rows * (v->count / (size_t)v->shape[0]) * sizeof(float);
    } else if (v->sparse) {
      size_t width = v->count / (size_t)v->shape[0], lo = tfx_rows_lower_bound(v->rows, v->n_rows, s->row_begin);
      size_t hi = tfx_rows_lower_bound(v->rows, v->n_rows, s->row_end);
      if (hi == lo) {
        continue;
      }
      t->rows = v->rows + lo;
      t->n_rows = hi - lo;
      g = v->grad + lo * width;
      bytes = (hi - lo) * width * sizeof(float);
    }
    t->nbytes = bytes;
    l->ptrs[n] = t;
    l->payloads[n++] = (tfx_payload){g, bytes, 0, NULL, NULL};
  }
  return n;
}

/* Whether every shard of a link is a dense trainable slice (what a push in parts may carry). */
static int parts_fit(const ps_link *l) {
  for (int i = 0; i < l->n; i++) {
    const tfx_var *v = l->slots[i].var;
    if (!v->trainable || v->assign || v->sparse) {
      return 0;
    }
  }
  return l->n > 0;
}

/* Appends one unit to a link's part plan; -1 when out of memory. */
static int add_unit(ps_link *l, int slot, size_t offset, size_t count) {
  part_unit *u = realloc(l->units, sizeof *u * (size_t)(l->n_units + 1));
  if (!u) {
    return -1;
  }
  l->units = u;
  l->units[l->n_units++] = (part_unit){slot, offset, count};
  return 0;
}

/* Cuts a link's values into messages of part_floats values (the last one shorter), in slot order. */
static int plan_parts(ps_link *l, size_t part_floats, tfx_err *err) {
  size_t left = part_floats;
  int rc = 0;
  l->part_first = calloc((size_t)l->n + 1, sizeof *l->part_first); /* grown below */
  for (int i = 0; i < l->n && !rc && l->part_first; i++) {
    for (size_t off = 0; off < l->slots[i].count && !rc;) {
      size_t take = l->slots[i].count - off < left ? l->slots[i].count - off : left;
      rc = add_unit(l, i, off, take);
      off += take;
      left -= take;
      if (!left || (i == l->n - 1 && off == l->slots[i].count)) {
        int *f = realloc(l->part_first, sizeof *f * (size_t)(l->n_parts + 2));
        if (!f) {
          rc = -1;
          break;
        }
        l->part_first = f;
        l->part_first[++l->n_parts] = l->n_units;
        left = part_floats;
      }
    }
  }
  size_t cap = (size_t)(l->n_units > l->n ? l->n_units : l->n) + 1; /* whole pushes (fill_push) use them too */
  free(l->metas);
  free(l->ptrs);
  free(l->payloads);
  l->metas = calloc(cap, sizeof *l->metas);
  l->ptrs = calloc(cap, sizeof *l->ptrs);
  l->payloads = calloc(cap, sizeof *l->payloads);
  l->unit_len = calloc((size_t)l->n_units, sizeof *l->unit_len);
  if (rc || !l->part_first || !l->metas || !l->ptrs || !l->payloads || !l->unit_len) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  return TFX_OK;
}

int tfx_psclient_use_parts(tfx_psclient *c, size_t part_bytes, tfx_err *err) {
  size_t part_floats = c->replicas ? 0 : part_bytes / sizeof(float); /* a part is not sent again on failover */
  for (int p = 0; p < c->n_ps && part_floats; p++) {
    ps_link *l = &c->ps[p];
    size_t total = 0;
    for (int i = 0; i < l->n; i++) {
      total += l->slots[i].count;
    }
    if (l->n_parts || !parts_fit(l) || total < 4 * part_floats) {
      continue; /* below four parts, one message costs less than the pipeline saves (bench/datapath) */
    }
    size_t n_parts = total / part_floats; /* equal parts of about part_bytes: no small tail message */
    int rc = plan_parts(l, (total + n_parts - 1) / n_parts, err);
    if (rc) {
      return rc;
    }
    tfx_log(TFX_LOG_INFO, "PUSH-PARTS", "%s: push-pull of %zu bytes in %d pipelined parts",
            tfx_client_endpoint(l->client), total * sizeof(float), l->n_parts);
  }
  return TFX_OK;
}

static int add_shard(tfx_psclient *c, const Tfx__Shard *s, tfx_model *m, tfx_err *err) {
  if (s->ps < 0 || s->ps >= c->n_ps) {
    return tfx_err_set(err, TFX_ESHAPE, "plan shard '%.64s': ps %d of %d", s->key, s->ps, c->n_ps);
  }
  ps_link *l = &c->ps[s->ps];
  slot *g = realloc(l->slots, sizeof *g * (size_t)(l->n + 1));
  if (!g) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  l->slots = g;
  memset(&l->slots[l->n], 0, sizeof *g);
  int rc = map_shard(s, m, &l->slots[l->n], err);
  if (!rc) {
    l->n++;
  }
  return rc;
}

int tfx_psclient_create(const tfx_cluster *cluster, Tfx__Shard *const *shards, size_t n_shards, tfx_model *model,
                        int timeout_ms, tfx_psclient **out, tfx_err *err) {
  tfx_psclient *c = calloc(1, sizeof *c);
  int rc = TFX_OK;
  if (!c) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  c->n_ps = tfx_cluster_count(cluster, TFX_ROLE_PS);
  c->timeout_ms = timeout_ms;
  c->cluster = cluster;
  if (!(c->ps = calloc((size_t)c->n_ps + 1, sizeof *c->ps))) {
    free(c);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n_shards && !rc; i++) {
    rc = add_shard(c, shards[i], model, err);
  }
  for (int p = 0; p < c->n_ps && !rc; p++) {
    char ep[320];
    c->ps[p].since = -1;
    c->ps[p].at = p;
    if (!c->ps[p].n) {
      continue;
    }
    rc = tfx_address_endpoint(tfx_cluster_address(cluster, TFX_ROLE_PS, p), 0, NULL, ep, sizeof ep, err);
    if (!rc) {
      rc = tfx_client_create(ep, &c->ps[p].client, err);
    }
    if (!rc) {
      rc = prepare_push(&c->ps[p], err);
    }
  }
  if (rc) {
    tfx_psclient_destroy(c);
    return rc;
  }
  *out = c;
  return TFX_OK;
}

void tfx_psclient_destroy(tfx_psclient *c) {
  if (!c) {
    return;
  }
  for (int p = 0; p < c->n_ps; p++) {
    ps_link *l = &c->ps[p];
    release_held(l);
    tfx_client_destroy(l->client);
    for (int i = 0; i < l->n; i++) {
      free(l->slots[i].ids);
      free(l->slots[i].rows);
      free(l->slots[i].grad_at);
      free(l->slots[i].want_ids);
      free(l->slots[i].want_at);
    }
    free(l->slots);
    free(l->metas);
    free(l->ptrs);
    free(l->payloads);
    free(l->units);
    free(l->part_first);
    free(l->unit_len);
    psclient__keep_free(l);
  }
  free(c->ps);
  free(c);
}

static slot *find_slot(ps_link *l, const char *key) {
  for (int i = 0; i < l->n; i++) {
    if (strcmp(l->slots[i].key, key) == 0) {
      return &l->slots[i];
    }
  }
  return NULL;
}

/* Points variables back at their own storage, copying values that were borrowed from frames. */
static void release_held(ps_link *l) {
  for (int i = 0; i < l->n; i++) {
    tfx_var *v = l->slots[i].var;
    if (v->value != v->storage) {
      memcpy(v->storage, v->value, sizeof(float) * v->count);
      v->value = v->storage;
    }
  }
  tfx_inmsg_fini(&l->held);
}

/* The i-th tensor of a reply: its slot on link l (NULL if unknown) and its bytes (*data, *size; none when it has
 * no frame), advancing *part over the data frames. */
slot *psclient__reply_tensor(ps_link *l, const tfx_inmsg *m, size_t i, int *part, const void **data, size_t *size) {
  const Tfx__Tensor *t = m->env->tensors[i];
  *size = 0;
  *data = t->nbytes ? tfx_inmsg_part(m, (*part)++, size) : NULL;
  return find_slot(l, t->name);
}

/* Takes every tensor of a pull reply into its variable, checking names and sizes: a whole, aligned variable
 * is used in place from the frame (no copy; the frame is held until the next reply), a slice is copied. */
static int take_values(tfx_psclient *c, ps_link *l, tfx_inmsg *m, tfx_err *err) {
  int part = 0;
  for (size_t i = 0; i < m->env->n_tensors; i++) {
    const Tfx__Tensor *t = m->env->tensors[i];
    const void *data;
    size_t size;
    slot *s = psclient__reply_tensor(l, m, i, &part, &data, &size);
    if (s && s->lazy) { /* the rows of the lent batch, asked for with a push-pull */
      int rc = psclient__take_row_tensor(c, l, t, s, data, size, err);
      if (rc) {
        return rc;
      }
      continue;
    }
    if (!s || size != s->count * sizeof(float)) {
      return tfx_err_set(err, TFX_ESHAPE, "%s: pull reply tensor '%.64s' unknown or of %zu bytes",
                         tfx_client_endpoint(l->client), t->name, size);
    }
    s->fresh = 1;
    if (s->count == s->var->count && !s->var->assign && ((uintptr_t)data & 3) == 0) {
      s->var->value = (float *)data;
    } else {
      if (s->var->value != s->var->storage) {
        s->var->value = s->var->storage;
      }
      memcpy(s->var->value + s->offset, data, size);
    }
    c->bytes += size;
  }
  return TFX_OK;
}

/* Receives a values reply from ps p into the model; the previous reply is released only now. */
static int recv_values(tfx_psclient *c, int p, int64_t *lowest, tfx_err *err) {
  ps_link *l = &c->ps[p];
  tfx_inmsg m;
  l->since = -1; /* until this reply is taken whole */
  int rc = tfx_client_recv(l->client, &m, c->timeout_ms, err);
  if (rc) {
    tfx_inmsg_fini(&m);
    return rc;
  }
  for (int i = 0; i < l->n; i++) {
    l->slots[i].fresh = 0;
  }
  rc = take_values(c, l, &m, err);
  l->not_applied = !rc && m.env->flag == 1; /* a push past max_steps: not in the ledger */
  for (int i = 0; i < l->n; i++) {
    tfx_var *v = l->slots[i].var;
    /* Left out of this reply (unchanged) but living in the previous reply's frame: keep it in storage. */
    if (!l->slots[i].fresh && v->value != v->storage) {
      memcpy(v->storage, v->value, sizeof(float) * v->count);
      v->value = v->storage;
    }
  }
  if (!rc && m.env->step < *lowest) {
    *lowest = m.env->step;
  }
  if (!rc && m.env->step >= 0) {
    l->since = m.env->step;
  }
  if (!rc && c->replicas) {
    psclient__acked(l, m.env); /* sync: the pushes the backup holds are no longer kept */
  }
  if (!rc) {
    psclient__link_state(l, LINK_IDLE, "its reply taken");
  }
  tfx_inmsg_fini(&l->held);
  l->held = m;
  return rc;
}

/* Asks ps p for every value at version >= min_version. */
static int send_pull(tfx_psclient *c, int p, int64_t min_version, tfx_err *err) {
  int rc = psclient__ready(c, p, err);
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.step = min_version;
  env.target = c->ps[p].target;
  rc = rc ? rc : tfx_client_send(c->ps[p].client, &env, NULL, 0, err);
  psclient__link_sent(&c->ps[p], rc);
  return rc;
}

/* One request of a pull or push-pull, to send again to the ps that serves its link after a failover. */
typedef struct request {
  int push;     /* a push-pull (else a pull) */
  int64_t step; /* its step (push) or min_version (pull) */
  int rows;     /* a push-pull asking for the lent batch's rows */
} request;

static int send_push(tfx_psclient *c, int p, int64_t step, int rows, tfx_err *err);

/* Sends request q again on link p, to the ps that serves it now. */
static int send_again(tfx_psclient *c, int p, const request *q, tfx_err *err) {
  return q->push ? send_push(c, p, q->step, q->rows, err) : send_pull(c, p, q->step, err);
}

/* Sends q again on p and on every other link whose request went to a lost ps with p's (relinked while waiting): their
 * replies are awaited in turn, and a promoted backup serving several instances completes a step only once every
 * worker sent it on each. */
static int send_lost(tfx_psclient *c, int p, const request *q, tfx_err *err) {
  int rc = send_again(c, p, q, err);
  for (int o = 0; o < c->n_ps && !rc; o++) {
    rc = o != p && c->ps[o].state == LINK_LOST ? send_again(c, o, q, err) : TFX_OK;
  }
  return rc;
}

/* Receives ps p's values reply; with replicas a lost ps's request is sent again to its backup (failover.c). */
static int recv_or_failover(tfx_psclient *c, int p, const request *q, int64_t *lowest, tfx_err *err) {
  int64_t deadline = 0;
  int rc = recv_values(c, p, lowest, err);
  while (rc && psclient__failover(c, p, rc, &deadline)) {
    rc = psclient__resend(c, p, q->push ? q->step : INT64_MAX, err); /* the steps the promoted backup may lack */
    rc = rc ? rc : send_lost(c, p, q, err);
    rc = rc ? rc : recv_values(c, p, lowest, err);
  }
  return rc;
}

int tfx_psclient_pull(tfx_psclient *c, int64_t min_version, int64_t *version, tfx_err *err) {
  int rc = TFX_OK;
  c->bytes = c->row_bytes;
  c->row_bytes = 0;
  for (int p = 0; p < c->n_ps && !rc; p++) {
    rc = c->ps[p].client ? send_pull(c, p, min_version, err) : TFX_OK;
  }
  int64_t lowest = INT64_MAX;
  request q = {0, min_version, 0};
  for (int p = 0; p < c->n_ps && !rc; p++) {
    if (c->ps[p].client) {
      rc = recv_or_failover(c, p, &q, &lowest, err);
    }
  }
  if (!rc) {
    *version = lowest == INT64_MAX ? 0 : lowest;
  }
  return rc;
}

/* Whether a push-pull to l may ask only for the shards changed since its last reply: never when it holds a variable
 * the model writes itself (batch-norm statistics, whose pushed values a ps may skip or overwrite). */
static int may_skip_unchanged(const ps_link *l) {
  for (int i = 0; i < l->n; i++) {
    if (l->slots[i].var->assign) {
      return 0;
    }
  }
  return l->since >= 0;
}

/* Sends every ps its gradients as a push-pull: the reply carries the updated values (only the shards changed since
 * the last reply, where may_skip_unchanged; recv_values keeps the values of the others) and, with rows, the rows of
 * the lent batch this ps holds (Envelope.want). */
static int send_pushes(tfx_psclient *c, int64_t step, int rows, tfx_err *err) {
  int rc = TFX_OK;
  for (int p = 0; p < c->n_ps && !rc; p++) {
    ps_link *l = &c->ps[p];
    if (!l->client || l->n_parts) {
      continue;
    }
    rc = send_push(c, p, step, rows, err);
  }
  return rc;
}

/* Sends ps p its gradients tagged `step` as a push-pull (the same bytes when sent again after a failover): the
 * reply carries the updated values (only the shards changed since the last reply, where may_skip_unchanged;
 * recv_values keeps the values of the others) and, with rows, the rows of the lent batch it holds (Envelope.want). */
static int send_push(tfx_psclient *c, int p, int64_t step, int rows, tfx_err *err) {
  ps_link *l = &c->ps[p];
  Tfx__Tensor *wants[64];
  char *names[64];
  size_t n_want = 0;
  int rc = psclient__ready(c, p, err);
  if (rc || (rows && (rc = psclient__fill_wants(l, wants, names, 64, &n_want, err)))) {
    return rc;
  }
  int n = fill_push(l);
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = step;
  env.tensors = l->ptrs;
  env.n_tensors = (size_t)n;
  env.flag = 1;
  env.want = wants;
  env.n_want = n_want;
  env.target = l->target;
  Tfx__Since since = TFX__SINCE__INIT;
  if (may_skip_unchanged(l)) {
    since.version = (uint64_t)l->since;
    env.since = &since;
  }
  rc = tfx_client_send(l->client, &env, l->payloads, n, err);
  psclient__link_sent(l, rc);
  /* replicas, sync: kept until the backup holds it, copied while the ps works (the frames went in place) */
  return rc || !c->replicas ? rc : psclient__keep(l, step, l->ptrs, l->payloads, n, err);
}

/* Sends one ps its gradients as a push-pull in parts (plan_parts), each part's bytes in place. */
static int send_parts(ps_link *l, int64_t step, tfx_err *err) {
  int rc = TFX_OK;
  for (int j = 0; j < l->n_parts && !rc; j++) {
    int first = l->part_first[j], n = l->part_first[j + 1] - first;
    for (int k = 0; k < n; k++) {
      const part_unit *u = &l->units[first + k];
      const slot *s = &l->slots[u->slot];
      Tfx__Tensor *t = &l->metas[k];
      tfx__tensor__init(t);
      l->unit_len[k] = (int64_t)u->count;
      t->name = (char *)s->key;
      t->shape = &l->unit_len[k];
      t->n_shape = 1;
      t->offset = u->offset;
      t->nbytes = u->count * sizeof(float);
      l->ptrs[k] = t;
      l->payloads[k] = (tfx_payload){s->var->grad + s->offset + u->offset, t->nbytes, 0, NULL, NULL};
    }
    tfx_envelope env;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
    env.step = step;
    env.tensors = l->ptrs;
    env.n_tensors = (size_t)n;
    env.flag = 1;
    env.part = (uint32_t)j;
    env.parts = (uint32_t)l->n_parts;
    rc = j ? tfx_client_send_part(l->client, &env, l->payloads, n, err)
           : tfx_client_send(l->client, &env, l->payloads, n, err);
  }
  return rc;
}

/* Copies the ranges (or whole tensors) of one reply into the variables' own storage, checking each. */
static int take_ranges(tfx_psclient *c, ps_link *l, const tfx_inmsg *m, tfx_err *err) {
  int part = 0;
  for (size_t i = 0; i < m->env->n_tensors; i++) {
    const Tfx__Tensor *t = m->env->tensors[i];
    const void *data;
    size_t size;
    slot *s = psclient__reply_tensor(l, m, i, &part, &data, &size);
    if (!s || size % sizeof(float) || t->offset > s->count || size / sizeof(float) > s->count - t->offset) {
      return tfx_err_set(err, TFX_ESHAPE, "%s: reply range '%.64s' unknown or of %zu bytes at element %llu",
                         tfx_client_endpoint(l->client), t->name, size, (unsigned long long)t->offset);
    }
    memcpy(s->var->storage + s->offset + t->offset, data, size);
    c->bytes += size;
  }
  return TFX_OK;
}

/* Receives the replies to every part sent to ps p, into the variables' storage. */
static int recv_parts(tfx_psclient *c, int p, int64_t *lowest, tfx_err *err) {
  ps_link *l = &c->ps[p];
  int rc = TFX_OK;
  release_held(l);
  for (int j = 0; j < l->n_parts && !rc; j++) {
    tfx_inmsg m;
    rc = tfx_client_recv(l->client, &m, c->timeout_ms, err);
    rc = rc ? rc : take_ranges(c, l, &m, err);
    if (!rc && m.env->step < *lowest) {
      *lowest = m.env->step;
    }
    tfx_inmsg_fini(&m);
  }
  return rc;
}

int tfx_psclient_push_send(tfx_psclient *c, int64_t step, int rows, tfx_err *err) {
  int rc = TFX_OK;
  for (int p = 0; p < c->n_ps && !rc; p++) {
    ps_link *l = &c->ps[p];
    rc = l->client && l->n_parts ? send_parts(l, step, err) : TFX_OK;
  }
  rc = rc ? rc : send_pushes(c, step, rows, err);
  c->sent_step = step; /* sent again as they were after a failover (push_recv) */
  c->sent_rows = rows;
  return rc;
}

/* Counts link l's answer to the push of `step` into the worker's ledger, once per step: a step pushed again after
 * another link failed over (the worker redoes it) was answered here already. */
static void count_acked(ps_link *l, int64_t step) {
  if (!l->not_applied && (!l->acked_any || step > l->acked_step)) {
    l->pushes_acked++;
    l->acked_step = step;
    l->acked_any = 1;
  }
}

int tfx_psclient_push_recv(tfx_psclient *c, int64_t *version, tfx_err *err) {
  int rc = TFX_OK;
  int64_t lowest = INT64_MAX;
  c->bytes = c->row_bytes;
  c->row_bytes = 0;
  request q = {1, c->sent_step, c->sent_rows};
  char left[64] = {0};
  for (int p = 0; p < c->n_ps && !rc; p++) {
    if (c->ps[p].client && c->ps[p].n_parts) {
      rc = recv_parts(c, p, &lowest, err);
    } else if (c->ps[p].client) {
      left[p] = c->replicas && c->n_ps <= 64; /* replicas: in the order replies come (next_reply) */
      rc = left[p] ? TFX_OK : recv_or_failover(c, p, &q, &lowest, err);
    }
    if (c->ps[p].client && !left[p] && !rc) {
      count_acked(&c->ps[p], c->sent_step);
    }
  }
  for (int p; !rc && (p = psclient__next_reply(c, left)) != -1;) {
    if (p == -2 && c->aborted == TFX_PSCLIENT_ABORT_ROLLBACK) {
      return tfx_err_set(err, TFX_ESTATE, "the chief rolled every ps back while this worker waited for their replies");
    }
    if (p == -2) {
      return tfx_err_set(err, TFX_EINTR, "stopped while waiting for the ps' replies");
    }
    left[p] = 0;
    rc = recv_or_failover(c, p, &q, &lowest, err);
    if (!rc) {
      count_acked(&c->ps[p], c->sent_step);
    }
  }
  c->bytes += c->row_bytes; /* the rows of the lent batch that came with the values */
  c->row_bytes = 0;
  if (!rc) {
    *version = lowest == INT64_MAX ? 0 : lowest;
  }
  return rc;
}

void tfx_psclient_set_abort(tfx_psclient *c, int (*abort)(void *ctx), void *ctx) {
  c->abort = abort;
  c->abort_ctx = ctx;
}

void tfx_psclient_set_replicas(tfx_psclient *c, int on) {
  c->replicas = on && c->n_ps >= 2;
  for (int p = 0; p < c->n_ps; p++) {
    c->ps[p].target = c->replicas ? p + 1 : 0;
    c->ps[p].seen = c->ps[p].client ? tfx_client_disconnects(c->ps[p].client) : 0;
  }
}

int tfx_psclient_route(tfx_psclient *c, int p, int at, tfx_err *err) {
  if (p < 0 || p >= c->n_ps || at < 0 || at >= c->n_ps || !c->ps[p].client || c->ps[p].at == at) {
    return TFX_OK;
  }
  return psclient__relink(c, p, at, err);
}

int tfx_psclient_push_pull(tfx_psclient *c, int64_t step, int64_t *version, tfx_err *err) {
  int rc = tfx_psclient_push_send(c, step, 0, err);
  return rc ? rc : tfx_psclient_push_recv(c, version, err);
}

int tfx_psclient_parts(const tfx_psclient *c, int ps) {
  return ps >= 0 && ps < c->n_ps ? c->ps[ps].n_parts : 0;
}

uint64_t tfx_psclient_pushes_acked(const tfx_psclient *c, int instance) {
  return instance >= 0 && instance < c->n_ps ? c->ps[instance].pushes_acked : 0;
}

uint64_t tfx_psclient_bytes(const tfx_psclient *c) {
  return c->bytes;
}
