/* SGD, momentum (Nesterov), Adagrad, RMSProp, Adam, AdamW and the learning-rate schedules. */
#include "nn/optim.h"

#include <float.h>
#include <math.h>
#include <string.h>

void tfx_optim_init(tfx_optim *o, const tfx_config *cfg) {
  memset(o, 0, sizeof *o);
  o->kind = cfg->optimizer;
  o->schedule = cfg->schedule;
  o->lr = cfg->learning_rate;
  o->momentum = cfg->momentum;
  o->beta1 = cfg->beta1;
  o->beta2 = cfg->beta2;
  o->epsilon = cfg->epsilon;
  o->weight_decay = cfg->weight_decay;
  o->l1 = cfg->l1;
  o->l2 = cfg->l2;
  o->lr_power = cfg->lr_power;
  o->initial_accumulator = cfg->initial_accumulator;
  o->decay_rate = cfg->decay_rate;
  o->nesterov = cfg->nesterov;
  o->decay_steps = cfg->decay_steps;
  o->warmup_steps = cfg->warmup_steps;
  o->total_steps = cfg->max_steps;
  if (o->schedule == TFX_SCHED_PIECEWISE && tfx_config_piecewise(cfg, o->bounds, o->values, &o->n_bounds, NULL)) {
    o->schedule = TFX_SCHED_CONSTANT; /* unreachable after tfx_config_validate */
  }
}

/* TF's PiecewiseConstantDecay: values[0] while step <= bounds[0], values[i] while bounds[i-1] < step <=
 * bounds[i], the last value after the last boundary. */
static double piecewise(const tfx_optim *o, int64_t step) {
  int i = 0;
  while (i < o->n_bounds && step > o->bounds[i]) {
    i++;
  }
  return o->values[i];
}

int tfx_optim_slots(const tfx_optim *o) {
  switch (o->kind) {
    case TFX_OPT_SGD:
      return 0;
    case TFX_OPT_ADAM:
    case TFX_OPT_ADAMW:
    case TFX_OPT_FTRL:
      return 2;
    default:
      return 1;
  }
}

const char *tfx_optim_slot_name(int i) {
  return i == 0 ? "m" : "v";
}

double tfx_optim_lr(const tfx_optim *o, int64_t step) {
  double lr = o->lr, s = (double)step;
  switch (o->schedule) {
    case TFX_SCHED_EXPONENTIAL:
      lr *= pow(o->decay_rate, s / (double)o->decay_steps);
      break;
    case TFX_SCHED_STEP:
      lr *= pow(o->decay_rate, floor(s / (double)o->decay_steps));
      break;
    case TFX_SCHED_PIECEWISE:
      lr = piecewise(o, step);
      break;
    case TFX_SCHED_COSINE: {
      double t = o->total_steps > 0 ? fmin(s / (double)o->total_steps, 1.0) : 0;
      lr *= 0.5 * (1.0 + cos(3.141592653589793 * t));
      break;
    }
    default:
      break;
  }
  if (o->warmup_steps > 0 && step < o->warmup_steps) {
    lr *= (s + 1) / (double)o->warmup_steps;
  }
  return lr;
}

static void sgd(float *w, const float *g, float scale, float lr, float wd, size_t n) {
  for (size_t i = 0; i < n; i++) {
    w[i] -= lr * (scale * g[i] + wd * w[i]);
  }
}

static void momentum(const tfx_optim *o, float *w, const float *g, float scale, float lr, float *m, size_t n) {
  float mu = (float)o->momentum, wd = (float)o->weight_decay;
  for (size_t i = 0; i < n; i++) {
    float gi = scale * g[i] + wd * w[i];
    float mi = mu * m[i] + gi;
    m[i] = fabsf(mi) < FLT_MIN ? 0.0f : mi; /* no denormal moments (see adam) */
    w[i] -= lr * (o->nesterov ? gi + mu * m[i] : m[i]);
  }
}

static void adagrad(const tfx_optim *o, float *w, const float *g, float scale, float lr, float *a, size_t n) {
  float eps = (float)o->epsilon, wd = (float)o->weight_decay;
  for (size_t i = 0; i < n; i++) {
    float gi = scale * g[i] + wd * w[i];
    a[i] += gi * gi;
    w[i] -= lr * gi / (sqrtf(a[i]) + eps);
  }
}

static void rmsprop(const tfx_optim *o, float *w, const float *g, float scale, float lr, float *a, size_t n) {
  float rho = (float)o->momentum, eps = (float)o->epsilon, wd = (float)o->weight_decay;
  for (size_t i = 0; i < n; i++) {
    float gi = scale * g[i] + wd * w[i];
    float ai = rho * a[i] + (1 - rho) * gi * gi;
    a[i] = ai < FLT_MIN ? 0.0f : ai; /* no denormal moments (see adam) */
    w[i] -= lr * gi / (sqrtf(a[i]) + eps);
  }
}

/* n^(-lr_power): the square root for the usual lr_power -0.5. */
static float acc_pow(float n, double lr_power) {
  return lr_power == -0.5 ? sqrtf(n) : (float)pow(n, -lr_power);
}

/* FTRL-Proximal (McMahan et al. 2013, as TensorFlow's ApplyFtrl): per coordinate, n += g^2, z += g - sigma w with
 * sigma = (n_new^-p - n^-p) / lr, then w = (sign(z) l1 - z) / (n_new^-p / lr + 2 l2) where |z| > l1, else exactly
 * 0. The slot a holds n less initial_accumulator (slots start at zero), z the linear term. */
static void ftrl(const tfx_optim *o, float *w, const float *g, float scale, float lr, float *a, float *z, size_t n) {
  float l1 = (float)o->l1, l2 = (float)o->l2, n0 = (float)o->initial_accumulator;
  for (size_t i = 0; lr > 0 && i < n; i++) { /* a rate of 0 (a warmup's first step) changes nothing */
    float gi = scale * g[i], acc = a[i] + n0, acc_new = acc + gi * gi;
    float p_old = acc_pow(acc, o->lr_power), p_new = acc_pow(acc_new, o->lr_power);
    z[i] += gi - (p_new - p_old) / lr * w[i];
    a[i] = acc_new - n0;
    float quad = p_new / lr + 2 * l2;
    w[i] = fabsf(z[i]) > l1 ? (copysignf(l1, z[i]) - z[i]) / quad : 0.0f;
  }
}

static void adam(const tfx_optim *o, int64_t step, float *w, const float *g, float scale, float lr, float *m, float *v,
                 size_t n) {
  float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->epsilon;
  double t = (double)step + 1;
  float alpha = (float)(lr * sqrt(1 - pow(o->beta2, t)) / (1 - pow(o->beta1, t)));
  int decoupled = o->kind == TFX_OPT_ADAMW;
  float wd = (float)o->weight_decay, dwd = decoupled ? lr * wd : 0, l2 = decoupled ? 0 : wd;
  for (size_t i = 0; i < n; i++) {
    float gi = scale * g[i] + l2 * w[i];
    float mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
    /* Flush moments below FLT_MIN: a decaying moment would otherwise sit at a denormal for good (0.9 * m
     * rounds back to m there), and every step would pay the FPU's slow denormal path on it. */
    m[i] = fabsf(mi) < FLT_MIN ? 0.0f : mi;
    v[i] = vi < FLT_MIN ? 0.0f : vi;
    w[i] -= alpha * m[i] / (sqrtf(v[i]) + eps) + dwd * w[i];
  }
}

/* tfx_optim_apply at the learning rate lr (the schedule's, computed once per step by the caller). */
static void apply_at(const tfx_optim *o, int64_t step, float lr, float *w, const float *g, float scale,
                     float *const *slots, size_t n) {
  switch (o->kind) {
    case TFX_OPT_SGD:
      sgd(w, g, scale, lr, (float)o->weight_decay, n);
      break;
    case TFX_OPT_MOMENTUM:
      momentum(o, w, g, scale, lr, slots[0], n);
      break;
    case TFX_OPT_ADAGRAD:
      adagrad(o, w, g, scale, lr, slots[0], n);
      break;
    case TFX_OPT_RMSPROP:
      rmsprop(o, w, g, scale, lr, slots[0], n);
      break;
    case TFX_OPT_FTRL:
      ftrl(o, w, g, scale, lr, slots[0], slots[1], n);
      break;
    default:
      adam(o, step, w, g, scale, lr, slots[0], slots[1], n);
      break;
  }
}

void tfx_optim_apply(const tfx_optim *o, int64_t step, float *w, const float *g, float scale, float *const *slots,
                     size_t n) {
  apply_at(o, step, (float)tfx_optim_lr(o, step), w, g, scale, slots, n);
}

/* The smallest range of an update worth handing to another thread. */
#define APPLY_GRAIN 16384

typedef struct apply_job {
  const tfx_optim *o;
  int64_t step;
  const tfx_optim_target *t;
  int n;
  float scale;
} apply_job;

/* Applies the values [i0, i1) of the targets taken end to end. */
static void apply_part(void *ctx, size_t i0, size_t i1) {
  const apply_job *j = ctx;
  size_t start = 0; /* of target k in the joined range */
  for (int k = 0; k < j->n && start < i1; start += j->t[k].n, k++) {
    const tfx_optim_target *t = &j->t[k];
    size_t b = i0 > start ? i0 - start : 0, e = i1 - start < t->n ? i1 - start : t->n;
    if (b >= e) {
      continue;
    }
    float *slots[2] = {NULL, NULL};
    for (int s = 0; s < tfx_optim_slots(j->o); s++) {
      slots[s] = t->slots[s] + b;
    }
    tfx_optim_apply(j->o, j->step, t->w + b, t->g + b, j->scale, slots, e - b);
  }
}

void tfx_optim_apply_all(tfx_par *par, const tfx_optim *o, int64_t step, const tfx_optim_target *t, int n,
                         float scale) {
  apply_job j = {o, step, t, n, scale};
  size_t total = 0;
  for (int k = 0; k < n; k++) {
    total += t[k].n;
  }
  tfx_par_for(par, total, APPLY_GRAIN, apply_part, &j);
}

void tfx_optim_apply_rows(const tfx_optim *o, int64_t step, float *w, const float *g, float scale, float *const *slots,
                          const int64_t *rows, size_t n_rows, size_t width) {
  float lr = (float)tfx_optim_lr(o, step);
  for (size_t k = 0; k < n_rows; k++) {
    size_t off = (size_t)rows[k] * width;
    if (k + 4 < n_rows) { /* rows are scattered: ask for the one four ahead while this one is updated */
      size_t ahead = (size_t)rows[k + 4] * width;
      __builtin_prefetch(w + ahead, 1);
      __builtin_prefetch(w + ahead + width - 1, 1);
      if (slots[0]) {
        __builtin_prefetch(slots[0] + ahead, 1);
        __builtin_prefetch(slots[0] + ahead + width - 1, 1);
      }
    }
    float *row_slots[2] = {slots[0] ? slots[0] + off : NULL, slots[1] ? slots[1] + off : NULL};
    apply_at(o, step, lr, w + off, g + k * width, scale, row_slots, width);
  }
}
