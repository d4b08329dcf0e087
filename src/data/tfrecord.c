/* TFRecord framing over stdio, and a byte-at-a-time table CRC32C. */
#include "data/tfrecord.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"
#include "data/data_impl.h"

/* Header: u64 length and its u32 masked CRC; footer: the data's u32 masked CRC. */
#define HEADER_BYTES 12
#define FOOTER_BYTES 4
/* Without a file size (a pipe) a record may not claim more than this. */
#define MAX_UNSIZED_RECORD ((uint64_t)1 << 31)

struct tfx_tfrecord_reader {
  FILE *f;
  char *path;
  uint8_t *buf; /* data and footer of the current record; reused */
  size_t cap;
  uint64_t size;  /* file size, or UINT64_MAX when unknown */
  uint64_t off;   /* offset of the next record */
  uint64_t count; /* records read */
  int failed;
};

struct tfx_tfrecord_writer {
  FILE *f;
  char *path;
  uint64_t off;
};

/* CRC32C with the reflected Castagnoli polynomial 0x82F63B78: table[i] is the CRC of the byte i. Constant data
 * keeps it thread-safe without a lazy initialiser. */
static const uint32_t crc_table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf,
    0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
    0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384, 0x9a879fa0, 0x68ec1ca3, 0x7bbcef57,
    0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
    0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e,
    0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa, 0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
    0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696,
    0x6ef07595, 0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198, 0x5125dad3,
    0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
    0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7, 0x61c69362, 0x93ad1061, 0x80fde395,
    0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
    0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312,
    0x44694011, 0x5739b3e5, 0xa55230e6, 0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
    0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90,
    0x563c5f93, 0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc, 0x1871a4d8,
    0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
    0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d, 0x2892ed69, 0xdaf96e6a, 0xc9a99d9e,
    0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
    0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19,
    0x0d3d3e1a, 0x1e6dcdee, 0xec064eed, 0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
    0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3,
    0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a,
    0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
    0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e, 0xf36e6f75, 0x0105ec76, 0x12551f82,
    0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
    0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t tfx_crc32c(uint32_t crc, const void *data, size_t n) {
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  }
  return ~crc;
}

uint32_t tfx_crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint32_t tfx_crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) {
  return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

static void put_u64(uint8_t *p, uint64_t v) {
  put_u32(p, (uint32_t)v);
  put_u32(p + 4, (uint32_t)(v >> 32));
}

int tfx_tfrecord_reader_open(const char *path, tfx_tfrecord_reader **out, tfx_err *err) {
  if (!path || !out) {
    return tfx_err_set(err, TFX_EINVAL, "tfrecord reader: NULL path or out");
  }
  FILE *f = NULL;
  int rc = data__file_open(path, &f, err);
  return rc ? rc : data__tfrecord_open_file(f, path, out, err);
}

int data__tfrecord_open_file(FILE *f, const char *path, tfx_tfrecord_reader **out, tfx_err *err) {
  tfx_tfrecord_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    fclose(f);
    free(r);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  struct stat st;
  r->f = f;
  r->size = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : UINT64_MAX;
  *out = r;
  return TFX_OK;
}

/* Reads the 12-byte header at r->off; *eof is set at a clean end of file. */
static int read_header(tfx_tfrecord_reader *r, uint64_t *len, int *eof, tfx_err *err) {
  uint8_t h[HEADER_BYTES];
  size_t got = fread(h, 1, sizeof h, r->f);
  if (got < sizeof h && ferror(r->f)) {
    return tfx_err_sys(err, TFX_ESYS, "%s: read error at offset %llu", r->path, (unsigned long long)r->off);
  }
  *eof = got == 0;
  if (*eof) {
    return TFX_OK;
  }
  if (got < sizeof h) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: record %llu at offset %llu: truncated header (%zu of %d bytes)", r->path,
                       (unsigned long long)r->count, (unsigned long long)r->off, got, HEADER_BYTES);
  }
  uint32_t want = tfx_crc32c_unmask(get_u32(h + 8)), have = tfx_crc32c(0, h, 8);
  if (want != have) {
    return tfx_err_set(err, TFX_ECORRUPT,
                       "%s: record %llu at offset %llu: length crc mismatch (stored %08x, computed %08x)", r->path,
                       (unsigned long long)r->count, (unsigned long long)r->off, want, have);
  }
  *len = get_u64(h);
  return TFX_OK;
}

/* Checks that a record of `len` data bytes fits in what is left of the file, and sizes the buffer for it. */
static int reserve(tfx_tfrecord_reader *r, uint64_t len, tfx_err *err) {
  uint64_t left = MAX_UNSIZED_RECORD;
  if (r->size != UINT64_MAX) {
    left = r->size >= r->off + HEADER_BYTES ? r->size - r->off - HEADER_BYTES : 0;
  }
  if (len > left || left - len < FOOTER_BYTES) {
    return tfx_err_set(
        err, TFX_ECORRUPT, "%s: record %llu at offset %llu: truncated record (length %llu, %llu bytes left)", r->path,
        (unsigned long long)r->count, (unsigned long long)r->off, (unsigned long long)len, (unsigned long long)left);
  }
  if (len + FOOTER_BYTES <= r->cap) {
    return TFX_OK;
  }
  size_t cap = r->cap ? r->cap : 4096;
  while (cap < len + FOOTER_BYTES) {
    cap *= 2;
  }
  uint8_t *buf = realloc(r->buf, cap);
  if (!buf) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory for a %llu-byte record", r->path, (unsigned long long)len);
  }
  r->buf = buf;
  r->cap = cap;
  return TFX_OK;
}

/* Reads data and footer of a record whose header is done, and verifies the data CRC. */
static int read_body(tfx_tfrecord_reader *r, size_t len, tfx_err *err) {
  size_t got = fread(r->buf, 1, len + FOOTER_BYTES, r->f);
  if (got < len + FOOTER_BYTES && ferror(r->f)) {
    return tfx_err_sys(err, TFX_ESYS, "%s: read error at offset %llu", r->path, (unsigned long long)r->off);
  }
  if (got < len + FOOTER_BYTES) {
    return tfx_err_set(err, TFX_ECORRUPT,
                       "%s: record %llu at offset %llu: truncated record (%zu of %zu bytes after the header)", r->path,
                       (unsigned long long)r->count, (unsigned long long)r->off, got, len + FOOTER_BYTES);
  }
  uint32_t want = tfx_crc32c_unmask(get_u32(r->buf + len)), have = tfx_crc32c(0, r->buf, len);
  if (want != have) {
    return tfx_err_set(err, TFX_ECORRUPT,
                       "%s: record %llu at offset %llu: data crc mismatch (stored %08x, computed %08x)", r->path,
                       (unsigned long long)r->count, (unsigned long long)r->off, want, have);
  }
  return TFX_OK;
}

int tfx_tfrecord_reader_next(tfx_tfrecord_reader *r, const uint8_t **data, size_t *len, tfx_err *err) {
  if (r->failed) {
    return tfx_err_set(err, TFX_ESTATE, "%s: reader failed earlier at offset %llu", r->path,
                       (unsigned long long)r->off);
  }
  uint64_t n = 0;
  int eof = 0;
  int rc = read_header(r, &n, &eof, err);
  if (!rc && eof) {
    *data = NULL;
    *len = 0;
    return TFX_OK;
  }
  if (!rc) {
    rc = reserve(r, n, err);
  }
  if (!rc) {
    rc = read_body(r, (size_t)n, err);
  }
  if (rc) {
    r->failed = 1;
    return rc;
  }
  r->off += HEADER_BYTES + n + FOOTER_BYTES;
  r->count++;
  *data = r->buf;
  *len = (size_t)n;
  return TFX_OK;
}

uint64_t tfx_tfrecord_reader_offset(const tfx_tfrecord_reader *r) {
  return r->off;
}

uint64_t tfx_tfrecord_reader_count(const tfx_tfrecord_reader *r) {
  return r->count;
}

const char *tfx_tfrecord_reader_path(const tfx_tfrecord_reader *r) {
  return r->path;
}

void tfx_tfrecord_reader_close(tfx_tfrecord_reader *r) {
  if (!r) {
    return;
  }
  if (r->f) {
    fclose(r->f);
  }
  free(r->buf);
  free(r->path);
  free(r);
}

int tfx_tfrecord_writer_open(const char *path, tfx_tfrecord_writer **out, tfx_err *err) {
  if (!path || !out) {
    return tfx_err_set(err, TFX_EINVAL, "tfrecord writer: NULL path or out");
  }
  FILE *f = tfx_fopen_write(path, "wb"); /* never through a link planted where an event file goes */
  if (!f) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "create %s", path);
  }
  tfx_tfrecord_writer *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path))) {
    fclose(f);
    free(w);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  w->f = f;
  *out = w;
  return TFX_OK;
}

int tfx_tfrecord_writer_write(tfx_tfrecord_writer *w, const void *data, size_t len, tfx_err *err) {
  if (!data && len) {
    return tfx_err_set(err, TFX_EINVAL, "%s: NULL record of %zu bytes", w->path, len);
  }
  uint8_t h[HEADER_BYTES], foot[FOOTER_BYTES];
  put_u64(h, (uint64_t)len);
  put_u32(h + 8, tfx_crc32c_mask(tfx_crc32c(0, h, 8)));
  put_u32(foot, tfx_crc32c_mask(tfx_crc32c(0, data, len)));
  if (fwrite(h, 1, sizeof h, w->f) != sizeof h || (len && fwrite(data, 1, len, w->f) != len) ||
      fwrite(foot, 1, sizeof foot, w->f) != sizeof foot) {
    return tfx_err_sys(err, TFX_ESYS, "%s: write error at offset %llu", w->path, (unsigned long long)w->off);
  }
  w->off += HEADER_BYTES + len + FOOTER_BYTES;
  return TFX_OK;
}

int tfx_tfrecord_writer_close(tfx_tfrecord_writer *w, tfx_err *err) {
  if (!w) {
    return TFX_OK;
  }
  int rc = TFX_OK;
  if (fclose(w->f) != 0) {
    rc = tfx_err_sys(err, TFX_ESYS, "%s: close after %llu bytes", w->path, (unsigned long long)w->off);
  }
  free(w->path);
  free(w);
  return rc;
}
