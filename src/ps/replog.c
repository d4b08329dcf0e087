/* A backup's log of forwarded sync steps (cluster.replicas 1, #27). The primary forwards its summed steps in
 * batches of cluster.replica_batch_steps (one message each, repbatch.c); the backup acknowledges a batch on receipt
 * with its version after it and keeps its message; every ps__log_steps steps the primary sends a snapshot (the
 * values and optimizer slots of its dense shards), which replaces the log, so the backup applies no step at all
 * while its primary lives (the snapshot costs a fraction of the updates it replaces). Before anything but a status
 * or the next batch reaches the backup (a promotion, a pull, a checkpoint), it applies the log in order, with the
 * code the primary ran: the same bits. An instance with a lazy table keeps one batch, applied once the own replies
 * went (a copy of the rows touched would cost more, and would not carry a table's sketch, ages or evictions). A
 * snapshot's rows of a lazy table (a tensor with rows) are still taken in: values and slots, by id. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"

int ps__log_pending(const ps_state *p) {
  return p ? p->log_steps : 0;
}

/* The log's bound in messages (each a batch of cluster.replica_batch_steps steps): the steps between snapshots and
 * two batches more, or, without snapshots (k 0), one. */
static int log_cap(const ps_state *p, int k) {
  int batch = p->cfg.replica_batch_steps > 1 ? p->cfg.replica_batch_steps : 1;
  return k ? k / batch + 2 : 1;
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
    p->log_steps -= m->env ? (int)m->env->n_stats : 0;
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
  ps__log_apply(p, k ? log_cap(p, k) : 0);
}

void ps__log_free(ps_state *p) {
  for (int i = 0; i < p->n_log; i++) {
    tfx_inmsg_fini(&p->log[i]);
  }
  free(p->log);
  p->log = NULL;
  p->n_log = p->cap_log = 0;
  p->log_steps = 0;
}

void ps__log_hold(ps_state *p, tfx_inmsg *m) {
  int cap = log_cap(p, ps__log_steps(p));
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
  p->log_steps += (int)m->env->n_stats;
  tfx_inmsg *slot = &p->log[p->n_log++];
  memset(slot, 0, sizeof *slot);
  slot->env = m->env;
  slot->parts = m->parts;
  slot->n_parts = m->n_parts;
  m->env = NULL; /* moved: the caller's fini closes only the identity */
  m->parts = NULL;
  m->n_parts = 0;
}

/* Checks rows tensor i of m (PS_FLAG_ROWS, or a snapshot's rows): a lazy table of this backup, whole rows (values
 * and slots) for the ids listed. */
static int rows_check(ps_state *p, const tfx_inmsg *m, size_t i, shard **s, tfx_err *err) {
  const Tfx__Tensor *t = m->env->tensors[i];
  size_t size = 0;
  tfx_inmsg_part(m, (int)i, &size);
  *s = ps__find(p, t->name);
  size_t width = *s && (*s)->table ? tfx_rowtable_row_floats((*s)->table) : 0;
  if (!width || size != t->n_rows * width * sizeof(float) || size != t->nbytes) {
    return tfx_err_set(err, TFX_ESTATE, "rows of ps instance %d: tensor '%.64s' does not fit this backup", p->index,
                       t->name);
  }
  return TFX_OK;
}

/* Stores rows tensor i of m (checked) whole into its table, as touched at the step before m's. */
static int rows_put(ps_state *p, const tfx_inmsg *m, size_t i, shard *s, tfx_err *err) {
  const Tfx__Tensor *t = m->env->tensors[i];
  size_t size = 0, width = tfx_rowtable_row_floats(s->table);
  const char *data = tfx_inmsg_part(m, (int)i, &size);
  int64_t step = m->env->step > 0 ? m->env->step - 1 : 0;
  int aligned = ((uintptr_t)data & 3) == 0; /* rows are read in place, else copied to `row` first */
  float *row = aligned ? NULL : malloc(width * sizeof(float) + 1);
  int rc = aligned || row ? TFX_OK : TFX_ENOMEM;
  for (size_t k = 0; !rc && k < t->n_rows; k++) {
    const float *at = aligned ? (const float *)data + k * width : row;
    if (!aligned) {
      memcpy(row, data + k * width * sizeof(float), width * sizeof(float));
    }
    rc = tfx_rowtable_put_at(s->table, t->rows[k], at, step, err);
  }
  free(row);
  if (rc) {
    return tfx_err_set(err, TFX_ESTATE, "rows of ps instance %d: '%.64s' not stored", p->index, t->name);
  }
  s->changed = m->env->step;
  return TFX_OK;
}

/* Checks a snapshot's tensor i: rows of a lazy table (rows_check), or a dense shard of this backup with an offset
 * naming the values (0) or a slot (1, 2) and the size of the shard's values. */
static int snapshot_check(ps_state *p, const tfx_inmsg *m, size_t i, shard **s, tfx_err *err) {
  const Tfx__Tensor *t = m->env->tensors[i];
  size_t size = 0;
  tfx_inmsg_part(m, (int)i, &size);
  *s = ps__find(p, t->name);
  if (*s && (*s)->table) {
    return rows_check(p, m, i, s, err);
  }
  if (!*s || t->offset > (uint64_t)tfx_optim_slots(&p->opt) || t->nbytes != (*s)->count * 4 ||
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
  int rc = full || e->step == p->version + p->log_steps
               ? TFX_OK
               : tfx_err_set(err, TFX_ESTATE, "snapshot of ps instance %d at step %lld: the backup is at step %lld",
                             p->index, (long long)e->step, (long long)(p->version + p->log_steps));
  for (size_t i = 0; !rc && i < e->n_tensors; i++) {
    rc = snapshot_check(p, m, i, &s, err);
  }
  for (size_t i = 0; !rc && i < e->n_tensors; i++) {
    const Tfx__Tensor *t = e->tensors[i];
    size_t size;
    const void *data = tfx_inmsg_part(m, (int)i, &size);
    snapshot_check(p, m, i, &s, err);
    if (s->table) {
      rc = rows_put(p, m, i, s, err); /* out of memory part way: the caller marks this copy behind */
      continue;
    }
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
  p->log_steps = 0;
  p->version = e->step;
  if (full) {
    workers_take(p, e);
  }
  return TFX_OK;
}

int ps__log_rows(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  shard *s = NULL;
  int rc = TFX_OK;
  for (size_t i = 0; !rc && i < m->env->n_tensors; i++) {
    rc = rows_check(p, m, i, &s, err);
    rc = rc ? rc : rows_put(p, m, i, s, err);
  }
  return rc;
}
