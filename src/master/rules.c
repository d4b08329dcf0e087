/* The master's decisions as pure functions (rules.h): the checkpoint schedule and its retries, waiting out a
 * lost ps, rate-limited logging of dropped frames. */
#include "master/rules.h"

#include "common/err.h"

int64_t master__next_multiple(int64_t step, int64_t every) {
  return every ? (step / every + 1) * every : INT64_MAX;
}

int64_t master__first_eval(int64_t start_step, int64_t last_eval, int64_t every) {
  int64_t from = last_eval >= 0 && last_eval < start_step ? last_eval : start_step;
  return master__next_multiple(from, every);
}

int64_t master__advance(int64_t next, int64_t every, int64_t step, int64_t written) {
  while (next <= step || next <= written) {
    next += every;
  }
  return next;
}

/* Sync ps hold a checkpoint request until they reach its step and write exactly that step, so asking ahead (a
 * quarter of the interval, and at least three times the steps the last tick took) means an evaluation or a slow
 * tick can never let the step pass; async writes where the ps stand, so it asks on the step. */
int64_t master__ckpt_lead(int sync, int64_t every, int64_t tick) {
  if (!sync) {
    return 0;
  }
  int64_t lead = every / 4;
  lead = 3 * tick > lead ? 3 * tick : lead;
  if (lead >= every) {
    return every > 1 ? every - 1 : 1;
  }
  return lead < 1 ? 1 : lead;
}

int master__ckpt_collect(int64_t next_ckpt, int64_t least_version, int64_t max_steps) {
  return next_ckpt <= least_version && next_ckpt < max_steps;
}

int master__ckpt_due_by_time(int64_t every_secs, int64_t now_ms, int64_t last_ckpt_ms) {
  return every_secs > 0 && now_ms - last_ckpt_ms >= every_secs * 1000;
}

int master__ckpt_due(int64_t step, int64_t lead, int64_t next_ckpt, int64_t max_steps, int by_time, int64_t now_ms,
                     int64_t retry_at) {
  int due = (step + lead >= next_ckpt && next_ckpt < max_steps) || by_time;
  return due && step < max_steps && now_ms >= retry_at;
}

/* Sync asks for the step after the newest the master knows; when a ps has already passed it (an evaluation ran
 * meanwhile, or the ps moved on while the request travelled), each attempt moves the request further ahead. */
int64_t master__ckpt_step(int sync, int64_t max_version, int attempt, int64_t next_ckpt, int64_t max_steps) {
  int64_t at = max_version + (sync ? 1 + 2 * attempt : 0); /* sync: a step still ahead, written exactly */
  if (sync && at < next_ckpt && next_ckpt < max_steps) {
    at = next_ckpt; /* asked a little ahead (see master__ckpt_lead): the ps hold at exactly that step */
  }
  return at >= max_steps ? max_steps : at;
}

int master__final_retry(int rc, int attempts, int stop_requested) {
  return (rc == TFX_EPEER || rc == TFX_ESTATE) && attempts < MASTER_CKPT_ATTEMPTS && !stop_requested;
}

int master__ps_wait(int rc, int64_t lost_since_ms, int64_t now_ms, int timeout_s) {
  return rc == TFX_EPEER && (!lost_since_ms || now_ms - lost_since_ms < timeout_s * 1000LL);
}

int master__run_over(int have, int64_t ckpt_step, int64_t max_steps, int relative) {
  return have && !relative && ckpt_step >= max_steps;
}

int master__final_eval_done(int rc, int refused, int64_t eval_step, int64_t final_step) {
  return (rc == TFX_OK && eval_step >= final_step) || (rc != TFX_OK && refused);
}

int master__final_eval_retry(int64_t first_fail_ms, int64_t now_ms, int timeout_s) {
  return now_ms - first_fail_ms < timeout_s * 1000LL;
}

int64_t master__adopt_step(int n, const int *serving, const int64_t *shards, const int64_t *want,
                           const int64_t *version, int64_t ckpt_step) {
  for (int p = 0; p < n; p++) {
    if (!serving[p] || shards[p] != want[p] || version[p] != version[0]) {
      return -1;
    }
  }
  return n > 0 && version[0] >= ckpt_step ? version[0] : -1;
}

int master__log_drop(int64_t n) {
  return n <= 10 || (n & (n - 1)) == 0;
}

int master__apart_stuck(int64_t lo, int64_t hi, int64_t now_ms, int64_t limit_ms, int64_t *since, int64_t *at) {
  if (hi - lo <= 1) {
    *since = 0;
    return 0;
  }
  if (!*since || lo != *at) { /* apart from now on, or the lowest moved: the clock starts again */
    *since = now_ms;
    *at = lo;
  }
  return now_ms - *since >= limit_ms;
}
