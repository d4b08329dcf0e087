/* tfx-node: the single binary. Parses argv and TF_CONFIG and dispatches on the command or role. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "log.h"
#include "master.h"
#include "net.h"
#include "ps.h"
#include "worker.h"

static int exit_code(int rc) {
  if (rc == TFX_OK) return 0;
  return rc == TFX_ECONFIG || rc == TFX_EINVAL || rc == TFX_ESHAPE ? 2 : 1;
}

static int run_role(tfx_node *n, tfx_err *err) {
  switch (n->role) {
    case TFX_ROLE_PS: return tfx_ps_run(n, err);
    case TFX_ROLE_WORKER: return tfx_worker_run(n, err);
    case TFX_ROLE_MASTER: return tfx_master_run(n, err);
    default: return tfx_err_set(err, TFX_ECONFIG, "role '%s' cannot run here (the chief evaluates)", tfx_role_name(n->role));
  }
}

static int dispatch(tfx_args *a, tfx_err *err) {
  const char *cmd = a->command;
  if (!cmd) return run_role(&a->node, err);
  if (!strcmp(cmd, "train")) return tfx_train_run(&a->node, &a->cli, err);
  if (!strcmp(cmd, "local")) return tfx_local_run(&a->node, &a->cli, a->self_exe, err);
  if (!strcmp(cmd, "status")) return tfx_status_run(&a->cli, err);
  if (!strcmp(cmd, "model")) return tfx_model_cmd(&a->node, err);
  if (!strcmp(cmd, "plan")) return tfx_plan_cmd(&a->node, &a->cli, err);
  if (!strcmp(cmd, "export")) return tfx_export_run(&a->node, &a->cli, err);
  if (!strcmp(cmd, "inspect")) return tfx_inspect_run(&a->cli, err);
  if (!strcmp(cmd, "predict")) return tfx_predict_run(&a->node, &a->cli, err);
  if (!strcmp(cmd, "evaluate")) return tfx_evaluate_run(&a->node, &a->cli, err);
  if (!strcmp(cmd, "config")) {
    char *json = tfx_config_to_json(&a->node.cfg);
    puts(json);
    free(json);
    return TFX_OK;
  }
  return tfx_err_set(err, TFX_EINVAL, "unknown command '%s' (see --help)", cmd);
}

int main(int argc, char **argv) {
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
    rc = dispatch(&a, &err);
  }
  if (rc) {
    tfx_log(TFX_LOG_ERROR, "NODE-FAIL", "%s: %s", tfx_errname(rc), err.msg[0] ? err.msg : tfx_strerror(rc));
  }
  tfx_args_fini(&a);
  tfx_net_shutdown();
  return exit_code(rc);
}
