/* The master's decisions as pure functions of numbers: when a checkpoint is due and at which step it is asked,
 * when a failed one is retried, when a lost ps is waited for, which steps evaluation and checkpoints come next.
 * No sockets, no clock, no state: the callers (ckpt.c, loop.c, startup.c, serve.c) read the clock and the
 * master's state and pass them in, so tests/unit/test_master_rules.c checks every decision with plain values.
 * Room-private (master__); thread-free. */
#ifndef TFX_MASTER_RULES_H
#define TFX_MASTER_RULES_H

#include <stdint.h>

/* How long sync ps may stand more than a step apart, the lowest not moving, before the chief rolls them back. */
#define MASTER_APART_STUCK_MS 10000

/* Sync with replicas: whether the ps have stood more than a step apart (hi - lo > 1) with the lowest at one step for
 * limit_ms: a promoted backup that the workers' kept pushes cannot bring to the others' step (a worker died with the
 * pushes it kept). *since (0: not apart) and *at (the lowest step then) are the caller's, updated here. */
int master__apart_stuck(int64_t lo, int64_t hi, int64_t now_ms, int64_t limit_ms, int64_t *since, int64_t *at);
/* How many times a checkpoint is asked again further ahead, and a final checkpoint after a lost ps. */
#define MASTER_CKPT_ATTEMPTS 8

/* The first multiple of every after step (INT64_MAX when every is 0: never). */
int64_t master__next_multiple(int64_t step, int64_t every);
/* The first evaluation point of a chief starting at start_step whose run last evaluated at last_eval (-1: never):
 * a point the run passed while no chief was there to evaluate (after the last evaluation, at or before the start)
 * is due at once; else the first multiple of every after the start. */
int64_t master__first_eval(int64_t start_step, int64_t last_eval, int64_t every);
/* next advanced by every until it is past both step and written (unchanged when already past). */
int64_t master__advance(int64_t next, int64_t every, int64_t step, int64_t written);
/* How many steps before a periodic checkpoint's step the master asks for it. Sync: a quarter of the interval
 * `every`, at least three times the steps the last tick took, at least 1 and below every; async: 0. */
int64_t master__ckpt_lead(int sync, int64_t every, int64_t tick);
/* Whether the checkpoint of next_ckpt (a multiple of every_steps, which every ps writes by itself as it reaches
 * it) is collected now: every ps has reached it (least_version: the smallest ps version) and it is below
 * max_steps (that one is the final checkpoint's). */
int master__ckpt_collect(int64_t next_ckpt, int64_t least_version, int64_t max_steps);
/* Whether a periodic checkpoint is due by seconds: every_secs > 0 and that long since the last one. */
int master__ckpt_due_by_time(int64_t every_secs, int64_t now_ms, int64_t last_ckpt_ms);
/* Whether the periodic checkpoint is asked now: due by steps (step + lead reaches next_ckpt, which is below
 * max_steps: that one is the final checkpoint's) or by time, the run short of max_steps, and past retry_at. */
int master__ckpt_due(int64_t step, int64_t lead, int64_t next_ckpt, int64_t max_steps, int by_time, int64_t now_ms,
                     int64_t retry_at);
/* The step a periodic checkpoint asks for at attempt 0, 1, ...: sync a step still ahead of max_version (1, 3,
 * 5... ahead), or next_ckpt when that is further and below max_steps; async where the ps stand; never past
 * max_steps. */
int64_t master__ckpt_step(int sync, int64_t max_version, int attempt, int64_t next_ckpt, int64_t max_steps);
/* Whether the final checkpoint's result rc, at its attempts-th try, sends the loop back to training: a lost ps
 * (TFX_EPEER) or a ps past the step (TFX_ESTATE), fewer than MASTER_CKPT_ATTEMPTS tries, no stop asked. */
int master__final_retry(int rc, int attempts, int stop_requested);
/* Whether a failed version poll rc is waited out: a ps not answering (TFX_EPEER) for less than timeout_s since
 * lost_since_ms (0: first miss). */
int master__ps_wait(int rc, int64_t lost_since_ms, int64_t now_ms, int timeout_s);
/* Whether a master that starts from a checkpoint at ckpt_step (have: one was found) finds the run over: the
 * checkpoint is at max_steps, and the run counts its steps from 0 (relative training, `training.steps`, counts
 * them from the checkpoint it starts from). A master restarted after the final checkpoint then evaluates and
 * finishes without waiting for workers that have already left. */
int master__run_over(int have, int64_t ckpt_step, int64_t max_steps, int relative);
/* Whether the final evaluation stands: it scored a step at or past final_step (rc 0, eval_step), or its data was
 * refused (refused: asking again cannot help). Otherwise it is asked again (master__final_eval_retry). */
int master__final_eval_done(int rc, int refused, int64_t eval_step, int64_t final_step);
/* Whether a final evaluation that did not stand is asked again: less than timeout_s since the first failure at
 * first_fail_ms (a lost ps is given as long to come back as at any other time). */
int master__final_eval_retry(int64_t first_fail_ms, int64_t now_ms, int timeout_s);
/* The step at which a starting master adopts the live state of its n ps instead of initializing them, or -1:
 * every ps serves (serving[p]: initialized), holds its part of the plan (shards[p] == want[p]), and all stand at
 * one step (version[p]) that is not behind the newest checkpoint (ckpt_step; -1: none). A restarted master then
 * loses no step the ps already took. */
int64_t master__adopt_step(int n, const int *serving, const int64_t *shards, const int64_t *want,
                           const int64_t *version, int64_t ckpt_step);
/* Whether the n-th dropped frame or report is logged: the first 10, then at powers of two. */
int master__log_drop(int64_t n);

#endif
