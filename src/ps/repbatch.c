/* Replicas, the primary's sync steps in batches (cluster.replicas 1, cluster.replica_batch_steps K). A primary
 * applies a step and answers its workers at once; the step, as summed, joins a batch that goes to the backup in one
 * message every K steps (or when the ps is idle, or before a snapshot), which the backup logs and acknowledges with
 * its version. Every reply tells the workers that version (Envelope.acked): a worker keeps each push until the
 * acknowledgement passes its step (psclient), and sends the ones it keeps again to a promoted backup, which applies
 * the steps its log lacks (a resent push of a step it holds is stale: dropped). Replies wait only when the backup
 * lags by 2K + 2 steps, the pushes a worker may keep (flow control). Messages between the ps: 2 per K steps.
 * Where the workers' pushes rebuild a step bit for bit (ps__snap_acks: dense shards, every worker in each step, a
 * sum that does not depend on arrival order), no step goes at all: every K steps the values and slots do, in one
 * acknowledged snapshot (ps__snap_ack_send), and the kept pushes are the log between (for the Fashion-MNIST MLP
 * with Adam, 3 x 470 KB per 16 steps instead of 470 KB every step). Where a checkpoint restores the state bit for
 * bit (ps__ckpt_acks: plain lazy tables), not even a snapshot goes: the primary's checkpoints are the backup's
 * state, acknowledged when it took them, and the workers keep their pushes since the last (the Debian LR: ~30 KB a
 * step a ps, ~1 000 steps at checkpoint.every_steps 1000, instead of 56 KB of summed rows every step). */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"

void ps__batch_free(ps_state *p) {
  ps_batch *b = &p->batch;
  for (size_t i = 0; i < b->n; i++) {
    free(b->owned[i]);
  }
  free(b->metas);
  free(b->shapes);
  free(b->owned);
  free(b->data);
  free(b->n_grads);
  memset(b, 0, sizeof *b);
}

void ps__backup_close(ps_state *p) {
  tfx_client_destroy(p->backup);
  p->backup = NULL;
  ps__batch_free(p);
}

void ps__forward_awaits(ps_state *p) {
  p->fwd_pending++;
  p->fwd_deadline = tfx_now_ms() + (int64_t)p->cfg.request_timeout_s * 1000;
}

void ps__forward_fail(ps_state *p, const char *why) {
  ps__set_state(p, PS_UNREPLICATED, TFX_LOG_WARN, "PS-BACKUP-LOST",
                "ps instance %d: its backup is lost (%s); serving unreplicated", p->index, why);
  ps__backup_close(p);
  p->fwd_pending = 0;
}

/* Room for one more tensor in the batch; -1 when out of memory. */
static int batch_grow(ps_batch *b) {
  if (b->n < b->cap) {
    return 0;
  }
  size_t cap = b->cap * 2 + 8;
  Tfx__Tensor *metas = realloc(b->metas, cap * sizeof *metas);
  b->metas = metas ? metas : b->metas;
  int64_t *shapes = metas ? realloc(b->shapes, 2 * cap * sizeof *shapes) : NULL;
  b->shapes = shapes ? shapes : b->shapes;
  void **owned = shapes ? realloc(b->owned, cap * sizeof *owned) : NULL;
  b->owned = owned ? owned : b->owned;
  const void **data = owned ? realloc(b->data, cap * sizeof *data) : NULL;
  b->data = data ? data : b->data;
  if (!data) {
    return -1;
  }
  b->cap = cap;
  return 0;
}

/* Adds a tensor of shard s to the batch: n_rows ids (NULL: whole) and floats, in `mem` (taken: freed with it). */
static int batch_add(ps_batch *b, const shard *s, int64_t step, int64_t *ids, size_t n_rows, void *mem,
                     const float *data, size_t floats) {
  if (batch_grow(b)) {
    free(mem);
    return -1;
  }
  Tfx__Tensor *t = &b->metas[b->n];
  tfx__tensor__init(t);
  t->name = (char *)s->key;
  t->version = (uint64_t)step;
  b->shapes[2 * b->n] = ids ? s->shape[0] : (int64_t)floats;
  b->shapes[2 * b->n + 1] = (int64_t)s->row_size;
  t->n_shape = ids ? 2 : 1;
  t->rows = ids;
  t->n_rows = n_rows;
  t->nbytes = floats * sizeof(float);
  b->owned[b->n] = mem;
  b->data[b->n++] = data;
  return 0;
}

/* A copy of n floats; NULL when out of memory. */
static float *copy_floats(const float *src, size_t n) {
  float *f = malloc(n * sizeof(float) + 1);
  if (f) {
    memcpy(f, src, n * sizeof(float));
  }
  return f;
}

int ps__gather_row(int64_t id, const float *row, void *ctx) {
  ps_row_gather *g = ctx;
  g->ids[g->n] = id;
  memcpy(g->data + g->n * g->width, row, sizeof(float) * g->width);
  g->n++;
  return 0;
}

/* The summed rows of shard s (a lazy table's in its sum's order, else the dense rows looked up), added to the
 * batch; -1 when out of memory. */
static int batch_rows(ps_batch *b, shard *s, int64_t step) {
  size_t rows = s->table ? tfx_rowtable_rows(s->acc_rows) : 0;
  for (int64_t r = 0; !s->table && r < s->row_end - s->row_begin; r++) {
    rows += s->touched[r];
  }
  if (!rows) {
    return 0;
  }
  ps_row_gather g = {.width = s->row_size};
  if (!(g.ids = malloc(rows * sizeof(int64_t) + rows * g.width * sizeof(float) + 1))) {
    return -1;
  }
  g.data = (float *)(g.ids + rows);
  if (s->table) {
    tfx_rowtable_each(s->acc_rows, ps__gather_row, &g);
  }
  for (int64_t r = 0; !s->table && r < s->row_end - s->row_begin; r++) {
    if (s->touched[r]) {
      ps__gather_row(s->row_begin + r, s->acc + (size_t)r * s->row_size, &g);
    }
  }
  return batch_add(b, s, step, g.ids, g.n, g.ids, g.data, g.n * g.width);
}

/* What shard s contributes to the step (its summed gradient, whole or by rows, or, non-trainable, the values
 * assigned this step), copied into the batch; -1 when out of memory. */
static int batch_shard(ps_batch *b, shard *s, int64_t step, int n_grads) {
  if (!s->trainable) {
    int assigned = s->step_assigned;
    s->step_assigned = 0;
    float *f = assigned ? copy_floats(s->value->data, s->count) : NULL;
    return !assigned ? 0 : f ? batch_add(b, s, step, NULL, 0, f, f, s->count) : -1;
  }
  if (!n_grads) {
    return 0;
  }
  if (!s->table && s->acc_dense) {
    float *f = copy_floats(s->acc, s->count);
    return f ? batch_add(b, s, step, NULL, 0, f, f, s->count) : -1;
  }
  return batch_rows(b, s, step);
}

/* Counts one more step (its gradients averaged) in the batch; -1 when out of memory. */
static int batch_step(ps_batch *b, int64_t step, int n_grads) {
  if (b->steps == b->cap_steps) {
    int cap = b->cap_steps * 2 + 4;
    double *g = realloc(b->n_grads, (size_t)cap * sizeof *g);
    if (!g) {
      return -1;
    }
    b->n_grads = g;
    b->cap_steps = cap;
  }
  b->first = b->steps ? b->first : step;
  b->n_grads[b->steps++] = n_grads;
  return 0;
}

/* ZeroMQ's release of a batch's frame: frees the allocation that held it (its hint). */
static void free_owned(void *data, void *hint) {
  (void)data;
  free(hint);
}

/* Sends the batch to the backup: its steps' tensors in order, the gradients averaged per step (stats "n_grads");
 * the frames go in place, their allocations handed to ZeroMQ (no copy of the summed rows). */
static int batch_send(ps_state *p, tfx_err *err) {
  ps_batch *b = &p->batch;
  Tfx__KeyValue *kv = calloc((size_t)b->steps + 1, sizeof *kv);
  Tfx__KeyValue **kvp = calloc((size_t)b->steps + 1, sizeof *kvp);
  Tfx__Tensor **ptrs = calloc(b->n + 1, sizeof *ptrs);
  tfx_payload *pl = calloc(b->n + 1, sizeof *pl);
  int rc = kv && kvp && ptrs && pl ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  for (int j = 0; !rc && j < b->steps; j++) {
    tfx__key_value__init(&kv[j]);
    kv[j].key = "n_grads";
    kv[j].value = b->n_grads[j];
    kvp[j] = &kv[j];
  }
  for (size_t i = 0; !rc && i < b->n; i++) {
    b->metas[i].shape = b->shapes + 2 * i;
    ptrs[i] = &b->metas[i];
    pl[i] = (tfx_payload){b->data[i], b->metas[i].nbytes, 0, free_owned, b->owned[i]};
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = TFX__REPLICATE_KIND__REPLICATE_STEPS;
  env.replicate = &how;
  env.step = b->first;
  env.target = p->index + 1;
  env.epoch = p->epoch;
  env.tensors = ptrs;
  env.n_tensors = b->n;
  env.stats = kvp;
  env.n_stats = (size_t)b->steps;
  if (!rc) { /* sent or not, ZeroMQ (or the send's failure) releases the frames now */
    rc = tfx_client_send(p->backup, &env, pl, (int)b->n, err);
    for (size_t i = 0; i < b->n; i++) {
      p->stats.replica_bytes += rc ? 0 : b->metas[i].nbytes;
      b->owned[i] = NULL;
    }
  }
  free(kv);
  free(kvp);
  free(ptrs);
  free(pl);
  return rc;
}

void ps__forward_flush(ps_state *p) {
  if (!p || !p->backup || !p->batch.steps) {
    return;
  }
  tfx_err err;
  int rc = batch_send(p, &err);
  ps__batch_free(p);
  if (rc) {
    ps__forward_fail(p, err.msg);
    return;
  }
  ps__forward_awaits(p);
}

void ps__forward_ckpt(ps_state *p, int64_t step) {
  if (!p || !p->backup || !ps__is_sync(p)) {
    return;
  }
  int acked = ps__ckpt_acks(p) && step > p->acked;
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = TFX__REPLICATE_KIND__REPLICATE_CHECKPOINT;
  how.acked = acked != 0;
  env.replicate = &how;
  env.step = step;
  env.target = p->index + 1;
  env.epoch = p->epoch;
  tfx_err err;
  if (tfx_client_send(p->backup, &env, NULL, 0, &err)) {
    ps__forward_fail(p, err.msg);
  } else if (acked) {
    p->ckpt_told = step;
    ps__forward_awaits(p); /* answered with the backup's version: the workers' kept pushes below it go */
  }
}

/* The hash of a message's routing identity (FNV-1a): ZeroMQ gives every new connection a new one. */
static uint64_t identity_hash(const tfx_inmsg *m) {
  uint64_t h = 1469598103934665603ULL;
  const unsigned char *b = m->has_identity ? zmq_msg_data((zmq_msg_t *)&m->identity) : NULL;
  size_t n = b ? zmq_msg_size((zmq_msg_t *)&m->identity) : 0;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ b[i]) * 1099511628211ULL;
  }
  return h | 1; /* never 0, the slot of a worker not seen yet */
}

void ps__keep_measure(ps_state *p, const tfx_inmsg *m) {
  const tfx_envelope *e = m->env;
  if (!p->backup || e->type == TFX__MSG_TYPE__MSG_REPLICATE) {
    return;
  }
  int w = ps__worker_of(e);
  uint64_t id = identity_hash(m);
  if (w >= 0 && w < PS_MAX_WORKERS) { /* a worker on a new connection may have restarted without its kept pushes */
    p->catch_up_due |= p->worker_conn[w] && p->worker_conn[w] != id;
    p->worker_conn[w] = id;
  }
  size_t bytes = 0;
  for (size_t i = 0; i < e->n_tensors; i++) {
    bytes += e->tensors[i]->nbytes + e->tensors[i]->n_rows * sizeof(int64_t);
  }
  p->push_bytes = p->push_bytes ? p->push_bytes - p->push_bytes / 64 + bytes / 64 : bytes;
  p->snap_push_bytes += bytes;
}

void ps__forward_step(ps_state *p) {
  if (p->backup && tfx_client_disconnects(p->backup) != p->backup_seen) {
    ps__forward_fail(p, "its connection dropped");
    return;
  }
  if (!p->backup || ps__snap_acks(p) || ps__ckpt_acks(p)) { /* no summed step goes: the workers keep their pushes */
    for (int i = 0; i < p->n_shards; i++) {
      p->snap_due |= p->backup && p->shards[i].step_assigned; /* values assigned: in no push, a snapshot goes now */
      p->shards[i].step_assigned = 0;
    }
    return;
  }
  int rc = batch_step(&p->batch, p->version, p->n_grads);
  for (int i = 0; !rc && i < p->n_shards; i++) {
    rc = batch_shard(&p->batch, &p->shards[i], p->version, p->n_grads);
  }
  if (rc) {
    ps__forward_fail(p, "out of memory batching the step for it");
    return;
  }
  if (p->batch.steps >= ps__batch_steps(p)) {
    ps__forward_flush(p);
  }
}
