/* tfx-bench-compute: training-step throughput of one process (forward + loss + backward + Adam on every
 * variable) for each model and OpenBLAS thread count, and the compute ceiling of the same model: the time
 * OpenBLAS takes for the sgemm calls a forward+backward of that model needs, on the layers' own shapes.
 * With --worker it also times a worker step (forward + loss + backward, no optimizer: in a cluster the ps
 * applies it). Prints key=value lines that bench/compute joins with PyTorch's figures:
 *   tfx model=M batch=B threads=T ex_s=... step_ms=... fwd_ms=... loss_ms=... bwd_ms=... adam_ms=... steps=...
 *   tfx_worker model=M batch=B threads=T ex_s=... step_ms=... fwd_ms=... loss_ms=... bwd_ms=... steps=...
 *   sgemm model=M batch=B threads=T gflops=... pass_ms=... ceiling_ex_s=... gemm_mflop=... calls=... passes=...
 * ex_s is the median rate over rounds of at least ROUND_S seconds after a warm-up; the *_ms phases are means
 * over every step run. Data: POOL fixed-seed random batches, cycled. --ftz flushes denormals to zero on the
 * calling thread. With --spec it prints the resolved experiment JSON of one model instead (the PyTorch script
 * builds the same layers from it). */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "nn/model.h"
#include "nn/optim.h"

#define MAX_GEMMS (3 * TFX_MAX_LAYERS)
#define MAX_ROUNDS 256
#define ROUND_S 0.25
#define POOL 32 /* distinct random batches cycled through, so no single batch is memorized */

/* The CNN of the issue, used when no examples/fashion_mnist_cnn.json is given: 28x28x1 NHWC input. */
static const char CNN_JSON[] =
    "{\"model\": {\"input_shape\": [28, 28, 1], \"layers\": ["
    "{\"type\": \"conv2d\", \"filters\": 32, \"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"relu\"},"
    "{\"type\": \"max_pool2d\", \"pool_size\": 2},"
    "{\"type\": \"conv2d\", \"filters\": 64, \"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"relu\"},"
    "{\"type\": \"max_pool2d\", \"pool_size\": 2},"
    "{\"type\": \"flatten\"},"
    "{\"type\": \"dense\", \"units\": 128, \"activation\": \"relu\"},"
    "{\"type\": \"dropout\", \"rate\": 0.3},"
    "{\"type\": \"dense\", \"units\": 10}],"
    "\"loss\": \"softmax_cross_entropy\"},"
    "\"optimizer\": {\"name\": \"adam\", \"learning_rate\": 0.001}}";

typedef struct opts {
  int batch;
  int threads[8];
  int n_threads;
  double seconds, ceiling_seconds;
  int spec, info, ftz, ceiling, verbose, worker;
  const char *models[8];
  int n_models;
} opts;

/* One sgemm call of a forward or backward pass, in row-major terms. */
typedef struct gemm {
  int ta, tb, m, n, k;
  float *a, *b, *c;
} gemm;

typedef struct step_ctx {
  tfx_model *m;
  tfx_optim opt;
  float *x;
  int32_t *y;
  float **slots;             /* 2 per variable */
  tfx_optim_target *targets; /* one per variable */
  int batch;
  int optimize; /* 0: a worker step, without the optimizer; 2: the optimizer's memory floor in its place */
  int64_t step;
  double phase[4]; /* seconds spent in forward, loss, backward, Adam */
} step_ctx;

typedef void (*run_fn)(void *ctx);

static int verbose;

/* Monotonic wall time in seconds. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Runs fn for a warm-up of about a quarter of `seconds`, then in rounds of >= ROUND_S s until `seconds` have
 * passed; returns the median rate (calls per second) over the rounds and the total calls timed in *calls. */
static double measure(run_fn fn, void *ctx, double seconds, long *calls) {
  double rates[MAX_ROUNDS], start = now_s();
  int n = 0;
  for (int i = 0; i < 3 || now_s() - start < seconds / 4; i++) {
    fn(ctx);
  }
  *calls = 0;
  start = now_s();
  while (n < MAX_ROUNDS && (n < 3 || now_s() - start < seconds)) {
    double t0 = now_s(), t1;
    long k = 0;
    do {
      fn(ctx), k++;
    } while ((t1 = now_s()) - t0 < ROUND_S);
    rates[n++] = (double)k / (t1 - t0);
    if (verbose) {
      fprintf(stderr, "round %d: %ld calls, %.2f/s\n", n, k, rates[n - 1]);
    }
    *calls += k;
  }
  qsort(rates, (size_t)n, sizeof rates[0], cmp_double);
  return n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
}

/* Deterministic uniform floats in [0, 1) from a 64-bit LCG; the same seed gives the same data every run. */
static void fill_uniform(float *p, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = (float)(*state >> 40) / (float)(1 << 24);
  }
}

/* Fills cfg from NAME=PATH, or from the built-in CNN for the bare name "cnn". */
static int load_config(const char *arg, tfx_config *cfg, char *name, size_t name_n, tfx_err *err) {
  const char *eq = strchr(arg, '=');
  int rc;
  tfx_config_init(cfg);
  snprintf(name, name_n, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
  if (eq) {
    rc = tfx_config_load(cfg, eq + 1, err);
  } else if (strcmp(arg, "cnn") == 0) {
    rc = tfx_config_parse(cfg, CNN_JSON, "built-in cnn", err);
  } else {
    return tfx_err_set(err, TFX_EINVAL, "model '%s': give NAME=CONFIG.json (only cnn is built in)", arg);
  }
  /* The bench times Adam steps at a constant rate, as torch.optim.Adam runs them, whatever the file says. */
  if (!rc) {
    cfg->optimizer = TFX_OPT_ADAM;
    cfg->schedule = TFX_SCHED_CONSTANT;
  }
  return rc ? rc : tfx_config_validate(cfg, err);
}

/* Appends one gemm of the given row-major shape with its own random operands (as each layer has its own). */
static int add_gemm(gemm *g, int *n, int ta, int tb, int m, int nn, int k, uint64_t *rng) {
  gemm *x = &g[(*n)++];
  x->ta = ta, x->tb = tb, x->m = m, x->n = nn, x->k = k;
  x->a = malloc(sizeof(float) * (size_t)m * k);
  x->b = malloc(sizeof(float) * (size_t)k * nn);
  x->c = malloc(sizeof(float) * (size_t)m * nn);
  if (!x->a || !x->b || !x->c) {
    return -1;
  }
  fill_uniform(x->a, (size_t)m * k, rng);
  fill_uniform(x->b, (size_t)k * nn, rng);
  return 0;
}

/* Appends a weight layer's sgemm calls: forward (rows x in) (in x out), the weight gradient (in x rows)
 * (rows x out) and, when need_dx, the input gradient (rows x out) (out x in). */
static int plan_layer(gemm *g, int *n, int rows, int in, int out, int need_dx, uint64_t *rng) {
  if (add_gemm(g, n, 0, 0, rows, out, in, rng) || add_gemm(g, n, 1, 0, in, out, rows, rng)) {
    return -1;
  }
  return need_dx ? add_gemm(g, n, 0, 1, rows, in, out, rng) : 0;
}

/* Walks the layer list like src/nn shape inference does and lists the sgemm calls one forward+backward needs:
 * per dense or conv2d layer the forward product, the weight gradient and, where a layer with variables lies
 * below, the input gradient (what autograd computes). Appends to g from *n on; returns the flops, or -1 when out
 * of memory. */
static double plan_gemms(const tfx_config *cfg, int batch, gemm *g, int *n, uint64_t *rng) {
  int r = cfg->input_rank, h = r == 3 ? cfg->input_shape[0] : 1, w = r >= 2 ? cfg->input_shape[r - 2] : 1;
  int c = cfg->input_shape[r - 1], below = 0;
  double flops = 0;
  for (int i = 0; i < cfg->n_layers; i++) {
    const tfx_layer_spec *s = &cfg->layers[i];
    int in = h * w * c, out = 0, rows = batch, need_dx = below;
    if (strcmp(s->type, "dense") == 0) {
      h = w = 1, c = out = s->units;
    } else if (strcmp(s->type, "conv2d") == 0) {
      int same = strcmp(s->padding, "same") == 0, st = tfx_config_layer_strides(s);
      in = s->kernel_size * s->kernel_size * c;
      h = same ? (h + st - 1) / st : (h - s->kernel_size) / st + 1;
      w = same ? (w + st - 1) / st : (w - s->kernel_size) / st + 1;
      c = out = s->filters, rows = batch * h * w;
    } else if (strstr(s->type, "pool2d")) {
      int same = strcmp(s->padding, "same") == 0, st = tfx_config_layer_strides(s);
      h = same ? (h + st - 1) / st : (h - s->pool_size) / st + 1;
      w = same ? (w + st - 1) / st : (w - s->pool_size) / st + 1;
    }
    if (!out) {
      continue;
    }
    flops += 2.0 * rows * in * out * (2 + need_dx);
    below = 1;
    if (plan_layer(g, n, rows, in, out, need_dx, rng)) {
      return -1;
    }
  }
  return flops;
}

/* One pass over the planned sgemm calls. */
static void run_gemms(void *ctx) {
  const gemm *g = ctx;
  for (; g->a; g++) {
    int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k,
                1.0f, g->a, lda, g->b, ldb, 0.0f, g->c, g->n);
  }
}

/* With --verbose: the time of each planned call alone, to set against a layer's share of a step. */
static void print_gemm_times(gemm *g, int n) {
  for (int i = 0; i < n; i++) {
    gemm one[2] = {g[i], {0}};
    long calls;
    double rate = measure(run_gemms, one, 0.3, &calls);
    fprintf(stderr, "  sgemm %c%c m=%d n=%d k=%d: %.4f ms, %.1f GFLOP/s\n", g[i].ta ? 'T' : 'N', g[i].tb ? 'T' : 'N',
            g[i].m, g[i].n, g[i].k, 1e3 / rate, 2e-9 * g[i].m * g[i].n * (double)g[i].k * rate);
  }
}

static void free_gemms(gemm *g, int n) {
  for (int i = 0; i < n; i++) {
    free(g[i].a), free(g[i].b), free(g[i].c);
  }
}

/* Times the model's sgemm calls alone and prints the "sgemm" line. */
static int bench_ceiling(const tfx_config *cfg, const char *name, const opts *o, int threads) {
  gemm g[MAX_GEMMS + 1];
  uint64_t rng = 7;
  int n = 0;
  memset(g, 0, sizeof g);
  double flops = plan_gemms(cfg, o->batch, g, &n, &rng);
  if (flops < 0 || n == 0) {
    free_gemms(g, MAX_GEMMS);
    fprintf(stderr, "compute: model %s: %s\n", name, n ? "out of memory" : "no dense or conv2d layer");
    return -1;
  }
  long calls;
  double rate = measure(run_gemms, g, o->ceiling_seconds, &calls);
  printf(
      "sgemm model=%s batch=%d threads=%d gflops=%.2f pass_ms=%.4f ceiling_ex_s=%.1f gemm_mflop=%.2f "
      "calls=%d passes=%ld\n",
      name, o->batch, threads, flops * rate * 1e-9, 1e3 / rate, rate * o->batch, flops * 1e-6, n, calls);
  if (verbose) {
    print_gemm_times(g, n);
  }
  free_gemms(g, n);
  return 0;
}

/* The memory floor of the optimizer: a pass over the model's targets that reads the values, gradients and both
 * Adam slots and writes values and slots, as Adam does (7 floats moved per parameter), with only multiplies
 * and adds, split over the model's pool as tfx_optim_apply_all splits Adam. */
static void floor_part(void *ctx, size_t i0, size_t i1) {
  const step_ctx *s = ctx;
  size_t start = 0; /* of target k in the joined range */
  for (int k = 0; k < tfx_model_nvars(s->m) && start < i1; start += s->targets[k].n, k++) {
    const tfx_optim_target *t = &s->targets[k];
    size_t b = i0 > start ? i0 - start : 0, e = i1 - start < t->n ? i1 - start : t->n;
    float *restrict w = t->w, *restrict m = t->slots[0], *restrict v = t->slots[1];
    const float *restrict g = t->g;
    for (size_t i = b; i < e; i++) {
      float mi = 0.9f * m[i] + 0.1f * g[i], vi = 0.999f * v[i] + 0.001f * g[i] * g[i];
      m[i] = mi, v[i] = vi, w[i] -= 1e-12f * mi * vi;
    }
  }
}

static void floor_pass(void *ctx) {
  step_ctx *s = ctx;
  size_t total = 0;
  for (int k = 0; k < tfx_model_nvars(s->m); k++) {
    total += s->targets[k].n;
  }
  tfx_par_for(tfx_model_par(s->m), total, 16384, floor_part, s);
}

/* One training step as src/cli/train.c runs it (one update of all variables, split over the model's pool), or a
 * worker step (no optimizer), with its phases timed. */
static void train_step(void *p) {
  step_ctx *s = p;
  tfx_step_stats st;
  size_t j = (size_t)(s->step % POOL) * (size_t)s->batch;
  const float *x = s->x + j * tfx_model_input_size(s->m);
  double t0 = now_s();
  tfx_model_forward(s->m, x, s->batch, 1, (uint64_t)s->step);
  double t1 = now_s();
  tfx_model_loss(s->m, s->y + j, s->batch, 1, &st);
  double t2 = now_s();
  tfx_model_backward(s->m, x, s->batch);
  double t3 = now_s();
  if (s->optimize == 1) {
    tfx_optim_apply_all(tfx_model_par(s->m), &s->opt, s->step, s->targets, tfx_model_nvars(s->m), 1.0f);
  } else if (s->optimize == 2) {
    floor_pass(s);
  }
  double t4 = now_s();
  s->phase[0] += t1 - t0, s->phase[1] += t2 - t1, s->phase[2] += t3 - t2, s->phase[3] += t4 - t3;
  s->step++;
}

/* Builds the model, its Adam slots and a fixed random batch; returns 0 or -1 (message printed). */
static int step_init(step_ctx *s, const tfx_config *cfg, const char *name, int batch) {
  tfx_err err = {0};
  memset(s, 0, sizeof *s);
  if (tfx_model_create(cfg, batch, &s->m, &err)) {
    fprintf(stderr, "compute: model %s: %s\n", name, err.msg);
    return -1;
  }
  tfx_model_init_vars(s->m, (uint64_t)cfg->seed);
  tfx_optim_init(&s->opt, cfg);
  s->batch = batch;
  size_t ny = (size_t)POOL * batch, nx = ny * tfx_model_input_size(s->m), nv = (size_t)tfx_model_nvars(s->m);
  s->x = malloc(sizeof(float) * nx);
  s->y = malloc(sizeof(int32_t) * ny);
  s->slots = calloc(2 * nv, sizeof(float *));
  s->targets = calloc(nv, sizeof *s->targets);
  if (!s->x || !s->y || !s->slots || !s->targets) {
    return -1;
  }
  for (size_t i = 0; i < 2 * nv; i++) {
    if (!(s->slots[i] = calloc(tfx_model_var(s->m, (int)(i / 2))->count, sizeof(float)))) {
      return -1;
    }
  }
  for (size_t i = 0; i < nv; i++) {
    tfx_var *v = tfx_model_var(s->m, (int)i);
    s->targets[i] = (tfx_optim_target){v->value, v->grad, s->slots + 2 * i, v->count};
  }
  uint64_t rng = 42;
  fill_uniform(s->x, nx, &rng);
  for (size_t b = 0; b < ny; b++) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    s->y[b] = (int32_t)((rng >> 33) % tfx_model_output_size(s->m));
  }
  return 0;
}

static void step_fini(step_ctx *s) {
  for (int i = 0; s->slots && i < 2 * tfx_model_nvars(s->m); i++) {
    free(s->slots[i]);
  }
  free(s->slots), free(s->targets), free(s->x), free(s->y);
  tfx_model_destroy(s->m);
}

/* Times training steps (optimize) or worker steps and prints the "tfx" or "tfx_worker" line; after training
 * steps, also the "tfx_optimizer" line: Adam's time per step beside that of the memory floor of the same bytes,
 * run in Adam's place in the same steps (so with the caches as the forward and backward passes leave them). */
static int bench_steps(const tfx_config *cfg, const char *name, const opts *o, int threads, int optimize) {
  step_ctx s;
  if (step_init(&s, cfg, name, o->batch)) {
    step_fini(&s);
    return -1;
  }
  s.optimize = optimize;
  long calls;
  double rate = measure(train_step, &s, o->seconds, &calls), per = 1e3 / (double)s.step;
  printf("%s model=%s batch=%d threads=%d ex_s=%.1f step_ms=%.4f fwd_ms=%.4f loss_ms=%.4f bwd_ms=%.4f ",
         optimize ? "tfx" : "tfx_worker", name, o->batch, threads, rate * o->batch, 1e3 / rate, s.phase[0] * per,
         s.phase[1] * per, s.phase[2] * per);
  if (optimize) {
    printf("adam_ms=%.4f ", s.phase[3] * per);
  }
  printf("steps=%ld params=%zu fp=%s\n", calls, tfx_model_param_count(s.m), o->ftz ? "ftz" : "default");
  if (optimize) {
    double adam_ms = s.phase[3] * per;
    s.optimize = 2, s.step = 0, memset(s.phase, 0, sizeof s.phase);
    measure(train_step, &s, o->seconds / 2, &calls);
    printf("tfx_optimizer model=%s batch=%d threads=%d adam_ms=%.4f same_bytes_ms=%.4f mbytes=%.2f\n", name, o->batch,
           threads, adam_ms, s.phase[3] * 1e3 / (double)s.step, 7.0 * 4 * (double)tfx_model_param_count(s.m) / 1e6);
  }
  step_fini(&s);
  return 0;
}

/* Parses "1,2" into o->threads. */
static int parse_threads(opts *o, const char *s) {
  o->n_threads = 0;
  for (char *end; *s && o->n_threads < 8; s = *end ? end + 1 : end) {
    long t = strtol(s, &end, 10);
    if (end == s || t < 1 || t > 256) {
      return -1;
    }
    o->threads[o->n_threads++] = (int)t;
  }
  return o->n_threads ? 0 : -1;
}

static int parse_args(int argc, char **argv, opts *o) {
  *o = (opts){.batch = 64, .threads = {1, 2}, .n_threads = 2, .seconds = 3, .ceiling_seconds = 2, .ceiling = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--spec") == 0) {
      o->spec = 1;
    } else if (strcmp(a, "--info") == 0) {
      o->info = 1;
    } else if (strcmp(a, "--ftz") == 0) {
      o->ftz = 1;
    } else if (strcmp(a, "--no-ceiling") == 0) {
      o->ceiling = 0;
    } else if (strcmp(a, "--worker") == 0) {
      o->worker = 1;
    } else if (strcmp(a, "--verbose") == 0) {
      o->verbose = 1;
    } else if (v && strcmp(a, "--batch") == 0 && (o->batch = atoi(v)) > 0) {
      i++;
    } else if (v && strcmp(a, "--threads") == 0 && parse_threads(o, v) == 0) {
      i++;
    } else if (v && strcmp(a, "--seconds") == 0 && (o->seconds = atof(v)) > 0) {
      i++;
    } else if (v && strcmp(a, "--ceiling-seconds") == 0 && (o->ceiling_seconds = atof(v)) > 0) {
      i++;
    } else if (a[0] != '-' && o->n_models < 8) {
      o->models[o->n_models++] = a;
    } else {
      return -1;
    }
  }
  if (o->info) {
    return 0;
  }
  return o->n_models > 0 && (!o->spec || o->n_models == 1) ? 0 : -1;
}

/* Prints the resolved experiment JSON of the model (for the PyTorch side). */
static int print_spec(const tfx_config *cfg) {
  char *json = tfx_config_to_json(cfg);
  if (!json) {
    return -1;
  }
  puts(json);
  free(json);
  return 0;
}

/* Flushes denormal results to zero (FTZ) and reads denormal inputs as zero (DAZ) on this thread, which is the
 * one that runs everything but OpenBLAS's workers (those started when the library loaded, before main). */
static void set_ftz(void) {
  _mm_setcsr(_mm_getcsr() | _MM_FLUSH_ZERO_ON | _MM_DENORMALS_ZERO_ON);
}

/* Prints the environment line: the OpenBLAS build and the kernel it picked for this CPU. */
static void print_info(void) {
  printf("info openblas=\"%s\" corename=%s pool=%d\n", openblas_get_config(), openblas_get_corename(), POOL);
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--batch N] [--threads 1,2] [--seconds S] [--ceiling-seconds S] [--no-ceiling] [--ftz]\n"
          "       [--worker] [--verbose] [--spec] NAME=CONFIG.json|cnn ...\n"
          "       %s --info\n",
          argv0, argv0);
}

int main(int argc, char **argv) {
  opts o;
  if (parse_args(argc, argv, &o)) {
    usage(argv[0]);
    return 2;
  }
  static tfx_config cfg;
  verbose = o.verbose;
  if (o.info) {
    print_info();
    return 0;
  }
  if (o.ftz) {
    set_ftz();
  }
  for (int i = 0; i < o.n_models; i++) {
    char name[64];
    tfx_err err = {0};
    if (load_config(o.models[i], &cfg, name, sizeof name, &err)) {
      fprintf(stderr, "compute: %s\n", err.msg);
      return 1;
    }
    if (o.spec) {
      return print_spec(&cfg) ? 1 : 0;
    }
    for (int t = 0; t < o.n_threads; t++) {
      openblas_set_num_threads(o.threads[t]);
      cfg.threads = o.threads[t]; /* the model's worker pool, as training.threads sets it */
      if (bench_steps(&cfg, name, &o, o.threads[t], 1) || (o.worker && bench_steps(&cfg, name, &o, o.threads[t], 0))) {
        return 1;
      }
      if (o.ceiling && bench_ceiling(&cfg, name, &o, o.threads[t])) {
        return 1;
      }
      fflush(stdout);
    }
  }
  return 0;
}
