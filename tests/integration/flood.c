/* A hostile client and a polite one, for tests/integration/test_flood.sh.
 *   tfx-flood flood HOST:PORT status|pull SECONDS   sends requests as fast as the socket takes them and never
 *                                                   reads a reply (one DEALER); prints how many it sent
 *                                                   ("sent N KIND requests ..."); exit 1 on a send error.
 *   tfx-flood probe HOST:PORT N INTERVAL_MS         sends N STATUS requests one at a time on its own DEALER and
 *                                                   prints "answered A of N, max latency M ms" (timeout 10 s).
 * Exit 0 unless the arguments or the socket are wrong (2) or a send fails (1). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/cluster.h"
#include "net/curve.h"
#include "net/net.h"
#include "net/wire.h"

static int flood(tfx_client *c, const char *kind, int seconds) {
  tfx_envelope env;
  tfx_wire_request(&env, strcmp(kind, "pull") == 0 ? TFX__MSG_TYPE__MSG_PULL : TFX__MSG_TYPE__MSG_STATUS);
  size_t len = 0;
  uint8_t *packed = tfx_wire_pack(&env, &len);
  long sent = 0, full = 0;
  int rc = 0;
  for (int64_t end = tfx_now_ms() + seconds * 1000LL; tfx_now_ms() < end;) {
    /* Non-blocking: when the high-water mark is reached ZeroMQ says EAGAIN rather than queueing more; that is
     * the queue being full (waited out), not a request refused by the ps. Any other error ends the flood. */
    if (zmq_send(tfx_client_socket(c), packed, len, ZMQ_DONTWAIT) >= 0) {
      sent++;
    } else if (errno == EAGAIN) {
      full++;
      usleep(100);
    } else {
      fprintf(stderr, "flood: zmq_send: %s after %ld requests\n", zmq_strerror(errno), sent);
      rc = 1;
      break;
    }
  }
  free(packed);
  printf("sent %ld %s requests in %d s (the send queue was full %ld times)\n", sent, kind, seconds, full);
  return rc;
}

static int probe(tfx_client *c, int n, int interval_ms) {
  int answered = 0;
  int64_t worst = 0;
  for (int i = 0; i < n; i++) {
    tfx_envelope env;
    tfx_inmsg r;
    tfx_err err;
    tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
    int64_t t0 = tfx_now_ms();
    if (tfx_client_call(c, &env, NULL, 0, &r, 10000, &err) == TFX_OK) {
      answered++;
      worst = tfx_now_ms() - t0 > worst ? tfx_now_ms() - t0 : worst;
    } else {
      fprintf(stderr, "probe %d: %s\n", i, err.msg);
      tfx_client_reset(c, NULL);
    }
    tfx_inmsg_fini(&r);
    usleep((useconds_t)interval_ms * 1000);
  }
  printf("answered %d of %d, max latency %lld ms\n", answered, n, (long long)worst);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[1], "flood") && strcmp(argv[1], "probe"))) {
    return fprintf(stderr, "usage: %s flood HOST:PORT status|pull SECONDS | probe HOST:PORT N INTERVAL_MS\n", argv[0]),
           2;
  }
  char ep[320];
  tfx_err err;
  tfx_client *c;
  tfx_config cfg; /* keys of a secured cluster come from TFX_SECURITY_* */
  tfx_config_init(&cfg);
  if (tfx_config_apply_env(&cfg, &err) || tfx_curve_configure(&cfg, 0, &err) ||
      tfx_address_endpoint(argv[2], 0, NULL, ep, sizeof ep, &err) || tfx_client_create(ep, &c, &err)) {
    return fprintf(stderr, "%s\n", err.msg), 2;
  }
  tfx_wire_set_sender(TFX__ROLE__ROLE_CLIENT, strcmp(argv[1], "flood") == 0 ? 666 : 0);
  int rc = strcmp(argv[1], "flood") == 0 ? flood(c, argv[3], atoi(argv[4])) : probe(c, atoi(argv[3]), atoi(argv[4]));
  tfx_client_destroy(c);
  tfx_net_shutdown();
  tfx_curve_reset();
  return rc;
}
