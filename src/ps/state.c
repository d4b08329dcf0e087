/* A ps instance's state (ps_instance_state): the one place it changes, each change logged once in the line of the
 * event that caused it, and the questions the rest of the ps asks of it. */
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"
#include "ps/ps_impl.h"

const char *ps__state_name(ps_instance_state s) {
  switch (s) {
    case PS_WAITING:
      return "waiting-for-plan";
    case PS_SERVING:
      return "serving";
    case PS_UNREPLICATED:
      return "unreplicated";
    case PS_BACKUP:
      return "backup";
    case PS_BEHIND:
      return "behind";
  }
  return "unknown";
}

Tfx__InstanceState ps__wire_state(ps_instance_state s) {
  switch (s) {
    case PS_WAITING:
      return TFX__INSTANCE_STATE__INSTANCE_WAITING;
    case PS_SERVING:
      return TFX__INSTANCE_STATE__INSTANCE_SERVING;
    case PS_UNREPLICATED:
      return TFX__INSTANCE_STATE__INSTANCE_UNREPLICATED;
    case PS_BACKUP:
      return TFX__INSTANCE_STATE__INSTANCE_BACKUP;
    case PS_BEHIND:
      return TFX__INSTANCE_STATE__INSTANCE_BEHIND;
  }
  return TFX__INSTANCE_STATE__INSTANCE_NONE;
}

/* Logs event `id` at `level`: the caller's words, and the change of state when there is one. */
static void log_change(const ps_state *p, ps_instance_state to, int level, const char *id, const char *fmt,
                       va_list ap) {
  char what[512];
  vsnprintf(what, sizeof what, fmt, ap);
  if (p->state == to) {
    tfx_log(level, id, "%s", what);
  } else {
    tfx_log(level, id, "%s [%s -> %s]", what, ps__state_name(p->state), ps__state_name(to));
  }
}

void ps__set_state(ps_state *p, ps_instance_state to, int level, const char *id, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_change(p, to, level, id, fmt, ap);
  va_end(ap);
  p->state = to;
}

void ps__fall_behind(ps_state *p, int level, const char *id, const char *fmt, ...) {
  ps_instance_state to = p->state == PS_BACKUP ? PS_BEHIND : p->state;
  va_list ap;
  va_start(ap, fmt);
  log_change(p, to, level, id, fmt, ap);
  va_end(ap);
  p->state = to;
}

int ps__initialized(const ps_state *p) {
  return p && p->state != PS_WAITING;
}

int ps__serves(const ps_state *p) {
  return p->state == PS_SERVING || p->state == PS_UNREPLICATED;
}

int ps__promoted(const ps_state *p) {
  return p->backup_of && ps__serves(p);
}

int ps__is_copy(const ps_state *p) {
  return p->state == PS_BACKUP || p->state == PS_BEHIND;
}

int ps__reports_unreplicated(const ps_state *p) {
  /* a restarted ps whose own instance came back as a copy (its promoted backup serves it) has no backup either */
  return p->state == PS_UNREPLICATED || (ps__is_copy(p) && p->cfg.ps_replicas && p->node &&
                                         p->index == p->node->index);
}
