/* A link's request state (link_state): the one place it changes, each change logged once. */
#include "common/log.h"
#include "net/net.h"
#include "psclient/psclient_impl.h"

/* The state's name as the logs say it. */
static const char *link_state_name(link_state s) {
  switch (s) {
    case LINK_IDLE:
      return "idle";
    case LINK_WAITING:
      return "waiting";
    case LINK_LOST:
      return "lost";
  }
  return "unknown";
}

void psclient__link_state(ps_link *l, link_state to, const char *why) {
  if (l->state == to) {
    return;
  }
  tfx_log(to == LINK_LOST ? TFX_LOG_WARN : TFX_LOG_DEBUG, "PSCLIENT-LINK", "link to %s: %s -> %s (%s)",
          l->client ? tfx_client_endpoint(l->client) : "no ps", link_state_name(l->state), link_state_name(to), why);
  l->state = to;
}

void psclient__link_sent(ps_link *l, int rc) {
  psclient__link_state(l, rc ? LINK_IDLE : LINK_WAITING, rc ? "a request not sent" : "a request sent");
}
