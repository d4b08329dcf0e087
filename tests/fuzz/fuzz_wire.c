/* Fuzzes the cluster protocol decoder: tfx_wire_unpack on an envelope frame plus the sizes of the data frames
 * that follow it. Input: byte 0 = number of data frames (0..15), then that many little-endian u32 frame sizes,
 * then the envelope bytes. A decoded envelope without unknown fields is packed again and must decode and
 * validate again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "net/wire.h"

/* Whether protobuf-c kept unknown fields anywhere in env. It passes them through on a repack, and it accepts
 * an over-long encoding of the invalid field number 0 ("85 00") that it refuses in the short form ("05"), so a
 * message carrying one does not survive a round trip; tfx never sends unknown fields (messages are built from
 * scratch) and ignores those it receives. */
static int has_unknown(const tfx_envelope *env) {
  size_t n = env->base.n_unknown_fields;
  for (size_t i = 0; i < env->n_tensors; i++) {
    n += env->tensors[i]->base.n_unknown_fields;
  }
  for (size_t i = 0; i < env->n_shards; i++) {
    n += env->shards[i]->base.n_unknown_fields;
  }
  for (size_t i = 0; i < env->n_stats; i++) {
    n += env->stats[i]->base.n_unknown_fields;
  }
  for (size_t i = 0; i < env->n_want; i++) {
    n += env->want[i]->base.n_unknown_fields;
  }
  const ProtobufCMessage *subs[] = {(const ProtobufCMessage *)env->since,   (const ProtobufCMessage *)env->acked,
                                    (const ProtobufCMessage *)env->replicate, (const ProtobufCMessage *)env->init,
                                    (const ProtobufCMessage *)env->rereplicate, (const ProtobufCMessage *)env->written};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    n += subs[i] ? subs[i]->n_unknown_fields : 0;
  }
  return n > 0;
}

static void repack(const tfx_envelope *env, const size_t *sizes, int n) {
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(env, &len);
  if (!buf) {
    return;
  }
  tfx_envelope *again = NULL;
  tfx_err err = {0};
  if (tfx_wire_unpack(buf, len, sizes, n, &again, &err) != TFX_OK) {
    fprintf(stderr, "repacked envelope refused: %s\n", err.msg);
    abort(); /* what we packed from a valid envelope must be valid */
  }
  tfx_wire_free_envelope(again);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) {
    return 0;
  }
  int n = data[0] & 15;
  if (size < 1 + 4 * (size_t)n) {
    return 0;
  }
  size_t sizes[16];
  for (int i = 0; i < n; i++) {
    const uint8_t *p = data + 1 + 4 * i;
    sizes[i] = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
  }
  const uint8_t *env_bytes = data + 1 + 4 * n;
  size_t env_len = size - 1 - 4 * (size_t)n;
  tfx_envelope *env = NULL;
  tfx_err err = {0};
  if (tfx_wire_unpack(env_bytes, env_len, sizes, n, &env, &err) == TFX_OK) {
    if (!has_unknown(env)) {
      repack(env, sizes, n);
    }
    tfx_wire_free_envelope(env);
  } else if (err.code != TFX_EPROTO || !err.msg[0]) {
    abort(); /* every rejection is a named protocol error */
  }
  return 0;
}
