/* CURVE security for every socket of the process: libzmq's CURVE (built with libsodium; zmq_has("curve"))
 * encrypts and authenticates each connection, and a ZAP handler (RFC 27, a thread serving
 * inproc://zeromq.zap.01) admits only authorized client keys.
 *
 * Install once at startup, before the first socket, with tfx_curve_configure; from then on net.c makes every
 * ROUTER it opens a CURVE server (the cluster's server key pair) and every DEALER a CURVE client (this node's
 * client key pair, the server's public key). Until installed, or when the experiment names no keys, sockets are
 * plaintext. Refused connections are counted (tfx_curve_rejected) and logged as NET-REJECT: ZAP denials (an
 * unknown client key) and failed handshakes (a client without CURVE, or with the wrong server key), the latter
 * seen by a socket monitor of each server that the ZAP thread reads.
 *
 * Threads: configure, reset, stop and forget belong to the main thread; tfx_curve_server/client are called by
 * the thread that owns the socket. Errors: TFX_ECONFIG (keys missing, malformed, loose or contradictory),
 * TFX_ESYS (libzmq without CURVE, the ZAP thread could not start). */
#ifndef TFX_CURVE_H
#define TFX_CURVE_H

#include <stdint.h>

#include "common/err.h"
#include "config/config.h"

/* Installs the process's security from cfg's security options (see docs/security.md): CURVE when keys are
 * named, plaintext otherwise. serves: the process binds servers, so it needs the server's secret key. Replaces
 * any earlier setting; call before opening sockets. */
int tfx_curve_configure(const tfx_config *cfg, int serves, tfx_err *err);
/* Nonzero when sockets opened now use CURVE. */
int tfx_curve_enabled(void);
/* The public key of this node's client key pair (Z85, borrowed; "" when off). */
const char *tfx_curve_client_public(void);
/* Connections refused so far by this process's servers (ZAP denials and failed handshakes). */
uint64_t tfx_curve_rejected(void);
/* Makes sock (a ROUTER, before bind) a CURVE server and watches its handshakes; starts the ZAP handler in ctx
 * on first use. Does nothing when CURVE is off. */
int tfx_curve_server(void *ctx, void *sock, tfx_err *err);
/* Makes sock (a DEALER, before connect) a CURVE client. Does nothing when CURVE is off. */
int tfx_curve_client(void *sock, tfx_err *err);
/* Stops the ZAP handler (closing its sockets); call before zmq_ctx_term. */
void tfx_curve_stop(void);
/* In a forked child: forgets the parent's ZAP thread (it does not exist here) without touching it. */
void tfx_curve_forget(void);
/* Back to plaintext and frees the keys (tests). Call after tfx_curve_stop. */
void tfx_curve_reset(void);

#endif
