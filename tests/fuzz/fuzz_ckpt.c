/* Fuzzes checkpoint loading (formats in src/store/ckpt.h). Byte 0 picks the mode: bit 1 set = the rest is a
 * checkpoint directory's manifest.json, checked by tfx_ckpt_verify against a real shard ps-0.shard beside it;
 * else tfx_ckpt_read on the rest as a shard file, as is (bit 0 clear) or with the per-entry data CRCs and the
 * file CRC recomputed first (bit 0 set, where the structure allows), so that mutations get past the
 * checksums to the fields behind them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz.h"
#include "store/ckpt.h"

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) {
    v = v << 8 | p[i];
  }
  return v;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

/* Walks the entries as the reader does and rewrites each data CRC, then the trailer CRC. */
static void fix_crcs(uint8_t *b, size_t n) {
  if (n < 24 + 12) {
    return;
  }
  size_t off = 24, end = n - 12;
  uint32_t count = (uint32_t)get_le(b + 12, 4);
  for (uint32_t i = 0; i < count && off + 2 <= end; i++) {
    size_t nl = (size_t)get_le(b + off, 2);
    off += 2 + nl;
    if (off + 4 > end) {
      break;
    }
    uint64_t rank = get_le(b + off, 4);
    off += 4 + 8 * (rank > 8 ? 8 : rank) + 24;
    if (off + 12 > end) {
      break;
    }
    uint64_t nbytes = get_le(b + off, 8);
    off += 8;
    if (nbytes > end - off - 4) {
      break;
    }
    put_u32(b + off, (uint32_t)crc32_z(0, b + off + 4, (z_size_t)nbytes));
    off += 4 + nbytes;
  }
  put_u32(b + n - 4, (uint32_t)crc32_z(0, b, n - 12));
}

/* A checkpoint directory of this process holding one real shard; its manifest is the fuzz input. */
static void manifest(const uint8_t *data, size_t size) {
  static char dir[512];
  char path[600];
  if (!dir[0]) {
    float v[3] = {1, 2, 3};
    tfx_ckpt_entry e = {.name = "w", .rank = 1, .dims = {3}, .row_end = 3, .count = 3, .data = v};
    const char *tmp = getenv("TMPDIR"); /* scripts/fuzz.sh points it into the build dir */
    snprintf(dir, sizeof dir, "%s/tfx-fuzz-ckpt.XXXXXX", tmp ? tmp : "/tmp");
    snprintf(path, sizeof path, "%s/ps-0.shard", mkdtemp(dir));
    tfx_ckpt_write(path, 7, &e, 1, NULL, NULL, NULL);
  }
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *f = fopen(path, "wb");
  if (!f) {
    return;
  }
  fwrite(data, 1, size, f);
  fclose(f);
  int64_t step = 0;
  int n_ps = 0;
  tfx_err err = {0};
  if (tfx_ckpt_verify(dir, &step, &n_ps, &err) != TFX_OK && !err.msg[0]) {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) {
    return 0;
  }
  if (data[0] & 2) {
    manifest(data + 1, size - 1);
    return 0;
  }
  uint8_t *copy = malloc(size);
  if (!copy) {
    return 0;
  }
  memcpy(copy, data + 1, size - 1);
  if (data[0] & 1) {
    fix_crcs(copy, size - 1);
  }
  const char *path = fuzz_file(copy, size - 1);
  tfx_ckpt *c = NULL;
  tfx_err err = {0};
  if (path && tfx_ckpt_read(path, &c, &err) == TFX_OK) {
    for (int i = 0; i < c->n; i++) {
      if (tfx_ckpt_find(c, c->entries[i].name) == NULL) {
        abort();
      }
    }
    tfx_ckpt_destroy(c);
  } else if (path && !err.msg[0]) {
    abort();
  }
  free(copy);
  return 0;
}
