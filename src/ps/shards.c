/* The shards a ps holds: their value buffers (reference-counted, sent in place by ZeroMQ, copied on write when
 * a send is in flight), lookup by key, change versions, and the replies that send their values. Used by the
 * server loop (ps.c) and the handlers (push.c, pull.c, ckpt.c); it calls neither. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "net/net.h"
#include "ps/ps_impl.h"

vbuf *ps__vbuf_create(size_t count) {
  vbuf *b = malloc(sizeof *b + sizeof(float) * (count ? count : 1));
  if (b) {
    atomic_init(&b->refs, 1);
    b->frame_owned = 0;
    b->data = (float *)(b + 1);
  }
  return b;
}

vbuf *ps__vbuf_adopt(zmq_msg_t *frame) {
  vbuf *b = malloc(sizeof *b);
  if (b) {
    atomic_init(&b->refs, 1);
    b->frame_owned = 1;
    zmq_msg_init(&b->frame);
    zmq_msg_move(&b->frame, frame);
    b->data = zmq_msg_data(&b->frame);
  }
  return b;
}

void ps__vbuf_release(void *data, void *hint) {
  (void)data;
  vbuf *b = hint;
  if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
    if (b->frame_owned) {
      zmq_msg_close(&b->frame);
    }
    free(b);
  }
}

/* Makes the shard's value buffer private before writing to it. */
int ps__own_value(ps_state *p, shard *s) {
  if (atomic_load(&s->value->refs) == 1) {
    return 0;
  }
  p->stats.cow_copies++;
  vbuf *b = ps__vbuf_create(s->count);
  if (!b) {
    return -1;
  }
  memcpy(b->data, s->value->data, sizeof(float) * s->count);
  ps__vbuf_release(NULL, s->value);
  s->value = b;
  return 0;
}

size_t ps__bytes(const ps_state *p) {
  size_t n = 0, rows, lazy;
  for (int i = 0; i < p->n_shards; i++) {
    n += p->shards[i].count * sizeof(float);
  }
  ps__lazy_usage(p, &rows, &lazy);
  return n + lazy;
}

shard *ps__find(ps_state *p, const char *key) {
  for (int i = 0; i < p->n_shards; i++) {
    if (strcmp(p->shards[i].key, key) == 0) {
      return &p->shards[i];
    }
  }
  return NULL;
}

int64_t ps__since(const tfx_envelope *e) {
  return e->since && e->since->version <= (uint64_t)INT64_MAX ? (int64_t)e->since->version : -1;
}

void ps__touch(ps_state *p, shard *s) {
  s->changed = p->version + 1;
}

/* Whether a reply leaves shard s out: never assigned (changed_only), or unchanged since the client's version. A
 * since past the ps's version comes from before a re-initialization (a rollback): nothing is left out then. */
static int left_out(const ps_state *p, const shard *s, int changed_only, int64_t since) {
  if (s->table) {
    return 1; /* a lazy table travels by the rows asked for (Envelope.want), never whole */
  }
  if (changed_only && !s->trainable && !s->assigned) {
    return 1;
  }
  return since >= 0 && since <= p->version && s->changed <= since;
}

/* Sends the values of the requested shards (all when names is empty), in place. */
static void free_rows(void *data, void *hint) {
  (void)hint;
  free(data);
}

/* Checks every want against its lazy table before anything is sent. */
static int check_wants(ps_state *p, Tfx__Tensor *const *want, size_t n_want, tfx_err *err) {
  for (size_t i = 0; i < n_want; i++) {
    shard *s = ps__find(p, want[i]->name);
    if (!s || !s->table) {
      return tfx_err_set(err, TFX_ENOTFOUND, "pull: '%.64s' is not a lazy table of this ps", want[i]->name);
    }
    int rc = ps__lazy_check(s, want[i], err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

/* Adds the rows of each want to a reply (metas, payloads from k on); the gathered rows are freed by ZeroMQ. */
static int add_wants(ps_state *p, Tfx__Tensor *const *want, size_t n_want, Tfx__Tensor *metas, int64_t *shapes,
                     tfx_payload *pl, int k, tfx_err *err) {
  for (size_t i = 0; i < n_want; i++, k++) {
    shard *s = ps__find(p, want[i]->name);
    size_t bytes = want[i]->n_rows * s->row_size * sizeof(float);
    float *rows = malloc(bytes);
    if (!rows) {
      return tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory for %zu rows", s->var, want[i]->n_rows);
    }
    ps__lazy_gather(s, want[i], rows);
    tfx__tensor__init(&metas[k]);
    shapes[4 * k] = s->shape[0];
    shapes[4 * k + 1] = s->shape[1];
    metas[k].name = s->key;
    metas[k].shape = shapes + 4 * k;
    metas[k].n_shape = 2;
    metas[k].rows = want[i]->rows;
    metas[k].n_rows = want[i]->n_rows;
    metas[k].nbytes = bytes;
    metas[k].version = (uint64_t)p->version;
    pl[k] = (tfx_payload){rows, bytes, 0, free_rows, NULL};
  }
  return TFX_OK;
}

/* Checks that every name of a pull is a shard of this ps. */
static int check_names(ps_state *p, char **names, size_t n_names, tfx_err *err) {
  for (size_t i = 0; i < n_names; i++) {
    if (!ps__find(p, names[i])) {
      return tfx_err_set(err, TFX_ENOTFOUND, "pull: unknown variable '%.64s'", names[i]);
    }
  }
  return TFX_OK;
}

/* Describes a shard's values in meta (its shape in shape[4]) and lends them to payload, sent in place. */
static void add_values(const ps_state *p, shard *s, Tfx__Tensor *meta, int64_t *shape, tfx_payload *payload) {
  tfx__tensor__init(meta);
  meta->name = s->key;
  memcpy(shape, s->shape, sizeof s->shape);
  shape[0] = s->row_end - s->row_begin;
  meta->shape = shape;
  meta->n_shape = (size_t)s->rank;
  meta->nbytes = s->count * sizeof(float);
  meta->version = (uint64_t)p->version;
  atomic_fetch_add(&s->value->refs, 1);
  *payload = (tfx_payload){s->value->data, s->count * sizeof(float), 0, ps__vbuf_release, s->value};
}

int ps__send_values(ps_state *p, const zmq_msg_t *identity, uint64_t request_id, int worker, char **names,
                    size_t n_names, int changed_only, int64_t since, Tfx__Tensor *const *want, size_t n_want,
                    tfx_err *err) {
  int n = (n_names ? (int)n_names : p->n_shards) + (int)n_want, rc, k = 0;
  Tfx__Tensor *metas = calloc((size_t)n, sizeof *metas);
  Tfx__Tensor **ptrs = calloc((size_t)n, sizeof *ptrs);
  tfx_payload *pl = calloc((size_t)n, sizeof *pl);
  int64_t *shapes = calloc((size_t)n * 4, sizeof *shapes);
  if (!metas || !ptrs || !pl || !shapes) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    goto done;
  }
  if ((rc = check_names(p, names, n_names, err)) || (rc = check_wants(p, want, n_want, err))) {
    goto done; /* before any reference is taken */
  }
  n -= (int)n_want;
  for (int i = 0; i < 2 * n; i++) { /* small tensors first (TFX_WIRE_SMALL), then the large ones */
    shard *s = n_names ? ps__find(p, names[i % n]) : &p->shards[i % n];
    if (left_out(p, s, changed_only, since) || (s->count * sizeof(float) > TFX_WIRE_SMALL) != (i >= n)) {
      continue;
    }
    add_values(p, s, &metas[k], shapes + 4 * k, &pl[k]);
    ptrs[k] = &metas[k];
    k++;
  }
  if ((rc = add_wants(p, want, n_want, metas, shapes, pl, k, err))) {
    goto done; /* the dense payloads' references stay until the next init (a bounded leak, out of memory only) */
  }
  n = k + (int)n_want;
  for (int i = k; i < n; i++) {
    ptrs[i] = &metas[i];
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLY);
  env.request_id = request_id;
  env.outcome = p->reply_not_applied ? TFX__PUSH_OUTCOME__PUSH_NOT_APPLIED : TFX__PUSH_OUTCOME__PUSH_APPLIED;
  env.step = p->version;
  Tfx__Since acked; /* replicas: what the backup holds (a worker keeps its later pushes) */
  env.acked = ps__acked(p, worker, &acked);
  env.n_tensors = (size_t)n;
  env.tensors = ptrs;
  rc = tfx_wire_send(p->sock, identity, &env, pl, n, err);
  /* A failed send released every payload it did not send (tfx_wire_send): no reference stays. */
  p->stats.pulls++;
done:
  free(metas);
  free(ptrs);
  free(pl);
  free(shapes);
  return rc;
}

int ps__send_ranges(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  size_t n = m->env->n_tensors;
  Tfx__Tensor *metas = calloc(n + 1, sizeof *metas);
  Tfx__Tensor **ptrs = calloc(n + 1, sizeof *ptrs);
  tfx_payload *pl = calloc(n + 1, sizeof *pl);
  int64_t *lengths = calloc(n + 1, sizeof *lengths);
  int rc = metas && ptrs && pl && lengths ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  for (size_t i = 0; i < n && !rc; i++) { /* validate_push checked every range */
    const Tfx__Tensor *t = m->env->tensors[i];
    shard *s = ps__find(p, t->name);
    tfx__tensor__init(&metas[i]);
    lengths[i] = (int64_t)(t->nbytes / sizeof(float));
    metas[i].name = s->key;
    metas[i].shape = &lengths[i];
    metas[i].n_shape = 1;
    metas[i].offset = t->offset;
    metas[i].nbytes = t->nbytes;
    metas[i].version = (uint64_t)p->version;
    ptrs[i] = &metas[i];
    atomic_fetch_add(&s->value->refs, 1);
    pl[i] = (tfx_payload){s->value->data + t->offset, t->nbytes, 0, ps__vbuf_release, s->value};
  }
  if (!rc) {
    tfx_envelope env;
    tfx_reply_init(&env, m);
    env.step = p->version;
    env.n_tensors = n;
    env.tensors = ptrs;
    env.part = m->env->part;
    env.parts = m->env->parts;
    rc = tfx_wire_send(p->sock, &m->identity, &env, pl, (int)n, err);
    p->stats.pulls += m->env->part == 0;
  }
  free(metas);
  free(ptrs);
  free(pl);
  free(lengths);
  return rc;
}
