/* Unit tests of src/ps/rules.c: the ps's decisions without sockets. Sync aggregation (one push per worker per
 * step, replicas_to_aggregate, the averaging factor), the ssp staleness bound, parking (capacity, the version a
 * push-pull waits for) and when a parked checkpoint is due; exact values throughout. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_impl.h"

/* A ps in `mode` at `version` with n_workers workers (ps_state is large: on the heap). */
static ps_state *make(tfx_mode mode, int64_t version, int n_workers, int replicas_to_aggregate) {
  ps_state *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->cfg.mode = mode;
  p->cfg.replicas_to_aggregate = replicas_to_aggregate;
  p->version = version;
  ps__sync_start(p, n_workers);
  return p;
}

static tfx_envelope from_worker(int w, int64_t step, uint32_t part, uint32_t parts) {
  tfx_envelope e = TFX__ENVELOPE__INIT;
  e.sender_role = TFX__ROLE__ROLE_WORKER;
  e.sender_index = w;
  e.step = step;
  e.part = part;
  e.parts = parts;
  return e;
}

Test(ps_rules, sync_start_counts_one_arrival_per_worker_unless_replicas_to_aggregate_says_otherwise) {
  ps_state *p = make(TFX_MODE_SYNC, 7, 3, 0);
  cr_assert_eq(p->n_workers, 3);
  cr_assert_eq(p->replicas, 3);
  cr_assert_eq(p->n_acc, 0);
  cr_assert_eq(p->n_grads, 0);
  cr_assert_eq(p->clock[0], 7);
  cr_assert_eq(p->clock[PS_MAX_WORKERS - 1], 7);
  p->cfg.replicas_to_aggregate = 2;
  ps__sync_start(p, 3);
  cr_assert_eq(p->replicas, 2);
  ps__sync_start(p, 0);
  cr_assert_eq(p->n_workers, 1, "no worker count: one");
  ps__sync_start(p, PS_MAX_WORKERS + 1);
  cr_assert_eq(p->n_workers, 1, "past PS_MAX_WORKERS: one");
  free(p);
}

Test(ps_rules, sync_takes_one_push_per_worker_per_step) {
  ps_state *p = make(TFX_MODE_SYNC, 5, 3, 0);
  cr_assert_eq(ps__sync_verdict(p, 6, 0), PS_SYNC_VERDICT_AHEAD);
  cr_assert_eq(ps__sync_verdict(p, 4, 0), PS_SYNC_VERDICT_STALE);
  cr_assert_eq(ps__sync_verdict(p, 5, 0), PS_SYNC_VERDICT_FRESH);
  cr_assert_eq(ps__sync_arrive(p, 0), 0);
  cr_assert_eq(ps__sync_verdict(p, 5, 0), PS_SYNC_VERDICT_STALE, "a second push of the step is a duplicate");
  cr_assert_eq(ps__sync_verdict(p, 5, 1), PS_SYNC_VERDICT_FRESH);
  cr_assert_eq(ps__sync_arrive(p, 1), 0);
  cr_assert_eq(ps__sync_arrive(p, 2), 1, "the third arrival of three completes the step");
  cr_assert_eq(p->n_acc, 3);
  ps__sync_end_step(p);
  cr_assert_eq(p->version, 6);
  cr_assert_eq(p->stats.applied, 1);
  cr_assert_eq(p->n_acc, 0);
  cr_assert_eq(p->contributed[0], 0);
  cr_assert_eq(ps__sync_verdict(p, 6, 0), PS_SYNC_VERDICT_FRESH, "a new step: every worker counts again");
  free(p);
}

Test(ps_rules, sync_step_completes_at_replicas_to_aggregate_and_drops_the_backup_workers_push) {
  ps_state *p = make(TFX_MODE_SYNC, 0, 3, 2);
  cr_assert_eq(ps__sync_arrive(p, 2), 0);
  cr_assert_eq(ps__sync_arrive(p, 0), 1, "two of three workers complete the step");
  ps__sync_end_step(p);
  cr_assert_eq(ps__sync_verdict(p, 0, 1), PS_SYNC_VERDICT_STALE, "the backup worker's gradient is for step 0");
  cr_assert_eq(p->version, 1);
  free(p);
}

Test(ps_rules, sync_averages_the_gradients_that_arrived) {
  cr_assert_eq(ps__sync_scale(0), 0.0f, "a step of skips changes nothing");
  cr_assert_eq(ps__sync_scale(1), 1.0f);
  cr_assert_eq(ps__sync_scale(4), 0.25f);
  cr_assert_eq(ps__sync_scale(3), 1.0f / 3.0f);
}

Test(ps_rules, ssp_parks_a_worker_more_than_staleness_steps_ahead_of_the_slowest) {
  ps_state *p = make(TFX_MODE_SSP, 10, 3, 0);
  p->cfg.staleness = 2;
  p->clock[0] = 5;
  p->clock[1] = 3;
  p->clock[2] = 4;
  cr_assert_eq(ps__min_clock(p), 3);
  cr_assert_eq(ps__pull_ready(p, 0, 0), 1, "5 <= 3 + 2");
  ps__clock_tick(p, 0);
  cr_assert_eq(p->clock[0], 6);
  cr_assert_eq(ps__pull_ready(p, 0, 0), 0, "6 > 3 + 2");
  cr_assert_eq(ps__pull_ready(p, 0, -1), 1, "the master is not clocked");
  cr_assert_eq(ps__pull_ready(p, 0, 3), 1, "a worker past n_workers is not clocked");
  ps__clock_tick(p, 1);
  cr_assert_eq(ps__pull_ready(p, 0, 0), 1, "the slowest moved: 6 <= 4 + 2");
  cr_assert_eq(ps__pull_ready(p, 11, 1), 0, "the version is not there yet");
  ps__clock_tick(p, -1);
  ps__clock_tick(p, PS_MAX_WORKERS);
  cr_assert_eq(ps__min_clock(p), 4, "ticks of no worker change nothing");
  free(p);
}

Test(ps_rules, async_answers_regardless_of_clocks) {
  ps_state *p = make(TFX_MODE_ASYNC, 10, 2, 0);
  p->clock[0] = 100;
  cr_assert_eq(ps__pull_ready(p, 10, 0), 1);
  cr_assert_eq(ps__pull_ready(p, 11, 0), 0);
  free(p);
}

Test(ps_rules, parking_grows_to_a_limit) {
  int caps[] = {8, 24, 56, 120, 248, 504, 1016, 2040, 4088};
  int cap = 0;
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    cap = ps__park_capacity(cap);
    cr_assert_eq(cap, caps[i]);
  }
  cr_assert_eq(ps__park_capacity(cap), 0, "8184 would pass PS_MAX_PARKED (%d)", PS_MAX_PARKED);
}

Test(ps_rules, a_push_pull_waits_for_its_step_in_sync_only) {
  ps_state *p = make(TFX_MODE_SYNC, 7, 2, 0);
  tfx_envelope e = from_worker(1, 7, 0, 0);
  cr_assert_eq(ps__push_pull_version(p, &e), 8);
  p->cfg.mode = TFX_MODE_SSP;
  cr_assert_eq(ps__push_pull_version(p, &e), 0);
  free(p);
}

Test(ps_rules, a_checkpoint_is_due_at_its_step_or_after_it_unless_sync) {
  ps_state *p = make(TFX_MODE_SYNC, 200, 2, 0);
  p->ckpt_step = 200;
  cr_assert_eq(ps__ckpt_due(p), 1);
  p->ckpt_step = 199;
  cr_assert_eq(ps__ckpt_due(p), 0, "sync: the values of step 199 are gone");
  p->ckpt_step = 201;
  cr_assert_eq(ps__ckpt_due(p), 0);
  p->cfg.mode = TFX_MODE_ASYNC;
  p->ckpt_step = 199;
  cr_assert_eq(ps__ckpt_due(p), 1);
  free(p);
}

Test(ps_rules, parts_worker_and_the_end_of_the_run) {
  tfx_envelope whole = from_worker(4, 3, 0, 0), mid = from_worker(4, 3, 1, 3), last = from_worker(4, 3, 2, 3);
  cr_assert_eq(ps__is_part(&whole), 0);
  cr_assert_eq(ps__completes_step(&whole), 1);
  cr_assert_eq(ps__is_part(&mid), 1);
  cr_assert_eq(ps__completes_step(&mid), 0);
  cr_assert_eq(ps__completes_step(&last), 1);
  cr_assert_eq(ps__worker_of(&whole), 4);
  whole.sender_role = TFX__ROLE__ROLE_MASTER;
  cr_assert_eq(ps__worker_of(&whole), -1);
  ps_state *p = make(TFX_MODE_ASYNC, 100, 2, 0);
  p->cfg.max_steps = 100;
  cr_assert_eq(ps__past_the_end(p, &whole), 1);
  cr_assert_eq(ps__past_the_end(p, &last), 0, "a part is applied: its other parts were");
  p->cfg.max_steps = 0;
  cr_assert_eq(ps__past_the_end(p, &whole), 0, "no max_steps: no end");
  p->cfg.mode = TFX_MODE_SYNC;
  p->cfg.max_steps = 100;
  cr_assert_eq(ps__past_the_end(p, &whole), 0, "sync drops late pushes as stale instead");
  free(p);
}

/* Feeds a step's three gradients to the sync rules in `order` the way order.c does (held while ps__sync_hold says
 * so, summed once their turn came) and returns the sum. */
static float sum_in_arrival(ps_state *p, const int *order, const float *g) {
  float sum = 0.0f;
  int held[3], n_held = 0;
  ps__sync_start(p, 3);
  for (int k = 0; k < 3; k++) {
    tfx_envelope e = from_worker(order[k], p->version, 0, 0);
    e.type = TFX__MSG_TYPE__MSG_PUSH;
    if (ps__sync_hold(p, &e)) {
      held[n_held++] = order[k];
      continue;
    }
    sum += g[order[k]];
    ps__sync_arrive(p, order[k]);
    for (int i = 0; i < n_held; i++) {
      tfx_envelope h = from_worker(held[i], p->version, 0, 0);
      h.type = TFX__MSG_TYPE__MSG_PUSH;
      if (!ps__sync_hold(p, &h)) {
        sum += g[held[i]];
        ps__sync_arrive(p, held[i]);
        held[i] = held[--n_held];
        i = -1; /* look again from the start */
      }
    }
  }
  cr_assert_eq(n_held, 0, "a push is still held after every worker came");
  return sum;
}

Test(ps_rules, deterministic_sums_a_step_in_worker_order_whatever_the_arrival_order) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  static const float g[3] = {1.0f, 1e8f, -1e8f};
  ps_state *p = make(TFX_MODE_SYNC, 0, 3, 0);
  float first = sum_in_arrival(p, orders[0], g);
  int differ = 0;
  for (int k = 1; k < 6; k++) {
    float s = sum_in_arrival(p, orders[k], g);
    differ |= memcmp(&s, &first, sizeof s) != 0;
  }
  cr_assert(differ, "without training.deterministic every order summed alike: the test could not fail");
  p->cfg.deterministic = 1;
  float want = (g[0] + g[1]) + g[2];
  for (int k = 0; k < 6; k++) {
    float s = sum_in_arrival(p, orders[k], g);
    cr_assert(!memcmp(&s, &want, sizeof s), "order %d: sum %.9g, want %.9g", k, s, want);
  }
  p->cfg.replicas_to_aggregate = 2; /* backup workers: the step never waits for a given worker */
  ps__sync_start(p, 3);
  tfx_envelope e = from_worker(2, 0, 0, 0);
  e.type = TFX__MSG_TYPE__MSG_PUSH;
  cr_assert_not(ps__sync_hold(p, &e));
  free(p);
}
