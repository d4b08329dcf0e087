/* Directories made on demand. */
#include "common/fs.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

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
