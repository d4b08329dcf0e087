/* ZeroMQ context, ROUTER servers and DEALER clients. */
#include "net/net.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/curve.h"
#include "net/linkwatch.h"
#include "net/pid.h"

/* Kernel buffer size asked for every link (the kernel caps it at net.core.wmem_max/rmem_max). */
#define LINK_BUFFER_BYTES (4 << 20)
/* How often a client waiting for a reply looks whether its connection was lost meanwhile. */
#define LOST_CHECK_MS 100

struct tfx_client {
  void *sock;
  char endpoint[300];
  uint64_t next_id;
  uint64_t pending_id;
  unsigned lost_at_send; /* the socket's disconnections (linkwatch) when the pending request went out */
};

static void *context;

void *tfx_net_context(void) {
  if (!context) {
    (void)tfx_pid_cached(); /* links pid.c: libzmq's fork checks read the cached pid */
    context = zmq_ctx_new();
    if (context) {
      zmq_ctx_set(context, ZMQ_IO_THREADS, 1);
    }
  }
  return context;
}

void tfx_net_forget_context(void) {
  context = NULL;
  tfx_curve_forget();
  tfx_linkwatch_forget();
}

void tfx_net_shutdown(void) {
  tfx_curve_stop();
  tfx_linkwatch_stop();
  if (context) {
    zmq_ctx_term(context);
  }
  context = NULL;
}

void tfx_net_keep_buffers(void) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

size_t tfx_net_message_bound(const tfx_config *cfg, size_t largest, size_t ids) {
  if (cfg->max_message_bytes > 0) {
    return (size_t)cfg->max_message_bytes;
  }
  size_t need = largest > ids * 10 ? largest : ids * 10; /* a row id is a varint of at most 10 bytes */
  /* A quarter for what the estimate misses and 8 MiB for an envelope's other fields: the experiment's text (INIT
   * and a registration's reply carry it) and the plan. Only the model's shapes count, so that every process of
   * a run derives the same bound from the same experiment. */
  size_t bound = need + need / 4 + ((size_t)8 << 20);
  return bound < TFX_MAX_FRAME ? bound : TFX_MAX_FRAME;
}

static void set_common(void *sock) {
  int zero = 0, one = 1, buf = LINK_BUFFER_BYTES;
  int64_t maxmsg = (int64_t)tfx_wire_max_frame(); /* libzmq copies it into each connection (a listener's at bind) */
  zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(sock, ZMQ_IPV6, &one, sizeof one);
  zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  zmq_setsockopt(sock, ZMQ_SNDBUF, &buf, sizeof buf);
  zmq_setsockopt(sock, ZMQ_RCVBUF, &buf, sizeof buf);
}

int tfx_server_open(const char *endpoint, void **sock, tfx_err *err) {
  void *s = zmq_socket(tfx_net_context(), ZMQ_ROUTER);
  if (!s) {
    return tfx_err_sys(err, TFX_ESYS, "zmq_socket(ROUTER)");
  }
  set_common(s);
  int hwm = 1000;
  zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
  int rc = tfx_curve_server(tfx_net_context(), s, err);
  if (rc) {
    zmq_close(s);
    return rc;
  }
  if (!tfx_curve_enabled()) { /* CURVE's handshake monitor owns a server socket's one monitor */
    tfx_linkwatch_add(tfx_net_context(), s, endpoint, LINK_BUFFER_BYTES);
  }
  if (zmq_bind(s, endpoint)) {
    rc = tfx_err_sys(err, TFX_ESYS, "bind %s", endpoint);
    zmq_close(s);
    return rc;
  }
  *sock = s;
  return TFX_OK;
}

void tfx_net_close(void *sock) {
  if (!sock) {
    return;
  }
  int zero = 0;
  zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(sock);
}

void tfx_reply_init(tfx_envelope *env, const tfx_inmsg *m) {
  tfx_wire_request(env, TFX__MSG_TYPE__MSG_REPLY);
  env->request_id = m->env ? m->env->request_id : 0;
}

int tfx_server_reply_error(void *sock, const tfx_inmsg *m, int code, const char *text, tfx_err *err) {
  if (!m->has_identity) {
    return TFX_OK;
  }
  tfx_envelope env;
  tfx_reply_init(&env, m);
  env.code = code;
  env.error = (char *)text;
  return tfx_wire_send(sock, &m->identity, &env, NULL, 0, err);
}

static int client_connect(tfx_client *c, tfx_err *err) {
  c->sock = zmq_socket(tfx_net_context(), ZMQ_DEALER);
  if (!c->sock) {
    return tfx_err_sys(err, TFX_ESYS, "zmq_socket(DEALER)");
  }
  set_common(c->sock);
  int ivl = 100;
  zmq_setsockopt(c->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
  int rc = tfx_curve_client(c->sock, err);
  if (rc) {
    zmq_close(c->sock);
    c->sock = NULL;
    return rc;
  }
  tfx_linkwatch_add(tfx_net_context(), c->sock, c->endpoint, LINK_BUFFER_BYTES);
  if (zmq_connect(c->sock, c->endpoint)) {
    rc = tfx_err_sys(err, TFX_ECONFIG, "connect %s", c->endpoint);
    zmq_close(c->sock);
    c->sock = NULL;
    return rc;
  }
  return TFX_OK;
}

int tfx_client_create(const char *endpoint, tfx_client **out, tfx_err *err) {
  tfx_client *c = calloc(1, sizeof *c);
  if (!c) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
  c->next_id = 1;
  int rc = client_connect(c, err);
  if (rc) {
    free(c);
    return rc;
  }
  *out = c;
  return TFX_OK;
}

void tfx_client_destroy(tfx_client *c) {
  if (!c) {
    return;
  }
  tfx_net_close(c->sock);
  free(c);
}

int tfx_client_reset(tfx_client *c, tfx_err *err) {
  tfx_net_close(c->sock);
  c->sock = NULL;
  return client_connect(c, err);
}

const char *tfx_client_endpoint(const tfx_client *c) {
  return c->endpoint;
}

void *tfx_client_socket(const tfx_client *c) {
  return c->sock;
}

int tfx_client_lost(const tfx_client *c) {
  return tfx_linkwatch_disconnects(c->sock) != c->lost_at_send;
}

unsigned tfx_client_disconnects(const tfx_client *c) {
  return tfx_linkwatch_disconnects(c->sock);
}

int tfx_client_send(tfx_client *c, tfx_envelope *env, const tfx_payload *payloads, int n, tfx_err *err) {
  env->request_id = c->next_id++;
  c->pending_id = env->request_id;
  c->lost_at_send = tfx_linkwatch_disconnects(c->sock);
  return tfx_wire_send(c->sock, NULL, env, payloads, n, err);
}

int tfx_client_send_part(tfx_client *c, tfx_envelope *env, const tfx_payload *payloads, int n, tfx_err *err) {
  env->request_id = c->pending_id;
  return tfx_wire_send(c->sock, NULL, env, payloads, n, err);
}

static int reply_code(tfx_client *c, tfx_inmsg *reply, tfx_err *err) {
  if (reply->env->code == 0) {
    return TFX_OK;
  }
  int code = reply->env->code > 0 && reply->env->code < TFX_ERR_COUNT ? reply->env->code : TFX_EPROTO;
  return tfx_err_set(err, code, "%s: %s", c->endpoint, reply->env->error ? reply->env->error : "error");
}

int tfx_net_readable(void *sock) {
  int events = 0;
  size_t size = sizeof events;
  return zmq_getsockopt(sock, ZMQ_EVENTS, &events, &size) == 0 && (events & ZMQ_POLLIN);
}

/* Waits up to `left` ms for the client's socket to be readable, in slices: a connection lost after the request
 * went out (the peer died with it) ends the wait early. A reply already there is taken without a poll (the
 * second ps's reply of a step often is). Returns zmq_poll's count, or -2 for a lost connection. */
static int wait_readable(tfx_client *c, int64_t left) {
  if (tfx_net_readable(c->sock)) {
    return 1;
  }
  for (;;) {
    zmq_pollitem_t item = {c->sock, 0, ZMQ_POLLIN, 0};
    long slice = left < LOST_CHECK_MS ? (long)left : LOST_CHECK_MS;
    int n = slice > 0 ? zmq_poll(&item, 1, slice) : 0;
    if (n != 0 || (left -= slice) <= 0) {
      return n;
    }
    if (tfx_linkwatch_disconnects(c->sock) != c->lost_at_send) {
      return -2;
    }
  }
}

int tfx_client_recv(tfx_client *c, tfx_inmsg *reply, int timeout_ms, tfx_err *err) {
  memset(reply, 0, sizeof *reply);
  int64_t deadline = tfx_now_ms() + timeout_ms;
  for (;;) {
    int n = wait_readable(c, deadline - tfx_now_ms());
    if (n == -1 && errno == EINTR) {
      return tfx_err_set(err, TFX_EINTR, "%s: interrupted", c->endpoint);
    }
    if (n == -2) {
      return tfx_err_set(err, TFX_EPEER, "%s: the connection was lost before the reply (the peer restarted?)",
                         c->endpoint);
    }
    if (n <= 0) {
      return tfx_err_set(err, TFX_EPEER, "%s: no reply within %d ms", c->endpoint, timeout_ms);
    }
    tfx_err derr;
    int rc = tfx_wire_recv(c->sock, 0, reply, &derr);
    if (rc) {
      tfx_inmsg_fini(reply);
      return tfx_err_set(err, rc, "%s: bad reply: %s", c->endpoint, derr.msg);
    }
    if (reply->env->type == TFX__MSG_TYPE__MSG_REPLY && reply->env->request_id == c->pending_id) {
      return reply_code(c, reply, err);
    }
    tfx_inmsg_fini(reply); /* a late reply to an earlier request */
  }
}

int tfx_client_call(tfx_client *c, tfx_envelope *env, const tfx_payload *payloads, int n, tfx_inmsg *reply,
                    int timeout_ms, tfx_err *err) {
  int rc = tfx_client_send(c, env, payloads, n, err);
  if (rc) {
    return rc;
  }
  return tfx_client_recv(c, reply, timeout_ms, err);
}
