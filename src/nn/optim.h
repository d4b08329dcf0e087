/* Optimizer update rules as pure functions on (variable, gradient, slots, step), and learning-rate schedules.
 * The parameter server and the single-process trainer both call these: the math lives here once.
 * Thread-safe (no state besides the arguments). */
#ifndef TFX_OPTIM_H
#define TFX_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "nn/par.h"

/* tfx_opt_kind and tfx_schedule are the experiment's enums (config/config.h). */
typedef struct tfx_optim {
  tfx_opt_kind kind;
  tfx_schedule schedule;
  double lr, momentum, beta1, beta2, epsilon, weight_decay, decay_rate;
  double l1, l2, lr_power, initial_accumulator;
  int nesterov;
  int64_t decay_steps, warmup_steps, total_steps;
  int n_bounds; /* piecewise: rate values[i] up to step bounds[i] (TF's PiecewiseConstantDecay) */
  int64_t bounds[TFX_MAX_PIECES];
  double values[TFX_MAX_PIECES + 1];
} tfx_optim;

/* Fills o from the experiment's optimizer section (validated beforehand by tfx_config_validate). */
void tfx_optim_init(tfx_optim *o, const tfx_config *cfg);
/* The number of slot arrays (each the size of the variable) the rule needs: 0, 1 or 2. */
int tfx_optim_slots(const tfx_optim *o);
/* The names of the slots ("m", "v"); static. */
const char *tfx_optim_slot_name(int i);
/* The learning rate at a global step (schedule and warmup applied). */
double tfx_optim_lr(const tfx_optim *o, int64_t step);
/* Applies one update in place: w -= rule(scale * g) at global step `step`; slots (borrowed) as many as
 * tfx_optim_slots, each of n floats, zero-initialized before the first step. */
void tfx_optim_apply(const tfx_optim *o, int64_t step, float *w, const float *g, float scale, float *const *slots,
                     size_t n);
/* One variable of tfx_optim_apply_all: its values, gradient, slots and size (all borrowed). */
typedef struct tfx_optim_target {
  float *w;
  const float *g;
  float *const *slots;
  size_t n;
} tfx_optim_target;

/* tfx_optim_apply on each of the n targets, their values taken end to end and split over the threads of par
 * (NULL: inline) in one hand-off: the rules are elementwise, so the result is the same bit for bit whatever
 * the split. Drive par from one thread at a time. */
void tfx_optim_apply_all(tfx_par *par, const tfx_optim *o, int64_t step, const tfx_optim_target *t, int n, float scale);

/* Applies a row-sparse gradient: g holds n_rows rows of `width` values for the listed rows of w (and of each
 * slot); row ids are relative to w. Rows not listed are left alone (lazy update). */
void tfx_optim_apply_rows(const tfx_optim *o, int64_t step, float *w, const float *g, float scale, float *const *slots,
                          const int64_t *rows, size_t n_rows, size_t width);

#endif
