/* Unit tests of src/net/wire.c and src/net/net.c: the envelope codec and its validation, fuzzed
 * input, and real ZeroMQ round trips over tcp://127.0.0.1 with kernel-chosen ports. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "net/net.h"
#include "net/wire.h"
#include "server.h"

static void teardown(void) {
  tfx_wire_set_sender(TFX__ROLE__ROLE_NONE, 0);
  tfx_wire_set_max_frame(0);
}

/* Socket tests close their sockets and call tfx_net_shutdown themselves: after a failed assertion sockets may
 * still be open, and zmq_ctx_term would then block; the timeout bounds any hang. */
TestSuite(wire, .fini = teardown, .timeout = 30);

/* A PUSH of two float32 tensors (shapes [2,3] and [3]) whose bytes follow in two frames. */
typedef struct sample {
  tfx_envelope env;
  tfx_tensor_meta t[2], *tp[2];
  int64_t s0[2], s1[1];
  float kernel[6], bias[3];
} sample;

static void sample_init(sample *s, int with_trailing_fields) {
  static char *names[] = {"dense_1/kernel", "dense_1/bias"};
  static Tfx__KeyValue kv = TFX__KEY_VALUE__INIT, *kvp[] = {&kv};
  tfx_wire_request(&s->env, TFX__MSG_TYPE__MSG_PUSH);
  s->env.request_id = 77;
  s->env.step = 1234;
  s->env.text = "push from worker";
  for (int i = 0; i < 6; i++) {
    s->kernel[i] = 0.5f * (float)i - 1.0f;
  }
  for (int i = 0; i < 3; i++) {
    s->bias[i] = 10.0f + (float)i;
  }
  s->s0[0] = 2, s->s0[1] = 3, s->s1[0] = 3;
  for (int i = 0; i < 2; i++) {
    tfx__tensor__init(&s->t[i]);
    s->t[i].name = names[i];
    s->t[i].dtype = TFX__DTYPE__DTYPE_FLOAT32;
    s->t[i].version = 5 + (uint64_t)i;
    s->tp[i] = &s->t[i];
  }
  s->t[0].shape = s->s0, s->t[0].n_shape = 2, s->t[0].nbytes = sizeof s->kernel;
  s->t[1].shape = s->s1, s->t[1].n_shape = 1, s->t[1].nbytes = sizeof s->bias;
  s->env.tensors = s->tp, s->env.n_tensors = 2;
  if (with_trailing_fields) {
    kv.key = "loss";
    kv.value = 0.25;
    s->env.stats = kvp, s->env.n_stats = 1;
    s->env.names = names, s->env.n_names = 2;
    s->env.flag = 1;
    s->env.path = "/tmp/x";
  }
}

static const size_t sample_parts[2] = {24, 12};

Test(wire, dtype_sizes) {
  cr_assert_eq(tfx_wire_dtype_size(TFX__DTYPE__DTYPE_FLOAT32), 4);
  cr_assert_eq(tfx_wire_dtype_size(TFX__DTYPE__DTYPE_INT64), 8);
  cr_assert_eq(tfx_wire_dtype_size(2), 0);
  cr_assert_eq(tfx_wire_dtype_size(-1), 0);
}

Test(wire, request_carries_version_type_and_sender) {
  tfx_envelope env;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 3);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  cr_assert_eq(env.version, TFX_PROTOCOL_VERSION);
  cr_assert_eq(env.type, TFX__MSG_TYPE__MSG_PULL);
  cr_assert_eq(env.sender_role, TFX__ROLE__ROLE_WORKER);
  cr_assert_eq(env.sender_index, 3);
  cr_assert_eq(env.request_id, 0);
  cr_assert_eq(env.n_tensors, 0);
}

Test(wire, pack_unpack_round_trip) {
  sample s;
  sample_init(&s, 1);
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(&s.env, &len);
  cr_assert_not_null(buf);
  cr_assert_eq(len, tfx__envelope__get_packed_size(&s.env));
  tfx_envelope *out = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_wire_unpack(buf, len, sample_parts, 2, &out, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(out->version, TFX_PROTOCOL_VERSION);
  cr_assert_eq(out->type, TFX__MSG_TYPE__MSG_PUSH);
  cr_assert_eq(out->request_id, 77);
  cr_assert_eq(out->step, 1234);
  cr_assert_str_eq(out->text, "push from worker");
  cr_assert_eq(out->n_tensors, 2);
  cr_assert_str_eq(out->tensors[0]->name, "dense_1/kernel");
  cr_assert_eq(out->tensors[0]->n_shape, 2);
  cr_assert_eq(out->tensors[0]->shape[0], 2);
  cr_assert_eq(out->tensors[0]->shape[1], 3);
  cr_assert_eq(out->tensors[0]->nbytes, 24);
  cr_assert_eq(out->tensors[0]->version, 5);
  cr_assert_str_eq(out->tensors[1]->name, "dense_1/bias");
  cr_assert_eq(out->tensors[1]->nbytes, 12);
  cr_assert_eq(out->n_stats, 1);
  cr_assert_str_eq(out->stats[0]->key, "loss");
  cr_assert_eq(out->stats[0]->value, 0.25);
  cr_assert_eq(out->n_names, 2);
  cr_assert_str_eq(out->names[1], "dense_1/bias");
  cr_assert_eq(out->flag, 1);
  cr_assert_str_eq(out->path, "/tmp/x");
  tfx_wire_free_envelope(out);
  tfx_wire_free_envelope(NULL);
  free(buf);
}

/* Packs s.env and unpacks it against parts; returns the code, err gets the message. */
static int repack(const tfx_envelope *env, const size_t *parts, int n_parts, tfx_err *err) {
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(env, &len);
  tfx_envelope *sentinel = (tfx_envelope *)&sentinel, *out = sentinel;
  int rc = tfx_wire_unpack(buf, len, parts, n_parts, &out, err);
  free(buf);
  if (rc == TFX_OK) {
    tfx_wire_free_envelope(out);
  } else {
    cr_assert_eq(out, sentinel, "*out written on failure");
  }
  return rc;
}

#define assert_proto_error(rc, err, fragment)                                                   \
  do {                                                                                          \
    cr_assert_eq((rc), TFX_EPROTO, "rc %d (%s)", (rc), (err).msg);                              \
    cr_assert(strstr((err).msg, (fragment)) != NULL, "'%s' lacks '%s'", (err).msg, (fragment)); \
  } while (0)

Test(wire, unpack_rejects_wrong_version) {
  sample s;
  tfx_err err;
  sample_init(&s, 0);
  s.env.version = TFX_PROTOCOL_VERSION + 1;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "protocol version 5, this node speaks 4");
  s.env.version = 3; /* replication rode on MSG_PUSH flag bits then: refused by name */
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "protocol version 3, this node speaks 4");
  s.env.version = 2; /* async acknowledgements were not per worker then: refused by name */
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "protocol version 2, this node speaks 4");
  s.env.version = 1; /* rows were varints then: refused, not misread */
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "protocol version 1, this node speaks 4");
  s.env.version = 0;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "protocol version 0");
}

Test(wire, unpack_rejects_unknown_type) {
  sample s;
  tfx_err err;
  sample_init(&s, 0);
  s.env.type = TFX__MSG_TYPE__MSG_NONE;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "unknown message type 0");
  s.env.type = (Tfx__MsgType)42;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "unknown message type 42");
  s.env.type = (Tfx__MsgType)-3;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "unknown message type -3");
}

Test(wire, unpack_rejects_nbytes_that_disagree_with_the_shape) {
  sample s;
  tfx_err err;
  sample_init(&s, 0);
  s.t[0].nbytes = 20;
  const size_t parts[2] = {20, 12};
  assert_proto_error(repack(&s.env, parts, 2, &err), err, "tensor 0 'dense_1/kernel': nbytes 20 but shape holds 24");
  sample_init(&s, 0);
  s.t[1].dtype = TFX__DTYPE__DTYPE_INT64; /* 3 int64 = 24 bytes, not 12 */
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "nbytes 12 but shape holds 24");
}

Test(wire, unpack_rejects_bad_dtype_rank_and_dims) {
  sample s;
  tfx_err err;
  sample_init(&s, 0);
  s.t[1].dtype = (Tfx__DType)9;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "unknown dtype 9");

  sample_init(&s, 0);
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 3};
  s.t[1].shape = nine, s.t[1].n_shape = 9;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "rank 9 > 8");

  sample_init(&s, 0);
  int64_t neg[2] = {-2, -3};
  s.t[0].shape = neg;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "bad dim 0 = -2");

  /* Dims whose product overflows 64 bits must not wrap around to a small size. */
  sample_init(&s, 0);
  int64_t huge[2] = {(int64_t)1 << 33, (int64_t)1 << 33};
  s.t[0].shape = huge;
  assert_proto_error(repack(&s.env, sample_parts, 2, &err), err, "bad dim");
}

Test(wire, unpack_checks_frames_against_tensors) {
  sample s;
  tfx_err err;
  sample_init(&s, 0);
  const size_t one[1] = {24};
  assert_proto_error(repack(&s.env, one, 1, &err), err, "tensor 1 'dense_1/bias': frame of 0 bytes, want 12");
  const size_t three[3] = {24, 12, 8};
  assert_proto_error(repack(&s.env, three, 3, &err), err, "3 data frames for 2 tensors");
  const size_t swapped[2] = {12, 24};
  assert_proto_error(repack(&s.env, swapped, 2, &err), err, "frame of 12 bytes, want 24");
  assert_proto_error(repack(&s.env, NULL, 0, &err), err, "frame of 0 bytes, want 24");
  cr_assert_eq(repack(&s.env, sample_parts, 2, &err), TFX_OK, "%s", err.msg);
}

Test(wire, empty_tensors_take_no_frame_and_rows_scale_the_size) {
  sample s;
  tfx_err err = {0};
  sample_init(&s, 0);
  int64_t zero[2] = {0, 3};
  s.t[0].shape = zero, s.t[0].nbytes = 0;
  const size_t bias_only[1] = {12};
  cr_assert_eq(repack(&s.env, bias_only, 1, &err), TFX_OK, "%s", err.msg);

  /* Row-sparse: 2 rows of a [10, 3] variable hold 2 * 3 floats. */
  sample_init(&s, 0);
  int64_t whole[2] = {10, 3}, rows[2] = {1, 7};
  s.t[0].shape = whole, s.t[0].rows = rows, s.t[0].n_rows = 2, s.t[0].nbytes = 24;
  cr_assert_eq(repack(&s.env, sample_parts, 2, &err), TFX_OK, "%s", err.msg);
  s.t[0].nbytes = 120;
  const size_t dense_size[2] = {120, 12};
  assert_proto_error(repack(&s.env, dense_size, 2, &err), err, "nbytes 120 but shape holds 24");
}

Test(wire, row_ids_travel_fixed_width) {
  /* Protocol version 2: a tensor's row ids are 8 bytes each whatever their size (one copy each way, no varint), and
   * come back exactly, a 2^40 - 1 id included. */
  sample s;
  tfx_err err = {0};
  sample_init(&s, 0);
  int64_t whole[2] = {(int64_t)1 << 40, 3}, rows[3] = {1, 300, ((int64_t)1 << 40) - 1};
  s.t[0].shape = whole, s.t[0].nbytes = 24;
  s.t[0].rows = rows, s.t[0].n_rows = 2;
  size_t two = tfx__envelope__get_packed_size(&s.env);
  s.t[0].rows = rows + 1;
  size_t small = tfx__envelope__get_packed_size(&s.env);
  cr_assert_eq(two, small, "ids 1, 300 and 300, 2^40-1 pack to the same size");
  s.t[0].n_rows = 1, s.t[0].nbytes = 12;
  cr_assert_eq(small - tfx__envelope__get_packed_size(&s.env), 8, "one row id more is 8 bytes more");
  s.t[0].rows = rows, s.t[0].n_rows = 3, s.t[0].nbytes = 36;
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(&s.env, &len);
  const size_t parts[2] = {36, 12};
  tfx_envelope *out = NULL;
  cr_assert_eq(tfx_wire_unpack(buf, len, parts, 2, &out, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(out->tensors[0]->n_rows, 3);
  cr_assert_arr_eq(out->tensors[0]->rows, rows, sizeof rows);
  tfx_wire_free_envelope(out);
  free(buf);
}

Test(wire, unpack_rejects_undecodable_bytes) {
  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  tfx_envelope *out = NULL;
  tfx_err err;
  assert_proto_error(tfx_wire_unpack(junk, sizeof junk, NULL, 0, &out, &err), err, "Envelope: cannot decode 11 bytes");
  cr_assert_null(out);
}

Test(wire, every_prefix_of_a_packed_envelope_fails_cleanly) {
  /* The tensors field is the last one packed: every strict prefix either does not decode or lacks (part of) a
   * tensor, so the frames disagree. None may crash, all must fail. */
  sample s;
  sample_init(&s, 0);
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(&s.env, &len);
  cr_assert_gt(len, 60);
  for (size_t cut = 0; cut < len; cut++) {
    uint8_t *prefix = malloc(cut ? cut : 1); /* exact-size copy so ASan sees any overread */
    memcpy(prefix, buf, cut);
    tfx_envelope *out = NULL;
    tfx_err err = {0};
    int rc = tfx_wire_unpack(prefix, cut, sample_parts, 2, &out, &err);
    cr_assert_eq(rc, TFX_EPROTO, "prefix of %zu/%zu bytes: rc %d", cut, len, rc);
    cr_assert_null(out);
    free(prefix);
  }
  free(buf);
}

Test(wire, prefixes_with_trailing_fields_fail_or_decode_consistently) {
  /* With fields after the tensors, a prefix cut at a field boundary is a valid shorter message; what decodes
   * must agree with the original up to the cut, and most prefixes must fail. */
  sample s;
  sample_init(&s, 1);
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(&s.env, &len);
  size_t failed = 0;
  for (size_t cut = 0; cut < len; cut++) {
    uint8_t *prefix = malloc(cut ? cut : 1);
    memcpy(prefix, buf, cut);
    tfx_envelope *out = NULL;
    tfx_err err = {0};
    int rc = tfx_wire_unpack(prefix, cut, sample_parts, 2, &out, &err);
    if (rc == TFX_OK) {
      cr_assert_eq(out->type, TFX__MSG_TYPE__MSG_PUSH);
      cr_assert_eq(out->n_tensors, 2);
      cr_assert_eq(out->step, 1234);
      cr_assert_leq(out->n_names, 2);
      tfx_wire_free_envelope(out);
    } else {
      cr_assert_eq(rc, TFX_EPROTO);
      failed++;
    }
    free(prefix);
  }
  cr_assert_geq(failed, len * 3 / 4, "only %zu of %zu prefixes failed", failed, len);
  free(buf);
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

Test(wire, random_bytes_never_crash) {
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  int accepted = 0;
  for (int iter = 0; iter < 4000; iter++) {
    size_t len = xorshift(&seed) % 200;
    uint8_t *buf = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++) {
      buf[i] = (uint8_t)xorshift(&seed);
    }
    size_t parts[3] = {xorshift(&seed) % 64, xorshift(&seed) % 64, 4};
    int n_parts = (int)(xorshift(&seed) % 4);
    tfx_envelope *out = NULL;
    tfx_err err = {0};
    int rc = tfx_wire_unpack(buf, len, parts, n_parts, &out, &err);
    if (rc == TFX_OK) {
      /* Anything accepted must be internally consistent. */
      cr_assert_eq(out->version, TFX_PROTOCOL_VERSION);
      accepted++;
      tfx_wire_free_envelope(out);
    } else {
      cr_assert_eq(rc, TFX_EPROTO, "iteration %d: rc %d", iter, rc);
      cr_assert_neq(err.msg[0], '\0');
    }
    free(buf);
  }
  cr_assert_lt(accepted, 40, "%d random buffers accepted", accepted);
}

Test(wire, mutated_envelopes_never_crash) {
  sample s;
  sample_init(&s, 1);
  size_t len = 0;
  uint8_t *orig = tfx_wire_pack(&s.env, &len);
  uint64_t seed = 12345;
  for (int iter = 0; iter < 3000; iter++) {
    uint8_t *buf = malloc(len);
    memcpy(buf, orig, len);
    int flips = 1 + (int)(xorshift(&seed) % 4);
    for (int f = 0; f < flips; f++) {
      buf[xorshift(&seed) % len] ^= (uint8_t)(1u << (xorshift(&seed) % 8));
    }
    tfx_envelope *out = NULL;
    tfx_err err = {0};
    int rc = tfx_wire_unpack(buf, len, sample_parts, 2, &out, &err);
    if (rc == TFX_OK) {
      /* Accepted means validated: the tensors match the two frames. */
      size_t part = 0;
      for (size_t i = 0; i < out->n_tensors; i++) {
        if (out->tensors[i]->nbytes == 0) {
          continue;
        }
        cr_assert_lt(part, 2);
        cr_assert_eq(out->tensors[i]->nbytes, sample_parts[part]);
        part++;
      }
      cr_assert_eq(part, 2);
      tfx_wire_free_envelope(out);
    } else {
      cr_assert_eq(rc, TFX_EPROTO);
    }
    free(buf);
  }
  free(orig);
}

/* ---- ZeroMQ round trips ---- */

static int wait_readable(void *sock, int ms) {
  zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
  return zmq_poll(&item, 1, ms);
}

static int released;
static void on_release(void *data, void *hint) {
  (void)data;
  released += hint == (void *)&released;
}

Test(wire, push_over_tcp_with_two_payloads_and_an_error_reply) {
  char endpoint[256];
  void *server = open_server(endpoint, sizeof endpoint);
  tfx_client *client = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(tfx_client_endpoint(client), endpoint);
  cr_assert_not_null(tfx_client_socket(client));

  sample s;
  sample_init(&s, 0);
  released = 0;
  tfx_payload payloads[2] = {{s.kernel, sizeof s.kernel, 1, NULL, NULL},
                             {s.bias, sizeof s.bias, 0, on_release, &released}};
  cr_assert_eq(tfx_client_send(client, &s.env, payloads, 2, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(s.env.request_id, 1, "the client numbers its requests from 1");

  cr_assert_eq(wait_readable(server, 5000), 1, "the server got nothing");
  tfx_inmsg m;
  cr_assert_eq(tfx_wire_recv(server, 1, &m, &err), TFX_OK, "%s", err.msg);
  cr_assert(m.has_identity);
  cr_assert_eq(m.env->type, TFX__MSG_TYPE__MSG_PUSH);
  cr_assert_eq(m.env->request_id, 1);
  cr_assert_eq(m.env->step, 1234);
  cr_assert_eq(m.n_parts, 2);
  size_t size = 0;
  const void *p0 = tfx_inmsg_part(&m, 0, &size);
  cr_assert_eq(size, sizeof s.kernel);
  cr_assert_eq(memcmp(p0, s.kernel, size), 0);
  const void *p1 = tfx_inmsg_part(&m, 1, &size);
  cr_assert_eq(size, sizeof s.bias);
  cr_assert_eq(memcmp(p1, s.bias, size), 0);
  cr_assert_null(tfx_inmsg_part(&m, 2, &size));
  cr_assert_null(tfx_inmsg_part(&m, -1, &size));

  cr_assert_eq(tfx_server_reply_error(server, &m, TFX_ENOTFOUND, "no variable 'dense_9/kernel'", &err), TFX_OK, "%s",
               err.msg);
  tfx_inmsg_fini(&m);
  tfx_inmsg_fini(&m); /* finishing twice is fine */

  tfx_inmsg reply;
  int rc = tfx_client_recv(client, &reply, 5000, &err);
  cr_assert_eq(rc, TFX_ENOTFOUND, "rc %d: %s", rc, err.msg);
  cr_assert(strstr(err.msg, "no variable 'dense_9/kernel'") != NULL, "msg: %s", err.msg);
  cr_assert(strstr(err.msg, endpoint) != NULL, "the error names the peer: %s", err.msg);
  cr_assert_eq(reply.env->code, TFX_ENOTFOUND);
  tfx_inmsg_fini(&reply);

  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown();
  cr_assert_eq(released, 1, "the zero-copy payload was released exactly once");
}

Test(wire, frames_over_the_bound_are_refused_by_the_sender_and_cut_by_the_receiver) {
  static float big[32 << 10]; /* 128 KiB */
  char endpoint[256];
  tfx_wire_set_max_frame(64 << 10);
  cr_assert_eq(tfx_wire_max_frame(), (size_t)64 << 10);
  void *server = open_server(endpoint, sizeof endpoint); /* accepts 64 KiB frames, fixed at bind */
  tfx_client *client = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  sample s;
  sample_init(&s, 0);
  s.t[0].nbytes = sizeof big; /* the envelope is not checked on send; only the sizes matter here */
  released = 0;
  tfx_payload payloads[2] = {{big, sizeof big, 0, on_release, &released}, {s.bias, sizeof s.bias, 1, NULL, NULL}};
  int rc = tfx_client_send(client, &s.env, payloads, 2, &err);
  cr_assert_eq(rc, TFX_ECONFIG, "rc %d: %s", rc, err.msg);
  cr_assert(strstr(err.msg, "131072 bytes") && strstr(err.msg, "cluster.max_message_bytes"), "msg: %s", err.msg);
  cr_assert_eq(released, 1, "the refused zero-copy payload was released");
  cr_assert_eq(wait_readable(server, 300), 0, "nothing went out");

  /* A sender with a larger bound gets through its own check, and the server drops its connection at the header. */
  tfx_wire_set_max_frame(1 << 20);
  tfx_client_destroy(client);
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_client_send(client, &s.env, payloads, 2, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(wait_readable(server, 500), 0, "the server took a 128 KiB frame over its 64 KiB bound");
  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown();
}

Test(wire, reply_with_a_payload_and_stale_replies_are_dropped) {
  char endpoint[256];
  void *server = open_server(endpoint, sizeof endpoint);
  tfx_client *client = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);

  /* Two requests; the server answers both, the client only wants the second. */
  tfx_envelope req;
  tfx_wire_request(&req, TFX__MSG_TYPE__MSG_PULL);
  cr_assert_eq(tfx_client_send(client, &req, NULL, 0, &err), TFX_OK, "%s", err.msg);
  tfx_wire_request(&req, TFX__MSG_TYPE__MSG_PULL);
  cr_assert_eq(tfx_client_send(client, &req, NULL, 0, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(req.request_id, 2);

  for (int i = 0; i < 2; i++) {
    cr_assert_eq(wait_readable(server, 5000), 1);
    tfx_inmsg m;
    cr_assert_eq(tfx_wire_recv(server, 1, &m, &err), TFX_OK, "%s", err.msg);
    tfx_envelope rep;
    tfx_reply_init(&rep, &m);
    cr_assert_eq(rep.request_id, m.env->request_id);
    cr_assert_eq(rep.type, TFX__MSG_TYPE__MSG_REPLY);
    rep.step = 100 + (int64_t)m.env->request_id;
    int64_t shape[1] = {2};
    tfx_tensor_meta t = TFX__TENSOR__INIT, *tp = &t;
    t.name = "w", t.shape = shape, t.n_shape = 1, t.nbytes = 8;
    rep.tensors = &tp, rep.n_tensors = 1;
    float vals[2] = {1.5f, (float)m.env->request_id};
    tfx_payload pl = {vals, sizeof vals, 1, NULL, NULL};
    cr_assert_eq(tfx_wire_send(server, &m.identity, &rep, &pl, 1, &err), TFX_OK, "%s", err.msg);
    tfx_inmsg_fini(&m);
  }

  tfx_inmsg reply;
  cr_assert_eq(tfx_client_recv(client, &reply, 5000, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(reply.env->request_id, 2, "the late reply to request 1 must be dropped");
  cr_assert_eq(reply.env->step, 102);
  size_t size = 0;
  const float *v = tfx_inmsg_part(&reply, 0, &size);
  cr_assert_eq(size, 8);
  cr_assert_eq(v[0], 1.5f);
  cr_assert_eq(v[1], 2.0f);
  tfx_inmsg_fini(&reply);

  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown();
}

Test(wire, client_recv_times_out_with_epeer) {
  char endpoint[256];
  void *server = open_server(endpoint, sizeof endpoint); /* bound, but never answers */
  tfx_client *client = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  tfx_envelope req;
  tfx_wire_request(&req, TFX__MSG_TYPE__MSG_STATUS);
  tfx_inmsg reply;
  int64_t t0 = tfx_now_ms();
  int rc = tfx_client_call(client, &req, NULL, 0, &reply, 200, &err);
  int64_t dt = tfx_now_ms() - t0;
  cr_assert_eq(rc, TFX_EPEER, "rc %d: %s", rc, err.msg);
  cr_assert(strstr(err.msg, "no reply within 200 ms") != NULL, "msg: %s", err.msg);
  cr_assert(strstr(err.msg, endpoint) != NULL, "msg: %s", err.msg);
  cr_assert_geq(dt, 190, "returned after %lld ms", (long long)dt);
  cr_assert_lt(dt, 3000, "returned after %lld ms", (long long)dt);
  tfx_inmsg_fini(&reply);

  /* After a reset the client still works against a server that does answer. */
  cr_assert_eq(tfx_client_reset(client, &err), TFX_OK, "%s", err.msg);
  tfx_wire_request(&req, TFX__MSG_TYPE__MSG_STATUS);
  cr_assert_eq(tfx_client_send(client, &req, NULL, 0, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(req.request_id, 2, "request ids keep counting across a reset");
  /* The server first finds the unanswered request 1 from the old socket: its reply goes nowhere. */
  for (uint64_t want = 1; want <= 2; want++) {
    cr_assert_eq(wait_readable(server, 5000), 1);
    tfx_inmsg m;
    cr_assert_eq(tfx_wire_recv(server, 1, &m, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(m.env->request_id, want);
    tfx_envelope rep;
    tfx_reply_init(&rep, &m);
    cr_assert_eq(tfx_wire_send(server, &m.identity, &rep, NULL, 0, &err), TFX_OK, "%s", err.msg);
    tfx_inmsg_fini(&m);
  }
  cr_assert_eq(tfx_client_recv(client, &reply, 5000, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(reply.env->request_id, 2);
  tfx_inmsg_fini(&reply);
  tfx_client_destroy(client);
  tfx_net_close(server);
  tfx_net_shutdown();
}

Test(wire, nobody_listening_is_epeer) {
  char endpoint[256];
  void *server = open_server(endpoint, sizeof endpoint);
  tfx_net_close(server); /* the port is now closed */
  tfx_client *client = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_client_create(endpoint, &client, &err), TFX_OK, "%s", err.msg);
  tfx_envelope req;
  tfx_wire_request(&req, TFX__MSG_TYPE__MSG_STATUS);
  tfx_inmsg reply;
  cr_assert_eq(tfx_client_call(client, &req, NULL, 0, &reply, 150, &err), TFX_EPEER, "%s", err.msg);
  tfx_inmsg_fini(&reply);
  tfx_client_destroy(client);
  tfx_net_shutdown();
}

Test(wire, a_malformed_frame_is_answered_with_eproto) {
  char endpoint[256];
  void *server = open_server(endpoint, sizeof endpoint);
  void *raw = zmq_socket(tfx_net_context(), ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_connect(raw, endpoint), 0);
  const char junk[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
  cr_assert_eq(zmq_send(raw, junk, sizeof junk - 1, 0), (int)sizeof junk - 1);

  cr_assert_eq(wait_readable(server, 5000), 1);
  tfx_inmsg m;
  tfx_err err = {0};
  int rc = tfx_wire_recv(server, 1, &m, &err);
  cr_assert_eq(rc, TFX_EPROTO);
  cr_assert(strstr(err.msg, "cannot decode 11 bytes") != NULL, "msg: %s", err.msg);
  cr_assert(m.has_identity, "the sender's identity is kept to answer it");
  cr_assert_null(m.env);
  cr_assert_eq(tfx_server_reply_error(server, &m, rc, err.msg, &err), TFX_OK, "%s", err.msg);
  tfx_inmsg_fini(&m);

  cr_assert_eq(wait_readable(raw, 5000), 1, "no error reply came back");
  tfx_inmsg back;
  cr_assert_eq(tfx_wire_recv(raw, 0, &back, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(back.env->type, TFX__MSG_TYPE__MSG_REPLY);
  cr_assert_eq(back.env->code, TFX_EPROTO);
  cr_assert_eq(back.env->request_id, 0);
  cr_assert(strstr(back.env->error, "cannot decode") != NULL, "%s", back.env->error);
  tfx_inmsg_fini(&back);

  /* A message of only an identity frame (no envelope) is EPROTO too. */
  void *empty_sender = zmq_socket(tfx_net_context(), ZMQ_DEALER);
  zmq_setsockopt(empty_sender, ZMQ_LINGER, &zero, sizeof zero);
  cr_assert_eq(zmq_connect(empty_sender, endpoint), 0);
  cr_assert_eq(zmq_send(empty_sender, "", 0, 0), 0);
  cr_assert_eq(wait_readable(server, 5000), 1);
  rc = tfx_wire_recv(server, 1, &m, &err);
  cr_assert_eq(rc, TFX_EPROTO, "an empty envelope has version 0: rc %d", rc);
  tfx_inmsg_fini(&m);

  zmq_close(empty_sender);
  zmq_close(raw);
  tfx_net_close(server);
  tfx_net_shutdown();
}

Test(wire, server_open_on_a_bad_endpoint_fails) {
  void *sock = (void *)&sock;
  tfx_err err = {0};
  int rc = tfx_server_open("tcp://256.1.1.1:1", &sock, &err);
  cr_assert_eq(rc, TFX_ESYS, "rc %d", rc);
  cr_assert(strstr(err.msg, "bind tcp://256.1.1.1:1") != NULL, "msg: %s", err.msg);
  cr_assert_eq(sock, (void *)&sock, "*sock written on failure");
  tfx_net_close(NULL);
  tfx_client_destroy(NULL);
  tfx_net_shutdown();
}

/* --version names the protocol the wire speaks (it said "protocol 1" after the wire moved to 2). */
Test(wire, version_line_names_the_wire_protocol) {
  char want[32];
  snprintf(want, sizeof want, "; protocol %d)", TFX_PROTOCOL_VERSION);
  cr_assert(strstr(tfx_version_line(), want), "%s lacks '%s'", tfx_version_line(), want);
}
