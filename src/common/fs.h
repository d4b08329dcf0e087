/* Files and directories: the small helpers every room that writes under a run directory shares.
 * Errors: TFX_ESYS with the path and errno. */
#ifndef TFX_FS_H
#define TFX_FS_H

#include "common/err.h"

/* Creates a directory and its parents (mkdir -p). */
int tfx_mkdirs(const char *path, tfx_err *err);
/* Writes text to path atomically (tmp + rename). */
int tfx_write_file(const char *path, const char *text, tfx_err *err);

#endif
