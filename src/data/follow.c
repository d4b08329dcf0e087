/* data.train.follow: the files of a followed directory, taken in name order as they land. A file being written is
 * invisible until it is renamed into place: names starting with '.' are never read, nor anything but regular
 * files (a symbolic link is not followed: it could lead out of the directory). A file taken is opened once, without
 * following a link and without blocking, and read from that descriptor: what was checked is what is read. A file
 * whose name sorts before the last one taken (it landed late) is never read, and named in a warning; so is a file
 * found shorter at its end than when it was taken. A directory removed and made again is waited for. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The index in the sorted names[0..n) where name is, or would go; *at_it says whether it is there. */
static size_t find(char *const *names, size_t n, const char *name, int *at_it) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(names[mid], name);
    if (c == 0) {
      *at_it = 1;
      return mid;
    }
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *at_it = 0;
  return lo;
}

/* Puts a copy of name into the sorted list names[0..*n) at index at. */
static int insert(char ***names, size_t *n, size_t at, const char *name, tfx_err *err) {
  char **grown = realloc(*names, (*n + 1) * sizeof *grown), *copy = strdup(name);
  if (grown) {
    *names = grown;
  }
  if (!grown || !copy) {
    free(copy);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory following a directory (%zu names)", *n);
  }
  memmove(grown + at + 1, grown + at, (*n - at) * sizeof *grown);
  grown[at] = copy;
  ++*n;
  return TFX_OK;
}

const char *data__follow_last(const data__follow_names *names) {
  return names->n_taken ? names->taken[names->n_taken - 1] : "";
}

int data__follow_take(data__follow_names *names, const char *name, tfx_err *err) {
  return insert(&names->taken, &names->n_taken, names->n_taken, name, err);
}

void data__follow_names_fini(data__follow_names *names) {
  for (size_t i = 0; i < names->n_taken; i++) {
    free(names->taken[i]);
  }
  for (size_t i = 0; i < names->n_late; i++) {
    free(names->late[i]);
  }
  free(names->taken);
  free(names->late);
  *names = (data__follow_names){0};
}

/* Names file n of dir, sorting at or before the last one taken, in a DATA-FOLLOW-LATE warning when it is a regular
 * file neither taken nor named before (it landed late: it is never read); remembers it as named. */
static int name_late(DIR *d, const char *dir, const struct dirent *e, data__follow_names *names, tfx_err *err) {
  int taken = 0, named = 0;
  find(names->taken, names->n_taken, e->d_name, &taken);
  size_t at = taken ? 0 : find(names->late, names->n_late, e->d_name, &named);
  if (taken || named || !(e->d_type == DT_REG || (e->d_type == DT_UNKNOWN && regular(d, e->d_name)))) {
    return TFX_OK;
  }
  int rc = insert(&names->late, &names->n_late, at, e->d_name, err);
  if (!rc) {
    char shown[512], last[512];
    tfx_log_escape(e->d_name, strlen(e->d_name), shown, sizeof shown); /* a name may hold a newline */
    tfx_log_escape(data__follow_last(names), strlen(data__follow_last(names)), last, sizeof last);
    tfx_log(TFX_LOG_WARN, "DATA-FOLLOW-LATE",
            "%s/%s landed after '%s' was taken and sorts before it: it is never read (give files growing names)", dir,
            shown, last);
  }
  return rc;
}

int data__follow_next(const char *dir, data__follow_names *names, char *name, size_t len, int *found, tfx_err *err) {
  DIR *d = opendir(dir);
  if (!d) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "data.train.follow: open directory %s", dir);
  }
  const char *after = data__follow_last(names);
  int rc = TFX_OK;
  *found = 0;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    const char *n = e->d_name;
    if (n[0] == '.' || strlen(n) >= len) {
      continue;
    }
    if (strcmp(n, after) <= 0) { /* taken, or landed late */
      rc = name_late(d, dir, e, names, err);
    } else if ((!*found || strcmp(n, name) < 0) && regular(d, n)) {
      snprintf(name, len, "%s", n);
      *found = 1;
    }
  }
  closedir(d);
  return rc;
}

/* A file of a followed directory that cannot be read as a regular file, named (escaped) in err. */
static int refuse(int fd, const char *name, int code, const char *why, tfx_err *err) {
  int saved = errno;
  if (fd >= 0) {
    close(fd);
  }
  errno = saved;
  return code == TFX_EINVAL ? tfx_err_set(err, code, "%s: %s", name, why) : tfx_err_sys(err, code, "%s: %s", name, why);
}

int data__follow_open(const char *path, FILE **out, int64_t *size, tfx_err *err) {
  char name[512];
  tfx_log_escape(path, strlen(path), name, sizeof name);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC); /* a FIFO does not block it */
  if (fd < 0) {
    return errno == ELOOP ? refuse(fd, name, TFX_EINVAL, "a symbolic link, not followed", err)
                          : refuse(fd, name, TFX_ENOTFOUND, "cannot be opened", err);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return refuse(fd, name, TFX_ENOTFOUND, "cannot be read", err);
  }
  if (!S_ISREG(st.st_mode)) {
    return refuse(fd, name, TFX_EINVAL, "not a regular file", err);
  }
  int flags = fcntl(fd, F_GETFL); /* a regular file's reads never block: the flag goes, as no reader expects it */
  FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
  if (!f) {
    return refuse(fd, name, TFX_ESYS, "cannot be read", err);
  }
  *out = f;
  *size = (int64_t)st.st_size;
  return TFX_OK;
}

void data__follow_end(FILE *f, const char *path, int64_t size) {
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && (int64_t)st.st_size < size) {
    char name[512];
    tfx_log_escape(path, strlen(path), name, sizeof name);
    tfx_log(TFX_LOG_WARN, "DATA-FOLLOW-TRUNCATED",
            "%s was cut from %lld to %lld bytes while it was read: the rows past its new end were not read, and "
            "every position counted after it (the rows of the files that follow, split by record among the workers, "
            "and where a restart resumes) is shifted (a file is to be whole when renamed into place, and stay so)",
            name, (long long)size, (long long)st.st_size);
  }
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

int data__follow_wait(const char *dir, data__follow_names *names, char *name, size_t len, data__prefetch *p,
                      tfx_err *err) {
  follow_dir state = FOLLOW_DIR_THERE;
  char shown[512];
  tfx_log_escape(data__follow_last(names), strlen(data__follow_last(names)), shown, sizeof shown);
  for (int64_t waited = 0;; waited++) {
    uint64_t ticket = data__prefetch_ticket(p);
    tfx_err why = {0};
    int found = 0, rc = data__follow_next(dir, names, name, len, &found, &why);
    if (rc && rc != TFX_ENOTFOUND) {
      return tfx_err_set(err, rc, "%s", why.msg);
    }
    follow_dir_set(&state, rc ? FOLLOW_DIR_GONE : FOLLOW_DIR_THERE, dir, why.msg);
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
