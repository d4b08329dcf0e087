/* Small commands: status, model, plan. */
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "master.h"
#include "model.h"
#include "net.h"

static const char *const role_names[] = {"none", "master", "worker", "ps", "evaluator", "client"};

int tfx_status_run(const tfx_cli_opts *o, tfx_err *err) {
  char ep[320];
  if (!o->address[0]) {
    return tfx_err_set(err, TFX_EINVAL, "status needs --address HOST:PORT");
  }
  int rc = tfx_address_endpoint(o->address, 0, NULL, ep, sizeof ep, err);
  tfx_client *c = NULL;
  if (!rc) {
    rc = tfx_client_create(ep, &c, err);
  }
  if (rc) {
    return rc;
  }
  tfx_wire_set_sender(TFX__ROLE__ROLE_CLIENT, 0);
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  rc = tfx_client_call(c, &env, NULL, 0, &r, 3000, err);
  if (!rc) {
    int role = r.env->sender_role >= 0 && r.env->sender_role <= 5 ? r.env->sender_role : 0;
    printf("address=%s role=%s index=%d state=%s step=%lld", o->address, role_names[role], r.env->sender_index,
           r.env->text ? r.env->text : "?", (long long)r.env->step);
    for (size_t i = 0; i < r.env->n_stats; i++) {
      printf(" %s=%g", r.env->stats[i]->key, r.env->stats[i]->value);
    }
    printf("\n");
  }
  tfx_inmsg_fini(&r);
  tfx_client_destroy(c);
  return rc;
}

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
