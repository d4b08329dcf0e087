/* Unit tests of src/net/curve.c and the security options of config.c: which experiments install CURVE and
 * which are refused, TFX_SECURITY_* variables, and real CURVE sockets over tcp://127.0.0.1 where an authorized
 * client is answered while a client without CURVE, one with an unknown key and one with the wrong server key
 * are refused and counted. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "net/curve.h"
#include "net/keys.h"
#include "net/net.h"
#include "net/wire.h"
#include "server.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("curve");
}

static void teardown(void) {
  tfx_net_shutdown();
  tfx_curve_reset();
  tmpdir_remove();
}

TestSuite(curve, .init = setup, .fini = teardown, .timeout = 60);

/* Generates tmp/NAME.key and tmp/NAME.pub; fills *k. */
static void make_key(const char *name, tfx_keypair *k) {
  tfx_err err = {0};
  cr_assert_eq(tfx_keys_generate(tmp, name, k, &err), TFX_OK, "%s", err.msg);
}

static void set_path(char *field, const char *name) {
  snprintf(field, TFX_PATH_MAX, "%s/%s", tmp, name);
}

/* An experiment with the server key, the client key and the authorized keys given (NULL: not set). */
static void config_with(tfx_config *cfg, const char *server, const char *client, const char *authorized) {
  tfx_config_init(cfg);
  if (server) {
    set_path(cfg->server_key, server);
  }
  if (client) {
    set_path(cfg->client_key, client);
  }
  if (authorized) {
    set_path(cfg->authorized_keys, authorized);
  }
}

Test(curve, no_keys_means_plaintext_and_keys_mean_curve) {
  tfx_config cfg;
  tfx_keypair s, c;
  tfx_err err = {0};
  config_with(&cfg, NULL, NULL, NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_OK, "%s", err.msg);
  cr_assert_not(tfx_curve_enabled());
  cr_assert_str_eq(tfx_curve_client_public(), "");
  make_key("server", &s);
  make_key("client", &c);
  config_with(&cfg, "server.key", "client.key", "client.pub");
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_OK, "%s", err.msg);
  cr_assert(tfx_curve_enabled());
  cr_assert_str_eq(tfx_curve_client_public(), c.public_key);
  /* The server key alone: every node shares one pair, which is also the one client key admitted. */
  config_with(&cfg, "server.key", NULL, NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(tfx_curve_client_public(), s.public_key);
}

Test(curve, contradictory_or_incomplete_settings_are_refused_before_anything_changes) {
  tfx_config cfg;
  tfx_keypair s, c;
  tfx_err err = {0};
  make_key("server", &s);
  make_key("client", &c);
  config_with(&cfg, "server.key", NULL, NULL);
  cfg.security_plaintext = 1;
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "security.plaintext is true") && strstr(err.msg, "choose one"), "%s", err.msg);
  config_with(&cfg, "server.pub", "client.key", NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "server.pub holds only a public key"), "%s", err.msg);
  cr_assert_eq(tfx_curve_configure(&cfg, 0, &err), TFX_OK, "a client-only tool needs only the public key: %s", err.msg);
  cr_assert(tfx_curve_enabled());
  config_with(&cfg, "server.key", "client.pub", NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "client.pub holds no secret key"), "%s", err.msg);
  cr_assert(tfx_curve_enabled(), "a refused setting must leave the installed one");
  config_with(&cfg, NULL, "client.key", NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "security.server_key is not set"), "%s", err.msg);
  config_with(&cfg, "server.key", NULL, "nowhere");
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "nowhere"), "%s", err.msg);
}

Test(curve, a_loose_secret_key_stops_the_configuration) {
  tfx_config cfg;
  tfx_keypair s;
  tfx_err err = {0};
  char p[256];
  make_key("server", &s);
  snprintf(p, sizeof p, "%s/server.key", tmp);
  cr_assert_eq(chmod(p, 0644), 0);
  config_with(&cfg, "server.key", NULL, NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, p) && strstr(err.msg, "mode 0644"), "%s", err.msg);
  cr_assert_not(tfx_curve_enabled());
}

Test(curve, security_options_come_from_the_environment_and_set_overrides_them) {
  tfx_config cfg;
  tfx_err err = {0};
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg, "{\"security\": {\"server_key\": \"file.key\"}}", "test", &err), TFX_OK, "%s",
               err.msg);
  setenv("TFX_SECURITY_SERVER_KEY", "/env/server.key", 1);
  setenv("TFX_SECURITY_AUTHORIZED_KEYS", "/env/authorized", 1);
  cr_assert_eq(tfx_config_apply_env(&cfg, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(cfg.server_key, "/env/server.key");
  cr_assert_str_eq(cfg.authorized_keys, "/env/authorized");
  cr_assert_str_eq(cfg.client_key, "");
  cr_assert_eq(tfx_config_set(&cfg, "security.server_key=/flag/server.key", &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(cfg.server_key, "/flag/server.key");
  setenv("TFX_SECURITY_PLAINTEXT", "yes", 1);
  cr_assert_eq(tfx_config_apply_env(&cfg, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "TFX_SECURITY_PLAINTEXT"), "%s", err.msg);
  setenv("TFX_SECURITY_PLAINTEXT", "true", 1);
  cr_assert_eq(tfx_config_apply_env(&cfg, &err), TFX_OK, "%s", err.msg);
  cr_assert(cfg.security_plaintext);
  unsetenv("TFX_SECURITY_SERVER_KEY"), unsetenv("TFX_SECURITY_AUTHORIZED_KEYS"), unsetenv("TFX_SECURITY_PLAINTEXT");
  cr_assert_eq(tfx_config_parse(&cfg, "{\"security\": {\"password\": \"x\"}}", "test", &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "security.password"), "%s", err.msg);
}

/* ---- real sockets ---- */

/* A raw DEALER: plaintext when client_public is NULL, else CURVE with these keys. */
static void *raw_client(const char *endpoint, const char *server_public, const char *client_public,
                        const char *client_secret) {
  void *s = zmq_socket(tfx_net_context(), ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  if (client_public) {
    cr_assert_eq(zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_public, 41), 0);
    cr_assert_eq(zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, client_public, 41), 0);
    cr_assert_eq(zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, client_secret, 41), 0);
  }
  cr_assert_eq(zmq_connect(s, endpoint), 0);
  return s;
}

/* Sends a STATUS request from s; returns 1 if the server received it within ms (and takes it). */
static int server_hears(void *server, void *s, int ms) {
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  tfx_wire_send(s, NULL, &env, NULL, 0, NULL);
  zmq_pollitem_t item = {server, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&item, 1, ms) != 1) {
    return 0;
  }
  tfx_inmsg m;
  cr_assert_eq(tfx_wire_recv(server, 1, &m, NULL), TFX_OK);
  tfx_inmsg_fini(&m);
  return 1;
}

static void wait_rejected(uint64_t want) {
  for (int i = 0; i < 100 && tfx_curve_rejected() < want; i++) {
    usleep(20000);
  }
}

Test(curve, only_authorized_clients_get_through_and_refusals_are_counted) {
  tfx_config cfg;
  tfx_keypair s, c;
  tfx_err err = {0};
  make_key("server", &s);
  make_key("client", &c);
  config_with(&cfg, "server.key", "client.key", "client.pub");
  cr_assert_eq(tfx_curve_configure(&cfg, 1, &err), TFX_OK, "%s", err.msg);
  char endpoint[64];
  void *server = open_server(endpoint, sizeof endpoint);

  /* The node's own client (tfx_client: CURVE with the configured keys) is answered. */
  tfx_client *client = NULL;
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  cr_assert(server_hears(server, tfx_client_socket(client), 5000), "an authorized client was not heard");
  cr_assert_eq(tfx_curve_rejected(), 0);

  /* No CURVE at all: the handshake fails (mechanism mismatch). */
  void *plain = raw_client(endpoint, NULL, NULL, NULL);
  cr_assert_not(server_hears(server, plain, 1000), "a plaintext client got through");
  wait_rejected(1);
  cr_assert_geq(tfx_curve_rejected(), 1, "the plaintext client was not counted");

  /* A valid CURVE key the cluster does not know: the ZAP handler denies it. */
  char pub[41], sec[41];
  cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
  uint64_t before = tfx_curve_rejected();
  void *stranger = raw_client(endpoint, s.public_key, pub, sec);
  cr_assert_not(server_hears(server, stranger, 1000), "an unknown key got through");
  wait_rejected(before + 1);
  cr_assert_gt(tfx_curve_rejected(), before, "the unknown key was not counted");

  /* The right client key but the wrong server key: the handshake does not decrypt. */
  char fake_server[41], fake_secret[41];
  cr_assert_eq(zmq_curve_keypair(fake_server, fake_secret), 0);
  before = tfx_curve_rejected();
  void *confused = raw_client(endpoint, fake_server, c.public_key, c.secret_key);
  cr_assert_not(server_hears(server, confused, 1000), "a client with the wrong server key got through");
  wait_rejected(before + 1);
  cr_assert_gt(tfx_curve_rejected(), before, "the wrong server key was not counted");

  /* ...while the authorized client still gets through. */
  cr_assert(server_hears(server, tfx_client_socket(client), 5000), "the authorized client lost its connection");
  tfx_net_close(plain), tfx_net_close(stranger), tfx_net_close(confused);
  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown();
}

Test(curve, a_plaintext_server_does_not_talk_to_a_curve_client) {
  tfx_config cfg;
  tfx_keypair s;
  tfx_err err = {0};
  char endpoint[64];
  void *server = open_server(endpoint, sizeof endpoint); /* installed: nothing, so plaintext */
  make_key("server", &s);
  config_with(&cfg, "server.key", NULL, NULL);
  cr_assert_eq(tfx_curve_configure(&cfg, 0, &err), TFX_OK, "%s", err.msg);
  tfx_client *client = NULL;
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  cr_assert_not(server_hears(server, tfx_client_socket(client), 1000),
                "a CURVE client must not fall back to plaintext");
  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown();
}
