/* Unit tests of src/master/rules.c: the master's checkpoint and retry decisions as pure functions (the step a
 * periodic checkpoint asks for, its lead, whether it is due by steps or seconds, the next checkpoint after one
 * is written, the final checkpoint's retries, waiting out a lost ps, the rate of drop logs). */
#include <criterion/criterion.h>
#include <stdint.h>

#include "common/err.h"
#include "master/rules.h"

TestSuite(master_rules);

Test(master_rules, next_multiple_is_the_first_multiple_after_the_step) {
  cr_assert_eq(master__next_multiple(0, 100), 100);
  cr_assert_eq(master__next_multiple(99, 100), 100);
  cr_assert_eq(master__next_multiple(100, 100), 200); /* a resume at a checkpoint's step asks the next one */
  cr_assert_eq(master__next_multiple(250, 100), 300);
  cr_assert_eq(master__next_multiple(250, 0), INT64_MAX); /* every 0: never */
}

Test(master_rules, advance_passes_the_step_and_the_step_written) {
  cr_assert_eq(master__advance(100, 100, 100, 0), 200);
  cr_assert_eq(master__advance(100, 100, 90, 130), 200);  /* asked ahead: written at 130, next is 200 */
  cr_assert_eq(master__advance(100, 100, 350, 0), 400);   /* several intervals at once: one checkpoint */
  cr_assert_eq(master__advance(200, 100, 150, 150), 200); /* already past both: unchanged */
}

Test(master_rules, a_multiple_is_collected_once_every_ps_has_passed_it) {
  cr_assert_eq(master__ckpt_collect(100, 99, 1000), 0);  /* a ps short of it: not yet written there */
  cr_assert_eq(master__ckpt_collect(100, 100, 1000), 1);
  cr_assert_eq(master__ckpt_collect(100, 180, 1000), 1); /* passed: the ps wrote it on the way */
  cr_assert_eq(master__ckpt_collect(1000, 1000, 1000), 0); /* max_steps: the final checkpoint's */
  cr_assert_eq(master__ckpt_collect(INT64_MAX, 5000, INT64_MAX), 0); /* every_steps 0: never */
}

/* #28: at ~500 steps/s a 200 ms tick sees ~100-180 steps go by; every multiple of every_steps is still collected,
 * in order, none twice, whatever the steps per tick (the ps wrote each as they passed it). */
Test(master_rules, every_multiple_is_collected_however_fast_the_steps_come) {
  const int64_t every = 20, max_steps = 755, ticks[] = {0, 3, 141, 321, 322, 501, 661, 700, 755};
  int64_t next = master__next_multiple(0, every), got[64];
  int n = 0;
  for (size_t t = 0; t < sizeof ticks / sizeof *ticks; t++) {
    for (; master__ckpt_collect(next, ticks[t], max_steps); next += every) {
      got[n++] = next;
    }
  }
  cr_assert_eq(n, 37); /* 20, 40, ..., 740; 755 is the final checkpoint */
  for (int i = 0; i < n; i++) {
    cr_assert_eq(got[i], (i + 1) * every);
  }
}

Test(master_rules, async_asks_on_the_step) {
  cr_assert_eq(master__ckpt_lead(0, 100, 40), 0);
}

Test(master_rules, sync_lead_is_a_quarter_or_three_ticks) {
  cr_assert_eq(master__ckpt_lead(1, 100, 0), 25);  /* a quarter of the interval */
  cr_assert_eq(master__ckpt_lead(1, 100, 5), 25);  /* 3 * 5 = 15 < 25 */
  cr_assert_eq(master__ckpt_lead(1, 100, 10), 30); /* three times the last tick */
  cr_assert_eq(master__ckpt_lead(1, 100, 40), 99); /* never a whole interval: below every */
  cr_assert_eq(master__ckpt_lead(1, 3, 0), 1);     /* at least 1 */
  cr_assert_eq(master__ckpt_lead(1, 1, 0), 1);     /* every 1: 1 */
  cr_assert_eq(master__ckpt_lead(1, 0, 0), 1);     /* no periodic checkpoint: the lead does not matter, 1 */
}

Test(master_rules, due_by_time_needs_an_interval_and_its_seconds) {
  cr_assert_eq(master__ckpt_due_by_time(0, 1000000, 0), 0);
  cr_assert_eq(master__ckpt_due_by_time(60, 60000, 1), 0);
  cr_assert_eq(master__ckpt_due_by_time(60, 60001, 1), 1);
  cr_assert_eq(master__ckpt_due_by_time(60, 70000, 1), 1);
}

Test(master_rules, due_by_steps_with_the_lead) {
  /* step, lead, next_ckpt, max_steps, by_time, now, retry_at */
  cr_assert_eq(master__ckpt_due(74, 25, 100, 1000, 0, 5000, 0), 0);
  cr_assert_eq(master__ckpt_due(75, 25, 100, 1000, 0, 5000, 0), 1);
  cr_assert_eq(master__ckpt_due(120, 0, 100, 1000, 0, 5000, 0), 1);
}

Test(master_rules, the_checkpoint_at_max_steps_is_the_final_one) {
  cr_assert_eq(master__ckpt_due(990, 25, 1000, 1000, 0, 5000, 0), 0); /* next_ckpt == max_steps: the final's */
  cr_assert_eq(master__ckpt_due(990, 25, 1000, 1000, 1, 5000, 0), 1); /* by time it still is due */
  cr_assert_eq(master__ckpt_due(1000, 25, 900, 1000, 1, 5000, 0), 0); /* at max_steps: never periodic */
}

Test(master_rules, a_failed_checkpoint_waits_for_its_retry_time) {
  cr_assert_eq(master__ckpt_due(100, 0, 100, 1000, 0, 5999, 6000), 0);
  cr_assert_eq(master__ckpt_due(100, 0, 100, 1000, 0, 6000, 6000), 1);
}

Test(master_rules, async_checkpoints_where_the_ps_stand) {
  cr_assert_eq(master__ckpt_step(0, 137, 0, 200, 1000), 137);
  cr_assert_eq(master__ckpt_step(0, 137, 3, 200, 1000), 137);
  cr_assert_eq(master__ckpt_step(0, 1200, 0, 200, 1000), 1000);
}

Test(master_rules, sync_asks_a_step_ahead_and_further_on_each_attempt) {
  cr_assert_eq(master__ckpt_step(1, 137, 0, 100, 1000), 138);
  cr_assert_eq(master__ckpt_step(1, 137, 1, 100, 1000), 140);
  cr_assert_eq(master__ckpt_step(1, 137, 2, 100, 1000), 142);
}

Test(master_rules, sync_asks_for_the_scheduled_step_when_it_is_further) {
  cr_assert_eq(master__ckpt_step(1, 80, 0, 100, 1000), 100); /* asked with the lead: the ps hold at 100 */
  cr_assert_eq(master__ckpt_step(1, 99, 0, 100, 1000), 100);
  cr_assert_eq(master__ckpt_step(1, 100, 0, 100, 1000), 101);
  cr_assert_eq(master__ckpt_step(1, 980, 0, 1000, 1000), 981); /* next_ckpt at max_steps is not asked early */
}

Test(master_rules, never_past_max_steps) {
  cr_assert_eq(master__ckpt_step(1, 999, 0, 1100, 1000), 1000);
  cr_assert_eq(master__ckpt_step(1, 995, 4, 1100, 1000), 1000);
}

Test(master_rules, the_final_checkpoint_is_retried_after_a_lost_or_passed_ps) {
  cr_assert_eq(master__final_retry(TFX_EPEER, 1, 0), 1);
  cr_assert_eq(master__final_retry(TFX_ESTATE, 1, 0), 1);
  cr_assert_eq(master__final_retry(TFX_ESTATE, MASTER_CKPT_ATTEMPTS - 1, 0), 1);
}

Test(master_rules, the_final_checkpoint_ends_the_run_otherwise) {
  cr_assert_eq(MASTER_CKPT_ATTEMPTS, 8);
  cr_assert_eq(master__final_retry(TFX_OK, 1, 0), 0);
  cr_assert_eq(master__final_retry(TFX_ESYS, 1, 0), 0);
  cr_assert_eq(master__final_retry(TFX_EPEER, MASTER_CKPT_ATTEMPTS, 0), 0); /* tries used up */
  cr_assert_eq(master__final_retry(TFX_EPEER, 1, 1), 0);                    /* a stop was asked */
}

Test(master_rules, a_ps_that_does_not_answer_is_waited_for) {
  /* rc, lost_since, now, timeout_s */
  cr_assert_eq(master__ps_wait(TFX_EPEER, 0, 50000, 30), 1); /* the first miss */
  cr_assert_eq(master__ps_wait(TFX_EPEER, 20000, 49999, 30), 1);
  cr_assert_eq(master__ps_wait(TFX_EPEER, 20000, 50000, 30), 0); /* register_timeout_s reached: give up */
  cr_assert_eq(master__ps_wait(TFX_OK, 20000, 21000, 30), 0);
  cr_assert_eq(master__ps_wait(TFX_EPROTO, 0, 21000, 30), 0); /* only a silent ps is waited for */
}

Test(master_rules, drops_are_logged_ten_times_then_at_powers_of_two) {
  int logged[40] = {0};
  int n = 0;
  for (int64_t i = 1; i <= 1024; i++) {
    if (master__log_drop(i)) {
      logged[n++] = (int)i;
    }
  }
  int want[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 32, 64, 128, 256, 512, 1024};
  cr_assert_eq(n, 17);
  for (int i = 0; i < n; i++) {
    cr_assert_eq(logged[i], want[i], "drop %d", i);
  }
}

Test(master_rules, a_restarted_master_finds_the_run_over_at_a_checkpoint_at_max_steps) {
  /* have, ckpt_step, max_steps, relative */
  cr_assert_eq(master__run_over(1, 2500, 2500, 0), 1); /* restarted after the final checkpoint: evaluate, finish */
  cr_assert_eq(master__run_over(1, 2400, 2500, 0), 0); /* steps left: the workers are needed */
  cr_assert_eq(master__run_over(0, 0, 2500, 0), 0);    /* no checkpoint: a fresh start */
  cr_assert_eq(master__run_over(1, 2500, 2500, 1), 0); /* training.steps counts from the checkpoint */
}

Test(master_rules, the_final_evaluation_stands_only_at_the_final_step) {
  /* rc, refused, eval_step, final_step */
  cr_assert_eq(master__final_eval_done(TFX_OK, 0, 2500, 2500), 1);
  cr_assert_eq(master__final_eval_done(TFX_OK, 0, 2000, 2500), 0);    /* an older step (a ps restored): again */
  cr_assert_eq(master__final_eval_done(TFX_EPEER, 0, 2500, 2500), 0); /* the pull failed: again */
  cr_assert_eq(master__final_eval_done(TFX_ESTATE, 0, 0, 2500), 0);   /* a ps back empty: again */
  cr_assert_eq(master__final_eval_done(TFX_ECORRUPT, 1, 0, 2500), 1); /* data refused: asking again cannot help */
  /* first_fail_ms, now_ms, timeout_s */
  cr_assert_eq(master__final_eval_retry(10000, 39999, 30), 1);
  cr_assert_eq(master__final_eval_retry(10000, 40000, 30), 0); /* register_timeout_s reached: not evaluated */
}

Test(master_rules, a_starting_master_adopts_ps_that_agree_on_a_step) {
  int serving[2] = {1, 1};
  int64_t shards[2] = {3, 2};
  int64_t want[2] = {3, 2};
  int64_t version[2] = {1600, 1600};
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, -1), 1600);   /* no checkpoint yet */
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, 1200), 1600); /* ahead of the checkpoint */
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, 1600), 1600);
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, 2000), -1); /* behind it: restore it */
  version[1] = 1601;
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, -1), -1); /* steps differ */
  version[1] = 1600;
  serving[1] = 0;
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, -1), -1); /* a ps back empty */
  serving[1] = 1;
  shards[0] = 2;
  cr_assert_eq(master__adopt_step(2, serving, shards, want, version, -1), -1); /* another plan */
  cr_assert_eq(master__adopt_step(0, serving, shards, want, version, -1), -1);
}

/* A chief that starts past an evaluation point its run never evaluated (it was down, and the ps went on or were
 * adopted beyond it) evaluates at once; otherwise at the first multiple after the start (#30: evals at 1048, 2064,
 * then 4015 after a chief restart adopted the ps at 3217: 3000 was lost). */
Test(master_rules, first_eval_catches_up_a_point_passed_while_down) {
  cr_assert_eq(master__first_eval(3217, 2064, 1000), 3000);  /* 3000 passed unevaluated: due at once */
  cr_assert_eq(master__first_eval(3217, 3038, 1000), 4000);  /* 3000 evaluated (late): next is 4000 */
  cr_assert_eq(master__first_eval(2000, 3038, 1000), 3000);  /* rolled back behind the last eval: 3000 again */
  cr_assert_eq(master__first_eval(0, -1, 500), 500);         /* a fresh run */
  cr_assert_eq(master__first_eval(2500, -1, 1000), 3000);    /* no evaluation recorded */
  cr_assert_eq(master__first_eval(2500, 100, 0), INT64_MAX); /* eval.every_steps 0: only at the end */
}

Test(master_rules, ps_apart_with_the_lowest_still_for_the_limit_are_stuck) {
  int64_t since = 0, at = 0;
  cr_assert_not(master__apart_stuck(100, 101, 1000, 10000, &since, &at), "a step apart is sync's normal");
  cr_assert_eq(since, 0);
  cr_assert_not(master__apart_stuck(240, 248, 1000, 10000, &since, &at), "apart from now on: the clock starts");
  cr_assert_eq(since, 1000);
  cr_assert_not(master__apart_stuck(240, 248, 10999, 10000, &since, &at));
  cr_assert(master__apart_stuck(240, 248, 11000, 10000, &since, &at), "10 s apart, the lowest at 240: stuck");
  cr_assert_not(master__apart_stuck(243, 248, 11500, 10000, &since, &at), "the lowest moved: catching up");
  cr_assert_eq(since, 11500);
  cr_assert_not(master__apart_stuck(248, 248, 12000, 10000, &since, &at), "caught up");
  cr_assert_eq(since, 0);
}
