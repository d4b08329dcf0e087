/* The ps's checkpoint shard: written once the version reaches the step the master asked for. */
#include "store/ckpt.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* What a written checkpoint reports: the shard file's and the row file's checksum and size. */
typedef struct ckpt_sums {
  uint32_t crc, rows_crc;
  uint64_t bytes, rows_bytes;
} ckpt_sums;

/* Answers the parked checkpoint request with the file's path and sums, or the error (rc, text). */
static void answer_checkpoint(ps_state *p, const char *path, const ckpt_sums *sums, int rc, const char *text) {
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
  env.request_id = p->ckpt_request;
  env.step = p->version;
  env.path = (char *)path;
  env.stats = kvp;
  env.n_stats = sums->rows_bytes ? 4 : 2; /* rows only when this ps holds lazy tables */
  if (rc) {
    env.code = rc;
    env.error = (char *)text;
  }
  tfx_wire_send(p->sock, &p->ckpt_identity, &env, NULL, 0, NULL);
}

static void write_checkpoint(ps_state *p) {
  char path[1200];
  tfx_ckpt_part_path(path, sizeof path, p->ckpt_dir, p->index, TFX_CKPT_SHARD);
  ckpt_sums sums = {0};
  tfx_err err;
  tfx_err_clear(&err);
  int rc = tfx_mkdirs(p->ckpt_dir, &err);
  if (!rc) {
    rc = write_shard(p, p->ckpt_step, path, &sums.crc, &sums.bytes, &err);
  }
  if (!rc) {
    rc = ps__lazy_save(p, p->ckpt_dir, p->ckpt_step, &sums.rows_crc, &sums.rows_bytes, &err);
  }
  answer_checkpoint(p, path, &sums, rc, err.msg);
  if (rc) {
    tfx_log(TFX_LOG_ERROR, "PS-CKPT-FAIL", "%s", err.msg);
  } else {
    tfx_log(TFX_LOG_INFO, "PS-CKPT", "wrote %s at step %lld", path, (long long)p->version);
  }
  zmq_msg_close(&p->ckpt_identity);
  p->ckpt_pending = 0;
}

void ps__ckpt_drop(ps_state *p) {
  if (p->ckpt_pending) {
    zmq_msg_close(&p->ckpt_identity);
  }
  p->ckpt_pending = 0;
}

void ps__ckpt_service(ps_state *p) {
  if (p->ckpt_pending && ps__ckpt_due(p)) {
    write_checkpoint(p);
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
  if (p->ckpt_pending) {
    zmq_msg_close(&p->ckpt_identity);
  }
  snprintf(p->ckpt_dir, sizeof p->ckpt_dir, "%s", e->path);
  p->ckpt_step = e->step;
  p->ckpt_request = e->request_id;
  p->ckpt_pending = 1;
  zmq_msg_init(&p->ckpt_identity);
  zmq_msg_copy(&p->ckpt_identity, &m->identity);
  if (ps__is_sync(p) && p->version > p->ckpt_step) {
    /* The values of that step are gone: say so rather than label later values with it. */
    zmq_msg_close(&p->ckpt_identity);
    p->ckpt_pending = 0;
    return tfx_err_set(err, TFX_ESTATE, "checkpoint at step %lld: this ps is already at step %lld", (long long)e->step,
                       (long long)p->version);
  }
  if (p->version >= p->ckpt_step) {
    write_checkpoint(p);
  }
  return TFX_OK;
}
