/* Process-wide CURVE setting, the ZAP handler thread and the handshake monitors of server sockets. */
#include "net/curve.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/keys.h"
#include "net/monitor.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "tfx"
#define MAX_MONITORS 16
/* Protocol failures are refusals; NO_DETAIL (a peer that hung up mid-handshake: a port probe, a client that gave
 * up) is not counted, and AUTH failures are the ZAP handler's to count. */
#define MONITOR_EVENTS (ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_MONITOR_STOPPED)

/* The installed keys: written by the main thread before any socket exists, then only read. */
static struct {
  int on;
  tfx_keypair server, client;
  tfx_keylist authorized;
} setup;

/* The ZAP thread of the current context. */
static struct {
  pthread_t thread;
  int running;
  void *ctx;
  atomic_int stop;
  atomic_int n_monitors;  /* monitor endpoints opened so far; the ZAP thread connects to the new ones */
  atomic_int n_connected; /* ... and how many it has connected to */
  sem_t ready;
  int bind_errno;
} zap;

static atomic_uint_fast64_t rejected;

int tfx_curve_enabled(void) {
  return setup.on;
}

const char *tfx_curve_client_public(void) {
  return setup.on ? setup.client.public_key : "";
}

uint64_t tfx_curve_rejected(void) {
  return (uint64_t)atomic_load(&rejected);
}

/* Why a connection was refused; each kind has its own log budget, so the first of every kind is logged. */
typedef enum refusal {
  REFUSAL_NO_CURVE,
  REFUSAL_UNKNOWN_KEY,
  REFUSAL_WRONG_SERVER_KEY,
  REFUSAL_OTHER,
  REFUSAL_KINDS
} refusal;
static atomic_uint_fast64_t refused_by_kind[REFUSAL_KINDS];

/* Counts one refusal and logs it at the 1st, 2nd, 4th, 8th... of its kind, so a client that keeps reconnecting
 * cannot flood the log. */
static void count_refusal(refusal kind, const char *what, const char *peer, const char *why) {
  uint64_t total = (uint64_t)atomic_fetch_add(&rejected, 1) + 1;
  uint64_t n = (uint64_t)atomic_fetch_add(&refused_by_kind[kind], 1) + 1;
  if ((n & (n - 1)) == 0) {
    tfx_log(TFX_LOG_WARN, "NET-REJECT", "refused %s %s: %s (%llu of this kind, %llu refused so far)", what, peer, why,
            (unsigned long long)n, (unsigned long long)total);
  }
}

/* ---- ZAP handler (RFC 27) ---- */

typedef struct zap_request {
  char frames[8][64];
  size_t sizes[8];
  int n;
} zap_request;

/* Receives every frame of one request (frames beyond 8, or bytes beyond 64, are dropped). */
static int zap_recv(void *rep, zap_request *r) {
  int more = 1;
  r->n = 0;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, rep, 0) < 0) {
      zmq_msg_close(&m);
      return -1;
    }
    if (r->n < 8) {
      size_t len = zmq_msg_size(&m) < 63 ? zmq_msg_size(&m) : 63;
      memcpy(r->frames[r->n], zmq_msg_data(&m), len);
      r->frames[r->n][len] = '\0';
      r->sizes[r->n++] = zmq_msg_size(&m);
    }
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  }
  return 0;
}

static void zap_reply(void *rep, const zap_request *r, const char *code, const char *text) {
  const char *request_id = r->n > 1 ? r->frames[1] : "";
  size_t id_len = r->n > 1 ? (r->sizes[1] < 63 ? r->sizes[1] : 63) : 0;
  zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
  zmq_send(rep, request_id, id_len, ZMQ_SNDMORE);
  zmq_send(rep, code, strlen(code), ZMQ_SNDMORE);
  zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
  zmq_send(rep, strcmp(code, "200") ? "" : "tfx", strcmp(code, "200") ? 0 : 3, ZMQ_SNDMORE);
  zmq_send(rep, "", 0, 0);
}

/* Frames: version, request id, domain, address, routing id, mechanism, credentials (the client's key). */
static void zap_handle(void *rep) {
  zap_request r;
  if (zap_recv(rep, &r)) {
    return;
  }
  int curve = r.n >= 7 && !strcmp(r.frames[5], "CURVE") && r.sizes[6] == 32;
  if (r.n < 6 || strcmp(r.frames[0], "1.0")) {
    zap_reply(rep, &r, "500", "malformed ZAP request");
    return;
  }
  char peer[80], key[TFX_KEY_Z85_LEN + 1] = "?";
  tfx_log_escape(r.frames[3], strlen(r.frames[3]), peer, sizeof peer);
  if (curve && tfx_keylist_has(&setup.authorized, (const unsigned char *)r.frames[6])) {
    zap_reply(rep, &r, "200", "OK");
    return;
  }
  if (curve) {
    zmq_z85_encode(key, (const uint8_t *)r.frames[6], 32);
  }
  zap_reply(rep, &r, "400", "client key not authorized");
  char why[128];
  snprintf(why, sizeof why, "%s client key %s is not authorized", curve ? "CURVE" : r.frames[5], key);
  count_refusal(curve ? REFUSAL_UNKNOWN_KEY : REFUSAL_OTHER, "a connection from", peer[0] ? peer : "?", why);
}

/* ---- handshake monitors ---- */

static refusal handshake_kind(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
    return REFUSAL_NO_CURVE;
  }
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
    return REFUSAL_WRONG_SERVER_KEY;
  }
  return REFUSAL_OTHER;
}

static const char *const handshake_reasons[] = {
    [REFUSAL_NO_CURVE] = "the client does not use CURVE (no key configured)",
    [REFUSAL_WRONG_SERVER_KEY] = "the client's handshake does not decrypt (a wrong server key)",
    [REFUSAL_UNKNOWN_KEY] = "unknown client key",
    [REFUSAL_OTHER] = "the handshake broke the protocol (not a ZMTP/CURVE client)",
};

/* Reads one event; returns 1 when the monitored socket closed (the monitor is done). */
static int monitor_handle(void *mon) {
  uint16_t event;
  uint32_t value;
  char where[80];
  int got = tfx_monitor_next(mon, &event, &value, where, sizeof where);
  if (got == 1 && event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    refusal kind = handshake_kind(event, value);
    char why[160];
    snprintf(why, sizeof why, "%s (event 0x%x, error 0x%x)", handshake_reasons[kind], (unsigned)event, (unsigned)value);
    count_refusal(kind, "a client of", where, why);
  }
  return got < 0 || (got == 1 && event == ZMQ_EVENT_MONITOR_STOPPED);
}

static void monitor_endpoint(int i, char *buf, size_t n) {
  snprintf(buf, n, "inproc://tfx-curve-monitor-%d", i);
}

/* Connects a PAIR to each monitor endpoint opened since the last call. */
static void connect_monitors(void *mons[], int *connected) {
  int n = atomic_load(&zap.n_monitors);
  for (; *connected < n && *connected < MAX_MONITORS; (*connected)++) {
    char ep[64];
    monitor_endpoint(*connected, ep, sizeof ep);
    mons[*connected] = zmq_socket(zap.ctx, ZMQ_PAIR);
    if (mons[*connected] && zmq_connect(mons[*connected], ep)) {
      zmq_close(mons[*connected]);
      mons[*connected] = NULL;
    }
  }
  atomic_store(&zap.n_connected, *connected);
}

static void close_all(void *rep, void *mons[], int n) {
  for (int i = 0; i < n; i++) {
    if (mons[i]) {
      tfx_monitor_close(mons[i]);
    }
  }
  tfx_monitor_close(rep);
}

/* The ZAP thread: owns the ZAP REP socket and the monitors' PAIR sockets; polls them until told to stop. */
static void *zap_main(void *arg) {
  (void)arg;
  void *rep = zmq_socket(zap.ctx, ZMQ_REP), *mons[MAX_MONITORS] = {0};
  zap.bind_errno = !rep ? zmq_errno() : zmq_bind(rep, ZAP_ENDPOINT) ? zmq_errno() : 0;
  sem_post(&zap.ready);
  if (zap.bind_errno) {
    if (rep) {
      zmq_close(rep);
    }
    return NULL;
  }
  int connected = 0;
  while (!atomic_load(&zap.stop)) {
    connect_monitors(mons, &connected);
    zmq_pollitem_t items[1 + MAX_MONITORS];
    int map[1 + MAX_MONITORS], n = 1;
    items[0] = (zmq_pollitem_t){rep, 0, ZMQ_POLLIN, 0};
    for (int i = 0; i < connected; i++) {
      if (mons[i]) {
        map[n] = i;
        items[n++] = (zmq_pollitem_t){mons[i], 0, ZMQ_POLLIN, 0};
      }
    }
    if (zmq_poll(items, n, 50) <= 0) {
      continue;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      zap_handle(rep);
    }
    for (int k = 1; k < n; k++) {
      if ((items[k].revents & ZMQ_POLLIN) && monitor_handle(mons[map[k]])) {
        zmq_close(mons[map[k]]);
        mons[map[k]] = NULL;
      }
    }
  }
  close_all(rep, mons, connected);
  return NULL;
}

static int zap_start(void *ctx, tfx_err *err) {
  if (zap.running && zap.ctx == ctx) {
    return TFX_OK;
  }
  tfx_curve_stop();
  zap.ctx = ctx;
  atomic_store(&zap.stop, 0);
  atomic_store(&zap.n_monitors, 0);
  atomic_store(&zap.n_connected, 0);
  sem_init(&zap.ready, 0, 0);
  if (pthread_create(&zap.thread, NULL, zap_main, NULL)) {
    sem_destroy(&zap.ready);
    return tfx_err_set(err, TFX_ESYS, "cannot start the ZAP handler thread");
  }
  while (sem_wait(&zap.ready) && errno == EINTR) {
  }
  sem_destroy(&zap.ready);
  zap.running = 1;
  if (zap.bind_errno) {
    int e = zap.bind_errno;
    tfx_curve_stop();
    return tfx_err_set(err, TFX_ESYS, "bind the ZAP handler at %s: %s", ZAP_ENDPOINT, zmq_strerror(e));
  }
  return TFX_OK;
}

void tfx_curve_stop(void) {
  if (zap.running) {
    atomic_store(&zap.stop, 1);
    pthread_join(zap.thread, NULL);
  }
  uint64_t n = tfx_curve_rejected();
  if (zap.running && n) {
    tfx_log(TFX_LOG_WARN, "NET-REJECTED", "refused %llu connection(s) in all (see the NET-REJECT lines)",
            (unsigned long long)n);
  }
  zap.running = 0;
  zap.ctx = NULL;
}

void tfx_curve_forget(void) {
  zap.running = 0;
  zap.ctx = NULL;
}

/* ---- sockets ---- */

static int setopt(void *sock, int opt, const void *val, size_t len, const char *name, tfx_err *err) {
  if (zmq_setsockopt(sock, opt, val, len)) {
    return tfx_err_set(err, TFX_ESYS, "zmq_setsockopt(%s): %s", name, zmq_strerror(zmq_errno()));
  }
  return TFX_OK;
}

int tfx_curve_server(void *ctx, void *sock, tfx_err *err) {
  if (!setup.on) {
    return TFX_OK;
  }
  int one = 1, rc = zap_start(ctx, err);
  if (rc || (rc = setopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one, "ZMQ_CURVE_SERVER", err)) ||
      (rc = setopt(sock, ZMQ_CURVE_SECRETKEY, setup.server.secret_key, TFX_KEY_Z85_LEN + 1, "ZMQ_CURVE_SECRETKEY",
                   err)) ||
      (rc = setopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN), "ZMQ_ZAP_DOMAIN", err))) {
    return rc;
  }
  int i = atomic_load(&zap.n_monitors);
  char ep[64];
  monitor_endpoint(i, ep, sizeof ep);
  if (i < MAX_MONITORS && zmq_socket_monitor(sock, ep, MONITOR_EVENTS) == 0) {
    atomic_store(&zap.n_monitors, i + 1);
    /* libzmq blocks the I/O thread on an event until a reader is connected: wait for the ZAP thread's. */
    for (int64_t end = tfx_now_ms() + 2000; atomic_load(&zap.n_connected) <= i && tfx_now_ms() < end;) {
      usleep(1000);
    }
  }
  return TFX_OK;
}

int tfx_curve_client(void *sock, tfx_err *err) {
  if (!setup.on) {
    return TFX_OK;
  }
  int rc = setopt(sock, ZMQ_CURVE_SERVERKEY, setup.server.public_key, TFX_KEY_Z85_LEN + 1, "ZMQ_CURVE_SERVERKEY", err);
  if (!rc) {
    rc = setopt(sock, ZMQ_CURVE_PUBLICKEY, setup.client.public_key, TFX_KEY_Z85_LEN + 1, "ZMQ_CURVE_PUBLICKEY", err);
  }
  if (!rc) {
    rc = setopt(sock, ZMQ_CURVE_SECRETKEY, setup.client.secret_key, TFX_KEY_Z85_LEN + 1, "ZMQ_CURVE_SECRETKEY", err);
  }
  return rc;
}

/* ---- configuration ---- */

void tfx_curve_reset(void) {
  tfx_keylist_fini(&setup.authorized);
  memset(&setup, 0, sizeof setup);
  atomic_store(&rejected, 0);
  for (int i = 0; i < REFUSAL_KINDS; i++) {
    atomic_store(&refused_by_kind[i], 0);
  }
}

/* The client key pair: security.client_key, or else the server key file (then it must hold the secret). */
static int read_client(const tfx_config *cfg, const tfx_keypair *server, tfx_keypair *client, tfx_err *err) {
  if (!cfg->client_key[0]) {
    *client = *server;
  } else {
    int rc = tfx_keys_read(cfg->client_key, client, err);
    if (rc) {
      return rc;
    }
  }
  if (!client->secret_key[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "security.client_key %s holds no secret key (give this node's NAME.key)",
                       cfg->client_key[0] ? cfg->client_key : cfg->server_key);
  }
  return TFX_OK;
}

/* Reads every key cfg names; the caller installs them (on failure, nothing changes; *auth may need freeing). */
static int read_setup(const tfx_config *cfg, int serves, tfx_keypair *server, tfx_keypair *client, tfx_keylist *auth,
                      tfx_err *err) {
  if (!cfg->server_key[0]) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "security.server_key is not set, but security.%s is: a secured cluster needs the server key",
                       cfg->client_key[0] ? "client_key" : "authorized_keys");
  }
  int rc = tfx_keys_read(cfg->server_key, server, err);
  if (!rc && serves && !server->secret_key[0]) {
    rc = tfx_err_set(err, TFX_ECONFIG,
                     "security.server_key %s holds only a public key, but this process serves: give the .key file",
                     cfg->server_key);
  }
  if (rc || (rc = read_client(cfg, server, client, err))) {
    return rc;
  }
  if (cfg->authorized_keys[0]) {
    return tfx_keys_read_authorized(cfg->authorized_keys, auth, err);
  }
  unsigned char raw[32];
  zmq_z85_decode(raw, client->public_key);
  auth->keys = malloc(sizeof *auth->keys);
  if (!auth->keys) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  memcpy(auth->keys[0], raw, 32);
  auth->n = 1;
  return TFX_OK;
}

int tfx_curve_configure(const tfx_config *cfg, int serves, tfx_err *err) {
  int named = cfg->server_key[0] || cfg->client_key[0] || cfg->authorized_keys[0];
  if (named && cfg->security_plaintext) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "security.plaintext is true but keys are named (security.server_key '%s'): choose one",
                       cfg->server_key);
  }
  if (named && !zmq_has("curve")) {
    return tfx_err_set(err, TFX_ESYS, "this libzmq was built without CURVE (zmq_has(\"curve\") is false)");
  }
  tfx_keypair server, client;
  tfx_keylist auth = {NULL, 0};
  int rc = named ? read_setup(cfg, serves, &server, &client, &auth, err) : TFX_OK;
  if (rc) {
    tfx_keylist_fini(&auth);
    return rc;
  }
  tfx_curve_reset();
  if (named) {
    setup.on = 1;
    setup.server = server;
    setup.client = client;
    setup.authorized = auth;
    unsigned char raw[32];
    zmq_z85_decode(raw, client.public_key);
    if (serves && !tfx_keylist_has(&auth, raw)) {
      tfx_log(TFX_LOG_WARN, "NET-CURVE-SELF",
              "this node's client key %s is not among the authorized keys (%s): other nodes will refuse it",
              client.public_key, cfg->authorized_keys);
    }
  }
  memset(&server, 0, sizeof server);
  memset(&client, 0, sizeof client);
  return TFX_OK;
}
