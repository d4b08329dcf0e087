/* The worker pool: a job generation counter that idle workers poll and then sleep on, and a claim word from
 * which the caller and the workers take the job's parts, so that a worker that wakes late (or never gets a
 * core) leaves its part to the caller instead of holding it up. */
#include "nn/par.h"

#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"

struct tfx_par {
  int threads;
  int started; /* workers running */
  pthread_t tid[TFX_PAR_MAX - 1];
  pthread_mutex_t mu;
  pthread_cond_t wake;
  atomic_uint gen;             /* bumped once per job (and once to stop) */
  atomic_uint_least64_t claim; /* the job's generation (bits 32-63), its parts (16-31), the next part (0-15) */
  atomic_int done;             /* parts of the current job finished */
  atomic_int sleepers;         /* workers waiting on `wake` */
  atomic_int stop;
  /* The current job: written by the caller before it publishes the claim word, read by whoever claims one
   * of its parts (the caller waits for every part before it writes the next job). */
  tfx_par_fn fn;
  void *ctx;
  size_t n;
};

/* Takes and runs the parts of job `gen` that nobody has taken yet; returns when none is left. */
static void run_parts(tfx_par *p, unsigned gen) {
  uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
  for (;;) {
    unsigned parts = (unsigned)(c >> 16) & 0xffff, next = (unsigned)c & 0xffff;
    if ((unsigned)(c >> 32) != gen || next >= parts) {
      return;
    }
    if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire)) {
      continue; /* c now holds the current word */
    }
    p->fn(p->ctx, p->n * next / parts, p->n * (next + 1) / parts);
    atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    c = atomic_load_explicit(&p->claim, memory_order_acquire);
  }
}

/* Waits until gen differs from `seen`: polls for TFX_PAR_SPIN_US (jobs often come back to back), then
 * sleeps, so that the core goes to OpenBLAS's threads during an sgemm. Returns the new generation. */
static unsigned wait_job(tfx_par *p, unsigned seen) {
  double start = tfx_now_us();
  for (int i = 0;; i++) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g != seen) {
      return g;
    }
    if ((i & 63) == 63 && tfx_now_us() - start > TFX_PAR_SPIN_US) {
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
  tfx_par *p = arg;
  unsigned seen = 0;
  for (;;) {
    seen = wait_job(p, seen);
    if (atomic_load(&p->stop)) {
      return NULL;
    }
    run_parts(p, seen);
  }
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
    int rc = pthread_create(&p->tid[i - 1], NULL, worker_main, p);
    if (rc) {
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

/* Waits for the parts that workers took: they are running, so it polls; after TFX_PAR_SPIN_US (a worker that
 * was preempted) it yields the core on every 64th poll. */
static void wait_done(tfx_par *p, int parts) {
  double start = 0;
  for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) < parts; i++) {
    if (i < 64 || (i & 63) || (start ? tfx_now_us() - start < TFX_PAR_SPIN_US : (start = tfx_now_us(), 1))) {
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
  unsigned gen = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1; /* only this thread bumps gen */
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  atomic_store_explicit(&p->claim, (uint64_t)gen << 32 | (uint64_t)parts << 16, memory_order_release);
  bump(p);
  run_parts(p, gen);
  wait_done(p, parts);
}
