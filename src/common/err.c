/* Error codes and the tfx_err record. */
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const texts[] = {
#define TFX_ERR_TEXT(name, text) text,
    TFX_ERRORS(TFX_ERR_TEXT)
#undef TFX_ERR_TEXT
};

static const char *const names[] = {
#define TFX_ERR_NAME(name, text) #name,
    TFX_ERRORS(TFX_ERR_NAME)
#undef TFX_ERR_NAME
};

const char *tfx_strerror(int code) {
  if (code < 0 || code >= TFX_ERR_COUNT) {
    return "unknown error";
  }
  return texts[code];
}

const char *tfx_errname(int code) {
  if (code < 0 || code >= TFX_ERR_COUNT) {
    return "TFX_E?";
  }
  return names[code];
}

static int vset(tfx_err *err, int code, int sys, const char *fmt, va_list ap) {
  if (!err) {
    return code;
  }
  err->code = code;
  err->sys_errno = sys;
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  if (sys) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(sys));
  }
  return code;
}

int tfx_err_set(tfx_err *err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vset(err, code, 0, fmt, ap);
  va_end(ap);
  return code;
}

int tfx_err_sys(tfx_err *err, int code, const char *fmt, ...) {
  int sys = errno;
  va_list ap;
  va_start(ap, fmt);
  vset(err, code, sys, fmt, ap);
  va_end(ap);
  return code;
}

void tfx_err_clear(tfx_err *err) {
  if (!err) {
    return;
  }
  err->code = TFX_OK;
  err->sys_errno = 0;
  err->msg[0] = '\0';
}

void tfx_assert_fail(const char *what, const char *file, int line) {
  fprintf(stderr, "tfx: internal invariant broken: %s (%s:%d)\n", what, file, line);
  abort();
}
