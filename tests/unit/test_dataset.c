/* Unit tests of src/data/idx.c: IDX files (plain and gzip) written into a temporary directory, their
 * corruptions, the sharding/shuffling batcher, and the real Fashion-MNIST files when installed. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "data/idx.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("data");
}

TestSuite(dataset, .init = setup, .fini = tmpdir_remove);

/* Builds an IDX image of unsigned bytes in memory: magic 00 00 08 rank, big-endian u32 dims, data. */
static size_t idx_bytes(uint8_t *out, int rank, const uint32_t *dims, const uint8_t *data) {
  size_t n = 4, count = 1;
  out[0] = 0, out[1] = 0, out[2] = 0x08, out[3] = (uint8_t)rank;
  for (int i = 0; i < rank; i++) {
    out[n++] = (uint8_t)(dims[i] >> 24), out[n++] = (uint8_t)(dims[i] >> 16);
    out[n++] = (uint8_t)(dims[i] >> 8), out[n++] = (uint8_t)dims[i];
    count *= dims[i];
  }
  memcpy(out + n, data, count);
  return n + count;
}

static void write_file(const char *path, const uint8_t *buf, size_t n, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb9");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(gzwrite(f, buf, (unsigned)n), (int)n);
    cr_assert_eq(gzclose(f), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
  }
}

/* 5 images of 3x2 pixels and their labels. */
static const uint8_t pixels[30] = {0,   1,   2,   3, 4, 5, 10, 20, 30, 40,  50, 60,  255, 254, 253,
                                   252, 251, 250, 7, 7, 7, 7,  7,  7,  100, 0,  100, 0,   100, 0};
static const uint8_t labels[5] = {3, 1, 4, 1, 5};

static void write_pair(const char *images, const char *labs, int gz) {
  uint8_t buf[256];
  const uint32_t di[3] = {5, 3, 2}, dl[1] = {5};
  write_file(images, buf, idx_bytes(buf, 3, di, pixels), gz);
  write_file(labs, buf, idx_bytes(buf, 1, dl, labels), gz);
}

static void paths(char *images, char *labs, const char *suffix) {
  sprintf(images, "%s/images-idx3-ubyte%s", tmp, suffix);
  sprintf(labs, "%s/labels-idx1-ubyte%s", tmp, suffix);
}

static void check_small(const tfx_dataset *d, double scale) {
  cr_assert_eq(d->n, 5);
  cr_assert_eq(d->dim, 6);
  for (int i = 0; i < 30; i++) {
    cr_assert_float_eq(d->x[i], pixels[i] * scale, 1e-6, "pixel %d", i);
  }
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(d->y[i], labels[i]);
  }
}

Test(dataset, load_plain_idx) {
  char images[128], labs[128];
  paths(images, labs, "");
  write_pair(images, labs, 0);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 0.5, 0, &d, &err), TFX_OK, "%s", err.msg);
  check_small(d, 0.5);
  tfx_dataset_destroy(d);
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 1.0 / 255, 6, &d, &err), TFX_OK, "%s", err.msg);
  check_small(d, 1.0 / 255);
  tfx_dataset_destroy(d);
  tfx_dataset_destroy(NULL);
}

Test(dataset, load_gzip_idx) {
  char images[128], labs[128];
  paths(images, labs, ".gz");
  write_pair(images, labs, 1);
  size_t len = 0;
  uint8_t *raw = slurp(images, &len);
  cr_assert(raw[0] == 0x1f && raw[1] == 0x8b, "the test file really is gzip");
  free(raw);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 2.0, 6, &d, &err), TFX_OK, "%s", err.msg);
  check_small(d, 2.0);
  tfx_dataset_destroy(d);
}

Test(dataset, idx_read_gives_rank_dims_and_bytes) {
  char path[128];
  sprintf(path, "%s/r4.idx", tmp);
  uint8_t buf[256], data[24];
  for (int i = 0; i < 24; i++) {
    data[i] = (uint8_t)(i * 10);
  }
  const uint32_t dims[4] = {2, 3, 2, 2};
  write_file(path, buf, idx_bytes(buf, 4, dims, data), 0);
  uint8_t *out = NULL;
  int rank = 0;
  int64_t d[4] = {0};
  tfx_err err = {0};
  cr_assert_eq(tfx_idx_read(path, &out, &rank, d, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(rank, 4);
  cr_assert(d[0] == 2 && d[1] == 3 && d[2] == 2 && d[3] == 2);
  cr_assert_eq(memcmp(out, data, 24), 0);
  free(out);
}

Test(dataset, large_dims_are_big_endian) {
  char path[128];
  sprintf(path, "%s/big.idx", tmp);
  /* 1 x 70000 (0x00011170): the bytes of the dimension must be read most significant first. */
  const uint32_t dims[2] = {1, 70000};
  uint8_t *data = calloc(70000, 1), *buf = malloc(70000 + 64);
  data[69999] = 42;
  write_file(path, buf, idx_bytes(buf, 2, dims, data), 1);
  uint8_t *out = NULL;
  int rank = 0;
  int64_t d[4];
  cr_assert_eq(tfx_idx_read(path, &out, &rank, d, NULL), TFX_OK);
  cr_assert_eq(d[1], 70000);
  cr_assert_eq(out[69999], 42);
  free(out), free(data), free(buf);
}

Test(dataset, missing_file_is_enotfound) {
  char images[128], labs[128];
  paths(images, labs, "");
  tfx_dataset *d = (tfx_dataset *)&d;
  tfx_err err = {0};
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 1, 0, &d, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, images) != NULL, "msg: %s", err.msg);
  cr_assert_eq(d, (tfx_dataset *)&d, "*out written on failure");
}

static void assert_corrupt(const char *path, const char *fragment) {
  uint8_t *out = (uint8_t *)&out;
  int rank = -1;
  int64_t dims[4];
  tfx_err err = {0};
  int rc = tfx_idx_read(path, &out, &rank, dims, &err);
  cr_assert_eq(rc, TFX_ECORRUPT, "rc %d (%s), want TFX_ECORRUPT with '%s'", rc, err.msg, fragment);
  cr_assert(strstr(err.msg, path) != NULL, "msg '%s' must name the file", err.msg);
  cr_assert(strstr(err.msg, "offset") != NULL, "msg '%s' must give the offset", err.msg);
  cr_assert(strstr(err.msg, fragment) != NULL, "msg '%s' lacks '%s'", err.msg, fragment);
  cr_assert_eq(out, (uint8_t *)&out, "*data written on failure");
}

Test(dataset, every_truncation_is_ecorrupt_with_the_offset) {
  for (int gz = 0; gz < 2; gz++) {
    char path[128], cut[128];
    sprintf(path, "%s/images%s", tmp, gz ? ".gz" : "");
    sprintf(cut, "%s/cut%s", tmp, gz ? ".gz" : "");
    uint8_t buf[256];
    const uint32_t di[3] = {5, 3, 2};
    write_file(path, buf, idx_bytes(buf, 3, di, pixels), gz);
    size_t len = 0;
    uint8_t *raw = slurp(path, &len);
    /* A gzip file ends with the last deflate bits and an 8-byte CRC32/ISIZE trailer, which are only read
     * after the last data byte: cuts there are tested in gzip_trailer_is_verified. */
    size_t end = gz ? len - 10 : len;
    for (size_t n = 0; n < end; n++) {
      FILE *f = fopen(cut, "wb");
      fwrite(raw, 1, n, f);
      fclose(f);
      assert_corrupt(cut, "truncated at offset");
    }
    free(raw);
  }
}

Test(dataset, truncation_names_where_it_stopped) {
  char path[128];
  sprintf(path, "%s/short.idx", tmp);
  uint8_t buf[256];
  const uint32_t di[3] = {5, 3, 2};
  size_t n = idx_bytes(buf, 3, di, pixels);
  write_file(path, buf, n - 10, 0);
  assert_corrupt(path, "truncated at offset 36 (want 10 more bytes)");
  write_file(path, buf, 6, 0);
  assert_corrupt(path, "truncated at offset 6 (want 10 more bytes)");
}

Test(dataset, a_header_claiming_16_gib_in_a_tiny_file_is_ecorrupt) {
  /* Found by tests/fuzz/fuzz_idx: the buffer was sized from the header; it now grows with the data read. */
  char path[128];
  sprintf(path, "%s/claims.idx", tmp);
  const uint8_t header[12] = {0, 0, 0x08, 2, 0x10, 0, 0, 0, 0, 0, 0, 64}; /* rank 2: 2^28 x 64 */
  write_file(path, header, sizeof header, 0);
  assert_corrupt(path, "truncated at offset 12 (want 17179869184 more bytes)");
}

Test(dataset, gzip_trailer_is_verified) {
  /* A flipped bit in the gzip CRC32, or a file cut in the last bytes, means the data cannot be trusted. */
  char path[128], bad[128];
  sprintf(path, "%s/images.gz", tmp);
  sprintf(bad, "%s/bad.gz", tmp);
  uint8_t buf[256];
  const uint32_t di[3] = {5, 3, 2};
  write_file(path, buf, idx_bytes(buf, 3, di, pixels), 1);
  size_t len = 0;
  uint8_t *raw = slurp(path, &len);
  int accepted = 0;
  for (size_t n = len - 10; n <= len; n++) {
    if (n == len) {
      raw[len - 8] ^= 0x01; /* whole file, but the stored CRC32 of the data is wrong */
    }
    write_file(bad, raw, n, 0);
    uint8_t *out = NULL;
    int rank = 0;
    int64_t dims[4];
    tfx_err err = {0};
    int rc = tfx_idx_read(bad, &out, &rank, dims, &err);
    if (rc == TFX_OK) {
      accepted++;
      free(out);
      continue;
    }
    cr_assert_eq(rc, TFX_ECORRUPT, "%s", err.msg);
    cr_assert(strstr(err.msg, bad) != NULL, "msg: %s", err.msg);
  }
  free(raw);
  if (accepted) {
    /* Regression guard (src/data/idx.c, tfx_idx_read): when reading stopped after the last data byte, zlib
     * never reached the gzip trailer: the CRC32 was never checked, and a .gz file cut short or corrupted in its
     * trailer loaded silently. */
    cr_assert_fail("%d of 11 damaged gzip endings accepted (CRC32 never checked)", accepted);
  }
}

Test(dataset, bad_headers) {
  char path[128];
  sprintf(path, "%s/bad.idx", tmp);
  uint8_t buf[256];
  const uint32_t di[3] = {5, 3, 2};
  size_t n = idx_bytes(buf, 3, di, pixels);

  buf[2] = 0x0D; /* float data: not supported */
  write_file(path, buf, n, 0);
  assert_corrupt(path, "offset 0: bad IDX magic 00000d03");
  buf[2] = 0x08;
  buf[0] = 0x1f; /* not IDX at all */
  write_file(path, buf, n, 0);
  assert_corrupt(path, "bad IDX magic");
  buf[0] = 0;
  buf[3] = 0;
  write_file(path, buf, n, 0);
  assert_corrupt(path, "offset 3: rank 0");
  buf[3] = 5;
  write_file(path, buf, n, 0);
  assert_corrupt(path, "offset 3: rank 5");
  buf[3] = 3;
  buf[8 + 3] = 0; /* second dim 0 */
  write_file(path, buf, n, 0);
  assert_corrupt(path, "offset 8: dim 0");
  buf[8 + 3] = 3;
  buf[4] = 0x80; /* first dim 2^31 + 5 */
  write_file(path, buf, n, 0);
  assert_corrupt(path, "offset 4: dim 2147483653");
}

Test(dataset, dims_whose_product_overflows_are_rejected) {
  char path[128];
  sprintf(path, "%s/overflow.idx", tmp);
  /* 2^16 * 2^16 * 2^16 * 2^16 = 2^64 wraps to 0 in size_t; each dim is under the 2^28 limit. */
  const uint8_t hdr[20] = {0, 0, 8, 4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0};
  write_file(path, hdr, sizeof hdr, 0);
  uint8_t *out = NULL;
  int rank = 0;
  int64_t dims[4];
  tfx_err err = {0};
  int rc = tfx_idx_read(path, &out, &rank, dims, &err);
  if (rc == TFX_OK) {
    /* Regression guard (src/data/idx.c, read_header): when *count *= dims[i] was checked only after the
     * loop, four dims of 2^16 wrapped to 0 and a 20-byte file "held" 2^64 bytes. */
    free(out);
    cr_assert_fail("tfx_idx_read accepted dims whose product overflows size_t");
  }
  cr_assert_eq(rc, TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "too large") != NULL, "msg: %s", err.msg);
}

Test(dataset, label_errors_are_eshape) {
  char images[128], labs[128];
  paths(images, labs, "");
  write_pair(images, labs, 0);
  uint8_t buf[256];
  const uint32_t four[1] = {4};
  write_file(labs, buf, idx_bytes(buf, 1, four, labels), 0);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 1, 0, &d, &err), TFX_ESHAPE);
  cr_assert(strstr(err.msg, "4 labels for 5 images") != NULL, "msg: %s", err.msg);
  cr_assert(strstr(err.msg, labs) != NULL, "msg: %s", err.msg);
  cr_assert_null(d);

  const uint32_t two_d[2] = {5, 1};
  write_file(labs, buf, idx_bytes(buf, 2, two_d, labels), 0);
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 1, 0, &d, &err), TFX_ESHAPE, "labels must be rank 1");

  write_pair(images, labs, 0);
  cr_assert_eq(tfx_dataset_load_idx(images, labs, 1, 784, &d, &err), TFX_ESHAPE);
  cr_assert(strstr(err.msg, "6 values per example, the model's input takes 784") != NULL, "msg: %s", err.msg);
  cr_assert_null(d);
}

/* ---- batcher ---- */

/* A dataset of n examples of dim 2 where example i is (i, -i) with label i. */
static tfx_dataset *counting(size_t n) {
  tfx_dataset *d = calloc(1, sizeof *d);
  d->n = n, d->dim = 2;
  d->x = malloc(sizeof(float) * 2 * n), d->y = malloc(sizeof(int32_t) * n);
  for (size_t i = 0; i < n; i++) {
    d->x[2 * i] = (float)i, d->x[2 * i + 1] = -(float)i, d->y[i] = (int32_t)i;
  }
  return d;
}

/* Takes `count` examples one batch of `batch` at a time, checking x against y. */
static void take(tfx_batcher *b, int count, int batch, int32_t *out) {
  float x[64];
  for (int done = 0; done < count; done += batch) {
    int k = count - done < batch ? count - done : batch;
    tfx_batcher_next(b, k, x, out + done);
    for (int i = 0; i < k; i++) {
      cr_assert_eq(x[2 * i], (float)out[done + i], "features follow their label");
      cr_assert_eq(x[2 * i + 1], -(float)out[done + i]);
    }
  }
}

Test(dataset, shards_cover_every_index_exactly_once_per_epoch) {
  const size_t n = 103;
  tfx_dataset *d = counting(n);
  for (int workers = 1; workers <= 5; workers++) {
    for (int shuffle = 0; shuffle < 2; shuffle++) {
      int seen[103] = {0};
      for (int w = 0; w < workers; w++) {
        tfx_batcher *b = NULL;
        tfx_err err = {0};
        cr_assert_eq(tfx_batcher_create(d, w, workers, 7, shuffle, &b, &err), TFX_OK, "%s", err.msg);
        int shard = (int)((n - (size_t)w + (size_t)workers - 1) / (size_t)workers);
        int32_t got[103];
        take(b, shard, 4, got);
        for (int i = 0; i < shard; i++) {
          cr_assert_eq(got[i] % workers, w, "worker %d of %d got example %d", w, workers, got[i]);
          seen[got[i]]++;
        }
        tfx_batcher_destroy(b);
      }
      for (size_t i = 0; i < n; i++) {
        cr_assert_eq(seen[i], 1, "%d workers, shuffle %d: example %zu seen %d times", workers, shuffle, i, seen[i]);
      }
    }
  }
  tfx_dataset_destroy(d);
}

Test(dataset, unshuffled_order_and_wrap_at_epoch_end) {
  tfx_dataset *d = counting(10);
  tfx_batcher *b = NULL;
  cr_assert_eq(tfx_batcher_create(d, 1, 3, 0, 0, &b, NULL), TFX_OK); /* examples 1, 4, 7 */
  int32_t got[8];
  take(b, 8, 8, got); /* one batch across two epoch boundaries */
  const int32_t want[8] = {1, 4, 7, 1, 4, 7, 1, 4};
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(got[i], want[i], "position %d", i);
  }
  cr_assert_eq(tfx_batcher_epoch(b), 2);
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
}

Test(dataset, shuffle_is_deterministic_per_seed_and_reshuffles_each_epoch) {
  tfx_dataset *d = counting(200);
  int32_t a[400], b2[400], c[400];
  tfx_batcher *x = NULL, *y = NULL, *z = NULL;
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 42, 1, &x, NULL), TFX_OK);
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 42, 1, &y, NULL), TFX_OK);
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 43, 1, &z, NULL), TFX_OK);
  take(x, 400, 32, a);
  take(y, 400, 7, b2);
  take(z, 400, 32, c);
  cr_assert_eq(memcmp(a, b2, sizeof a), 0, "same seed, same sequence (whatever the batch size)");
  cr_assert_neq(memcmp(a, c, sizeof a), 0, "another seed, another sequence");
  int in_order = 0, same_as_epoch0 = 0;
  for (int i = 0; i < 200; i++) {
    in_order += a[i] == i, same_as_epoch0 += a[i] == a[200 + i];
  }
  cr_assert_lt(in_order, 20, "epoch 0 is shuffled (%d fixed points)", in_order);
  cr_assert_lt(same_as_epoch0, 20, "epoch 1 is shuffled anew (%d positions unchanged)", same_as_epoch0);
  for (int e = 0; e < 2; e++) {
    int seen[200] = {0};
    for (int i = 0; i < 200; i++) {
      seen[a[200 * e + i]]++;
    }
    for (int i = 0; i < 200; i++) {
      cr_assert_eq(seen[i], 1, "epoch %d is a permutation", e);
    }
  }
  tfx_batcher_destroy(x), tfx_batcher_destroy(y), tfx_batcher_destroy(z);
  tfx_dataset_destroy(d);
}

Test(dataset, skip_resumes_exactly_where_next_would_be) {
  tfx_dataset *d = counting(50);
  tfx_batcher *a = NULL, *b = NULL;
  cr_assert_eq(tfx_batcher_create(d, 1, 2, 9, 1, &a, NULL), TFX_OK);
  cr_assert_eq(tfx_batcher_create(d, 1, 2, 9, 1, &b, NULL), TFX_OK);
  int32_t skipped[70], resumed[10], direct[10];
  take(a, 70, 7, skipped); /* 10 batches of 7 over a shard of 25: crosses two epochs */
  take(a, 10, 10, direct);
  tfx_batcher_skip(b, 10, 7);
  take(b, 10, 10, resumed);
  cr_assert_eq(memcmp(direct, resumed, sizeof direct), 0);
  cr_assert_eq(tfx_batcher_epoch(a), tfx_batcher_epoch(b));
  cr_assert_eq(tfx_batcher_epoch(b), 3);
  tfx_batcher_destroy(a), tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
}

Test(dataset, batcher_rejects_bad_shards) {
  tfx_dataset *d = counting(3);
  tfx_batcher *b = (tfx_batcher *)&b;
  tfx_err err = {0};
  cr_assert_eq(tfx_batcher_create(d, 0, 0, 1, 0, &b, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "shard 0 of 0") != NULL, "msg: %s", err.msg);
  cr_assert_eq(tfx_batcher_create(d, 2, 2, 1, 0, &b, &err), TFX_EINVAL);
  cr_assert_eq(tfx_batcher_create(d, -1, 2, 1, 0, &b, &err), TFX_EINVAL);
  cr_assert_eq(tfx_batcher_create(d, 0, 4, 1, 0, &b, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "over 3 examples") != NULL, "msg: %s", err.msg);
  cr_assert_eq(b, (tfx_batcher *)&b, "*out written on failure");
  tfx_batcher_destroy(NULL);
  tfx_dataset_destroy(d);
}

/* ---- the real Fashion-MNIST ---- */

#define FMNIST "/usr/share/datasets/fashion-mnist/"

Test(dataset, real_fashion_mnist_loads) {
  const char *files[] = {FMNIST "train-images-idx3-ubyte.gz", FMNIST "train-labels-idx1-ubyte.gz",
                         FMNIST "t10k-images-idx3-ubyte.gz", FMNIST "t10k-labels-idx1-ubyte.gz"};
  for (int i = 0; i < 4; i++) {
    if (access(files[i], R_OK)) {
      cr_skip_test("Fashion-MNIST is not installed: %s is missing", files[i]);
    }
  }
  const size_t sizes[2] = {60000, 10000};
  const int32_t first_labels[2][4] = {{9, 0, 0, 3}, {9, 2, 1, 1}};
  for (int s = 0; s < 2; s++) {
    tfx_dataset *d = NULL;
    tfx_err err = {0};
    cr_assert_eq(tfx_dataset_load_idx(files[2 * s], files[2 * s + 1], 1.0 / 255, 784, &d, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(d->n, sizes[s]);
    cr_assert_eq(d->dim, 784);
    size_t per_class[10] = {0};
    for (size_t i = 0; i < d->n; i++) {
      cr_assert(d->y[i] >= 0 && d->y[i] < 10, "label %d", d->y[i]);
      per_class[d->y[i]]++;
    }
    for (int c = 0; c < 10; c++) {
      cr_assert_eq(per_class[c], sizes[s] / 10, "Fashion-MNIST is balanced (class %d)", c);
    }
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(d->y[i], first_labels[s][i], "label %d", i);
    }
    double sum = 0;
    float lo = 1, hi = 0;
    for (size_t i = 0; i < d->n * d->dim; i++) {
      sum += d->x[i];
      lo = d->x[i] < lo ? d->x[i] : lo;
      hi = d->x[i] > hi ? d->x[i] : hi;
    }
    cr_assert_eq(lo, 0.0f);
    cr_assert_eq(hi, 1.0f);
    double mean = sum / (double)(d->n * d->dim);
    cr_assert(mean > 0.27 && mean < 0.30, "mean pixel %.4f (Fashion-MNIST's is 0.286)", mean);
    tfx_dataset_destroy(d);
  }
}

/* A worker's shard kept as bytes gives the same batches, bit for bit and in the same order over epochs, as the
 * whole float32 set sharded by the batcher; it holds only its records, and another worker count is refused. */
Test(dataset, byte_shard_batches_equal_the_float_set) {
  char images[512], labs[512];
  paths(images, labs, "");
  write_pair(images, labs, 0);
  const double scale = 1.0 / 255, mean = 0.25, std = 0.5;
  for (int index = 0; index < 2; index++) {
    tfx_dataset *whole = NULL, *shard = NULL;
    tfx_batcher *a = NULL, *b = NULL;
    tfx_err err;
    cr_assert_eq(tfx_dataset_load_idx(images, labs, scale, 6, &whole, &err), TFX_OK, "%s", err.msg);
    tfx_dataset_normalize(whole->x, whole->n * whole->dim, mean, std);
    cr_assert_eq(tfx_dataset_load_idx_shard(images, labs, scale, mean, std, 6, index, 2, &shard, &err), TFX_OK, "%s",
                 err.msg);
    cr_assert_eq(shard->n, index ? 2u : 3u, "worker %d holds %zu examples", index, shard->n);
    cr_assert_null(shard->x, "a byte shard holds no float copy");
    cr_assert_eq(tfx_batcher_create(whole, index, 2, 7, 1, &a, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(tfx_batcher_create_shard(shard, index, 2, 7, 1, &b, &err), TFX_OK, "%s", err.msg);
    float xa[4 * 6], xb[4 * 6];
    int32_t ya[4], yb[4];
    for (int step = 0; step < 6; step++) { /* several epochs: reshuffles included */
      tfx_batcher_next(a, 4, xa, ya);
      tfx_batcher_next(b, 4, xb, yb);
      cr_assert(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0, "worker %d step %d differs", index,
                step);
    }
    tfx_batcher_destroy(a), tfx_batcher_destroy(b);
    tfx_dataset_destroy(whole), tfx_dataset_destroy(shard);
  }
  tfx_dataset *none = NULL;
  tfx_err err;
  cr_assert_eq(tfx_dataset_load_idx_shard(images, labs, 1, 0, 1, 6, 0, 6, &none, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "shard 0 of 6"), "%s", err.msg);
}
