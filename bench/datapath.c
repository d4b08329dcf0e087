/* bench/datapath: the cost of moving one float32 tensor between a worker and a ps, beside its ceiling.
 *
 * For each size it measures, in the same run and the same environment:
 *   tfx     a push of the gradient and a pull of the updated value (one round trip each way), against a real
 *           `tfx-node --role=ps` process (async mode, SGD), through the same client code the workers use;
 *   raw     a plain ZeroMQ DEALER/ROUTER echo of the same bytes, zero-copy both ways, against a forked echo
 *           process: the ceiling of any protocol on this transport;
 *   memcpy  one copy of the bytes in memory.
 * and prints `datapath size=N tfx_us=... raw_zmq_us=... memcpy_us=... ratio=raw/tfx`. tfx and raw are driven from
 * this one process in alternating blocks of about 20 ms and each figure is a median, so load from other processes
 * falls on both alike; the client process is pinned to one core and both server processes to the other,
 * and a `# size=N per round trip` line gives the CPU time each server process spent per round trip.
 * Then the scaling cases: 2 ps x 2 workers, and 1 -> 2 -> 4 -> 8 ps holding one 64 MiB model with 8 pushers.
 * Usage: tfx-bench-datapath TFX_NODE [seconds-per-case] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "config/cluster.h"
#include "net/net.h"
#include "nn/model.h"
#include "psclient/psclient.h"

static const char *tfx_node;
static double seconds_per_case = 1.0;

/* A model with one variable of `size` bytes: dense units 1 over an input of size/4 values (plus a 4-byte bias). */
static void one_variable(tfx_config *cfg, size_t size) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": [%zu], \"layers\": [{\"type\": \"dense\", \"units\": 1}]},"
           " \"training\": {\"mode\": \"async\", \"ps_apply_threads\": %d, \"push_part_bytes\": %s},"
           " \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1e-9}}",
           size / 4, getenv("TFX_BENCH_APPLY_THREADS") ? atoi(getenv("TFX_BENCH_APPLY_THREADS")) : 1,
           getenv("TFX_BENCH_PART_BYTES") ? getenv("TFX_BENCH_PART_BYTES") : "524288");
  tfx_config_init(cfg);
  tfx_err err;
  if (tfx_config_parse(cfg, json, "bench", &err)) {
    fprintf(stderr, "bench config: %s\n", err.msg), exit(1);
  }
}

#include "bench_cluster.h"
#include "echo.h"

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
  bench_echo_loop(s);
  _exit(0);
}

/* Forks the echo server; *ep gets its endpoint. Returns its pid, or -1. */
static pid_t start_echo(char *ep) {
  int fds[2];
  if (pipe(fds)) {
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    echo_server(fds[1]);
  }
  ssize_t got = read(fds[0], ep, 64);
  close(fds[0]), close(fds[1]);
  return got == 64 ? pid : -1;
}

/* One raw round trip: the bytes out zero-copy, the echo back into a ZeroMQ frame. */
static void raw_once(void *s, char *data, size_t size) {
  zmq_msg_t out, in;
  zmq_msg_init_data(&out, data, size, NULL, NULL);
  zmq_msg_send(&out, s, 0);
  zmq_msg_init(&in);
  zmq_msg_recv(&in, s, 0);
  zmq_msg_close(&in);
}

/* One raw round trip in `parts` equal messages, all sent before the first echo is read: the ceiling of a
 * pipelined protocol such as tfx's push-pull in parts. */
static void raw_parts_once(void *s, char *data, size_t size, int parts) {
  size_t chunk = (size + (size_t)parts - 1) / (size_t)parts;
  for (size_t off = 0; off < size; off += chunk) {
    zmq_msg_t out;
    zmq_msg_init_data(&out, data + off, size - off < chunk ? size - off : chunk, NULL, NULL);
    zmq_msg_send(&out, s, 0);
  }
  for (size_t off = 0; off < size; off += chunk) {
    zmq_msg_t in;
    zmq_msg_init(&in);
    zmq_msg_recv(&in, s, 0);
    zmq_msg_close(&in);
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, long n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : -1;
}

/* The sides of one size, measured interleaved: blocks of tfx round trips (push+pull through the workers'
 * client against a real ps), raw ones (echo) and, when tfx sends parts, raw ones in as many parts alternate,
 * each block about 20 ms, until each side has had `seconds`; us[] gets the median round trip of each.
 * Interleaving puts the machine's noise (other processes on the 2 cores) on all sides alike. */
static pid_t pair_pid[2]; /* the ps and the echo process, for their CPU time */

static int pair_round_trips(tfx_psclient *pc, void *raw, size_t size, int parts, double seconds, double *us) {
  char *data = malloc(size);
  long cap = 1 << 16, n[3] = {0, 0, 0};
  double *rt[3] = {malloc(sizeof(double) * (size_t)cap), malloc(sizeof(double) * (size_t)cap),
                   malloc(sizeof(double) * (size_t)cap)},
         spent[3] = {0, 0, parts > 1 ? 0 : seconds * 1e6}; /* no parts: that side is never run, so it is done */
  int sides = parts > 1 ? 3 : 2;
  int64_t version = 0;
  tfx_err err;
  int rc = !data || !rt[0] || !rt[1] || !rt[2];
  if (!rc) {
    memset(data, 1, size);
  }
  for (int w = 0; w < 3 && !rc; w++) { /* warm both paths up */
    rc = tfx_psclient_push_pull(pc, version, &version, &err);
    raw_once(raw, data, size);
  }
  double cpu0[2], wait0[2], cpu1[2], wait1[2], flt0[2], flt1[2];
  for (int k = 0; k < 2; k++) {
    proc_sched_us(pair_pid[k], &cpu0[k], &wait0[k]), flt0[k] = proc_minflt(pair_pid[k]);
  }
  for (int side = 0; !rc && (spent[0] < seconds * 1e6 || spent[1] < seconds * 1e6 || spent[2] < seconds * 1e6);
       side = (side + 1) % sides) {
    double block = 0;
    while (block < 20000 && n[side] < cap && !rc) {
      double t0 = now_us();
      if (side == 0) {
        rc = tfx_psclient_push_pull(pc, version, &version, &err);
      } else if (side == 1) {
        raw_once(raw, data, size);
      } else {
        raw_parts_once(raw, data, size, parts);
      }
      double dt = now_us() - t0;
      rt[side][n[side]++] = dt, spent[side] += dt, block += dt;
    }
    if (n[0] >= cap || n[1] >= cap || n[2] >= cap) {
      break;
    }
  }
  for (int k = 0; k < 2; k++) {
    proc_sched_us(pair_pid[k], &cpu1[k], &wait1[k]), flt1[k] = proc_minflt(pair_pid[k]);
  }
  if (rc) {
    fprintf(stderr, "push_pull: %s\n", err.msg);
  } else {
    printf(
        "# size=%zu per round trip: ps cpu_us=%.1f runqueue_wait_us=%.1f page_faults=%.1f; echo cpu_us=%.1f "
        "runqueue_wait_us=%.1f page_faults=%.1f\n",
        size, (cpu1[0] - cpu0[0]) / (double)n[0], (wait1[0] - wait0[0]) / (double)n[0],
        (flt1[0] - flt0[0]) / (double)n[0], (cpu1[1] - cpu0[1]) / (double)n[1], (wait1[1] - wait0[1]) / (double)n[1],
        (flt1[1] - flt0[1]) / (double)n[1]);
    for (int k = 0; k < 3; k++) {
      us[k] = median(rt[k], n[k]);
    }
  }
  free(data), free(rt[0]), free(rt[1]), free(rt[2]);
  return rc;
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

/* One size: a ps process and an echo process side by side, driven in turn from this process; 0 on success. */
static int pair_case(size_t size, double *us, int *parts) {
  tfx_config cfg;
  one_variable(&cfg, size);
  bench_ps b;
  char ep[64];
  pid_t echo = -1;
  void *raw = NULL;
  tfx_model *m = NULL;
  tfx_psclient *pc = NULL;
  tfx_err err;
  int rc = start_ps(&b, &cfg, 1, 1);
  if (!rc && (echo = start_echo(ep)) < 0) {
    rc = -1;
  }
  if (!rc) {
    int buf = 4 << 20;
    raw = zmq_socket(tfx_net_context(), ZMQ_DEALER);
    zmq_setsockopt(raw, ZMQ_SNDBUF, &buf, sizeof buf);
    zmq_setsockopt(raw, ZMQ_RCVBUF, &buf, sizeof buf);
    rc = zmq_connect(raw, ep);
  }
  if (!rc && (tfx_model_create(&cfg, 1, &m, &err) ||
              tfx_psclient_create(b.c, b.plan.ptrs, (size_t)b.plan.n, m, 30000, &pc, &err) ||
              tfx_psclient_use_parts(pc, (size_t)cfg.push_part_bytes, &err))) {
    fprintf(stderr, "bench client: %s\n", err.msg);
    rc = -1;
  }
  if (!rc) {
    pin_threads(getpid(), 0), pin_threads(b.ps[0], 1), pin_threads(echo, 1);
    pair_pid[0] = b.ps[0], pair_pid[1] = echo;
    *parts = tfx_psclient_parts(pc, 0);
    rc = pair_round_trips(pc, raw, size, *parts, seconds_per_case, us);
  }
  pin_threads(getpid(), -1);
  tfx_psclient_destroy(pc);
  tfx_model_destroy(m);
  tfx_net_close(raw);
  if (echo > 0) {
    kill(echo, SIGKILL), waitpid(echo, NULL, 0);
  }
  stop_ps(&b);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    return fprintf(stderr, "usage: %s TFX_NODE [seconds-per-case]\n", argv[0]), 2;
  }
  tfx_net_keep_buffers(); /* as every tfx-node process does; the raw echo's client is this process too */
  tfx_wire_set_max_frame(TFX_MAX_FRAME); /* its clients and ps (spawn_ps) take up to the 64 MiB model whole */
  tfx_node = argv[1];
  if (argc > 2) {
    seconds_per_case = atof(argv[2]);
  }
  pin_setup();
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
  printf("# one pair: %s of the client on cpu %d, of the ps and the echo on cpu %d (-1: unpinned)\n",
         pin_proc ? "all threads" : "ZeroMQ I/O threads", pin_core[0], pin_core[1]);
  for (int i = 0; i < n_sizes; i++) {
    double us[3] = {-1, -1, -1};
    int parts = 0;
    if (pair_case(sizes[i], us, &parts)) {
      fprintf(stderr, "datapath size=%zu: could not measure\n", sizes[i]);
      return 1;
    }
    double mc = memcpy_us(sizes[i]), tfx = us[0], raw = us[1];
    if (parts > 1) { /* the pipelined ceiling beside the one-message one */
      printf("# size=%zu in %d parts: raw echo of the same parts %.1f us, tfx / that %.3f\n", sizes[i], parts, us[2],
             us[2] / tfx);
    }
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
