/* The ps's checkpoint shard: written once the version reaches the step the master asked for. */
#include "store/ckpt.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "ps/ps_impl.h"

static int write_shard(ps_state *p, int64_t step, const char *path, uint32_t *crc, uint64_t *bytes, tfx_err *err) {
  int ns = tfx_optim_slots(&p->opt), n = 0;
  tfx_ckpt_entry *e = calloc((size_t)p->n_shards * 3 + 1, sizeof *e);
  if (!e) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; i < p->n_shards; i++) {
    shard *s = &p->shards[i];
    if (s->table) {
      continue; /* lazy tables go to the row file (ps__lazy_save) */
    }
    tfx_ckpt_slice slice = {.key = s->key,
                            .rank = s->rank,
                            .dims = s->shape,
                            .row_begin = s->row_begin,
                            .row_end = s->row_end,
                            .version = (uint64_t)p->version,
                            .count = s->count,
                            .value = s->value->data,
                            .slots = s->slots,
                            .n_slots = ns};
    n += tfx_ckpt_slice_entries(&e[n], &slice);
  }
  int rc = tfx_ckpt_write(path, step, e, n, crc, bytes, err);
  free(e);
  return rc;
}

/* Answers a checkpoint request (identity, request_id) for step with the shard's path and sums, or the error. */
static void answer_checkpoint(ps_state *p, zmq_msg_t *identity, uint64_t request_id, int64_t step, const char *path,
                              const ps_ckpt_sums *sums, int rc, const char *text) {
  const char *keys[4] = {"crc32", "bytes", "rows_crc32", "rows_bytes"};
  double values[4] = {sums->crc, (double)sums->bytes, sums->rows_crc, (double)sums->rows_bytes};
  Tfx__KeyValue kv[4], *kvp[4];
  for (int i = 0; i < 4; i++) {
    tfx__key_value__init(&kv[i]);
    kv[i].key = (char *)keys[i];
    kv[i].value = values[i];
    kvp[i] = &kv[i];
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLY);
  env.request_id = request_id;
  env.step = step;
  env.path = (char *)path;
  env.stats = kvp;
  env.n_stats = sums->rows_bytes ? 4 : 2; /* rows only when this ps holds lazy tables */
  if (rc) {
    env.code = rc;
    env.error = (char *)text;
  }
  tfx_wire_send(p->sock, identity, &env, NULL, 0, NULL);
}

/* The checkpoint of step this ps wrote since its last INIT and still remembers, or NULL. */
static const ps_ckpt_done *recall(const ps_state *p, int64_t step) {
  int64_t n = p->n_ckpt_done < PS_CKPT_DONE ? p->n_ckpt_done : PS_CKPT_DONE;
  for (int64_t i = 0; i < n; i++) {
    const ps_ckpt_done *d = &p->ckpt_done[(p->n_ckpt_done - 1 - i) % PS_CKPT_DONE];
    if (d->step == step) {
      return d;
    }
  }
  return NULL;
}

static void remember(ps_state *p, int64_t step, const ps_ckpt_sums *sums, int rc, const char *why) {
  ps_ckpt_done *d = &p->ckpt_done[p->n_ckpt_done++ % PS_CKPT_DONE];
  *d = (ps_ckpt_done){.step = step,
                      .crc = sums->crc,
                      .rows_crc = sums->rows_crc,
                      .bytes = sums->bytes,
                      .rows_bytes = sums->rows_bytes,
                      .rc = rc};
  snprintf(d->why, sizeof d->why, "%s", rc ? why : "");
}

/* Remembers the write of the checkpoint of step (path: its shard; at: the version written) and logs it: PS-CKPT-FAIL naming why, or PS-CKPT
 * (quiet: a write of its own at a multiple of every_steps, logged at debug level). */
static void noted(ps_state *p, int64_t step, int64_t at, const char *path, const ps_ckpt_sums *sums, int rc,
                  const char *why, int quiet) {
  remember(p, step, sums, rc, why);
  if (rc) {
    snprintf(p->ckpt_fail, sizeof p->ckpt_fail, "%s", why);
    tfx_log(TFX_LOG_ERROR, "PS-CKPT-FAIL", "%s", why);
  } else {
    tfx_log(quiet ? TFX_LOG_DEBUG : TFX_LOG_INFO, "PS-CKPT", "wrote %s at step %lld", path, (long long)at);
    ps__forward_ckpt(p, at); /* replicas: the backup may drop its log below it */
  }
}

/* Writes this ps's files of the checkpoint of step into dir (its shard path into path); remembers the result.
 * quiet: a write of its own at a multiple of every_steps, logged at debug level. */
static int write_files(ps_state *p, const char *dir, int64_t step, char *path, size_t n, ps_ckpt_sums *sums, int quiet) {
  ps__ckpt_finish(p); /* one checkpoint at a time: a delta's parent is complete before its child is written */
  tfx_ckpt_part_path(path, n, dir, p->index, TFX_CKPT_SHARD);
  tfx_err err;
  tfx_err_clear(&err);
  int rc = tfx_mkdirs(dir, &err);
  if (!rc) {
    rc = write_shard(p, step, path, &sums->crc, &sums->bytes, &err);
  }
  if (!rc) {
    rc = ps__lazy_save(p, dir, step, &sums->rows_crc, &sums->rows_bytes, &err);
  }
  noted(p, step, p->version, path, sums, rc, err.msg, quiet);
  if (!rc) {
    p->ckpt_full_next = 0; /* a row file written in place after a failed one was full (ps__lazy_parent) */
  }
  return rc;
}

/* A checkpoint written by the writer thread from a copy (checkpoint.background): its result is taken (remembered,
 * logged) by the ps's thread once done is set, or when the ps must wait for it (ps__ckpt_finish). */
struct ps_ckpt_job {
  pthread_t thread;
  int threaded; /* 0: no thread could be made, written in the ps's thread */
  atomic_int done;
  ps_snap *snap;
  int64_t step;
  int quiet, rc;
  char path[1200];
  ps_ckpt_sums sums;
  tfx_err err;
  double ms;
};

static void *writer(void *arg) {
  ps_ckpt_job *j = arg;
  double t0 = tfx_now_us();
  j->rc = ps__snap_write(j->snap, j->path, sizeof j->path, &j->sums, &j->err);
  j->ms = (tfx_now_us() - t0) / 1000.0;
  atomic_store(&j->done, 1);
  return NULL;
}

/* Takes the finished (or waited for) job's result: remembered for the master, logged; a failed one makes the
 * next row file full, since the tables were marked at its step when copied. */
static void collect(ps_state *p) {
  ps_ckpt_job *j = p->ckpt_job;
  if (j->threaded) {
    pthread_join(j->thread, NULL);
  }
  p->ckpt_job = NULL;
  noted(p, j->step, j->step, j->path, &j->sums, j->rc, j->err.msg, j->quiet);
  if (j->rc) {
    p->ckpt_full_next = 1;
  } else {
    ps__snap_log(j->snap, &j->sums, j->ms);
  }
  ps__snap_free(j->snap);
  free(j);
}

void ps__ckpt_finish(ps_state *p) {
  if (p && p->ckpt_job) {
    collect(p);
  }
}

int ps__ckpt_poll(ps_state *p) {
  if (p && p->ckpt_job && atomic_load(&p->ckpt_job->done)) {
    collect(p);
    return 1;
  }
  return 0;
}

int ps__ckpt_writing(const ps_state *p) {
  return p && p->ckpt_job;
}

/* Whether the writer thread is writing the checkpoint of step. */
static int writing_step(const ps_state *p, int64_t step) {
  return p->ckpt_job && p->ckpt_job->step == step;
}

/* Copies the checkpoint of step into dir and starts the writer thread on the copy (after the previous one's);
 * 0 when it cannot (no memory for the copy): the caller writes in place. */
static int start_job(ps_state *p, const char *dir, int64_t step, int quiet) {
  ps__ckpt_finish(p);
  ps_ckpt_job *j = calloc(1, sizeof *j);
  if (!j) {
    return 0;
  }
  tfx_err_clear(&j->err);
  j->step = step;
  j->quiet = quiet;
  if (ps__snap_take(p, dir, step, &j->snap, &j->err)) {
    tfx_log(TFX_LOG_WARN, "PS-CKPT-COPY", "%s: written in the ps's thread instead", j->err.msg);
    free(j);
    return 0;
  }
  atomic_init(&j->done, 0);
  p->ckpt_job = j;
  j->threaded = pthread_create(&j->thread, NULL, writer, j) == 0;
  if (!j->threaded) {
    writer(j);
  }
  return 1;
}

/* Answers a request for the checkpoint d this ps has written (or failed to). */
static void answer_done(ps_state *p, zmq_msg_t *identity, uint64_t request_id, const char *dir,
                        const ps_ckpt_done *d) {
  char path[1200];
  tfx_ckpt_part_path(path, sizeof path, dir, p->index, TFX_CKPT_SHARD);
  ps_ckpt_sums sums = {.crc = d->crc, .rows_crc = d->rows_crc, .bytes = d->bytes, .rows_bytes = d->rows_bytes};
  answer_checkpoint(p, identity, request_id, d->step, path, &sums, d->rc, d->why);
}

static void end_parked(ps_state *p) {
  zmq_msg_close(&p->ckpt_identity);
  p->ckpt_pending = 0;
}

static void write_checkpoint(ps_state *p) {
  char path[1200];
  ps__forward_catch_up(p); /* replicas: the backup's log then ends at the checkpoint's step (ps__log_checkpoint) */
  ps_ckpt_sums sums = {0};
  int rc = write_files(p, p->ckpt_dir, p->ckpt_step, path, sizeof path, &sums, 0);
  answer_checkpoint(p, &p->ckpt_identity, p->ckpt_request, p->version, path, &sums, rc, p->ckpt_fail);
  end_parked(p);
}

/* At a multiple of checkpoint.every_steps a primary writes the checkpoint by itself (the master collects it and
 * writes the manifest), unless the directory is already complete (written before a roll-back: kept). */
static void write_own(ps_state *p) {
  int64_t every = p->cfg.ckpt_every_steps, step = p->version;
  if (!every || !ps__serves(p) || step <= p->ckpt_auto_from || step % every ||
      recall(p, step)) {
    return;
  }
  p->ckpt_auto_from = step;
  ps__forward_catch_up(p); /* replicas: the backup's log then ends at the checkpoint's step (ps__log_checkpoint) */
  char dir[1100], path[1200];
  tfx_ckpt_dir(p->node->run_dir, step, dir, sizeof dir);
  ps_ckpt_sums sums = {0};
  if (!tfx_ckpt_has_manifest(dir) && !(p->cfg.ckpt_background && start_job(p, dir, step, 1))) {
    write_files(p, dir, step, path, sizeof path, &sums, 1);
  }
}

void ps__ckpt_reset(ps_state *p) {
  ps__ckpt_finish(p);
  p->n_ckpt_done = 0;
  p->ckpt_auto_from = p->version;
}

void ps__ckpt_drop(ps_state *p) {
  if (p->ckpt_pending) {
    zmq_msg_close(&p->ckpt_identity);
  }
  p->ckpt_pending = 0;
}

void ps__ckpt_service(ps_state *p) {
  ps__ckpt_poll(p);
  write_own(p);
  const ps_ckpt_done *d = p->ckpt_pending ? recall(p, p->ckpt_step) : NULL;
  if (d) {
    answer_done(p, &p->ckpt_identity, p->ckpt_request, p->ckpt_dir, d);
    end_parked(p);
  } else if (p->ckpt_pending && ps__ckpt_due(p) && !writing_step(p, p->ckpt_step)) {
    write_checkpoint(p); /* (one of that step being written is answered once written, above) */
  }
}

/* A checkpoint directory a peer names must be RUN/checkpoints/ckpt-DIGITS under this ps's own run directory: a
 * ps never writes (or makes directories) anywhere else. */
static int check_ckpt_path(const ps_state *p, const char *path, tfx_err *err) {
  char mine[1100], want[PATH_MAX], parent[1100], got[PATH_MAX];
  const char *base = strrchr(path, '/');
  snprintf(mine, sizeof mine, "%s/checkpoints", p->node->run_dir);
  int named = base && !strncmp(base + 1, "ckpt-", 5) && base[6] && strspn(base + 6, "0123456789") == strlen(base + 6);
  if (named) {
    snprintf(parent, sizeof parent, "%.*s", (int)(base - path), path);
  }
  if (!named || tfx_mkdirs(mine, NULL) || !realpath(mine, want) || !realpath(parent, got) || strcmp(want, got)) {
    return tfx_err_set(err, TFX_EINVAL,
                       "checkpoint: '%.300s' is not a checkpoint directory of this ps's run (%s/ckpt-N)", path, mine);
  }
  return TFX_OK;
}

int ps__checkpoint_request(ps_state *p, tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (!e->path || !*e->path) {
    return tfx_err_set(err, TFX_EINVAL, "checkpoint: no directory given");
  }
  int rc = check_ckpt_path(p, e->path, err);
  if (rc) {
    return rc;
  }
  const ps_ckpt_done *d = recall(p, e->step);
  if (d && (!d->rc || p->version > e->step)) {
    answer_done(p, &m->identity, e->request_id, e->path, d); /* written already (or failed, and passed) */
    return TFX_OK;
  }
  if (ps__is_sync(p) && p->version > e->step && !writing_step(p, e->step)) {
    /* The values of that step are gone: say so rather than label later values with it. */
    return tfx_err_set(err, TFX_ESTATE, "checkpoint at step %lld: this ps is already at step %lld", (long long)e->step,
                       (long long)p->version);
  }
  ps__ckpt_drop(p);
  snprintf(p->ckpt_dir, sizeof p->ckpt_dir, "%s", e->path);
  p->ckpt_step = e->step;
  p->ckpt_request = e->request_id;
  p->ckpt_pending = 1;
  zmq_msg_init(&p->ckpt_identity);
  zmq_msg_copy(&p->ckpt_identity, &m->identity);
  if (p->version >= p->ckpt_step && !writing_step(p, p->ckpt_step)) {
    write_checkpoint(p);
  }
  return TFX_OK;
}
