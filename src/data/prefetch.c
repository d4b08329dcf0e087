/* A followed stream's reader thread: it reads and parses the next windows while the worker computes or waits
 * on the ps, and hands them over a bounded queue of PREFETCH_DEPTH windows. The worker (the consumer) alone calls
 * the stream's idle function, and only once the reader has looked at the directory after the worker asked and
 * found no file: a take never reports "waiting for a file" while a landed file is still being parsed. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "data/data_impl.h"

enum { PREFETCH_DEPTH = 2 };

struct data__prefetch {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* every change: a window queued or taken, a poll asked or answered, stop */
  data__produce_fn produce;
  void *ctx;
  data__window q[PREFETCH_DEPTH];
  size_t head, n;
  uint64_t asked, answered; /* polls of the directory the consumer asked for; the last one that found nothing */
  int stop, done;           /* done: the producer stopped after an error, kept in rc and err */
  int rc;
  tfx_err err;
  char what[TFX_PATH_MAX + 64]; /* "waiting for a file in DIR", for the idle stop's message */
};

void data__window_free(data__window *w) {
  tfx_dataset_destroy(w->d);
  free(w->perm);
  *w = (data__window){0};
}

/* Now plus 100 ms on the clock the condition waits use. */
static struct timespec in_100ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec += 100 * 1000 * 1000;
  t.tv_sec += t.tv_nsec / 1000000000;
  t.tv_nsec %= 1000000000;
  return t;
}

/* The producer's loop: the next window into the queue (waiting while it is full) until an error or stop. */
static void *run(void *arg) {
  data__prefetch *p = arg;
  for (;;) {
    data__window w = {0};
    tfx_err err = {0};
    int rc = p->produce(p->ctx, &w, &err);
    pthread_mutex_lock(&p->mu);
    while (!p->stop && p->n == PREFETCH_DEPTH) {
      pthread_cond_wait(&p->cv, &p->mu);
    }
    if (p->stop || rc) {
      p->done = 1;
      p->rc = rc;
      p->err = err;
      pthread_cond_broadcast(&p->cv);
      pthread_mutex_unlock(&p->mu);
      data__window_free(&w);
      return NULL;
    }
    p->q[(p->head + p->n++) % PREFETCH_DEPTH] = w;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

int data__prefetch_start(data__produce_fn produce, void *ctx, const char *dir, data__prefetch **out, tfx_err *err) {
  data__prefetch *p = calloc(1, sizeof *p);
  if (!p) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory for the reader of %s", dir);
  }
  p->produce = produce;
  p->ctx = ctx;
  snprintf(p->what, sizeof p->what, "waiting for a file in %s", dir);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  *out = p; /* before the thread starts: produce reaches p through ctx (the stream's pointer) */
  int rc = pthread_create(&p->thread, NULL, run, p);
  if (rc) {
    *out = NULL;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    errno = rc;
    return tfx_err_sys(err, TFX_ESYS, "start the reader thread of %s", dir);
  }
  return TFX_OK;
}

uint64_t data__prefetch_ticket(data__prefetch *p) {
  pthread_mutex_lock(&p->mu);
  uint64_t t = p->asked;
  pthread_mutex_unlock(&p->mu);
  return t;
}

int data__prefetch_dry(data__prefetch *p, uint64_t ticket) {
  pthread_mutex_lock(&p->mu);
  p->answered = ticket;
  pthread_cond_broadcast(&p->cv);
  struct timespec until = in_100ms();
  int rc = 0;
  while (!p->stop && p->asked == ticket && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&p->cv, &p->mu, &until);
  }
  int stop = p->stop;
  pthread_mutex_unlock(&p->mu);
  return stop;
}

/* Asks the producer to look at the directory again; mu held. Returns the poll's number. */
static uint64_t ask(data__prefetch *p) {
  pthread_cond_broadcast(&p->cv);
  return ++p->asked;
}

/* Waits (mu held) until a window is queued, the producer stopped, or it found no file after poll `want`; then
 * calls idle outside the lock and waits up to 100 ms for a window. Returns whether idle said stop. */
static int wait_window(data__prefetch *p, tfx_idle_fn idle, void *ctx) {
  for (uint64_t want = ask(p); p->n == 0 && !p->done;) {
    if (p->answered < want) {
      pthread_cond_wait(&p->cv, &p->mu);
      continue;
    }
    pthread_mutex_unlock(&p->mu);
    int stop = idle && idle(ctx);
    pthread_mutex_lock(&p->mu);
    if (stop) {
      return 1;
    }
    struct timespec until = in_100ms();
    while (p->n == 0 && !p->done && pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT) {
    }
    want = ask(p);
  }
  return 0;
}

int data__prefetch_take(data__prefetch *p, tfx_idle_fn idle, void *ctx, data__window *out, tfx_err *err) {
  pthread_mutex_lock(&p->mu);
  int rc = p->n == 0 && !p->done && wait_window(p, idle, ctx) ? TFX_EINTR : TFX_OK;
  if (rc) {
    tfx_err_set(err, rc, "stopped while %s", p->what);
  } else if (p->n > 0) {
    *out = p->q[p->head];
    p->q[p->head] = (data__window){0};
    p->head = (p->head + 1) % PREFETCH_DEPTH;
    p->n--;
    pthread_cond_broadcast(&p->cv);
  } else {
    rc = p->rc;
    if (err) {
      *err = p->err;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

size_t data__prefetch_queued(data__prefetch *p, size_t enough) {
  pthread_mutex_lock(&p->mu);
  size_t n = 0;
  for (size_t i = 0; i < p->n && n < enough; i++) {
    n += p->q[(p->head + i) % PREFETCH_DEPTH].d->n;
  }
  pthread_mutex_unlock(&p->mu);
  return n;
}

void data__prefetch_stop(data__prefetch *p) {
  if (!p) {
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  for (size_t i = 0; i < p->n; i++) {
    data__window_free(&p->q[(p->head + i) % PREFETCH_DEPTH]);
  }
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}
