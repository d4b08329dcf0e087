/* The run directory's owner lock (runlock.h). */
#include "store/runlock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
  int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644); /* a planted link is refused */
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

/* Whether an entry of a run directory belongs to the run (and moves aside on --fresh). */
static int belongs_to_run(const char *name) {
  static const char *const exact[] = {"checkpoints", "metrics.jsonl",     "logs", "config.json", "experiment.json",
                                      "export",      "predictions.jsonl", NULL};
  for (int i = 0; exact[i]; i++) {
    if (!strcmp(name, exact[i])) {
      return 1;
    }
  }
  return !strncmp(name, "events.out.tfevents.", 20);
}

/* Makes run_dir/previous-N (N = 1, 2, ...: the first that does not exist) and writes its path into out. */
static int make_previous(const char *run_dir, char *out, size_t n, tfx_err *err) {
  for (int k = 1; k < 100000; k++) {
    snprintf(out, n, "%s/previous-%d", run_dir, k);
    if (!mkdir(out, 0755)) {
      return TFX_OK;
    }
    if (errno != EEXIST) {
      return tfx_err_sys(err, TFX_ESYS, "mkdir %s", out);
    }
  }
  return tfx_err_set(err, TFX_ESYS, "%s: no free previous-N name", run_dir);
}

int tfx_run_set_aside(const char *run_dir, int *moved, char *where, size_t where_size, tfx_err *err) {
  *moved = 0;
  DIR *d = opendir(run_dir);
  if (!d) {
    return errno == ENOENT ? TFX_OK : tfx_err_sys(err, TFX_ESYS, "open %s", run_dir);
  }
  char prev[1100] = "", from[1400], to[1400];
  int rc = TFX_OK;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    if (!belongs_to_run(e->d_name)) {
      continue;
    }
    if (!prev[0]) {
      rc = make_previous(run_dir, prev, sizeof prev, err);
    }
    snprintf(from, sizeof from, "%s/%s", run_dir, e->d_name);
    snprintf(to, sizeof to, "%s/%s", prev, e->d_name);
    if (!rc && rename(from, to)) {
      rc = tfx_err_sys(err, TFX_ESYS, "moving %s to %s", from, to);
    }
    *moved += !rc;
  }
  closedir(d);
  snprintf(where, where_size, "%s", prev);
  return rc;
}

void tfx_run_unlock_empty(const char *run_dir, int fd, int made_it) {
  DIR *d = opendir(run_dir);
  int others = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    others += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".lock");
  }
  if (d) {
    closedir(d);
  }
  if (d && !others) {
    char path[1200];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    unlink(path);
    if (made_it) {
      rmdir(run_dir);
    }
  }
  if (fd >= 0) {
    close(fd);
  }
}
