/* The ps's helper thread: shares a large element-wise job (NaN/Inf scan, update) with the ps thread. The job is
 * cut into chunks that both threads claim from one atomic counter, so the ps thread never waits for a helper
 * that has not started (on a loaded machine it simply does every chunk itself), and the helper is made once,
 * so a job costs a wake-up instead of a pthread_create. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ps/ps_impl.h"

#define CHUNK_FLOATS (16 * 1024) /* 64 KiB: about 3 µs of work, the longest the ps thread waits at the end */

struct ps_helper {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  ps_range_fn fn;
  void *ctx;
  size_t n;
  atomic_size_t next;
  uint64_t gen, seen;
  int open, inside, quit;
};

/* Claims chunks until none is left. */
static void work(ps_helper *h) {
  for (;;) {
    size_t begin = atomic_fetch_add(&h->next, CHUNK_FLOATS);
    if (begin >= h->n) {
      return;
    }
    h->fn(h->ctx, begin, begin + CHUNK_FLOATS < h->n ? begin + CHUNK_FLOATS : h->n);
  }
}

static void *helper_main(void *arg) {
  ps_helper *h = arg;
  pthread_mutex_lock(&h->lock);
  for (;;) {
    while (!h->quit && !(h->open && h->gen != h->seen)) {
      pthread_cond_wait(&h->wake, &h->lock);
    }
    if (h->quit) {
      break;
    }
    h->seen = h->gen;
    h->inside = 1;
    pthread_mutex_unlock(&h->lock);
    work(h);
    pthread_mutex_lock(&h->lock);
    h->inside = 0;
    pthread_cond_signal(&h->done);
  }
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

ps_helper *ps__helper_create(void) {
  ps_helper *h = calloc(1, sizeof *h);
  if (!h) {
    return NULL;
  }
  pthread_mutex_init(&h->lock, NULL);
  pthread_cond_init(&h->wake, NULL);
  pthread_cond_init(&h->done, NULL);
  if (pthread_create(&h->thread, NULL, helper_main, h)) {
    pthread_cond_destroy(&h->wake);
    pthread_cond_destroy(&h->done);
    pthread_mutex_destroy(&h->lock);
    free(h);
    return NULL;
  }
  return h;
}

void ps__helper_destroy(ps_helper *h) {
  if (!h) {
    return;
  }
  pthread_mutex_lock(&h->lock);
  h->quit = 1;
  pthread_cond_signal(&h->wake);
  pthread_mutex_unlock(&h->lock);
  pthread_join(h->thread, NULL);
  pthread_cond_destroy(&h->wake);
  pthread_cond_destroy(&h->done);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

void ps__helper_run(ps_helper *h, ps_range_fn fn, void *ctx, size_t n) {
  if (!h) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&h->lock);
  h->fn = fn;
  h->ctx = ctx;
  h->n = n;
  h->open = 1;
  h->gen++;
  atomic_store(&h->next, 0);
  pthread_cond_signal(&h->wake);
  pthread_mutex_unlock(&h->lock);
  work(h);
  pthread_mutex_lock(&h->lock);
  h->open = 0; /* a helper that wakes from now on finds nothing to do */
  while (h->inside) {
    pthread_cond_wait(&h->done, &h->lock);
  }
  pthread_mutex_unlock(&h->lock);
}
