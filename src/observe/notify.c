/* sd_notify wrappers. */
#include "observe/notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "common/clock.h"

static int64_t last_status_ms, last_watchdog_ms;

void tfx_notify_ready(const char *status) {
  sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void tfx_notify_status(const char *fmt, ...) {
  int64_t now = tfx_now_ms();
  if (now - last_status_ms < 1000) {
    tfx_notify_watchdog();
    return;
  }
  last_status_ms = now;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  sd_notifyf(0, "STATUS=%s\nWATCHDOG=1", line);
}

void tfx_notify_watchdog(void) {
  int64_t now = tfx_now_ms();
  if (now - last_watchdog_ms < 1000) {
    return;
  }
  last_watchdog_ms = now;
  sd_notify(0, "WATCHDOG=1");
}

void tfx_notify_stopping(void) {
  sd_notify(0, "STOPPING=1");
}
