/* serve's header deadline (serve.h): each request's headers must be in within a limit of the connection's start
 * (or of its previous request's end), else its socket is shut down and libmicrohttpd closes it. MHD's own
 * timeout is one of inactivity, which a client sending a header byte every few seconds (slowloris) never meets:
 * 2 048 such connections held every slot and legitimate requests failed. A watcher thread sweeps twice a
 * second; records are added and dropped by MHD's connection notifications, on its thread, under one mutex, so a
 * socket is shut down only while MHD still holds it open (it closes the socket after the closed notification). */
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "cli/serve.h"
#include "common/clock.h"
#include "common/log.h"

/* One connection: its socket and when its headers are due (0: in, the request is being answered). */
typedef struct conn_rec {
  int fd;
  int64_t due_ms;
  struct conn_rec *prev, *next;
} conn_rec;

struct tfx_serve_deadlines {
  int64_t limit_ms;
  pthread_mutex_t mu; /* guards what follows */
  pthread_cond_t wake;
  conn_rec *head;
  int stop;
  uint64_t closed; /* connections shut down for their headers so far */
  pthread_t thread;
};

/* Shuts down every connection past its due time; how many. Called with mu held. */
static int sweep(tfx_serve_deadlines *d, int64_t now) {
  int n = 0;
  for (conn_rec *r = d->head; r; r = r->next) {
    if (r->due_ms && now > r->due_ms) {
      shutdown(r->fd, SHUT_RDWR);
      r->due_ms = 0;
      n++;
    }
  }
  d->closed += (uint64_t)n;
  return n;
}

static void *watch(void *arg) {
  tfx_serve_deadlines *d = arg;
  pthread_mutex_lock(&d->mu);
  while (!d->stop) {
    int n = sweep(d, tfx_now_ms());
    if (n) {
      tfx_log(TFX_LOG_WARN, "SERVE-HEADER-TIMEOUT",
              "%d connection(s) closed: headers not in within %lld ms (%llu "
              "so far)",
              n, (long long)d->limit_ms, (unsigned long long)d->closed);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 500 * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&d->wake, &d->mu, &until);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

int tfx_serve_deadlines_create(int64_t limit_ms, tfx_serve_deadlines **out, tfx_err *err) {
  tfx_serve_deadlines *d = calloc(1, sizeof *d);
  if (!d) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  d->limit_ms = limit_ms;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->wake, NULL);
  if (pthread_create(&d->thread, NULL, watch, d)) {
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return tfx_err_set(err, TFX_ESYS, "serve: the header deadline thread");
  }
  *out = d;
  return TFX_OK;
}

void tfx_serve_deadlines_destroy(tfx_serve_deadlines *d) {
  if (!d) {
    return;
  }
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_cond_signal(&d->wake);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  for (conn_rec *r = d->head, *next; r; r = next) { /* (MHD stopped first: none is left but by a bug) */
    next = r->next;
    free(r);
  }
  pthread_cond_destroy(&d->wake);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

/* A connection opened: its record, due in limit. */
static void opened(tfx_serve_deadlines *d, struct MHD_Connection *c, void **socket_context) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  conn_rec *r = info ? calloc(1, sizeof *r) : NULL;
  if (!r) {
    return; /* untimed: MHD's inactivity timeout still holds */
  }
  r->fd = info->connect_fd;
  pthread_mutex_lock(&d->mu);
  r->due_ms = tfx_now_ms() + d->limit_ms;
  r->next = d->head;
  if (d->head) {
    d->head->prev = r;
  }
  d->head = r;
  pthread_mutex_unlock(&d->mu);
  *socket_context = r;
}

/* A connection closed: its record goes (before MHD closes the socket). */
static void closed(tfx_serve_deadlines *d, void **socket_context) {
  conn_rec *r = *socket_context;
  if (!r) {
    return;
  }
  pthread_mutex_lock(&d->mu);
  if (r->prev) {
    r->prev->next = r->next;
  } else {
    d->head = r->next;
  }
  if (r->next) {
    r->next->prev = r->prev;
  }
  pthread_mutex_unlock(&d->mu);
  free(r);
  *socket_context = NULL;
}

void tfx_serve_deadlines_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                                enum MHD_ConnectionNotificationCode code) {
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    opened(cls, c, socket_context);
  } else {
    closed(cls, socket_context);
  }
}

void tfx_serve_deadlines_mark(tfx_serve_deadlines *d, struct MHD_Connection *c, int headers_in) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn_rec *r = info ? info->socket_context : NULL;
  if (!r) {
    return;
  }
  pthread_mutex_lock(&d->mu);
  r->due_ms = headers_in ? 0 : tfx_now_ms() + d->limit_ms;
  pthread_mutex_unlock(&d->mu);
}

uint64_t tfx_serve_deadlines_closed(tfx_serve_deadlines *d) {
  pthread_mutex_lock(&d->mu);
  uint64_t n = d->closed;
  pthread_mutex_unlock(&d->mu);
  return n;
}
