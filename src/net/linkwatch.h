/* What happens to each ZeroMQ socket's connections, read from its monitor by one helper thread per process.
 *
 * 1. Kernel buffers of Unix-socket links. ZeroMQ sizes a TCP connection's buffers by ZMQ_SNDBUF/ZMQ_RCVBUF but
 *    leaves an ipc:// connection at net.core.wmem_default (208 KiB on Debian), so a 1 MiB push or pull crossed in
 *    five wake-ups of the peer and the default local cluster trailed plaintext TCP. The helper sets
 *    SO_SNDBUF/SO_RCVBUF on every new Unix-socket connection (the kernel caps them at net.core.wmem_max/rmem_max).
 * 2. Lost connections. A request in flight when its peer dies (kill -9 of a ps) is gone; the client would wait out
 *    its whole deadline. The helper counts each socket's disconnections, so a waiting client sees the loss at once.
 * Until the helper has read an event, nothing changes: the link works with the default buffers and deadlines. */
#ifndef TFX_NET_LINKWATCH_H
#define TFX_NET_LINKWATCH_H

/* Watches `sock`, about to bind or connect `endpoint`: sizes its Unix-socket connections' buffers to `bytes` and
 * counts its disconnections. Call before zmq_bind/zmq_connect and at most once per socket (it takes the socket's
 * one monitor), from one thread. Returns 0, or -1 when the watch could not be set up (the link still works). */
int tfx_linkwatch_add(void *ctx, void *sock, const char *endpoint, int bytes);

/* How many disconnections the helper has seen on `sock` so far (0 when it is not watched). */
unsigned tfx_linkwatch_disconnects(void *sock);

/* How many connections have had their buffers raised so far in this process. */
unsigned tfx_linkwatch_sized(void);

/* Stops the helper thread and closes its sockets; call before zmq_ctx_term (the sockets watched first). */
void tfx_linkwatch_stop(void);

/* Forgets the helper thread without joining it: for a forked child, which has no such thread. */
void tfx_linkwatch_forget(void);

#endif
