/* systemd service notifications (sd_notify through libsystemd): READY when a node serves, STATUS lines with the
 * step, and WATCHDOG keep-alives from each role's main loop. Every call is a no-op outside a Type=notify unit
 * (no NOTIFY_SOCKET). */
#ifndef TFX_NOTIFY_H
#define TFX_NOTIFY_H

/* Tells systemd the node is up, with a status line. */
void tfx_notify_ready(const char *status);
/* Updates the status line (rate-limited to one a second) and pets the watchdog. */
void tfx_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Pets the watchdog (cheap; call from the main loop). */
void tfx_notify_watchdog(void);
/* Tells systemd the node is stopping. */
void tfx_notify_stopping(void);

#endif
