/* Fuzzes the cluster protocol decoder: tfx_wire_unpack on an envelope frame plus the sizes of the data frames
 * that follow it. Input: byte 0 = number of data frames (0..15), then that many little-endian u32 frame sizes,
 * then the envelope bytes. A decoded envelope is packed again and must decode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "wire.h"

static void repack(const tfx_envelope *env, const size_t *sizes, int n) {
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(env, &len);
  if (!buf) {
    return;
  }
  tfx_envelope *again = NULL;
  if (tfx_wire_unpack(buf, len, sizes, n, &again, NULL) != TFX_OK) {
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
    repack(env, sizes, n);
    tfx_wire_free_envelope(env);
  } else if (err.code != TFX_EPROTO || !err.msg[0]) {
    abort(); /* every rejection is a named protocol error */
  }
  return 0;
}
