/* Small commands: status, keygen, model, plan. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "master/master.h"
#include "net/curve.h"
#include "net/keys.h"
#include "net/net.h"
#include "nn/model.h"

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
  } else if (rc == TFX_EPEER && err) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, "%s",
             tfx_curve_enabled() ? " (secured: is this node's client key authorized, and the server key the cluster's?)"
                                 : " (a secured cluster needs its keys: --config with a security section or "
                                   "TFX_SECURITY_* variables)");
  }
  tfx_inmsg_fini(&r);
  tfx_client_destroy(c);
  return rc;
}

int tfx_keygen_run(const tfx_cli_opts *o, tfx_err *err) {
  if (!o->out_dir[0]) {
    return tfx_err_set(err, TFX_EINVAL, "keygen needs --out DIR");
  }
  const char *name = o->key_name[0] ? o->key_name : "cluster";
  tfx_keypair k;
  int rc = tfx_keys_generate(o->out_dir, name, &k, err);
  if (rc) {
    return rc;
  }
  printf("secret key: %s/%s.key (mode 0600: give it only to the nodes that use it)\n", o->out_dir, name);
  printf("public key: %s/%s.pub %s\n", o->out_dir, name, k.public_key);
  memset(&k, 0, sizeof k);
  return TFX_OK;
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
