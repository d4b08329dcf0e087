/* Helpers of bench/datapath: real ps processes, initialized with a plan, driven by forked worker processes. */
#ifndef TFX_BENCH_CLUSTER_H
#define TFX_BENCH_CLUSTER_H

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include "master/plan.h"

/* CPU placement. Unpinned, the scheduler's choice of cores for the client's and the server's threads swings a
 * loopback round trip by up to 2x from one process to the next (measured: two identical echo servers, 320 vs
 * 670 µs at 1 MiB), which would make the ratio a draw. So the one-pair cases pin every thread of the client
 * process to one core and every thread of the server processes (the ps and the raw echo alike) to the other.
 * TFX_BENCH_PIN=0 turns this off; TFX_BENCH_PIN=io pins only the ZeroMQ I/O threads (the ones doing the TCP
 * copies) and lets the others float, which on a loaded machine swings as much as no pinning. */
static int pin_core[2] = {-1, -1}; /* client core, server core */
static int pin_proc;
static cpu_set_t pin_all;

/* Picks the client and server cores (the first two this process may use). */
static void pin_setup(void) {
  const char *env = getenv("TFX_BENCH_PIN");
  cpu_set_t all;
  if (sched_getaffinity(0, sizeof all, &all) || (pin_all = all, CPU_COUNT(&all) < 2) || (env && !strcmp(env, "0"))) {
    return;
  }
  pin_proc = !(env && !strcmp(env, "io"));
  for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < 2; cpu++) {
    if (CPU_ISSET(cpu, &all)) pin_core[k++] = cpu;
  }
}

/* Pins the threads of process pid (all of them with pin_proc, else its ZeroMQ I/O threads) to core k, or back
 * to every core with k = -1. */
static void pin_threads(pid_t pid, int k) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = pin_core[0] >= 0 ? opendir(path) : NULL;
  cpu_set_t set = pin_all;
  if (k >= 0) {
    CPU_ZERO(&set);
    CPU_SET(pin_core[k], &set);
  }
  for (struct dirent *e; d && (e = readdir(d));) {
    char comm_path[300], comm[32] = "";
    snprintf(comm_path, sizeof comm_path, "%s/%s/comm", path, e->d_name);
    FILE *f = e->d_name[0] != '.' ? fopen(comm_path, "r") : NULL;
    if (f && fgets(comm, sizeof comm, f) && (pin_proc || !strncmp(comm, "ZMQbg/IO/", 9))) {
      sched_setaffinity(atoi(e->d_name), sizeof set, &set);
    }
    if (f) fclose(f);
  }
  if (d) closedir(d);
}

/* CPU time and run-queue wait (µs) summed over the threads of process pid, from /proc/PID/task/TID/schedstat. */
static void proc_sched_us(pid_t pid, double *cpu, double *wait) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  *cpu = *wait = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    char p2[300];
    unsigned long long run = 0, queued = 0;
    snprintf(p2, sizeof p2, "%s/%s/schedstat", path, e->d_name);
    FILE *f = e->d_name[0] != '.' ? fopen(p2, "r") : NULL;
    if (f && fscanf(f, "%llu %llu", &run, &queued) == 2) {
      *cpu += (double)run / 1e3, *wait += (double)queued / 1e3;
      if (getenv("TFX_BENCH_THREADS")) {
        char cp[300], comm[32] = "";
        snprintf(cp, sizeof cp, "%s/%s/comm", path, e->d_name);
        FILE *c = fopen(cp, "r");
        if (c && fgets(comm, sizeof comm, c)) comm[strcspn(comm, "\n")] = 0;
        if (c) fclose(c);
        printf("#   pid %d thread %s %s: cpu %.0f µs, waited %.0f µs\n", (int)pid, e->d_name, comm, run / 1e3,
               queued / 1e3);
      }
    }
    if (f) fclose(f);
  }
  if (d) closedir(d);
}

/* Minor page faults of process pid so far (field 10 of /proc/PID/stat). */
static double proc_minflt(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  unsigned long long flt = 0;
  if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu", &flt);
  return (double)flt;
}

static int kernel_port(void) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  bind(fd, (struct sockaddr *)&a, sizeof a);
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

static tfx_cluster *bench_cluster(int n_ps, int n_workers) {
  tfx_cluster *c = tfx_cluster_create();
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", kernel_port());
  tfx_cluster_add(c, TFX_ROLE_MASTER, addr, NULL);
  for (int i = 0; i < n_ps + n_workers; i++) {
    snprintf(addr, sizeof addr, "127.0.0.1:%d", kernel_port());
    tfx_cluster_add(c, i < n_ps ? TFX_ROLE_PS : TFX_ROLE_WORKER, addr, NULL);
  }
  return c;
}

static pid_t spawn_ps(tfx_cluster *c, int i) {
  pid_t pid = fork();
  if (pid == 0) {
    char *tfc = tfx_cluster_to_json(c, TFX_ROLE_PS, i);
    setenv("TF_CONFIG", tfc, 1);
    /* Started without the experiment, a ps accepts 64 MiB frames unless told; the scaling case's one ps holds a
     * 64 MiB variable, which with its margin needs more (docs/security.md). */
    setenv("TFX_CLUSTER_MAX_MESSAGE_BYTES", "2147483648", 1);
    execl(tfx_node, "tfx-node", "--log-level", getenv("TFX_BENCH_LOG") ? getenv("TFX_BENCH_LOG") : "warn",
          (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int init_ps(tfx_cluster *c, const tfx_config *cfg, tfx_plan *plan, int n_ps, int n_workers) {
  char *json = tfx_config_to_json(cfg);
  int rc = 0;
  for (int p = 0; p < n_ps && !rc; p++) {
    char ep[320];
    tfx_client *cl;
    tfx_address_endpoint(tfx_cluster_address(c, TFX_ROLE_PS, p), 0, NULL, ep, sizeof ep, NULL);
    tfx_client_create(ep, &cl, NULL);
    size_t n;
    Tfx__Shard **mine = tfx_plan_for_ps(plan, p, &n);
    tfx_envelope env;
    tfx_inmsg r;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
    Tfx__Init init = TFX__INIT__INIT;
    init.workers = (uint32_t)n_workers;
    env.text = json, env.shards = mine, env.n_shards = n, env.init = &init;
    tfx_err err;
    rc = tfx_client_call(cl, &env, NULL, 0, &r, 20000, &err);
    if (rc) fprintf(stderr, "init ps %d: %s\n", p, err.msg);
    tfx_inmsg_fini(&r);
    free(mine);
    tfx_client_destroy(cl);
  }
  free(json);
  return rc;
}

/* One worker process: push+pull round trips for `seconds`; writes (count, elapsed_us) to fd. */
static void worker_loop(tfx_cluster *c, const tfx_config *cfg, tfx_plan *plan, double seconds, int fd) {
  tfx_net_forget_context();
  tfx_model *m;
  tfx_psclient *pc;
  tfx_err err;
  if (tfx_model_create(cfg, 1, &m, &err) || tfx_psclient_create(c, plan->ptrs, (size_t)plan->n, m, 30000, &pc, &err) ||
      tfx_psclient_use_parts(pc, (size_t)cfg->push_part_bytes, &err)) {
    fprintf(stderr, "worker: %s\n", err.msg);
    _exit(1);
  }
  int64_t version = 0, t0 = 0;
  double n = 0;
  for (long i = -3;; i++) {
    if (i == 0) t0 = tfx_now_ms();
    if (tfx_psclient_push_pull(pc, version, &version, &err)) {
      fprintf(stderr, "worker: %s\n", err.msg);
      _exit(1);
    }
    if (i >= 0) n++;
    if (i >= 0 && tfx_now_ms() - t0 > seconds * 1000) break;
  }
  double out[2] = {n, (double)(tfx_now_ms() - t0) * 1000.0};
  if (write(fd, out, sizeof out) != sizeof out) _exit(1);
  tfx_psclient_destroy(pc);
  tfx_model_destroy(m);
  _exit(0);
}

/* A running cluster of real ps processes, initialized with the plan of cfg. */
typedef struct bench_ps {
  tfx_cluster *c;
  tfx_plan plan;
  pid_t ps[16];
  int n_ps;
  double model_bytes;
} bench_ps;

/* Spawns n_ps ps processes and sends them the plan; 0 on success (b is torn down by stop_ps either way). */
static int start_ps(bench_ps *b, const tfx_config *cfg, int n_ps, int n_workers) {
  b->c = bench_cluster(n_ps, n_workers), b->n_ps = n_ps;
  for (int p = 0; p < n_ps; p++) b->ps[p] = spawn_ps(b->c, p);
  tfx_model *m;
  tfx_model_create(cfg, 1, &m, NULL);
  tfx_plan_build(cfg, m, n_ps, &b->plan, NULL);
  b->model_bytes = (double)tfx_model_param_count(m) * 4;
  tfx_model_destroy(m);
  return init_ps(b->c, cfg, &b->plan, n_ps, n_workers);
}

/* Prints the ps status lines (with TFX_BENCH_LOG set), stops the ps processes and frees b. */
static void stop_ps(bench_ps *b) {
  for (int p = 0; p < b->n_ps && getenv("TFX_BENCH_LOG"); p++) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s status --address %s", tfx_node, tfx_cluster_address(b->c, TFX_ROLE_PS, p));
    if (system(cmd)) fprintf(stderr, "status failed\n");
  }
  for (int p = 0; p < b->n_ps; p++) kill(b->ps[p], SIGTERM);
  for (int p = 0; p < b->n_ps; p++) waitpid(b->ps[p], NULL, 0);
  tfx_plan_fini(&b->plan);
  tfx_cluster_destroy(b->c);
}

/* Mean µs of one push+pull round trip per worker, with n_ps ps and n_workers concurrent worker processes. */
static double tfx_round_trip_us(const tfx_config *cfg, int n_ps, int n_workers, double seconds, double *agg_gbps) {
  bench_ps b;
  pid_t workers[64];
  double us = -1;
  if (start_ps(&b, cfg, n_ps, n_workers) == 0) {
    int fds[2];
    if (pipe(fds)) return -1;
    for (int w = 0; w < n_workers; w++) {
      if ((workers[w] = fork()) == 0) worker_loop(b.c, cfg, &b.plan, seconds, fds[1]);
    }
    double sum_us = 0, sum_rate = 0;
    for (int w = 0; w < n_workers; w++) {
      double r[2] = {0, 1};
      if (read(fds[0], r, sizeof r) == sizeof r) sum_us += r[1] / r[0], sum_rate += r[0] / (r[1] / 1e6);
      waitpid(workers[w], NULL, 0);
    }
    close(fds[0]), close(fds[1]);
    us = sum_us / n_workers;
    if (agg_gbps) *agg_gbps = sum_rate * 2 * b.model_bytes / 1e9;
  }
  stop_ps(&b);
  return us;
}

static void bench_scaling(double seconds) {
  tfx_config cfg;
  double gbps = 0, us;
  one_variable(&cfg, 4 << 20);
  cfg.min_slice_bytes = 2 << 20, cfg.max_shards = 2;
  us = tfx_round_trip_us(&cfg, 2, 2, seconds, &gbps);
  printf("scaling ps=2 workers=2 size=%d tfx_us=%.1f aggregate_gbps=%.2f\n", 4 << 20, us, gbps);
  for (int n_ps = 1; n_ps <= 8; n_ps *= 2) {
    one_variable(&cfg, 64 << 20);
    cfg.min_slice_bytes = n_ps > 1 ? (64 << 20) / n_ps : 0, cfg.max_shards = n_ps;
    cfg.strategy = TFX_STRATEGY_GREEDY_BYTES;
    us = tfx_round_trip_us(&cfg, n_ps, 8, seconds * 2, &gbps);
    printf("scaling ps=%d workers=8 size=%d tfx_us=%.1f aggregate_gbps=%.2f\n", n_ps, 64 << 20, us, gbps);
    fflush(stdout);
  }
}

#endif
