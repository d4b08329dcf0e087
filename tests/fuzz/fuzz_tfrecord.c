/* Fuzzes the TFRecord reader and the tf.train.Example decoder through tfx_example_load (features "x", label
 * "y"). Byte 0 picks the mode: even = the rest is the file as is (framing, lengths, CRCs all fuzzed); odd = the
 * rest is a list of records [u16 length][bytes], framed here with correct CRCs so that mutations reach the
 * Example decoder, with the last byte of byte 0's upper bits cut off the end (truncation). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/example.h"
#include "data/tfrecord.h"
#include "fuzz.h"

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

/* Frames each [u16 len][bytes] chunk of in as a TFRecord; caller owns the result; free with free(). */
static uint8_t *frame(const uint8_t *in, size_t n, size_t *out_len) {
  uint8_t *out = malloc(n * 9 + 16), *p = out;
  if (!out) {
    return NULL;
  }
  size_t i = 0;
  while (i + 2 <= n) {
    size_t len = (size_t)in[i] | (size_t)in[i + 1] << 8;
    i += 2;
    len = len < n - i ? len : n - i;
    put_le(p, len, 8);
    put_le(p + 8, tfx_crc32c_mask(tfx_crc32c(0, p, 8)), 4);
    memcpy(p + 12, in + i, len);
    put_le(p + 12 + len, tfx_crc32c_mask(tfx_crc32c(0, in + i, len)), 4);
    p += 16 + len;
    i += len;
  }
  *out_len = (size_t)(p - out);
  return out;
}

static void load(const uint8_t *bytes, size_t n) {
  const char *path = fuzz_file(bytes, n);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  if (!path) {
    return;
  }
  if (tfx_example_load(path, "x", "y", 1.0 / 255, &d, &err) == TFX_OK) {
    tfx_dataset_destroy(d);
  } else if (!err.msg[0]) {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) {
    return 0;
  }
  if (!(data[0] & 1)) {
    load(data + 1, size - 1);
    return 0;
  }
  size_t len = 0;
  uint8_t *file = frame(data + 1, size - 1, &len);
  if (file) {
    size_t cut = data[0] >> 1;
    load(file, cut < len ? len - cut : 0);
    free(file);
  }
  return 0;
}
