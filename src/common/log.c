/* One-line structured logging to stderr. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"

static const char *log_role = "tfx";
static int log_index = -1;
static tfx_log_level min_level = TFX_LOG_INFO;
static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

void tfx_log_init(const char *role, int index) {
  log_role = role;
  log_index = index;
}

void tfx_log_set_level(tfx_log_level level) {
  min_level = level;
}

int tfx_log_parse_level(const char *s, tfx_log_level *out) {
  static const char *const lower[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; i++) {
    if (strcmp(s, lower[i]) == 0) {
      *out = (tfx_log_level)i;
      return TFX_OK;
    }
  }
  return TFX_EINVAL;
}

void tfx_log(tfx_log_level level, const char *id, const char *fmt, ...) {
  if (level < min_level) {
    return;
  }
  char line[1024], when[32];
  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  gmtime_r(&tv.tv_sec, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  int n = snprintf(line, sizeof line, "%s.%03ldZ %s:%d pid=%d %s %s ", when, (long)(tv.tv_usec / 1000), log_role,
                   log_index, (int)getpid(), level_names[level], id);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof line) {
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  }
  va_end(ap);
  fprintf(stderr, "%s\n", line);
}

void tfx_log_escape(const char *s, size_t len, char *out, size_t n) {
  size_t j = 0;
  for (size_t i = 0; i < len && j + 5 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out[j++] = (char)c;
    } else {
      j += (size_t)snprintf(out + j, n - j, "\\x%02x", c);
    }
  }
  if (n) {
    out[j < n ? j : n - 1] = '\0';
  }
}
