/* Reading a ZeroMQ socket monitor (zmq_socket_monitor): the PAIR socket connected to its endpoint. */
#ifndef TFX_NET_MONITOR_H
#define TFX_NET_MONITOR_H

#include <stddef.h>
#include <stdint.h>

/* Reads one event from the monitor's PAIR `reader`: its kind and value, and (when `where` is not NULL) the peer's
 * address escaped for a log line into where[n]. Returns 1 with an event, 0 for a malformed one (to skip), -1 when
 * the reader failed (the monitor is gone). */
int tfx_monitor_next(void *reader, uint16_t *event, uint32_t *value, char *where, size_t n);

/* Closes a monitor's reader at once (linger 0). */
void tfx_monitor_close(void *reader);

#endif
