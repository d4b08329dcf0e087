/* The master's view of each ps process (master_ps_state): the one place it changes, each change logged once in the
 * line of the event that caused it. */
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"
#include "master/master_impl.h"

const char *master__ps_state_name(master_ps_state s) {
  switch (s) {
    case MASTER_PS_STARTING:
      return "starting";
    case MASTER_PS_UP:
      return "up";
    case MASTER_PS_LOST:
      return "lost";
  }
  return "unknown";
}

void master__ps_state(master *m, int x, master_ps_state to, int level, const char *id, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  master_ps_state from = m->ps[x].state;
  if (from == to) {
    tfx_log(level, id, "%s", what);
  } else {
    tfx_log(level, id, "%s [ps %d: %s -> %s]", what, x, master__ps_state_name(from), master__ps_state_name(to));
  }
  m->ps[x].state = to;
}
