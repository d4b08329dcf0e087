/* Restoring a ps's shards from a checkpoint (MSG_INIT with a path): its own shard file first, then, for a plan of
 * another ps count, the other files of the checkpoint; each entry checked against the shard's slice; lazy tables
 * from the row files (lazy.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "nn/optim.h"
#include "ps/ps_impl.h"
#include "store/ckpt.h"

/* Writes "[d0,d1,..] rows b..e" into out. */
static void describe_slice(char *out, size_t n, int rank, const int64_t *dims, int64_t row_begin, int64_t row_end) {
  size_t at = (size_t)snprintf(out, n, "[");
  for (int d = 0; d < rank && at < n; d++) {
    at += (size_t)snprintf(out + at, n - at, "%s%lld", d ? "," : "", (long long)dims[d]);
  }
  if (at < n) {
    snprintf(out + at, n - at, "] rows %lld..%lld", (long long)row_begin, (long long)row_end);
  }
}

/* Whether a checkpoint entry holds exactly the shard's slice: same rank, dims and rows. */
static int same_slice(const shard *s, const tfx_ckpt_entry *e) {
  if (e->rank != s->rank || e->row_begin != s->row_begin || e->row_end != s->row_end || e->count != s->count) {
    return 0;
  }
  for (int d = 0; d < s->rank; d++) {
    if (e->dims[d] != s->shape[d]) {
      return 0;
    }
  }
  return 1;
}

/* Refuses an entry (name: the variable or one of its slots) that does not hold the shard's slice. */
static int check_entry(const shard *s, const char *name, const tfx_ckpt_entry *e, const char *path, tfx_err *err) {
  char want[96], got[96];
  describe_slice(want, sizeof want, s->rank, s->shape, s->row_begin, s->row_end);
  if (!e) {
    return tfx_err_set(err, TFX_ESHAPE, "restore '%.64s': expects %s, the shard has no such entry (%s)", name, want,
                       path);
  }
  if (same_slice(s, e)) {
    return TFX_OK;
  }
  describe_slice(got, sizeof got, e->rank, e->dims, e->row_begin, e->row_end);
  return tfx_err_set(err, TFX_ESHAPE, "restore '%.64s': expects %s, the shard holds %s (%s)", name, want, got, path);
}

/* Restores one optimizer slot; a missing one starts at zero with a warning (the optimizer may have changed). */
static int restore_slot(ps_state *p, shard *s, int k, const tfx_ckpt *c, const char *path, tfx_err *err) {
  char name[200];
  snprintf(name, sizeof name, "%s@%s", s->key, tfx_optim_slot_name(k));
  const tfx_ckpt_entry *se = tfx_ckpt_find(c, name);
  if (!se) {
    tfx_log(TFX_LOG_WARN, "PS-RESTORE-NO-SLOT", "'%s': %s has no such slot of optimizer %s; it starts at zero", name,
            path, tfx_config_choice_name("optimizer.name", p->cfg.optimizer));
    return TFX_OK;
  }
  int rc = check_entry(s, name, se, path, err);
  if (!rc) {
    memcpy(s->slots[k], se->data, sizeof(float) * s->count);
  }
  return rc;
}

/* Restores from checkpoint file c every shard not yet done[] whose key c holds (value, then slots). */
static int restore_from(ps_state *p, const tfx_ckpt *c, const char *path, char *done, tfx_err *err) {
  int rc = TFX_OK;
  for (int i = 0; !rc && i < p->n_shards; i++) {
    shard *s = &p->shards[i];
    const tfx_ckpt_entry *e = s->table || done[i] ? NULL : tfx_ckpt_find(c, s->key);
    if (!e) {
      continue; /* a lazy table (from the row files), done, or held by another file */
    }
    if (!(rc = check_entry(s, s->key, e, path, err))) {
      memcpy(s->value->data, e->data, sizeof(float) * s->count);
    }
    for (int k = 0; !rc && k < tfx_optim_slots(&p->opt); k++) {
      rc = restore_slot(p, s, k, c, path, err);
    }
    done[i] = 1;
  }
  return rc;
}

/* Whether a dense shard is not restored yet (done[i] == 0). */
static int missing(const ps_state *p, const char *done) {
  for (int i = 0; i < p->n_shards; i++) {
    if (!p->shards[i].table && !done[i]) {
      return 1;
    }
  }
  return 0;
}

/* Restores the shards not yet done from the other files of checkpoint dir (a plan of another ps count: the
 * manifest lists every file of the checkpoint, and gives *step). */
static int restore_others(ps_state *p, const char *dir, int own, char *done, int64_t *step, tfx_err *err) {
  char file[1300];
  int nps = 0, rc = tfx_ckpt_verify(dir, step, &nps, err);
  for (int k = 0; !rc && k < nps; k++) {
    tfx_ckpt_part_path(file, sizeof file, dir, k, TFX_CKPT_SHARD);
    tfx_ckpt *c = NULL;
    if (k != own && !(rc = tfx_ckpt_read(file, &c, err))) {
      rc = restore_from(p, c, file, done, err);
    }
    tfx_ckpt_destroy(c);
  }
  return rc;
}

/* Restores every shard from the checkpoint of path (DIR/ps-K.shard): from this ps's own file, then, for a plan
 * of another ps count, from the files of the others (a shard's key and slice do not depend on the ps count, only
 * which ps holds it); lazy tables from the row files. */
int ps__restore_shards(ps_state *p, const char *path, tfx_err *err) {
  char dir[1200];
  const char *slash = strrchr(path, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  int64_t step = 0;
  int own = tfx_ckpt_part_owner(path, TFX_CKPT_SHARD), rc = TFX_OK;
  char *done = calloc((size_t)p->n_shards + 1, 1);
  if (!done) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (access(path, F_OK) == 0) { /* this ps's own file first: all it needs under the same ps count */
    tfx_ckpt *c = NULL;
    if (!(rc = tfx_ckpt_read(path, &c, err))) {
      step = c->step;
      rc = restore_from(p, c, path, done, err);
    }
    tfx_ckpt_destroy(c);
  } else {
    int nps = 0; /* a ps a larger plan added: its step is the manifest's, even with lazy shares only */
    rc = tfx_ckpt_verify(dir, &step, &nps, err);
  }
  if (!rc && missing(p, done)) {
    rc = restore_others(p, dir, own, done, &step, err);
  }
  for (int i = 0; !rc && i < p->n_shards; i++) {
    if (!p->shards[i].table && !done[i]) {
      rc = tfx_err_set(err, TFX_ESHAPE, "restore '%.64s': no shard file of %s holds it", p->shards[i].key, dir);
    }
  }
  free(done);
  if (!rc) {
    rc = ps__lazy_restore(p, dir, err);
  }
  for (int i = 0; !rc && i < p->n_shards; i++) {
    p->shards[i].changed = step;
  }
  if (!rc) {
    p->version = step;
  }
  return rc;
}

