/* The run directory's owner lock (runlock.h). */
#include "store/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/fs.h"

/* The holder's line ("pid PID host HOST") as the lock file says it, or "unknown". */
static void read_holder(int fd, char *out, size_t n) {
  ssize_t got = pread(fd, out, n - 1, 0);
  out[got > 0 ? got : 0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  if (!out[0]) {
    snprintf(out, n, "unknown");
  }
}

int tfx_run_lock(const char *run_dir, int *fd, tfx_err *err) {
  char path[1200], holder[320], host[256] = "?";
  int rc = tfx_mkdirs(run_dir, err);
  if (rc) {
    return rc;
  }
  snprintf(path, sizeof path, "%s/.lock", run_dir);
  int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (f < 0) {
    return tfx_err_sys(err, TFX_ESYS, "run lock %s", path);
  }
  if (flock(f, LOCK_EX | LOCK_NB)) {
    int e = errno;
    read_holder(f, holder, sizeof holder);
    close(f);
    if (e == EWOULDBLOCK) {
      return tfx_err_set(err, TFX_EINVAL,
                         "run directory %s is in use by another run (%s); wait for it, stop it, or "
                         "choose another --run-dir",
                         run_dir, holder);
    }
    errno = e;
    return tfx_err_sys(err, TFX_ESYS, "run lock %s", path);
  }
  gethostname(host, sizeof host - 1);
  int len = snprintf(holder, sizeof holder, "pid %d host %s\n", (int)getpid(), host);
  if (ftruncate(f, 0) || pwrite(f, holder, (size_t)len, 0) != len) {
    close(f);
    return tfx_err_sys(err, TFX_ESYS, "run lock %s", path);
  }
  *fd = f;
  return TFX_OK;
}
