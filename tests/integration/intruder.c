/* A client that tries to talk to a tfx node: N attempts of one request, each on a fresh connection (so each is a
 * new handshake), and counts how many got any answer at all (an error reply counts: the node heard it).
 * Usage: tfx-intruder HOST:PORT status|register|pull|push|report-nan|report-huge|huge-frame N
 * (report-nan: a REPORT as worker 0 with a NaN loss; report-huge: one at step 2^60; both from a connection that
 * never registered).
 * Its keys come from the TFX_SECURITY_* variables, as for any tfx process (none: plaintext).
 * Prints "OP: K of N got through" and exits 0; exits 2 on bad usage or keys.
 * huge-frame is no tfx client at all: N raw TCP connections at once, each sending a ZMTP 3.0 greeting that offers
 * CURVE, then a frame header claiming HUGE_CLAIM bytes, then zeros (up to HUGE_CAP bytes each, for at most
 * HUGE_SECONDS): memory a node would allocate before anyone is authenticated. Prints "huge-frame: K of N
 * connections closed by the node, ..." (a node that bounds its messages closes each at the header). */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config/cluster.h"
#include "config/config.h"
#include "net/curve.h"
#include "net/net.h"

/* Sends one request of kind op and waits up to 600 ms for the answer; returns 1 if one came. */
static int attempt(const char *endpoint, const char *op) {
  tfx_client *c = NULL;
  tfx_err err;
  if (tfx_client_create(endpoint, &c, &err)) {
    return 0;
  }
  static float grad[16] = {1000, 1000, 1000, 1000};
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {16};
  tfx__tensor__init(&t);
  t.name = "dense/kernel", t.shape = shape, t.n_shape = 1, t.nbytes = sizeof grad;
  tfx_payload pl = {grad, sizeof grad, 0, NULL, NULL};
  tfx_envelope env;
  tfx_inmsg r;
  int is_push = !strcmp(op, "push"), is_report = !strncmp(op, "report-", 7);
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 0);
  tfx_wire_request(&env, !strcmp(op, "register") ? TFX__MSG_TYPE__MSG_REGISTER
                         : !strcmp(op, "pull")   ? TFX__MSG_TYPE__MSG_PULL
                         : is_push               ? TFX__MSG_TYPE__MSG_PUSH
                         : is_report             ? TFX__MSG_TYPE__MSG_REPORT
                                                 : TFX__MSG_TYPE__MSG_STATUS);
  if (is_push) {
    env.tensors = &tp, env.n_tensors = 1;
  }
  Tfx__KeyValue kv, *kvp = &kv;
  if (is_report) {
    tfx__key_value__init(&kv);
    kv.key = "loss", kv.value = strcmp(op, "report-nan") ? 0.5 : NAN;
    env.stats = &kvp, env.n_stats = 1, env.step = strcmp(op, "report-huge") ? 10 : (int64_t)1 << 60;
  }
  int rc = tfx_client_call(c, &env, is_push ? &pl : NULL, is_push, &r, 600, &err);
  tfx_inmsg_fini(&r);
  tfx_client_destroy(c);
  return rc != TFX_EPEER;
}

#define HUGE_CLAIM 1100000000ULL /* the size the frame header claims: 1.1 GB */
#define HUGE_CAP (256ULL << 20)  /* zeros sent at most per connection */
#define HUGE_SECONDS 30
#define HUGE_MAX_CONNS 16

/* A TCP connection to host:port (blocking), or -1. */
static int dial(const char *hostport) {
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof host) {
    return -1;
  }
  snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (getaddrinfo(host, colon + 1, &hints, &ai)) {
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  return fd;
}

/* Writes a ZMTP 3.0 greeting (mechanism CURVE, as a client) and a long command frame header claiming HUGE_CLAIM
 * bytes; 0 on success. */
static int send_huge_header(int fd) {
  unsigned char g[64 + 9] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0, 'C', 'U', 'R', 'V', 'E'};
  g[64] = 0x06; /* LONG | COMMAND */
  for (int i = 0; i < 8; i++) {
    g[65 + i] = (unsigned char)(HUGE_CLAIM >> (56 - 8 * i));
  }
  return send(fd, g, sizeof g, MSG_NOSIGNAL) == (ssize_t)sizeof g ? 0 : -1;
}

/* One round over the open connections: reads (and drops) what the node sent, writes zeros where it may. A
 * connection the node closed is marked (fd -1, counted in *closed); one that reached HUGE_CAP is left alone. */
static void huge_round(struct pollfd *pf, unsigned long long *sent, int n, int *closed) {
  static char zeros[1 << 16], sink[4096];
  poll(pf, (nfds_t)n, 100);
  for (int i = 0; i < n; i++) {
    if (pf[i].fd < 0 || !pf[i].revents) {
      continue;
    }
    ssize_t r = pf[i].revents & (POLLIN | POLLHUP | POLLERR) ? recv(pf[i].fd, sink, sizeof sink, MSG_DONTWAIT) : 1;
    ssize_t w = r > 0 && sent[i] < HUGE_CAP ? send(pf[i].fd, zeros, sizeof zeros, MSG_DONTWAIT | MSG_NOSIGNAL) : 0;
    if (r == 0 || (r < 0 && errno != EAGAIN) || (w < 0 && errno != EAGAIN)) {
      close(pf[i].fd);
      pf[i].fd = -1;
      (*closed)++;
      continue;
    }
    sent[i] += w > 0 ? (unsigned long long)w : 0;
    pf[i].events = sent[i] < HUGE_CAP ? POLLIN | POLLOUT : POLLIN;
  }
}

/* The huge-frame attack with n connections at once; prints what the node did. */
static int huge_frame(const char *hostport, int n) {
  struct pollfd pf[HUGE_MAX_CONNS];
  unsigned long long sent[HUGE_MAX_CONNS] = {0}, most = 0;
  int closed = 0;
  n = n > HUGE_MAX_CONNS ? HUGE_MAX_CONNS : n;
  for (int i = 0; i < n; i++) {
    pf[i] = (struct pollfd){dial(hostport), POLLIN | POLLOUT, 0};
    if (pf[i].fd < 0 || send_huge_header(pf[i].fd)) {
      fprintf(stderr, "huge-frame: cannot connect to %s: %s\n", hostport, strerror(errno));
      return 2;
    }
  }
  time_t end = time(NULL) + HUGE_SECONDS;
  while (closed < n && time(NULL) < end) {
    huge_round(pf, sent, n, &closed);
  }
  for (int i = 0; i < n; i++) {
    most = sent[i] > most ? sent[i] : most;
    if (pf[i].fd >= 0) {
      close(pf[i].fd);
    }
  }
  printf("huge-frame: %d of %d connections closed by the node (header: %llu bytes; sent at most %llu on one)\n", closed,
         n, HUGE_CLAIM, most);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[2], "huge-frame") && atoi(argv[3]) >= 1) {
    return huge_frame(argv[1], atoi(argv[3]));
  }
  const char *ops = " status register pull push report-nan report-huge ";
  char want[32];
  snprintf(want, sizeof want, " %s ", argc == 4 ? argv[2] : "?");
  if (argc != 4 || !strstr(ops, want) || atoi(argv[3]) < 1) {
    fprintf(stderr, "usage: %s HOST:PORT status|register|pull|push|report-nan|report-huge|huge-frame N\n", argv[0]);
    return 2;
  }
  tfx_config cfg;
  tfx_err err;
  char ep[320];
  tfx_config_init(&cfg);
  if (tfx_config_apply_env(&cfg, &err) || tfx_curve_configure(&cfg, 0, &err) ||
      tfx_address_endpoint(argv[1], 0, NULL, ep, sizeof ep, &err)) {
    return fprintf(stderr, "%s\n", err.msg), 2;
  }
  int n = atoi(argv[3]), through = 0;
  for (int i = 0; i < n; i++) {
    through += attempt(ep, argv[2]);
  }
  printf("%s: %d of %d got through (%s)\n", argv[2], through, n, tfx_curve_enabled() ? "CURVE" : "plaintext");
  tfx_net_shutdown();
  tfx_curve_reset();
  return 0;
}
