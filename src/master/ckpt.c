/* Checkpoints of the running cluster: every ps writes its shard at one step, then the master writes the
 * manifest (store/ckpt.h names the files). At every multiple of checkpoint.every_steps the ps write their files
 * by themselves (ps/ckpt.c) and the master collects them as the ps pass it, so every multiple is a checkpoint
 * however fast the steps come; one asked by seconds or for a dry followed directory asks a step ahead in sync
 * mode and again further ahead when a ps has passed it; the schedule is in rules.c. Calls pscalls.c, serve.c (the
 * replies' statistics), observe.c and rules.c; the loop calls it. */
#include "store/ckpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>

#include "common/fs.h"
#include "common/log.h"
#include "config/plugin.h"
#include "master/master_impl.h"
#include "master/rules.h"
#include "store/ckptmemo.h"
#include "store/export.h"

/* What the ps replied to a CHECKPOINT request, per ps: the manifest's entries and the step each wrote. */
typedef struct ckpt_acc {
  uint32_t crc[1024], rows_crc[1024];
  uint64_t bytes[1024], rows_bytes[1024]; /* rows: the ps's row file of lazy tables (0: none) */
  int64_t step[1024];
} ckpt_acc;

/* A CHECKPOINT reply from ps p (ctx: the ckpt_acc being filled). */
static void on_ckpt_reply(void *ctx, int p, const tfx_envelope *e) {
  ckpt_acc *acc = ctx;
  if (p >= 1024) {
    return;
  }
  const Tfx__ShardWritten *w = e->written;
  acc->crc[p] = w ? w->crc32 : 0;
  acc->bytes[p] = w ? w->bytes : 0;
  acc->rows_crc[p] = w ? w->rows_crc32 : 0;
  acc->rows_bytes[p] = w ? w->rows_bytes : 0;
  acc->step[p] = e->step;
}

/* Asks every ps for its shard of step at in dir, then checks the steps they wrote and writes the manifest. */
static int collect_shards(master *m, int64_t at, char *dir, tfx_err *err) {
  ckpt_acc *acc = calloc(1, sizeof *acc);
  if (!acc || m->n_ps > 1024) {
    free(acc);
    return tfx_err_set(err, TFX_ENOMEM, "checkpoint bookkeeping");
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_CHECKPOINT);
  env.step = at;
  env.path = dir;
  /* A followed directory may run dry just before a step asked ahead: the ps would hold the request until files
   * land; ask again once the cluster moves instead (master__checkpoint_if_due). */
  int wait_ms = m->cfg.train_follow[0] && at > m->max_version ? 3000 : m->cfg.request_timeout_s * 1000;
  int rc = master__call_ps(m, &env, wait_ms, on_ckpt_reply, acc, err);
  for (int p = 0; !rc && p < m->n_ps; p++) {
    if (acc->step[p] != acc->step[0] && m->cfg.mode == TFX_MODE_SYNC) {
      rc = tfx_err_set(err, TFX_ESTATE, "checkpoint %lld: ps 0 wrote step %lld, ps %d step %lld; discarded",
                       (long long)at, (long long)acc->step[0], p, (long long)acc->step[p]);
    }
  }
  if (!rc) {
    rc = tfx_ckpt_write_manifest_rows(dir, at, m->n_ps, acc->crc, acc->bytes, acc->rows_crc, acc->rows_bytes, err);
  }
  if (!rc) { /* the ps checksummed what they wrote: pruning takes it as verified once its sizes match (else it
               * verifies it in full, as before); a restore checks every byte */
    tfx_ckpt_memo_accept(dir, NULL);
  }
  free(acc);
  return rc;
}

/* The checkpoint of step at (see master__checkpoint); prune: remove the checkpoints beyond keep_max after it
 * (a batch of collected ones prunes once, after its last: pruning verifies every kept checkpoint). */
static int checkpoint_at(master *m, int64_t at, int prune, tfx_err *err) {
  char dir[1100];
  int64_t have_step;
  int have_ps;
  tfx_ckpt_dir(m->n->run_dir, at, dir, sizeof dir);
  if (tfx_ckpt_verify(dir, &have_step, &have_ps, NULL) == TFX_OK) {
    return TFX_OK; /* already complete: keep it */
  }
  int rc = tfx_mkdirs(dir, err);
  if (!rc) {
    rc = collect_shards(m, at, dir, err);
  }
  if (rc) {
    return rc;
  }
  if (prune) {
    tfx_ckpt_prune(m->n->run_dir, m->cfg.keep_max);
  }
  tfx_log(TFX_LOG_INFO, "MASTER-CKPT", "checkpoint at step %lld: %s", (long long)at, dir);
  tfx_err xerr;
  if (m->cfg.export_every_ckpt && tfx_export_checkpoint(&m->cfg, m->n->run_dir, at, NULL, &xerr)) {
    tfx_log(TFX_LOG_WARN, "MASTER-EXPORT-FAIL", "export of step %lld: %s", (long long)at, xerr.msg);
  }
  master__observe(m, "checkpoint", at, NAN, NAN, NAN);
  m->hook_stop |= tfx_plugin_hook(m->n->plugin, TFX_HOOK_CHECKPOINT, at, NAN, NAN, m->n->run_dir);
  return TFX_OK;
}

int master__checkpoint(master *m, int64_t at, tfx_err *err) {
  return checkpoint_at(m, at, 1, err);
}

static void count_ckpt(master *m, int64_t *counter) {
  master__lock(m, 1);
  (*counter)++;
  master__lock(m, 0);
}

/* A checkpoint at the first step every ps can still write (master__ckpt_step; `sync`: at `next` when that is
 * still ahead, else where the ps stand); when a ps has already passed it, the versions are polled again and the
 * request moves further ahead, up to MASTER_CKPT_ATTEMPTS times. *written: the step last asked. */
static int checkpoint_ahead(master *m, int sync, int64_t next, int64_t *written, tfx_err *err) {
  int rc = TFX_OK;
  for (int attempt = 0; attempt < MASTER_CKPT_ATTEMPTS; attempt++) {
    if (attempt && (rc = master__poll_versions(m, err))) {
      return rc;
    }
    int64_t at = master__ckpt_step(sync, m->max_version, attempt, next, m->cfg.max_steps);
    rc = master__checkpoint(m, at, err);
    *written = at;
    if (rc != TFX_ESTATE) {
      return rc;
    }
    count_ckpt(m, &m->obs.ckpt_retries);
    tfx_log(TFX_LOG_INFO, "MASTER-CKPT-AHEAD", "%s: asking again further ahead", err->msg);
  }
  return rc;
}

int master__checkpoint_now(master *m, int64_t *written, tfx_err *err) {
  int rc = master__poll_versions(m, err);
  return rc ? rc : checkpoint_ahead(m, m->cfg.mode == TFX_MODE_SYNC, 0, written, err);
}

/* Each checkpoint is collected in turn (the ps answer from what they wrote) and its manifest written. One the ps
 * cannot give (a ps restarted since, or its write failed) is named and skipped; a ps not answering is asked
 * again after 1 s. */
void master__collect_written(master *m, int64_t now, int limit) {
  int collected = 0;
  for (int n = 0; n < limit && now >= m->ckpt_retry_at &&
                  master__ckpt_collect(m->next_ckpt, m->global_step, m->cfg.max_steps);
       n++) {
    tfx_err err;
    int rc = checkpoint_at(m, m->next_ckpt, 0, &err);
    collected += rc == TFX_OK;
    if (rc == TFX_EPEER) {
      m->ckpt_retry_at = tfx_now_ms() + 1000;
      count_ckpt(m, &m->obs.ckpt_failures);
      tfx_log(TFX_LOG_WARN, "MASTER-CKPT-FAIL", "%s; asking again in 1 s", err.msg);
      break;
    }
    if (rc) {
      count_ckpt(m, &m->obs.ckpt_failures);
      tfx_log(TFX_LOG_WARN, "MASTER-CKPT-MISSED", "checkpoint at step %lld: %s; skipped", (long long)m->next_ckpt,
              err.msg);
    } else {
      m->last_ckpt_ms = tfx_now_ms();
    }
    m->next_ckpt += m->cfg.ckpt_every_steps;
  }
  if (collected) {
    tfx_ckpt_prune(m->n->run_dir, m->cfg.keep_max);
  }
}

void master__checkpoint_if_due(master *m) {
  int64_t now = tfx_now_ms();
  int64_t tick = m->global_step - m->tick_step; /* the steps since the last tick, which the lead scales with */
  m->tick_step = m->global_step;
  master__collect_written(m, now, 64); /* the rest at the next tick: the loop serves its socket meanwhile */
  int64_t lead = master__ckpt_lead(m->cfg.mode == TFX_MODE_SYNC, m->cfg.ckpt_every_steps, tick);
  int by_time = master__ckpt_due_by_time(m->cfg.ckpt_every_secs, now, m->last_ckpt_ms);
  /* A followed directory gone dry holds the ps still short of the next multiple: a checkpoint is taken where they
   * stand when it was due by the lead, not a step ahead. Otherwise only seconds ask for one here. */
  int idle = m->cfg.train_follow[0] && tick == 0;
  int64_t next = idle ? m->next_ckpt : INT64_MAX;
  if (!master__ckpt_due(m->global_step, lead, next, m->cfg.max_steps, by_time, now, m->ckpt_retry_at)) {
    return;
  }
  tfx_err err;
  int64_t written = 0;
  if (checkpoint_ahead(m, m->cfg.mode == TFX_MODE_SYNC && !idle, 0, &written, &err)) {
    /* Not skipped: asked again at the next tick after a second, until it is written (or the run ends, whose
     * final checkpoint then holds everything). */
    m->ckpt_retry_at = tfx_now_ms() + 1000;
    count_ckpt(m, &m->obs.ckpt_failures);
    tfx_log(TFX_LOG_WARN, "MASTER-CKPT-FAIL", "%s; asking again in 1 s", err.msg);
    return;
  }
  m->last_ckpt_ms = tfx_now_ms();
  m->ckpt_retry_at = 0;
  m->next_ckpt = master__advance(m->next_ckpt, m->cfg.ckpt_every_steps, written, written);
}
