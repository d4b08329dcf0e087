/* The decisions of the ps that need no socket: its mode, whose request it is, when a pull may be answered. */
#include <string.h>

#include "ps/ps_impl.h"

int ps__is_sync(const ps_state *p) {
  return p->cfg.mode == TFX_MODE_SYNC;
}
int ps__is_ssp(const ps_state *p) {
  return p->cfg.mode == TFX_MODE_SSP;
}
/* Whether a push is one of several messages of one push-pull (its tensors may then be element ranges). */
int ps__is_part(const tfx_envelope *e) {
  return e->parts > 1;
}
/* Whether a push completes a worker's step: a whole push, or the last part of one. */
int ps__completes_step(const tfx_envelope *e) {
  return !ps__is_part(e) || e->part + 1 == e->parts;
}

int64_t ps__min_clock(const ps_state *p) {
  int64_t m = p->clock[0];
  for (int i = 1; i < p->n_workers; i++) {
    m = p->clock[i] < m ? p->clock[i] : m;
  }
  return m;
}

/* The worker index of a request, or -1 for anyone else (the master's evaluation pulls are not clocked). */
int ps__worker_of(const tfx_envelope *e) {
  return e->sender_role == TFX__ROLE__ROLE_WORKER ? e->sender_index : -1;
}

int ps__batch_steps(const ps_state *p) {
  return p->cfg.replica_batch_steps > 1 ? p->cfg.replica_batch_steps : 1;
}

int64_t ps__kept_steps(const ps_state *p) {
  if (ps__async_snaps(p)) { /* a snapshot goes within PS_SNAP_MAX_PUSHES, while the previous one is acknowledged */
    return 2 * (int64_t)PS_SNAP_MAX_PUSHES + 2;
  }
  int64_t k = 2 * (int64_t)ps__batch_steps(p) + 2;
  return ps__ckpt_acks(p) ? k + p->cfg.ckpt_every_steps + p->cfg.ckpt_every_steps / 2 : k;
}

int ps__forward_holds(const ps_state *p) {
  return p->backup && p->version - p->acked >= ps__kept_steps(p);
}

int ps__ledger_counts(const ps_state *p, const tfx_envelope *e, int stale) {
  if (ps__worker_of(e) < 0 || !ps__completes_step(e)) {
    return 0;
  }
  return !stale || p->replicas < p->n_workers || !ps__is_sync(p);
}

int ps__async_snaps(const ps_state *p) {
  return p->cfg.ps_replicas && !ps__is_sync(p);
}

/* The log's bound: the summed steps it may hold, in bytes and in steps. */
#define PS_LOG_BYTES ((size_t)64 << 20)
#define PS_LOG_MAX 32

/* The steps between snapshots: PS_LOG_MAX, or a batch when cluster.replica_batch_steps is larger. */
static size_t log_max(const ps_state *p) {
  return p->cfg.replica_batch_steps > PS_LOG_MAX ? (size_t)p->cfg.replica_batch_steps : PS_LOG_MAX;
}

int ps__log_steps(const ps_state *p) {
  size_t dense = 0;
  for (int i = 0; i < p->n_shards; i++) {
    if (p->shards[i].table) {
      return 0; /* its backup applies the steps (see ps_impl.h) */
    }
    dense += p->shards[i].count * sizeof(float);
  }
  size_t k = dense ? PS_LOG_BYTES / dense : log_max(p);
  k = k < log_max(p) ? k : log_max(p);
  return k < 4 ? 0 : (int)k;
}

/* Whether the workers' kept pushes, resent after a failover, rebuild each sync step bit for bit: every worker in
 * each step, summed in worker order (training.deterministic) or at most two of them (a sum of two is the same
 * either way round). */
static int pushes_rebuild(const ps_state *p) {
  return p && p->backup && ps__is_sync(p) && p->replicas >= p->n_workers && (p->cfg.deterministic || p->n_workers <= 2);
}

int ps__snap_acks(const ps_state *p) {
  if (!pushes_rebuild(p) || p->cfg.replica_batch_steps <= 1 + tfx_optim_slots(&p->opt)) {
    return 0; /* a replay could differ, or a snapshot would cost more bytes than the summed steps it stands for */
  }
  return ps__log_steps(p) > 0; /* dense shards only, small enough that a copy of them is cheap (replica.c) */
}

int ps__tables_plain(const ps_state *p) {
  int tables = 0;
  if (p->cfg.ckpt_fp16 || !ps__is_sync(p) || ps__log_steps(p)) {
    return 0;
  }
  for (int i = 0; i < p->n_shards; i++) {
    const shard *s = &p->shards[i];
    const tfx_layer_spec *l = s->table ? tfx_config_table_layer(&p->cfg, s->var) : NULL;
    if (l && (l->max_rows || l->ttl_steps || l->admit_min_count > 1 ||
              (l->admit_probability > 0 && l->admit_probability < 1))) {
      return 0; /* its sketch, ages or evictions: not restored bit for bit */
    }
    tables += s->table != NULL;
  }
  return tables > 0;
}

int ps__ckpt_acks(const ps_state *p) {
  return pushes_rebuild(p) && !p->ckpt_acks_off && p->cfg.ckpt_every_steps > 0 &&
         p->cfg.ckpt_every_steps <= TFX_REPLICA_CKPT_STEPS_MAX && ps__tables_plain(p);
}

Tfx__Since *ps__acked(const ps_state *p, int worker, Tfx__Since *buf) {
  if (!p->cfg.ps_replicas || (!ps__is_sync(p) && (worker < 0 || worker >= PS_MAX_WORKERS))) {
    return NULL;
  }
  tfx__since__init(buf);
  if (ps__is_sync(p)) {
    buf->version = (uint64_t)(p->backup ? p->acked : p->version);
  } else {
    int64_t last = p->backup ? p->acked_last[worker] : p->last_push[worker];
    buf->version = (uint64_t)(last + 1);
  }
  return buf;
}

int ps__pull_ready(const ps_state *p, int64_t min_version, int worker) {
  if (p->version < min_version || ps__forward_holds(p)) { /* replicas: the backup lags too far (flow control) */
    return 0;
  }
  if (!ps__is_ssp(p) || worker < 0 || worker >= p->n_workers) {
    return 1;
  }
  return p->clock[worker] <= ps__min_clock(p) + p->cfg.staleness;
}

/* Whether worker w already counts in the current sync step. */
int ps__sync_contributed(const ps_state *p, int w) {
  return w >= 0 && w < PS_MAX_WORKERS && p->contributed[w];
}

void ps__sync_start(ps_state *p, int n_workers) {
  p->n_workers = n_workers > 0 && n_workers <= PS_MAX_WORKERS ? n_workers : 1;
  p->replicas = p->cfg.replicas_to_aggregate > 0 ? p->cfg.replicas_to_aggregate : p->n_workers;
  p->n_acc = 0;
  p->n_grads = 0;
  memset(p->contributed, 0, sizeof p->contributed);
  for (int i = 0; i < PS_MAX_WORKERS; i++) {
    p->clock[i] = p->version;
    p->last_push[i] = -1;
  }
}

ps_sync_verdict ps__sync_verdict(const ps_state *p, int64_t step, int w) {
  if (step > p->version) {
    return PS_SYNC_VERDICT_AHEAD;
  }
  if (step < p->version || ps__sync_contributed(p, w)) {
    return PS_SYNC_VERDICT_STALE;
  }
  return PS_SYNC_VERDICT_FRESH;
}

int ps__sync_hold(const ps_state *p, const tfx_envelope *e) {
  int w = ps__worker_of(e);
  if (!p->cfg.deterministic || !ps__is_sync(p) || e->type != TFX__MSG_TYPE__MSG_PUSH ||
      e->type == TFX__MSG_TYPE__MSG_REPLICATE || p->replicas < p->n_workers || w <= 0 || w >= p->n_workers ||
      ps__sync_verdict(p, e->step, w) != PS_SYNC_VERDICT_FRESH) {
    return 0;
  }
  for (int v = 0; v < w; v++) {
    if (!p->contributed[v]) {
      return 1;
    }
  }
  return 0;
}

int ps__sync_arrive(ps_state *p, int w) {
  if (w >= 0 && w < PS_MAX_WORKERS) {
    p->contributed[w] = 1;
  }
  return ++p->n_acc >= p->replicas;
}

float ps__sync_scale(int n_grads) {
  return n_grads ? 1.0f / (float)n_grads : 0.0f;
}

void ps__sync_end_step(ps_state *p) {
  if (ps__is_copy(p)) {
    p->stats.ledger += (uint64_t)p->n_grads; /* a backup replaying its primary's summed steps (its pushes) */
  }
  p->version++;
  p->stats.applied++;
  p->n_acc = 0;
  p->n_grads = 0;
  memset(p->contributed, 0, sizeof p->contributed);
}

int ps__async_duplicate(const ps_state *p, const tfx_envelope *e) {
  int w = ps__worker_of(e);
  return p->cfg.ps_replicas && !ps__is_sync(p) && !ps__is_part(e) && w >= 0 && w < PS_MAX_WORKERS &&
         e->step <= p->last_push[w];
}

void ps__async_applied(ps_state *p, const tfx_envelope *e) {
  int w = ps__worker_of(e);
  if (w >= 0 && w < PS_MAX_WORKERS && !ps__is_part(e)) {
    p->last_push[w] = e->step;
  }
}

void ps__clock_tick(ps_state *p, int w) {
  if (w >= 0 && w < PS_MAX_WORKERS) {
    p->clock[w]++;
  }
}

int ps__park_capacity(int cap) {
  int grown = cap * 2 + 8;
  return grown > PS_MAX_PARKED ? 0 : grown;
}

int64_t ps__push_pull_version(const ps_state *p, const tfx_envelope *e) {
  return ps__is_sync(p) ? e->step + 1 : 0;
}

int ps__ckpt_due(const ps_state *p) {
  return p->version == p->ckpt_step || (!ps__is_sync(p) && p->version > p->ckpt_step);
}

/* Whether an async push arrives after the run's last step (max_steps): nothing is applied, so two workers
 * finishing together do not take the ps one step past the end; the reply still carries the values. */
int ps__past_the_end(const ps_state *p, const tfx_envelope *e) {
  return !ps__is_sync(p) && !ps__is_part(e) && p->cfg.max_steps > 0 && p->version >= p->cfg.max_steps;
}
