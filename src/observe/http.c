/* libmicrohttpd glue. */
#include "observe/http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

int tfx_http_resolve(const char *host, int port, struct sockaddr_storage *sa, tfx_err *err) {
  memset(sa, 0, sizeof *sa);
  if (!host || !*host || !strcmp(host, "*") || !strcmp(host, "0.0.0.0")) {
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    return TFX_OK;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int g = getaddrinfo(host, NULL, &hints, &res);
  if (g || !res) {
    return tfx_err_set(err, TFX_ECONFIG, "HTTP server: cannot resolve bind host '%s': %s", host, gai_strerror(g));
  }
  memcpy(sa, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (sa->ss_family == AF_INET6) {
    ((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
  } else {
    ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
  }
  return TFX_OK;
}

int tfx_http_start(const char *host, int port, tfx_http_render render, void *ctx, tfx_http **out, tfx_err *err) {
  struct sockaddr_storage sa;
  int rc = tfx_http_resolve(host, port, &sa, err);
  if (rc) {
    return rc;
  }
  tfx_http *h = calloc(1, sizeof *h);
  if (!h) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  h->render = render;
  h->ctx = ctx;
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  h->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, answer, h, MHD_OPTION_SOCK_ADDR,
                               (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)512,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)3, MHD_OPTION_END);
  if (!h->daemon) {
    free(h);
    return tfx_err_sys(err, TFX_ESYS, "HTTP server on %s:%d", host && *host ? host : "*", port);
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
