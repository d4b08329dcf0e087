/* Reading a ZeroMQ socket monitor: events of two frames (kind and value, then the peer's address). */
#include "net/monitor.h"

#include <string.h>
#include <zmq.h>

#include "common/log.h"

int tfx_monitor_next(void *reader, uint16_t *event, uint32_t *value, char *where, size_t n) {
  zmq_msg_t head, addr;
  zmq_msg_init(&head);
  zmq_msg_init(&addr);
  int ok = zmq_msg_recv(&head, reader, 0) >= 0 && zmq_msg_more(&head) && zmq_msg_recv(&addr, reader, 0) >= 0;
  int got = ok ? zmq_msg_size(&head) >= 6 : -1;
  if (got == 1) {
    memcpy(event, zmq_msg_data(&head), 2);
    memcpy(value, (char *)zmq_msg_data(&head) + 2, 4);
    if (where) {
      tfx_log_escape(zmq_msg_data(&addr), zmq_msg_size(&addr), where, n);
    }
  }
  zmq_msg_close(&head);
  zmq_msg_close(&addr);
  return got;
}

void tfx_monitor_close(void *reader) {
  int zero = 0;
  zmq_setsockopt(reader, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(reader);
}
