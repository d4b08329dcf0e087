/* Logging: one line per event on stderr: time, role:index, pid, level, a stable message id, the text.
 * Set the identity once with tfx_log_init; tfx_log is safe to call from any thread. */
#ifndef TFX_LOG_H
#define TFX_LOG_H

#include <stddef.h>

typedef enum tfx_log_level {
  TFX_LOG_DEBUG,
  TFX_LOG_INFO,
  TFX_LOG_WARN,
  TFX_LOG_ERROR,
} tfx_log_level;

/* Sets the role name and index printed on every line (role borrowed: must outlive logging). */
void tfx_log_init(const char *role, int index);
/* Sets the minimum level printed. */
void tfx_log_set_level(tfx_log_level level);
/* Parses "debug|info|warn|error"; returns 0 and writes *out, or TFX_EINVAL. */
int tfx_log_parse_level(const char *s, tfx_log_level *out);
/* Writes one log line if level is at or above the minimum. */
void tfx_log(tfx_log_level level, const char *id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Copies s into out (size n) with non-printable bytes escaped as \xNN; for logging peer bytes. */
void tfx_log_escape(const char *s, size_t len, char *out, size_t n);

#endif
