/* bench/datapath: the cost of moving one float32 tensor between a worker and a ps, beside its ceiling.
 *
 * For each size it measures, in the same run and the same environment:
 *   tfx     a push of the gradient and a pull of the updated value (one round trip each way), against a real
 *           `tfx-node --role=ps` process (async mode, SGD), through the same client code the workers use;
 *   raw     a plain ZeroMQ DEALER/ROUTER echo of the same bytes, zero-copy both ways, against a forked echo
 *           process: the ceiling of any protocol on this transport;
 *   memcpy  one copy of the bytes in memory.
 * and prints `datapath size=N tfx_us=... raw_zmq_us=... memcpy_us=... ratio=raw/tfx`.
 * Then the scaling cases: 2 ps x 2 workers, and 1 -> 2 -> 4 -> 8 ps holding one 64 MiB model with 8 pushers.
 * Usage: tfx-bench-datapath TFX_NODE [seconds-per-case] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "log.h"
#include "model.h"
#include "net.h"
#include "psclient.h"

static const char *tfx_node;
static double seconds_per_case = 1.0;

/* The raw ceiling's server: echoes every message back, zero-copy. */
static void echo_server(int fd) {
  void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);
  char ep[64];
  size_t len = sizeof ep;
  int buf = 4 << 20;
  zmq_setsockopt(s, ZMQ_SNDBUF, &buf, sizeof buf);
  zmq_setsockopt(s, ZMQ_RCVBUF, &buf, sizeof buf);
  if (zmq_bind(s, "tcp://127.0.0.1:*") || zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len)) {
    _exit(1);
  }
  if (write(fd, ep, sizeof ep) != sizeof ep) {
    _exit(1);
  }
  for (;;) {
    zmq_msg_t id, body;
    zmq_msg_init(&id), zmq_msg_init(&body);
    if (zmq_msg_recv(&id, s, 0) < 0 || zmq_msg_recv(&body, s, 0) < 0) {
      break;
    }
    zmq_msg_send(&id, s, ZMQ_SNDMORE);
    zmq_msg_send(&body, s, 0);
  }
  _exit(0);
}

static double raw_round_trip_us(size_t size) {
  int fds[2];
  char ep[64];
  if (pipe(fds)) {
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    echo_server(fds[1]);
  }
  if (read(fds[0], ep, sizeof ep) != sizeof ep) {
    return -1;
  }
  close(fds[0]), close(fds[1]);
  void *s = zmq_socket(tfx_net_context(), ZMQ_DEALER);
  int buf = 4 << 20;
  zmq_setsockopt(s, ZMQ_SNDBUF, &buf, sizeof buf);
  zmq_setsockopt(s, ZMQ_RCVBUF, &buf, sizeof buf);
  zmq_connect(s, ep);
  char *data = malloc(size);
  memset(data, 1, size);
  int64_t t0 = 0;
  long n = 0;
  for (long i = -3; i < 100000; i++) {
    if (i == 0) {
      t0 = tfx_now_ms();
    }
    zmq_msg_t out, in;
    zmq_msg_init_data(&out, data, size, NULL, NULL);
    zmq_msg_send(&out, s, 0);
    zmq_msg_init(&in);
    zmq_msg_recv(&in, s, 0);
    zmq_msg_close(&in);
    if (i >= 0) {
      n++;
    }
    if (i >= 0 && tfx_now_ms() - t0 > seconds_per_case * 1000) {
      break;
    }
  }
  double us = (double)(tfx_now_ms() - t0) * 1000.0 / (double)n;
  tfx_net_close(s);
  kill(pid, SIGKILL), waitpid(pid, NULL, 0);
  free(data);
  return us;
}

static double memcpy_us(size_t size) {
  char *a = malloc(size), *b = malloc(size);
  memset(a, 1, size), memset(b, 2, size);
  long n = 0;
  int64_t t0 = tfx_now_ms();
  unsigned sum = 0;
  while (tfx_now_ms() - t0 < 200 || n < 3) {
    memcpy(b, a, size), sum += (unsigned char)b[n % size], a[n % size] = (char)n, n++;
  }
  double us = (double)(tfx_now_ms() - t0) * 1000.0 / (double)n;
  if (sum == 1) {
    printf("#\n");
  }
  free(a), free(b);
  return us;
}

/* A model with one variable of `size` bytes: dense units 1 over an input of size/4 values (plus a 4-byte bias). */
static void one_variable(tfx_config *cfg, size_t size) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": [%zu], \"layers\": [{\"type\": \"dense\", \"units\": 1}]},"
           " \"training\": {\"mode\": \"async\", \"ps_apply_threads\": %d}, \"optimizer\": {\"name\": \"sgd\", "
           "\"learning_rate\": 1e-9}}",
           size / 4, getenv("TFX_BENCH_APPLY_THREADS") ? atoi(getenv("TFX_BENCH_APPLY_THREADS")) : 1);
  tfx_config_init(cfg);
  tfx_err err;
  if (tfx_config_parse(cfg, json, "bench", &err)) {
    fprintf(stderr, "bench config: %s\n", err.msg), exit(1);
  }
}

#include "bench_cluster.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    return fprintf(stderr, "usage: %s TFX_NODE [seconds-per-case]\n", argv[0]), 2;
  }
  tfx_node = argv[1];
  if (argc > 2) {
    seconds_per_case = atof(argv[2]);
  }
  tfx_log_set_level(TFX_LOG_WARN);
  printf("# datapath: push+pull of one float32 tensor, worker <-> ps on loopback, vs raw ZeroMQ echo and memcpy\n");
  printf("# OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n",
         getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "-",
         getenv("OPENBLAS_L2_SIZE") ? getenv("OPENBLAS_L2_SIZE") : "-");
  size_t sizes[] = {4096, 1 << 20, 4 << 20, 16 << 20};
  int n_sizes = 4;
  if (argc > 3) {
    sizes[0] = (size_t)atol(argv[3]), n_sizes = 1; /* one size only, for profiling */
  }
  for (int i = 0; i < n_sizes; i++) {
    tfx_config cfg;
    one_variable(&cfg, sizes[i]);
    double tfx = tfx_round_trip_us(&cfg, 1, 1, seconds_per_case, NULL);
    double raw = raw_round_trip_us(sizes[i]), mc = memcpy_us(sizes[i]);
    printf("datapath size=%zu tfx_us=%.1f raw_zmq_us=%.1f memcpy_us=%.1f tfx_gbps=%.2f raw_gbps=%.2f ratio=%.3f\n",
           sizes[i], tfx, raw, mc, 2.0 * (double)sizes[i] / tfx / 1e3, 2.0 * (double)sizes[i] / raw / 1e3, raw / tfx);
    fflush(stdout);
  }
  if (argc <= 3) {
    bench_scaling(seconds_per_case);
  }
  tfx_net_shutdown();
  return 0;
}
