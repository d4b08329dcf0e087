/* ZeroMQ sockets: the process context, servers on ROUTER, clients on DEALER with request ids and deadlines.
 * Every socket opened here applies the process's security setting (curve.h: CURVE server or client once
 * tfx_curve_configure installed keys, plaintext otherwise) and accepts frames up to tfx_wire_max_frame
 * (ZMQ_MAXMSGSIZE, as set when it is opened). One thread creates, uses and closes each socket.
 * Errors: TFX_EPEER for timeouts and refused sends. */
#ifndef TFX_NET_H
#define TFX_NET_H

#include "common/clock.h"
#include "common/err.h"
#include "config/config.h"
#include "net/wire.h"

typedef struct tfx_client tfx_client;

/* The process's ZeroMQ context, created on first use; owned by the module, freed by tfx_net_shutdown. */
void *tfx_net_context(void);
/* In a forked child: drops the parent's context without touching it (a new one is made on next use). */
void tfx_net_forget_context(void);
/* Stops the ZAP handler and destroys the context (after every socket is closed). */
void tfx_net_shutdown(void);
/* The largest frame an experiment's messages need (for tfx_wire_set_max_frame): cluster.max_message_bytes when set,
 * else the model's extent (largest, ids: tfx_model_extent) with margin for the rest of an envelope (8 MiB: the
 * experiment's text, the plan); at most TFX_MAX_FRAME. */
size_t tfx_net_message_bound(const tfx_config *cfg, size_t largest, size_t ids);
/* Opens a ROUTER bound to the endpoint; caller owns *sock; close with tfx_net_close. */
int tfx_server_open(const char *endpoint, void **sock, tfx_err *err);
/* Closes a socket with linger 0; NULL does nothing. */
void tfx_net_close(void *sock);
/* Sends an error reply with the request's id to the sender of m (m borrowed). */
int tfx_server_reply_error(void *sock, const tfx_inmsg *m, int code, const char *text, tfx_err *err);
/* Fills env as the reply to request m (stack-built; borrows nothing). */
void tfx_reply_init(tfx_envelope *env, const tfx_inmsg *m);

/* Keeps tensor-sized buffers in the heap for the process: ZeroMQ allocates every received frame and frees it
 * after use, and glibc by default maps (and, freed, unmaps or trims) buffers from 128 KiB up, so each large
 * message page-faulted its buffer in afresh (hundreds of faults per 16 MiB round trip at a ps). */
void tfx_net_keep_buffers(void);
/* Opens a DEALER connected to endpoint; caller owns *out; free with tfx_client_destroy. */
int tfx_client_create(const char *endpoint, tfx_client **out, tfx_err *err);
/* Closes the socket and frees the client; NULL does nothing. */
void tfx_client_destroy(tfx_client *c);
/* Sends a request; assigns env->request_id. Payloads as in tfx_wire_send. */
int tfx_client_send(tfx_client *c, tfx_envelope *env, const tfx_payload *payloads, int n, tfx_err *err);
/* Sends one more part of the last request, under its request_id (each part gets its own reply). */
int tfx_client_send_part(tfx_client *c, tfx_envelope *env, const tfx_payload *payloads, int n, tfx_err *err);
/* Waits up to timeout_ms for the reply to the last request (older replies are dropped). The caller
 * tfx_inmsg_fini's *reply. A reply with code != 0 returns that code with the peer's text. */
int tfx_client_recv(tfx_client *c, tfx_inmsg *reply, int timeout_ms, tfx_err *err);
/* tfx_client_send then tfx_client_recv. */
int tfx_client_call(tfx_client *c, tfx_envelope *env, const tfx_payload *payloads, int n, tfx_inmsg *reply,
                    int timeout_ms, tfx_err *err);
/* The endpoint the client talks to (borrowed). */
const char *tfx_client_endpoint(const tfx_client *c);
/* The raw DEALER socket, for zmq_poll (borrowed). */
void *tfx_client_socket(const tfx_client *c);
/* Whether a message waits on sock as far as ZeroMQ knows now (ZMQ_EVENTS: no system call while its command queue
 * was read lately, unlike zmq_poll with timeout 0); 0 on error. A message that arrived a moment ago may show only
 * at the next call, or at a blocking poll. */
int tfx_net_readable(void *sock);
/* Whether the client's socket lost a connection (linkwatch) since its last request went out: the peer may have
 * died with the request. */
int tfx_client_lost(const tfx_client *c);
/* How many disconnections the client's socket has had so far (linkwatch; 0 when unwatched). */
unsigned tfx_client_disconnects(const tfx_client *c);
/* Drops the socket and reconnects (after a timeout, so a late reply cannot be taken for the next one). */
int tfx_client_reset(tfx_client *c, tfx_err *err);

#endif
