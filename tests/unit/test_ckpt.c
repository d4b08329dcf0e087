/* Unit tests of src/store/ckpt.c: shard files (round trip, truncation, bit flips), manifests, the newest
 * complete checkpoint, and pruning. Everything happens in a fresh mkdtemp directory. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fs.h"
#include "store/best.h"
#include "store/ckpt.h"
#include "store/ckptmemo.h"
#include "store/weights.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("ckpt");
}

TestSuite(ckpt, .init = setup, .fini = tmpdir_remove);

/* Three entries: a 3x4 kernel, its Adam slot, and rows 5..10 of a 10-row bias partitioned into slices. */
typedef struct sample {
  float kernel[12], slot[12], bias[5];
  tfx_ckpt_entry e[3];
} sample;

static void sample_init(sample *s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < 12; i++) {
    s->kernel[i] = (float)i * 0.25f - 1.0f, s->slot[i] = 1e-3f * (float)(i * i);
  }
  for (int i = 0; i < 5; i++) {
    s->bias[i] = -2.0f * (float)i;
  }
  snprintf(s->e[0].name, sizeof s->e[0].name, "dense_1/kernel");
  s->e[0].rank = 2, s->e[0].dims[0] = 3, s->e[0].dims[1] = 4;
  s->e[0].row_begin = 0, s->e[0].row_end = 3, s->e[0].version = 41, s->e[0].count = 12, s->e[0].data = s->kernel;
  s->e[1] = s->e[0];
  snprintf(s->e[1].name, sizeof s->e[1].name, "dense_1/kernel@m");
  s->e[1].data = s->slot;
  snprintf(s->e[2].name, sizeof s->e[2].name, "dense_1/bias/part_1");
  s->e[2].rank = 1, s->e[2].dims[0] = 10, s->e[2].row_begin = 5, s->e[2].row_end = 10, s->e[2].version = 40;
  s->e[2].count = 5, s->e[2].data = s->bias;
}

static void write_sample(const char *path, int64_t step, uint32_t *crc, uint64_t *bytes) {
  sample s;
  sample_init(&s);
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_write(path, step, s.e, 3, crc, bytes, &err), TFX_OK, "%s", err.msg);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

Test(ckpt, shard_round_trip) {
  char path[128];
  snprintf(path, sizeof path, "%s/ps-0.shard", tmp);
  uint32_t crc = 0;
  uint64_t bytes = 0;
  write_sample(path, 1200, &crc, &bytes);
  char tmp_file[160];
  snprintf(tmp_file, sizeof tmp_file, "%s.tmp", path);
  cr_assert(!exists(tmp_file), "the .tmp file must be renamed away");

  uint32_t file_crc = 0;
  uint64_t file_bytes = 0;
  tfx_err err = {0};
  cr_assert_eq(tfx_file_crc32(path, &file_crc, &file_bytes, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(file_bytes, bytes, "reported size is the file size");
  cr_assert_eq(file_crc, crc, "reported crc is the crc32 of the whole file");
  /* header 24 + entries + trailer 12 */
  size_t want = 24 + 12;
  const size_t names[3] = {14, 16, 19};
  const int ranks[3] = {2, 2, 1};
  const size_t data[3] = {48, 48, 20};
  for (int i = 0; i < 3; i++) {
    want += 2 + names[i] + 4 + 8 * (size_t)ranks[i] + 8 + 8 + 8 + 8 + 4 + data[i];
  }
  cr_assert_eq(bytes, want);

  tfx_ckpt *c = NULL;
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_OK, "%s", err.msg);
  sample s;
  sample_init(&s);
  cr_assert_eq(c->step, 1200);
  cr_assert_eq(c->n, 3);
  for (int i = 0; i < 3; i++) {
    const tfx_ckpt_entry *a = &s.e[i], *b = &c->entries[i];
    cr_assert_str_eq(b->name, a->name);
    cr_assert_eq(b->rank, a->rank);
    for (int d = 0; d < a->rank; d++) {
      cr_assert_eq(b->dims[d], a->dims[d]);
    }
    cr_assert_eq(b->row_begin, a->row_begin);
    cr_assert_eq(b->row_end, a->row_end);
    cr_assert_eq(b->version, a->version);
    cr_assert_eq(b->count, a->count);
    cr_assert_eq(memcmp(b->data, a->data, a->count * sizeof(float)), 0, "%s data", a->name);
  }
  cr_assert_eq(tfx_ckpt_find(c, "dense_1/kernel@m"), &c->entries[1]);
  cr_assert_null(tfx_ckpt_find(c, "dense_1/kernel@v"));
  cr_assert_null(tfx_ckpt_find(c, "dense_1"));
  tfx_ckpt_destroy(c);
  tfx_ckpt_destroy(NULL);
}

Test(ckpt, empty_shard_and_empty_entries) {
  char path[128];
  snprintf(path, sizeof path, "%s/empty.shard", tmp);
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_write(path, 0, NULL, 0, NULL, NULL, &err), TFX_OK, "%s", err.msg);
  tfx_ckpt *c = NULL;
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(c->n, 0);
  cr_assert_eq(c->step, 0);
  tfx_ckpt_destroy(c);

  /* A zero-element entry whose data pointer is a valid (non-NULL) empty array. */
  float nothing[1] = {0};
  tfx_ckpt_entry e = {.name = "empty", .rank = 1, .dims = {0}, .count = 0, .data = nothing};
  cr_assert_eq(tfx_ckpt_write(path, 3, &e, 1, NULL, NULL, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(c->n, 1);
  cr_assert_eq(c->entries[0].count, 0);
  tfx_ckpt_destroy(c);
}

Test(ckpt, zero_element_entry_with_null_data) {
  /* Regression guard (src/store/ckpt.c, put): an entry with count 0 and data NULL (a legal empty borrowed array)
   * once called fwrite(NULL, 1, 0, f), undefined behaviour that UBSan aborts on, and crc32(crc, NULL, 0), which
   * returns zlib's initial value 0 instead of crc: the trailer no longer matched and the writer's own shard read
   * back as TFX_ECORRUPT "bad trailer". put() now returns early when n == 0. */
  char path[128];
  snprintf(path, sizeof path, "%s/null.shard", tmp);
  sample s;
  sample_init(&s);
  tfx_ckpt_entry e[2] = {s.e[0], {.name = "empty", .rank = 1, .dims = {0}, .count = 0, .data = NULL}};
  uint32_t crc = 0;
  uint64_t bytes = 0;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_write(path, 3, e, 2, &crc, &bytes, &err), TFX_OK, "%s", err.msg);
  tfx_ckpt *c = NULL;
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(c->n, 2);
  tfx_ckpt_destroy(c);
  uint32_t file_crc = 0;
  uint64_t file_bytes = 0;
  cr_assert_eq(tfx_file_crc32(path, &file_crc, &file_bytes, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(file_crc, crc);
}

Test(ckpt, missing_file_is_enotfound) {
  char path[128];
  snprintf(path, sizeof path, "%s/nope.shard", tmp);
  tfx_ckpt *c = (tfx_ckpt *)&c;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, path) != NULL, "msg: %s", err.msg);
  cr_assert_eq(c, (tfx_ckpt *)&c);
}

Test(ckpt, every_truncation_is_ecorrupt_naming_the_file) {
  char path[128], cut_path[160];
  snprintf(path, sizeof path, "%s/ps-0.shard", tmp);
  snprintf(cut_path, sizeof cut_path, "%s/cut.shard", tmp);
  write_sample(path, 7, NULL, NULL);
  size_t len = 0;
  uint8_t *buf = slurp(path, &len);
  for (size_t cut = 0; cut < len; cut++) {
    spit(cut_path, buf, cut);
    tfx_ckpt *c = NULL;
    tfx_err err = {0};
    int rc = tfx_ckpt_read(cut_path, &c, &err);
    cr_assert_eq(rc, TFX_ECORRUPT, "cut at %zu of %zu: rc %d (%s)", cut, len, rc, err.msg);
    cr_assert(strstr(err.msg, cut_path) != NULL, "cut %zu: msg '%s' must name the file", cut, err.msg);
    cr_assert(strstr(err.msg, "offset") != NULL, "cut %zu: msg '%s' must give the offset", cut, err.msg);
    cr_assert_null(c);
  }
  /* An extra byte after the trailer is corruption too. */
  buf[len] = 0;
  spit(cut_path, buf, len + 1);
  tfx_ckpt *c = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_read(cut_path, &c, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "bad trailer") != NULL, "msg: %s", err.msg);
  free(buf);
}

Test(ckpt, every_bit_flip_is_ecorrupt) {
  char path[128], bad[160];
  snprintf(path, sizeof path, "%s/ps-0.shard", tmp);
  snprintf(bad, sizeof bad, "%s/flip.shard", tmp);
  write_sample(path, 7, NULL, NULL);
  size_t len = 0;
  uint8_t *buf = slurp(path, &len);
  for (size_t byte = 0; byte < len; byte++) {
    for (int bit = 0; bit < 8; bit++) {
      buf[byte] ^= (uint8_t)(1u << bit);
      spit(bad, buf, len);
      buf[byte] ^= (uint8_t)(1u << bit);
      tfx_ckpt *c = NULL;
      tfx_err err = {0};
      int rc = tfx_ckpt_read(bad, &c, &err);
      cr_assert_eq(rc, TFX_ECORRUPT, "flip of bit %d of byte %zu: rc %d (%s)", bit, byte, rc, err.msg);
      cr_assert(strstr(err.msg, bad) != NULL, "msg '%s' must name the file", err.msg);
      cr_assert_null(c);
    }
  }
  free(buf);
}

Test(ckpt, data_bit_flip_names_the_entry) {
  char path[128];
  snprintf(path, sizeof path, "%s/ps-0.shard", tmp);
  write_sample(path, 7, NULL, NULL);
  size_t len = 0;
  uint8_t *buf = slurp(path, &len);
  buf[len - 12 - 3] ^= 0x10; /* inside the last entry's data (the bias slice) */
  spit(path, buf, len);
  tfx_ckpt *c = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "'dense_1/bias/part_1' checksum mismatch at offset") != NULL, "msg: %s", err.msg);
  free(buf);
}

Test(ckpt, a_huge_entry_count_in_a_tiny_file_is_ecorrupt) {
  /* A 36-byte file (header + trailer, valid checksum) that claims 999999 entries. */
  char path[128];
  snprintf(path, sizeof path, "%s/count.shard", tmp);
  uint8_t buf[36] = "TFXSHRD1";
  uint32_t version = 1, count = 999999;
  memcpy(buf + 8, &version, 4);
  memcpy(buf + 12, &count, 4);
  memcpy(buf + 24, "TFXEND\0\0", 8);
  uint32_t crc = (uint32_t)crc32(0, buf, 24);
  memcpy(buf + 32, &crc, 4);
  spit(path, buf, sizeof buf);
  tfx_ckpt *c = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ECORRUPT, "%s", err.msg);
  cr_assert(strstr(err.msg, path) != NULL, "msg: %s", err.msg);
  /* Refused from the header, before a calloc of 999999 entries (fuzz_ckpt found it slow, ~240 MB per input). */
  cr_assert(strstr(err.msg, "999999 entries at offset 24, file has 12 bytes left") != NULL, "msg: %s", err.msg);

  count = 1000001; /* over the format's limit */
  memcpy(buf + 12, &count, 4);
  crc = (uint32_t)crc32(0, buf, 24);
  memcpy(buf + 32, &crc, 4);
  spit(path, buf, sizeof buf);
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "1000001 entries") != NULL, "msg: %s", err.msg);

  version = 2;
  memcpy(buf + 8, &version, 4);
  spit(path, buf, sizeof buf);
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "format version 2, want 1") != NULL, "msg: %s", err.msg);
}

/* ---- manifests and checkpoint directories ---- */

/* Writes RUN/checkpoints/ckpt-STEP with two shards and (if manifest) its manifest. */
static void make_checkpoint(const char *run, int64_t step, int manifest, char *dir_out) {
  char dir[1100], path[1200];
  tfx_ckpt_dir(run, step, dir, sizeof dir);
  tfx_err err = {0};
  cr_assert_eq(tfx_mkdirs(dir, &err), TFX_OK, "%s", err.msg);
  uint32_t crc[2];
  uint64_t bytes[2];
  for (int p = 0; p < 2; p++) {
    snprintf(path, sizeof path, "%s/ps-%d.shard", dir, p);
    write_sample(path, step, &crc[p], &bytes[p]);
  }
  if (manifest) {
    cr_assert_eq(tfx_ckpt_write_manifest(dir, step, 2, crc, bytes, &err), TFX_OK, "%s", err.msg);
  }
  if (dir_out) {
    strcpy(dir_out, dir);
  }
}

Test(ckpt, dir_name_is_zero_padded) {
  char dir[256];
  tfx_ckpt_dir("/runs/a", 1200, dir, sizeof dir);
  cr_assert_str_eq(dir, "/runs/a/checkpoints/ckpt-000000001200");
}

Test(ckpt, manifest_and_verify) {
  char run[128], dir[1100], path[1200];
  snprintf(run, sizeof run, "%s/run", tmp);
  make_checkpoint(run, 300, 1, dir);

  snprintf(path, sizeof path, "%s/manifest.json", dir);
  json_object *root = json_object_from_file(path), *v, *shards;
  cr_assert_not_null(root, "manifest.json is not JSON");
  cr_assert(json_object_object_get_ex(root, "step", &v));
  cr_assert_eq(json_object_get_int64(v), 300);
  cr_assert(json_object_object_get_ex(root, "shards", &shards));
  cr_assert_eq(json_object_array_length(shards), 2);
  json_object *s1 = json_object_array_get_idx(shards, 1), *file, *crc, *bytes;
  cr_assert(json_object_object_get_ex(s1, "file", &file));
  cr_assert_str_eq(json_object_get_string(file), "ps-1.shard");
  cr_assert(json_object_object_get_ex(s1, "crc32", &crc));
  cr_assert(json_object_object_get_ex(s1, "bytes", &bytes));
  snprintf(path, sizeof path, "%s/ps-1.shard", dir);
  uint32_t fc;
  uint64_t fb;
  cr_assert_eq(tfx_file_crc32(path, &fc, &fb, NULL), TFX_OK);
  cr_assert_eq((uint32_t)json_object_get_int64(crc), fc);
  cr_assert_eq((uint64_t)json_object_get_int64(bytes), fb);
  json_object_put(root);

  int64_t step = 0;
  int n_ps = 0;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 300);
  cr_assert_eq(n_ps, 2);
}

Test(ckpt, verify_failures) {
  char run[128], dir[1100], path[1200];
  snprintf(run, sizeof run, "%s/run", tmp);
  int64_t step = -1;
  int n_ps = -1;
  tfx_err err = {0};

  make_checkpoint(run, 10, 0, dir);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "manifest.json") != NULL, "msg: %s", err.msg);

  make_checkpoint(run, 20, 1, dir);
  snprintf(path, sizeof path, "%s/ps-1.shard", dir);
  size_t len;
  uint8_t *buf = slurp(path, &len);
  buf[40] ^= 1;
  spit(path, buf, len);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, path) != NULL, "the message names the shard: %s", err.msg);
  cr_assert(strstr(err.msg, "differs from the manifest") != NULL, "msg: %s", err.msg);

  spit(path, buf, len - 1); /* truncated by a byte (and still flipped) */
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ECORRUPT);
  unlink(path);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, path) != NULL, "msg: %s", err.msg);
  free(buf);

  make_checkpoint(run, 30, 0, dir);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  spit(path, (const uint8_t *)"{\"step\": 30}", 12);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "malformed manifest") != NULL, "msg: %s", err.msg);
  spit(path, (const uint8_t *)"{\"step\": 30, \"shards\": [{\"file\": \"ps-0.shard\"}]}", 48);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "lacks file/crc32/bytes") != NULL, "msg: %s", err.msg);
  /* Found by fuzz_ckpt: "" named the directory itself, whose size stdio reports as 2^63-1. */
  const char *outside[] = {"{\"step\": 30, \"shards\": [{\"file\": \"\", \"crc32\": 1, \"bytes\": 9}]}",
                           "{\"step\": 30, \"shards\": [{\"file\": \"../x\", \"crc32\": 1, \"bytes\": 9}]}"};
  for (int i = 0; i < 2; i++) {
    spit(path, (const uint8_t *)outside[i], strlen(outside[i]));
    cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ECORRUPT, "%s", outside[i]);
    cr_assert(strstr(err.msg, "is not a name in the directory") != NULL, "msg: %s", err.msg);
  }
  uint32_t crc;
  uint64_t bytes;
  cr_assert_eq(tfx_file_crc32(dir, &crc, &bytes, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "not a regular file") != NULL, "msg: %s", err.msg);

  cr_assert_eq(step, -1, "out-parameters written on failure");
  cr_assert_eq(n_ps, -1, "out-parameters written on failure");
}

Test(ckpt, latest_picks_the_newest_complete_checkpoint) {
  char run[128], dir[1100], found[1100], path[1200];
  snprintf(run, sizeof run, "%s/run", tmp);
  int64_t step = 0;
  tfx_err err = {0};

  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "no complete checkpoint") != NULL, "msg: %s", err.msg);
  cr_assert(strstr(err.msg, run) != NULL, "msg: %s", err.msg);

  make_checkpoint(run, 100, 1, NULL);
  make_checkpoint(run, 200, 1, NULL);
  make_checkpoint(run, 2000, 1, dir); /* 2000 > 200 numerically, not only by name */
  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 2000);
  cr_assert_str_eq(found, dir);

  /* A corrupted shard disqualifies 2000. */
  snprintf(path, sizeof path, "%s/ps-0.shard", dir);
  size_t len;
  uint8_t *buf = slurp(path, &len);
  buf[len / 2] ^= 0x80;
  spit(path, buf, len);
  free(buf);
  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 200);

  /* A newer checkpoint whose manifest was never written (the master died first) is ignored. */
  make_checkpoint(run, 5000, 0, NULL);
  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 200);

  /* Remove 200's manifest: 100 is next. Stray entries in checkpoints/ are ignored. */
  tfx_ckpt_dir(run, 200, dir, sizeof dir);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  cr_assert_eq(unlink(path), 0);
  snprintf(path, sizeof path, "%s/checkpoints/README", run);
  spit(path, (const uint8_t *)"x", 1);
  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 100);
  tfx_ckpt_dir(run, 100, dir, sizeof dir);
  cr_assert_str_eq(found, dir);
}

Test(ckpt, prune_keeps_keep_max_newest_complete) {
  char run[128], dir[1100];
  snprintf(run, sizeof run, "%s/run", tmp);
  for (int s = 1; s <= 5; s++) {
    make_checkpoint(run, s * 100, 1, NULL);
  }
  make_checkpoint(run, 50, 0, NULL);  /* older and incomplete: removed */
  make_checkpoint(run, 600, 0, NULL); /* newer and incomplete (being written): kept */

  tfx_ckpt_prune(run, 2);
  const struct {
    int64_t step;
    int kept;
  } want[] = {{50, 0}, {100, 0}, {200, 0}, {300, 0}, {400, 1}, {500, 1}, {600, 1}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    tfx_ckpt_dir(run, want[i].step, dir, sizeof dir);
    cr_expect_eq(exists(dir), want[i].kept, "step %lld", (long long)want[i].step);
  }
  int64_t step = 0;
  char found[1100];
  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, NULL), TFX_OK);
  cr_assert_eq(step, 500);

  tfx_ckpt_prune(run, 1);
  tfx_ckpt_dir(run, 400, dir, sizeof dir);
  cr_assert(!exists(dir));
  tfx_ckpt_dir(run, 500, dir, sizeof dir);
  cr_assert(exists(dir));

  tfx_ckpt_prune(run, 3); /* nothing more to remove */
  cr_assert(exists(dir));
  tfx_ckpt_prune("/nonexistent/tfx/run", 1); /* no checkpoints directory: nothing happens */
}

Test(ckpt, prune_keeps_the_best_beside_keep_max) {
  char run[128], dir[1100];
  snprintf(run, sizeof run, "%s/run", tmp);
  for (int s = 1; s <= 5; s++) {
    make_checkpoint(run, s * 100, 1, NULL);
  }
  tfx_best b = {.metric = "accuracy", .maximize = 1, .value = 0.875, .step = 200, .eval_step = 200}, back;
  tfx_err err = {0};
  cr_assert_eq(tfx_best_write(run, &b, &err), TFX_OK, "%s", err.msg);
  tfx_ckpt_prune(run, 2); /* the newest two and the best */
  const struct {
    int64_t step;
    int kept;
  } want[] = {{100, 0}, {200, 1}, {300, 0}, {400, 1}, {500, 1}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    tfx_ckpt_dir(run, want[i].step, dir, sizeof dir);
    cr_expect_eq(exists(dir), want[i].kept, "step %lld", (long long)want[i].step);
  }
  cr_assert_eq(tfx_best_read(run, &back, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(back.metric, "accuracy");
  cr_assert(back.maximize && back.value == 0.875 && back.step == 200 && back.eval_step == 200);
  b.step = 500; /* the best moves to the newest: the old best goes at the next prune */
  cr_assert_eq(tfx_best_write(run, &b, &err), TFX_OK, "%s", err.msg);
  tfx_ckpt_prune(run, 1);
  tfx_ckpt_dir(run, 200, dir, sizeof dir);
  cr_expect(!exists(dir));
  tfx_ckpt_dir(run, 400, dir, sizeof dir);
  cr_expect(exists(dir), "the best (500) does not count against keep_max: 400 stays");
}

Test(ckpt, best_json_missing_and_corrupt) {
  char run[128], path[1100];
  snprintf(run, sizeof run, "%s/run", tmp);
  tfx_best b;
  tfx_err err = {0};
  cr_assert_eq(tfx_best_read(run, &b, &err), TFX_ENOTFOUND);
  make_checkpoint(run, 100, 1, NULL);
  tfx_best_path(run, path, sizeof path);
  spit(path, (const uint8_t *)"{\"metric\": \"loss\"}", 18);
  cr_assert_eq(tfx_best_read(run, &b, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "best.json"), "%s", err.msg);
}

Test(ckpt, mkdirs) {
  char path[256];
  snprintf(path, sizeof path, "%s/a/b/c", tmp);
  tfx_err err = {0};
  cr_assert_eq(tfx_mkdirs(path, &err), TFX_OK, "%s", err.msg);
  cr_assert(exists(path));
  cr_assert_eq(tfx_mkdirs(path, &err), TFX_OK, "an existing directory is fine: %s", err.msg);
  char file[256];
  snprintf(file, sizeof file, "%s/a/file", tmp);
  spit(file, (const uint8_t *)"x", 1);
  snprintf(path, sizeof path, "%s/a/file/sub", tmp);
  cr_assert_eq(tfx_mkdirs(path, &err), TFX_ESYS);
  cr_assert(strstr(err.msg, "mkdir") != NULL, "msg: %s", err.msg);
}

Test(ckpt, write_into_a_missing_directory_fails_with_esys) {
  char path[256];
  snprintf(path, sizeof path, "%s/no/such/dir/ps-0.shard", tmp);
  sample s;
  sample_init(&s);
  uint32_t crc = 0xdeadbeef;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_write(path, 1, s.e, 3, &crc, NULL, &err), TFX_ESYS);
  cr_assert(strstr(err.msg, "ps-0.shard.tmp") != NULL, "msg: %s", err.msg);
  cr_assert_eq(crc, 0xdeadbeef, "out-parameter written on failure");
}

/* Writes one entry named `name_len` x 'k' of rank `rank` (dims 1, one value) at path; the file's size to *bytes. */
static void write_limits(const char *path, size_t name_len, int rank, uint64_t *bytes) {
  float one = 1.0f;
  tfx_ckpt_entry e = {.rank = rank, .row_begin = 0, .row_end = 1, .count = 1, .data = &one};
  memset(e.name, 'k', name_len), e.name[name_len] = '\0';
  for (int d = 0; d < rank; d++) {
    e.dims[d] = 1;
  }
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_write(path, 7, &e, 1, NULL, bytes, &err), TFX_OK, "%s", err.msg);
}

/* The limits ckpt.h documents: names up to 159 bytes and rank up to 8 are read; a 160-byte name or rank 9 is
 * refused naming the file (rank 9 is written over a valid file's rank field: the writer holds 8 dims). */
Test(ckpt, documented_reader_limits) {
  char path[128];
  snprintf(path, sizeof path, "%s/limits.shard", tmp);
  uint64_t bytes = 0;
  tfx_ckpt *c = NULL;
  tfx_err err = {0};
  write_limits(path, 159, 8, &bytes);
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(c->entries[0].rank, 8);
  cr_assert_eq(strlen(c->entries[0].name), 159);
  tfx_ckpt_destroy(c);

  FILE *f = fopen(path, "r+b");
  uint32_t nine = 9;
  fseek(f, 24 + 2 + 159, SEEK_SET), fwrite(&nine, 4, 1, f), fclose(f);
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, path) && strstr(err.msg, "rank 9"), "msg: %s", err.msg);

  write_limits(path, 159, 1, &bytes); /* then its u16 name length claims 160 */
  f = fopen(path, "r+b");
  uint16_t len = 160;
  fseek(f, 24, SEEK_SET), fwrite(&len, 2, 1, f), fclose(f);
  cr_assert_eq(tfx_ckpt_read(path, &c, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, path) && strstr(err.msg, "name length 160"), "msg: %s", err.msg);
}

/* The names of a checkpoint's parts are made in one place, and read back by the same rule. */
Test(ckpt, part_names_round_trip) {
  char path[64];
  cr_assert_eq(tfx_ckpt_part_path(path, sizeof path, "run/ckpt-7", 3, TFX_CKPT_SHARD), 21);
  cr_assert_str_eq(path, "run/ckpt-7/ps-3.shard");
  tfx_ckpt_part_path(path, sizeof path, NULL, 12, TFX_CKPT_ROWS);
  cr_assert_str_eq(path, "ps-12.rows");
  cr_assert_eq(tfx_ckpt_part_owner("run/ckpt-7/ps-3.shard", TFX_CKPT_SHARD), 3);
  cr_assert_eq(tfx_ckpt_part_owner("ps-12.rows", TFX_CKPT_ROWS), 12);
  cr_assert_eq(tfx_ckpt_part_owner("ps-12.rows", TFX_CKPT_SHARD), -1);
  cr_assert_eq(tfx_ckpt_part_owner("ps-3.shard.tmp", TFX_CKPT_SHARD), -1);
  cr_assert_eq(tfx_ckpt_part_owner("ps-x.shard", TFX_CKPT_SHARD), -1);
  cr_assert_eq(tfx_ckpt_part_owner("manifest.json", TFX_CKPT_ROWS), -1);
}

/* A slice's entries: the values under the key, each optimizer slot under KEY@SLOT, rows and version carried. */
Test(ckpt, slice_entries_name_values_and_slots) {
  float value[6] = {1, 2, 3, 4, 5, 6}, m[6] = {0}, v[6] = {0};
  float *slots[2] = {m, v};
  int64_t dims[2] = {4, 3};
  tfx_ckpt_slice s = {.key = "dense/kernel/part_1",
                      .rank = 2,
                      .dims = dims,
                      .row_begin = 2,
                      .row_end = 4,
                      .version = 9,
                      .count = 6,
                      .value = value,
                      .slots = slots,
                      .n_slots = 2};
  tfx_ckpt_entry e[3] = {0};
  cr_assert_eq(tfx_ckpt_slice_entries(e, &s), 3);
  cr_assert_str_eq(e[0].name, "dense/kernel/part_1");
  cr_assert_str_eq(e[1].name, "dense/kernel/part_1@m");
  cr_assert_str_eq(e[2].name, "dense/kernel/part_1@v");
  cr_assert(e[0].data == value && e[1].data == m && e[2].data == v);
  for (int i = 0; i < 3; i++) {
    cr_assert(e[i].rank == 2 && e[i].dims[0] == 4 && e[i].dims[1] == 3 && e[i].count == 6);
    cr_assert(e[i].row_begin == 2 && e[i].row_end == 4 && e[i].version == 9);
  }
}

/* A manifest whose step is not its directory's (ckpt-STEP) is corrupt: a resume "at" it would start elsewhere. */
Test(ckpt, manifest_step_must_match_its_directory) {
  char run[128], dir[1100];
  uint32_t crc[2];
  uint64_t bytes[2];
  snprintf(run, sizeof run, "%s/run", tmp);
  make_checkpoint(run, 6000, 1, dir);
  int64_t step;
  int nps;
  tfx_err err = {0};
  for (int p = 0; p < 2; p++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/ps-%d.shard", dir, p);
    cr_assert_eq(tfx_file_crc32(path, &crc[p], &bytes[p], &err), TFX_OK, "%s", err.msg);
  }
  cr_assert_eq(tfx_ckpt_write_manifest(dir, 7000, 2, crc, bytes, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &nps, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "step 7000, but the directory is step 6000") != NULL, "msg: %s", err.msg);
  cr_assert_eq(tfx_ckpt_resume_point(run, &step, dir, sizeof dir, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "none usable") != NULL, "msg: %s", err.msg);
}

/* Resuming past an unusable checkpoint sets it aside, byte for byte, where no new checkpoint can overwrite it;
 * a refused resume (none usable) moves nothing. */
Test(ckpt, resume_sets_unusable_checkpoints_aside) {
  char run[128], dir[1100], bad[1100], path[1200], found[1100];
  snprintf(run, sizeof run, "%s/run", tmp);
  make_checkpoint(run, 100, 1, NULL);
  make_checkpoint(run, 200, 1, bad);
  snprintf(path, sizeof path, "%s/ps-0.shard", bad);
  size_t len;
  uint8_t *buf = slurp(path, &len);
  buf[len / 2] ^= 0x80;
  spit(path, buf, len);
  int64_t step = 0;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_resume_point(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 100);
  cr_assert(!exists(bad), "%s is still where a new checkpoint would be written", bad);
  snprintf(path, sizeof path, "%s.unusable/ps-0.shard", bad);
  size_t kept_len;
  uint8_t *kept = slurp(path, &kept_len);
  cr_assert(kept_len == len && memcmp(kept, buf, len) == 0, "the set-aside shard changed");
  free(kept);
  free(buf);
  make_checkpoint(run, 200, 1, dir); /* step 200 again: a new directory, the set-aside one untouched */
  cr_assert_eq(tfx_ckpt_latest(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 200);
  snprintf(path, sizeof path, "%s/ps-1.shard", dir);
  unlink(path); /* 200 unusable again, 100 too: nothing usable, nothing moves */
  tfx_ckpt_dir(run, 100, dir, sizeof dir);
  snprintf(path, sizeof path, "%s/ps-1.shard", dir);
  unlink(path);
  cr_assert_eq(tfx_ckpt_resume_point(run, &step, found, sizeof found, &err), TFX_ECORRUPT);
  tfx_ckpt_dir(run, 200, dir, sizeof dir);
  cr_assert(exists(dir) && exists(bad) == exists(dir), "a refused resume moved a checkpoint");
  snprintf(path, sizeof path, "%s.unusable-2", bad);
  cr_assert(!exists(path), "a refused resume set a checkpoint aside");
}

/* Runs tfx_weights_from_run with stderr into a file; returns its code and the log lines in log[n]. */
static int read_run_logged(const char *run, tfx_weights *ws, tfx_err *err, char *log, size_t n) {
  char path[160];
  snprintf(path, sizeof path, "%s/stderr.txt", tmp);
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  cr_assert(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  int rc = tfx_weights_from_run(run, ws, err);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  size_t len;
  uint8_t *buf = slurp(path, &len);
  snprintf(log, n, "%.*s", (int)len, (const char *)buf);
  free(buf);
  return rc;
}

/* Commands that only read a run (evaluate, export, predict, inspect: tfx_weights_from_run) name each checkpoint
 * they skip and why in a CKPT-SKIP warning and move nothing; with none usable they give a resume's reasons, not
 * "no complete checkpoint" (#30, item 17). */
Test(ckpt, reading_names_skipped_checkpoints_and_moves_nothing) {
  char run[128], bad[1100], path[1200], log[4096];
  snprintf(run, sizeof run, "%s/run", tmp);
  make_checkpoint(run, 100, 1, NULL);
  make_checkpoint(run, 200, 1, bad);
  snprintf(path, sizeof path, "%s/ps-1.shard", bad);
  cr_assert_eq(unlink(path), 0);
  tfx_weights ws;
  tfx_err err = {0};
  cr_assert_eq(read_run_logged(run, &ws, &err, log, sizeof log), TFX_OK, "%s", err.msg);
  cr_assert(strstr(ws.source, "ckpt-000000000100") != NULL, "read %s", ws.source);
  tfx_weights_fini(&ws);
  cr_assert(strstr(log, "CKPT-SKIP") && strstr(log, "ckpt-000000000200 is not usable") && strstr(log, "ps-1.shard"),
            "log: %s", log);
  cr_assert(exists(bad), "a reading command moved %s", bad);
  tfx_ckpt_dir(run, 100, path, sizeof path);
  snprintf(path + strlen(path), sizeof path - strlen(path), "/ps-1.shard");
  cr_assert_eq(unlink(path), 0); /* none usable now */
  cr_assert_eq(read_run_logged(run, &ws, &err, log, sizeof log), TFX_ECORRUPT, "%s", err.msg);
  cr_assert(strstr(err.msg, "2 checkpoint(s), none usable") && strstr(err.msg, "ps-1.shard"), "msg: %s", err.msg);
  cr_assert(strstr(log, "ckpt-000000000100 is not usable"), "log: %s", log);
  cr_assert(exists(bad), "a reading command moved %s", bad);
}

Test(ckpt, verify_once_reads_a_checkpoint_again_only_when_its_files_changed) {
  char run[128], dir[1100], path[1200];
  snprintf(run, sizeof run, "%s/run", tmp);
  make_checkpoint(run, 100, 1, dir);
  int64_t step = 0;
  int n_ps = 0;
  uint64_t hits = tfx_ckpt_verify_hits();
  cr_assert_eq(tfx_ckpt_verify_once(dir, &step, &n_ps), TFX_OK);
  cr_assert_eq(tfx_ckpt_verify_hits(), hits, "the first verification reads the files");
  step = 0;
  cr_assert_eq(tfx_ckpt_verify_once(dir, &step, &n_ps), TFX_OK);
  cr_assert_eq(tfx_ckpt_verify_hits(), hits + 1, "an unchanged checkpoint is not read again");
  cr_assert_eq(step, 100);
  cr_assert_eq(n_ps, 2);

  snprintf(path, sizeof path, "%s/ps-1.shard", dir); /* a part cut short after it was verified */
  cr_assert_eq(truncate(path, 10), 0);
  cr_assert_neq(tfx_ckpt_verify_once(dir, &step, &n_ps), TFX_OK, "a changed part is verified again, and fails");
  cr_assert_eq(tfx_ckpt_verify_hits(), hits + 1);
  make_checkpoint(run, 200, 1, NULL);
  make_checkpoint(run, 300, 1, NULL);
  tfx_ckpt_prune(run, 1);
  cr_assert(exists(dir), "the corrupt checkpoint stays for the user to look at");
}

Test(ckpt, an_accepted_checkpoint_is_checked_by_size_and_not_read_again) {
  char run[128], dir[1100], path[1200];
  snprintf(run, sizeof run, "%s/run", tmp);
  make_checkpoint(run, 100, 1, dir);
  tfx_err err = {0};
  int64_t step = 0;
  int n_ps = 0;
  uint64_t hits = tfx_ckpt_verify_hits();
  cr_assert_eq(tfx_ckpt_memo_accept(dir, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_ckpt_verify_once(dir, &step, &n_ps), TFX_OK);
  cr_assert_eq(tfx_ckpt_verify_hits(), hits + 1, "an accepted checkpoint is not read again");
  cr_assert_eq(step, 100);

  make_checkpoint(run, 200, 1, dir); /* a part of the wrong size is refused, and not remembered */
  snprintf(path, sizeof path, "%s/ps-1.shard", dir);
  cr_assert_eq(truncate(path, 10), 0);
  cr_assert_eq(tfx_ckpt_memo_accept(dir, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "ps-1.shard") && strstr(err.msg, "differs from the manifest"), "msg: %s", err.msg);
  cr_assert_neq(tfx_ckpt_verify_once(dir, &step, &n_ps), TFX_OK);
  cr_assert_eq(tfx_ckpt_verify_hits(), hits + 1);
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &n_ps, &err), TFX_ECORRUPT, "a restore still reads every byte");
}
