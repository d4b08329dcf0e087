/* A client that tries to talk to a tfx node: N attempts of one request, each on a fresh connection (so each is a
 * new handshake), and counts how many got any answer at all (an error reply counts: the node heard it).
 * Usage: tfx-intruder HOST:PORT status|register|pull|push|report-nan|report-huge N
 * (report-nan: a REPORT as worker 0 with a NaN loss; report-huge: one at step 2^60; both from a connection that
 * never registered).
 * Its keys come from the TFX_SECURITY_* variables, as for any tfx process (none: plaintext).
 * Prints "OP: K of N got through" and exits 0; exits 2 on bad usage or keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cluster.h"
#include "config/config.h"
#include "net/curve.h"
#include "net/net.h"

/* Sends one request of kind op and waits up to 600 ms for the answer; returns 1 if one came. */
static int attempt(const char *endpoint, const char *op) {
  tfx_client *c = NULL;
  tfx_err err;
  if (tfx_client_create(endpoint, &c, &err)) {
    return 0;
  }
  static float grad[16] = {1000, 1000, 1000, 1000};
  Tfx__Tensor t, *tp = &t;
  int64_t shape[1] = {16};
  tfx__tensor__init(&t);
  t.name = "dense/kernel", t.shape = shape, t.n_shape = 1, t.nbytes = sizeof grad;
  tfx_payload pl = {grad, sizeof grad, 0, NULL, NULL};
  tfx_envelope env;
  tfx_inmsg r;
  int is_push = !strcmp(op, "push"), is_report = !strncmp(op, "report-", 7);
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 0);
  tfx_wire_request(&env, !strcmp(op, "register") ? TFX__MSG_TYPE__MSG_REGISTER
                         : !strcmp(op, "pull")   ? TFX__MSG_TYPE__MSG_PULL
                         : is_push               ? TFX__MSG_TYPE__MSG_PUSH
                         : is_report             ? TFX__MSG_TYPE__MSG_REPORT
                                                 : TFX__MSG_TYPE__MSG_STATUS);
  if (is_push) {
    env.tensors = &tp, env.n_tensors = 1;
  }
  Tfx__KeyValue kv, *kvp = &kv;
  if (is_report) {
    tfx__key_value__init(&kv);
    kv.key = "loss", kv.value = strcmp(op, "report-nan") ? 0.5 : NAN;
    env.stats = &kvp, env.n_stats = 1, env.step = strcmp(op, "report-huge") ? 10 : (int64_t)1 << 60;
  }
  int rc = tfx_client_call(c, &env, is_push ? &pl : NULL, is_push, &r, 600, &err);
  tfx_inmsg_fini(&r);
  tfx_client_destroy(c);
  return rc != TFX_EPEER;
}

int main(int argc, char **argv) {
  const char *ops = " status register pull push report-nan report-huge ";
  char want[32];
  snprintf(want, sizeof want, " %s ", argc == 4 ? argv[2] : "?");
  if (argc != 4 || !strstr(ops, want) || atoi(argv[3]) < 1) {
    return fprintf(stderr, "usage: %s HOST:PORT status|register|pull|push|report-nan|report-huge N\n", argv[0]), 2;
  }
  tfx_config cfg;
  tfx_err err;
  char ep[320];
  tfx_config_init(&cfg);
  if (tfx_config_apply_env(&cfg, &err) || tfx_curve_configure(&cfg, 0, &err) ||
      tfx_address_endpoint(argv[1], 0, NULL, ep, sizeof ep, &err)) {
    return fprintf(stderr, "%s\n", err.msg), 2;
  }
  int n = atoi(argv[3]), through = 0;
  for (int i = 0; i < n; i++) {
    through += attempt(ep, argv[2]);
  }
  printf("%s: %d of %d got through (%s)\n", argv[2], through, n, tfx_curve_enabled() ? "CURVE" : "plaintext");
  tfx_net_shutdown();
  tfx_curve_reset();
  return 0;
}
