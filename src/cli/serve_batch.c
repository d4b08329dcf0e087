/* Request batching: one scorer thread, requests joined into batches, scorers swapped between batches (serve.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/serve.h"

struct tfx_serve_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int started, stopping;
  tfx_serve_job *head, *tail;
  size_t waiting; /* instances queued */
  tfx_scorer *scorer, *next;
  int max_batch, wait_us;
  int64_t step; /* of the newest scorer handed over */
  uint64_t batches, instances;
  float *probs; /* [max batch of the scorer, classes], regrown on a swap */
  size_t probs_cap;
};

/* Appends field f of part p to the joined field, its offsets moved by base. */
static void join_field(tfx_field *to, const tfx_field *from, size_t at, size_t n, int64_t base) {
  for (size_t i = 0; i <= n; i++) {
    to->off[at + i] = from->off[i] + base;
  }
  int64_t nnz = from->off[n];
  memcpy(to->ids + base, from->ids, sizeof(int64_t) * (size_t)nnz);
  for (int64_t k = 0; to->vals && k < nnz; k++) {
    to->vals[base + k] = from->vals ? from->vals[k] : 1.0f; /* no weights: each weighs 1, as the bag reads it */
  }
}

/* Allocates the joined set's arrays for n examples of dim floats and the fields' nnz (weights if any part has). */
static int join_alloc(tfx_dataset *d, tfx_dataset *const *parts, int np, size_t n) {
  d->n = n;
  d->dim = parts[0]->dim;
  d->n_fields = parts[0]->n_fields;
  if (!(d->y = calloc(n + 1, sizeof(int32_t))) || (parts[0]->x && !(d->x = malloc(sizeof(float) * n * d->dim + 1)))) {
    return TFX_ENOMEM;
  }
  for (int f = 0; f < d->n_fields; f++) {
    int64_t nnz = 0;
    int vals = 0;
    for (int p = 0; p < np; p++) {
      nnz += parts[p]->fields[f].off[parts[p]->n];
      vals |= parts[p]->fields[f].vals != NULL;
    }
    tfx_field *to = &d->fields[f];
    if (!(to->off = malloc(sizeof(int64_t) * (n + 1))) || !(to->ids = malloc(sizeof(int64_t) * (size_t)nnz + 1)) ||
        (vals && !(to->vals = malloc(sizeof(float) * (size_t)nnz + 1)))) {
      return TFX_ENOMEM;
    }
    to->off[0] = 0;
  }
  return TFX_OK;
}

int tfx_serve_join(tfx_dataset *const *parts, int n, tfx_dataset **out, tfx_err *err) {
  size_t total = 0;
  if (n < 1) {
    return tfx_err_set(err, TFX_EINVAL, "join: no parts");
  }
  for (int p = 0; p < n; p++) {
    if (parts[p]->dim != parts[0]->dim || parts[p]->n_fields != parts[0]->n_fields || !parts[p]->x != !parts[0]->x) {
      return tfx_err_set(err, TFX_EINVAL, "join: part %d has another shape than part 0", p);
    }
    total += parts[p]->n;
  }
  tfx_dataset *d = calloc(1, sizeof *d);
  if (!d || join_alloc(d, parts, n, total)) {
    tfx_dataset_destroy(d);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory joining %zu instances", total);
  }
  size_t at = 0;
  for (int p = 0; p < n; p++) {
    const tfx_dataset *s = parts[p];
    if (s->x) {
      memcpy(d->x + at * d->dim, s->x, sizeof(float) * s->n * s->dim);
    }
    for (int f = 0; f < d->n_fields; f++) {
      join_field(&d->fields[f], &s->fields[f], at, s->n, d->fields[f].off[at]);
    }
    at += s->n;
  }
  *out = d;
  return TFX_OK;
}

/* Waits (mutex held) for the first job, then up to wait_us for more until a batch is full; returns 0 on stop. */
static int wait_batch(tfx_serve_queue *q) {
  while (!q->head && !q->stopping) {
    pthread_cond_wait(&q->cv, &q->mu);
  }
  if (q->stopping) {
    return 0;
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  long ns = until.tv_nsec + (long)q->wait_us * 1000;
  until.tv_sec += ns / 1000000000L;
  until.tv_nsec = ns % 1000000000L;
  while (q->wait_us > 0 && !q->stopping && q->waiting < (size_t)q->max_batch) {
    if (pthread_cond_timedwait(&q->cv, &q->mu, &until)) {
      break;
    }
  }
  return !q->stopping;
}

/* Takes (mutex held) the jobs of the next batch: the first, then more while they fit in max_batch. */
static tfx_serve_job *take_batch(tfx_serve_queue *q, int *count) {
  tfx_serve_job *first = q->head, *last = first;
  size_t n = first->data->n;
  *count = 1;
  while (last->next && n + last->next->data->n <= (size_t)q->max_batch && *count < 1024) {
    last = last->next;
    n += last->data->n;
    (*count)++;
  }
  q->head = last->next;
  q->tail = q->head ? q->tail : NULL;
  last->next = NULL;
  q->waiting -= n;
  return first;
}

/* Scores a joined set in chunks of the scorer's batch, the probabilities into probs [d->n, classes]. */
static int score_all(tfx_serve_queue *q, const tfx_dataset *d, float *probs, char *why, size_t why_len) {
  size_t classes = tfx_scorer_classes(q->scorer), cap = (size_t)tfx_scorer_max_batch(q->scorer);
  for (size_t i = 0; i < d->n; i += cap) {
    int b = (int)(d->n - i < cap ? d->n - i : cap), at = 0;
    tfx_err e = {0};
    int rc = tfx_scorer_run(q->scorer, d, i, b, probs + i * classes, &at, &e);
    if (rc) {
      snprintf(why, why_len, "instance %zu of the batch: %s", i + (size_t)at, e.msg);
      return rc;
    }
  }
  return TFX_OK;
}

/* Hands each job its rows of the batch's probabilities (or the batch's error) and calls it back. */
static void finish(tfx_serve_queue *q, tfx_serve_job *jobs, const float *probs, int rc, const char *why) {
  size_t classes = tfx_scorer_classes(q->scorer), at = 0;
  for (tfx_serve_job *j = jobs, *next; j; j = next) {
    next = j->next;
    j->classes = classes;
    j->step = tfx_scorer_step(q->scorer);
    j->rc = rc;
    snprintf(j->error, sizeof j->error, "%s", why);
    if (!rc && !(j->probs = malloc(sizeof(float) * j->data->n * classes + 1))) {
      j->rc = TFX_ENOMEM;
      snprintf(j->error, sizeof j->error, "out of memory");
    } else if (!rc) {
      memcpy(j->probs, probs + at * classes, sizeof(float) * j->data->n * classes);
    }
    at += j->data->n;
    tfx_dataset_destroy(j->data);
    j->data = NULL;
    j->done(j, j->ctx);
  }
}

/* Scores one batch of count jobs at the current scorer. */
static void run_batch(tfx_serve_queue *q, tfx_serve_job *jobs, int count) {
  tfx_dataset *parts[1024], *joined = NULL;
  int i = 0;
  for (tfx_serve_job *j = jobs; j; j = j->next) {
    parts[i++] = j->data;
  }
  char why[256] = "";
  tfx_err e = {0};
  int rc = count > 1 ? tfx_serve_join(parts, count, &joined, &e) : TFX_OK;
  const tfx_dataset *d = count > 1 ? joined : parts[0];
  size_t need = d && !rc ? d->n * tfx_scorer_classes(q->scorer) : 0;
  if (rc) {
    snprintf(why, sizeof why, "%s", e.msg);
  } else if (need > q->probs_cap) {
    free(q->probs);
    q->probs_cap = (q->probs = malloc(sizeof(float) * need)) ? need : 0;
    rc = q->probs ? TFX_OK : TFX_ENOMEM;
    snprintf(why, sizeof why, "%s", rc ? "out of memory" : "");
  }
  if (!rc) {
    rc = score_all(q, d, q->probs, why, sizeof why);
  }
  finish(q, jobs, q->probs, rc, why);
  tfx_dataset_destroy(joined);
}

static void *scorer_main(void *arg) {
  tfx_serve_queue *q = arg;
  pthread_mutex_lock(&q->mu);
  while (wait_batch(q)) {
    int count;
    tfx_serve_job *jobs = take_batch(q, &count);
    tfx_scorer *old = q->next ? q->scorer : NULL;
    if (q->next) {
      q->scorer = q->next;
      q->next = NULL;
    }
    q->batches++;
    pthread_mutex_unlock(&q->mu);
    tfx_scorer_close(old);
    size_t n = 0;
    for (tfx_serve_job *j = jobs; j; j = j->next) {
      n += j->data->n;
    }
    run_batch(q, jobs, count);
    pthread_mutex_lock(&q->mu);
    q->instances += n;
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

int tfx_serve_queue_create(tfx_scorer *s, int max_batch, int wait_us, tfx_serve_queue **out, tfx_err *err) {
  tfx_serve_queue *q = calloc(1, sizeof *q);
  if (!q) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  q->scorer = s;
  q->step = tfx_scorer_step(s);
  q->max_batch = max_batch;
  q->wait_us = wait_us;
  if (pthread_create(&q->thread, NULL, scorer_main, q)) {
    q->scorer = NULL;
    tfx_serve_queue_destroy(q);
    return tfx_err_sys(err, TFX_ESYS, "start the scorer thread");
  }
  q->started = 1;
  *out = q;
  return TFX_OK;
}

void tfx_serve_queue_submit(tfx_serve_queue *q, tfx_serve_job *job) {
  pthread_mutex_lock(&q->mu);
  if (q->stopping) {
    pthread_mutex_unlock(&q->mu);
    tfx_dataset_destroy(job->data);
    job->data = NULL;
    job->rc = TFX_EPEER;
    snprintf(job->error, sizeof job->error, "the server is stopping");
    job->done(job, job->ctx);
    return;
  }
  job->next = NULL;
  if (q->tail) {
    q->tail->next = job;
  } else {
    q->head = job;
  }
  q->tail = job;
  q->waiting += job->data->n;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

void tfx_serve_queue_swap(tfx_serve_queue *q, tfx_scorer *next) {
  pthread_mutex_lock(&q->mu);
  tfx_scorer *dropped = q->next; /* handed over but never used: a newer one came first */
  q->next = next;
  q->step = tfx_scorer_step(next);
  pthread_mutex_unlock(&q->mu);
  tfx_scorer_close(dropped);
}

int64_t tfx_serve_queue_step(tfx_serve_queue *q) {
  pthread_mutex_lock(&q->mu);
  int64_t step = q->step;
  pthread_mutex_unlock(&q->mu);
  return step;
}

void tfx_serve_queue_counts(tfx_serve_queue *q, uint64_t *batches, uint64_t *instances) {
  pthread_mutex_lock(&q->mu);
  *batches = q->batches;
  *instances = q->instances;
  pthread_mutex_unlock(&q->mu);
}

void tfx_serve_queue_stop(tfx_serve_queue *q) {
  pthread_mutex_lock(&q->mu);
  q->stopping = 1;
  tfx_serve_job *jobs = q->head;
  q->head = q->tail = NULL;
  q->waiting = 0;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  if (q->started) {
    pthread_join(q->thread, NULL);
    q->started = 0;
  }
  for (tfx_serve_job *j = jobs, *next; j; j = next) {
    next = j->next;
    tfx_dataset_destroy(j->data);
    j->data = NULL;
    j->rc = TFX_EPEER;
    snprintf(j->error, sizeof j->error, "the server is stopping");
    j->done(j, j->ctx);
  }
}

void tfx_serve_queue_destroy(tfx_serve_queue *q) {
  if (!q) {
    return;
  }
  tfx_serve_queue_stop(q);
  tfx_scorer_close(q->scorer);
  tfx_scorer_close(q->next);
  free(q->probs);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
}
