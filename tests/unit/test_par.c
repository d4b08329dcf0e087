/* Unit tests of src/nn/par.c, the worker pool, and of its use by the model and the optimizer: every index is
 * run exactly once whatever the split, a sleeping worker wakes and takes a part, bad thread counts are refused, and a
 * model trained with 2 or 3 threads computes the same logits, gradients and weights, bit for bit, as with 1. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/par.h"

/* Counts the runs of each index (atomically: a wrong split would make two parts overlap). */
static void count_part(void *ctx, size_t b, size_t e) {
  int *count = ctx;
  for (size_t i = b; i < e; i++) {
    __atomic_fetch_add(&count[i], 1, __ATOMIC_RELAXED);
  }
}

/* Runs one tfx_par_for over [0, n) and checks that each index ran exactly once. */
static void check_cover(tfx_par *p, size_t n, size_t grain) {
  int *count = calloc(n + 1, sizeof(int));
  tfx_par_for(p, n, grain, count_part, count);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(count[i], 1, "n=%zu grain=%zu: index %zu ran %d times", n, grain, i, count[i]);
  }
  free(count);
}

Test(par, every_index_runs_once) {
  for (int threads = 1; threads <= 3; threads++) {
    tfx_par *p = NULL;
    tfx_err err = {0};
    cr_assert_eq(tfx_par_create(threads, &p, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(tfx_par_threads(p), threads);
    const size_t ns[] = {0, 1, 2, 3, 7, 100, 1001, 65537};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
      check_cover(p, ns[i], 1);
      check_cover(p, ns[i], 64);
    }
    tfx_par_destroy(p);
  }
  check_cover(NULL, 1000, 1); /* no pool: inline */
  tfx_par_destroy(NULL);
}

typedef struct who {
  size_t split; /* where the second part began */
  int calls;
} who;

static void record_part(void *ctx, size_t b, size_t e) {
  who *w = ctx;
  (void)e;
  if (b > 0) {
    w->split = b;
  }
  __atomic_fetch_add(&w->calls, 1, __ATOMIC_RELAXED);
}

Test(par, splits_only_above_the_grain) {
  tfx_par *p = NULL;
  cr_assert_eq(tfx_par_create(2, &p, NULL), TFX_OK);
  who w = {0, 0};
  tfx_par_for(p, 100, 60, record_part, &w);
  cr_assert_eq(w.calls, 1, "100 indexes with a grain of 60 run in one part, got %d", w.calls);
  w = (who){0, 0};
  tfx_par_for(p, 100, 50, record_part, &w);
  cr_assert_eq(w.calls, 2, "100 indexes with a grain of 50 run in two parts, got %d", w.calls);
  cr_assert_eq(w.split, 50);
  tfx_par_destroy(p);
}

typedef struct slow {
  pthread_t caller;
  int by_worker; /* parts that another thread ran */
} slow;

/* A part that takes 2 ms, so that a worker woken from sleep has the time to take one. */
static void slow_part(void *ctx, size_t b, size_t e) {
  slow *s = ctx;
  struct timespec t = {0, 2 * 1000 * 1000};
  (void)b, (void)e;
  nanosleep(&t, NULL);
  if (!pthread_equal(pthread_self(), s->caller)) {
    __atomic_fetch_add(&s->by_worker, 1, __ATOMIC_RELAXED);
  }
}

Test(par, a_sleeping_worker_wakes_and_takes_a_part) {
  tfx_par *p = NULL;
  cr_assert_eq(tfx_par_create(2, &p, NULL), TFX_OK);
  struct timespec pause = {0, 3 * 1000 * 1000}; /* well past TFX_PAR_SPIN_US: the worker is asleep */
  slow s = {pthread_self(), 0};
  for (int i = 0; i < 20; i++) {
    nanosleep(&pause, NULL);
    tfx_par_for(p, 2, 1, slow_part, &s);
  }
  /* The caller takes a part the worker has not taken yet, so on a loaded machine it may run some of both. */
  cr_assert_gt(s.by_worker, 0, "in 20 jobs of two 2 ms parts, the woken worker never ran one");
  for (int i = 0; i < 20000; i++) { /* back to back: the worker is polling, or the caller runs every part */
    check_cover(p, 37, 1);
  }
  tfx_par_destroy(p);
}

Test(par, refuses_bad_thread_counts) {
  const int bad[] = {0, -1, TFX_PAR_MAX + 1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tfx_par *p = (tfx_par *)0x1;
    tfx_err err = {0};
    cr_assert_eq(tfx_par_create(bad[i], &p, &err), TFX_EINVAL);
    cr_assert(strstr(err.msg, "threads") != NULL, "message: %s", err.msg);
    cr_assert_eq(p, (tfx_par *)0x1, "the out-parameter is written only on success");
  }
}

/* A CNN large enough that every split loop (im2col, col2im, bias and activation passes, pooling, flatten,
 * dropout, the bias-gradient chunks, Adam on the 131k-value dense kernel) runs in two or three parts; its pools
 * overlap (3x3 windows, stride 2, 'same'), so their input gradients add up within a sample. */
static const char CNN[] =
    "{\"model\": {\"input_shape\": [16, 16, 1], \"layers\": ["
    "{\"type\": \"conv2d\", \"filters\": 16, \"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"relu\"},"
    "{\"type\": \"max_pool2d\", \"pool_size\": 3, \"strides\": 2, \"padding\": \"same\"},"
    "{\"type\": \"conv2d\", \"filters\": 32, \"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"tanh\"},"
    "{\"type\": \"avg_pool2d\", \"pool_size\": 3, \"strides\": 2, \"padding\": \"same\"},"
    "{\"type\": \"flatten\"},"
    "{\"type\": \"dropout\", \"rate\": 0.25},"
    "{\"type\": \"dense\", \"units\": 256, \"activation\": \"relu\"},"
    "{\"type\": \"dense\", \"units\": 10}],"
    "\"loss\": \"softmax_cross_entropy\"},"
    "\"optimizer\": {\"name\": \"adam\", \"learning_rate\": 0.01}}";

#define BATCH 96
#define STEPS 4

typedef struct run {
  float *logits; /* [BATCH, 10] of the last step */
  float *vals;   /* every variable's values after STEPS steps, then every gradient of the last step */
  size_t n;
} run;

/* Trains the CNN for STEPS steps of Adam with `threads` threads on fixed data; returns what it computed. */
static run train_with(int threads) {
  static tfx_config cfg;
  tfx_err err = {0};
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg, CNN, "test cnn", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_validate(&cfg, &err), TFX_OK, "%s", err.msg);
  cfg.threads = threads;
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, BATCH, &m, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_par_threads(tfx_model_par(m)), threads);
  tfx_model_init_vars(m, 7);
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  int nv = tfx_model_nvars(m);
  size_t nx = BATCH * tfx_model_input_size(m), total = 0;
  float *x = malloc(sizeof(float) * nx), **slots = calloc(2 * (size_t)nv, sizeof(float *));
  int32_t y[BATCH];
  for (int i = 0; i < nv; i++) {
    total += 2 * tfx_model_var(m, i)->count;
    slots[2 * i] = calloc(tfx_model_var(m, i)->count, sizeof(float));
    slots[2 * i + 1] = calloc(tfx_model_var(m, i)->count, sizeof(float));
  }
  run r = {malloc(sizeof(float) * BATCH * 10), malloc(sizeof(float) * total), total};
  for (int s = 0; s < STEPS; s++) {
    for (size_t i = 0; i < nx; i++) {
      x[i] = (float)((i * 2654435761u + (size_t)s * 97) % 1000) / 1000.0f;
    }
    for (int b = 0; b < BATCH; b++) {
      y[b] = (b * 7 + s) % 10;
    }
    tfx_step_stats st;
    const float *z = tfx_model_forward(m, x, BATCH, 1, (uint64_t)s);
    memcpy(r.logits, z, sizeof(float) * BATCH * 10);
    tfx_model_loss(m, y, BATCH, 1, &st);
    tfx_model_backward(m, x, BATCH);
    tfx_optim_target t[16];
    for (int i = 0; i < nv; i++) {
      tfx_var *v = tfx_model_var(m, i);
      t[i] = (tfx_optim_target){v->value, v->grad, &slots[2 * i], v->count};
    }
    tfx_optim_apply_all(tfx_model_par(m), &o, s, t, nv, 1.0f);
  }
  size_t off = 0;
  for (int i = 0; i < nv; i++) {
    tfx_var *v = tfx_model_var(m, i);
    memcpy(r.vals + off, v->value, sizeof(float) * v->count), off += v->count;
    memcpy(r.vals + off, v->grad, sizeof(float) * v->count), off += v->count;
    free(slots[2 * i]), free(slots[2 * i + 1]);
  }
  free(slots), free(x);
  tfx_model_destroy(m);
  return r;
}

Test(par, a_model_computes_the_same_with_any_thread_count) {
  run one = train_with(1);
  for (int threads = 2; threads <= 3; threads++) {
    run more = train_with(threads);
    cr_assert_eq(more.n, one.n);
    cr_assert_eq(memcmp(more.logits, one.logits, sizeof(float) * BATCH * 10), 0, "%d threads: logits differ", threads);
    for (size_t i = 0; i < one.n; i++) {
      cr_assert_eq(memcmp(&more.vals[i], &one.vals[i], sizeof(float)), 0,
                   "%d threads: value %zu is %.9g, with 1 thread %.9g", threads, i, more.vals[i], one.vals[i]);
    }
    free(more.logits), free(more.vals);
  }
  free(one.logits), free(one.vals);
}

/* Values i of a fixed pseudo-random sequence in [-1, 1). */
static void fill(float *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    p[i] = (float)((i * 2654435761u + seed * 40503u) % 2000) / 1000.0f - 1.0f;
  }
}

Test(par, apply_all_equals_apply_one_by_one) {
  static const size_t sizes[] = {5, 40000, 3, 20011, 1};
  enum { N = 5 };
  tfx_config cfg;
  tfx_config_init(&cfg);
  cfg.optimizer = TFX_OPT_ADAM;
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  tfx_par *p = NULL;
  cr_assert_eq(tfx_par_create(3, &p, NULL), TFX_OK);
  float *buf[2][N][4]; /* [pooled or not][target][w, g, m, v] */
  tfx_optim_target t[N];
  for (int k = 0; k < N; k++) {
    for (int a = 0; a < 4; a++) {
      buf[0][k][a] = malloc(sizeof(float) * sizes[k]), buf[1][k][a] = malloc(sizeof(float) * sizes[k]);
      fill(buf[0][k][a], sizes[k], (uint32_t)(k * 4 + a));
      if (a >= 2) { /* moments: v must be >= 0 */
        for (size_t i = 0; i < sizes[k]; i++) {
          buf[0][k][a][i] = buf[0][k][a][i] * buf[0][k][a][i];
        }
      }
      memcpy(buf[1][k][a], buf[0][k][a], sizeof(float) * sizes[k]);
    }
    t[k] = (tfx_optim_target){buf[0][k][0], buf[0][k][1], &buf[0][k][2], sizes[k]};
  }
  for (int step = 0; step < 3; step++) {
    tfx_optim_apply_all(p, &o, step, t, N, 0.5f);
    for (int k = 0; k < N; k++) {
      tfx_optim_apply(&o, step, buf[1][k][0], buf[1][k][1], 0.5f, &buf[1][k][2], sizes[k]);
    }
  }
  for (int k = 0; k < N; k++) {
    for (int a = 0; a < 4; a++) {
      cr_assert_eq(memcmp(buf[0][k][a], buf[1][k][a], sizeof(float) * sizes[k]), 0, "target %d array %d differs", k, a);
      free(buf[0][k][a]), free(buf[1][k][a]);
    }
  }
  tfx_par_destroy(p);
}
