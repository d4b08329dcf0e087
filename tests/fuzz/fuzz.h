/* Helpers shared by the libFuzzer targets: a NUL-terminated copy of the input for text parsers, and a file
 * holding the input for readers that take a path (a memfd, so no disk and no clean-up; /proc/self/fd/N can be
 * opened with fopen and gzopen like any regular file). Each target links libFuzzer's main (-fsanitize=fuzzer). */
#ifndef TFX_FUZZ_H
#define TFX_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A NUL-terminated copy of the input; caller owns; free with free(). Embedded NULs end the text early, as they
 * would in an environment variable or a file read as a C string. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (s) {
    memcpy(s, data, size);
    s[size] = '\0';
  }
  return s;
}

/* Replaces the contents of this process's fuzz file with the bytes given; returns its path (static), or NULL. */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("tfx-fuzz", 0);
    if (fd < 0) {
      return NULL;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
    return NULL;
  }
  return path;
}

#endif
