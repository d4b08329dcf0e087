/* Errors: status codes, their names and texts, and the tfx_err record every fallible function fills.
 * Every fallible function returns int: TFX_OK (0) or a positive TFX_E* code. The last parameter, tfx_err *err
 * (NULL allowed), receives the code, the saved errno and a message naming what is wrong. Thread-safe. */
#ifndef TFX_ERR_H
#define TFX_ERR_H

#include <stdarg.h>

#define TFX_ERRORS(X)                           \
  X(TFX_OK, "ok")                               \
  X(TFX_EINVAL, "invalid argument")             \
  X(TFX_ECONFIG, "bad configuration")           \
  X(TFX_EPROTO, "protocol error")               \
  X(TFX_ESHAPE, "shape mismatch")               \
  X(TFX_EPEER, "peer unreachable or timed out") \
  X(TFX_ECORRUPT, "corrupt data")               \
  X(TFX_ESYS, "system error")                   \
  X(TFX_ENOMEM, "out of memory")                \
  X(TFX_ENOTFOUND, "not found")                 \
  X(TFX_ESTATE, "wrong state")                  \
  X(TFX_ELOSS, "loss diverged")                 \
  X(TFX_EINTR, "interrupted")                   \
  X(TFX_ENAN, "NaN or Inf in the values")

typedef enum tfx_code {
#define TFX_ERR_ENUM(name, text) name,
  TFX_ERRORS(TFX_ERR_ENUM)
#undef TFX_ERR_ENUM
      TFX_ERR_COUNT
} tfx_code;

typedef struct tfx_err {
  int code;
  int sys_errno;
  char msg[256];
} tfx_err;

/* The static text of a code; never NULL, never to be freed. */
const char *tfx_strerror(int code);
/* The symbolic name of a code ("TFX_EINVAL"); static. */
const char *tfx_errname(int code);
/* Fills err (if not NULL) with code, errno and a formatted message; returns code. */
int tfx_err_set(tfx_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* As tfx_err_set, appending ": strerror(errno)"; returns code. */
int tfx_err_sys(tfx_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Clears err to TFX_OK. */
void tfx_err_clear(tfx_err *err);

/* Internal invariant check: only for programming errors, never for input. */
#define TFX_ASSERT(cond)                                     \
  do {                                                       \
    if (!(cond)) tfx_assert_fail(#cond, __FILE__, __LINE__); \
  } while (0)
/* Reports a broken invariant and aborts. */
void tfx_assert_fail(const char *what, const char *file, int line) __attribute__((noreturn));

#endif
