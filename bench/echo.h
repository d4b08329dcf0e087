/* The raw ZeroMQ echo the benches measure against: every message a ROUTER receives goes back as it came. */
#ifndef TFX_BENCH_ECHO_H
#define TFX_BENCH_ECHO_H

#include <zmq.h>

/* Echoes identity + body messages on ROUTER socket s (zero-copy, as received) until a receive fails. */
static inline void bench_echo_loop(void *s) {
  for (;;) {
    zmq_msg_t id, body;
    zmq_msg_init(&id), zmq_msg_init(&body);
    if (zmq_msg_recv(&id, s, 0) < 0 || zmq_msg_recv(&body, s, 0) < 0) {
      break;
    }
    zmq_msg_send(&id, s, ZMQ_SNDMORE);
    zmq_msg_send(&body, s, 0);
  }
}

#endif
