/* The status command: asks a running node (any role) for its state over its control socket and prints one line. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "net/curve.h"
#include "net/net.h"

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
