/* A load generator for tfx-node serve: C connections (one thread each, HTTP/1.1 keep-alive) POST one body file to a
 * URL path, closed loop (each sends its next request when the answer is in) or, with --rate R, open loop (each
 * connection sends at R/C requests a second on a fixed schedule; latency counts from the scheduled time, so a slow
 * answer is not hidden by the requests it delayed). Prints
 *   load conns=C rate=R requests=N errors=E req_s=X p50_ms=A p99_ms=B max_ms=M
 * Usage: tfx-bench-serve-load HOST PORT PATH BODY_FILE SECONDS CONNS [--rate R] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
  pthread_t t;
  const char *host, *path;
  int port;
  const char *body;
  size_t body_len;
  double seconds, rate; /* rate: requests a second for this connection, 0 = closed loop */
  double *lat;          /* seconds */
  size_t n, cap, errors;
} conn;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int dial(const conn *c) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
  inet_pton(AF_INET, c->host, &a.sin_addr);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) {
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads one response; returns its status code, or -1. */
static int read_response(int fd, char *buf, size_t cap) {
  size_t len = 0;
  char *end = NULL;
  while (!(end = len ? strstr(buf, "\r\n\r\n") : NULL)) {
    ssize_t r = len + 1 < cap ? read(fd, buf + len, cap - len - 1) : -1;
    if (r <= 0) {
      return -1;
    }
    len += (size_t)r;
    buf[len] = '\0';
  }
  const char *cl = strcasestr(buf, "Content-Length:");
  size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0, have = len - (size_t)(end + 4 - buf);
  int code = atoi(buf + 9);
  while (have < want) {
    ssize_t r = read(fd, buf, cap - 1 < want - have ? cap - 1 : want - have);
    if (r <= 0) {
      return -1;
    }
    have += (size_t)r;
  }
  return code;
}

static void *run(void *arg) {
  conn *c = arg;
  char head[512], *buf = malloc(1 << 20);
  int hl = snprintf(head, sizeof head,
                    "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                    c->path, c->host, c->body_len);
  int fd = dial(c);
  double t0 = now(), next = t0;
  while (fd >= 0 && now() - t0 < c->seconds) {
    if (c->rate > 0) {
      double wait = next - now();
      if (wait > 0) {
        usleep((useconds_t)(wait * 1e6));
      }
    }
    double sent = c->rate > 0 ? next : now();
    next += c->rate > 0 ? 1.0 / c->rate : 0;
    int code = send_all(fd, head, (size_t)hl) || send_all(fd, c->body, c->body_len) ? -1
                                                                                        : read_response(fd, buf, 1 << 20);
    if (code != 200) {
      c->errors++;
      close(fd);
      fd = dial(c);
      continue;
    }
    if (c->n == c->cap) {
      c->cap = c->cap ? c->cap * 2 : 4096;
      c->lat = realloc(c->lat, sizeof(double) * c->cap);
    }
    c->lat[c->n++] = now() - sent;
  }
  if (fd >= 0) {
    close(fd);
  }
  free(buf);
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: %s HOST PORT PATH BODY_FILE SECONDS CONNS [--rate R]\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[4], "rb");
  static char body[64 << 20];
  size_t body_len = f ? fread(body, 1, sizeof body, f) : 0;
  if (f) {
    fclose(f);
  }
  int conns = atoi(argv[6]);
  double rate = argc > 8 && !strcmp(argv[7], "--rate") ? atof(argv[8]) : 0;
  conn *cs = calloc((size_t)conns, sizeof *cs);
  for (int i = 0; i < conns; i++) {
    cs[i] = (conn){.host = argv[1], .port = atoi(argv[2]), .path = argv[3], .body = body, .body_len = body_len,
                   .seconds = atof(argv[5]), .rate = rate / conns};
    pthread_create(&cs[i].t, NULL, run, &cs[i]);
  }
  size_t n = 0, errors = 0;
  for (int i = 0; i < conns; i++) {
    pthread_join(cs[i].t, NULL);
    n += cs[i].n;
    errors += cs[i].errors;
  }
  double *all = malloc(sizeof(double) * (n + 1));
  for (int i = 0, k = 0; i < conns; i++) {
    memcpy(all + k, cs[i].lat, sizeof(double) * cs[i].n);
    k += (int)cs[i].n;
    free(cs[i].lat);
  }
  qsort(all, n, sizeof(double), cmp);
  printf("load conns=%d rate=%g requests=%zu errors=%zu req_s=%.0f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n", conns, rate,
         n, errors, (double)n / atof(argv[5]), n ? all[n / 2] * 1e3 : 0, n ? all[n * 99 / 100] * 1e3 : 0,
         n ? all[n - 1] * 1e3 : 0);
  free(all);
  free(cs);
  return 0;
}
