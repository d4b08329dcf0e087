/* TensorBoard event files (observe/events.c): written events read back as TFRecords whose two masked CRC32Cs are
 * checked twice, by the TFRecord reader (data/tfrecord.c) and here from the published definitions (CRC32C of
 * "123456789" is E3069283; mask = rotate right by 15, plus a282ead8), so that a writer and a reader that agreed
 * on a wrong CRC would still fail; a flipped byte is found. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <string.h>

#include "data/tfrecord.h"
#include "observe/events.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("events");
}

TestSuite(events, .init = setup, .fini = tmpdir_remove);

/* Bitwise CRC32C (Castagnoli, reflected polynomial 82f63b78): independent of tfrecord.c's table. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) {
      c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    }
  }
  return ~c;
}

static uint32_t masked(const uint8_t *p, size_t n) {
  uint32_t c = crc32c_bitwise(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) {
    v = (v << 8) | p[i];
  }
  return v;
}

/* Writes the version event and three scalar events (a zero, a NaN that is skipped) into tmp; path gets the file. */
static void write_events(char *path, size_t size) {
  tfx_events *e = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_events_open(tmp, &e, &err), TFX_OK, "%s", err.msg);
  const char *names[] = {"loss", "accuracy"};
  const double v1[] = {2.25, 0.125}, v2[] = {0.0, NAN}, v3[] = {0.5, 0.875};
  tfx_events_write(e, "train", 10, names, v1, 2);
  tfx_events_write(e, "train", 20, names, v2, 2);
  tfx_events_write(e, "eval", 30, names, v3, 2);
  tfx_events_close(e);
  DIR *d = opendir(tmp);
  cr_assert_not_null(d);
  struct dirent *de;
  path[0] = '\0';
  while ((de = readdir(d))) {
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) {
      snprintf(path, size, "%s/%s", tmp, de->d_name);
    }
  }
  closedir(d);
  cr_assert_neq(path[0], '\0', "no events.out.tfevents.* file in %s", tmp);
}

Test(events, crc32c_and_mask_are_the_published_ones) {
  cr_assert_eq(crc32c_bitwise((const uint8_t *)"123456789", 9), 0xe3069283u);
  cr_assert_eq(tfx_crc32c(0, "123456789", 9), 0xe3069283u);
  cr_assert_eq(tfx_crc32c_mask(0xe3069283u), masked((const uint8_t *)"123456789", 9));
}

Test(events, every_record_carries_both_masked_crcs) {
  char path[256];
  write_events(path, sizeof path);
  size_t len = 0;
  uint8_t *b = slurp(path, &len);
  size_t at = 0;
  int records = 0;
  while (at < len) {
    cr_assert_leq(at + 12, len, "record %d: truncated header at offset %zu", records, at);
    uint64_t n = get_le(b + at, 8);
    cr_assert_eq((uint32_t)get_le(b + at + 8, 4), masked(b + at, 8), "record %d: length crc", records);
    cr_assert_leq(at + 12 + n + 4, len, "record %d: truncated at offset %zu", records, at);
    cr_assert_eq((uint32_t)get_le(b + at + 12 + n, 4), masked(b + at + 12, n), "record %d: data crc", records);
    if (records == 0) {
      cr_assert_not_null(memmem(b + at + 12, n, "brain.Event:2", 13), "the first record is the file version");
    }
    at += 12 + n + 4, records++;
  }
  cr_assert_eq(records, 4, "version + 3 events, got %d records", records);
  cr_assert_not_null(memmem(b, len, "train/loss", 10));
  cr_assert_not_null(memmem(b, len, "eval/accuracy", 13));
  free(b);
}

Test(events, the_tfrecord_reader_verifies_them) {
  char path[256];
  write_events(path, sizeof path);
  tfx_tfrecord_reader *r = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &err), TFX_OK, "%s", err.msg);
  const uint8_t *data = NULL;
  size_t n = 0;
  int records = 0;
  while (tfx_tfrecord_reader_next(r, &data, &n, &err) == TFX_OK && data) {
    records++;
  }
  cr_assert_eq(err.code, TFX_OK, "%s", err.msg);
  cr_assert_eq(records, 4);
  tfx_tfrecord_reader_close(r);
}

Test(events, a_flipped_byte_fails_its_crc) {
  char path[256];
  write_events(path, sizeof path);
  size_t len = 0;
  uint8_t *b = slurp(path, &len);
  size_t second = 12 + (size_t)get_le(b, 8) + 4; /* the first scalar event */
  b[second + 12 + 3] ^= 0x10;
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b, 1, len, f), len);
  fclose(f);
  free(b);
  tfx_tfrecord_reader *r = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &err), TFX_OK, "%s", err.msg);
  const uint8_t *data = NULL;
  size_t n = 0;
  cr_assert_eq(tfx_tfrecord_reader_next(r, &data, &n, &err), TFX_OK, "%s", err.msg);
  int rc = tfx_tfrecord_reader_next(r, &data, &n, &err);
  cr_assert_eq(rc, TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "data crc mismatch") != NULL, "msg: %s", err.msg);
  tfx_tfrecord_reader_close(r);
}

/* An event file appears with the first event, so a run refused before it writes nothing leaves none (it left a
 * 40-byte file of only the file_version record: #30, item 18). */
/* The one events file in tmp into path (1 when there is one, 0 when none). */
static int events_file(char *path, size_t n) {
  DIR *d = opendir(tmp);
  cr_assert_not_null(d);
  int found = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) {
      snprintf(path, n, "%s/%s", tmp, de->d_name);
      found++;
    }
  }
  closedir(d);
  cr_assert_leq(found, 1);
  return found;
}

Test(events, created_at_the_first_event) {
  tfx_events *e = NULL;
  tfx_err err = {0};
  char path[512];
  cr_assert_eq(tfx_events_open(tmp, &e, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(events_file(path, sizeof path), 0, "opened, nothing written, yet %s exists", path);
  tfx_events_close(e);
  cr_assert_eq(events_file(path, sizeof path), 0, "a run with no event left %s", path);
  cr_assert_eq(tfx_events_open(tmp, &e, &err), TFX_OK, "%s", err.msg);
  const char *names[] = {"loss"};
  const double values[] = {0.5};
  tfx_events_write(e, "train", 1, names, values, 1);
  tfx_events_write(e, "train", 2, names, values, 1);
  tfx_events_close(e);
  cr_assert_eq(events_file(path, sizeof path), 1);
  tfx_tfrecord_reader *r = NULL;
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &err), TFX_OK, "%s", err.msg);
  const uint8_t *data = NULL;
  size_t len = 0;
  int records = 0;
  while (!tfx_tfrecord_reader_next(r, &data, &len, &err) && data) {
    records++;
  }
  tfx_tfrecord_reader_close(r);
  cr_assert_eq(records, 3, "file_version and two events, got %d records", records);
}

/* A record of more fields than one summary holds (per_class of many classes) is written whole, as several events
 * of one step (it was dropped). */
Test(events, a_record_of_many_fields_is_written_whole) {
  tfx_events *e = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_events_open(tmp, &e, &err), TFX_OK, "%s", err.msg);
  char text[40][16];
  const char *names[40];
  double values[40];
  for (int i = 0; i < 40; i++) {
    snprintf(text[i], sizeof text[i], "f1_%d", i);
    names[i] = text[i];
    values[i] = i / 40.0;
  }
  tfx_events_write(e, "eval", 7, names, values, 40);
  tfx_events_close(e);
  DIR *d = opendir(tmp);
  cr_assert_not_null(d);
  struct dirent *de;
  char path[512] = "";
  while ((de = readdir(d))) {
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) {
      snprintf(path, sizeof path, "%s/%s", tmp, de->d_name);
    }
  }
  closedir(d);
  size_t len = 0;
  uint8_t *b = slurp(path, &len);
  cr_assert_not_null(memmem(b, len, "eval/f1_0", 9));
  cr_assert_not_null(memmem(b, len, "eval/f1_39", 10), "the fields past 32 are written");
  free(b);
}
