/* A small HTTP endpoint on libmicrohttpd (its own thread): GET requests are answered by a render callback that
 * returns the body for a path. Used for /metrics (Prometheus), /status (JSON) and / (the live page). */
#ifndef TFX_HTTP_H
#define TFX_HTTP_H

#include "common/err.h"

typedef struct tfx_http tfx_http;
struct sockaddr_storage;

/* The address host:port resolves to (host NULL, "", "*" or "0.0.0.0": any IPv4 address) into *sa; TFX_ECONFIG
 * naming a host that does not resolve. */
int tfx_http_resolve(const char *host, int port, struct sockaddr_storage *sa, tfx_err *err);

/* Renders the body for path into a malloc'd string (caller of the callback frees it) and sets *type; NULL is
 * 404. Called on the HTTP thread: it must only read state guarded for that. */
typedef char *(*tfx_http_render)(const char *path, const char **type, void *ctx);

/* Serves GET on host:port (host NULL or "": all interfaces; an IPv4 or IPv6 address or a name); caller owns *out;
 * stop with tfx_http_stop. Up to 512 connections at once, each closed after 3 s without a byte, so slow or idle
 * clients cannot hold the page from everyone else. */
int tfx_http_start(const char *host, int port, tfx_http_render render, void *ctx, tfx_http **out, tfx_err *err);
/* Stops the server and frees it; NULL does nothing. */
void tfx_http_stop(tfx_http *h);

#endif
