/* bench/curve: what CURVE costs on the wire. Round trips of one message between a tfx client (DEALER) and a
 * forked echo server (ROUTER), both opened by src/net/net.c, plaintext and CURVE side by side in one run.
 * Usage: tfx-bench-curve [seconds-per-case]. Prints "curve size=N plain_us curve_us ratio" (plain / curve). */
#include "net/curve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "common/log.h"
#include "echo.h"
#include "net/keys.h"
#include "net/net.h"

static double seconds_per_case = 1.0;

/* The echo server: a tfx ROUTER (CURVE when installed) that returns every message; writes its port to fd. */
static void echo_server(int fd) {
  tfx_net_forget_context();
  void *s = NULL;
  char ep[64];
  size_t len = sizeof ep;
  if (tfx_server_open("tcp://127.0.0.1:*", &s, NULL) || zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len)) {
    _exit(1);
  }
  int port = atoi(strrchr(ep, ':') + 1);
  if (write(fd, &port, sizeof port) != sizeof port) {
    _exit(1);
  }
  bench_echo_loop(s);
  _exit(0);
}

/* Mean µs of one round trip of `size` bytes with the process's current security setting. */
static double round_trip_us(size_t size) {
  int fds[2], port = 0;
  if (pipe(fds)) {
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    echo_server(fds[1]);
  }
  if (read(fds[0], &port, sizeof port) != sizeof port) {
    return -1;
  }
  close(fds[0]), close(fds[1]);
  char ep[64];
  snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
  tfx_client *c = NULL;
  if (tfx_client_create(ep, &c, NULL)) {
    return -1;
  }
  char *data = calloc(1, size);
  int64_t t0 = 0;
  long n = 0;
  for (long i = -3; data; i++) {
    if (i == 0) {
      t0 = tfx_now_ms();
    }
    zmq_msg_t out, in;
    zmq_msg_init_data(&out, data, size, NULL, NULL);
    zmq_msg_send(&out, tfx_client_socket(c), 0);
    zmq_msg_init(&in);
    zmq_msg_recv(&in, tfx_client_socket(c), 0);
    zmq_msg_close(&in);
    n += i >= 0;
    if (i >= 0 && tfx_now_ms() - t0 > seconds_per_case * 1000) {
      break;
    }
  }
  double us = n ? (double)(tfx_now_ms() - t0) * 1000.0 / (double)n : -1;
  tfx_client_destroy(c);
  kill(pid, SIGKILL), waitpid(pid, NULL, 0);
  free(data);
  return us;
}

/* A fresh key pair in a temporary directory; cfg names it as the server key (so also the client key). */
static int make_keys(char *dir, tfx_config *cfg) {
  tfx_err err;
  tfx_config_init(cfg);
  if (!mkdtemp(dir) || tfx_keys_generate(dir, "bench", NULL, &err)) {
    return fprintf(stderr, "keys: %s\n", err.msg), 1;
  }
  snprintf(cfg->server_key, sizeof cfg->server_key, "%s/bench.key", dir);
  return 0;
}

static void remove_keys(const char *dir) {
  char p[128];
  snprintf(p, sizeof p, "%s/bench.key", dir), unlink(p);
  snprintf(p, sizeof p, "%s/bench.pub", dir), unlink(p);
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (argc > 1) {
    seconds_per_case = atof(argv[1]);
  }
  tfx_log_set_level(TFX_LOG_WARN);
  printf("# curve: round trip of one message, tfx DEALER <-> forked tfx ROUTER echo on loopback, plain vs CURVE\n");
  char dir[] = "/tmp/tfx-bench-curve-XXXXXX";
  tfx_config cfg;
  tfx_err err;
  if (make_keys(dir, &cfg)) {
    return 1;
  }
  size_t sizes[] = {4096, 1 << 20, 4 << 20, 16 << 20};
  for (int i = 0; i < 4; i++) {
    tfx_net_shutdown(), tfx_curve_reset();
    double plain = round_trip_us(sizes[i]);
    tfx_net_shutdown();
    if (tfx_curve_configure(&cfg, 1, &err)) {
      return fprintf(stderr, "curve: %s\n", err.msg), remove_keys(dir), 1;
    }
    double curve = round_trip_us(sizes[i]);
    printf("curve size=%zu plain_us=%.1f curve_us=%.1f plain_gbps=%.2f curve_gbps=%.2f ratio=%.3f\n", sizes[i], plain,
           curve, 2.0 * (double)sizes[i] / plain / 1e3, 2.0 * (double)sizes[i] / curve / 1e3, plain / curve);
    fflush(stdout);
  }
  tfx_net_shutdown(), tfx_curve_reset();
  remove_keys(dir);
  return 0;
}
