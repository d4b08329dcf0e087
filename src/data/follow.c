/* data.train.follow: the files of a followed directory, taken in name order as they land. A file being written is
 * invisible until it is renamed into place: names starting with '.' are never read, nor anything but regular
 * files (a symbolic link is not followed: it could lead out of the directory). A file whose name sorts before the
 * last one taken (it landed late) is never read, and named in a warning. A directory removed and made again is
 * waited for. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "config/config.h"
#include "data/data_impl.h"

/* Whether name in directory d is a regular file itself (a link is not: it is not followed). */
static int regular(DIR *d, const char *name) {
  struct stat st;
  return fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int data__follow_next(const char *dir, const char *after, char *name, size_t len, int *found, uint64_t *older,
                      tfx_err *err) {
  DIR *d = opendir(dir);
  if (!d) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "data.train.follow: open directory %s", dir);
  }
  *found = 0;
  *older = 0;
  for (struct dirent *e; (e = readdir(d));) {
    const char *n = e->d_name;
    if (n[0] == '.' || strlen(n) >= len) {
      continue;
    }
    if (strcmp(n, after) <= 0) { /* taken, or landed late: counted by its type alone (no stat a file a scan) */
      *older += after[0] && (e->d_type == DT_REG || e->d_type == DT_UNKNOWN);
      continue;
    }
    if ((!*found || strcmp(n, name) < 0) && regular(d, n)) {
      snprintf(name, len, "%s", n);
      *found = 1;
    }
  }
  closedir(d);
  return TFX_OK;
}

int data__follow_check(const char *path, tfx_err *err) {
  char name[512];
  tfx_log_escape(path, strlen(path), name, sizeof name);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC); /* a FIFO does not block it */
  if (fd < 0) {
    return errno == ELOOP ? tfx_err_set(err, TFX_EINVAL, "%s: a symbolic link, not followed", name)
                          : tfx_err_sys(err, TFX_ENOTFOUND, "%s: cannot be opened", name);
  }
  struct stat st;
  int rc = fstat(fd, &st)         ? tfx_err_sys(err, TFX_ENOTFOUND, "%s: cannot be read", name)
           : !S_ISREG(st.st_mode) ? tfx_err_set(err, TFX_EINVAL, "%s: not a regular file", name)
                                  : TFX_OK;
  close(fd);
  return rc;
}

/* The directory's state as the reader thread last saw it, named once in the log as it changes. */
typedef enum follow_dir { FOLLOW_DIR_THERE, FOLLOW_DIR_GONE } follow_dir;

/* Moves *state to next, logging the change with the reason (why: the error that made the directory gone). */
static void follow_dir_set(follow_dir *state, follow_dir next, const char *dir, const char *why) {
  if (*state == next) {
    return;
  }
  if (next == FOLLOW_DIR_GONE) {
    tfx_log(TFX_LOG_WARN, "DATA-FOLLOW-GONE", "%s cannot be read (%s): waiting for it to come back", dir, why);
  } else {
    tfx_log(TFX_LOG_INFO, "DATA-FOLLOW-BACK", "%s is back: reading on after the last file taken", dir);
  }
  *state = next;
}

/* Names files that landed late (sorting before the last one taken, more of them than were taken), once for each
 * count of them: they are never read. */
static void name_late(const char *dir, const char *after, uint64_t older, uint64_t taken, uint64_t *late_named) {
  if (older > taken && older > *late_named) {
    char shown[512];
    tfx_log_escape(after, strlen(after), shown, sizeof shown);
    tfx_log(TFX_LOG_WARN, "DATA-FOLLOW-LATE",
            "%llu file(s) of %s sort before '%s', the last taken, but %llu were taken: a file that lands with a name "
            "sorting before one already read is never read (give files growing names)",
            (unsigned long long)(older - taken), dir, shown, (unsigned long long)taken);
    *late_named = older;
  }
}

int data__follow_wait(const char *dir, const char *after, uint64_t taken, uint64_t *late_named, char *name, size_t len,
                      data__prefetch *p, tfx_err *err) {
  follow_dir state = FOLLOW_DIR_THERE;
  char shown[512];
  tfx_log_escape(after, strlen(after), shown, sizeof shown);
  for (int64_t waited = 0;; waited++) {
    uint64_t ticket = data__prefetch_ticket(p), older = 0;
    tfx_err why = {0};
    int found = 0, rc = data__follow_next(dir, after, name, len, &found, &older, &why);
    if (rc && rc != TFX_ENOTFOUND) {
      return tfx_err_set(err, rc, "%s", why.msg);
    }
    follow_dir_set(&state, rc ? FOLLOW_DIR_GONE : FOLLOW_DIR_THERE, dir, why.msg);
    if (!rc) {
      name_late(dir, after, older, taken, late_named);
    }
    if (found) {
      return TFX_OK;
    }
    if (waited == 0) {
      tfx_log(TFX_LOG_INFO, "DATA-FOLLOW-WAIT", "waiting for a file after '%s' in %s", shown, dir);
    }
    if (data__prefetch_dry(p, ticket)) {
      return tfx_err_set(err, TFX_EINTR, "stopped while waiting for a file in %s", dir);
    }
  }
}
