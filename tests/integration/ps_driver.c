/* Drives a real `tfx-node --role=ps` through its protocol and checks the update semantics exactly.
 * Usage: tfx-ps-driver TFX_NODE CASE   with CASE one of async-sum, sync, ssp, optim, reject, checkpoint,
 * restore-shape, restore-slot-shape, nan-policy, nan-skip-fused, status, pulls, since, client-since, assign, sparse,
 * split, parts, parts-reject, lazy-async, lazy-sync, lazy-reject, lazy-checkpoint, deterministic, stale-epoch,
 * stop-held. Prints "ok: ..." and exits 0, or
 * "FAIL: ..." and exits 1. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "config/cluster.h"
#include "config/config.h"
#include "net/net.h"
#include "nn/init.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "psclient/psclient.h"
#include "store/ckpt.h"

#define N 1000
static const char *tfx_node;
static char endpoint[64], run_dir[256], ps_log[300];
static pid_t ps_pid;
static int http_port; /* the ps's /metrics */

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) {                  \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
      stop_ps();                    \
      dump_ps_log();                \
      exit(1);                      \
    }                               \
  } while (0)

/* Prints the ps's log (its stderr) after a failure. */
static void dump_ps_log(void) {
  FILE *f = fopen(ps_log, "r");
  char line[1024];
  while (f && fgets(line, sizeof line, f)) {
    printf("ps: %s", line);
  }
  if (f) {
    fclose(f);
  }
}

/* Whether the ps's log holds `needle`. */
static int ps_log_has(const char *needle) {
  FILE *f = fopen(ps_log, "r");
  char line[1024];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f)) {
    found = strstr(line, needle) != NULL;
  }
  if (f) {
    fclose(f);
  }
  return found;
}

static void stop_ps(void) {
  if (ps_pid > 0) {
    kill(ps_pid, SIGTERM), waitpid(ps_pid, NULL, 0);
  }
  ps_pid = 0;
}

/* A port the kernel just chose on 127.0.0.1 (free, barring a race with another binder). */
static int free_port(void) {
  void *s = zmq_socket(tfx_net_context(), ZMQ_ROUTER);
  char ep[64];
  size_t len = sizeof ep;
  zmq_bind(s, "tcp://127.0.0.1:*"), zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
  int port = atoi(strrchr(ep, ':') + 1);
  zmq_close(s);
  return port;
}

static void start_ps(void) {
  int port = free_port();
  http_port = free_port();
  usleep(50000);
  char hp[16];
  snprintf(hp, sizeof hp, "%d", http_port);
  char tfc[256];
  snprintf(tfc, sizeof tfc, "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\"]},\"task\":{\"type\":\"ps\",\"index\":0}}", port);
  snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
  if ((ps_pid = fork()) == 0) {
    setenv("TF_CONFIG", tfc, 1);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a driver killed by its timeout takes the ps along */
    if (!freopen(ps_log, "w", stderr) || !freopen(ps_log, "a", stdout)) {
      _exit(126);
    }
    execl(tfx_node, "tfx-node", "--log-level", "warn", "--http-port", hp, "--run-dir", run_dir, (char *)NULL);
    _exit(127);
  }
}

/* An INIT's body for `workers` workers (as_backup: the ps's own instance as a copy); static, valid until the next
 * call. */
static Tfx__Init *init_of(int workers, int as_backup) {
  static Tfx__Init body;
  tfx__init__init(&body);
  body.workers = (uint32_t)workers;
  body.as_backup = as_backup != 0;
  return &body;
}

static tfx_client *connect_ps(void) {
  tfx_client *c;
  tfx_err err;
  CHECK(tfx_client_create(endpoint, &c, &err) == 0, "connect: %s", err.msg);
  return c;
}

/* INIT with one variable "v" of N zeros and shape[rank] (product N), under the experiment json; restore from
 * `path` when given; `workers` goes in the INIT's flag. */
static int init_shaped(tfx_client *c, const char *json, const int64_t *shape, int rank, int workers, const char *path,
                       tfx_err *err) {
  Tfx__Shard sh, *shp = &sh;
  tfx__shard__init(&sh);
  sh.key = sh.var = "v", sh.shape = (int64_t *)shape, sh.n_shape = (size_t)rank, sh.row_end = shape[0];
  sh.trainable = 1, sh.init = "zeros";
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = (char *)json, env.shards = &shp, env.n_shards = 1, env.init = init_of(workers, 0);
  env.path = (char *)(path ? path : "");
  int rc = tfx_client_call(c, &env, NULL, 0, &r, 20000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

/* INIT with one variable "v" of N zeros; restore from `path` when given. */
static int init_ps(tfx_client *c, const char *mode, const char *opt, int workers, int replicas, int staleness,
                   const char *path, tfx_err *err) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"training\": {\"mode\": \"%s\", \"replicas_to_aggregate\": %d, \"staleness\": %d},"
           " \"optimizer\": {\"name\": \"%s\", \"learning_rate\": %s}}",
           mode, replicas, staleness, opt, strcmp(opt, "sgd") ? "0.01" : "1");
  int64_t shape[1] = {N};
  return init_shaped(c, json, shape, 1, workers, path, err);
}

/* Pushes g as worker w for `step`; *stale gets the ps's stale flag. */
static int push(tfx_client *c, int w, int64_t step, const float *g, const char *name, size_t n, int *stale,
                tfx_err *err) {
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {(int64_t)n};
  tfx__tensor__init(&t);
  t.name = (char *)name, t.shape = shape, t.n_shape = 1, t.nbytes = n * 4;
  tfx_payload pl = {g, n * 4, 1, NULL, NULL};
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, w);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = step, env.tensors = &tp, env.n_tensors = 1;
  int rc = tfx_client_call(c, &env, &pl, 1, &r, 20000, err);
  if (!rc && stale) {
    *stale = (int)r.env->flag;
  }
  tfx_inmsg_fini(&r);
  return rc;
}

/* Pulls v at version >= min into out; returns the code (TFX_EPEER on timeout_ms). */
static int pull(tfx_client *c, int w, int64_t min, float *out, int64_t *version, int timeout_ms, tfx_err *err) {
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, w);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.step = min;
  int rc = tfx_client_call(c, &env, NULL, 0, &r, timeout_ms, err);
  size_t size = 0;
  const void *data = rc ? NULL : tfx_inmsg_part(&r, 0, &size);
  if (!rc && size == N * 4) {
    memcpy(out, data, size);
  }
  if (!rc && version) {
    *version = r.env->step;
  }
  tfx_inmsg_fini(&r);
  return rc;
}

static void fill(float *g, float v) {
  for (int i = 0; i < N; i++) {
    g[i] = v;
  }
}

static int push_pull_parts(tfx_client *c, int w, const float *g, size_t chunk, float *out, tfx_err *err);

/* `pushers` processes each push worker-index + 1 everywhere `pushes` times (whole pushes, or push-pulls in parts
 * of `chunk` values), concurrently; then v must hold exactly their SGD sum and the version count every push once.
 * Returns the version. */
static int64_t pushers_exact_sum(tfx_client *c, int pushers, int pushes, size_t chunk) {
  tfx_err err;
  for (int w = 0; w < pushers; w++) {
    if (fork() == 0) {
      tfx_net_forget_context();
      tfx_client *pc = connect_ps();
      float g[N], out[N];
      fill(g, (float)(w + 1));
      for (int k = 0; k < pushes; k++) {
        if (chunk ? push_pull_parts(pc, w, g, chunk, out, &err) : push(pc, w, 0, g, "v", N, NULL, &err)) {
          printf("pusher %d: %s\n", w, err.msg), _exit(1);
        }
      }
      tfx_client_destroy(pc);
      _exit(0);
    }
  }
  int status, failed = 0;
  for (int w = 0; w < pushers; w++) {
    wait(&status), failed += !WIFEXITED(status) || WEXITSTATUS(status);
  }
  CHECK(!failed, "%d pusher process(es) failed", failed);
  float v[N];
  int64_t version;
  CHECK(pull(c, 0, 0, v, &version, 10000, &err) == 0, "pull: %s", err.msg);
  float want = -(float)(pushers * (pushers + 1) / 2 * pushes);
  for (int i = 0; i < N; i++) {
    CHECK(v[i] == want, "v[%d] = %g, want %g (an update or a part was lost or doubled)", i, v[i], want);
  }
  CHECK(version == pushers * pushes, "version %lld, want %d (one per whole push)", (long long)version,
        pushers * pushes);
  return version;
}

/* Sends one push of tensor t (bytes of data) as worker w at `step` with `flag` (1: push-pull); the reply goes to
 * *r (caller finalizes it with tfx_inmsg_fini). */
static int push_tensor(tfx_client *c, int w, int64_t step, Tfx__Tensor *t, const void *data, size_t bytes, int flag,
                       tfx_inmsg *r, tfx_err *err) {
  tfx_payload pl = {data, bytes, 1, NULL, NULL};
  tfx_envelope env;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, w);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = step, env.tensors = &t, env.n_tensors = 1, env.flag = flag;
  memset(r, 0, sizeof *r);
  return tfx_client_call(c, &env, &pl, 1, r, 20000, err);
}

/* One push-pull of g into v as worker w at `step`: the reply's values go to out, its version to *version. */
static int push_pull(tfx_client *c, int w, int64_t step, const float *g, float *out, int64_t *version, tfx_err *err) {
  Tfx__Tensor t;
  int64_t shape[1] = {N};
  tfx__tensor__init(&t);
  t.name = "v", t.shape = shape, t.n_shape = 1, t.nbytes = N * 4;
  tfx_inmsg r;
  int rc = push_tensor(c, w, step, &t, g, N * 4, 1, &r, err);
  size_t size = 0;
  const void *data = rc ? NULL : tfx_inmsg_part(&r, 0, &size);
  if (!rc && size != N * 4) {
    rc = tfx_err_set(err, TFX_EPROTO, "push-pull reply: %zu bytes, want %d", size, N * 4);
  }
  if (!rc) {
    memcpy(out, data, size), *version = r.env->step;
  }
  tfx_inmsg_fini(&r);
  return rc;
}

/* The ps's status figure `name` (from MSG_STATUS); -1 when the reply lacks it. */
static double stat_of(tfx_client *c, const char *name) {
  tfx_envelope env;
  tfx_inmsg r;
  tfx_err err;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 5000, &err) == 0, "status: %s", err.msg);
  double v = -1;
  for (size_t i = 0; i < r.env->n_stats; i++) {
    if (!strcmp(r.env->stats[i]->key, name)) {
      v = r.env->stats[i]->value;
    }
  }
  tfx_inmsg_fini(&r);
  return v;
}

/* Requires each status figure names[i] to equal want[i] exactly. */
static void expect_stats(tfx_client *c, const char *what, const char *const *names, const double *want, int n) {
  for (int i = 0; i < n; i++) {
    double v = stat_of(c, names[i]);
    CHECK(v == want[i], "%s: status %s = %g, want %g", what, names[i], v, want[i]);
  }
}

static void case_async_sum(void) {
  enum { PUSHERS = 16, PUSHES = 25 };
  tfx_client *c = connect_ps();
  tfx_err err;
  CHECK(init_ps(c, "async", "sgd", PUSHERS, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  int64_t version = pushers_exact_sum(c, PUSHERS, PUSHES, 0);
  printf("ok: %d concurrent pusher processes x %d pushes, exact sum %g, version %lld\n", PUSHERS, PUSHES,
         -(float)(PUSHERS * (PUSHERS + 1) / 2 * PUSHES), (long long)version);
  tfx_client_destroy(c);
}

static void case_sync(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g1[N], g2[N], v[N];
  int stale = -1;
  int64_t version;
  fill(g1, 2), fill(g2, 4);
  CHECK(init_ps(c, "sync", "sgd", 2, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  CHECK(push(c, 0, 0, g1, "v", N, &stale, &err) == 0 && stale == 0, "push w0: %s", err.msg);
  CHECK(pull(c, 0, 1, v, &version, 300, &err) == TFX_EPEER, "pull for step 1 answered before the 2nd replica pushed");
  CHECK(push(c, 0, 0, g1, "v", N, &stale, &err) == 0 && stale == 1, "a second push by the same worker was not dropped");
  CHECK(push(c, 1, 0, g2, "v", N, &stale, &err) == 0 && stale == 0, "push w1: %s", err.msg);
  CHECK(pull(c, 0, 1, v, &version, 5000, &err) == 0 && version == 1, "pull step 1: %s", err.msg);
  CHECK(v[0] == -3.0f && v[N - 1] == -3.0f, "sync average: v = %g, want -3", v[0]);
  CHECK(push(c, 1, 0, g2, "v", N, &stale, &err) == 0 && stale == 1, "stale gradient (step 0 at step 1) not dropped");
  CHECK(push(c, 0, 5, g2, "v", N, &stale, &err) == TFX_ESTATE, "push from the future accepted");
  /* Backup workers: 3 workers, 2 replicas to aggregate: the third push of a step is dropped. */
  CHECK(init_ps(c, "sync", "sgd", 3, 2, 0, NULL, &err) == 0, "re-init: %s", err.msg);
  push(c, 0, 0, g1, "v", N, &stale, &err);
  push(c, 1, 0, g2, "v", N, &stale, &err);
  CHECK(push(c, 2, 0, g2, "v", N, &stale, &err) == 0 && stale == 1, "backup worker's late gradient not dropped");
  CHECK(pull(c, 2, 1, v, &version, 5000, &err) == 0 && v[0] == -3.0f, "backup: v = %g, want -3", v[0]);
  printf("ok: sync waits for replicas_to_aggregate, averages, drops stale/duplicate/backup gradients\n");
  tfx_client_destroy(c);
}

static void case_ssp(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], v[N];
  int64_t version;
  fill(g, 1);
  CHECK(init_ps(c, "ssp", "sgd", 2, 0, 1, NULL, &err) == 0, "init: %s", err.msg);
  CHECK(push(c, 0, 0, g, "v", N, NULL, &err) == 0, "push: %s", err.msg);
  CHECK(pull(c, 0, 0, v, &version, 2000, &err) == 0, "worker 0 one step ahead must not block: %s", err.msg);
  CHECK(push(c, 0, 1, g, "v", N, NULL, &err) == 0, "push: %s", err.msg);
  CHECK(pull(c, 0, 0, v, &version, 300, &err) == TFX_EPEER, "worker 0 two steps ahead (staleness 1) was not blocked");
  CHECK(push(c, 1, 0, g, "v", N, NULL, &err) == 0, "push w1: %s", err.msg);
  CHECK(pull(c, 0, 0, v, &version, 2000, &err) == 0 && v[0] == -3.0f, "after the slow worker caught up: %s v=%g",
        err.msg, v[0]);
  printf("ok: bounded staleness blocks a worker 2 steps ahead and releases it when the slowest advances\n");
  tfx_client_destroy(c);
}

/* Sets cfg's optimizer by its option text ("adam"), as the experiment would. */
static void set_optimizer(tfx_config *cfg, const char *name) {
  char assignment[64];
  snprintf(assignment, sizeof assignment, "optimizer.name=%s", name);
  tfx_err err;
  CHECK(tfx_config_set(cfg, assignment, &err) == 0, "%s: %s", assignment, err.msg);
}

static void case_optim(void) {
  const char *opts[] = {"momentum", "adagrad", "rmsprop", "adam", "adamw", "ftrl"};
  for (int o = 0; o < 6; o++) {
    tfx_client *c = connect_ps();
    tfx_err err;
    CHECK(init_ps(c, "async", opts[o], 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
    tfx_config cfg;
    tfx_config_init(&cfg);
    set_optimizer(&cfg, opts[o]);
    cfg.learning_rate = 0.01;
    tfx_optim opt;
    tfx_optim_init(&opt, &cfg);
    float w[N] = {0}, m[N] = {0}, s2[N] = {0}, g[N], v[N];
    float *slots[2] = {m, s2};
    for (int step = 0; step < 5; step++) {
      for (int i = 0; i < N; i++) {
        g[i] = sinf((float)(i + step));
      }
      CHECK(push(c, 0, step, g, "v", N, NULL, &err) == 0, "push: %s", err.msg);
      tfx_optim_apply(&opt, step, w, g, 1.0f, slots, N);
    }
    CHECK(pull(c, 0, 0, v, NULL, 5000, &err) == 0, "pull: %s", err.msg);
    for (int i = 0; i < N; i++) {
      CHECK(v[i] == w[i], "%s: ps %g != single-process %g at %d", opts[o], v[i], w[i], i);
    }
    tfx_client_destroy(c);
  }
  printf("ok: momentum, adagrad, rmsprop, adam, adamw, ftrl at the ps equal the single-process rule bit for bit\n");
}

/* A push of int64 values, and a whole push at an offset, are refused naming v and what is wrong. */
static void reject_dtype_offset(tfx_client *c, const float *g) {
  tfx_err err;
  Tfx__Tensor t;
  int64_t shape[1] = {N}, ids[N] = {0};
  tfx_inmsg r;
  tfx__tensor__init(&t);
  t.name = "v", t.shape = shape, t.n_shape = 1, t.nbytes = N * 8, t.dtype = TFX__DTYPE__DTYPE_INT64;
  int rc = push_tensor(c, 0, 0, &t, ids, N * 8, 0, &r, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EINVAL && strstr(err.msg, "'v' has dtype int64") && strstr(err.msg, "float32"),
        "wrong dtype: code %d, %s", rc, err.msg);
  shape[0] = N - 10;
  t.dtype = TFX__DTYPE__DTYPE_FLOAT32, t.offset = 10, t.nbytes = (N - 10) * 4;
  rc = push_tensor(c, 0, 0, &t, g, (N - 10) * 4, 0, &r, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_ESHAPE && strstr(err.msg, "'v' range at element 10 out of range"),
        "a whole push at offset 10: code %d, %s", rc, err.msg);
}

/* A plan whose shard v has dtype int64 is refused naming v and the dtype; the ps keeps its state. */
static void reject_plan_dtype(tfx_client *c) {
  tfx_err err;
  float v[N];
  int64_t shape[1] = {N}, version = -1;
  Tfx__Shard sh, *shp = &sh;
  tfx_envelope env;
  tfx_inmsg r;
  tfx__shard__init(&sh);
  sh.key = sh.var = "v", sh.shape = shape, sh.n_shape = 1, sh.row_end = N, sh.trainable = 1, sh.dtype = "int64";
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = "{}", env.shards = &shp, env.n_shards = 1, env.init = init_of(1, 0);
  int rc = tfx_client_call(c, &env, NULL, 0, &r, 5000, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EPROTO && strstr(err.msg, "'v'") && strstr(err.msg, "dtype 'int64'"),
        "a plan shard of dtype int64: code %d, %s", rc, err.msg);
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 0 && v[0] == 0.0f,
        "the ps lost its state to a refused plan: %s", err.msg);
}

static void case_reject(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], v[N];
  fill(g, 1);
  CHECK(init_ps(c, "async", "sgd", 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  CHECK(push(c, 0, 0, g, "w", N, NULL, &err) == TFX_ENOTFOUND && strstr(err.msg, "'w'"), "unknown variable: %s",
        err.msg);
  CHECK(push(c, 0, 0, g, "v", N - 1, NULL, &err) == TFX_ESHAPE && strstr(err.msg, "'v'"), "wrong shape: %s", err.msg);
  reject_dtype_offset(c, g);
  CHECK(stat_of(c, "rejected") == 4, "status rejected = %g after 4 refused pushes", stat_of(c, "rejected"));
  g[7] = NAN;
  CHECK(push(c, 0, 0, g, "v", N, NULL, &err) == TFX_EINVAL && strstr(err.msg, "NaN"), "NaN: %s", err.msg);
  g[7] = INFINITY;
  CHECK(push(c, 0, 0, g, "v", N, NULL, &err) == TFX_EINVAL, "Inf: %s", err.msg);
  CHECK(pull(c, 0, 0, v, NULL, 5000, &err) == 0, "pull: %s", err.msg);
  for (int i = 0; i < N; i++) {
    CHECK(v[i] == 0.0f, "rejected pushes changed v[%d] to %g", i, v[i]);
  }
  reject_plan_dtype(c);
  CHECK(stat_of(c, "rejected") == 7 && stat_of(c, "nan_rejected") == 2, "status rejected = %g, nan_rejected = %g",
        stat_of(c, "rejected"), stat_of(c, "nan_rejected"));
  printf(
      "ok: unknown variable, wrong shape, wrong dtype, a whole push at an offset, NaN and Inf rejected by name "
      "and counted; a plan shard of dtype int64 refused; nothing changed\n");
  tfx_client_destroy(c);
}

/* The value of the ps's /metrics sample `name` (labels role="ps", index="0"); -1 when absent. */
static double metric_of(const char *name) {
  char cmd[128], line[512], want[160];
  snprintf(cmd, sizeof cmd, "curl -sf http://127.0.0.1:%d/metrics", http_port);
  snprintf(want, sizeof want, "%s{role=\"ps\",index=\"0\"} ", name);
  FILE *f = popen(cmd, "r");
  double v = -1;
  while (f && fgets(line, sizeof line, f)) {
    if (!strncmp(line, want, strlen(want))) {
      v = atof(line + strlen(want));
    }
  }
  if (f) {
    pclose(f);
  }
  return v;
}

/* Waits for /metrics sample `name` to read want (the HTTP view is copied after each message): up to 300 reads
 * 0.1 s apart, since a busy 2-core machine under ASan may take seconds to publish; a match returns at once. */
static void expect_metric(const char *name, double want) {
  double v = -1;
  for (int i = 0; i < 300 && (v = metric_of(name)) != want; i++) {
    usleep(100000);
  }
  CHECK(v == want, "/metrics %s = %g, want %g", name, v, want);
}

/* INIT of v [N] under SGD (rate 1) in `mode` for `workers` workers with training.nan_policy = policy. */
static int init_policy(tfx_client *c, const char *mode, int workers, const char *policy, tfx_err *err) {
  char json[256];
  int64_t shape[1] = {N};
  snprintf(json, sizeof json,
           "{\"training\": {\"mode\": \"%s\", \"nan_policy\": \"%s\"},"
           " \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}",
           mode, policy);
  return init_shaped(c, json, shape, 1, workers, NULL, err);
}

/* nan_policy = reject (the default): the NaN push gets an error naming v, nothing changes, counted as a NaN
 * rejection and a rejection. */
static void nan_reject(tfx_client *c, float *g) {
  tfx_err err;
  float v[N];
  int64_t version;
  CHECK(init_ps(c, "async", "sgd", 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  g[3] = NAN;
  CHECK(push(c, 0, 0, g, "v", N, NULL, &err) == TFX_EINVAL && strstr(err.msg, "'v'") && strstr(err.msg, "rejected"),
        "reject: %s", err.msg);
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 0 && v[0] == 0.0f && v[3] == 0.0f,
        "a rejected NaN push changed v (version %lld, v[3] = %g)", (long long)version, v[3]);
  const char *names[] = {"nan_rejected", "nan_skipped", "rejected", "pushes_applied"};
  double want[] = {1, 0, 1, 0};
  expect_stats(c, "nan_policy reject", names, want, 4);
  CHECK(init_policy(c, "async", 1, "drop", &err) == TFX_ECONFIG && strstr(err.msg, "training.nan_policy"),
        "nan_policy 'drop' accepted: %s", err.msg);
}

/* nan_policy = skip, async (after nan_reject): a NaN push and a NaN push-pull both succeed, the push-pull's reply
 * carries the current values and version; nothing changes; each counted as skipped, none as rejected. A push in
 * parts whose last part is skipped keeps its other parts and still moves the version once. */
static void nan_skip_async(tfx_client *c, float *g) {
  tfx_err err;
  float v[N], good[N];
  int64_t version;
  int stale = -1;
  fill(good, 1);
  CHECK(init_policy(c, "async", 1, "skip", &err) == 0, "init skip: %s", err.msg);
  CHECK(push(c, 0, 0, good, "v", N, NULL, &err) == 0, "push: %s", err.msg);
  g[3] = INFINITY;
  CHECK(push(c, 0, 1, g, "v", N, &stale, &err) == 0 && stale == 0, "skip: a NaN push got %s", err.msg);
  CHECK(push_pull(c, 0, 1, g, v, &version, &err) == 0, "skip: a NaN push-pull got %s", err.msg);
  for (int i = 0; i < N; i++) {
    CHECK(v[i] == -1.0f && version == 1, "skipped push-pull reply: v[%d] = %g at version %lld, want -1 at 1", i, v[i],
          (long long)version);
  }
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 1 && v[3] == -1.0f,
        "a skipped push changed v (version %lld, v[3] = %g)", (long long)version, v[3]);
  fill(g, 2), g[700] = NAN; /* in parts of 500: part 0 applies, part 1 (the last) is skipped yet ends the step */
  CHECK(push_pull_parts(c, 0, g, 500, v, &err) == 0, "skip: a push-pull in parts with a NaN in part 1: %s", err.msg);
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 2, "after parts: version %lld, want 2",
        (long long)version);
  for (int i = 0; i < N; i++) {
    CHECK(v[i] == (i < 500 ? -3.0f : -1.0f), "after a skipped part: v[%d] = %g", i, v[i]);
  }
  const char *names[] = {"nan_rejected", "nan_skipped", "rejected", "pushes_applied"};
  double want[] = {1, 3, 2, 2}; /* counted since the ps started: nan_reject's NaN push and bad init came first */
  expect_stats(c, "nan_policy skip", names, want, 4);
  CHECK(ps_log_has("PS-NAN-SKIP"), "no PS-NAN-SKIP line in the ps log");
  expect_metric("tfx_ps_nan_skipped_total", 3);
  expect_metric("tfx_ps_nan_rejected_total", 1);
  expect_metric("tfx_ps_rejected_total", 2);
}

/* nan_policy = skip, sync with 2 workers: worker 0's NaN push is left out, worker 1's completes the step alone. */
static void nan_skip_sync(tfx_client *c, float *g) {
  tfx_err err;
  float v[N], four[N];
  int64_t version;
  fill(four, 4);
  CHECK(init_policy(c, "sync", 2, "skip", &err) == 0, "init sync skip: %s", err.msg);
  g[3] = NAN;
  CHECK(push(c, 0, 0, g, "v", N, NULL, &err) == 0, "sync skip: %s", err.msg);
  CHECK(push(c, 1, 0, four, "v", N, NULL, &err) == 0, "push w1: %s", err.msg);
  CHECK(pull(c, 0, 1, v, &version, 5000, &err) == 0 && version == 1, "sync step after a skip: %s", err.msg);
  CHECK(v[0] == -4.0f && v[3] == -4.0f, "sync average without the skipped push: v = %g, want -4", v[0]);
}

static void case_nan_policy(void) {
  tfx_client *c = connect_ps();
  float g[N];
  fill(g, 1);
  nan_reject(c, g);
  fill(g, 1);
  nan_skip_async(c, g);
  fill(g, 1);
  nan_skip_sync(c, g);
  printf(
      "ok: nan_policy reject: error naming v, counted in nan_rejected and rejected; skip: push and push-pull "
      "succeed with the current values, nothing changes, counted in nan_skipped only (status and /metrics); sync: the "
      "step completes "
      "without the skipped gradient\n");
  tfx_client_destroy(c);
}

/* Four pulls, four pushes that complete two sync steps, one stale push and one rejected push give exactly these
 * status figures (pushes_applied counts applied updates: two sync steps). */
static void case_status(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], v[N];
  int stale = -1;
  fill(g, 1);
  CHECK(init_ps(c, "sync", "sgd", 2, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  for (int k = 0; k < 3; k++) {
    CHECK(pull(c, 0, 0, v, NULL, 5000, &err) == 0, "pull %d: %s", k, err.msg);
  }
  for (int64_t step = 0; step < 2; step++) {
    CHECK(push(c, 0, step, g, "v", N, &stale, &err) == 0 && !stale, "push w0 step %lld: %s", (long long)step, err.msg);
    CHECK(push(c, 1, step, g, "v", N, &stale, &err) == 0 && !stale, "push w1 step %lld: %s", (long long)step, err.msg);
    if (step == 0) {
      CHECK(push(c, 1, 0, g, "v", N, &stale, &err) == 0 && stale, "a stale push was not dropped");
    }
  }
  CHECK(push(c, 0, 2, g, "w", N, NULL, &err) == TFX_ENOTFOUND, "push to an unknown variable: %s", err.msg);
  CHECK(pull(c, 0, 2, v, NULL, 5000, &err) == 0 && v[0] == -2.0f, "pull step 2: v = %g, want -2", v[0]);
  const char *names[] = {"shards",       "bytes",      "pushes_applied", "stale_dropped", "rejected",
                         "pulls_served", "bad_frames", "version",        "nan_rejected",  "nan_skipped"};
  double want[] = {1, N * 4, 2, 1, 1, 4, 0, 2, 0, 0};
  expect_stats(c, "known sequence", names, want, 10);
  printf(
      "ok: status after 4 pulls, 4 pushes (2 sync steps), 1 stale and 1 rejected push: applied 2, stale 1, "
      "rejected 1, pulls 4, version 2, exactly\n");
  tfx_client_destroy(c);
}

/* INIT under json for `workers` workers of n (<= 4) variables names[i] of counts[i] zeros, trainable[i] (NULL: all
 * trainable). */
static void init_plan(tfx_client *c, const char *json, const char *const *names, const int64_t *counts,
                      const int *trainable, int n, int workers) {
  Tfx__Shard sh[4], *shp[4];
  for (int k = 0; k < n; k++) {
    tfx__shard__init(&sh[k]);
    sh[k].key = sh[k].var = (char *)names[k], sh[k].shape = (int64_t *)&counts[k], sh[k].n_shape = 1;
    sh[k].row_end = counts[k], sh[k].trainable = trainable ? trainable[k] : 1, sh[k].init = "zeros";
    shp[k] = &sh[k];
  }
  tfx_envelope env;
  tfx_inmsg r;
  tfx_err err;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = (char *)json, env.shards = shp, env.n_shards = (size_t)n, env.init = init_of(workers, 0);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 20000, &err) == 0, "init: %s", err.msg);
  tfx_inmsg_fini(&r);
}

/* INIT with SGD (rate 1) in async mode of n variables names[i] of counts[i] zeros, request deadline 1 s. */
static void init_vars(tfx_client *c, const char *const *names, const int64_t *counts, int n) {
  const char *json =
      "{\"training\": {\"mode\": \"async\"}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1},"
      " \"cluster\": {\"request_timeout_s\": 1}}";
  init_plan(c, json, names, counts, NULL, n, 1);
}

/* Pulls the named variables (version >= min) into *r (caller finalizes it). */
static int pull_named(tfx_client *c, char **names, size_t n, int64_t min, tfx_inmsg *r, int timeout_ms, tfx_err *err) {
  tfx_envelope env;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.step = min, env.names = names, env.n_names = n;
  memset(r, 0, sizeof *r);
  return tfx_client_call(c, &env, NULL, 0, r, timeout_ms, err);
}

/* The reply tensor `name` of r must hold `count` values all equal to want. */
static void expect_tensor(const tfx_inmsg *r, const char *name, size_t count, float want) {
  for (size_t i = 0; i < r->env->n_tensors; i++) {
    if (strcmp(r->env->tensors[i]->name, name)) {
      continue;
    }
    size_t size = 0;
    const char *data = tfx_inmsg_part(r, (int)i, &size); /* a frame need not be 4-byte aligned */
    CHECK(size == count * 4, "'%s': %zu bytes, want %zu", name, size, count * 4);
    for (size_t k = 0; k < count; k++) {
      float v;
      memcpy(&v, data + 4 * k, 4);
      CHECK(v == want, "'%s'[%zu] = %g, want %g", name, k, v, want);
    }
    return;
  }
  CHECK(0, "reply lacks '%s'", name);
}

/* A pull of names for version 50, never reached, is answered by the ps's own deadline (1 s) with TFX_EPEER and
 * PS-PULL-TIMEOUT, well before the client's 10 s; returns the ms waited. */
static int64_t pull_deadline(tfx_client *c, char **names) {
  tfx_err err;
  tfx_inmsg r;
  int64_t t0 = tfx_now_ms();
  int rc = pull_named(c, names, 2, 50, &r, 10000, &err);
  int64_t waited = tfx_now_ms() - t0;
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EPEER && strstr(err.msg, "pull for version 50 timed out") && waited >= 900 && waited < 9000,
        "pull for version 50: code %d after %lld ms, '%s' (want the ps's own 1 s deadline)", rc, (long long)waited,
        err.msg);
  CHECK(ps_log_has("PS-PULL-TIMEOUT"), "no PS-PULL-TIMEOUT line in the ps log");
  return waited;
}

/* A pull naming c and a answers exactly those two; naming an unknown variable is refused by name (counted as
 * rejected, not served); a pull for a version the ps does not reach is answered by the ps's own deadline
 * (cluster.request_timeout_s = 1) with TFX_EPEER and PS-PULL-TIMEOUT. */
static void case_pulls(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  const char *vars[3] = {"a", "b", "c"};
  int64_t counts[3] = {10, 20, N};
  float g[N];
  init_vars(c, vars, counts, 3);
  for (int k = 0; k < 3; k++) {
    fill(g, (float)(k + 1));
    CHECK(push(c, 0, 0, g, vars[k], (size_t)counts[k], NULL, &err) == 0, "push '%s': %s", vars[k], err.msg);
  }
  char *ca[2] = {"c", "a"}, *bad[2] = {"a", "nope"};
  tfx_inmsg r;
  CHECK(pull_named(c, ca, 2, 0, &r, 5000, &err) == 0 && r.env->n_tensors == 2 && r.n_parts == 2, "pull [c, a]: %s",
        err.msg);
  expect_tensor(&r, "c", N, -3.0f);
  expect_tensor(&r, "a", 10, -1.0f);
  tfx_inmsg_fini(&r);
  double served = stat_of(c, "pulls_served"), rejected = stat_of(c, "rejected");
  int rc = pull_named(c, bad, 2, 0, &r, 5000, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_ENOTFOUND && strstr(err.msg, "'nope'"), "pull [a, nope]: code %d, %s", rc, err.msg);
  CHECK(stat_of(c, "rejected") == rejected + 1 && stat_of(c, "pulls_served") == served,
        "an unknown name: rejected %g -> %g, served %g -> %g", rejected, stat_of(c, "rejected"), served,
        stat_of(c, "pulls_served"));
  int64_t waited = pull_deadline(c, ca);
  printf(
      "ok: a named pull answers exactly the named variables; an unknown name is refused by name (rejected, not "
      "served); a pull past the version times out by the ps's deadline (%lld ms)\n",
      (long long)waited);
  tfx_client_destroy(c);
}

/* Pulls every variable, with Envelope.since = since when since >= 0, into *r (caller finalizes it). */
static void pull_since(tfx_client *c, int64_t since, tfx_inmsg *r) {
  tfx_envelope env;
  tfx_err err;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  Tfx__Since s = TFX__SINCE__INIT;
  s.version = (uint64_t)since, env.since = since >= 0 ? &s : NULL;
  memset(r, 0, sizeof *r);
  CHECK(tfx_client_call(c, &env, NULL, 0, r, 5000, &err) == 0, "pull since %lld: %s", (long long)since, err.msg);
}

/* A reply must carry exactly the variables listed in `names` (comma-separated, "" for none) at version `step`. */
static void expect_names(const tfx_inmsg *r, const char *what, const char *names, int64_t step) {
  char got[256] = "";
  for (size_t i = 0; i < r->env->n_tensors; i++) {
    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "", r->env->tensors[i]->name);
  }
  CHECK(!strcmp(got, names) && r->env->step == step, "%s: reply carries [%s] at version %lld, want [%s] at %lld", what,
        got, (long long)r->env->step, names, (long long)step);
}

/* Sends one push of n tensors (names[i], counts[i] floats from data[i]) as worker w at `step` with `flag` (1:
 * push-pull) and since (-1: none); the reply goes to *r (caller finalizes it). */
static int push_many(tfx_client *c, int w, int64_t step, int flag, int64_t since, const char *const *names,
                     const int64_t *counts, const float *const *data, int n, tfx_inmsg *r, tfx_err *err) {
  Tfx__Tensor t[4], *tp[4];
  tfx_payload pl[4];
  for (int k = 0; k < n; k++) {
    tfx__tensor__init(&t[k]);
    t[k].name = (char *)names[k], t[k].shape = (int64_t *)&counts[k], t[k].n_shape = 1;
    t[k].nbytes = (uint64_t)counts[k] * 4, tp[k] = &t[k];
    pl[k] = (tfx_payload){data[k], (size_t)counts[k] * 4, 1, NULL, NULL};
  }
  tfx_envelope env;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, w);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = step, env.tensors = tp, env.n_tensors = (size_t)n, env.flag = flag;
  Tfx__Since s = TFX__SINCE__INIT;
  s.version = (uint64_t)since, env.since = since >= 0 ? &s : NULL;
  memset(r, 0, sizeof *r);
  return tfx_client_call(c, &env, pl, n, r, 20000, err);
}

/* Pushes n tensors as worker w at `step` (a plain push; the reply is only checked for success). */
static void push_all(tfx_client *c, int w, int64_t step, const char *const *names, const int64_t *counts,
                     const float *const *data, int n) {
  tfx_err err;
  tfx_inmsg r;
  CHECK(push_many(c, w, step, 0, -1, names, counts, data, n, &r, &err) == 0, "push as worker %d: %s", w, err.msg);
  tfx_inmsg_fini(&r);
}

/* Pulls "since" a version: a and b trainable, s not (assigned whole). Nothing changed since the current version
 * gives no tensors and the version; a push to a gives a alone since the old version; s comes only once it is
 * assigned; a since past the ps's version (from before a rollback) gives everything; a push-pull since honours it
 * too. */
static void case_since(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  const char *vars[3] = {"a", "b", "s"};
  int64_t counts[3] = {10, N, 4};
  int trainable[3] = {1, 1, 0};
  float g[N], stats[4] = {7, 8, 9, 10};
  const float *ga[1] = {g}, *gs[1] = {stats};
  tfx_inmsg r;
  init_plan(c, "{\"training\": {\"mode\": \"async\"}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}", vars,
            counts, trainable, 3, 1);
  pull_since(c, 0, &r), expect_names(&r, "since 0 at version 0", "", 0), tfx_inmsg_fini(&r);
  pull_since(c, -1, &r), expect_names(&r, "no since", "a,b,s", 0), tfx_inmsg_fini(&r);
  fill(g, 1);
  push_all(c, 0, 0, &vars[0], &counts[0], ga, 1);
  pull_since(c, 0, &r), expect_names(&r, "since 0 after a push to a", "a", 1);
  expect_tensor(&r, "a", 10, -1.0f), tfx_inmsg_fini(&r);
  pull_since(c, 1, &r), expect_names(&r, "since 1 at version 1", "", 1), tfx_inmsg_fini(&r);
  push_all(c, 0, 1, &vars[2], &counts[2], gs, 1);
  pull_since(c, 1, &r), expect_names(&r, "since 1 after assigning s", "s", 2);
  for (int k = 0; k < 4; k++) {
    float v;
    size_t size = 0;
    memcpy(&v, (const char *)tfx_inmsg_part(&r, 0, &size) + 4 * k, 4);
    CHECK(v == stats[k], "assigned s[%d] = %g, want %g", k, v, stats[k]);
  }
  tfx_inmsg_fini(&r);
  pull_since(c, 99, &r), expect_names(&r, "since 99 at version 2", "a,b,s", 2), tfx_inmsg_fini(&r);
  fill(g, 2);
  CHECK(push_many(c, 0, 2, 1, 2, &vars[1], &counts[1], ga, 1, &r, &err) == 0, "push-pull since 2: %s", err.msg);
  expect_names(&r, "push-pull of b since 2", "b", 3);
  expect_tensor(&r, "b", N, -2.0f), tfx_inmsg_fini(&r);
  printf(
      "ok: a pull since the current version carries no tensors and the version; since an older one only what "
      "changed (a pushed, s once assigned, b by a push-pull); since a version past the ps's, everything\n");
  tfx_client_destroy(c);
}

/* The reply tensor `name` of r must hold exactly want[0 .. count). */
static void expect_values(const tfx_inmsg *r, const char *name, const float *want, size_t count) {
  for (size_t i = 0; i < r->env->n_tensors; i++) {
    size_t size = 0;
    const char *data = tfx_inmsg_part(r, (int)i, &size);
    if (strcmp(r->env->tensors[i]->name, name)) {
      continue;
    }
    CHECK(size == count * 4, "'%s': %zu bytes, want %zu", name, size, count * 4);
    for (size_t k = 0; k < count; k++) {
      float v;
      memcpy(&v, data + 4 * k, 4);
      CHECK(v == want[k], "'%s'[%zu] = %.9g, want %.9g", name, k, v, want[k]);
    }
    return;
  }
  CHECK(0, "reply lacks '%s'", name);
}

/* Async under momentum (rate 0.5), as a worker sends batch-norm statistics: one push-pull carrying the values of
 * the non-trainable bn and the gradient of w. bn takes the values exactly (no optimizer, no rate, no momentum
 * from an earlier assignment), w moves by the momentum rule, each push counts once; before any assignment a
 * push-pull's reply leaves bn out; rows for bn are refused. */
static void assign_async(tfx_client *c) {
  tfx_err err;
  const char *vars[2] = {"bn", "w"};
  int64_t counts[2] = {4, N};
  int trainable[2] = {0, 1};
  float g[N], w[N] = {0}, m[N] = {0}, bn[2][4] = {{3.25f, -1.5f, 0, 1e6f}, {-7, 0.125f, 2, 1e-3f}};
  float *slots[2] = {m, NULL};
  tfx_inmsg r;
  init_plan(c, "{\"training\": {\"mode\": \"async\"}, \"optimizer\": {\"name\": \"momentum\", \"learning_rate\": 0.5}}",
            vars, counts, trainable, 2, 1);
  tfx_config cfg;
  tfx_config_init(&cfg);
  cfg.optimizer = TFX_OPT_MOMENTUM, cfg.learning_rate = 0.5;
  tfx_optim opt;
  tfx_optim_init(&opt, &cfg);
  for (int i = 0; i < N; i++) {
    g[i] = (float)(i % 5) - 2.0f;
  }
  const float *gw[1] = {g};
  CHECK(push_many(c, 0, 0, 1, -1, &vars[1], &counts[1], gw, 1, &r, &err) == 0, "push-pull of w: %s", err.msg);
  tfx_optim_apply(&opt, 0, w, g, 1.0f, slots, N);
  expect_names(&r, "push-pull before bn was assigned", "w", 1), expect_values(&r, "w", w, N), tfx_inmsg_fini(&r);
  for (int k = 0; k < 2; k++) {
    const float *data[2] = {bn[k], g};
    CHECK(push_many(c, 0, 1 + k, 1, -1, vars, counts, data, 2, &r, &err) == 0, "push-pull bn+w: %s", err.msg);
    tfx_optim_apply(&opt, 1 + k, w, g, 1.0f, slots, N);
    expect_names(&r, "push-pull of bn values and w's gradient", "bn,w", 2 + k);
    expect_values(&r, "bn", bn[k], 4), expect_values(&r, "w", w, N), tfx_inmsg_fini(&r);
  }
  int64_t row = 1;
  Tfx__Tensor t;
  tfx__tensor__init(&t);
  t.name = "bn", t.shape = &counts[0], t.n_shape = 1, t.nbytes = 4, t.rows = &row, t.n_rows = 1;
  int rc = push_tensor(c, 0, 3, &t, bn[0], 4, 0, &r, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EINVAL && strstr(err.msg, "'bn' is assigned whole"), "rows for bn: code %d, %s", rc, err.msg);
  const char *names[] = {"pushes_applied", "version", "rejected"};
  double want[] = {3, 3, 1};
  expect_stats(c, "async assignments", names, want, 3);
}

/* Sync, 2 workers, SGD (rate 0.5): each push carries bn values and w's gradient. The values are assigned as they
 * arrive (the step's last arrival stands), the gradients averaged; the step counts once; a stale push's values
 * are dropped with its gradient. */
static void assign_sync(tfx_client *c) {
  const char *vars[2] = {"bn", "w"};
  int64_t counts[2] = {4, N};
  int trainable[2] = {0, 1};
  float g0[N], g1[N], bn0[4] = {1, 2, 3, 4}, bn1[4] = {-0.5f, 0.25f, 8, 16}, stale_bn[4] = {9, 9, 9, 9};
  tfx_inmsg r;
  init_plan(c, "{\"training\": {\"mode\": \"sync\"}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 0.5}}", vars,
            counts, trainable, 2, 2);
  fill(g0, 2), fill(g1, 4);
  const float *d0[2] = {bn0, g0}, *d1[2] = {bn1, g1}, *ds[2] = {stale_bn, g0};
  push_all(c, 0, 0, vars, counts, d0, 2);
  push_all(c, 1, 0, vars, counts, d1, 2);
  push_all(c, 0, 0, vars, counts, ds, 2); /* stale: the step is applied */
  pull_since(c, -1, &r);
  expect_names(&r, "sync pull", "bn,w", 1);
  float want_w[N];
  fill(want_w, -1.5f); /* -0.5 * (2 + 4) / 2 */
  expect_values(&r, "bn", bn1, 4), expect_values(&r, "w", want_w, N), tfx_inmsg_fini(&r);
  const char *names[] = {"pushes_applied", "stale_dropped", "version"};
  double want[] = {1, 1, 1};
  expect_stats(c, "sync assignments", names, want, 3);
}

static void case_assign(void) {
  tfx_client *c = connect_ps();
  assign_async(c);
  tfx_client_destroy(c);
  stop_ps(), start_ps(); /* fresh counters */
  c = connect_ps();
  assign_sync(c);
  printf(
      "ok: a push carrying values for a non-trainable variable assigns them exactly (momentum, rate 0.5: no "
      "optimizer step) while the trainable gradient in the same message is optimized as usual; one count per "
      "push (async) or step (sync, last arrival's values stand, a stale push's dropped); rows refused\n");
  tfx_client_destroy(c);
}

/* Model variables as a plan (one whole shard each, all on ps 0) in sh / shp (at most 4). */
static int model_plan(tfx_model *m, Tfx__Shard *sh, Tfx__Shard **shp) {
  int n = tfx_model_nvars(m);
  CHECK(n <= 4, "model has %d variables", n);
  for (int k = 0; k < n; k++) {
    tfx_var *v = tfx_model_var(m, k);
    tfx__shard__init(&sh[k]);
    sh[k].key = sh[k].var = v->name, sh[k].shape = v->shape, sh[k].n_shape = (size_t)v->rank;
    sh[k].row_end = v->shape[0], sh[k].trainable = v->trainable, sh[k].init = v->init;
    sh[k].fan_in = v->fan_in, sh[k].fan_out = v->fan_out, shp[k] = &sh[k];
  }
  return n;
}

/* One push-pull through the psclient; the bytes that came back must be want_bytes. */
static void client_step(tfx_psclient *pc, int64_t step, uint64_t want_bytes, const char *what) {
  tfx_err err;
  int64_t version = -1;
  CHECK(tfx_psclient_push_pull(pc, step, &version, &err) == 0, "%s: %s", what, err.msg);
  CHECK(version == step + 1 && tfx_psclient_bytes(pc) == want_bytes,
        "%s: version %lld, %llu bytes back, want %lld, %llu", what, (long long)version,
        (unsigned long long)tfx_psclient_bytes(pc), (long long)(step + 1), (unsigned long long)want_bytes);
}

/* Every value of table (1000 x 8) equals held, but for row `row` (-1: none), which is held - 1 (an SGD step). */
static void expect_table(const tfx_var *table, const float *held, int row, const char *what) {
  for (size_t i = 0; i < table->count; i++) {
    float want = (int)(i / 8) == row ? held[i] - 1.0f : held[i];
    CHECK(table->value[i] == want, "%s: table[%zu] = %g, want %g", what, i, table->value[i], want);
  }
}

/* The workers' client (tfx_psclient) against a real ps, for an embedding table and a dense layer under async SGD:
 * a push-pull in which no row of the table was looked up brings back only the dense variables (the table, unchanged
 * since the client's last reply, is left out) and the client keeps the table's values; once a row is pushed the
 * table comes back with that row updated. */
static void case_client_since(void) {
  const char *json =
      "{\"model\": {\"input_shape\": [4], \"layers\": [{\"type\": \"embedding\", \"input_dim\": 1000, \"units\": 8},"
      " {\"type\": \"dense\", \"units\": 1}]}, \"training\": {\"mode\": \"async\"},"
      " \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}";
  tfx_err err;
  tfx_config cfg;
  tfx_model *m = NULL;
  tfx_config_init(&cfg);
  CHECK(tfx_config_parse(&cfg, json, "client-since", &err) == 0 && tfx_model_create(&cfg, 1, &m, &err) == 0,
        "model: %s", err.msg);
  Tfx__Shard sh[4], *shp[4];
  int n = model_plan(m, sh, shp);
  tfx_client *c = connect_ps();
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = (char *)json, env.shards = shp, env.n_shards = (size_t)n, env.init = init_of(1, 0);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 20000, &err) == 0, "init: %s", err.msg);
  tfx_inmsg_fini(&r);
  tfx_cluster *cl = tfx_cluster_create();
  tfx_psclient *pc = NULL;
  CHECK(cl && tfx_cluster_add(cl, TFX_ROLE_PS, strstr(endpoint, "//") + 2, &err) == 0 &&
            tfx_psclient_create(cl, shp, (size_t)n, m, 10000, &pc, &err) == 0,
        "psclient: %s", err.msg);
  int64_t version;
  CHECK(tfx_psclient_pull(pc, 0, &version, &err) == 0, "first pull: %s", err.msg);
  tfx_var *table = tfx_model_var(m, 0);
  uint64_t all = tfx_psclient_bytes(pc), dense = all - table->count * 4;
  float *held = malloc(table->count * 4);
  memcpy(held, table->value, table->count * 4);
  CHECK(table->sparse && held[0] != 0.0f && all > table->count * 4, "table '%s' not sparse or all zero", table->name);
  for (int k = 1; k < n; k++) { /* the dense layer's kernel and bias */
    tfx_var *v = tfx_model_var(m, k);
    for (size_t i = 0; i < v->count; i++) {
      v->grad[i] = 1;
    }
  }
  table->n_rows = 0;
  client_step(pc, 0, dense, "push-pull without a looked-up row");
  client_step(pc, 1, dense, "second push-pull without a looked-up row");
  expect_table(table, held, -1, "kept");
  table->rows[0] = 5, table->n_rows = 1;
  for (int i = 0; i < 8; i++) {
    table->grad[i] = 1;
  }
  client_step(pc, 2, all, "push-pull of row 5");
  expect_table(table, held, 5, "after row 5");
  printf(
      "ok: the psclient's push-pulls bring back only what changed (%llu of %llu bytes while no table row is "
      "looked up) and keep the table's values; a pushed row brings the table back updated\n",
      (unsigned long long)dense, (unsigned long long)all);
  free(held);
  tfx_psclient_destroy(pc);
  tfx_cluster_destroy(cl);
  tfx_client_destroy(c);
  tfx_model_destroy(m);
}

/* Pushes rows (global ids) of v with one value each row... v is a [N] vector: one float per row. */
static int push_rows(tfx_client *c, const int64_t *rows, size_t n, const float *g, tfx_err *err) {
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {N};
  tfx__tensor__init(&t);
  t.name = "v", t.shape = shape, t.n_shape = 1, t.nbytes = n * 4, t.rows = (int64_t *)rows, t.n_rows = n;
  tfx_payload pl = {g, n * 4, 1, NULL, NULL};
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.tensors = &tp, env.n_tensors = 1;
  int rc = tfx_client_call(c, &env, &pl, 1, &r, 20000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

static void case_sparse(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float v[N], g[2] = {1, 2};
  int64_t rows[2] = {3, 7}, bad[2] = {3, N}, unordered[2] = {7, 3};
  CHECK(init_ps(c, "async", "sgd", 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  CHECK(push_rows(c, rows, 2, g, &err) == 0, "row-sparse push: %s", err.msg);
  CHECK(push_rows(c, bad, 2, g, &err) == TFX_ESHAPE && strstr(err.msg, "row"), "row out of range: %s", err.msg);
  CHECK(push_rows(c, unordered, 2, g, &err) == TFX_ESHAPE, "unordered rows accepted");
  CHECK(pull(c, 0, 0, v, NULL, 5000, &err) == 0, "pull: %s", err.msg);
  for (int i = 0; i < N; i++) {
    float want = i == 3 ? -1.0f : i == 7 ? -2.0f : 0.0f;
    CHECK(v[i] == want, "v[%d] = %g, want %g (only the pushed rows may change)", i, v[i], want);
  }
  printf("ok: row-sparse push updates only the listed rows; out-of-range and unordered rows rejected\n");
  tfx_client_destroy(c);
}

/* Asks the ps to write its shard for `step` into run_dir/checkpoints/ckpt-TAG (TAG: this write's own number, zero
 * padded as the master names them); shard gets the file's path. */
static void write_ckpt(tfx_client *c, int64_t step, int tag, char *shard, size_t n) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/checkpoints/ckpt-%012d", run_dir, tag);
  tfx_envelope env;
  tfx_inmsg r;
  tfx_err err;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_CHECKPOINT);
  env.step = step, env.path = dir;
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 10000, &err) == 0, "checkpoint: %s", err.msg);
  tfx_inmsg_fini(&r);
  snprintf(shard, n, "%s/ps-0.shard", dir);
}

/* Pushes g as worker 0 at `step`, then pulls v into out. */
static void push_then_pull(tfx_client *c, int64_t step, const float *g, float *out) {
  tfx_err err;
  CHECK(push(c, 0, step, g, "v", N, NULL, &err) == 0, "push: %s", err.msg);
  CHECK(pull(c, 0, 0, out, NULL, 5000, &err) == 0, "pull: %s", err.msg);
}

/* The Adam moments come back with the values: after a restore, the next push gives bit for bit what it gives on
 * the ps that wrote the checkpoint (zeroed moments would give other values). */
static void checkpoint_slots(tfx_client *c, const char *shard, const float *v) {
  tfx_err err;
  float g2[N], first[N], second[N];
  int64_t version;
  for (int i = 0; i < N; i++) {
    g2[i] = cosf((float)i);
  }
  push_then_pull(c, 3, g2, first);
  CHECK(init_ps(c, "async", "adam", 1, 0, 0, shard, &err) == 0, "restore: %s", err.msg);
  CHECK(pull(c, 0, 0, second, &version, 5000, &err) == 0 && version == 3, "pull after restore: version %lld",
        (long long)version);
  CHECK(memcmp(v, second, sizeof second) == 0, "restored values differ");
  push_then_pull(c, 3, g2, second);
  for (int i = 0; i < N; i++) {
    CHECK(first[i] == second[i], "adam push after restore: v[%d] = %.9g, on the writer %.9g (moments not restored)", i,
          second[i], first[i]);
  }
}

/* A shard without the optimizer's slots (written under SGD) restores under Adam with a warning naming each
 * missing slot, and the moments start at zero: the next push equals Adam's first update from the restored
 * values at the restored step. */
static void checkpoint_no_slots(tfx_client *c, const float *g) {
  tfx_err err;
  char shard[400];
  float w[N], m[N] = {0}, s2[N] = {0}, v[N];
  float *slots[2] = {m, s2};
  CHECK(init_ps(c, "async", "sgd", 1, 0, 0, NULL, &err) == 0, "init sgd: %s", err.msg);
  push_then_pull(c, 0, g, w);
  write_ckpt(c, 1, 101, shard, sizeof shard);
  CHECK(init_ps(c, "async", "adam", 1, 0, 0, shard, &err) == 0, "restore an sgd shard under adam: %s", err.msg);
  CHECK(ps_log_has("PS-RESTORE-NO-SLOT") && ps_log_has("'v@m'") && ps_log_has("'v@v'"),
        "no PS-RESTORE-NO-SLOT warning naming v@m and v@v");
  tfx_config cfg;
  tfx_config_init(&cfg);
  cfg.optimizer = TFX_OPT_ADAM, cfg.learning_rate = 0.01;
  tfx_optim opt;
  tfx_optim_init(&opt, &cfg);
  tfx_optim_apply(&opt, 1, w, g, 1.0f, slots, N);
  push_then_pull(c, 1, g, v);
  for (int i = 0; i < N; i++) {
    CHECK(v[i] == w[i], "adam from zero moments after an sgd shard: v[%d] = %.9g, want %.9g", i, v[i], w[i]);
  }
}

/* A checkpoint directory outside the ps's run (an absolute path elsewhere, a way out with "..", a name that is not
 * ckpt-DIGITS) is refused with TFX_EINVAL and nothing is made there. */
static void refuse_foreign_paths(tfx_client *c) {
  char outside[400], up[400], odd[400];
  snprintf(outside, sizeof outside, "%s-elsewhere/checkpoints/ckpt-000000000007", run_dir);
  snprintf(up, sizeof up, "%s/checkpoints/../../ckpt-000000000007", run_dir);
  snprintf(odd, sizeof odd, "%s/checkpoints/model", run_dir);
  const char *bad[] = {outside, up, odd, "/tmp/ckpt-000000000007"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tfx_envelope env;
    tfx_inmsg r;
    tfx_err err;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_CHECKPOINT);
    env.step = 3, env.path = (char *)bad[i];
    int rc = tfx_client_call(c, &env, NULL, 0, &r, 10000, &err);
    tfx_inmsg_fini(&r);
    CHECK(rc == TFX_EINVAL && strstr(err.msg, "not a checkpoint directory of this ps's run"), "path %s: code %d (%s)",
          bad[i], rc, err.msg);
    struct stat st;
    CHECK(stat(bad[i], &st) != 0, "a refused checkpoint path %s was made", bad[i]);
  }
  char elsewhere[400];
  snprintf(elsewhere, sizeof elsewhere, "%s-elsewhere", run_dir);
  struct stat st;
  CHECK(stat(elsewhere, &st) != 0, "a refused checkpoint made %s", elsewhere);
}

static void case_checkpoint(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], v[N];
  char shard[400];
  for (int i = 0; i < N; i++) {
    g[i] = (float)i;
  }
  CHECK(init_ps(c, "async", "adam", 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  for (int s = 0; s < 3; s++) {
    push(c, 0, s, g, "v", N, NULL, &err);
  }
  CHECK(pull(c, 0, 0, v, NULL, 5000, &err) == 0, "pull: %s", err.msg);
  write_ckpt(c, 3, 103, shard, sizeof shard);
  refuse_foreign_paths(c);
  checkpoint_slots(c, shard, v);
  checkpoint_no_slots(c, g);
  FILE *f = fopen(shard, "r+b");
  fseek(f, 200, SEEK_SET), fputc(0x5a, f), fclose(f);
  CHECK(init_ps(c, "async", "adam", 1, 0, 0, shard, &err) == TFX_ECORRUPT && strstr(err.msg, "ps-0.shard"),
        "bit flip: %s", err.msg);
  CHECK(truncate(shard, 100) == 0, "truncate");
  CHECK(init_ps(c, "async", "adam", 1, 0, 0, shard, &err) == TFX_ECORRUPT && strstr(err.msg, "file has"),
        "truncated: %s", err.msg);
  printf(
      "ok: shard checkpoint round trip (values, Adam moments: the next push equals the writer's bit for bit, "
      "version); paths outside the ps's run refused; a shard without slots restores with PS-RESTORE-NO-SLOT and zero "
      "moments; bit flip and "
      "truncation refused\n");
  tfx_client_destroy(c);
}

/* Restores "v" from `shard` into the plan shape[rank]: must be refused naming v, the plan's shape and the
 * shard's, and leave the running values (`held`, version 1) unchanged. */
static void refuse_shape(tfx_client *c, const char *shard, const int64_t *shape, int rank, const char *want,
                         const float *held) {
  tfx_err err;
  float v[N];
  int64_t version;
  const char *json = "{\"training\": {\"mode\": \"async\"}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}";
  tfx_err_clear(&err);
  int rc = init_shaped(c, json, shape, rank, 1, shard, &err);
  CHECK(rc == TFX_ESHAPE && strstr(err.msg, "'v'") && strstr(err.msg, want) && strstr(err.msg, "[40,25] rows 0..40"),
        "restore into %s: code %d, '%s' (want ESHAPE naming 'v', %s and the shard's [40,25] rows 0..40)", want, rc,
        err.msg, want);
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 1, "pull after a refused restore: version %lld",
        (long long)version);
  CHECK(memcmp(v, held, sizeof v) == 0, "a refused restore changed the values");
}

/* A shard written for v [40,25] restored into a plan of [25,40] or [1000] (same element count, same first row)
 * is refused, naming the variable, the expected slice and the one found; the running state is unchanged. */
static void case_restore_shape(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], held[N];
  char shard[400];
  int64_t plan[2] = {40, 25}, transposed[2] = {25, 40}, flat[1] = {N};
  const char *json = "{\"training\": {\"mode\": \"async\"}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}";
  for (int i = 0; i < N; i++) {
    g[i] = (float)i;
  }
  CHECK(init_shaped(c, json, plan, 2, 1, NULL, &err) == 0, "init [40,25]: %s", err.msg);
  push_then_pull(c, 0, g, held);
  write_ckpt(c, 1, 201, shard, sizeof shard);
  refuse_shape(c, shard, transposed, 2, "expects [25,40] rows 0..25", held);
  refuse_shape(c, shard, flat, 1, "expects [1000] rows 0..1000", held);
  CHECK(init_shaped(c, json, plan, 2, 1, shard, &err) == 0, "restore into the same plan: %s", err.msg);
  printf(
      "ok: a [40,25] shard restored into [25,40] or [1000] is refused naming v and both shapes; nothing "
      "changed; the same plan restores\n");
  tfx_client_destroy(c);
}

/* nan_policy = skip on the one-pass path: a 400 KB shard (>= the ps's 256 KiB PS_FUSE_MIN) under async SGD is
 * checked for NaN/Inf in the same sweep that computes the new values into the received frame. A push and a
 * push-pull with a NaN in the last element (the frame is overwritten before it is found) both succeed, the
 * push-pull's reply carries the current values; the shard and the version are unchanged, counted as skipped only;
 * the next good push applies as usual. */
static void case_nan_skip_fused(void) {
  enum { BIG = 100000 };
  tfx_client *c = connect_ps();
  tfx_err err;
  const char *vars[1] = {"big"};
  int64_t counts[1] = {BIG};
  float *g = malloc(BIG * 4), *want = malloc(BIG * 4);
  const float *data[1] = {g};
  tfx_inmsg r;
  init_plan(c,
            "{\"training\": {\"mode\": \"async\", \"nan_policy\": \"skip\"},"
            " \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}",
            vars, counts, NULL, 1, 1);
  for (int i = 0; i < BIG; i++) {
    g[i] = 1, want[i] = -1;
  }
  push_all(c, 0, 0, vars, counts, data, 1);
  g[BIG - 1] = NAN;
  push_all(c, 0, 1, vars, counts, data, 1);
  CHECK(push_many(c, 0, 1, 1, -1, vars, counts, data, 1, &r, &err) == 0, "skip: a NaN push-pull got %s", err.msg);
  expect_names(&r, "skipped push-pull", "big", 1), expect_values(&r, "big", want, BIG), tfx_inmsg_fini(&r);
  pull_since(c, -1, &r), expect_names(&r, "pull after skips", "big", 1), expect_values(&r, "big", want, BIG);
  tfx_inmsg_fini(&r);
  const char *names[] = {"nan_skipped", "nan_rejected", "rejected", "pushes_applied", "version"};
  double stats[] = {2, 0, 0, 1, 1};
  expect_stats(c, "one-pass skips", names, stats, 5);
  g[BIG - 1] = 1;
  push_all(c, 0, 1, vars, counts, data, 1);
  for (int i = 0; i < BIG; i++) {
    want[i] = -2;
  }
  pull_since(c, -1, &r), expect_names(&r, "pull after a good push", "big", 2);
  expect_values(&r, "big", want, BIG), tfx_inmsg_fini(&r);
  free(g), free(want);
  printf(
      "ok: nan_policy skip on the one-pass SGD path (400 KB shard): a NaN push and push-pull succeed, the reply "
      "carries the current values, nothing changes, counted as skipped only; the next push applies\n");
  tfx_client_destroy(c);
}

/* A checkpoint whose v is right but whose Adam slot v@m holds another shape of the same size ([40,25] for v
 * [1000]) is refused naming v@m and both shapes; the ps keeps its state. */
static void case_restore_slot_shape(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float values[N], held[N], v[N];
  int64_t version;
  char path[400];
  snprintf(path, sizeof path, "%s/slot-shape.shard", run_dir);
  for (int i = 0; i < N; i++) {
    values[i] = (float)i;
  }
  tfx_ckpt_entry e[3] = {{.name = "v", .rank = 1, .dims = {N}, .row_end = N, .count = N, .data = values},
                         {.name = "v@m", .rank = 2, .dims = {40, 25}, .row_end = 40, .count = N, .data = values},
                         {.name = "v@v", .rank = 1, .dims = {N}, .row_end = N, .count = N, .data = values}};
  uint32_t crc;
  uint64_t bytes;
  CHECK(tfx_ckpt_write(path, 5, e, 3, &crc, &bytes, &err) == 0, "write %s: %s", path, err.msg);
  CHECK(init_ps(c, "async", "adam", 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  fill(v, 1);
  push_then_pull(c, 0, v, held);
  int rc = init_ps(c, "async", "adam", 1, 0, 0, path, &err);
  CHECK(rc == TFX_ESHAPE && strstr(err.msg, "'v@m'") && strstr(err.msg, "expects [1000] rows 0..1000") &&
            strstr(err.msg, "[40,25] rows 0..40"),
        "a slot of another shape: code %d, '%s' (want ESHAPE naming 'v@m' and both shapes)", rc, err.msg);
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 1 && !memcmp(v, held, sizeof v),
        "a refused restore changed the ps (version %lld)", (long long)version);
  printf(
      "ok: a checkpoint whose slot v@m has another shape ([40,25] for [1000]) is refused naming the slot; the ps "
      "keeps its state\n");
  tfx_client_destroy(c);
}

/* One large shard (4.4 MB) through the ps's large-tensor paths: optimizer `opt` with `threads` update threads
 * (2: chunks shared with the helper thread; SGD: the one-pass update into the gradient frame). The result
 * equals the single-process rule bit for bit over 3 steps, and a NaN in the last block is rejected without
 * changing anything. */
static void split_case(const char *opt_name, int threads) {
  enum { BIG = 1100000 }; /* above the ps's one-pass (4 MiB) and two-thread (1 MiB) thresholds */
  tfx_client *c = connect_ps();
  tfx_err err;
  char json[256];
  snprintf(json, sizeof json,
           "{\"training\": {\"mode\": \"async\", \"ps_apply_threads\": %d},"
           " \"optimizer\": {\"name\": \"%s\", \"learning_rate\": 0.01}}",
           threads, opt_name);
  Tfx__Shard sh, *shp = &sh;
  int64_t shape[1] = {BIG};
  tfx__shard__init(&sh);
  sh.key = sh.var = "big", sh.shape = shape, sh.n_shape = 1, sh.row_end = BIG, sh.trainable = 1, sh.init = "zeros";
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = json, env.shards = &shp, env.n_shards = 1, env.init = init_of(1, 0);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 20000, &err) == 0, "init: %s", err.msg);
  tfx_inmsg_fini(&r);
  tfx_config cfg;
  tfx_config_init(&cfg);
  set_optimizer(&cfg, opt_name);
  cfg.learning_rate = 0.01;
  tfx_optim opt;
  tfx_optim_init(&opt, &cfg);
  float *w = calloc(BIG, 4), *m = calloc(BIG, 4), *s2 = calloc(BIG, 4), *g = malloc(BIG * 4);
  float *slots[2] = {m, s2};
  for (int step = 0; step < 3; step++) {
    for (int i = 0; i < BIG; i++) {
      g[i] = sinf((float)(i + step));
    }
    CHECK(push(c, 0, step, g, "big", BIG, NULL, &err) == 0, "push: %s", err.msg);
    tfx_optim_apply(&opt, step, w, g, 1.0f, slots, BIG);
  }
  g[BIG - 2] = NAN;
  CHECK(push(c, 0, 3, g, "big", BIG, NULL, &err) == TFX_EINVAL && strstr(err.msg, "'big'"), "NaN: %s", err.msg);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 10000, &err) == 0, "pull: %s", err.msg);
  size_t size = 0;
  const float *v = tfx_inmsg_part(&r, 0, &size);
  CHECK(v && size == BIG * 4 && r.env->step == 3, "pull: %zu bytes at version %lld", size, (long long)r.env->step);
  for (int i = 0; i < BIG; i++) {
    CHECK(v[i] == w[i], "%s, %d thread(s): ps %g != single-process %g at %d", opt_name, threads, v[i], w[i], i);
  }
  tfx_inmsg_fini(&r);
  free(w), free(m), free(s2), free(g);
  tfx_client_destroy(c);
}

/* Two 4.4 MB shards on the one-pass path, pushed in one message with a NaN in the second: rejected whole, the
 * first shard unchanged too. */
static void split_two(void) {
  enum { BIG = 1100000 };
  tfx_client *c = connect_ps();
  tfx_err err;
  const char *json = "{\"training\": {\"mode\": \"async\"}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}";
  Tfx__Shard sh[2], *shp[2] = {&sh[0], &sh[1]};
  Tfx__Tensor t[2], *tp[2] = {&t[0], &t[1]};
  int64_t shape[1] = {BIG};
  const char *names[2] = {"a", "b"};
  float *g = malloc(BIG * 4), *g2 = malloc(BIG * 4);
  for (int k = 0; k < 2; k++) {
    tfx__shard__init(&sh[k]);
    sh[k].key = sh[k].var = (char *)names[k], sh[k].shape = shape, sh[k].n_shape = 1, sh[k].row_end = BIG;
    sh[k].trainable = 1, sh[k].init = "zeros";
    tfx__tensor__init(&t[k]);
    t[k].name = (char *)names[k], t[k].shape = shape, t[k].n_shape = 1, t[k].nbytes = BIG * 4;
  }
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = (char *)json, env.shards = shp, env.n_shards = 2, env.init = init_of(1, 0);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 20000, &err) == 0, "init: %s", err.msg);
  tfx_inmsg_fini(&r);
  for (int i = 0; i < BIG; i++) {
    g[i] = 1, g2[i] = 1;
  }
  g2[BIG / 2] = INFINITY;
  tfx_payload pl[2] = {{g, BIG * 4, 0, NULL, NULL}, {g2, BIG * 4, 0, NULL, NULL}};
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.tensors = tp, env.n_tensors = 2;
  CHECK(tfx_client_call(c, &env, pl, 2, &r, 20000, &err) == TFX_EINVAL && strstr(err.msg, "'b'"), "Inf in b: %s",
        err.msg);
  tfx_inmsg_fini(&r);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 10000, &err) == 0 && r.n_parts == 2 && r.env->step == 0, "pull: %s",
        err.msg);
  for (int k = 0; k < 2; k++) {
    size_t size = 0;
    const float *v = tfx_inmsg_part(&r, k, &size);
    for (int i = 0; i < BIG; i++) {
      CHECK(v[i] == 0.0f, "rejected push changed '%s'[%d] to %g", r.env->tensors[k]->name, i, v[i]);
    }
  }
  tfx_inmsg_fini(&r);
  free(g), free(g2);
  tfx_client_destroy(c);
}

static void case_split(void) {
  split_case("adam", 2);
  split_case("sgd", 2);
  split_case("sgd", 1);
  split_two();
  printf(
      "ok: a 4.4 MB shard (adam on two threads; sgd in one pass on one and two threads) equals the "
      "single-process rule bit for bit; a NaN in the last block, or an Inf in the second of two tensors, rejected "
      "and nothing changed\n");
}

/* Sends g's elements [off, off + n) as part `part` of `parts` of one push-pull by worker w (a new request when
 * part is 0, else under the same request id). */
static int push_part(tfx_client *c, int w, uint32_t part, uint32_t parts, const float *g, size_t off, size_t n,
                     tfx_err *err) {
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {(int64_t)n};
  tfx__tensor__init(&t);
  t.name = "v", t.shape = shape, t.n_shape = 1, t.nbytes = n * 4, t.offset = off;
  tfx_payload pl = {g + off, n * 4, 1, NULL, NULL};
  tfx_envelope env;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, w);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.tensors = &tp, env.n_tensors = 1, env.flag = 1, env.part = part, env.parts = parts;
  return part ? tfx_client_send_part(c, &env, &pl, 1, err) : tfx_client_send(c, &env, &pl, 1, err);
}

/* Receives the reply to one part; it must carry v's range [off, off + n) (copied to out + off). */
static int recv_part(tfx_client *c, float *out, size_t off, size_t n, tfx_err *err) {
  tfx_inmsg r;
  int rc = tfx_client_recv(c, &r, 10000, err);
  size_t size = 0;
  const void *data = rc ? NULL : tfx_inmsg_part(&r, 0, &size);
  if (!rc && (r.env->n_tensors != 1 || strcmp(r.env->tensors[0]->name, "v") || r.env->tensors[0]->offset != off ||
              size != n * 4)) {
    rc = tfx_err_set(err, TFX_EPROTO, "part reply: %zu tensors, offset %llu, %zu bytes; want v at %zu, %zu bytes",
                     r.env->n_tensors, r.env->n_tensors ? (unsigned long long)r.env->tensors[0]->offset : 0ULL, size,
                     off, n * 4);
  }
  if (!rc) {
    memcpy(out + off, data, size);
  }
  tfx_inmsg_fini(&r);
  return rc;
}

/* One push-pull of g in parts of `chunk` values, all parts sent before any reply is read. */
static int push_pull_parts(tfx_client *c, int w, const float *g, size_t chunk, float *out, tfx_err *err) {
  uint32_t parts = (uint32_t)((N + chunk - 1) / chunk);
  int rc = 0;
  for (uint32_t j = 0; j < parts && !rc; j++) {
    rc = push_part(c, w, j, parts, g, j * chunk, j + 1 < parts ? chunk : N - j * chunk, err);
  }
  for (uint32_t j = 0; j < parts && !rc; j++) {
    rc = recv_part(c, out, j * chunk, j + 1 < parts ? chunk : N - j * chunk, err);
  }
  return rc;
}

static void case_parts(void) {
  enum { PUSHERS = 8, PUSHES = 20 };
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], v[N], pulled[N];
  int64_t version;
  for (int i = 0; i < N; i++) {
    g[i] = (float)(i % 7 + 1);
  }
  CHECK(init_ps(c, "async", "sgd", PUSHERS, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  CHECK(push_pull_parts(c, 0, g, 400, v, &err) == 0, "push-pull in 3 parts: %s", err.msg);
  CHECK(pull(c, 0, 0, pulled, &version, 5000, &err) == 0 && version == 1,
        "version %lld after one push in parts, want 1 (%s)", (long long)version, err.msg);
  for (int i = 0; i < N; i++) {
    CHECK(v[i] == -g[i] && pulled[i] == -g[i], "v[%d]: reply %g, pull %g, want %g", i, v[i], pulled[i], -g[i]);
  }
  CHECK(init_ps(c, "async", "sgd", PUSHERS, 0, 0, NULL, &err) == 0, "re-init: %s", err.msg);
  float want = -(float)(PUSHERS * (PUSHERS + 1) / 2 * PUSHES);
  version = pushers_exact_sum(c, PUSHERS, PUSHES, 250);
  printf(
      "ok: a push-pull in 3 parts answers each range updated and counts one version; %d processes x %d "
      "pushes in 4 parts each: exact sum %g, version %lld\n",
      PUSHERS, PUSHES, want, (long long)version);
  tfx_client_destroy(c);
}

/* A part that does not fit, or of a push that is not in parts, is refused naming the variable; nothing changes. */
static void case_parts_reject(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N + 100], before[N], after[N]; /* + 100: the range sent past the end is real memory here */
  int64_t v0, v1;
  fill(g, 1), fill(g + 100, 1);
  CHECK(init_ps(c, "async", "sgd", 1, 0, 0, NULL, &err) == 0, "init: %s", err.msg);
  CHECK(pull(c, 0, 0, before, &v0, 5000, &err) == 0, "pull: %s", err.msg);
  tfx_inmsg r;
  CHECK(push_part(c, 0, 0, 2, g, 900, 100, &err) == 0 && tfx_client_recv(c, &r, 5000, &err) == 0,
        "a range that fits was refused: %s", err.msg);
  tfx_inmsg_fini(&r);
  memset(&r, 0, sizeof r);
  int rc = push_part(c, 0, 0, 2, g, 950, 100, &err);
  rc = rc ? rc : tfx_client_recv(c, &r, 5000, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_ESHAPE && strstr(err.msg, "'v'"), "a range past the end: code %d (%s)", rc, err.msg);
  rc = push_part(c, 0, 3, 2, g, 0, 10, &err);
  rc = rc ? rc : tfx_client_recv(c, &r, 5000, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EINVAL && strstr(err.msg, "part 3 of 2"), "part 3 of 2: code %d (%s)", rc, err.msg);
  CHECK(pull(c, 0, 0, after, &v1, 5000, &err) == 0, "pull: %s", err.msg);
  CHECK(v1 == v0, "a part alone moved the version from %lld to %lld", (long long)v0, (long long)v1);
  for (int i = 0; i < 900; i++) {
    CHECK(after[i] == before[i], "v[%d] changed by a refused part", i);
  }
  CHECK(init_ps(c, "sync", "sgd", 2, 0, 0, NULL, &err) == 0, "init sync: %s", err.msg);
  rc = push_part(c, 0, 0, 2, g, 0, 500, &err);
  rc = rc ? rc : tfx_client_recv(c, &r, 5000, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EINVAL && strstr(err.msg, "sync"), "sync mode took a push in parts: code %d (%s)", rc, err.msg);
  printf(
      "ok: parts past the end, numbered past their count, or sent to a sync ps are refused by name; the "
      "values and the version are unchanged\n");
  tfx_client_destroy(c);
}

/* ---- lazy tables (#17): a 2^40-id table held by rows, pushed and pulled by rows only ---- */

#define LAZY_IDS ((int64_t)1 << 40)
#define LAZY_DIM 4

/* INIT with one lazy table "emb" [2^40, 4] (normal:0.1, seed 5) holding ids % mod_n == mod_r, restored from the
 * checkpoint shard `restore` when given; returns the code (err gets the message). */
static int init_lazy_from(tfx_client *c, const char *mode, int workers, int64_t mod_n, int64_t mod_r,
                          const char *restore, tfx_err *err) {
  char json[256];
  snprintf(json, sizeof json,
           "{\"training\": {\"mode\": \"%s\", \"seed\": 5}, \"optimizer\": {\"name\": \"adagrad\", "
           "\"learning_rate\": 0.5}}",
           mode);
  int64_t shape[2] = {LAZY_IDS, LAZY_DIM};
  Tfx__Shard sh, *shp = &sh;
  tfx__shard__init(&sh);
  sh.key = sh.var = "emb", sh.shape = shape, sh.n_shape = 2, sh.row_end = LAZY_IDS, sh.trainable = 1;
  sh.init = "normal:0.1", sh.fan_in = LAZY_IDS, sh.fan_out = LAZY_DIM, sh.lazy = 1, sh.mod_n = mod_n;
  sh.mod_r = mod_r;
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = json, env.shards = &shp, env.n_shards = 1, env.init = init_of(workers, 0), env.path = (char *)(restore ? restore : "");
  int rc = tfx_client_call(c, &env, NULL, 0, &r, 20000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

/* INIT with one lazy table "emb" [2^40, 4] (normal:0.1, seed 5) of which this ps holds the odd ids. */
static void init_lazy(tfx_client *c, const char *mode, int workers) {
  char json[256];
  snprintf(json, sizeof json,
           "{\"training\": {\"mode\": \"%s\", \"seed\": 5}, \"optimizer\": {\"name\": \"sgd\", \"learning_rate\": 1}}",
           mode);
  int64_t shape[2] = {LAZY_IDS, LAZY_DIM};
  Tfx__Shard sh, *shp = &sh;
  tfx__shard__init(&sh);
  sh.key = sh.var = "emb", sh.shape = shape, sh.n_shape = 2, sh.row_end = LAZY_IDS, sh.trainable = 1;
  sh.init = "normal:0.1", sh.fan_in = LAZY_IDS, sh.fan_out = LAZY_DIM, sh.lazy = 1, sh.mod_n = 2, sh.mod_r = 1;
  tfx_envelope env;
  tfx_inmsg r;
  tfx_err err;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = json, env.shards = &shp, env.n_shards = 1, env.init = init_of(workers, 0);
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 20000, &err) == 0, "init lazy: %s", err.msg);
  tfx_inmsg_fini(&r);
}

/* Pulls rows ids of "emb" (version >= min) into out (n x LAZY_DIM); returns the code. */
static int pull_lazy_rows(tfx_client *c, int64_t min, const int64_t *ids, size_t n, float *out, tfx_err *err) {
  Tfx__Tensor want, *wp = &want;
  tfx__tensor__init(&want);
  want.name = "emb", want.rows = (int64_t *)ids, want.n_rows = n;
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.step = min, env.want = &wp, env.n_want = 1;
  int rc = tfx_client_call(c, &env, NULL, 0, &r, 20000, err);
  size_t size = 0;
  const void *data = rc ? NULL : tfx_inmsg_part(&r, 0, &size);
  if (!rc && (r.env->n_tensors != 1 || r.env->tensors[0]->n_rows != n || size != n * LAZY_DIM * 4)) {
    rc = tfx_err_set(err, TFX_EPROTO, "row reply: %zu tensors, %zu bytes for %zu rows", r.env->n_tensors, size, n);
  }
  if (!rc) {
    memcpy(out, data, size);
  }
  tfx_inmsg_fini(&r);
  return rc;
}

/* Pushes row gradients g (n x LAZY_DIM) for ids as worker w at step. */
static int push_lazy_rows(tfx_client *c, int w, int64_t step, const int64_t *ids, size_t n, const float *g,
                          tfx_err *err) {
  Tfx__Tensor t;
  int64_t shape[2] = {LAZY_IDS, LAZY_DIM};
  tfx__tensor__init(&t);
  t.name = "emb", t.shape = shape, t.n_shape = 2, t.rows = (int64_t *)ids, t.n_rows = n;
  t.nbytes = n * LAZY_DIM * 4;
  tfx_inmsg r;
  int rc = push_tensor(c, w, step, &t, g, t.nbytes, 0, &r, err);
  tfx_inmsg_fini(&r);
  return rc;
}

/* The row of id as a fresh table holds it: the initializer at element offset id * dim. */
static void initial_row(int64_t id, float *out) {
  tfx_init_fill("normal:0.1", "emb", 5, LAZY_IDS, LAZY_DIM, (size_t)id * LAZY_DIM, LAZY_DIM, out);
}

static void expect_rows(const float *got, const int64_t *ids, size_t n, const float *minus, const char *what) {
  for (size_t k = 0; k < n; k++) {
    float want[LAZY_DIM];
    initial_row(ids[k], want);
    for (int i = 0; i < LAZY_DIM; i++) {
      CHECK(got[k * LAZY_DIM + i] == want[i] - minus[k], "%s: row %lld [%d] = %.9g, want %.9g", what, (long long)ids[k],
            i, got[k * LAZY_DIM + i], want[i] - minus[k]);
    }
  }
}

/* Async: untouched rows read as their initial values (and are not stored: the ps's bytes stay small for a table
 * of 2^40 rows); pushed rows move by SGD, others stay bit for bit. */
static void case_lazy_async(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  init_lazy(c, "async", 1);
  int64_t ids[3] = {1, 77777777777LL, LAZY_IDS - 1}, pushed[2] = {1, 5}, after[3] = {1, 3, 5};
  float got[3 * LAZY_DIM], g[2 * LAZY_DIM], none[3] = {0, 0, 0}, moved[3] = {1, 0, 2};
  CHECK(pull_lazy_rows(c, 0, ids, 3, got, &err) == 0, "pull rows: %s", err.msg);
  expect_rows(got, ids, 3, none, "fresh rows");
  for (int i = 0; i < 2 * LAZY_DIM; i++) {
    g[i] = i < LAZY_DIM ? 1.0f : 2.0f;
  }
  CHECK(push_lazy_rows(c, 0, 0, pushed, 2, g, &err) == 0, "push rows: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, after, 3, got, &err) == 0, "pull rows: %s", err.msg);
  expect_rows(got, after, 3, moved, "after one push");
  double bytes = stat_of(c, "bytes");
  CHECK(bytes > 0 && bytes < 4e6, "a 2^40-row table with 2 rows holds %.0f bytes", bytes);
  printf(
      "ok: a lazy table of 2^40 rows reads untouched rows as their initial values, moves pushed rows only, "
      "and holds %.0f bytes\n",
      bytes);
  tfx_client_destroy(c);
}

/* Sync with 2 workers: the step's rows from both are summed (a row both pushed adds) and averaged once. */
static void case_lazy_sync(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  init_lazy(c, "sync", 2);
  int64_t a[2] = {1, 3}, b[2] = {3, 9}, all[3] = {1, 3, 9};
  float ga[2 * LAZY_DIM], gb[2 * LAZY_DIM], got[3 * LAZY_DIM], none[3] = {0, 0, 0}, avg[3] = {0.5f, 2.0f, 1.5f};
  for (int i = 0; i < 2 * LAZY_DIM; i++) {
    ga[i] = 1, gb[i] = 3;
  }
  CHECK(push_lazy_rows(c, 0, 0, a, 2, ga, &err) == 0, "worker 0: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, all, 3, got, &err) == 0, "pull rows: %s", err.msg);
  expect_rows(got, all, 3, none, "after one of two arrivals");
  CHECK(push_lazy_rows(c, 1, 0, b, 2, gb, &err) == 0, "worker 1: %s", err.msg);
  CHECK(pull_lazy_rows(c, 1, all, 3, got, &err) == 0, "pull rows at step 1: %s", err.msg);
  expect_rows(got, all, 3, avg, "the step's average");
  printf("ok: sync sums the step's rows from every worker (row 3 from both) and applies the average once\n");
  tfx_client_destroy(c);
}

/* Pushes and pulls of ids this ps does not hold, outside the table, duplicated, or of the wrong size are refused
 * naming the table and the id; nothing changes. */
static void case_lazy_reject(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  init_lazy(c, "async", 1);
  float g[3 * LAZY_DIM], got[2 * LAZY_DIM], none[2] = {0, 0};
  for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
    g[i] = 1;
  }
  struct {
    int64_t ids[2];
    size_t n;
    const char *msg;
  } bad[] = {{{2, 0}, 1, "id 2 belongs to another ps"},
             {{1, LAZY_IDS + 1}, 2, "is outside [0, 1099511627776)"},
             {{3, 3}, 2, "id 3 is duplicated"},
             {{5, 1}, 2, "comes after a larger one"}};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    int rc = push_lazy_rows(c, 0, 0, bad[k].ids, bad[k].n, g, &err);
    CHECK(rc == TFX_EINVAL && strstr(err.msg, "emb") && strstr(err.msg, bad[k].msg), "push %zu: code %d (%s)", k, rc,
          err.msg);
    rc = pull_lazy_rows(c, 0, bad[k].ids, bad[k].n, got, &err);
    CHECK(rc == TFX_EINVAL && strstr(err.msg, bad[k].msg), "pull %zu: code %d (%s)", k, rc, err.msg);
  }
  int64_t ok[2] = {1, 3};
  CHECK(pull_lazy_rows(c, 0, ok, 2, got, &err) == 0, "pull rows: %s", err.msg);
  expect_rows(got, ok, 2, none, "after refused pushes");
  printf(
      "ok: ids of another ps, outside the table, duplicated or descending are refused by table and id; the rows "
      "are unchanged\n");
  tfx_client_destroy(c);
}

/* Checkpoints the lazy table at step into RUN/checkpoints/ckpt-TAG and writes the manifest as the master would,
 * with the row file the ps reports; shard gets the shard's path. TAG keeps this driver's writes apart; the
 * manifest names TAG as its step, as a checkpoint directory's manifest must. */
static void checkpoint_lazy(tfx_client *c, int64_t step, int tag, char *shard, size_t n) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/checkpoints/ckpt-%012d", run_dir, tag);
  tfx_envelope env;
  tfx_inmsg r;
  tfx_err err;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_CHECKPOINT);
  env.step = step, env.path = dir;
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 10000, &err) == 0, "checkpoint: %s", err.msg);
  uint32_t crc[1] = {0}, rows_crc[1] = {0};
  uint64_t bytes[1] = {0}, rows_bytes[1] = {0};
  for (size_t i = 0; i < r.env->n_stats; i++) {
    const Tfx__KeyValue *kv = r.env->stats[i];
    if (!strcmp(kv->key, "crc32")) crc[0] = (uint32_t)kv->value;
    if (!strcmp(kv->key, "bytes")) bytes[0] = (uint64_t)kv->value;
    if (!strcmp(kv->key, "rows_crc32")) rows_crc[0] = (uint32_t)kv->value;
    if (!strcmp(kv->key, "rows_bytes")) rows_bytes[0] = (uint64_t)kv->value;
  }
  tfx_inmsg_fini(&r);
  CHECK(rows_bytes[0] > 0, "the ps reported no row file for its lazy table");
  CHECK(tfx_ckpt_write_manifest_rows(dir, tag, 1, crc, bytes, rows_crc, rows_bytes, &err) == 0, "manifest: %s",
        err.msg);
  int64_t got_step;
  int nps;
  CHECK(tfx_ckpt_verify(dir, &got_step, &nps, &err) == 0, "verify: %s", err.msg);
  snprintf(shard, n, "%s/ps-0.shard", dir);
}

/* Lazy rows survive a checkpoint bit for bit (values and Adagrad slots: the next push moves them as it would
 * have), also onto another partitioning (this ps then holding every id); a flipped bit in the row file is
 * refused by name and leaves the running table as it was. */
/* Sends g (N floats of v) as worker w's sync push of step 0 on c, without waiting for the reply. */
static void send_push(tfx_client *c, int w, const float *g) {
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {N};
  tfx__tensor__init(&t);
  t.name = "v", t.shape = shape, t.n_shape = 1, t.nbytes = N * 4;
  tfx_payload pl = {g, N * 4, 1, NULL, NULL};
  tfx_envelope env;
  tfx_err err;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, w);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = 0, env.tensors = &tp, env.n_tensors = 1;
  CHECK(tfx_client_send(c, &env, &pl, 1, &err) == 0, "send worker %d's push: %s", w, err.msg);
}

/* One sync step of 3 workers (SGD, learning rate 1) whose pushes reach the ps in `order`, 100 ms apart, with
 * training.deterministic `det`: v[0] after it, and the pushes the ps held in *held. */
static float ordered_step(int det, const int *order, double *held) {
  static const float g[3] = {1.0f, 1e8f, -1e8f}; /* (1 + 1e8) - 1e8 = 0, but (-1e8 + 1e8) + 1 = 1 */
  tfx_client *c[3];
  tfx_err err;
  char json[256];
  snprintf(json, sizeof json,
           "{\"training\": {\"mode\": \"sync\", \"deterministic\": %s}, \"optimizer\": {\"name\": \"sgd\", "
           "\"learning_rate\": 1}}", det ? "true" : "false");
  int64_t shape[1] = {N};
  for (int k = 0; k < 3; k++) {
    c[k] = connect_ps();
  }
  CHECK(init_shaped(c[0], json, shape, 1, 3, NULL, &err) == 0, "init: %s", err.msg);
  float gw[3][N], v[N];
  for (int k = 0; k < 3; k++) {
    fill(gw[order[k]], g[order[k]]);
    send_push(c[k], order[k], gw[order[k]]);
    usleep(100 * 1000);
  }
  for (int k = 0; k < 3; k++) {
    tfx_inmsg r;
    CHECK(tfx_client_recv(c[k], &r, 20000, &err) == 0, "worker %d's push: %s", order[k], err.msg);
    tfx_inmsg_fini(&r);
  }
  int64_t version = 0;
  CHECK(pull(c[0], 0, 1, v, &version, 5000, &err) == 0 && version == 1, "pull step 1: %s", err.msg);
  *held = stat_of(c[0], "held_in_order");
  for (int k = 0; k < 3; k++) {
    tfx_client_destroy(c[k]);
  }
  return v[0];
}

static void case_deterministic(void) {
  static const int in_order[3] = {0, 1, 2}, reversed[3] = {2, 1, 0}, middle[3] = {1, 2, 0};
  double held = -1;
  float off_a = ordered_step(0, in_order, &held), off_b = ordered_step(0, reversed, &held);
  CHECK(held == 0, "held %g pushes without training.deterministic", held);
  CHECK(memcmp(&off_a, &off_b, sizeof off_a), "the sums without the option agree (%g): the test could not fail",
        off_a);
  float on[3];
  const int *orders[3] = {in_order, reversed, middle};
  double want_held[3] = {0, 2, 4}; /* the counter adds up over the INITs */
  for (int k = 0; k < 3; k++) {
    on[k] = ordered_step(1, orders[k], &held);
    CHECK(held == want_held[k], "order %d: held %g pushes, want %g", k, held, want_held[k]);
    CHECK(!memcmp(&on[k], &off_a, sizeof on[k]), "order %d: v = %.9g, want %.9g (summed in worker order)", k, on[k],
          off_a);
  }
  printf("ok: training.deterministic sums a sync step in worker order: v = %g in every arrival order (without it "
         "%g and %g)\n", on[0], off_a, off_b);
}

/* The chief's STOP answers a sync push the ps holds for a step the other workers stopped short of (here held for
 * worker order, training.deterministic): TFX_EINTR naming the end of the run, so its worker stops with the others
 * instead of failing over to a backup that is stopping too; the ps then exits 0. */
static void case_stop_held(void) {
  tfx_client *w1 = connect_ps(), *chief = connect_ps();
  tfx_err err;
  int64_t shape[1] = {N};
  CHECK(init_shaped(chief,
                    "{\"training\": {\"mode\": \"sync\", \"deterministic\": true}, \"optimizer\": {\"name\": "
                    "\"sgd\", \"learning_rate\": 1}}",
                    shape, 1, 2, NULL, &err) == 0,
        "init: %s", err.msg);
  float g[N];
  fill(g, 1);
  send_push(w1, 1, g); /* held until worker 0's push, which never comes */
  for (int k = 0; k < 600 && stat_of(chief, "held_in_order") < 1; k++) {
    usleep(50000);
  }
  CHECK(stat_of(chief, "held_in_order") == 1, "worker 1's push was not held");
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STOP);
  CHECK(tfx_client_call(chief, &env, NULL, 0, &r, 5000, &err) == 0, "stop: %s", err.msg);
  tfx_inmsg_fini(&r);
  int rc = tfx_client_recv(w1, &r, 20000, &err);
  tfx_inmsg_fini(&r);
  CHECK(rc == TFX_EINTR && strstr(err.msg, "ended the run"), "the held push after STOP: code %d (%s)", rc,
        rc ? err.msg : "answered as applied");
  int status = -1;
  CHECK(waitpid(ps_pid, &status, 0) == ps_pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the ps did not exit 0 after STOP (status %d)", status);
  ps_pid = 0;
  printf("ok: STOP answers a held sync push with TFX_EINTR (%s) and the ps exits 0\n", err.msg);
  tfx_client_destroy(w1), tfx_client_destroy(chief);
}

/* Sends an acknowledged snapshot from a primary (MSG_REPLICATE, a snapshot, acked) of the values g at step 1 and
 * plan epoch `epoch`, the message that keeps an async backup; returns the ps's code. */
static int forwarded_snapshot(tfx_client *c, uint64_t epoch, const float *g, tfx_err *err) {
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {N};
  tfx__tensor__init(&t);
  t.name = "v", t.shape = shape, t.n_shape = 1, t.nbytes = N * 4;
  tfx_payload pl = {g, N * 4, 1, NULL, NULL};
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_set_sender(TFX__ROLE__ROLE_PS, 1);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT, how.acked = 1;
  env.replicate = &how, env.epoch = epoch, env.step = 1, env.tensors = &tp, env.n_tensors = 1;
  int rc = tfx_client_call(c, &env, &pl, 1, &r, 5000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

/* MSG_PROMOTE of the ps's own instance at plan epoch `epoch`; returns the ps's code. */
static int promote(tfx_client *c, uint64_t epoch, tfx_err *err) {
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_set_sender(TFX__ROLE__ROLE_MASTER, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PROMOTE);
  env.epoch = epoch;
  int rc = tfx_client_call(c, &env, NULL, 0, &r, 5000, err);
  tfx_inmsg_fini(&r);
  return rc;
}

/* A backup copy (INIT as_backup at plan epoch 5) takes a snapshot of its epoch, refuses and counts one
 * of an older epoch, a promotion of an older epoch, and any forward once promoted; a worker is refused until the
 * promotion. */
static void case_stale_epoch(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  float g[N], v[N];
  fill(g, 1);
  Tfx__Shard sh, *shp = &sh;
  int64_t shape[1] = {N};
  tfx__shard__init(&sh);
  sh.key = sh.var = "v", sh.shape = shape, sh.n_shape = 1, sh.row_end = N, sh.trainable = 1, sh.init = "zeros";
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_set_sender(TFX__ROLE__ROLE_MASTER, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  env.text = "{\"training\": {\"mode\": \"async\"}, \"cluster\": {\"replicas\": 1}, \"optimizer\": {\"name\": "
             "\"sgd\", \"learning_rate\": 1}}";
  env.shards = &shp, env.n_shards = 1, env.init = init_of(1, 1), env.epoch = 5, env.path = "";
  CHECK(tfx_client_call(c, &env, NULL, 0, &r, 20000, &err) == 0, "init as a backup: %s", err.msg);
  tfx_inmsg_fini(&r);
  CHECK(forwarded_snapshot(c, 3, g, &err) == TFX_ESTATE, "a snapshot of epoch 3 at epoch 5 was taken");
  CHECK(stat_of(c, "stale_epoch") == 1, "the stale snapshot was not counted");
  CHECK(forwarded_snapshot(c, 5, g, &err) == 0, "a snapshot of the backup's epoch: %s", err.msg);
  CHECK(push(c, 0, 0, g, "v", N, NULL, &err) == TFX_ESTATE, "a worker's push to an unpromoted backup was taken");
  CHECK(promote(c, 4, &err) == TFX_ESTATE && stat_of(c, "stale_epoch") == 2, "a promotion of epoch 4 was taken");
  CHECK(promote(c, 6, &err) == 0, "promote at epoch 6: %s", err.msg);
  CHECK(forwarded_snapshot(c, 6, g, &err) == TFX_ESTATE && stat_of(c, "stale_epoch") == 3,
        "a promoted copy took a forward");
  int64_t version = -1;
  CHECK(pull(c, 0, 0, v, &version, 5000, &err) == 0 && version == 1 && v[0] == 1.0f,
        "after the epoch's snapshot: version %lld, v = %g (want 1, 1)", (long long)version, v[0]);
  printf("ok: stale-epoch snapshots and promotions refused and counted (3), the epoch's snapshot taken\n");
  tfx_client_destroy(c);
}

static void case_lazy_checkpoint(void) {
  tfx_client *c = connect_ps();
  tfx_err err;
  CHECK(init_lazy_from(c, "async", 1, 2, 1, NULL, &err) == 0, "init: %s", err.msg);
  int64_t ids[3] = {1, 3, 77777777777LL}, later[4] = {1, 2, 3, 77777777777LL};
  float g[3 * LAZY_DIM], before[3 * LAZY_DIM], after[3 * LAZY_DIM], moved[3 * LAZY_DIM], again[3 * LAZY_DIM];
  for (int i = 0; i < 3 * LAZY_DIM; i++) {
    g[i] = 0.25f * (float)(i + 1);
  }
  CHECK(push_lazy_rows(c, 0, 0, ids, 3, g, &err) == 0, "push: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, ids, 3, before, &err) == 0, "pull: %s", err.msg);
  char shard[400];
  checkpoint_lazy(c, 1, 301, shard, sizeof shard);
  CHECK(push_lazy_rows(c, 0, 1, ids, 3, g, &err) == 0, "push after: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, ids, 3, moved, &err) == 0, "pull: %s", err.msg); /* the writer's next state */
  CHECK(init_lazy_from(c, "async", 1, 2, 1, shard, &err) == 0, "restore: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, ids, 3, after, &err) == 0, "pull restored: %s", err.msg);
  CHECK(memcmp(before, after, sizeof before) == 0, "restored rows differ from the checkpointed ones");
  CHECK(push_lazy_rows(c, 0, 1, ids, 3, g, &err) == 0, "push restored: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, ids, 3, again, &err) == 0, "pull: %s", err.msg);
  CHECK(memcmp(moved, again, sizeof moved) == 0, "the next push after a restore differs (Adagrad slots lost?)");
  /* Another partitioning: one ps holding every id restores the odd rows and reads the even ones as new. */
  float all[4 * LAZY_DIM], fresh[LAZY_DIM];
  CHECK(init_lazy_from(c, "async", 1, 1, 0, shard, &err) == 0, "restore onto mod 1: %s", err.msg);
  CHECK(pull_lazy_rows(c, 0, later, 4, all, &err) == 0, "pull: %s", err.msg);
  tfx_init_fill("normal:0.1", "emb", 5, LAZY_IDS, LAZY_DIM, 2 * LAZY_DIM, LAZY_DIM, fresh);
  CHECK(!memcmp(all, before, sizeof(float) * LAZY_DIM) && !memcmp(all + LAZY_DIM, fresh, sizeof fresh) &&
            !memcmp(all + 2 * LAZY_DIM, before + LAZY_DIM, sizeof(float) * 2 * LAZY_DIM),
        "rows restored onto another partitioning differ");
  /* A flipped bit: refused naming the row file; the running table keeps its rows. */
  char rows[420];
  snprintf(rows, sizeof rows, "%.*s/ps-0.rows", (int)(strrchr(shard, '/') - shard), shard);
  FILE *f = fopen(rows, "r+b");
  CHECK(f != NULL, "no row file %s", rows);
  fseek(f, 60, SEEK_SET), fputc(0x7f, f), fclose(f);
  int rc = init_lazy_from(c, "async", 1, 1, 0, shard, &err);
  CHECK(rc == TFX_ECORRUPT && strstr(err.msg, "ps-0.rows"), "a corrupt row file: code %d (%s)", rc, err.msg);
  CHECK(pull_lazy_rows(c, 0, later, 4, all, &err) == 0 && !memcmp(all, before, sizeof(float) * LAZY_DIM),
        "a refused restore changed the rows");
  printf(
      "ok: lazy rows and their Adagrad slots survive a checkpoint bit for bit (the next push matches the writer's), "
      "restore onto another partitioning, and a corrupt row file is refused with the table unchanged\n");
  tfx_client_destroy(c);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    return fprintf(stderr, "usage: %s TFX_NODE CASE\n", argv[0]), 2;
  }
  tfx_node = argv[1];
  snprintf(run_dir, sizeof run_dir, "/tmp/tfx-ps-driver.XXXXXX");
  if (!mkdtemp(run_dir)) {
    return 2;
  }
  tfx_log_set_level(TFX_LOG_WARN);
  snprintf(ps_log, sizeof ps_log, "%s/ps.log", run_dir);
  start_ps();
  const char *cs = argv[2];
  if (!strcmp(cs, "async-sum")) {
    case_async_sum();
  } else if (!strcmp(cs, "sync")) {
    case_sync();
  } else if (!strcmp(cs, "ssp")) {
    case_ssp();
  } else if (!strcmp(cs, "optim")) {
    case_optim();
  } else if (!strcmp(cs, "reject")) {
    case_reject();
  } else if (!strcmp(cs, "checkpoint")) {
    case_checkpoint();
  } else if (!strcmp(cs, "status")) {
    case_status();
  } else if (!strcmp(cs, "pulls")) {
    case_pulls();
  } else if (!strcmp(cs, "since")) {
    case_since();
  } else if (!strcmp(cs, "assign")) {
    case_assign();
  } else if (!strcmp(cs, "client-since")) {
    case_client_since();
  } else if (!strcmp(cs, "nan-skip-fused")) {
    case_nan_skip_fused();
  } else if (!strcmp(cs, "restore-slot-shape")) {
    case_restore_slot_shape();
  } else if (!strcmp(cs, "nan-policy")) {
    case_nan_policy();
  } else if (!strcmp(cs, "restore-shape")) {
    case_restore_shape();
  } else if (!strcmp(cs, "sparse")) {
    case_sparse();
  } else if (!strcmp(cs, "split")) {
    case_split();
  } else if (!strcmp(cs, "parts")) {
    case_parts();
  } else if (!strcmp(cs, "parts-reject")) {
    case_parts_reject();
  } else if (!strcmp(cs, "lazy-checkpoint")) {
    case_lazy_checkpoint();
  } else if (!strcmp(cs, "lazy-async")) {
    case_lazy_async();
  } else if (!strcmp(cs, "lazy-sync")) {
    case_lazy_sync();
  } else if (!strcmp(cs, "lazy-reject")) {
    case_lazy_reject();
  } else if (!strcmp(cs, "deterministic")) {
    case_deterministic();
  } else if (!strcmp(cs, "stale-epoch")) {
    case_stale_epoch();
  } else if (!strcmp(cs, "stop-held")) {
    case_stop_held();
  } else {
    CHECK(0, "unknown case %s", cs);
  }
  stop_ps();
  tfx_net_shutdown();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", run_dir);
  return system(cmd) == 0 ? 0 : 1;
}
