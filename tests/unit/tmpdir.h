/* Test files: a fresh temporary directory for each test of a suite (tmp), removed with its contents after the
 * test, and whole-file read/write helpers that fail the test on any I/O error. */
#ifndef TFX_TEST_TMPDIR_H
#define TFX_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char tmp[64];

static int tmpdir_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Creates /tmp/tfx-TAG-XXXXXX into tmp (call from the suite's .init). */
static void tmpdir_create(const char *tag) {
  snprintf(tmp, sizeof tmp, "/tmp/tfx-%s-XXXXXX", tag);
  cr_assert_not_null(mkdtemp(tmp));
}

/* Removes tmp and everything below it (the suite's .fini). */
static void tmpdir_remove(void) {
  nftw(tmp, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The whole file; the test owns the buffer (free()). */
static inline uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(*len + 1);
  cr_assert_eq(fread(buf, 1, *len, f), *len);
  fclose(f);
  return buf;
}

/* Writes len bytes as the whole file. */
static inline void spit(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  cr_assert_eq(fwrite(buf, 1, len, f), len);
  fclose(f);
}

#endif
