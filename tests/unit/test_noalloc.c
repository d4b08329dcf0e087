/* The training loop allocates nothing: after the first steps, the gradient half of a step as workers and the
 * trainer run it (tfx_compute_gradients: batcher, forward, loss, backward, accumulation, clipping) and the
 * optimizer (tfx_optim_apply_all) make no call to malloc, calloc, realloc or posix_memalign. This executable is
 * linked with -Wl,--wrap for those functions (tests/unit/CMakeLists.txt), so every call from tfx's own code
 * (linked in statically) goes through the counters below; OpenBLAS and libc internals are not counted. */
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tmpdir.h"
#include "train/step.h"

static atomic_long allocations;

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

void *__wrap_malloc(size_t n) {
  atomic_fetch_add(&allocations, 1);
  return __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n) {
  atomic_fetch_add(&allocations, 1);
  return __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n) {
  atomic_fetch_add(&allocations, 1);
  return __real_realloc(p, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n) {
  atomic_fetch_add(&allocations, 1);
  return __real_posix_memalign(p, align, n);
}

static void setup(void) {
  tmpdir_create("noalloc");
}

TestSuite(noalloc, .init = setup, .fini = tmpdir_remove);

/* Writes an IDX file: magic (type 0x08, rank), big-endian dims, then the bytes. */
static void write_idx(const char *path, int rank, const uint32_t *dims, const uint8_t *data, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  uint32_t head[4] = {htonl(0x0800u | (uint32_t)rank)};
  for (int i = 0; i < rank; i++) {
    head[i + 1] = htonl(dims[i]);
  }
  cr_assert_eq(fwrite(head, 4, (size_t)rank + 1, f), (size_t)rank + 1);
  cr_assert_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* 64 random 8x8 images with labels 0..3, as an in-memory dataset; the caller owns it. */
static tfx_dataset *small_dataset(void) {
  enum { N = 64, SIDE = 8 };
  static uint8_t pixels[N * SIDE * SIDE], labels[N];
  for (size_t i = 0; i < sizeof pixels; i++) {
    pixels[i] = (uint8_t)(i * 2654435761u >> 24);
  }
  for (int i = 0; i < N; i++) {
    labels[i] = (uint8_t)(i % 4);
  }
  char images[128], labs[128];
  snprintf(images, sizeof images, "%s/images.idx", tmp), snprintf(labs, sizeof labs, "%s/labels.idx", tmp);
  uint32_t idims[3] = {N, SIDE, SIDE}, ldims[1] = {N};
  write_idx(images, 3, idims, pixels, sizeof pixels);
  write_idx(labs, 1, ldims, labels, sizeof labels);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 1.0 / 255, SIDE * SIDE, &d, &err), TFX_OK, "%s", err.msg);
  return d;
}

static const char CNN[] =
    "{\"model\": {\"input_shape\": [8, 8, 1], \"layers\": ["
    "{\"type\": \"conv2d\", \"filters\": 4, \"kernel_size\": 3, \"padding\": \"same\", \"activation\": \"relu\"},"
    "{\"type\": \"batch_norm\"}, {\"type\": \"max_pool2d\", \"pool_size\": 2},"
    "{\"type\": \"conv2d\", \"filters\": 4, \"kernel_size\": 3, \"strides\": 2, \"activation\": \"tanh\"},"
    "{\"type\": \"flatten\"}, {\"type\": \"dense\", \"units\": 16, \"activation\": \"sigmoid\"},"
    "{\"type\": \"dropout\", \"rate\": 0.25}, {\"type\": \"dense\", \"units\": 4}],"
    " \"loss\": \"softmax_cross_entropy\"},"
    " \"optimizer\": {\"name\": \"adam\", \"learning_rate\": 0.01, \"schedule\": \"cosine\"},"
    " \"training\": {\"batch_size\": 8, \"threads\": %d, \"max_steps\": 100}}";

/* Runs `steps` training steps of the CNN at `threads` threads with `accumulate` minibatches a step; returns the
 * allocations counted from step 3 on (steps 1-2 may size lazily made buffers). */
static long allocations_in_steps(int threads, int accumulate, int steps) {
  char json[2048];
  snprintf(json, sizeof json, CNN, threads);
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg, json, "noalloc", &err), TFX_OK, "%s", err.msg);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 8, &m, &err), TFX_OK, "%s", err.msg);
  tfx_model_init_vars(m, 42);
  tfx_dataset *d = small_dataset();
  tfx_batcher *b = NULL;
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 7, 1, &b, &err), TFX_OK, "%s", err.msg);
  int nv = tfx_model_nvars(m);
  float *x = calloc(8 * tfx_model_input_size(m), sizeof *x), **acc = calloc((size_t)nv, sizeof *acc);
  int32_t *y = calloc(8, sizeof *y);
  float **slots = calloc(2 * (size_t)nv, sizeof *slots);
  tfx_optim_target *targets = calloc((size_t)nv, sizeof *targets);
  int n_targets = 0;
  for (int i = 0; i < nv; i++) {
    tfx_var *v = tfx_model_var(m, i);
    acc[i] = calloc(v->count, sizeof(float));
    slots[2 * i] = calloc(v->count, sizeof(float)), slots[2 * i + 1] = calloc(v->count, sizeof(float));
    if (v->trainable) {
      targets[n_targets++] = (tfx_optim_target){v->value, v->grad, slots + 2 * i, v->count};
    }
  }
  tfx_optim opt;
  tfx_optim_init(&opt, &cfg);
  tfx_grad_step g = {.batch = 8, .accumulate = accumulate, .clip_norm = 1.0, .x = x, .y = y, .acc = acc};
  long before = 0;
  float first = 0, last = 0;
  for (int s = 0; s < steps; s++) {
    if (s == 2) {
      before = atomic_load(&allocations);
    }
    tfx_step_stats st;
    memset(&st, 0, sizeof st);
    tfx_compute_gradients(m, b, &g, (uint64_t)s, &st);
    tfx_optim_apply_all(tfx_model_par(m), &opt, s, targets, n_targets, 1.0f);
    first = s == 0 ? (float)st.loss : first, last = (float)st.loss;
  }
  long counted = atomic_load(&allocations) - before;
  cr_assert(last < first, "the steps must train (loss %f -> %f), or the loop measured is not a real one", first, last);
  for (int i = 0; i < nv; i++) {
    free(acc[i]), free(slots[2 * i]), free(slots[2 * i + 1]);
  }
  free(x), free(y), free(acc), free(slots), free(targets);
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
  tfx_model_destroy(m);
  return counted;
}

Test(noalloc, counter_sees_allocations_from_tfx_code) {
  long before = atomic_load(&allocations);
  tfx_dataset_destroy(small_dataset()); /* the reader allocates: the wrap must see it, or the test proves nothing */
  cr_assert_gt(atomic_load(&allocations), before);
}

Test(noalloc, training_steps_one_thread) {
  long n = allocations_in_steps(1, 1, 60);
  cr_assert_eq(n, 0, "%ld allocations in 58 steps at 1 thread", n);
}

Test(noalloc, training_steps_two_threads_accumulating) {
  long n = allocations_in_steps(2, 2, 60);
  cr_assert_eq(n, 0, "%ld allocations in 58 steps at 2 threads, 2 minibatches a step", n);
}
