/* bench/transport: what one message pair costs in CPU on this machine, through ZeroMQ and through a bare socket.
 *
 * The sparse cluster's step is one request and one reply between a worker and each ps (#26). This bench prices that
 * pair with no training at all: a client and a forked echo process, pinned to one CPU as `tfx-node local`
 * pins ps i beside worker i (cpus=shared), or on two CPUs as worker i and the other ps (cpus=apart), exchange
 * `size`-byte messages:
 *   zmq    a DEALER/ROUTER echo over ipc:// (the transport tfx uses between processes on one host), zero-copy;
 *   unix   the same bytes over a Unix stream socket with a 4-byte length prefix: no I/O threads, the floor of any
 *          transport between two processes;
 * each with 1 and 2 requests in flight. It prints the CPU microseconds of both processes per pair (user + system
 * time, from getrusage and wait4) and the ratio zmq/unix. A bench, not a test: it never asserts a figure.
 * Usage: tfx-bench-transport [size-bytes] [pairs] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "echo.h"

/* The echo's CPU: 0 beside the client (ps i and worker i under local), 1 apart (worker i and the other ps). */
static int echo_cpu;

/* Pins the calling process, and the threads it starts after, to one CPU. */
static void pin_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

/* User + system seconds of one rusage. */
static double cpu_s(const struct rusage *r) {
  return (double)r->ru_utime.tv_sec + (double)r->ru_utime.tv_usec / 1e6 + (double)r->ru_stime.tv_sec +
         (double)r->ru_stime.tv_usec / 1e6;
}

/* Reads or writes exactly n bytes of fd; 0 on success. */
static int full_io(int fd, void *buf, size_t n, int writing) {
  for (size_t done = 0; done < n;) {
    ssize_t k = writing ? write(fd, (char *)buf + done, n - done) : read(fd, (char *)buf + done, n - done);
    if (k <= 0) {
      return -1;
    }
    done += (size_t)k;
  }
  return 0;
}

/* One length-prefixed message over a Unix stream socket, out (writing) or in; 0 on success. */
static int unix_msg(int fd, char *buf, uint32_t size, int writing) {
  uint32_t len = size;
  if (full_io(fd, &len, sizeof len, writing) || len != size) {
    return -1;
  }
  return full_io(fd, buf, size, writing);
}

/* The echo side of the bare socket: every message goes back as it came, until the peer closes. */
static void unix_echo(int fd, char *buf, uint32_t size) {
  while (!unix_msg(fd, buf, size, 0) && !unix_msg(fd, buf, size, 1)) {
  }
  _exit(0);
}

/* The echo side of ZeroMQ: binds a ROUTER at ep and echoes until the context ends. */
static void zmq_echo(const char *ep) {
  void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);
  if (zmq_bind(s, ep)) {
    _exit(1);
  }
  bench_echo_loop(s);
  _exit(0);
}

/* Client side of n bare-socket pairs with `depth` requests in flight. */
static void unix_client(int fd, char *buf, uint32_t size, long n, int depth) {
  for (int i = 0; i < depth; i++) {
    unix_msg(fd, buf, size, 1);
  }
  for (long i = depth; i < n; i++) {
    unix_msg(fd, buf, size, 0), unix_msg(fd, buf, size, 1);
  }
  for (int i = 0; i < depth; i++) {
    unix_msg(fd, buf, size, 0);
  }
}

/* Client side of n ZeroMQ pairs with `depth` requests in flight, the bytes out zero-copy. */
static void zmq_client(void *s, char *buf, size_t size, long n, int depth) {
  for (long i = 0; i < n + depth; i++) {
    if (i < n) {
      zmq_msg_t out;
      zmq_msg_init_data(&out, buf, size, NULL, NULL);
      zmq_msg_send(&out, s, 0);
    }
    if (i >= depth) {
      zmq_msg_t in;
      zmq_msg_init(&in);
      zmq_msg_recv(&in, s, 0);
      zmq_msg_close(&in);
    }
  }
}

/* CPU microseconds per pair of n ZeroMQ pairs (client + echo). Runs in a forked child so that the context's
 * threads are counted and gone; -1 on failure. */
static double zmq_case(char *buf, size_t size, long n, int depth) {
  char ep[64];
  snprintf(ep, sizeof ep, "ipc:///tmp/tfx-bench-transport-%d", (int)getpid());
  pid_t echo = fork();
  if (echo == 0) {
    pin_cpu(echo_cpu), zmq_echo(ep);
  }
  struct rusage before, after, peer;
  void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
  int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  zmq_connect(s, ep);
  zmq_client(s, buf, size, 20, 1); /* the connection up before counting */
  getrusage(RUSAGE_SELF, &before);
  zmq_client(s, buf, size, n, depth);
  getrusage(RUSAGE_SELF, &after);
  zmq_close(s), zmq_ctx_term(ctx);
  kill(echo, SIGTERM), wait4(echo, NULL, 0, &peer);
  unlink(ep + 6);
  return (cpu_s(&after) - cpu_s(&before) + cpu_s(&peer)) / (double)n * 1e6;
}

/* CPU microseconds per pair of n bare-socket pairs (client + echo); -1 on failure. */
static double unix_case(char *buf, uint32_t size, long n, int depth) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
    return -1;
  }
  int sndbuf = 4 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  pid_t echo = fork();
  if (echo == 0) {
    pin_cpu(echo_cpu), close(sv[0]), unix_echo(sv[1], buf, size);
  }
  close(sv[1]);
  struct rusage before, after, peer;
  getrusage(RUSAGE_SELF, &before);
  unix_client(sv[0], buf, size, n, depth);
  getrusage(RUSAGE_SELF, &after);
  close(sv[0]), wait4(echo, NULL, 0, &peer);
  return (cpu_s(&after) - cpu_s(&before) + cpu_s(&peer)) / (double)n * 1e6;
}

/* Runs one transport case in a child process (its own threads and rusage) and reads its figure back. */
static double in_child(int zmq, char *buf, size_t size, long n, int depth) {
  int fds[2];
  double us = -1;
  if (pipe(fds)) {
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    us = zmq ? zmq_case(buf, size, n, depth) : unix_case(buf, (uint32_t)size, n, depth);
    _exit(write(fds[1], &us, sizeof us) == sizeof us ? 0 : 1);
  }
  close(fds[1]);
  if (read(fds[0], &us, sizeof us) != sizeof us) {
    us = -1;
  }
  close(fds[0]), waitpid(pid, NULL, 0);
  return us;
}

int main(int argc, char **argv) {
  size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 65536;
  long pairs = argc > 2 ? atol(argv[2]) : 5000;
  if (size < 1 || size > (64u << 20) || pairs < 1) {
    fprintf(stderr, "usage: tfx-bench-transport [size-bytes 1..64M] [pairs >= 1]\n");
    return 2;
  }
  char *buf = calloc(1, size);
  if (!buf) {
    return 1;
  }
  pin_cpu(0);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  for (echo_cpu = 0; echo_cpu <= (ncpu > 1); echo_cpu++) {
    for (int depth = 1; depth <= 2; depth++) {
      double z = in_child(1, buf, size, pairs, depth), u = in_child(0, buf, size, pairs, depth);
      printf("transport size=%zu cpus=%s depth=%d pairs=%ld zmq_cpu_us=%.1f unix_cpu_us=%.1f zmq_over_unix=%.2f\n",
             size, echo_cpu ? "apart" : "shared", depth, pairs, z, u, u > 0 ? z / u : 0);
    }
  }
  free(buf);
  return 0;
}
