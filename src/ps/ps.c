/* The parameter server: a poll loop over one ROUTER socket that owns every shard. */
#include "ps/ps.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/net.h"
#include "nn/init.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "observe/http.h"
#include "observe/notify.h"
#include "observe/prom.h"
#include "ps/ps_impl.h"
#include "store/ckpt.h"

static void free_shards(ps_state *p) {
  for (int i = 0; i < p->n_shards; i++) {
    shard *s = &p->shards[i];
    ps__vbuf_release(NULL, s->value);
    free(s->slots[0]);
    free(s->slots[1]);
    free(s->acc);
    free(s->touched);
    ps__lazy_free(s);
  }
  free(p->shards);
  p->shards = NULL;
  p->n_shards = 0;
}

/* Checks a plan entry: float32, rank 1 to 4, rows inside dim 0, each dim >= 1 and the values within a frame. */
static int check_plan_shard(const Tfx__Shard *m, tfx_err *err) {
  if (m->dtype && *m->dtype && strcmp(m->dtype, "float32")) {
    return tfx_err_set(err, TFX_EPROTO, "plan shard '%.64s': dtype '%.32s' (a ps holds float32 only)", m->key,
                       m->dtype);
  }
  if (m->n_shape < 1 || m->n_shape > 4 || m->row_begin < 0 || m->row_end > m->shape[0] || m->row_begin >= m->row_end) {
    return tfx_err_set(err, TFX_EPROTO, "plan shard '%.64s': bad shape or rows %lld..%lld", m->key,
                       (long long)m->row_begin, (long long)m->row_end);
  }
  uint64_t total = 1;
  for (size_t d = m->lazy ? 1 : 0; d < m->n_shape; d++) { /* a lazy table's ids are counted by rowtable.h */
    if (m->shape[d] < 1 || (uint64_t)m->shape[d] > (TFX_MAX_FRAME / 4) / total) {
      return tfx_err_set(err, TFX_EPROTO, "plan shard '%.64s': dim %zu = %lld (each dim >= 1, at most %zu values)",
                         m->key, d, (long long)m->shape[d], TFX_MAX_FRAME / 4);
    }
    total *= (uint64_t)m->shape[d];
  }
  return TFX_OK;
}

/* Makes shard s from plan entry m: its values from the initializer (or, lazy, row by row), slots and sync sums. */
static int make_shard(ps_state *p, shard *s, const Tfx__Shard *m, tfx_err *err) {
  int rc = check_plan_shard(m, err);
  if (rc) {
    return rc;
  }
  snprintf(s->key, sizeof s->key, "%s", m->key);
  snprintf(s->var, sizeof s->var, "%s", m->var);
  s->rank = (int)m->n_shape;
  size_t row = 1;
  for (int d = 0; d < s->rank; d++) {
    s->shape[d] = m->shape[d];
    row *= d ? (size_t)m->shape[d] : 1;
  }
  s->row_begin = m->row_begin;
  s->row_end = m->row_end;
  s->trainable = m->trainable;
  s->row_size = row;
  s->count = m->lazy ? 0 : row * (size_t)(m->row_end - m->row_begin);
  if (!(s->value = ps__vbuf_create(s->count))) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory for '%s'", s->key);
  }
  if (m->lazy) {
    return ps__lazy_make(p, s, m, err);
  }
  for (int k = 0; k < tfx_optim_slots(&p->opt); k++) {
    if (!(s->slots[k] = calloc(s->count, sizeof(float)))) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  if (!(s->acc = calloc(s->count, sizeof(float))) ||
      !(s->touched = calloc((size_t)(s->row_end - s->row_begin) + 1, 1))) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  const char *init = m->init && *m->init ? m->init : "zeros";
  if (tfx_init_check(init, err)) {
    return TFX_EPROTO;
  }
  tfx_init_fill(init, s->var, (uint64_t)p->cfg.seed, m->fan_in, m->fan_out, (size_t)m->row_begin * row, s->count,
                s->value->data);
  return TFX_OK;
}

/* Refuses an experiment whose messages need larger frames than this ps accepts: libzmq fixed its socket's bound
 * at bind (a ps started without the experiment has the default or cluster.max_message_bytes from its
 * environment), and a longer frame would only cut the sender's connection. An experiment without a model to
 * measure (a test driver's plan of bare variables) is not checked: the master builds its model before any INIT. */
static int check_message_bound(const tfx_config *cfg, tfx_err *err) {
  size_t largest = 0, ids = 0, limit = tfx_wire_max_frame();
  if (tfx_model_extent(cfg, &largest, &ids, NULL)) {
    return TFX_OK;
  }
  size_t need = tfx_net_message_bound(cfg, largest, ids);
  if (need <= limit) {
    return TFX_OK;
  }
  return tfx_err_set(err, TFX_ECONFIG,
                     "the experiment's messages need frames of up to %zu bytes; this ps accepts %zu (fixed when it "
                     "opened its socket): start it with the experiment (--config) or TFX_CLUSTER_MAX_MESSAGE_BYTES=%zu",
                     need, limit, need);
}

/* MSG_INIT: (re)builds every shard from the plan, fresh or from a checkpoint shard. */
static int handle_init(ps_state *p, const tfx_envelope *e, tfx_err *err) {
  if (!e->init) {
    return tfx_err_set(err, TFX_EPROTO, "an INIT without its Init body (the worker count)");
  }
  tfx_config cfg;
  tfx_config_init(&cfg);
  int rc = tfx_config_parse(&cfg, e->text ? e->text : "", "init experiment", err);
  if (rc || (rc = tfx_config_validate_choices(&cfg, err)) || (rc = check_message_bound(&cfg, err))) {
    return rc;
  }
  tfx_config_resolve_replicas(&cfg, tfx_cluster_count(p->node->cluster, TFX_ROLE_PS),
                              tfx_cluster_count(p->node->cluster, TFX_ROLE_WORKER)); /* an experiment left at auto */
  /* Build the new state aside: a bad plan or shard leaves the current one untouched. */
  ps_state next = *p;
  next.cfg = cfg;
  tfx_optim_init(&next.opt, &cfg);
  next.n_shards = 0;
  next.version = 0;
  if (!(next.shards = calloc(e->n_shards ? e->n_shards : 1, sizeof *next.shards))) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < e->n_shards && !rc; i++) {
    next.n_shards = (int)i + 1;
    rc = make_shard(&next, &next.shards[i], e->shards[i], err);
  }
  if (!rc && e->path && *e->path) {
    rc = ps__restore_shards(&next, e->path, err);
  }
  if (rc) {
    free_shards(&next);
    return rc;
  }
  ps__fail_pending(p, TFX_ESTATE, "the ps was re-initialized (rolled back to a checkpoint)");
  ps__order_drop(p, TFX_ESTATE, "the ps was re-initialized (rolled back to a checkpoint)");
  ps__log_free(p);
  p->fwd_steps = 0;
  free_shards(p);
  p->cfg = next.cfg;
  p->opt = next.opt;
  p->shards = next.shards;
  p->n_shards = next.n_shards;
  p->version = next.version;
  ps__ckpt_reset(p);
  p->epoch = e->epoch;
  if (p->index == p->node->index) { /* a restarted ps's own instance may come back as a backup copy */
    p->backup_of = e->init->as_backup;
  }
  ps__sync_reset(p, (int)e->init->workers);
  ps__set_state(p, p->backup_of ? PS_BACKUP : PS_SERVING, TFX_LOG_INFO, "PS-INIT",
                "%s%d: %d shard(s), %zu bytes, mode %s, step %lld%s%s", p->backup_of ? "backup of ps instance " : "ps instance ",
                p->index, p->n_shards, ps__bytes(p), tfx_config_choice_name("training.mode", cfg.mode),
                (long long)p->version, e->path && *e->path ? " restored from " : "", e->path ? e->path : "");
  return TFX_OK;
}

static int reply_simple(ps_state *p, const tfx_inmsg *m, int64_t step, const char *path, tfx_err *err) {
  tfx_envelope env;
  tfx_reply_init(&env, m);
  env.step = step;
  env.path = (char *)(path ? path : "");
  return tfx_wire_send(p->sock, &m->identity, &env, NULL, 0, err);
}

#define STAT_KEY(kind, field, key, metric, help, type) key,
#define STAT_METRIC(kind, field, key, metric, help, type) metric,
#define STAT_HELP(kind, field, key, metric, help, type) help,
#define STAT_TYPE(kind, field, key, metric, help, type) type,
#define STAT_AT(kind, field, key, metric, help, type) offsetof(ps_shown, field),
#define STAT_COPY_COUNT(field) s->field = (double)p->stats.field;
#define STAT_COPY_SHOWN(field)
#define STAT_COPY(kind, field, key, metric, help, type) STAT_COPY_##kind(field)
enum { N_STATS = sizeof(ps_shown) / sizeof(double) };
static const char *const stat_keys[N_STATS] = {PS_STATS(STAT_KEY)};
static const char *const stat_metrics[N_STATS] = {PS_STATS(STAT_METRIC)};
static const char *const stat_helps[N_STATS] = {PS_STATS(STAT_HELP)};
static const char *const stat_types[N_STATS] = {PS_STATS(STAT_TYPE)};
static const size_t stat_at[N_STATS] = {PS_STATS(STAT_AT)};

/* Statistic i of PS_STATS as shown in s. */
static double stat_value(const ps_shown *s, int i) {
  double v;
  memcpy(&v, (const char *)s + stat_at[i], sizeof v);
  return v;
}

static double uptime_s(int64_t start_ms) {
  return (double)(tfx_now_ms() - start_ms) / 1000.0;
}

/* The values of every statistic of PS_STATS, as of now. */
static void snapshot(const ps_state *p, ps_shown *s) {
  PS_STATS(STAT_COPY)
  s->uptime = uptime_s(p->start_ms);
  s->shards = p->n_shards;
  s->bytes = (double)ps__bytes(p);
  s->version = (double)p->version;
  s->unreplicated = ps__reports_unreplicated(p);
  s->busy_us_per_message = p->stats.handled ? p->stats.busy_us / (double)p->stats.handled : 0;
  s->busy_seconds = p->stats.busy_us / 1e6;
}

static int handle_status(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  ps_shown s;
  snapshot(p, &s);
  Tfx__KeyValue kv[N_STATS], *kvp[N_STATS];
  size_t n = 0;
  for (int i = 0; i < N_STATS; i++) {
    if (stat_keys[i]) {
      tfx__key_value__init(&kv[n]);
      kv[n].key = (char *)stat_keys[i];
      kv[n].value = stat_value(&s, i);
      kvp[n] = &kv[n];
      n++;
    }
  }
  tfx_envelope env;
  tfx_reply_init(&env, m);
  env.text = (char *)(!ps__initialized(p) ? "waiting-for-plan" : ps__is_copy(p) ? "backup" : "serving");
  env.instance_state = ps__wire_state(p->state);
  env.epoch = p->epoch;
  env.step = p->version + ps__log_pending(p); /* a backup's steps held count: its primary is there */
  env.stats = kvp;
  env.n_stats = n;
  return tfx_wire_send(p->sock, &m->identity, &env, NULL, 0, err);
}

/* A mirror state for instance `index`, sharing own's socket and node; caller owns; free with mirror_destroy. */
static ps_state *mirror_create(ps_state *own, int index) {
  ps_state *m = calloc(1, sizeof *m);
  if (m) {
    m->node = own->node;
    m->sock = own->sock;
    m->index = index;
    m->backup_of = 1;
    m->start_ms = own->start_ms;
    tfx_config_init(&m->cfg);
  }
  return m;
}

/* Frees a mirror state and everything it holds; NULL does nothing. */
static void mirror_destroy(ps_state *m) {
  if (!m) {
    return;
  }
  ps__log_free(m);
  ps__backup_close(m);
  ps__order_drop(m, 0, NULL);
  ps__drop_pending(m);
  ps__ckpt_finish(m);
  ps__ckpt_drop(m);
  ps__push_free_scratch(m);
  ps__helper_destroy(m->helper);
  free_shards(m);
  free(m);
}

/* The state a request is for: the own one or the mirror; an INIT of another instance makes the mirror anew. */
static int instance_of(ps_state *own, const tfx_envelope *e, ps_state **out, tfx_err *err) {
  int rc = ps__route(own, e, out, err);
  if (rc || *out) {
    return rc;
  }
  ps_state *m = mirror_create(own, e->target - 1);
  if (!m) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory for the mirror of ps instance %d", e->target - 1);
  }
  mirror_destroy(own->mirror);
  own->mirror = m;
  *out = m;
  return TFX_OK;
}

/* An INIT of the own instance (re)opens the link to its backup (cluster.replicas 1). */
static int init_and_reply(ps_state *own, ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  int rc = handle_init(p, m->env, err);
  if (!rc && p == own) {
    rc = ps__backup_open(own, err);
  }
  return rc ? rc : reply_simple(p, m, p->version, NULL, err);
}

/* The backup of a kind of MSG_REPLICATE that changes it, refusing it (why) and falling BEHIND: TFX_ESTATE. */
static int refuse_replicate(ps_state *p, int rc, const char *what, tfx_err *err) {
  ps__fall_behind(p, TFX_LOG_WARN, "PS-BEHIND", "backup of ps instance %d: %s refused: %s", p->index, what, err->msg);
  return rc;
}

/* MSG_REPLICATE on a backup copy (its kind in Envelope.replicate): summed sync steps are held and answered with
 * the steps it holds; a snapshot or rows are taken in (a snapshot answered when acked); a checkpoint's news lets
 * it drop its log below that step (answered when acked). A refusal cuts the primary's link. */
static int handle_replicate(ps_state *p, tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  const Tfx__Replicate *r = e->replicate;
  int rc = TFX_OK;
  switch (r ? r->kind : TFX__REPLICATE_KIND__REPLICATE_NONE) {
    case TFX__REPLICATE_KIND__REPLICATE_STEPS:
      if (e->step != p->version + p->log_steps) {
        rc = tfx_err_set(err, TFX_ESTATE, "forwarded step %lld: the backup of ps instance %d is at step %lld",
                         (long long)e->step, p->index, (long long)(p->version + p->log_steps));
        return refuse_replicate(p, rc, "a batch of steps", err);
      }
      rc = reply_simple(p, m, p->version + p->log_steps + (int64_t)e->n_stats, NULL, err); /* its steps held */
      ps__log_hold(p, m);
      return rc;
    case TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT:
      rc = ps__log_snapshot(p, m, err);
      if (rc) {
        return refuse_replicate(p, rc, "a snapshot", err);
      }
      return r->acked ? reply_simple(p, m, p->version, NULL, err) : TFX_OK;
    case TFX__REPLICATE_KIND__REPLICATE_ROWS:
      rc = ps__log_rows(p, m, err);
      return rc ? refuse_replicate(p, rc, "rows", err) : TFX_OK;
    case TFX__REPLICATE_KIND__REPLICATE_CHECKPOINT:
      ps__log_checkpoint(p, e->step, r->acked);
      return r->acked ? reply_simple(p, m, p->version + p->log_steps, NULL, err) : TFX_OK;
    default:
      return tfx_err_set(err, TFX_EPROTO, "a MSG_REPLICATE of kind %d: no primary sends one", r ? (int)r->kind : 0);
  }
}

/* Serves requests for an initialized state. */
static int handle_data(ps_state *p, tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (!ps__initialized(p)) {
    return tfx_err_set(err, TFX_ESTATE, "no plan yet: the master has not initialized this ps");
  }
  int rc = ps__gate(p, e, err);
  if (rc) {
    return rc;
  }
  switch (e->type) {
    case TFX__MSG_TYPE__MSG_PULL:
      return ps__pull(p, m, err);
    case TFX__MSG_TYPE__MSG_PUSH:
      return ps__push_ordered(p, m, err);
    case TFX__MSG_TYPE__MSG_REPLICATE:
      return handle_replicate(p, m, err);
    case TFX__MSG_TYPE__MSG_CHECKPOINT:
      return ps__checkpoint_request(p, m, err);
    default:
      return tfx_err_set(err, TFX_EPROTO, "message type %d is not for a ps", e->type);
  }
}

static int handle(ps_state *own, tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (e->type == TFX__MSG_TYPE__MSG_STOP) {
    /* The chief checkpointed before: a push held for a step the other workers stopped short of is answered so,
     * and its worker stops instead of failing over to a backup that is stopping too. */
    own->stopping = 1;
    ps__order_drop(own, TFX_EINTR, "the ps stopped: the chief ended the run");
    ps__fail_pending(own, TFX_EINTR, "the ps stopped: the chief ended the run");
    return reply_simple(own, m, own->version, NULL, err);
  }
  ps_state *p = NULL;
  int rc = instance_of(own, e, &p, err);
  if (rc && e->type == TFX__MSG_TYPE__MSG_STATUS) {
    /* The master asks after an instance this ps holds no copy of (it restarted since it served or backed it up):
     * the copy is lost, as a ps back empty is, so the master promotes its backup or rolls back. */
    tfx_envelope env;
    tfx_reply_init(&env, m);
    env.text = "waiting-for-plan";
    env.instance_state = TFX__INSTANCE_STATE__INSTANCE_WAITING;
    env.epoch = own->epoch;
    return tfx_wire_send(own->sock, &m->identity, &env, NULL, 0, err);
  }
  if (rc) {
    return rc;
  }
  if (e->type != TFX__MSG_TYPE__MSG_STATUS && e->type != TFX__MSG_TYPE__MSG_INIT &&
      e->type != TFX__MSG_TYPE__MSG_REPLICATE) {
    ps__log_apply(p, 0); /* a mirror is brought up to its primary's step before it serves anything else */
  }
  switch (e->type) {
    case TFX__MSG_TYPE__MSG_STATUS:
      return handle_status(p, m, err);
    case TFX__MSG_TYPE__MSG_INIT:
      return init_and_reply(own, p, m, err);
    case TFX__MSG_TYPE__MSG_PROMOTE:
      return ps__promote(p, m, err);
    case TFX__MSG_TYPE__MSG_REREPLICATE:
      return ps__rereplicate(p, m, err);
    default:
      return handle_data(p, m, err);
  }
}

/* Handles one received message (rc: its receipt), answers an error, counts it and releases it. */
static void serve_msg(ps_state *p, tfx_inmsg *m, int rc, tfx_err *err, double t0) {
  if (rc) {
    char safe[600];
    tfx_log_escape(err->msg, strlen(err->msg), safe, sizeof safe);
    if (p->stats.bad_frames++ < 10) {
      tfx_log(TFX_LOG_WARN, "PS-BAD-FRAME", "dropped: %s", safe);
    }
  } else {
    rc = handle(p, m, err);
    if (rc) {
      p->stats.rejected++;
      char safe[600];
      tfx_log_escape(err->msg, strlen(err->msg), safe, sizeof safe);
      if (p->stats.rejected < 20) {
        tfx_log(TFX_LOG_WARN, "PS-REJECT", "%s", safe);
      }
    }
  }
  if (rc && rc != TFX_EPEER) {
    tfx_server_reply_error(p->sock, m, rc, err->msg, NULL);
  }
  tfx_inmsg_fini(m);
  p->stats.busy_us += tfx_now_us() - t0;
  p->stats.handled++;
}

static void serve_one(ps_state *p) {
  double t0 = tfx_now_us();
  tfx_inmsg m;
  tfx_err err;
  tfx_err_clear(&err);
  int rc = tfx_wire_recv(p->sock, 1, &m, &err);
  serve_msg(p, &m, rc, &err, t0);
}

/* Copies the state the HTTP thread shows. */
static void publish(ps_state *p) {
  ps_view *v = &p->view;
  ps_shown s;
  snapshot(p, &s);
  pthread_mutex_lock(&v->lock);
  v->initialized = ps__initialized(p);
  v->shown = s;
  pthread_mutex_unlock(&v->lock);
}

static char *render(const char *path, const char **type, void *ctx) {
  ps_state *p = ctx;
  ps_view *v = &p->view;
  tfx_text t = {0};
  int i = p->node->index;
  pthread_mutex_lock(&v->lock);
  if (!strcmp(path, "/metrics")) {
    *type = "text/plain; version=0.0.4; charset=utf-8";
    ps_shown s = v->shown;
    s.uptime = uptime_s(v->start_ms); /* as of this request, not of the last publish */
    for (int k = 0; k < N_STATS; k++) {
      if (stat_metrics[k]) {
        tfx_prom_metric(&t, stat_metrics[k], stat_helps[k], stat_types[k], "ps", i, stat_value(&s, k));
      }
    }
  } else if (!strcmp(path, "/status")) {
    *type = "application/json";
    tfx_text_put(
        &t, "{\"role\": \"ps\", \"index\": %d, \"state\": \"%s\", \"step\": %lld, \"shards\": %d, \"bytes\": %.0f}\n",
        i, v->initialized ? "serving" : "waiting-for-plan", (long long)v->shown.version, (int)v->shown.shards,
        v->shown.bytes);
  }
  pthread_mutex_unlock(&v->lock);
  return t.s;
}

/* Takes the backup's acknowledgements; the replies parked for them go once the backup holds enough. */
static void acknowledged(ps_state *p) {
  if (p->fwd_pending > 0) {
    int before = p->fwd_pending;
    ps__forward_acks(p);
    if (p->fwd_pending < before) {
      ps__service(p);
    }
  }
}

/* The poll loop: serves messages, expires parked pulls every 100 ms, publishes the view, until STOP or SIGTERM. */
/* The poll items of the loop: the socket, then the backup links with a forward pending (the own state's, and a
 * promoted mirror's that took a backup again); returns how many. */
static int poll_items(ps_state *p, zmq_pollitem_t *items) {
  int n = 0;
  items[n++] = (zmq_pollitem_t){p->sock, 0, ZMQ_POLLIN, 0};
  ps_state *states[2] = {p, p->mirror};
  for (int i = 0; i < 2; i++) {
    if (states[i] && states[i]->fwd_pending && states[i]->backup) {
      items[n++] = (zmq_pollitem_t){tfx_client_socket(states[i]->backup), 0, ZMQ_POLLIN, 0};
    }
  }
  return n;
}

static void serve(ps_state *p) {
  while (!p->stopping && !tfx_stop_requested()) {
    zmq_pollitem_t items[3];
    int n = poll_items(p, items);
    int wait_ms = ps__ckpt_writing(p) || ps__ckpt_writing(p->mirror) ? 2 : n > 1 ? 20 : 100;
    int ready = zmq_poll(items, n, wait_ms);
    if (ready > 0 && (items[0].revents & ZMQ_POLLIN)) {
      serve_one(p);
    }
    acknowledged(p);
    if (p->mirror) {
      acknowledged(p->mirror);
    }
    if (ready == 0) {
      ps__forward_idle(p); /* sync, replicas: the steps batched go when nothing comes for a while */
      ps__forward_idle(p->mirror);
    }
    if (!p->fwd_pending || ready == 0) {
      ps__log_trim(p->mirror); /* once the own replies went (or nothing came for a while) */
      ps__log_trim(p);         /* a restarted ps's own instance, as a backup copy */
    }
    if (ps__ckpt_poll(p)) {
      ps__service(p); /* a checkpoint the writer thread finished: a parked request for it is answered */
    }
    if (ps__ckpt_poll(p->mirror)) {
      ps__service(p->mirror);
    }
    ps__expire_pulls(p);
    if (p->mirror) {
      ps__expire_pulls(p->mirror);
    }
    publish(p);
    if (ps__initialized(p)) {
      tfx_notify_status("ps %d: step %lld, %d shard(s), %llu pushes applied", p->node->index, (long long)p->version,
                        p->n_shards, (unsigned long long)p->stats.applied);
    } else {
      tfx_notify_watchdog();
    }
  }
}

int tfx_ps_run(tfx_node *n, tfx_err *err) {
  ps_state p;
  memset(&p, 0, sizeof p);
  char ep[320];
  const char *addr = tfx_cluster_address(n->cluster, TFX_ROLE_PS, n->index);
  int rc = tfx_address_endpoint(addr, 1, n->bind_host, ep, sizeof ep, err);
  if (rc || (rc = tfx_server_open(ep, &p.sock, err))) {
    return rc;
  }
  tfx_wire_set_sender(TFX__ROLE__ROLE_PS, n->index);
  openblas_set_num_threads(1);
  p.node = n;
  p.index = n->index;
  p.start_ms = tfx_now_ms();
  tfx_config_init(&p.cfg);
  pthread_mutex_init(&p.view.lock, NULL);
  p.view.start_ms = p.start_ms;
  if (n->http_port && (rc = tfx_http_start(n->bind_host, n->http_port, render, &p, &p.http, err))) {
    tfx_net_close(p.sock);
    return rc;
  }
  tfx_log(TFX_LOG_INFO, "PS-START", "listening on %s", ep);
  tfx_notify_ready("ps: waiting for the plan");
  serve(&p);
  tfx_notify_stopping();
  tfx_log(TFX_LOG_INFO, "PS-STOP",
          "stopping at step %lld: %llu pushes applied, %llu stale dropped, %llu rejected, %llu copied on write, "
          "%llu bytes sent to its backup",
          (long long)p.version, (unsigned long long)p.stats.applied, (unsigned long long)p.stats.stale,
          (unsigned long long)p.stats.rejected, (unsigned long long)p.stats.cow_copies,
          (unsigned long long)p.stats.replica_bytes);
  if (ps__initialized(p.mirror)) {
    tfx_log(TFX_LOG_INFO, "PS-STOP-COPY",
            "%s of ps instance %d at step %lld: %llu pushes applied, %llu stale dropped, %d steps in its log (%.2f "
            "MiB)",
            ps__promoted(p.mirror) ? "promoted copy" : "backup", p.mirror->index,
            (long long)(p.mirror->version + p.mirror->log_steps), (unsigned long long)p.mirror->stats.applied,
            (unsigned long long)p.mirror->stats.stale, p.mirror->log_steps, (double)p.mirror->log_bytes / 1048576.0);
  }
  tfx_http_stop(p.http);
  pthread_mutex_destroy(&p.view.lock);
  ps__order_drop(&p, 0, NULL);
  ps__drop_pending(&p);
  ps__ckpt_finish(&p); /* the checkpoint the writer thread is writing is written whole */
  ps__ckpt_drop(&p);
  ps__push_free_scratch(&p);
  ps__helper_destroy(p.helper);
  mirror_destroy(p.mirror);
  ps__log_free(&p); /* a restarted ps's own instance held as a backup */
  ps__backup_close(&p);
  tfx_net_close(p.sock);
  free_shards(&p);
  return TFX_OK;
}
