/* Sends N random, truncated and malformed frames to a tfx node (DEALER -> ROUTER), then checks that it still
 * answers a STATUS request. Usage: tfx-frame-fuzzer HOST:PORT N. Exit 0 when the node survived.
 * Against a secured cluster, give it the cluster's keys (TFX_SECURITY_* variables): an authenticated but
 * hostile peer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/cluster.h"
#include "config/config.h"
#include "net/curve.h"
#include "net/net.h"
#include "net/wire.h"

static void send_junk(void *sock, unsigned *seed, int i) {
  uint8_t buf[512];
  size_t n = (size_t)(rand_r(seed) % (int)sizeof buf);
  for (size_t k = 0; k < n; k++) {
    buf[k] = (uint8_t)rand_r(seed);
  }
  if (i % 3 == 1) {
    /* A valid envelope announcing a tensor whose frame is missing or of the wrong size. */
    tfx_envelope env;
    Tfx__Tensor t, *tp = &t;
    int64_t shape[1] = {4};
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
    tfx__tensor__init(&t);
    t.name = "dense_1/kernel", t.shape = shape, t.n_shape = 1, t.nbytes = 16;
    env.tensors = &tp, env.n_tensors = 1;
    size_t len;
    uint8_t *packed = tfx_wire_pack(&env, &len);
    zmq_send(sock, packed, len / (size_t)(1 + i % 2), i % 2 ? 0 : ZMQ_SNDMORE);
    if (!(i % 2)) {
      zmq_send(sock, buf, n, 0);
    }
    free(packed);
    return;
  }
  zmq_send(sock, buf, n, 0);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    return fprintf(stderr, "usage: %s HOST:PORT N\n", argv[0]), 2;
  }
  char ep[320];
  tfx_err err;
  tfx_client *c;
  tfx_config cfg;
  tfx_config_init(&cfg);
  if (tfx_config_apply_env(&cfg, &err) || tfx_curve_configure(&cfg, 0, &err) ||
      tfx_address_endpoint(argv[1], 0, NULL, ep, sizeof ep, &err) || tfx_client_create(ep, &c, &err)) {
    return fprintf(stderr, "%s\n", err.msg), 2;
  }
  unsigned seed = 12345;
  int n = atoi(argv[2]);
  for (int i = 0; i < n; i++) {
    send_junk(tfx_client_socket(c), &seed, i);
  }
  tfx_envelope env;
  tfx_inmsg r;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  int rc = tfx_client_call(c, &env, NULL, 0, &r, 10000, &err);
  if (rc) {
    fprintf(stderr, "node did not answer after %d junk frames: %s\n", n, err.msg);
  } else {
    printf("node answered after %d junk frames: state %s\n", n, r.env->text);
  }
  tfx_inmsg_fini(&r);
  tfx_client_destroy(c);
  tfx_net_shutdown();
  tfx_curve_reset();
  return rc ? 1 : 0;
}
