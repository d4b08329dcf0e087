/* tfx-node: the single binary. Parses argv and TF_CONFIG and dispatches on the command or role. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "common/fs.h"
#include "common/log.h"
#include "master/master.h"
#include "net/curve.h"
#include "net/net.h"
#include "nn/model.h"
#include "ps/ps.h"
#include "store/runlock.h"
#include "worker/worker.h"

/* 0 ok, 2 bad input (a bad experiment or argument, a missing or corrupt file: nothing to retry), 3 the run was
 * aborted on purpose (exploding loss), 1 anything else. */
static int exit_code(int rc) {
  if (rc == TFX_OK) {
    return 0;
  }
  if (rc == TFX_ELOSS) {
    return 3;
  }
  int bad_input =
      rc == TFX_ECONFIG || rc == TFX_EINVAL || rc == TFX_ESHAPE || rc == TFX_ECORRUPT || rc == TFX_ENOTFOUND;
  return bad_input ? 2 : 1;
}

/* TensorFlow's rule for a cluster without a chief: worker 0 takes the chief's duties. Worker 0 forks the
 * master, which binds worker 0's address (the worker then opens no control socket of its own). */
static int worker_as_chief(tfx_node *n, tfx_err *err) {
  if (!n->config_path[0]) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "TF_CONFIG has no chief, so worker 0 takes its duties and needs --config EXPERIMENT.json");
  }
  pid_t pid = fork();
  if (pid < 0) {
    return tfx_err_sys(err, TFX_ESYS, "fork the chief");
  }
  if (pid == 0) {
    tfx_log_init("master", 0);
    tfx_err merr;
    int rc = tfx_master_run(n, &merr);
    if (rc) {
      tfx_log(TFX_LOG_ERROR, "NODE-FAIL", "%s: %s", tfx_errname(rc), merr.msg);
    }
    tfx_net_shutdown();
    _exit(rc ? 1 : 0);
  }
  tfx_log(TFX_LOG_INFO, "WORKER-CHIEF", "no chief in TF_CONFIG: worker 0 runs the chief's duties in pid %d", (int)pid);
  n->chief_pid = (int)pid;
  int rc = tfx_worker_run(n, err), status = 0;
  if (rc) {
    kill(pid, SIGTERM);
  }
  if (waitpid(pid, &status, 0) == pid && !rc && (!WIFEXITED(status) || WEXITSTATUS(status))) {
    rc = tfx_err_set(err, TFX_EPEER, "the chief run by worker 0 (pid %d) failed", (int)pid);
  }
  return rc;
}

static int run_role(tfx_node *n, tfx_err *err) {
  int rc = tfx_cluster_check_peers(n->cluster, n->role, err);
  if (rc) {
    return rc;
  }
  if (n->role == TFX_ROLE_WORKER && tfx_cluster_promote_worker0(n->cluster) && n->index == 0) {
    return worker_as_chief(n, err);
  }
  switch (n->role) {
    case TFX_ROLE_PS:
      return tfx_ps_run(n, err);
    case TFX_ROLE_WORKER:
      return tfx_worker_run(n, err);
    case TFX_ROLE_MASTER:
      return tfx_master_run(n, err);
    case TFX_ROLE_EVALUATOR:
      return tfx_evaluator_run(n, err);
    default:
      return tfx_err_set(err, TFX_ECONFIG, "role '%s' cannot run here (the chief evaluates)", tfx_role_name(n->role));
  }
}

/* Installs the security of the sockets for a role (which serves) or the status tool (a client); `local`
 * secures its own cluster (local.c). A role without keys runs plaintext, loudly. */
static int secure_sockets(const tfx_args *a, tfx_err *err) {
  const tfx_config *cfg = &a->node.cfg;
  int role = !a->command, tool = a->command && !strcmp(a->command, "status");
  int rc = role || tool ? tfx_curve_configure(cfg, role, err) : TFX_OK;
  if (rc || !role) {
    return rc;
  }
  if (tfx_curve_enabled()) {
    tfx_log(TFX_LOG_INFO, "NET-CURVE", "CURVE on every socket: server key %s, client key %s (%s), admitting %s",
            cfg->server_key, cfg->client_key[0] ? cfg->client_key : cfg->server_key, tfx_curve_client_public(),
            cfg->authorized_keys[0] ? cfg->authorized_keys : "the client key");
  } else if (a->node.cluster && tfx_cluster_all_unix(a->node.cluster)) {
    tfx_log(TFX_LOG_INFO, "NET-IPC",
            "every peer is a Unix socket on this host: the kernel admits only users who may open the socket "
            "directory; no keys needed");
  } else if (cfg->security_plaintext) {
    tfx_log(TFX_LOG_WARN, "NET-PLAINTEXT",
            "security.plaintext is true: sockets are neither encrypted nor "
            "authenticated; anyone who reaches the ports can pull and push");
  } else {
    tfx_log(TFX_LOG_WARN, "NET-PLAINTEXT",
            "no CURVE keys configured (security.server_key or TFX_SECURITY_SERVER_KEY): sockets are neither "
            "encrypted nor authenticated; anyone who reaches the ports can pull and push (see tfx-node keygen)");
  }
  return TFX_OK;
}

/* The largest frame every socket of a role accepts (ZMQ_MAXMSGSIZE), fixed before the role opens any: from the
 * experiment when the node was given one, else cluster.max_message_bytes (TFX_CLUSTER_MAX_MESSAGE_BYTES) or the
 * default. A worker sets it again from the experiment the master sends; a ps checks the one INIT brings. A model
 * that cannot be measured here (the role will say why) leaves the default. */
static void bound_messages(const tfx_node *n) {
  size_t largest = 0, ids = 0;
  tfx_err err;
  int known = n->config_path[0] != '\0';
  if (known && tfx_model_extent(&n->cfg, &largest, &ids, &err)) {
    tfx_log(TFX_LOG_WARN, "NET-MAX-MESSAGE", "cannot measure the experiment's model: %s", err.msg);
    known = 0;
  }
  if (known || n->cfg.max_message_bytes) {
    tfx_wire_set_max_frame(tfx_net_message_bound(&n->cfg, largest, ids));
  }
  tfx_log(TFX_LOG_INFO, "NET-MAX-MESSAGE", "every socket accepts frames up to %zu bytes (%s)", tfx_wire_max_frame(),
          n->cfg.max_message_bytes ? "cluster.max_message_bytes"
          : known                  ? "the experiment's largest tensor with margin"
                                   : "the default before the experiment is known");
}

/* One owner per run directory: `local`, `train`, `search` and a chief take RUN/.lock before writing anything
 * there (a child of `local` runs under its supervisor's lock). The lock lives until the process exits. With
 * --fresh, a run's owner then moves the earlier run aside (previous-N/), so no old checkpoint mixes with the new
 * run's (a search's trials are run directories of their own, each locked by its `local`). */
static int lock_fd = -1, made_run_dir;

static int lock_run(const tfx_args *a, tfx_err *err) {
  const char *cmd = a->command;
  int trains = cmd ? !strcmp(cmd, "local") || !strcmp(cmd, "train") : a->node.role == TFX_ROLE_MASTER;
  int searches = cmd && !strcmp(cmd, "search");
  if ((!trains && !searches) || getenv(TFX_RUN_LOCK_HELD_ENV) || lock_fd >= 0) {
    return TFX_OK;
  }
  char where[1100];
  made_run_dir = access(a->node.run_dir, F_OK) != 0;
  int rc = tfx_run_lock(a->node.run_dir, &lock_fd, err), moved = 0;
  if (!rc && cmd && !strcmp(cmd, "local")) {
    /* The cluster's processes inherit the lock: it is held until the last of them is gone, so a supervisor
     * killed with -9 does not free the directory while its children still write there. */
    fcntl(lock_fd, F_SETFD, 0);
  }
  if (!rc && trains && !a->node.resume &&
      !(rc = tfx_run_set_aside(a->node.run_dir, &moved, where, sizeof where, err)) && moved) {
    tfx_log(TFX_LOG_INFO, "RUN-FRESH", "--fresh: the earlier run's %d entries moved to %s", moved, where);
  }
  return rc;
}

/* `tfx-node config` with a TF_CONFIG: the task it resolves to and the cluster, on stderr (stdout stays the
 * experiment's JSON), so a user can check a TF_CONFIG without starting anything. */
static void show_task(const tfx_node *n) {
  const tfx_cluster *c = n->cluster;
  if (!c) {
    fprintf(stderr, "# task: none (no TF_CONFIG: local mode)\n");
    return;
  }
  tfx_role role = tfx_cluster_task_role(c);
  int index = tfx_cluster_task_index(c);
  const char *own = tfx_cluster_address(c, role, index);
  fprintf(stderr, "# task: role=%s index=%d address=%s\n", role == TFX_ROLE_NONE ? "none" : tfx_role_name(role), index,
          own ? own : "(outside the cluster)");
  for (int r = TFX_ROLE_NONE + 1; r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; i < tfx_cluster_count(c, (tfx_role)r); i++) {
      const char *addr = tfx_cluster_address(c, (tfx_role)r, i);
      fprintf(stderr, "# cluster: %s %d %s\n", tfx_role_name((tfx_role)r), i, addr ? addr : "(not listed)");
    }
  }
}

static int run_command(tfx_args *a, tfx_err *err);

/* Runs the command under the run directory's lock; a run that failed before writing anything leaves no
 * directory behind (bad input writes nothing). */
static int dispatch(tfx_args *a, tfx_err *err) {
  int rc = run_command(a, err);
  if (rc && lock_fd >= 0) {
    tfx_run_unlock_empty(a->node.run_dir, lock_fd, made_run_dir);
    lock_fd = -1;
  }
  return rc;
}

/* The experiment as the run sees it (all sources merged), after the task. */
static int show_config(tfx_args *a) {
  show_task(&a->node);
  char *json = tfx_config_to_json(&a->node.cfg);
  puts(json);
  free(json);
  return TFX_OK;
}

static int cmd_keygen(tfx_args *a, tfx_err *err) {
  return tfx_keygen_run(&a->cli, err);
}
static int cmd_spool(tfx_args *a, tfx_err *err) {
  return tfx_spool_run(&a->cli, err);
}
static int cmd_train(tfx_args *a, tfx_err *err) {
  return tfx_train_run(&a->node, &a->cli, err);
}
static int cmd_local(tfx_args *a, tfx_err *err) {
  return tfx_local_run(&a->node, &a->cli, a->self_exe, err);
}
static int cmd_status(tfx_args *a, tfx_err *err) {
  return tfx_status_run(&a->cli, err);
}
static int cmd_model(tfx_args *a, tfx_err *err) {
  return tfx_model_cmd(&a->node, err);
}
static int cmd_plan(tfx_args *a, tfx_err *err) {
  return tfx_plan_cmd(&a->node, &a->cli, err);
}
static int cmd_export(tfx_args *a, tfx_err *err) {
  return tfx_export_run(&a->node, &a->cli, err);
}
static int cmd_inspect(tfx_args *a, tfx_err *err) {
  return tfx_inspect_run(&a->cli, err);
}
static int cmd_predict(tfx_args *a, tfx_err *err) {
  return tfx_predict_run(&a->node, &a->cli, err);
}
static int cmd_serve(tfx_args *a, tfx_err *err) {
  return tfx_serve_run(&a->node, &a->cli, err);
}
static int cmd_evaluate(tfx_args *a, tfx_err *err) {
  return tfx_evaluate_run(&a->node, &a->cli, err);
}
static int cmd_report(tfx_args *a, tfx_err *err) {
  return tfx_report_run(&a->node, &a->cli, err);
}
static int cmd_runs(tfx_args *a, tfx_err *err) {
  return tfx_runs_run(&a->cli, err);
}
static int cmd_search(tfx_args *a, tfx_err *err) {
  return tfx_search_run(&a->node, &a->cli, a->self_exe, err);
}
static int cmd_config(tfx_args *a, tfx_err *err) {
  (void)err;
  return show_config(a);
}

/* The commands by name (redis's command table). */
static const struct command {
  const char *name;
  int (*run)(tfx_args *a, tfx_err *err);
} commands[] = {
    {"keygen", cmd_keygen},   {"train", cmd_train},       {"local", cmd_local},   {"status", cmd_status},
    {"model", cmd_model},     {"plan", cmd_plan},         {"export", cmd_export}, {"inspect", cmd_inspect},
    {"predict", cmd_predict}, {"evaluate", cmd_evaluate}, {"report", cmd_report}, {"runs", cmd_runs},
    {"search", cmd_search},   {"config", cmd_config},   {"serve", cmd_serve},   {"spool", cmd_spool},
};

/* Runs the command named cmd. */
static int run_named(tfx_args *a, const char *cmd, tfx_err *err) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (!strcmp(cmd, commands[i].name)) {
      return commands[i].run(a, err);
    }
  }
  return tfx_err_set(err, TFX_EINVAL, "unknown command '%s' (see --help)", cmd);
}

static int run_command(tfx_args *a, tfx_err *err) {
  const char *cmd = a->command;
  int rc = lock_run(a, err);
  if (!rc) {
    rc = secure_sockets(a, err);
  }
  if (rc) {
    return rc;
  }
  if (!cmd) {
    if (a->cli.max_steps > 0) {
      a->node.cfg.max_steps = a->cli.max_steps; /* a chief started with --max-steps stops there */
    }
    bound_messages(&a->node);
    return run_role(&a->node, err);
  }
  return run_named(a, cmd, err);
}

int main(int argc, char **argv) {
  tfx_net_keep_buffers();
  tfx_args a;
  tfx_err err;
  tfx_err_clear(&err);
  int rc = tfx_args_parse(&a, argc, argv, &err);
  if (rc == TFX_OK && a.done) {
    tfx_args_fini(&a);
    return 0;
  }
  if (rc == TFX_OK) {
    tfx_signals_install();
    tfx_fd_limit_raise(); /* a ps under many connections needs more than the usual 1024 files */
    rc = dispatch(&a, &err);
  }
  if (rc) {
    tfx_log(TFX_LOG_ERROR, "NODE-FAIL", "%s: %s", tfx_errname(rc), err.msg[0] ? err.msg : tfx_strerror(rc));
  }
  tfx_args_fini(&a);
  tfx_net_shutdown();
  return exit_code(rc);
}
