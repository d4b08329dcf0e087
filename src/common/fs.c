/* Directories made on demand, and files written without following links. */
#include "common/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int tfx_mkdirs(const char *path, tfx_err *err) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') {
      continue;
    }
    *p = '\0';
    if (mkdir(buf, 0755) && errno != EEXIST) {
      return tfx_err_sys(err, TFX_ESYS, "mkdir %s", buf);
    }
    *p = '/';
  }
  if (mkdir(buf, 0755) && errno != EEXIST) {
    return tfx_err_sys(err, TFX_ESYS, "mkdir %s", buf);
  }
  return TFX_OK;
}

FILE *tfx_fopen_write(const char *path, const char *mode) {
  int append = mode[0] == 'a';
  int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0) {
    return NULL;
  }
  FILE *f = fdopen(fd, append ? "a" : "w");
  if (!f) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

long tfx_fd_limit_raise(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
    return -1;
  }
  if (r.rlim_cur < r.rlim_max) {
    rlim_t want = r.rlim_max;
    r.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) {
      getrlimit(RLIMIT_NOFILE, &r);
    }
  }
  return r.rlim_cur == RLIM_INFINITY ? -1 : (long)r.rlim_cur;
}

int tfx_write_file(const char *path, const char *text, tfx_err *err) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = tfx_fopen_write(tmp, "w");
  if (!f) {
    return tfx_err_sys(err, TFX_ESYS, "open %s", tmp);
  }
  int bad = fputs(text, f) < 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path)) {
    return tfx_err_sys(err, TFX_ESYS, "write %s", path);
  }
  return TFX_OK;
}

char *tfx_read_text(const char *path, size_t max_bytes, int code, tfx_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    tfx_err_sys(err, code, "open %s", path);
    return NULL;
  }
  size_t cap = 8192, len = 0, got;
  char *buf = malloc(cap), *grown;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len > 1) {
      continue;
    }
    if (cap > max_bytes || !(grown = realloc(buf, cap *= 2))) {
      free(buf);
      buf = NULL;
    } else {
      buf = grown;
    }
  }
  int failed = ferror(f), e = errno;
  fclose(f);
  errno = e;
  if (failed) {
    free(buf);
    tfx_err_sys(err, code, "read %s", path);
    return NULL; /* a directory, say (EISDIR) */
  }
  if (!buf) {
    tfx_err_set(err, code, "read %s: too large or out of memory", path);
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}
