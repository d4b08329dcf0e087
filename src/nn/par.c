/* The worker pool: a job generation counter that idle workers poll (yielding) and then sleep on. */
#include "par.h"

#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct tfx_par {
  int threads;
  int started; /* workers running */
  pthread_t tid[TFX_PAR_MAX - 1];
  pthread_mutex_t mu;
  pthread_cond_t wake;
  atomic_uint gen;     /* bumped once per job (and once to stop) */
  atomic_int pending;  /* workers' parts of the current job not yet done */
  atomic_int sleepers; /* workers waiting on `wake` */
  atomic_int stop;
  /* The current job: written by the caller before it bumps gen, read by the workers after they see it. */
  tfx_par_fn fn;
  void *ctx;
  size_t n;
  int parts;
};

typedef struct worker_arg {
  tfx_par *p;
  int index; /* 1 .. threads - 1: the part this worker runs */
} worker_arg;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

/* Part i of n split into `parts` contiguous ranges. */
static void part_range(size_t n, int parts, int i, size_t *begin, size_t *end) {
  *begin = n * (size_t)i / (size_t)parts;
  *end = n * (size_t)(i + 1) / (size_t)parts;
}

/* Waits until gen differs from `seen`: polls for TFX_PAR_SPIN_US (jobs often come back to back), then
 * sleeps, so that the core goes to OpenBLAS's threads during an sgemm. Returns the new generation. */
static unsigned wait_job(tfx_par *p, unsigned seen) {
  double start = now_us();
  for (int i = 0;; i++) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g != seen) {
      return g;
    }
    if ((i & 63) == 63 && now_us() - start > TFX_PAR_SPIN_US) {
      break;
    }
    _mm_pause();
  }
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->sleepers, 1);
  unsigned g;
  while ((g = atomic_load(&p->gen)) == seen) {
    pthread_cond_wait(&p->wake, &p->mu);
  }
  atomic_fetch_sub(&p->sleepers, 1);
  pthread_mutex_unlock(&p->mu);
  return g;
}

static void *worker_main(void *arg) {
  worker_arg *w = arg;
  tfx_par *p = w->p;
  unsigned seen = 0;
  for (;;) {
    seen = wait_job(p, seen);
    if (atomic_load(&p->stop)) {
      break;
    }
    if (w->index < p->parts) {
      size_t b, e;
      part_range(p->n, p->parts, w->index, &b, &e);
      p->fn(p->ctx, b, e);
    }
    atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
  }
  free(w);
  return NULL;
}

/* Publishes a new generation and wakes the workers that sleep. */
static void bump(tfx_par *p) {
  atomic_fetch_add(&p->gen, 1); /* sequentially consistent with the sleepers count (see wait_job) */
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
}

int tfx_par_create(int threads, tfx_par **out, tfx_err *err) {
  if (threads < 1 || threads > TFX_PAR_MAX) {
    return tfx_err_set(err, TFX_EINVAL, "worker pool: %d threads (1 to %d)", threads, TFX_PAR_MAX);
  }
  tfx_par *p = calloc(1, sizeof *p);
  if (!p) {
    return tfx_err_set(err, TFX_ENOMEM, "worker pool: out of memory");
  }
  p->threads = threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  for (int i = 1; i < threads; i++) {
    worker_arg *w = malloc(sizeof *w);
    if (w) {
      *w = (worker_arg){p, i};
    }
    int rc = w ? pthread_create(&p->tid[i - 1], NULL, worker_main, w) : ENOMEM;
    if (rc) {
      free(w);
      errno = rc;
      tfx_par_destroy(p);
      return tfx_err_set(err, TFX_ESYS, "worker pool: cannot start thread %d of %d", i + 1, threads);
    }
    p->started++;
  }
  *out = p;
  return TFX_OK;
}

void tfx_par_destroy(tfx_par *p) {
  if (!p) {
    return;
  }
  atomic_store(&p->stop, 1);
  bump(p);
  for (int i = 0; i < p->started; i++) {
    pthread_join(p->tid[i], NULL);
  }
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int tfx_par_threads(const tfx_par *p) {
  return p ? p->threads : 1;
}

/* Waits for the workers' parts: they are about as long as the caller's, so it polls; after TFX_PAR_SPIN_US (a
 * worker that was preempted) it yields the core on every poll. */
static void wait_done(tfx_par *p) {
  double start = 0;
  for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++) {
    if (i < 64 || (i & 63) || (start ? now_us() - start < TFX_PAR_SPIN_US : (start = now_us(), 1))) {
      _mm_pause();
    } else {
      sched_yield();
    }
  }
}

void tfx_par_for(tfx_par *p, size_t n, size_t grain, tfx_par_fn fn, void *ctx) {
  size_t most = grain ? n / grain : n;
  int parts = p ? p->threads : 1;
  if ((size_t)parts > most) {
    parts = most ? (int)most : 1;
  }
  if (parts <= 1) {
    fn(ctx, 0, n);
    return;
  }
  p->fn = fn, p->ctx = ctx, p->n = n, p->parts = parts;
  atomic_store_explicit(&p->pending, p->threads - 1, memory_order_relaxed);
  bump(p);
  size_t b, e;
  part_range(n, parts, 0, &b, &e);
  fn(ctx, b, e);
  wait_done(p);
}
