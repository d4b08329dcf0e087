/* Unit tests of src/train/watch.c: the rules of checkpoint.keep_best (which evaluation is the best) and
 * training.early_stopping (when patience is spent), and the metric a watch reads from an evaluation. */
#include <criterion/criterion.h>
#include <math.h>

#include "train/watch.h"

Test(watch, auto_mode_minimizes_losses_and_maximizes_the_rest) {
  tfx_watch w;
  tfx_watch_init(&w, "loss", TFX_WATCH_AUTO, 0, 0);
  cr_assert(!w.maximize);
  tfx_watch_init(&w, "log_loss", TFX_WATCH_AUTO, 0, 0);
  cr_assert(!w.maximize);
  tfx_watch_init(&w, "accuracy", TFX_WATCH_AUTO, 0, 0);
  cr_assert(w.maximize);
  tfx_watch_init(&w, "auc", TFX_WATCH_MIN, 0, 0);
  cr_assert(!w.maximize, "an explicit mode wins");
}

Test(watch, the_best_is_the_first_strictly_better_value) {
  tfx_watch w;
  tfx_watch_init(&w, "accuracy", TFX_WATCH_MAX, 0, 0);
  cr_assert(tfx_watch_update(&w, 100, 0.5), "the first finite value is the best");
  cr_assert(tfx_watch_update(&w, 200, 0.7));
  cr_assert(!tfx_watch_update(&w, 300, 0.7), "a tie keeps the older checkpoint");
  cr_assert(!tfx_watch_update(&w, 400, 0.6));
  cr_assert(!tfx_watch_update(&w, 500, NAN), "NaN never improves");
  cr_assert_eq(w.best_step, 200);
  cr_assert_float_eq(w.best, 0.7, 1e-12);
  tfx_watch_init(&w, "loss", TFX_WATCH_AUTO, 0, 0);
  cr_assert(!tfx_watch_update(&w, 50, NAN), "NaN is not a first best either");
  cr_assert(tfx_watch_update(&w, 100, 2.0));
  cr_assert(tfx_watch_update(&w, 200, 1.0));
  cr_assert(!tfx_watch_update(&w, 300, 1.5));
  cr_assert_eq(w.best_step, 200);
}

Test(watch, an_unset_metric_watches_nothing) {
  tfx_watch w;
  tfx_watch_init(&w, "", TFX_WATCH_AUTO, 0, 1);
  cr_assert(!tfx_watch_update(&w, 100, 0.5));
  cr_assert(!tfx_watch_update(&w, 200, 0.4));
  cr_assert(!tfx_watch_exhausted(&w));
}

Test(watch, patience_counts_evaluations_without_an_improvement_above_min_delta) {
  tfx_watch w;
  tfx_watch_init(&w, "accuracy", TFX_WATCH_AUTO, 0.01, 2);
  tfx_watch_update(&w, 100, 0.80);
  cr_assert(!tfx_watch_exhausted(&w));
  cr_assert(!tfx_watch_update(&w, 200, 0.805), "+0.005 is within min_delta");
  cr_assert(!tfx_watch_exhausted(&w));
  cr_assert(tfx_watch_update(&w, 300, 0.82), "+0.02 improves: the count starts over");
  cr_assert_eq(w.since, 0);
  tfx_watch_update(&w, 400, 0.825);
  cr_assert(!tfx_watch_exhausted(&w));
  tfx_watch_update(&w, 500, 0.81);
  cr_assert(tfx_watch_exhausted(&w), "two evaluations without improvement, patience 2");
  cr_assert_eq(w.best_step, 300);
}

Test(watch, min_delta_applies_downwards_too) {
  tfx_watch w;
  tfx_watch_init(&w, "loss", TFX_WATCH_AUTO, 0.1, 1);
  tfx_watch_update(&w, 100, 1.0);
  cr_assert(!tfx_watch_update(&w, 200, 0.95));
  cr_assert(tfx_watch_exhausted(&w));
  tfx_watch_init(&w, "loss", TFX_WATCH_AUTO, 0.1, 1);
  tfx_watch_update(&w, 100, 1.0);
  cr_assert(tfx_watch_update(&w, 200, 0.85));
  cr_assert(!tfx_watch_exhausted(&w));
}

Test(watch, restore_starts_from_a_recorded_best) {
  tfx_watch w;
  tfx_watch_init(&w, "accuracy", TFX_WATCH_AUTO, 0, 3);
  tfx_watch_restore(&w, 1200, 0.9);
  cr_assert(!tfx_watch_update(&w, 1400, 0.85), "a resumed run does not take a worse checkpoint as its best");
  cr_assert(tfx_watch_update(&w, 1600, 0.91));
  cr_assert_eq(w.best_step, 1600);
}

Test(watch, eval_metric_reads_the_result) {
  tfx_eval_result r = {.loss = 0.3, .accuracy = 0.9, .top5 = 0.99, .top_k = 5, .auc = 0.95, .has_auc = 1};
  cr_assert_float_eq(tfx_eval_metric(&r, "loss"), 0.3, 1e-12);
  cr_assert_float_eq(tfx_eval_metric(&r, "log_loss"), 0.3, 1e-12);
  cr_assert_float_eq(tfx_eval_metric(&r, "accuracy"), 0.9, 1e-12);
  cr_assert_float_eq(tfx_eval_metric(&r, "auc"), 0.95, 1e-12);
  cr_assert_float_eq(tfx_eval_metric(&r, "top_5"), 0.99, 1e-12);
  cr_assert(isnan(tfx_eval_metric(&r, "top_3")), "another K than the result's");
  r.has_auc = 0;
  cr_assert(isnan(tfx_eval_metric(&r, "auc")));
}
