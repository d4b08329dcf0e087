/* common/fs and the run lock: files tfx creates in a run directory are never written through a symbolic link. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/fs.h"
#include "store/runlock.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("fs");
}

TestSuite(fs, .init = setup, .fini = tmpdir_remove);

/* A file planted as a link to a precious file: opening it for writing fails with ELOOP; the target is intact. */
static void plant_link(const char *link, char *target, size_t n) {
  snprintf(target, n, "%s/precious", tmp);
  FILE *f = fopen(target, "w");
  cr_assert_not_null(f);
  fputs("keep me\n", f);
  fclose(f);
  cr_assert_eq(symlink(target, link), 0);
}

static void assert_intact(const char *target) {
  char buf[32] = "";
  FILE *f = fopen(target, "r");
  cr_assert_not_null(f);
  cr_assert_not_null(fgets(buf, sizeof buf, f));
  fclose(f);
  cr_assert_str_eq(buf, "keep me\n", "the link's target was written");
}

Test(fs, fopen_write_truncates_appends_and_refuses_links) {
  char path[128], link[128], target[128], buf[32] = "";
  snprintf(path, sizeof path, "%s/a.txt", tmp);
  FILE *f = tfx_fopen_write(path, "w");
  cr_assert_not_null(f);
  fputs("one\n", f);
  fclose(f);
  f = tfx_fopen_write(path, "a");
  fputs("two\n", f);
  fclose(f);
  f = fopen(path, "r");
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  cr_assert_eq(got, 8);
  cr_assert_str_eq(buf, "one\ntwo\n");
  snprintf(link, sizeof link, "%s/metrics.jsonl", tmp);
  plant_link(link, target, sizeof target);
  for (int append = 0; append < 2; append++) {
    errno = 0;
    cr_assert_null(tfx_fopen_write(link, append ? "a" : "w"));
    cr_assert_eq(errno, ELOOP);
  }
  assert_intact(target);
}

Test(fs, run_lock_refuses_a_planted_link) {
  char run[128], link[128], target[128];
  snprintf(run, sizeof run, "%s/run", tmp);
  cr_assert_eq(tfx_mkdirs(run, NULL), TFX_OK);
  snprintf(link, sizeof link, "%s/.lock", run);
  plant_link(link, target, sizeof target);
  int fd = -1;
  tfx_err err = {0};
  cr_assert_eq(tfx_run_lock(run, &fd, &err), TFX_ESYS);
  cr_assert(strstr(err.msg, ".lock") != NULL, "msg: %s", err.msg);
  assert_intact(target);
}

Test(fs, write_file_refuses_a_planted_tmp_link) {
  char path[128], link[128], target[128];
  snprintf(path, sizeof path, "%s/config.json", tmp);
  snprintf(link, sizeof link, "%s.tmp", path);
  plant_link(link, target, sizeof target);
  tfx_err err = {0};
  cr_assert_eq(tfx_write_file(path, "{}", &err), TFX_ESYS);
  assert_intact(target);
}

/* The soft limit of open files rises to the hard limit (1024 is too few for a ps under many connections). */
Test(fs, fd_limit_rises_to_the_hard_limit) {
  struct rlimit r;
  cr_assert_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
  if (r.rlim_max <= 64 || r.rlim_max == RLIM_INFINITY) {
    cr_skip_test("this machine's hard limit of open files (%llu) leaves nothing to raise",
                 (unsigned long long)r.rlim_max);
  }
  struct rlimit low = {64, r.rlim_max};
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
  cr_assert_eq(tfx_fd_limit_raise(), (long)r.rlim_max);
  cr_assert_eq(getrlimit(RLIMIT_NOFILE, &low), 0);
  cr_assert_eq(low.rlim_cur, r.rlim_max);
}
