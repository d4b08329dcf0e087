/* A small HTTP endpoint on libmicrohttpd (its own thread): GET requests are answered by a render callback that
 * returns the body for a path. Used for /metrics (Prometheus), /status (JSON) and / (the live page). */
#ifndef TFX_HTTP_H
#define TFX_HTTP_H

#include "common/err.h"

typedef struct tfx_http tfx_http;

/* Renders the body for path into a malloc'd string (caller of the callback frees it) and sets *type; NULL is
 * 404. Called on the HTTP thread: it must only read state guarded for that. */
typedef char *(*tfx_http_render)(const char *path, const char **type, void *ctx);

/* Serves GET on port (all interfaces); caller owns *out; stop with tfx_http_stop. */
int tfx_http_start(int port, tfx_http_render render, void *ctx, tfx_http **out, tfx_err *err);
/* Stops the server and frees it; NULL does nothing. */
void tfx_http_stop(tfx_http *h);

#endif
