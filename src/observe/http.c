/* libmicrohttpd glue. */
#include "observe/http.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

struct tfx_http {
  struct MHD_Daemon *daemon;
  tfx_http_render render;
  void *ctx;
};

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
  (void)version;
  (void)upload;
  (void)upload_size;
  (void)state;
  tfx_http *h = cls;
  const char *type = "text/plain; charset=utf-8";
  char *body = strcmp(method, "GET") ? NULL : h->render(url, &type, h->ctx);
  int code = body ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND;
  if (!body) {
    body = strdup(strcmp(method, "GET") ? "only GET\n" : "not found\n");
  }
  if (!body) {
    return MHD_NO;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  enum MHD_Result rc = MHD_queue_response(c, (unsigned)code, r);
  MHD_destroy_response(r);
  return rc;
}

int tfx_http_start(int port, tfx_http_render render, void *ctx, tfx_http **out, tfx_err *err) {
  tfx_http *h = calloc(1, sizeof *h);
  if (!h) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  h->render = render;
  h->ctx = ctx;
  h->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL, answer,
                               h, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT,
                               (unsigned)10, MHD_OPTION_END);
  if (!h->daemon) {
    free(h);
    return tfx_err_sys(err, TFX_ESYS, "HTTP server on port %d", port);
  }
  *out = h;
  return TFX_OK;
}

void tfx_http_stop(tfx_http *h) {
  if (!h) {
    return;
  }
  MHD_stop_daemon(h->daemon);
  free(h);
}
