/* Unit tests of src/nn/optim.c: every update rule for three steps on a tiny vector against the textbook
 * formulas written here in double, and the learning-rate schedules at chosen steps. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "nn/optim.h"

#define N 4
#define STEPS 3

/* Sets option `key` of cfg to its text `value`, as the experiment would. */
static void set_option(tfx_config *cfg, const char *key, const char *value) {
  char assignment[96];
  snprintf(assignment, sizeof assignment, "%s=%s", key, value);
  cr_assert_eq(tfx_config_set(cfg, assignment, NULL), TFX_OK, "%s", assignment);
}

static const double w0[N] = {1.0, -2.0, 0.5, 0.0};
static const double grads[STEPS][N] = {{0.3, -0.1, 2.0, 0.0}, {-0.5, 0.2, 1.0, 1e-3}, {0.1, 0.1, -3.0, -4.0}};

static tfx_optim make(const char *name, double lr) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  set_option(&cfg, "optimizer.name", name);
  cfg.learning_rate = lr;
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  return o;
}

/* Runs STEPS updates through tfx_optim_apply (float) and compares w after each step with want[step]. */
static void run_and_compare(const tfx_optim *o, float scale, double want[STEPS][N], double tol) {
  float w[N], g[N], m[N] = {0}, v[N] = {0}, *slots[2] = {m, v};
  for (int i = 0; i < N; i++) {
    w[i] = (float)w0[i];
  }
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      g[i] = (float)grads[s][i];
    }
    tfx_optim_apply(o, s, w, g, scale, slots, N);
    for (int i = 0; i < N; i++) {
      double err = fabs(w[i] - want[s][i]);
      cr_assert(err <= tol * fmax(1.0, fabs(want[s][i])), "step %d, w[%d] = %.9g, reference %.9g", s, i, w[i],
                want[s][i]);
    }
  }
}

Test(optim, init_copies_the_optimizer_section) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cfg.optimizer = TFX_OPT_RMSPROP;
  cfg.schedule = TFX_SCHED_STEP;
  cfg.learning_rate = 0.02, cfg.momentum = 0.8, cfg.beta1 = 0.7, cfg.beta2 = 0.99, cfg.epsilon = 1e-5;
  cfg.weight_decay = 0.01, cfg.decay_rate = 0.3, cfg.decay_steps = 77, cfg.warmup_steps = 5, cfg.max_steps = 900;
  cfg.nesterov = 1;
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  cr_assert_eq(o.kind, TFX_OPT_RMSPROP);
  cr_assert_eq(o.schedule, TFX_SCHED_STEP);
  cr_assert_eq(o.lr, 0.02);
  cr_assert_eq(o.momentum, 0.8);
  cr_assert_eq(o.beta1, 0.7);
  cr_assert_eq(o.beta2, 0.99);
  cr_assert_eq(o.epsilon, 1e-5);
  cr_assert_eq(o.weight_decay, 0.01);
  cr_assert_eq(o.decay_rate, 0.3);
  cr_assert_eq(o.decay_steps, 77);
  cr_assert_eq(o.warmup_steps, 5);
  cr_assert_eq(o.total_steps, 900);
  cr_assert_eq(o.nesterov, 1);
}

Test(optim, slots_per_rule) {
  const struct {
    const char *name;
    tfx_opt_kind kind;
    int slots;
  } rules[] = {{"sgd", TFX_OPT_SGD, 0},         {"momentum", TFX_OPT_MOMENTUM, 1}, {"adagrad", TFX_OPT_ADAGRAD, 1},
               {"rmsprop", TFX_OPT_RMSPROP, 1}, {"adam", TFX_OPT_ADAM, 2},         {"adamw", TFX_OPT_ADAMW, 2}};
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    tfx_optim o = make(rules[i].name, 0.1);
    cr_assert_eq(o.kind, rules[i].kind, "%s", rules[i].name);
    cr_assert_eq(tfx_optim_slots(&o), rules[i].slots, "%s", rules[i].name);
  }
  cr_assert_str_eq(tfx_optim_slot_name(0), "m");
  cr_assert_str_eq(tfx_optim_slot_name(1), "v");
}

Test(optim, sgd) {
  tfx_optim o = make("sgd", 0.1);
  double w[N], want[STEPS][N];
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      w[i] -= 0.1 * grads[s][i], want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 1.0f, want, 1e-6);
}

Test(optim, sgd_with_scale_and_l2_weight_decay) {
  /* scale averages a sum of gradients (e.g. 1/4 for 4 replicas); weight decay adds wd * w to the gradient. */
  tfx_optim o = make("sgd", 0.1);
  o.weight_decay = 0.01;
  double w[N], want[STEPS][N];
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      w[i] -= 0.1 * (0.25 * grads[s][i] + 0.01 * w[i]), want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 0.25f, want, 1e-6);
}

Test(optim, momentum) {
  /* TensorFlow MomentumOptimizer: accum = mu * accum + g; w -= lr * accum. */
  tfx_optim o = make("momentum", 0.1);
  o.momentum = 0.9;
  double w[N], a[N] = {0}, want[STEPS][N];
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      a[i] = 0.9 * a[i] + grads[s][i];
      w[i] -= 0.1 * a[i];
      want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 1.0f, want, 1e-6);
}

Test(optim, nesterov) {
  /* TensorFlow use_nesterov: accum = mu * accum + g; w -= lr * (g + mu * accum). */
  tfx_optim o = make("momentum", 0.1);
  o.momentum = 0.9;
  o.nesterov = 1;
  double w[N], a[N] = {0}, want[STEPS][N];
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      a[i] = 0.9 * a[i] + grads[s][i];
      w[i] -= 0.1 * (grads[s][i] + 0.9 * a[i]);
      want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 1.0f, want, 1e-6);
}

Test(optim, adagrad) {
  /* accum += g^2; w -= lr * g / (sqrt(accum) + eps), accumulators starting at 0. */
  tfx_optim o = make("adagrad", 0.1);
  o.epsilon = 1e-7;
  double w[N], a[N] = {0}, want[STEPS][N];
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      double g = grads[s][i];
      a[i] += g * g;
      w[i] -= 0.1 * g / (sqrt(a[i]) + 1e-7);
      want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 1.0f, want, 1e-5);
  /* The first step moves every nonzero coordinate by lr (g / |g|). */
  cr_assert_float_eq(want[0][0], w0[0] - 0.1, 1e-6);
  cr_assert_float_eq(want[0][2], w0[2] - 0.1, 1e-6);
}

Test(optim, rmsprop) {
  /* ms = rho * ms + (1 - rho) g^2; w -= lr * g / (sqrt(ms) + eps), with rho = optimizer.momentum. */
  tfx_optim o = make("rmsprop", 0.01);
  o.momentum = 0.9;
  o.epsilon = 1e-7;
  double w[N], ms[N] = {0}, want[STEPS][N];
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < N; i++) {
      double g = grads[s][i];
      ms[i] = 0.9 * ms[i] + 0.1 * g * g;
      w[i] -= 0.01 * g / (sqrt(ms[i]) + 1e-7);
      want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 1.0f, want, 1e-5);
}

/* Adam (Kingma & Ba, with TensorFlow's epsilon placement): t = step + 1,
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr sqrt(1-b2^t) / (1-b1^t) * m / (sqrt(v) + eps).
 * l2 adds l2 * w to g; decoupled subtracts lr * wd * w (AdamW, Loshchilov & Hutter). */
static void adam_reference(double lr, double b1, double b2, double eps, double l2, double decoupled,
                           double want[STEPS][N]) {
  double w[N], m[N] = {0}, v[N] = {0};
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    double t = s + 1, alpha = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    for (int i = 0; i < N; i++) {
      double g = grads[s][i] + l2 * w[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      w[i] -= alpha * m[i] / (sqrt(v[i]) + eps) + lr * decoupled * w[i];
      want[s][i] = w[i];
    }
  }
}

Test(optim, adam) {
  tfx_optim o = make("adam", 0.1);
  o.beta1 = 0.9, o.beta2 = 0.999, o.epsilon = 1e-7;
  double want[STEPS][N];
  adam_reference(0.1, 0.9, 0.999, 1e-7, 0, 0, want);
  run_and_compare(&o, 1.0f, want, 1e-5);
  /* Adam's first step is lr * sign(g) for every coordinate with g != 0. */
  cr_assert_float_eq(want[0][0], w0[0] - 0.1, 1e-5);
  cr_assert_float_eq(want[0][1], w0[1] + 0.1, 1e-5);
  cr_assert_eq(want[0][3], 0.0);
}

Test(optim, adam_with_l2_weight_decay) {
  tfx_optim o = make("adam", 0.05);
  o.beta1 = 0.8, o.beta2 = 0.99, o.epsilon = 1e-3, o.weight_decay = 0.1;
  double want[STEPS][N];
  adam_reference(0.05, 0.8, 0.99, 1e-3, 0.1, 0, want);
  run_and_compare(&o, 1.0f, want, 1e-5);
}

Test(optim, adamw_decouples_weight_decay) {
  tfx_optim o = make("adamw", 0.05);
  o.beta1 = 0.9, o.beta2 = 0.999, o.epsilon = 1e-7, o.weight_decay = 0.1;
  double want[STEPS][N], adam_l2[STEPS][N];
  adam_reference(0.05, 0.9, 0.999, 1e-7, 0, 0.1, want);
  run_and_compare(&o, 1.0f, want, 1e-5);
  /* Decoupled decay differs from L2 decay: step 0 is lr * sign(g) plus lr * wd * w, whatever the size of g. */
  adam_reference(0.05, 0.9, 0.999, 1e-7, 0.1, 0, adam_l2);
  cr_assert_float_eq(want[0][2], w0[2] - 0.05 - 0.05 * 0.1 * w0[2], 1e-6);
  cr_assert_gt(fabs(want[2][0] - adam_l2[2][0]), 1e-4);
}

Test(optim, adam_with_gradient_scale) {
  /* The scale multiplies the gradient before the moments (the mean of summed replica gradients). */
  tfx_optim o = make("adam", 0.1);
  o.epsilon = 1e-7;
  double want[STEPS][N], w[N], m[N] = {0}, v[N] = {0};
  memcpy(w, w0, sizeof w);
  for (int s = 0; s < STEPS; s++) {
    double t = s + 1, alpha = 0.1 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
    for (int i = 0; i < N; i++) {
      double g = 0.5 * grads[s][i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      w[i] -= alpha * m[i] / (sqrt(v[i]) + 1e-7);
      want[s][i] = w[i];
    }
  }
  run_and_compare(&o, 0.5f, want, 1e-5);
}

/* ---- schedules ---- */

static tfx_optim sched(const char *schedule, double lr, double rate, int64_t decay_steps, int64_t warmup,
                       int64_t total) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  set_option(&cfg, "optimizer.schedule", schedule);
  cfg.learning_rate = lr, cfg.decay_rate = rate, cfg.decay_steps = decay_steps, cfg.warmup_steps = warmup;
  cfg.max_steps = total;
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  return o;
}

#define assert_lr(o, step, want)                                                                                      \
  cr_assert_float_eq(tfx_optim_lr(&(o), (step)), (want), 1e-12, "step %lld: lr %.15g, want %.15g", (long long)(step), \
                     tfx_optim_lr(&(o), (step)), (double)(want))

Test(optim, constant_schedule) {
  tfx_optim o = sched("constant", 0.01, 0.5, 10, 0, 100);
  cr_assert_eq(o.schedule, TFX_SCHED_CONSTANT);
  assert_lr(o, 0, 0.01);
  assert_lr(o, 99, 0.01);
  assert_lr(o, 1000000, 0.01);
}

Test(optim, exponential_schedule) {
  /* lr * rate ^ (step / decay_steps), continuous (staircase = False). */
  tfx_optim o = sched("exponential", 0.1, 0.5, 100, 0, 1000);
  cr_assert_eq(o.schedule, TFX_SCHED_EXPONENTIAL);
  assert_lr(o, 0, 0.1);
  assert_lr(o, 50, 0.1 * sqrt(0.5));
  assert_lr(o, 100, 0.05);
  assert_lr(o, 250, 0.1 * pow(0.5, 2.5));
}

Test(optim, step_schedule) {
  /* lr * rate ^ floor(step / decay_steps) (staircase = True). */
  tfx_optim o = sched("step", 0.1, 0.1, 30, 0, 1000);
  cr_assert_eq(o.schedule, TFX_SCHED_STEP);
  assert_lr(o, 0, 0.1);
  assert_lr(o, 29, 0.1);
  assert_lr(o, 30, 0.01);
  assert_lr(o, 59, 0.01);
  assert_lr(o, 61, 0.001);
}

Test(optim, cosine_schedule) {
  /* lr * (1 + cos(pi * min(step, total) / total)) / 2 over max_steps. */
  tfx_optim o = sched("cosine", 0.2, 0.5, 10, 0, 1000);
  cr_assert_eq(o.schedule, TFX_SCHED_COSINE);
  assert_lr(o, 0, 0.2);
  assert_lr(o, 250, 0.1 * (1 + cos(M_PI / 4)));
  assert_lr(o, 500, 0.1);
  assert_lr(o, 1000, 0.0);
  assert_lr(o, 5000, 0.0);
}

Test(optim, piecewise_schedule_from_json_lists) {
  /* TF's PiecewiseConstantDecay: values[0] up to and including boundaries[0], then the next value. */
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"optimizer\": {\"schedule\": \"piecewise\", \"boundaries\": [100, 250],"
                                " \"values\": [0.1, 0.01, 0.001]}, \"model\": {\"layers\": [{\"type\": \"dense\"}]}}",
                                "test", &err),
               TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_validate(&cfg, &err), TFX_OK, "%s", err.msg);
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  cr_assert_eq(o.schedule, TFX_SCHED_PIECEWISE);
  assert_lr(o, 0, 0.1);
  assert_lr(o, 100, 0.1);
  assert_lr(o, 101, 0.01);
  assert_lr(o, 250, 0.01);
  assert_lr(o, 251, 0.001);
  assert_lr(o, 100000, 0.001);
}

Test(optim, piecewise_schedule_errors_name_the_key) {
  static const char *const bad[][2] = {
      {"{\"optimizer\": {\"schedule\": \"piecewise\", \"boundaries\": [100], \"values\": [0.1]}}",
       "optimizer.values: 1 rates for 1 boundaries"},
      {"{\"optimizer\": {\"schedule\": \"piecewise\", \"boundaries\": [200, 100], \"values\": [1, 2, 3]}}",
       "optimizer.boundaries[1] = 100"},
      {"{\"optimizer\": {\"schedule\": \"piecewise\", \"boundaries\": [1.5], \"values\": [1, 2]}}",
       "optimizer.boundaries[0] = 1.5"},
      {"{\"optimizer\": {\"schedule\": \"piecewise\", \"boundaries\": [10], \"values\": [1, -2]}}",
       "optimizer.values[1] = -2"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tfx_config cfg;
    tfx_config_init(&cfg);
    tfx_err err = {0};
    cr_assert_eq(tfx_config_parse(&cfg, bad[i][0], "test", &err), TFX_OK, "%s", err.msg);
    cr_assert_neq(tfx_config_validate(&cfg, &err), TFX_OK, "case %zu accepted", i);
    cr_assert(strstr(err.msg, bad[i][1]), "case %zu: '%s' lacks '%s'", i, err.msg, bad[i][1]);
  }
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_neq(tfx_config_parse(&cfg, "{\"optimizer\": {\"boundaries\": [1, \"x\"]}}", "test", &err), TFX_OK);
  cr_assert(strstr(err.msg, "optimizer.boundaries[1]: expected a number"), "%s", err.msg);
}

Test(optim, linear_warmup) {
  /* Warmup multiplies by (step + 1) / warmup for step < warmup: the first step is not wasted at lr 0. */
  tfx_optim o = sched("constant", 0.1, 0.5, 10, 10, 1000);
  assert_lr(o, 0, 0.01);
  assert_lr(o, 4, 0.05);
  assert_lr(o, 9, 0.1);
  assert_lr(o, 10, 0.1);
  assert_lr(o, 500, 0.1);
  tfx_optim c = sched("cosine", 0.1, 0.5, 10, 10, 1000);
  assert_lr(c, 4, 0.05 * 0.5 * (1 + cos(M_PI * 4 / 1000)));
  assert_lr(c, 10, 0.05 * (1 + cos(M_PI * 10 / 1000)));
}

Test(optim, apply_uses_the_scheduled_rate) {
  tfx_optim o = sched("exponential", 0.1, 0.5, 1000, 0, 5000);
  o.kind = TFX_OPT_SGD;
  float w[2] = {1, 1}, g[2] = {1, -2};
  tfx_optim_apply(&o, 1000, w, g, 1.0f, NULL, 2);
  cr_assert_float_eq(w[0], 1 - 0.05, 1e-7);
  cr_assert_float_eq(w[1], 1 + 0.1, 1e-7);
}

/* FTRL-Proximal from the paper's per-coordinate rules in double precision (lr_power -0.5). */
static void ftrl_reference(double *w, double *n, double *z, double g, double lr, double l1, double l2) {
  double n_new = *n + g * g, sigma = (sqrt(n_new) - sqrt(*n)) / lr;
  *z += g - sigma * *w;
  *n = n_new;
  *w = fabs(*z) > l1 ? ((*z > 0 ? l1 : -l1) - *z) / (sqrt(n_new) / lr + 2 * l2) : 0;
}

Test(optim, ftrl_follows_the_proximal_rule_and_l1_gives_exact_zeros) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"optimizer\": {\"name\": \"ftrl\", \"learning_rate\": 0.5, \"l1\": 0.3, \"l2\": 0.1,"
                                " \"initial_accumulator\": 0.1}}",
                                "t", &err),
               TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_validate_choices(&cfg, &err), TFX_OK, "%s", err.msg);
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  cr_assert_eq(o.kind, TFX_OPT_FTRL);
  cr_assert_eq(tfx_optim_slots(&o), 2);
  float w[2] = {0, 0}, acc[2] = {0, 0}, lin[2] = {0, 0}, *slots[2] = {acc, lin};
  double rw[2] = {0, 0}, rn[2] = {0.1, 0.1}, rz[2] = {0, 0};
  const float grads[5][2] = {{1.0f, 0.1f}, {0.8f, -0.1f}, {1.2f, 0.05f}, {-0.2f, 0.1f}, {0.9f, -0.05f}};
  for (int t = 0; t < 5; t++) {
    tfx_optim_apply(&o, t, w, grads[t], 1.0f, slots, 2);
    for (int i = 0; i < 2; i++) {
      ftrl_reference(&rw[i], &rn[i], &rz[i], grads[t][i], 0.5, 0.3, 0.1);
      cr_assert_float_eq(w[i], rw[i], 1e-5, "step %d, weight %d: %g, want %g", t, i, w[i], rw[i]);
    }
  }
  cr_assert(w[0] != 0.0f, "a weight with a strong gradient moves");
  cr_assert(w[1] == 0.0f, "a weight whose |z| stays under l1 is exactly zero, not small");
}
