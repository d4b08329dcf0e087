/* A backup's log of forwarded sync steps (cluster.replicas 1, #27). The backup acknowledges a step on receipt and
 * keeps its message; for an instance of dense shards only, the primary sends a snapshot of its values and optimizer
 * slots every ps__log_steps steps, which replaces the log, so the backup applies no step at all while its primary
 * lives (the snapshot costs a fraction of the updates it replaces). Before anything but a status or the next step
 * reaches the backup (a promotion, a pull, a checkpoint), it applies the log in order, with the code the primary
 * ran: the same bits. An instance with a lazy table keeps one step, applied once the own replies went. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"

/* The log's bound: the summed steps it may hold, in bytes and in steps. */
#define PS_LOG_BYTES ((size_t)64 << 20)
#define PS_LOG_MAX 32

int ps__log_steps(const ps_state *p) {
  size_t dense = 0;
  for (int i = 0; i < p->n_shards; i++) {
    if (p->shards[i].table) {
      return 0;
    }
    dense += p->shards[i].count * sizeof(float);
  }
  size_t k = dense ? PS_LOG_BYTES / dense : PS_LOG_MAX;
  k = k < PS_LOG_MAX ? k : PS_LOG_MAX;
  return k < 4 ? 0 : (int)k;
}

int ps__log_pending(const ps_state *p) {
  return p ? p->n_log : 0;
}

void ps__log_apply(ps_state *p, int keep) {
  int n = 0;
  for (; p && p->n_log - n > keep; n++) {
    tfx_inmsg *m = &p->log[n];
    tfx_err err;
    tfx_err_clear(&err);
    if (ps__push(p, m, &err)) {
      tfx_log(TFX_LOG_ERROR, "PS-BACKUP-STEP", "backup of ps instance %d: step %lld not applied: %s", p->index,
              (long long)m->env->step, err.msg);
    }
    tfx_inmsg_fini(m);
  }
  if (n) {
    memmove(p->log, p->log + n, sizeof *p->log * (size_t)(p->n_log - n));
    p->n_log -= n;
  }
}

void ps__log_trim(ps_state *p) {
  if (!p || !p->n_log) {
    return;
  }
  int k = ps__log_steps(p);
  ps__log_apply(p, k ? k + 2 : 0);
}

void ps__log_free(ps_state *p) {
  for (int i = 0; i < p->n_log; i++) {
    tfx_inmsg_fini(&p->log[i]);
  }
  free(p->log);
  p->log = NULL;
  p->n_log = p->cap_log = 0;
}

void ps__log_hold(ps_state *p, tfx_inmsg *m) {
  int k = ps__log_steps(p), cap = k ? k + 2 : 1;
  if (p->n_log >= cap) {
    ps__log_apply(p, cap - 1);
  }
  if (p->n_log == p->cap_log) {
    tfx_inmsg *log = realloc(p->log, sizeof *log * (size_t)(cap + 1));
    if (!log) {
      ps__log_apply(p, 0);
      tfx_err err;
      tfx_err_clear(&err);
      ps__push(p, m, &err); /* out of memory for the log: applied now */
      return;
    }
    p->log = log;
    p->cap_log = cap + 1;
  }
  tfx_inmsg *slot = &p->log[p->n_log++];
  memset(slot, 0, sizeof *slot);
  slot->env = m->env;
  slot->parts = m->parts;
  slot->n_parts = m->n_parts;
  m->env = NULL; /* moved: the caller's fini closes only the identity */
  m->parts = NULL;
  m->n_parts = 0;
}

/* Checks a snapshot's tensor i: a shard of this backup, an offset naming the values (0) or a slot (1, 2), the size
 * of the shard's values. */
static int snapshot_check(ps_state *p, const tfx_inmsg *m, size_t i, shard **s, tfx_err *err) {
  const Tfx__Tensor *t = m->env->tensors[i];
  size_t size = 0;
  tfx_inmsg_part(m, (int)i, &size);
  *s = ps__find(p, t->name);
  if (!*s || (*s)->table || t->offset > (uint64_t)tfx_optim_slots(&p->opt) || t->nbytes != (*s)->count * 4 ||
      size != t->nbytes) {
    return tfx_err_set(err, TFX_ESTATE,
                       "snapshot of ps instance %d: tensor '%.64s' (part %llu, %llu bytes, frame of %zu) does not fit "
                       "this backup",
                       p->index, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes, size);
  }
  return TFX_OK;
}

/* A full snapshot's worker state: each worker's last applied push (async dedup) and clock (ssp), as stats
 * "last.W" and "clock.W". */
static void workers_take(ps_state *p, const tfx_envelope *e) {
  for (size_t i = 0; i < e->n_stats; i++) {
    const char *k = e->stats[i]->key ? e->stats[i]->key : "";
    int w = atoi(strchr(k, '.') ? strchr(k, '.') + 1 : "-1");
    if (w >= 0 && w < PS_MAX_WORKERS && !strncmp(k, "last.", 5)) {
      p->last_push[w] = (int64_t)e->stats[i]->value;
    } else if (w >= 0 && w < PS_MAX_WORKERS && !strncmp(k, "clock.", 6)) {
      p->clock[w] = (int64_t)e->stats[i]->value;
    }
  }
}

int ps__log_snapshot(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  shard *s = NULL;
  int full = (e->flag & PS_FLAG_FULL) != 0;
  int rc = full || e->step == p->version + p->n_log
               ? TFX_OK
               : tfx_err_set(err, TFX_ESTATE, "snapshot of ps instance %d at step %lld: the backup is at step %lld",
                             p->index, (long long)e->step, (long long)(p->version + p->n_log));
  for (size_t i = 0; !rc && i < e->n_tensors; i++) {
    rc = snapshot_check(p, m, i, &s, err);
  }
  for (size_t i = 0; !rc && i < e->n_tensors; i++) {
    const Tfx__Tensor *t = e->tensors[i];
    size_t size;
    const void *data = tfx_inmsg_part(m, (int)i, &size);
    snapshot_check(p, m, i, &s, err);
    if (t->offset == 0 && ps__own_value(p, s)) {
      rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
      break;
    }
    memcpy(t->offset ? s->slots[t->offset - 1] : s->value->data, data, size);
    s->assigned = s->trainable ? s->assigned : (int)t->version;
    s->changed = e->step;
  }
  if (rc) {
    return rc == TFX_ENOMEM ? TFX_ESTATE : rc; /* the primary then serves unreplicated */
  }
  for (int i = 0; i < p->n_log; i++) {
    tfx_inmsg_fini(&p->log[i]); /* every step the snapshot holds */
  }
  p->n_log = 0;
  p->version = e->step;
  if (full) {
    workers_take(p, e);
  }
  return TFX_OK;
}

int ps__log_rows(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  for (size_t i = 0; i < e->n_tensors; i++) {
    const Tfx__Tensor *t = e->tensors[i];
    size_t size = 0;
    const float *data = tfx_inmsg_part(m, (int)i, &size);
    shard *s = ps__find(p, t->name);
    size_t width = s && s->table ? tfx_rowtable_row_floats(s->table) : 0;
    if (!width || size != t->n_rows * width * sizeof(float) || size != t->nbytes) {
      return tfx_err_set(err, TFX_ESTATE, "rows of ps instance %d: tensor '%.64s' does not fit this backup", p->index,
                         t->name);
    }
    float *row = malloc(width * sizeof(float) + 1); /* the frame may not be aligned */
    int rc = row ? TFX_OK : TFX_ENOMEM;
    for (size_t k = 0; !rc && k < t->n_rows; k++) {
      memcpy(row, (const char *)data + k * width * sizeof(float), width * sizeof(float));
      rc = tfx_rowtable_put_at(s->table, t->rows[k], row, e->step > 0 ? e->step - 1 : 0, err);
    }
    free(row);
    if (rc) {
      return tfx_err_set(err, TFX_ESTATE, "rows of ps instance %d: '%.64s' not stored", p->index, t->name);
    }
    s->changed = e->step;
  }
  return TFX_OK;
}

/* Adds the values (slot 0) or slot k of shard s to a snapshot: tensor n of metas and pl. */
static void snapshot_add(Tfx__Tensor *meta, int64_t *shape, tfx_payload *pl, const shard *s, int k) {
  tfx__tensor__init(meta);
  meta->name = (char *)s->key;
  shape[0] = (int64_t)s->count;
  meta->shape = shape;
  meta->n_shape = 1;
  meta->nbytes = s->count * sizeof(float);
  meta->offset = (uint64_t)k;
  meta->version = (uint64_t)s->assigned;
  *pl = (tfx_payload){k ? s->slots[k - 1] : s->value->data, meta->nbytes, 1, NULL, NULL};
}

/* Sends the snapshot of every shard (values and slots, copied) at the current version; no acknowledgement. A full
 * one (a new backup) also carries the workers' state (workers_take); *bytes adds the bytes sent. */
static int snapshot_send(ps_state *p, int full, size_t *bytes, tfx_err *err) {
  int slots = tfx_optim_slots(&p->opt);
  size_t n = (size_t)p->n_shards * (size_t)(1 + slots);
  Tfx__Tensor *metas = calloc(n + 1, sizeof *metas), **ptrs = calloc(n + 1, sizeof *ptrs);
  int64_t *shapes = calloc(n + 1, sizeof *shapes);
  tfx_payload *pl = calloc(n + 1, sizeof *pl);
  int rc = metas && ptrs && shapes && pl ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  size_t at = 0;
  for (int i = 0; !rc && i < p->n_shards; i++) {
    for (int k = 0; k <= slots && p->shards[i].count; k++) {
      snapshot_add(&metas[at], &shapes[at], &pl[at], &p->shards[i], k);
      ptrs[at] = &metas[at];
      *bytes += pl[at].size;
      at++;
    }
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.flag = PS_FLAG_FORWARDED | PS_FLAG_SNAPSHOT | (full ? PS_FLAG_FULL : 0);
  char keys[2 * PS_MAX_WORKERS][24];
  Tfx__KeyValue kv[2 * PS_MAX_WORKERS], *kvp[2 * PS_MAX_WORKERS];
  for (int w = 0; full && w < p->n_workers; w++) {
    for (int j = 0; j < 2; j++) {
      int at_kv = 2 * w + j;
      snprintf(keys[at_kv], sizeof keys[at_kv], "%s.%d", j ? "clock" : "last", w);
      tfx__key_value__init(&kv[at_kv]);
      kv[at_kv].key = keys[at_kv];
      kv[at_kv].value = (double)(j ? p->clock[w] : p->last_push[w]);
      kvp[at_kv] = &kv[at_kv];
    }
  }
  env.stats = kvp;
  env.n_stats = full ? 2 * (size_t)p->n_workers : 0;
  env.step = p->version;
  env.target = p->index + 1;
  env.epoch = p->epoch;
  env.tensors = ptrs;
  env.n_tensors = at;
  rc = rc ? rc : tfx_client_send(p->backup, &env, pl, (int)at, err);
  free(metas);
  free(ptrs);
  free(shapes);
  free(pl);
  return rc;
}

void ps__forward_snapshot(ps_state *p) {
  int k = p->backup ? ps__log_steps(p) : 0;
  if (!k || ++p->fwd_steps % k) {
    return;
  }
  tfx_err err;
  size_t bytes = 0;
  if (snapshot_send(p, 0, &bytes, &err)) {
    ps__forward_fail(p, err.msg);
  }
}

/* Gathers rows of a lazy table for one message. */
typedef struct rows_job {
  ps_state *p;
  const shard *s;
  int64_t *ids;
  float *data;
  size_t n, cap, width, *bytes;
  int rc;
  tfx_err *err;
} rows_job;

/* Sends the rows gathered (one message, not answered) and starts the next chunk. */
static int rows_flush(rows_job *j) {
  if (!j->n || j->rc) {
    return j->rc;
  }
  int64_t shape[2] = {j->s->shape[0], (int64_t)j->width};
  Tfx__Tensor meta, *mp = &meta;
  tfx__tensor__init(&meta);
  meta.name = (char *)j->s->key;
  meta.shape = shape;
  meta.n_shape = 2;
  meta.rows = j->ids;
  meta.n_rows = j->n;
  meta.nbytes = j->n * j->width * sizeof(float);
  tfx_payload pl = {j->data, meta.nbytes, 1, NULL, NULL};
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.flag = PS_FLAG_FORWARDED | PS_FLAG_ROWS;
  env.step = j->p->version;
  env.target = j->p->index + 1;
  env.epoch = j->p->epoch;
  env.tensors = &mp;
  env.n_tensors = 1;
  j->rc = tfx_client_send(j->p->backup, &env, &pl, 1, j->err);
  *j->bytes += meta.nbytes;
  j->n = 0;
  return j->rc;
}

static int rows_add(int64_t id, const float *row, void *ctx) {
  rows_job *j = ctx;
  j->ids[j->n] = id;
  memcpy(j->data + j->n * j->width, row, j->width * sizeof(float));
  return ++j->n == j->cap ? rows_flush(j) : 0;
}

/* Sends every row of the lazy tables (values and slots) in chunks of about 4 MiB, in the table's order. */
static int rows_send(ps_state *p, size_t *bytes, tfx_err *err) {
  int rc = TFX_OK;
  for (int i = 0; !rc && i < p->n_shards; i++) {
    const shard *s = &p->shards[i];
    if (!s->table) {
      continue;
    }
    rows_job j = {.p = p, .s = s, .width = tfx_rowtable_row_floats(s->table), .bytes = bytes, .err = err};
    j.cap = ((size_t)4 << 20) / (j.width * sizeof(float)) + 1;
    j.ids = malloc(j.cap * sizeof *j.ids);
    j.data = malloc(j.cap * j.width * sizeof(float));
    rc = j.ids && j.data ? tfx_rowtable_each(s->table, rows_add, &j) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
    rc = rc ? rc : rows_flush(&j);
    free(j.ids);
    free(j.data);
  }
  return rc;
}

int ps__forward_full(ps_state *p, size_t *bytes, tfx_err *err) {
  *bytes = 0;
  int rc = snapshot_send(p, 1, bytes, err);
  return rc ? rc : rows_send(p, bytes, err);
}
