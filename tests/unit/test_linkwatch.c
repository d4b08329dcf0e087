/* Unit tests of src/net/linkwatch.c over real ZeroMQ sockets: a ROUTER bound to an ipc:// path and a DEALER client
 * exchange a 1 MiB message; both ends of the Unix-socket connection then have kernel buffers above the default
 * (ZeroMQ alone leaves ipc links at net.core.wmem_default), a TCP link keeps ZeroMQ's, a client waiting for a
 * reply from a peer that died learns it from the lost connection, and shutting down after the sockets close does
 * not hang on their monitors. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/linkwatch.h"
#include "net/net.h"
#include "net/wire.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("linkwatch");
}

static void teardown(void) {
  tfx_net_shutdown();
  tmpdir_remove();
}

TestSuite(linkwatch, .init = setup, .fini = teardown, .timeout = 60);

static long read_sysctl(const char *path) {
  FILE *f = fopen(path, "r");
  long v = -1;
  if (f && fscanf(f, "%ld", &v) != 1) {
    v = -1;
  }
  if (f) {
    fclose(f);
  }
  return v;
}

/* The smallest SO_SNDBUF among this process's connected Unix sockets whose peer or own path lies under tmp;
 * *count gets how many there are. */
static int smallest_sndbuf_under_tmp(int *count) {
  int smallest = -1;
  *count = 0;
  for (int fd = 0; fd < 1024; fd++) {
    struct sockaddr_un own = {0}, peer = {0};
    socklen_t lo = sizeof own, lp = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&own, &lo) || own.sun_family != AF_UNIX ||
        getpeername(fd, (struct sockaddr *)&peer, &lp)) {
      continue;
    }
    if (strncmp(own.sun_path, tmp, strlen(tmp)) != 0 && strncmp(peer.sun_path, tmp, strlen(tmp)) != 0) {
      continue;
    }
    int v = 0;
    socklen_t lv = sizeof v;
    cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &lv), 0);
    smallest = smallest < 0 || v < smallest ? v : smallest;
    (*count)++;
  }
  return smallest;
}

/* Sends one 1 MiB message DEALER -> ROUTER and waits for it (the connection exists on both ends afterwards). */
static void exchange(void *server, void *client) {
  size_t n = 1 << 20;
  char *big = calloc(1, n);
  cr_assert_eq(zmq_send(client, big, n, 0), (int)n);
  zmq_msg_t id, body;
  zmq_msg_init(&id), zmq_msg_init(&body);
  cr_assert_geq(zmq_msg_recv(&id, server, 0), 0);
  cr_assert_eq(zmq_msg_recv(&body, server, 0), (int)n);
  zmq_msg_close(&id), zmq_msg_close(&body);
  free(big);
}

/* A ROUTER bound to ipc://TMP/NAME and a client connected to it. */
static void open_link(const char *name, void **server, tfx_client **client) {
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "ipc://%s/%s", tmp, name);
  tfx_err err = {0};
  cr_assert_eq(tfx_server_open(endpoint, server, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_client_create(endpoint, client, &err), TFX_OK, "%s", err.msg);
}

/* Waits until the helper has sized `want` connections in all (it sizes each once it has read the event): a
 * deadline from progress, not a set time. */
static void await_sized(unsigned want) {
  for (int64_t end = tfx_now_ms() + 20000; tfx_linkwatch_sized() < want && tfx_now_ms() < end;) {
    usleep(1000);
  }
}

Test(linkwatch, unix_socket_links_get_the_buffers_asked_for) {
  long wmem_max = read_sysctl("/proc/sys/net/core/wmem_max");
  long wmem_default = read_sysctl("/proc/sys/net/core/wmem_default");
  cr_assert_gt(wmem_max, 0);
  unsigned before = tfx_linkwatch_sized();
  void *server = NULL;
  tfx_client *client = NULL;
  open_link("ps-0.sock", &server, &client);
  exchange(server, tfx_client_socket(client));
  await_sized(before + 2);
  cr_assert_geq(tfx_linkwatch_sized(), before + 2, "both ends of the link sized");
  int count = 0, smallest = smallest_sndbuf_under_tmp(&count);
  cr_assert_eq(count, 2, "the connection's two ends");
  long asked = (4 << 20) < wmem_max ? (4 << 20) : wmem_max;
  /* Linux doubles the value set; the default is taken as is. */
  cr_assert_geq(smallest, 2 * asked, "SO_SNDBUF %d, asked %ld (default %ld)", smallest, asked, wmem_default);
  cr_assert_gt(smallest, wmem_default);
  tfx_client_destroy(client);
  tfx_net_close(server);
}

Test(linkwatch, tcp_links_keep_the_buffers_zeromq_gives_them) {
  void *ctx = tfx_net_context();
  void *server = zmq_socket(ctx, ZMQ_ROUTER);
  cr_assert_eq(zmq_bind(server, "tcp://127.0.0.1:*"), 0);
  char endpoint[128];
  size_t len = sizeof endpoint;
  cr_assert_eq(zmq_getsockopt(server, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
  unsigned before = tfx_linkwatch_sized();
  tfx_client *client = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  exchange(server, tfx_client_socket(client));
  cr_assert_eq(tfx_linkwatch_sized(), before, "a TCP connection was resized");
  tfx_client_destroy(client);
  tfx_net_close(server);
}

/* A request whose peer dies before replying: the waiting client learns it from the lost connection, long before
 * its deadline. */
Test(linkwatch, a_lost_connection_ends_the_wait_for_a_reply) {
  void *server = NULL;
  tfx_client *client = NULL;
  open_link("ps-2.sock", &server, &client);
  tfx_err err = {0};
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  cr_assert_eq(tfx_client_send(client, &env, NULL, 0, &err), TFX_OK, "%s", err.msg);
  tfx_inmsg got;
  cr_assert_eq(tfx_wire_recv(server, 1, &got, &err), TFX_OK, "%s", err.msg); /* taken, never answered */
  tfx_inmsg_fini(&got);
  tfx_net_close(server); /* the peer dies with the request */
  tfx_inmsg reply;
  cr_assert_eq(tfx_client_recv(client, &reply, 60000, &err), TFX_EPEER);
  cr_assert(strstr(err.msg, "connection was lost") != NULL, "%s", err.msg);
  tfx_inmsg_fini(&reply);
  tfx_client_destroy(client);
}

Test(linkwatch, reconnecting_clients_are_each_sized_and_shutdown_drains) {
  void *server = NULL;
  tfx_client *client = NULL;
  open_link("ps-1.sock", &server, &client);
  tfx_err err = {0};
  unsigned before = tfx_linkwatch_sized();
  /* More resets than the helper watches sockets at once: closed sockets give their places back. */
  for (unsigned i = 1; i <= 80; i++) {
    cr_assert_eq(tfx_client_reset(client, &err), TFX_OK, "%s", err.msg);
    exchange(server, tfx_client_socket(client));
    await_sized(before + 2 * i);
    cr_assert_geq(tfx_linkwatch_sized(), before + 2 * i, "connection %u: both ends sized", i);
  }
  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown(); /* returns: the monitors' last events were read before their readers closed */
}
