/* data.train.follow: the files of a followed directory, taken in name order as they land. A file being written is
 * invisible until it is renamed into place: names starting with '.' are never read, nor anything but regular
 * files. A file whose name sorts before the last one taken (it landed late) is never
 * read. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "config/config.h"
#include "data/data_impl.h"

/* Whether dir/name is a regular file (following a link, as reading it would). */
static int regular(const char *dir, const char *name) {
  char path[TFX_PATH_MAX * 2];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int data__follow_next(const char *dir, const char *after, char *name, size_t len, int *found, tfx_err *err) {
  DIR *d = opendir(dir);
  if (!d) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "data.train.follow: open directory %s", dir);
  }
  *found = 0;
  for (struct dirent *e; (e = readdir(d));) {
    const char *n = e->d_name;
    if (n[0] == '.' || strlen(n) >= len || strcmp(n, after) <= 0 || (*found && strcmp(n, name) >= 0)) {
      continue;
    }
    if (regular(dir, n)) {
      snprintf(name, len, "%s", n);
      *found = 1;
    }
  }
  closedir(d);
  return TFX_OK;
}

int data__follow_wait(const char *dir, const char *after, char *name, size_t len, data__prefetch *p, tfx_err *err) {
  for (int64_t waited = 0;; waited++) {
    uint64_t ticket = data__prefetch_ticket(p);
    int found = 0, rc = data__follow_next(dir, after, name, len, &found, err);
    if (rc || found) {
      return rc;
    }
    if (waited == 0) {
      tfx_log(TFX_LOG_INFO, "DATA-FOLLOW-WAIT", "waiting for a file after '%s' in %s", after, dir);
    }
    if (data__prefetch_dry(p, ticket)) {
      return tfx_err_set(err, TFX_EINTR, "stopped while waiting for a file in %s", dir);
    }
  }
}
