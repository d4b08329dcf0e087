/* The model and plan commands: what an experiment builds (its layers and variables) and where the device setter
 * places the variables over the ps, printed without running anything. */
#include <stdio.h>

#include "cli/cli.h"
#include "master/master.h"
#include "nn/model.h"

int tfx_model_cmd(const tfx_node *n, tfx_err *err) {
  tfx_model *m;
  int rc = tfx_model_create(&n->cfg, 1, &m, err);
  if (rc) {
    return rc;
  }
  tfx_model_print(m, stdout);
  tfx_model_destroy(m);
  return TFX_OK;
}

int tfx_plan_cmd(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  return tfx_master_print_plan(&n->cfg, o->ps, stdout, err);
}
