/* Kernel buffers of Unix-socket links.
 *
 * ZeroMQ sizes a TCP connection's kernel buffers by ZMQ_SNDBUF/ZMQ_RCVBUF but leaves an ipc:// connection at
 * net.core.wmem_default (208 KiB on Debian), so a 1 MiB push or pull crosses in five wake-ups of the peer and the
 * default local cluster trails plaintext TCP. A helper thread reads each watched socket's monitor, which names the
 * descriptor of every new connection, and sets SO_SNDBUF/SO_RCVBUF on it (the kernel caps them at
 * net.core.wmem_max/rmem_max). Until the helper has seen a connection it runs with the default buffers. */
#ifndef TFX_NET_IPCBUF_H
#define TFX_NET_IPCBUF_H

/* Watches `sock`, about to bind or connect `endpoint`, and sizes its Unix-socket connections' buffers to `bytes`;
 * a no-op (returning 0) for other transports. Call before zmq_bind/zmq_connect and at most once per socket (it owns
 * the socket's monitor). Returns 0, or -1 when the watch could not be set up (the link still works). */
int tfx_ipcbuf_watch(void *ctx, void *sock, const char *endpoint, int bytes);

/* How many connections have had their buffers raised so far in this process. */
unsigned tfx_ipcbuf_tuned(void);

/* Stops the helper thread and closes its sockets; call before zmq_ctx_term (the sockets watched first). */
void tfx_ipcbuf_stop(void);

/* Forgets the helper thread without joining it: for a forked child, which has no such thread. */
void tfx_ipcbuf_forget(void);

#endif
