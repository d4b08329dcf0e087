/* Files and directories: the small helpers every room that writes under a run directory shares.
 * Errors: TFX_ESYS with the path and errno. */
#ifndef TFX_FS_H
#define TFX_FS_H

#include <stdio.h>

#include "common/err.h"

/* Creates a directory and its parents (mkdir -p). */
int tfx_mkdirs(const char *path, tfx_err *err);
/* Opens path for writing as fopen's "w"/"wb" (truncate) or "a"/"ab" (append) do, creating it 0644, but never
 * through a symbolic link (O_NOFOLLOW: a link planted where tfx writes is an error, ELOOP, not a write to its
 * target). Caller owns; close with fclose. NULL with errno set on failure. */
FILE *tfx_fopen_write(const char *path, const char *mode);
/* Raises this process's soft limit of open files to its hard limit (a ps with many peers, or under a flood of idle
 * connections, needs more than the usual 1024) and returns the soft limit now in force. */
long tfx_fd_limit_raise(void);
/* The whole text of a file, pipes included, up to max_bytes; caller owns; free with free(). NULL with `code` in
 * err ("open PATH", "read PATH", "read PATH: too large or out of memory"), errno kept from the failed call. */
char *tfx_read_text(const char *path, size_t max_bytes, int code, tfx_err *err);
/* Writes text to path atomically (tmp + rename). */
int tfx_write_file(const char *path, const char *text, tfx_err *err);

#endif
