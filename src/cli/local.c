/* tfx-node local: a whole cluster as real processes on loopback, supervised until the master finishes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/pin.h"
#include "cli/serve.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/log.h"
#include "data/epochs.h"
#include "net/curve.h"
#include "net/keys.h"
#include "net/net.h"
#include "observe/metrics.h"
#include "store/ckpt.h"
#include "store/runconfig.h"
#include "store/runlock.h"
#include "train/labels.h"

#define RESTART_BUDGET 5
/* A process that ran this long before failing was not crash-looping: its budget and backoff start over (as a
 * Kubernetes pod's back-off resets after it runs well), so a long run survives any number of spaced faults. */
#define RESTART_STABLE_MS 10000
/* A failed master waits at least this long before its restart: when it had told its peers the run is over, they
 * are exiting meanwhile (slowly under a sanitizer or load), and then it is not restarted (peers_gone). */
#define MASTER_RESTART_MIN_MS 2000

typedef struct child {
  pid_t pid;
  tfx_role role;
  int index, status, exited, failed, restarts; /* restarts: in the current run of quick failures */
  int restarts_total;                          /* every restart, for tfx_restarts_total */
  int64_t restart_at;                          /* 0: not waiting to restart */
  int64_t started_at;                          /* when the current process was spawned */
  int cpu;                                     /* the CPU it is pinned to (cluster.local_pin_cpus), or -1 */
} child;

/* Picks n distinct free loopback ports (all held open while choosing, so they differ). */
static int free_ports(int n, int *ports, tfx_err *err) {
  int *fds = calloc((size_t)n, sizeof(int)), rc = TFX_OK;
  for (int i = 0; i < n && !rc; i++) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof a) ||
        getsockname(fds[i], (struct sockaddr *)&a, &len)) {
      rc = tfx_err_sys(err, TFX_ESYS, "choosing a free port");
    } else {
      ports[i] = ntohs(a.sin_port);
    }
  }
  for (int i = 0; i < n; i++) {
    if (fds[i] > 0) {
      close(fds[i]);
    }
  }
  free(fds);
  return rc;
}

/* A private directory for the cluster's Unix sockets: $XDG_RUNTIME_DIR/tfx-XXXXXX, else /tmp/tfx-XXXXXX, made by
 * mkdtemp (mode 0700, owned by this user: no other user can open a socket inside). Not under the run directory,
 * whose path may exceed a socket path's 107 bytes or sit on a file system without sockets. */
static int make_socket_dir(char *dir, size_t n, tfx_err *err) {
  const char *base = getenv("XDG_RUNTIME_DIR");
  if (!base || base[0] != '/' || access(base, W_OK) || strlen(base) > 60) {
    base = "/tmp";
  }
  snprintf(dir, n, "%s/tfx-XXXXXX", base);
  if (!mkdtemp(dir)) {
    return tfx_err_sys(err, TFX_ESYS, "making a socket directory under %s", base);
  }
  return TFX_OK;
}

/* Removes the cluster's sockets and their directory (only what make_socket_dir and the children made). */
static void remove_socket_dir(const char *dir, const tfx_cluster *c) {
  for (int r = 0; r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; i < tfx_cluster_count(c, (tfx_role)r); i++) {
      const char *a = tfx_cluster_address(c, (tfx_role)r, i);
      if (tfx_address_is_unix(a)) {
        unlink(a + strlen(TFX_UNIX_PREFIX));
      }
    }
  }
  if (rmdir(dir)) {
    tfx_log(TFX_LOG_WARN, "LOCAL-SOCKET-DIR", "%s is left behind: %s", dir, strerror(errno));
  }
}

/* The address of process i: unix:DIR/ROLE-INDEX when sock_dir is set, else 127.0.0.1:PORT. */
static void child_address(const char *sock_dir, tfx_role role, int index, int port, char *out, size_t n) {
  if (sock_dir) {
    snprintf(out, n, "%s%s/%s-%d", TFX_UNIX_PREFIX, sock_dir, tfx_role_name(role), index);
  } else {
    snprintf(out, n, "127.0.0.1:%d", port);
  }
}

static int build_cluster(int n_ps, int n_workers, const char *sock_dir, tfx_cluster **out, tfx_err *err) {
  int total = 1 + n_ps + n_workers, ports[600] = {0}, rc = TFX_OK;
  if (!sock_dir && (rc = free_ports(total, ports, err))) {
    return rc;
  }
  tfx_cluster *c = tfx_cluster_create();
  if (!c) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; i < total && !rc; i++) {
    tfx_role role = i == 0 ? TFX_ROLE_MASTER : i <= n_ps ? TFX_ROLE_PS : TFX_ROLE_WORKER;
    char addr[256];
    child_address(sock_dir, role, i == 0 ? 0 : i <= n_ps ? i - 1 : i - 1 - n_ps, ports[i], addr, sizeof addr);
    rc = tfx_cluster_add(c, role, addr, err);
  }
  if (rc) {
    tfx_cluster_destroy(c);
  } else {
    *out = c;
  }
  return rc;
}

static void exec_child(const tfx_node *n, const tfx_cluster *c, const child *ch, const char *self, const char *exp) {
  /* The cluster dies with its supervisor: when `tfx-node local` is killed with kill -9 (or by the OOM killer)
   * every child gets SIGKILL, so no orphan trains on or holds the run's lock (which it inherited). SIGTERM would
   * have the master attempt a final checkpoint with the ps stopping beside it, waiting out its request deadlines
   * (minutes) with the run directory locked; the last periodic checkpoint is kept either way. The flag survives
   * execv. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* A process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group) reaches the supervisor only,
   * which asks the master for a final checkpoint; a ps or worker signalled by hand passes it on to us. */
  setpgid(0, 0);
  tfx_local_pin_self(ch->cpu); /* its threads to come (ZeroMQ's, a checkpoint writer) inherit it */
  setenv(TFX_RUN_LOCK_HELD_ENV, "1", 1);
  if (ch->role != TFX_ROLE_MASTER) {
    char sup[24];
    snprintf(sup, sizeof sup, "%d", (int)getppid());
    setenv(TFX_SUPERVISOR_ENV, sup, 1);
  }
  char *tfc = tfx_cluster_to_json(c, ch->role, ch->index), log[1200];
  setenv("TF_CONFIG", tfc, 1);
  snprintf(log, sizeof log, "%s/logs/%s-%d.log", n->run_dir, tfx_role_name(ch->role), ch->index);
  int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    dup2(fd, STDERR_FILENO);
    if (ch->role != TFX_ROLE_MASTER) {
      dup2(fd, STDOUT_FILENO);
    }
    close(fd);
  }
  /* One machine: every socket and the HTTP page on loopback unless --bind says otherwise. */
  const char *host = n->bind_host[0] ? n->bind_host : "127.0.0.1";
  /* The run directory stays the last argument (before --fresh): tools find a run's processes by it. */
  char *argv[] = {"tfx-node",  "--bind",    (char *)host,       "--config",
                  (char *)exp, "--run-dir", (char *)n->run_dir, n->resume ? NULL : "--fresh",
                  NULL};
  execv(self, argv);
  fprintf(stderr, "exec %s: %s\n", self, strerror(errno));
  _exit(127);
}

static int spawn_all(const tfx_node *n, const tfx_cluster *c, child *kids, int total, const char *self, const char *exp,
                     tfx_err *err) {
  for (int i = 0; i < total; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      return tfx_err_sys(err, TFX_ESYS, "fork");
    }
    if (pid == 0) {
      exec_child(n, c, &kids[i], self, exp);
    }
    kids[i].pid = pid;
    kids[i].started_at = tfx_now_ms();
    tfx_log(TFX_LOG_INFO, "LOCAL-SPAWN", "%s %d: pid %d at %s", tfx_role_name(kids[i].role), kids[i].index, (int)pid,
            tfx_cluster_address(c, kids[i].role, kids[i].index));
    if (kids[i].cpu >= 0) { /* a line of its own: tools read the address to the end of LOCAL-SPAWN's */
      tfx_log(TFX_LOG_INFO, "LOCAL-PIN", "%s %d on CPU %d", tfx_role_name(kids[i].role), kids[i].index, kids[i].cpu);
    }
  }
  return TFX_OK;
}

static void signal_all(child *kids, int total, int sig) {
  for (int i = 0; i < total; i++) {
    if (kids[i].pid > 0 && !kids[i].exited) {
      kill(kids[i].pid, sig);
    }
  }
}

/* Reaps exited children, marking those that failed (a non-zero status, or a signal other than our SIGTERM). */
static void reap(child *kids, int total) {
  int status;
  pid_t pid;
  struct rusage ru;
  while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
    for (int i = 0; i < total; i++) {
      if (kids[i].pid != pid) {
        continue;
      }
      double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6; /* its threads' user + system time */
      tfx_log(TFX_LOG_INFO, "LOCAL-EXIT", "%s %d (pid %d) exited, peak RSS %ld MiB, CPU %.2f s",
              tfx_role_name(kids[i].role), kids[i].index, (int)pid, ru.ru_maxrss / 1024, cpu);
      kids[i].exited = 1;
      kids[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      kids[i].failed = kids[i].status && !(kids[i].role != TFX_ROLE_MASTER && kids[i].status == 128 + SIGTERM);
    }
  }
}

static int all_exited(const child *kids, int total) {
  for (int i = 0; i < total; i++) {
    if (!kids[i].exited) {
      return 0;
    }
  }
  return 1;
}

/* Reaps children until every one has exited or `ms` passed. */
static void await_exits(child *kids, int total, int ms) {
  for (int64_t end = tfx_now_ms() + ms; !all_exited(kids, total) && tfx_now_ms() < end;) {
    reap(kids, total);
    usleep(50000);
  }
}

/* Waits up to ms for every child, then kills what is left. */
static void drain(child *kids, int total, int ms) {
  await_exits(kids, total, ms);
  signal_all(kids, total, SIGKILL);
  while (!all_exited(kids, total) && waitpid(-1, NULL, 0) > 0) {
    reap(kids, total);
  }
  for (int i = 0; i < total; i++) {
    kids[i].exited = 1;
  }
}

typedef struct cluster_run {
  const tfx_node *n;
  const tfx_cluster *c;
  const char *self, *exp;
  child *kids;
  int total;
} cluster_run;

/* Writes RUN/logs/restarts.txt ("ROLE INDEX RESTARTS" per line), which the master's /metrics shows as
 * tfx_restarts_total; a failure to write it is only logged. */
static void write_restarts(const cluster_run *r) {
  char path[1100], *text = calloc((size_t)r->total, 48);
  if (!text) {
    return;
  }
  size_t len = 0;
  for (int i = 0; i < r->total; i++) {
    const child *k = &r->kids[i];
    len += (size_t)snprintf(text + len, 48, "%s %d %d\n", tfx_role_name(k->role), k->index, k->restarts_total);
  }
  snprintf(path, sizeof path, "%s/logs/restarts.txt", r->n->run_dir);
  tfx_err err;
  if (tfx_write_file(path, text, &err)) {
    tfx_log(TFX_LOG_WARN, "LOCAL-RESTARTS-FILE", "%s", err.msg);
  }
  free(text);
}

/* Whether every ps and worker has exited without failing (stopped by the master). */
static int peers_gone(const cluster_run *r) {
  for (int i = 1; i < r->total; i++) {
    if (!r->kids[i].exited || r->kids[i].failed) {
      return 0;
    }
  }
  return 1;
}

/* The last ERROR line of a child's log (its own words for why it failed), or "" when it has none. */
static void last_error(const tfx_node *n, const child *k, char *out, size_t size) {
  char path[1200], line[1024];
  snprintf(path, sizeof path, "%s/logs/%s-%d.log", n->run_dir, tfx_role_name(k->role), k->index);
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    const char *at = strstr(line, " ERROR ");
    if (at) {
      snprintf(out, size, "%s", at + 7);
      out[strcspn(out, "\n")] = '\0';
    }
  }
  if (f) {
    fclose(f);
  }
}

/* The supervisor's error for a child that will not be restarted: its own error line, and exit 2 when it exited 2
 * (bad input), 3 when it exited 3 (the run aborted on purpose: thres_loss), else TFX_EPEER. */
static int child_failed(const cluster_run *r, const child *k, tfx_err *err) {
  char why[600];
  last_error(r->n, k, why, sizeof why);
  int code = k->status == 2 ? TFX_ECONFIG : k->status == 3 ? TFX_ELOSS : TFX_EPEER;
  return tfx_err_set(err, code, "%s %d exited with status %d%s%s%s (log: %s/logs/%s-%d.log)", tfx_role_name(k->role),
                     k->index, k->status, k->restarts ? " after restarts" : "", why[0] ? ": " : "", why, r->n->run_dir,
                     tfx_role_name(k->role), k->index);
}

/* Starts child k again with the same role and address. */
static void respawn(cluster_run *r, child *k) {
  pid_t pid = fork();
  if (pid == 0) {
    exec_child(r->n, r->c, k, r->self, r->exp);
  }
  if (pid > 0) {
    k->pid = pid;
    k->exited = k->failed = 0;
    k->restart_at = 0;
    k->restarts++;
    k->started_at = tfx_now_ms();
    k->restarts_total++;
    write_restarts(r);
    tfx_log(TFX_LOG_INFO, "LOCAL-RESPAWN", "%s %d: pid %d (restart %d of %d)", tfx_role_name(k->role), k->index,
            (int)pid, k->restarts, RESTART_BUDGET);
  }
}

/* A ps that a failed master had stopped (it exited 0 on the master's STOP) is started again with the restarted
 * master: the new master resumes from the newest checkpoint and needs every ps to answer, if only to evaluate it. */
static void respawn_stopped_ps(cluster_run *r) {
  for (int i = 1; i < r->total; i++) {
    child *k = &r->kids[i];
    if (k->role == TFX_ROLE_PS && k->exited && !k->failed) {
      tfx_log(TFX_LOG_WARN, "LOCAL-RESTART-STOPPED", "ps %d had stopped on the failed master's STOP: starting it again",
              k->index);
      respawn(r, k);
    }
  }
}

/* A failed process is restarted with the same role and address after a backoff (0.5 s doubling), at most
 * RESTART_BUDGET times in a row of quick failures (each within RESTART_STABLE_MS of its start); returns the index
 * of one whose budget is spent, or -1. */
static int handle_failures(cluster_run *r) {
  for (int i = 0; i < r->total; i++) {
    child *k = &r->kids[i];
    if (k->failed && !k->restart_at) {
      if (tfx_now_ms() - k->started_at >= RESTART_STABLE_MS) {
        k->restarts = 0;
      }
      /* Bad input (2) or an aborted run (3) would only fail again, and a master whose peers have all stopped (it
       * told them the run is over, then failed, say on a full disk) has nobody left to coordinate: no restart. */
      if (k->restarts >= RESTART_BUDGET || k->status == 2 || k->status == 3 ||
          (k->role == TFX_ROLE_MASTER && peers_gone(r))) {
        return i;
      }
      int64_t backoff = 500LL << k->restarts;
      if (k->role == TFX_ROLE_MASTER && backoff < MASTER_RESTART_MIN_MS) {
        backoff = MASTER_RESTART_MIN_MS;
      }
      k->restart_at = tfx_now_ms() + backoff;
      tfx_log(TFX_LOG_WARN, "LOCAL-RESTART",
              "%s %d exited with status %d (see %s/logs/%s-%d.log); restarting (%d of %d)", tfx_role_name(k->role),
              k->index, k->status, r->n->run_dir, tfx_role_name(k->role), k->index, k->restarts + 1, RESTART_BUDGET);
    }
    if (k->restart_at && tfx_now_ms() >= k->restart_at && k->role == TFX_ROLE_MASTER && peers_gone(r)) {
      tfx_log(TFX_LOG_WARN, "LOCAL-NO-RESTART", "master %d not restarted after all: its peers finished during the backoff",
              k->index);
      return i; /* the run was over */
    }
    if (k->restart_at && tfx_now_ms() >= k->restart_at) {
      respawn(r, k);
      if (k->role == TFX_ROLE_MASTER) {
        respawn_stopped_ps(r);
      }
    }
  }
  return -1;
}

/* How long after a stop signal the supervisor waits for the master's graceful stop (its final checkpoint) before it
 * kills every process: a master waits at most MASTER_STOP_GRACE_MS for a ps that does not answer. */
#define LOCAL_STOP_GRACE_MS 17000

static int supervise(cluster_run *r, tfx_err *err) {
  int forwarded = 0;
  int64_t stop_at = 0;
  child *kids = r->kids;
  for (;;) {
    reap(kids, r->total);
    int spent = forwarded ? -1 : handle_failures(r);
    if (spent >= 0) {
      signal_all(kids, r->total, SIGTERM);
      drain(kids, r->total, 5000);
      return child_failed(r, &kids[spent], err);
    }
    if (kids[0].exited && !kids[0].failed) {
      /* The master stopped its peers; one that missed the STOP (a worker waiting at max_steps) gets SIGTERM. */
      await_exits(kids, r->total, 3000);
      signal_all(kids, r->total, SIGTERM);
      drain(kids, r->total, 7000);
      return TFX_OK;
    }
    if (forwarded && kids[0].exited) {
      drain(kids, r->total, 5000);
      return tfx_err_set(err, TFX_EINTR, "stopped by a signal");
    }
    if (tfx_stop_requested() && !forwarded) {
      forwarded = tfx_signals_seen();
      stop_at = tfx_now_ms();
      tfx_log(TFX_LOG_INFO, "LOCAL-SIGNAL",
              "stopping: the master checkpoints, then the cluster stops (a second Ctrl-C stops at once)");
      kill(kids[0].pid, SIGTERM);
    }
    if (forwarded && tfx_now_ms() - stop_at > LOCAL_STOP_GRACE_MS) {
      tfx_log(TFX_LOG_WARN, "LOCAL-STOP-DEADLINE", "the master has not stopped the cluster %d s after the stop signal: "
              "stopping every process now (the last complete checkpoint is kept)", LOCAL_STOP_GRACE_MS / 1000);
      signal_all(kids, r->total, SIGKILL);
      drain(kids, r->total, 1000);
      return tfx_err_set(err, TFX_EINTR, "the master did not stop within %d s of the stop signal",
                         LOCAL_STOP_GRACE_MS / 1000);
    }
    if (forwarded && tfx_signals_seen() > forwarded) {
      tfx_log(TFX_LOG_WARN, "LOCAL-SIGNAL", "a second stop signal: stopping every process now, without a checkpoint");
      signal_all(kids, r->total, SIGKILL);
      drain(kids, r->total, 1000);
      return tfx_err_set(err, TFX_EINTR, "stopped at once by a second signal (the last checkpoint is kept)");
    }
    usleep(100000);
  }
}

/* RUN/keys/NAME.key: read it if an earlier run of this directory made it, otherwise generate it. */
static int run_key(const char *dir, const char *name, char *path, size_t n, tfx_err *err) {
  tfx_keypair k;
  char file[1200];
  snprintf(file, sizeof file, "%s/%s.key", dir, name);
  int rc = access(file, F_OK) == 0 ? tfx_keys_read(file, &k, err) : tfx_keys_generate(dir, name, &k, err);
  memset(&k, 0, sizeof k);
  if (!rc && strlen(file) >= n) {
    rc = tfx_err_set(err, TFX_ECONFIG, "%s: path too long", file);
  }
  if (!rc) {
    strcpy(path, file);
  }
  return rc;
}

/* The cluster's security: none over Unix sockets (sock_dir: the kernel admits only this user); over TCP the
 * experiment's keys if it names any (checked here, before any process starts), plain TCP if it says
 * security.plaintext, else a server and a client key pair made in RUN/keys (mode 0700,
 * secret keys 0600) and kept for later runs of the same directory. */
static int secure_cluster(tfx_node *n, const char *sock_dir, tfx_err *err) {
  tfx_config *c = &n->cfg;
  if (sock_dir) {
    tfx_log(TFX_LOG_INFO, "LOCAL-IPC",
            "the cluster talks over Unix sockets in %s (mode 0700: no other user can connect; no keys needed)",
            sock_dir);
    return TFX_OK;
  }
  if (c->server_key[0] || c->client_key[0] || c->authorized_keys[0] || c->security_plaintext) {
    int rc = tfx_curve_configure(c, 1, err);
    tfx_curve_reset();
    if (!rc && c->security_plaintext) {
      tfx_log(TFX_LOG_WARN, "NET-PLAINTEXT",
              "security.plaintext is true: the local cluster runs on plain TCP, "
              "neither encrypted nor authenticated");
    }
    return rc;
  }
  char dir[1100], abs[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/keys", n->run_dir);
  int rc = tfx_mkdirs(dir, err);
  if (!rc && (chmod(dir, 0700) || !realpath(dir, abs))) {
    rc = tfx_err_sys(err, TFX_ESYS, "keys directory %s", dir);
  }
  if (!rc && !(rc = run_key(abs, "server", c->server_key, sizeof c->server_key, err)) &&
      !(rc = run_key(abs, "client", c->client_key, sizeof c->client_key, err))) {
    snprintf(c->authorized_keys, sizeof c->authorized_keys, "%s/client.pub", abs);
    tfx_log(TFX_LOG_INFO, "LOCAL-CURVE", "the cluster uses CURVE with the keys in %s", abs);
  }
  return rc;
}

/* Whether the local cluster runs over Unix sockets: cluster.local_transport ipc (the default), unless the
 * experiment names CURVE keys or plaintext TCP, which are about TCP. */
static int use_ipc(const tfx_config *c) {
  int tcp_asked = c->server_key[0] || c->client_key[0] || c->authorized_keys[0] || c->security_plaintext;
  return c->local_transport == TFX_TRANSPORT_IPC && !tcp_asked;
}

/* The step budget (max_steps, capped by training.epochs), the input checked against the model, and the master's
 * HTTP port, before anything is written. */
static int plan_run(tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  if (!n->config_path[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "local needs --config EXPERIMENT.json");
  }
  if (o->max_steps > 0) {
    n->cfg.max_steps = o->max_steps;
    n->cfg.max_steps_given = 1;
  }
  int64_t epoch_steps = 0; /* experiment.json states max_steps: the epochs' budget when they decide alone */
  int rc = tfx_config_validate_cluster(&n->cfg, o->workers, err);
  if (rc || (rc = tfx_epochs_apply(&n->cfg, o->workers, &epoch_steps, err))) {
    return rc;
  }
  n->cfg.max_steps_given = 1;
  tfx_model *m = NULL; /* bad input (a label outside the classes) refused before a file or process exists */
  rc = tfx_model_create(&n->cfg, 1, &m, err);
  rc = rc ? rc : tfx_labels_check_inputs(m, &n->cfg, err);
  tfx_model_destroy(m);
  if (rc) {
    return rc;
  }
  if (!n->cfg.http_port) {
    int port = 0;
    if (free_ports(1, &port, err) == TFX_OK) {
      n->cfg.http_port = port; /* the master's /metrics, /status and / */
    }
  }
  return TFX_OK;
}

/* Writes what the children read (RUN/logs, the socket directory when sock_dir is given, keys,
 * RUN/experiment.json) and builds their cluster into *c; on failure removes the socket directory it made. */
static int prepare(tfx_node *n, const tfx_cli_opts *o, char *sock_dir, size_t sock_n, tfx_cluster **c, tfx_err *err) {
  char logs[1100];
  snprintf(logs, sizeof logs, "%s/logs", n->run_dir);
  int rc = tfx_mkdirs(logs, err);
  if (!rc && sock_dir) {
    rc = make_socket_dir(sock_dir, sock_n, err);
  }
  if (!rc) {
    rc = secure_cluster(n, sock_dir, err);
  }
  char *json = rc ? NULL : tfx_config_to_json(&n->cfg);
  if (!rc) {
    rc = tfx_run_save_config(n->run_dir, "experiment.json", json, n->resume, err);
  }
  free(json);
  if (!rc) {
    rc = build_cluster(o->ps, o->workers, sock_dir, c, err);
  }
  if (rc && sock_dir && sock_dir[0] == '/') {
    rmdir(sock_dir);
  }
  return rc;
}

/* Starts `tfx-node serve` on the run beside the cluster (local --serve-port): log RUN/logs/serve-0.log, dies with
 * the supervisor, not restarted; the children inherit TFX_SERVE_URL, which the master's live page links. Returns its
 * pid, or -1 (logged) when it could not start: the cluster trains on. */
static pid_t spawn_server(const tfx_node *n, const tfx_cli_opts *o, const char *self) {
  const char *host = n->bind_host[0] && strcmp(n->bind_host, "0.0.0.0") ? n->bind_host : "127.0.0.1";
  char port[16], name[128], url[700], log[1200];
  snprintf(port, sizeof port, "%d", o->serve_port);
  tfx_serve_model_name(&n->cfg, n->run_dir, name, sizeof name);
  snprintf(url, sizeof url, "http://%s:%d/v1/models/%s", host, o->serve_port, name);
  setenv("TFX_SERVE_URL", url, 1);
  snprintf(log, sizeof log, "%s/logs/serve-0.log", n->run_dir);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    setpgid(0, 0);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    char *argv[] = {"tfx-node", "serve", "--bind", (char *)(n->bind_host[0] ? n->bind_host : "127.0.0.1"), "--port",
                    port,       "--run-dir", (char *)n->run_dir, NULL};
    execv(self, argv);
    _exit(127);
  }
  if (pid < 0) {
    tfx_log(TFX_LOG_WARN, "LOCAL-SERVE", "could not start the server (fork: %s); training without it", strerror(errno));
    return -1;
  }
  tfx_log(TFX_LOG_INFO, "LOCAL-SERVE", "serve: pid %d, %s (POST %s:predict), log %s", (int)pid, url, url, log);
  printf("tfx: the model is served while it trains at %s\n", url);
  fflush(stdout);
  return pid;
}

/* Stops the server beside the cluster: SIGTERM, then SIGKILL after 10 s (one the supervisor reaped already is
 * left alone: its pid may be another process's now). */
static void stop_server(pid_t pid) {
  int status;
  if (pid <= 0 || waitpid(pid, &status, WNOHANG) != 0) {
    return;
  }
  kill(pid, SIGTERM);
  for (int64_t end = tfx_now_ms() + 10000; tfx_now_ms() < end; usleep(50000)) {
    if (waitpid(pid, &status, WNOHANG) != 0) {
      return;
    }
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
}

/* Starts the master, the ps and the workers and supervises them until the master finishes. */
static int run_children(tfx_node *n, const tfx_cli_opts *o, tfx_cluster *c, const char *self, const char *exp,
                        tfx_err *err) {
  int total = 1 + o->ps + o->workers;
  child *kids = calloc((size_t)total, sizeof *kids);
  for (int i = 0; kids && i < total; i++) {
    kids[i].role = i == 0 ? TFX_ROLE_MASTER : i <= o->ps ? TFX_ROLE_PS : TFX_ROLE_WORKER;
    kids[i].index = i == 0 ? 0 : i <= o->ps ? i - 1 : i - 1 - o->ps;
    kids[i].cpu = tfx_local_placement(&n->cfg, o->ps, o->workers, kids[i].role, kids[i].index);
  }
  tfx_log(TFX_LOG_INFO, "LOCAL-START", "1 master, %d ps, %d worker(s); run directory %s", o->ps, o->workers,
          n->run_dir);
  if (n->cfg.http_port) {
    printf("tfx: live page, /metrics and /status at http://127.0.0.1:%d/\n", n->cfg.http_port);
    fflush(stdout);
  }
  pid_t server = o->serve_port ? spawn_server(n, o, self) : -1;
  int rc = kids ? spawn_all(n, c, kids, total, self, exp, err) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  cluster_run run = {n, c, self, exp, kids, total};
  if (!rc) {
    rc = supervise(&run, err);
  } else if (kids) {
    signal_all(kids, total, SIGKILL);
    drain(kids, total, 1000);
  }
  stop_server(server);
  free(kids);
  return rc;
}

int tfx_local_run(tfx_node *n, const tfx_cli_opts *o, const char *self, tfx_err *err) {
  int rc = plan_run(n, o, err);
  if (rc) {
    return rc;
  }
  char exp[1100];
  snprintf(exp, sizeof exp, "%s/experiment.json", n->run_dir);
  tfx_cluster *c = NULL;
  char sock_buf[128] = "", *sock_dir = use_ipc(&n->cfg) ? sock_buf : NULL;
  if ((rc = prepare(n, o, sock_dir, sizeof sock_buf, &c, err))) {
    return rc;
  }
  rc = run_children(n, o, c, self, exp, err);
  if (sock_dir) {
    remove_socket_dir(sock_dir, c);
  }
  tfx_cluster_destroy(c);
  return rc;
}
