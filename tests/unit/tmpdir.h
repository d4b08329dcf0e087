/* A fresh temporary directory for each test of a suite (tmp), removed with its contents after the test. */
#ifndef TFX_TEST_TMPDIR_H
#define TFX_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <ftw.h>
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

#endif
