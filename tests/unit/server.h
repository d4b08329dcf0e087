/* Real-socket helper of the unit tests: a tfx ROUTER server bound to a kernel-chosen port of 127.0.0.1. */
#ifndef TFX_TEST_SERVER_H
#define TFX_TEST_SERVER_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "net/net.h"

/* Binds a server (tfx_server_open) on 127.0.0.1; endpoint gets "tcp://127.0.0.1:PORT"; the caller closes the
 * socket. Fails the test when it cannot. */
static void *open_server(char *endpoint, size_t n) {
  void *sock = NULL;
  tfx_err err = {0};
  char last[256];
  size_t len = sizeof last;
  cr_assert_eq(tfx_server_open("tcp://127.0.0.1:*", &sock, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, last, &len), 0);
  /* With ZMQ_IPV6 set the socket reports "tcp://[::ffff:127.0.0.1]:PORT". */
  const char *colon = strrchr(last, ':');
  cr_assert_not_null(colon, "endpoint %s", last);
  int port = atoi(colon + 1);
  cr_assert(port > 0 && port < 65536, "endpoint %s", last);
  snprintf(endpoint, n, "tcp://127.0.0.1:%d", port);
  return sock;
}

#endif
