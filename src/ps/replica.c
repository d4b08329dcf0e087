/* Replicated shards (cluster.replicas 1): every ps holds its own instance of the plan and a mirror of the
 * previous ps's (ps k backs up instance k - 1 on the ring). In async and ssp mode a primary sends its backup an
 * acknowledged snapshot every cluster.replica_batch_steps pushes (ps__async_snapshot): no push waits for it. In sync
 * mode the summed steps go in batches (repbatch.c), or snapshots, or the news of checkpoints. In every mode the
 * workers keep their pushes until a reply says the backup holds them, and resend them to a promoted backup. The master promotes a mirror when its primary is lost
 * (MSG_PROMOTE with a new plan epoch); a forward of an older epoch is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"

int ps__route(ps_state *own, const tfx_envelope *e, ps_state **out, tfx_err *err) {
  int want = e->target - 1;
  *out = NULL;
  if (e->target <= 0 || want == own->index) {
    *out = own;
    return TFX_OK;
  }
  if (own->mirror && own->mirror->index == want) {
    *out = own->mirror;
    return TFX_OK;
  }
  if (e->type != TFX__MSG_TYPE__MSG_INIT || want < 0 || want >= tfx_cluster_count(own->node->cluster, TFX_ROLE_PS)) {
    return tfx_err_set(err, TFX_ESTATE, "ps %d holds no copy of ps instance %d", own->index, want);
  }
  return TFX_OK; /* an INIT for a new mirror: the caller makes it */
}

/* Connects p to its backup on ps `at`. */
static int backup_connect(ps_state *p, int at, tfx_err *err) {
  char ep[320];
  int rc = tfx_address_endpoint(tfx_cluster_address(p->node->cluster, TFX_ROLE_PS, at), 0, NULL, ep, sizeof ep, err);
  if (!rc) {
    rc = tfx_client_create(ep, &p->backup, err);
  }
  if (!rc) {
    p->backup_seen = tfx_client_disconnects(p->backup);
    tfx_log(TFX_LOG_INFO, "PS-REPLICA", "ps instance %d: backed up by ps %d (plan epoch %llu)", p->index, at,
            (unsigned long long)p->epoch);
  }
  return rc;
}

int ps__backup_open(ps_state *p, tfx_err *err) {
  int n = tfx_cluster_count(p->node->cluster, TFX_ROLE_PS);
  ps__backup_close(p);
  if (!p->cfg.ps_replicas || n < 2 || p->backup_of) {
    return TFX_OK;
  }
  p->acked = p->snap_sent = p->version;
  memcpy(p->acked_last, p->last_push, sizeof p->acked_last); /* the backup starts where the primary does */
  p->ckpt_told = 0;
  p->ckpt_acks_off = 0;
  return backup_connect(p, (p->index + 1) % n, err);
}

int ps__rereplicate(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  int n = tfx_cluster_count(p->node->cluster, TFX_ROLE_PS);
  int to = e->rereplicate ? e->rereplicate->to_ps : -1;
  if (!ps__serves(p) || to < 0 || to >= n || to == p->node->index) {
    return tfx_err_set(err, TFX_ESTATE, "re-replicate ps instance %d on ps %d: ps %d does not serve it, or that is "
                       "no other ps", p->index, to, p->node->index);
  }
  p->epoch = e->epoch > p->epoch ? e->epoch : p->epoch;
  ps__backup_close(p);
  p->fwd_pending = 0;
  size_t bytes = 0;
  int64_t t0 = tfx_now_ms();
  int rc = backup_connect(p, to, err);
  rc = rc ? rc : ps__forward_full(p, &bytes, err);
  if (rc) {
    ps__forward_fail(p, err->msg);
    return rc;
  }
  p->stats.replica_bytes += bytes;
  p->fwd_steps = 0;
  p->acked = p->snap_sent = p->version;
  memcpy(p->acked_last, p->last_push, sizeof p->acked_last); /* streamed whole, the workers' state too */
  p->ckpt_acks_off = 0; /* a new backup: it may read the checkpoints */
  ps__set_state(p, PS_SERVING, TFX_LOG_WARN, "PS-REREPLICATED",
                "ps instance %d: ps %d is its backup again: %zu bytes streamed at step %lld in %lld ms", p->index,
                to, bytes, (long long)p->version, (long long)(tfx_now_ms() - t0));
  tfx_envelope env;
  tfx_reply_init(&env, m);
  env.step = p->version;
  env.epoch = p->epoch;
  return tfx_wire_send(p->sock, &m->identity, &env, NULL, 0, err);
}

int ps__gate(ps_state *p, const tfx_envelope *e, tfx_err *err) {
  int forwarded = e->type == TFX__MSG_TYPE__MSG_REPLICATE;
  if (forwarded && (!ps__is_copy(p) || e->epoch < p->epoch)) {
    p->stats.stale_epoch++;
    return tfx_err_set(err, TFX_ESTATE,
                       "replication of plan epoch %llu refused: ps instance %d here is %s at epoch %llu",
                       (unsigned long long)e->epoch, p->index, p->backup_of ? "promoted" : "a primary",
                       (unsigned long long)p->epoch);
  }
  if (!forwarded && ps__is_copy(p) && e->sender_role != TFX__ROLE__ROLE_MASTER) {
    return tfx_err_set(err, TFX_ESTATE, "ps %d holds ps instance %d as its backup: not promoted (yet)",
                       p->node->index, p->index);
  }
  return TFX_OK;
}

/* ps__ckpt_acks no longer holds for p (why): its backup is sent the whole state now, then the summed steps. */
static void ckpt_acks_end(ps_state *p, const char *why) {
  size_t bytes = 0;
  tfx_err err;
  p->ckpt_acks_off = 1;
  p->ckpt_told = 0;
  if (ps__forward_full(p, &bytes, &err)) {
    ps__forward_fail(p, err.msg);
    return;
  }
  p->stats.replica_bytes += bytes;
  p->acked = p->snap_sent = p->version;
  tfx_log(TFX_LOG_WARN, "PS-REPLICA-STEPS",
          "ps instance %d: its backup is no longer kept by checkpoints (%s): %zu bytes of state sent at step %lld, "
          "the summed steps follow",
          p->index, why, bytes, (long long)p->version);
}

void ps__forward_acks(ps_state *p) {
  void *sock = p->backup ? tfx_client_socket(p->backup) : NULL;
  zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
  while (p->fwd_pending > 0 && p->backup && zmq_poll(&item, 1, 0) > 0) {
    tfx_inmsg r;
    tfx_err ferr;
    int rc = tfx_wire_recv(sock, 0, &r, &ferr);
    if (!rc && r.env->code == TFX_ESTATE) {
      rc = tfx_err_set(&ferr, TFX_ESTATE, "%s", r.env->error ? r.env->error : "refused");
    }
    int64_t holds = rc ? 0 : r.env->step; /* sync: the backup's version, every step below it held */
    tfx_inmsg_fini(&r);
    if (rc) {
      ps__forward_fail(p, ferr.msg);
      return;
    }
    p->fwd_pending--; /* one acknowledgement per forward, in order */
    p->stats.forwarded++;
    p->acked = holds > p->acked ? holds : p->acked;
    if (ps__async_snaps(p)) { /* the snapshot's workers' pushes are held: they need not keep them */
      memcpy(p->acked_last, p->snap_last, sizeof p->acked_last);
    }
  }
  if (p->backup && !p->fwd_pending && p->ckpt_told > p->acked && ps__ckpt_acks(p)) {
    ckpt_acks_end(p, "it cannot read this ps's checkpoint files");
  }
  if (p->fwd_pending > 0 && p->backup && (tfx_client_lost(p->backup) || tfx_now_ms() > p->fwd_deadline)) {
    ps__forward_fail(p, tfx_client_lost(p->backup) ? "its connection dropped" : "no acknowledgement in time");
  }
}

int ps__promote(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (!p->backup_of || !ps__initialized(p)) {
    return tfx_err_set(err, TFX_ESTATE, "promote ps instance %d: ps %d holds no initialized backup of it", p->index,
                       p->node->index);
  }
  if (p->state == PS_BEHIND) {
    return tfx_err_set(err, TFX_ESTATE,
                       "promote ps instance %d: the backup on ps %d refused a forwarded step and is behind its primary",
                       p->index, p->node->index);
  }
  if (e->epoch < p->epoch) {
    p->stats.stale_epoch++;
    return tfx_err_set(err, TFX_ESTATE, "promote of plan epoch %llu refused: at epoch %llu",
                       (unsigned long long)e->epoch, (unsigned long long)p->epoch);
  }
  p->epoch = e->epoch;
  if (!ps__promoted(p)) {
    ps__set_state(p, PS_UNREPLICATED, TFX_LOG_WARN, "PS-PROMOTED",
                  "ps %d now serves ps instance %d as its primary at step %lld (plan epoch %llu)", p->node->index,
                  p->index, (long long)p->version, (unsigned long long)p->epoch);
  }
  tfx_envelope env;
  tfx_reply_init(&env, m);
  env.step = p->version;
  env.epoch = p->epoch;
  return tfx_wire_send(p->sock, &m->identity, &env, NULL, 0, err);
}

/* The tensors of one snapshot: metadata and frames (the shards' own buffers, or rows gathered into `owned`, copied
 * by the send). */
typedef struct step_msg {
  Tfx__Tensor *metas;
  Tfx__Tensor **ptrs;
  tfx_payload *pl;
  int64_t *shapes; /* per tensor: 2 dims */
  void **owned;    /* per tensor: the rows gathered for it, or NULL */
  size_t n;
} step_msg;

/* Allocates sm for up to n tensors; -1 when out of memory (msg_free then frees what was made). */
static int msg_alloc(step_msg *sm, size_t n) {
  *sm = (step_msg){calloc(n + 1, sizeof *sm->metas), calloc(n + 1, sizeof *sm->ptrs), calloc(n + 1, sizeof *sm->pl),
                   calloc(2 * (n + 1), sizeof *sm->shapes), calloc(n + 1, sizeof *sm->owned), 0};
  return sm->metas && sm->ptrs && sm->pl && sm->shapes && sm->owned ? 0 : -1;
}

static void msg_free(step_msg *sm) {
  for (size_t i = 0; sm->owned && i < sm->n; i++) {
    free(sm->owned[i]);
  }
  free(sm->metas);
  free(sm->ptrs);
  free(sm->pl);
  free(sm->shapes);
  free(sm->owned);
}

/* Adds the rows of lazy table s touched at step `since` or later (values and slots) to a snapshot; -1 when out of
 * memory. */
static int snapshot_rows(step_msg *sm, const shard *s, int64_t since, size_t *bytes) {
  size_t n = tfx_rowtable_rows_since(s->table, since);
  ps_row_gather g = {.width = tfx_rowtable_row_floats(s->table)};
  if (!n) {
    return 0;
  }
  if (!(g.ids = malloc(2 * n * sizeof(int64_t) + n * g.width * sizeof(float)))) {
    return -1;
  }
  int64_t *touched = g.ids + n;
  g.data = (float *)(touched + n);
  tfx_rowtable_each_since(s->table, since, ps__gather_row, &g);
  for (size_t k = 0; k < g.n; k++) {
    touched[k] = tfx_rowtable_touched(s->table, g.ids[k]);
  }
  Tfx__Tensor *t = &sm->metas[sm->n];
  int64_t *shape = sm->shapes + 2 * sm->n;
  tfx__tensor__init(t);
  t->name = (char *)s->key;
  shape[0] = s->shape[0];
  shape[1] = (int64_t)g.width;
  t->shape = shape;
  t->n_shape = 2;
  t->rows = g.ids;
  t->n_rows = g.n;
  t->touched = touched;
  t->n_touched = g.n;
  t->ttl_scanned = tfx_rowtable_scanned(s->table);
  t->nbytes = g.n * g.width * sizeof(float);
  sm->pl[sm->n] = (tfx_payload){g.data, t->nbytes, 1, NULL, NULL};
  sm->owned[sm->n] = g.ids;
  sm->ptrs[sm->n++] = t;
  *bytes += t->nbytes;
  return 0;
}

/* Adds the values (slot 0) or slot k of dense shard s to a snapshot; *bytes adds its bytes. */
static void snapshot_add(step_msg *sm, const shard *s, int k, size_t *bytes) {
  Tfx__Tensor *meta = &sm->metas[sm->n];
  int64_t *shape = sm->shapes + 2 * sm->n;
  tfx__tensor__init(meta);
  meta->name = (char *)s->key;
  shape[0] = (int64_t)s->count;
  meta->shape = shape;
  meta->n_shape = 1;
  meta->nbytes = s->count * sizeof(float);
  meta->offset = (uint64_t)k;
  meta->version = (uint64_t)s->assigned;
  sm->pl[sm->n] = (tfx_payload){k ? s->slots[k - 1] : s->value->data, meta->nbytes, 1, NULL, NULL};
  sm->ptrs[sm->n++] = meta;
  *bytes += meta->nbytes;
}

/* A snapshot's worker state (workers_take): stats "last.W" and "clock.W", and the instance's ledger ("ledger"),
 * into kv, kvp and keys. */
static size_t snapshot_workers(const ps_state *p, Tfx__KeyValue *kv, Tfx__KeyValue **kvp, char (*keys)[24]) {
  for (int w = 0; w < p->n_workers; w++) {
    for (int j = 0; j < 2; j++) {
      int at = 2 * w + j;
      snprintf(keys[at], 24, "%s.%d", j ? "clock" : "last", w);
      tfx__key_value__init(&kv[at]);
      kv[at].key = keys[at];
      kv[at].value = (double)(j ? p->clock[w] : p->last_push[w]);
      kvp[at] = &kv[at];
    }
  }
  size_t at = 2 * (size_t)p->n_workers;
  tfx__key_value__init(&kv[at]);
  kv[at].key = "ledger";
  kv[at].value = (double)p->stats.ledger;
  kvp[at] = &kv[at];
  return at + 1;
}

/* Sends the snapshot of every dense shard (values and slots, copied) and the workers' state (snapshot_workers) at
 * the current version, as the snapshot `how` says (acked: answered; else not; full: a new backup, the lazy tables'
 * rows follow, ps__forward_full), with the rows of lazy tables touched since rows_since (>= 0); *bytes adds the
 * bytes sent. */
static int snapshot_send(ps_state *p, int acked, int full, int64_t rows_since, size_t *bytes, tfx_err *err) {
  int slots = tfx_optim_slots(&p->opt);
  step_msg sm;
  int rc = msg_alloc(&sm, (size_t)p->n_shards * (size_t)(1 + slots)) ? tfx_err_set(err, TFX_ENOMEM, "out of memory")
                                                                      : TFX_OK;
  for (int i = 0; !rc && i < p->n_shards; i++) {
    const shard *s = &p->shards[i];
    for (int k = 0; k <= slots && s->count; k++) {
      snapshot_add(&sm, s, k, bytes);
    }
    if (s->table && rows_since >= 0 && snapshot_rows(&sm, s, rows_since, bytes)) {
      rc = tfx_err_set(err, TFX_ENOMEM, "out of memory gathering the rows of table %s", s->var);
    }
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT;
  how.acked = acked != 0;
  how.full = full != 0;
  env.replicate = &how;
  char keys[2 * PS_MAX_WORKERS + 1][24];
  Tfx__KeyValue kv[2 * PS_MAX_WORKERS + 1], *kvp[2 * PS_MAX_WORKERS + 1];
  env.stats = kvp;
  env.n_stats = snapshot_workers(p, kv, kvp, keys);
  env.step = p->version;
  env.target = p->index + 1;
  env.epoch = p->epoch;
  env.tensors = sm.ptrs;
  env.n_tensors = sm.n;
  rc = rc ? rc : tfx_client_send(p->backup, &env, sm.pl, (int)sm.n, err);
  msg_free(&sm);
  return rc;
}

/* Sends the backup one acknowledged snapshot with the rows of lazy tables touched since rows_since (-1: none),
 * counts its bytes (*bytes) and awaits its acknowledgement; -1 when the send failed (the backup is then lost). */
static int send_acked(ps_state *p, int64_t rows_since, size_t *bytes) {
  tfx_err err;
  *bytes = 0;
  if (snapshot_send(p, 1, 0, rows_since, bytes, &err)) {
    ps__forward_fail(p, err.msg);
    return -1;
  }
  p->stats.replica_bytes += *bytes;
  ps__forward_awaits(p);
  return 0;
}

/* Whether enough pushes went since the last async snapshot for the next one to be worth its bytes. */
static int async_snapshot_due(const ps_state *p) {
  int64_t pushes = p->version - p->snap_sent;
  return pushes >= PS_SNAP_MAX_PUSHES ||
         (pushes >= ps__batch_steps(p) && p->snap_push_bytes >= PS_SNAP_COST * p->snap_bytes);
}

void ps__async_snapshot(ps_state *p, int idle) {
  if (!p || !p->backup || !ps__async_snaps(p) || p->fwd_pending ||
      (p->version <= p->snap_sent && p->stats.ledger == p->snap_ledger) || /* pushes past max_steps: its ledger */
      (!idle && !async_snapshot_due(p))) {
    return;
  }
  size_t bytes;
  memcpy(p->snap_last, p->last_push, sizeof p->snap_last);
  if (send_acked(p, p->snap_sent, &bytes) == 0) { /* the rows touched since the last one */
    p->snap_sent = p->version;
    p->snap_ledger = p->stats.ledger;
    p->snap_bytes = bytes;
    p->snap_push_bytes = 0;
  }
}

void ps__snap_ack_send(ps_state *p) {
  size_t bytes;
  if (send_acked(p, -1, &bytes) == 0) {
    p->snap_sent = p->version;
    p->snap_due = 0;
  }
}

/* ps__ckpt_acks: sends the backup the values, slots and rows touched since its checkpoint (why: the log's words),
 * in one acknowledged snapshot, so no replay needs the pushes a worker kept since. */
static void rows_catch_up(ps_state *p, const char *why) {
  size_t bytes;
  p->catch_up_due = 0;
  if (send_acked(p, p->acked, &bytes)) {
    return;
  }
  tfx_log(TFX_LOG_INFO, "PS-REPLICA-CATCH-UP", "ps instance %d: %s at step %lld, its backup at %lld: the %zu bytes of "
          "rows touched since sent to it", p->index, why, (long long)p->version, (long long)p->acked, bytes);
}

void ps__forward_idle(ps_state *p) {
  ps__async_snapshot(p, 1);
  if (!p || !p->backup || !ps__ckpt_acks(p) || p->version <= p->acked || p->fwd_pending) {
    ps__forward_catch_up(p);
    return;
  }
  if (p->idle_version != p->version) { /* a pause between steps (a checkpoint, a slow worker) is no stall */
    p->idle_version = p->version;
    p->idle_since = tfx_now_ms();
  }
  if (tfx_now_ms() - p->idle_since >= PS_STALL_MS) {
    rows_catch_up(p, "no step for a while (a worker lost?)");
  }
}

void ps__forward_catch_up(ps_state *p) {
  if (p && p->backup && ps__snap_acks(p) && p->version > p->snap_sent && !p->fwd_pending) {
    ps__snap_ack_send(p);
  }
  ps__forward_flush(p);
}

void ps__forward_snapshot(ps_state *p) {
  if (ps__ckpt_acks(p)) {
    if (p->catch_up_due && !p->fwd_pending) {
      rows_catch_up(p, "a worker came back on a new connection");
    }
    if (p->snap_due) {
      p->snap_due = 0;
      ckpt_acks_end(p, "values were assigned, which no push holds");
    } else if ((size_t)ps__kept_steps(p) * p->push_bytes > TFX_REPLICA_LOG_BYTES) {
      ckpt_acks_end(p, "a worker could keep more than 64 MiB of pushes for it");
    }
    return;
  }
  if (ps__snap_acks(p)) {
    if (p->snap_due || p->version % ps__batch_steps(p) == 0) {
      ps__snap_ack_send(p);
    }
    return;
  }
  int k = p->backup ? ps__log_steps(p) : 0;
  if (!k || ++p->fwd_steps % k) {
    return;
  }
  tfx_err err;
  size_t bytes = 0;
  ps__forward_flush(p); /* the steps before the snapshot go first: the backup takes it at its version */
  if (p->backup && snapshot_send(p, 0, 0, -1, &bytes, &err)) {
    ps__forward_fail(p, err.msg);
  } else {
    p->stats.replica_bytes += bytes;
  }
}

/* Gathers rows of a lazy table for one message. */
typedef struct rows_job {
  ps_state *p;
  const shard *s;
  int64_t *ids, *touched;
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
  meta.touched = j->touched;
  meta.n_touched = j->n;
  meta.ttl_scanned = tfx_rowtable_scanned(j->s->table);
  meta.nbytes = j->n * j->width * sizeof(float);
  tfx_payload pl = {j->data, meta.nbytes, 1, NULL, NULL};
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = TFX__REPLICATE_KIND__REPLICATE_ROWS;
  env.replicate = &how;
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
  j->touched[j->n] = tfx_rowtable_touched(j->s->table, id);
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
    j.touched = malloc(j.cap * sizeof *j.touched);
    j.data = malloc(j.cap * j.width * sizeof(float));
    rc = j.ids && j.touched && j.data ? tfx_rowtable_each(s->table, rows_add, &j) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
    rc = rc ? rc : rows_flush(&j);
    free(j.ids);
    free(j.touched);
    free(j.data);
  }
  return rc;
}

int ps__forward_full(ps_state *p, size_t *bytes, tfx_err *err) {
  *bytes = 0;
  int rc = snapshot_send(p, 0, 1, -1, bytes, err);
  return rc ? rc : rows_send(p, bytes, err);
}
