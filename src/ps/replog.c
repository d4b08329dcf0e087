/* A backup's log of forwarded sync steps (cluster.replicas 1). The primary forwards its summed steps in
 * batches of cluster.replica_batch_steps (one message each, repbatch.c); the backup acknowledges a batch on receipt
 * with its version after it and keeps its message; every ps__log_steps steps the primary sends a snapshot (the
 * values and optimizer slots of its dense shards), which replaces the log, so the backup applies no step at all
 * while its primary lives (the snapshot costs a fraction of the updates it replaces). Before anything but a status
 * or the next batch reaches the backup (a promotion, a pull, a checkpoint), it applies the log in order, with the
 * code the primary ran: the same bits. A snapshot's rows of a lazy table (a tensor with rows) are still taken in:
 * values and slots, by id.
 *
 * An instance with a lazy table has no snapshots (a copy of the rows touched would cost more). With plain tables
 * (no max_rows, ttl_steps or admission) and checkpoint.fp16 off, a checkpoint restores the primary's state bit for
 * bit. Where the workers' pushes rebuild each step too (ps__ckpt_acks), no step is forwarded at all: the news of a
 * checkpoint (REPLICATE_CHECKPOINT, acked) makes it the backup's state (stale, loaded to serve) and is answered,
 * and after a promotion the workers resend what they kept since. Otherwise the backup keeps the log until a
 * checkpoint holds it: the batches as received (no copy, no apply), at most
 * TFX_REPLICA_LOG_BYTES; when the primary's files of checkpoint c are complete it says so (REPLICATE_CHECKPOINT) and the
 * backup drops the steps below c (its state is then checkpoint c and the log: "stale" in memory). To serve (a
 * promotion), or past the bound, it loads instance k's shard of checkpoint c with the rollback's code (restore.c)
 * and replays the log with the primary's code. Other lazy instances keep one batch, applied once the own replies
 * went (a table's sketch, ages and evictions are state a checkpoint of rows does not carry bit for bit). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"
#include "store/ckpt.h"

int ps__log_pending(const ps_state *p) {
  return p ? p->log_steps : 0;
}

int ps__log_until_ckpt(ps_state *p) {
  if (p && !p->log_mode) {
    p->log_mode = ps__tables_plain(p) ? 1 : 2;
  }
  return p && p->log_mode == 1;
}

/* The log's bound in messages (each a batch of cluster.replica_batch_steps steps): the steps between snapshots and
 * two batches more, or, without snapshots (k 0), one; a log kept until a checkpoint is bounded by bytes. */
static int log_cap(ps_state *p, int k) {
  if (ps__log_until_ckpt(p)) {
    return INT32_MAX; /* bounded by bytes instead (ps__log_trim) */
  }
  return k ? k / ps__batch_steps(p) + 2 : 1;
}

/* The bytes of a held message's frames. */
static size_t msg_bytes(const tfx_inmsg *m) {
  size_t all = 0;
  for (int i = 0; i < m->n_parts; i++) {
    all += zmq_msg_size(&m->parts[i]);
  }
  return all;
}

/* Drops the oldest n held messages unapplied. */
static void log_drop(ps_state *p, int n) {
  for (int i = 0; i < n; i++) {
    p->log_steps -= p->log[i].env ? (int)p->log[i].env->n_stats : 0;
    p->log_bytes -= msg_bytes(&p->log[i]);
    tfx_inmsg_fini(&p->log[i]);
  }
  if (n) {
    memmove(p->log, p->log + n, sizeof *p->log * (size_t)(p->n_log - n));
    p->n_log -= n;
  }
}

/* The path of instance p's shard of the checkpoint of step in this ps's run directory. */
static void ckpt_shard_path(const ps_state *p, int64_t step, char *path, size_t n) {
  char dir[1100];
  tfx_ckpt_dir(p->node->run_dir, step, dir, sizeof dir);
  tfx_ckpt_part_path(path, n, dir, p->index, TFX_CKPT_SHARD);
}

/* A stale state (a checkpoint and the log): loads the checkpoint of its version, as a rollback does. On failure
 * the copy may not be promoted (behind) and its log is dropped (it cannot be replayed). */
static int log_base(ps_state *p) {
  char path[1200];
  tfx_err err;
  tfx_err_clear(&err);
  ckpt_shard_path(p, p->version, path, sizeof path);
  int64_t at = p->version;
  int rc = TFX_OK;
  for (int i = 0; !rc && i < p->n_shards; i++) {
    rc = !p->shards[i].table && ps__own_value(p, &p->shards[i]) ? tfx_err_set(&err, TFX_ENOMEM, "out of memory") : 0;
  }
  rc = rc ? rc : ps__restore_shards(p, path, &err);
  p->log_stale = 0;
  if (rc || p->version != at) {
    ps__fall_behind(p, TFX_LOG_ERROR, "PS-BACKUP-BASE",
                    "backup of ps instance %d: checkpoint of step %lld not loaded (%s): this copy may not be promoted",
                    p->index, (long long)at, rc ? err.msg : "another step");
    p->version = at + p->log_steps;
    log_drop(p, p->n_log);
    return -1;
  }
  return 0;
}

/* Applies the oldest held messages until keep are left. */
static void log_run(ps_state *p, int keep) {
  int n = 0;
  for (; p->n_log - n > keep; n++) {
    tfx_inmsg *m = &p->log[n];
    tfx_err err;
    tfx_err_clear(&err);
    if (ps__push(p, m, &err)) {
      tfx_log(TFX_LOG_ERROR, "PS-BACKUP-STEP", "backup of ps instance %d: step %lld not applied: %s", p->index,
              (long long)m->env->step, err.msg);
    }
  }
  log_drop(p, n);
}

void ps__log_apply(ps_state *p, int keep) {
  if (!p || (p->n_log <= keep && (keep || !p->log_stale))) {
    return; /* nothing to apply, unless a state to serve (keep 0) is a checkpoint still to load */
  }
  int stale = p->log_stale, n = p->n_log - keep;
  int64_t from = p->version, t0 = tfx_now_ms();
  size_t bytes = p->log_bytes;
  if (stale && log_base(p)) {
    return;
  }
  log_run(p, keep);
  if (stale || (!keep && ps__log_until_ckpt(p))) {
    char base[64];
    snprintf(base, sizeof base, stale ? "checkpoint step %lld loaded" : "no checkpoint (initial values)",
             (long long)from);
    if (!n) {
      tfx_log(TFX_LOG_INFO, "PS-BACKUP-REPLAY", "backup of ps instance %d: %s, no step after it in the log (%lld ms)",
              p->index, base, (long long)(tfx_now_ms() - t0));
      return;
    }
    tfx_log(TFX_LOG_INFO, "PS-BACKUP-REPLAY",
            "backup of ps instance %d: %s, steps %lld..%lld replayed from the log (%d messages, %.1f MiB) in %lld ms",
            p->index, base, (long long)from, (long long)p->version - 1, n, (double)(bytes - p->log_bytes) / 1048576.0,
            (long long)(tfx_now_ms() - t0));
  }
}

void ps__log_trim(ps_state *p) {
  if (!p || !p->n_log) {
    return;
  }
  if (ps__log_until_ckpt(p)) {
    int keep = p->n_log;
    for (size_t over = p->log_bytes; keep > 0 && over > TFX_REPLICA_LOG_BYTES; keep--) {
      over -= msg_bytes(&p->log[p->n_log - keep]);
    }
    ps__log_apply(p, keep);
    return;
  }
  int k = ps__log_steps(p);
  ps__log_apply(p, k ? log_cap(p, k) : 0);
}

int ps__log_checkpoint(ps_state *p, int64_t step, int acked) {
  char path[1200];
  int64_t at = p->version;
  int n = 0;
  for (; n < p->n_log && at < step; n++) {
    at += (int64_t)p->log[n].env->n_stats;
  }
  int ahead = acked && !p->n_log && step > p->version && p->state != PS_BEHIND; /* ps__ckpt_acks: no step is forwarded */
  if (!ps__log_until_ckpt(p) || (!ahead && (!n || at != step))) {
    return 0; /* nothing to drop, or not at a batch's end (a batch is replayed whole) */
  }
  ckpt_shard_path(p, step, path, sizeof path);
  if (access(path, R_OK) != 0) {
    return 0; /* not in this ps's run directory: the log is kept (and applied past its bound) */
  }
  log_drop(p, n);
  p->version = step;
  p->log_stale = 1;
  return n;
}

void ps__log_free(ps_state *p) {
  for (int i = 0; i < p->n_log; i++) {
    tfx_inmsg_fini(&p->log[i]);
  }
  free(p->log);
  p->log = NULL;
  p->n_log = p->cap_log = 0;
  p->log_steps = 0;
  p->log_bytes = 0;
  p->log_stale = 0;
  p->log_mode = 0; /* a new plan may follow */
}

void ps__log_hold(ps_state *p, tfx_inmsg *m) {
  int cap = log_cap(p, ps__log_steps(p));
  if (p->n_log >= cap) {
    ps__log_apply(p, cap - 1);
  }
  if (p->n_log == p->cap_log) {
    int more = p->cap_log * 2 + 4;
    tfx_inmsg *log = realloc(p->log, sizeof *log * (size_t)more);
    if (!log) {
      ps__log_apply(p, 0);
      tfx_err err;
      tfx_err_clear(&err);
      ps__push(p, m, &err); /* out of memory for the log: applied now */
      return;
    }
    p->log = log;
    p->cap_log = more;
  }
  p->log_steps += (int)m->env->n_stats;
  p->log_bytes += msg_bytes(m);
  tfx_inmsg *slot = &p->log[p->n_log++];
  memset(slot, 0, sizeof *slot);
  slot->env = m->env;
  slot->parts = m->parts;
  slot->n_parts = m->n_parts;
  m->env = NULL; /* moved: the caller's fini closes only the identity */
  m->parts = NULL;
  m->n_parts = 0;
}

/* Checks rows tensor i of m (REPLICATE_ROWS, or a snapshot's rows): a lazy table of this backup, whole rows (values
 * and slots) for the ids listed, and each row's touch step (or none). */
static int rows_check(ps_state *p, const tfx_inmsg *m, size_t i, shard **s, tfx_err *err) {
  const Tfx__Tensor *t = m->env->tensors[i];
  size_t size = 0;
  tfx_inmsg_part(m, (int)i, &size);
  *s = ps__find(p, t->name);
  size_t width = *s && (*s)->table ? tfx_rowtable_row_floats((*s)->table) : 0;
  if (!width || size != t->n_rows * width * sizeof(float) || size != t->nbytes ||
      (t->n_touched && t->n_touched != t->n_rows)) {
    return tfx_err_set(err, TFX_ESTATE, "rows of ps instance %d: tensor '%.64s' does not fit this backup", p->index,
                       t->name);
  }
  return TFX_OK;
}

/* Stores rows tensor i of m (checked) whole into its table, each as touched when its primary last touched it (or,
 * without those steps, at the step before m's), and the primary's last age scan. */
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
    rc = tfx_rowtable_put_at(s->table, t->rows[k], at, t->n_touched == t->n_rows ? t->touched[k] : step, err);
  }
  free(row);
  tfx_rowtable_set_scanned(s->table, t->ttl_scanned); /* the primary's last age scan: rows expire as there */
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

/* A snapshot's worker state: each worker's last applied push (async dedup) and clock (ssp), as stats "last.W" and
 * "clock.W", and the primary's ledger ("ledger"). */
static void workers_take(ps_state *p, const tfx_envelope *e) {
  for (size_t i = 0; i < e->n_stats; i++) {
    const char *k = e->stats[i]->key ? e->stats[i]->key : "";
    int w = atoi(strchr(k, '.') ? strchr(k, '.') + 1 : "-1");
    if (!strcmp(k, "ledger")) {
      p->stats.ledger = (uint64_t)e->stats[i]->value;
    } else if (w >= 0 && w < PS_MAX_WORKERS && !strncmp(k, "last.", 5)) {
      p->last_push[w] = (int64_t)e->stats[i]->value;
    } else if (w >= 0 && w < PS_MAX_WORKERS && !strncmp(k, "clock.", 6)) {
      p->clock[w] = (int64_t)e->stats[i]->value;
    }
  }
}

int ps__log_snapshot(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  shard *s = NULL;
  int full = e->replicate && e->replicate->full;
  if (!full && p->log_stale && log_base(p)) { /* rows since its checkpoint go onto that checkpoint, loaded first */
    return tfx_err_set(err, TFX_ESTATE, "snapshot of ps instance %d at step %lld: the checkpoint under it did not load",
                       p->index, (long long)e->step);
  }
  int64_t at = p->version + p->log_steps;
  int rc = full || e->step == at || (e->replicate && e->replicate->acked && e->step >= at && !p->n_log)
               ? TFX_OK
               : tfx_err_set(err, TFX_ESTATE, "snapshot of ps instance %d at step %lld: the backup is at step %lld",
                             p->index, (long long)e->step, (long long)at);
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
  log_drop(p, p->n_log); /* every step the snapshot holds */
  p->log_stale = 0;
  p->version = e->step;
  workers_take(p, e);
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
