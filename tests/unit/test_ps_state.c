/* Unit tests of src/ps/state.c: a ps instance's state changes only through ps__set_state, which logs the change
 * once in its event's line; a refused forward puts only a backup copy BEHIND; the questions asked of a state
 * (serves, promoted, a copy, reports unreplicated) follow from it. No sockets. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ps/ps_impl.h"

static tfx_node node;

static ps_state *make(int index, int backup_of) {
  ps_state *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  node.index = 1;
  p->node = &node;
  p->index = index;
  p->backup_of = backup_of;
  p->cfg.ps_replicas = 1;
  return p;
}

/* Everything written to the redirected stderr so far; the caller frees it. */
static char *logged(void) {
  fflush(stderr);
  FILE *f = cr_get_redirected_stderr();
  char *text = calloc(1, 8192);
  cr_assert_not_null(text);
  size_t n = fread(text, 1, 8191, f);
  text[n] = '\0';
  return text;
}

/* How many lines of text hold needle. */
static int lines_with(const char *text, const char *needle) {
  int n = 0;
  for (const char *at = strstr(text, needle); at; at = strstr(at + 1, needle)) {
    n++;
  }
  return n;
}

Test(ps_state, a_change_is_logged_once_in_its_events_line, .init = cr_redirect_stderr) {
  ps_state *p = make(0, 1);
  cr_assert_eq(p->state, PS_WAITING);
  cr_assert_not(ps__initialized(p));
  ps__set_state(p, PS_BACKUP, TFX_LOG_INFO, "PS-INIT", "backup of ps instance %d", 0);
  cr_assert(ps__is_copy(p) && !ps__serves(p) && !ps__promoted(p));
  ps__set_state(p, PS_UNREPLICATED, TFX_LOG_WARN, "PS-PROMOTED", "ps %d now serves ps instance %d", 1, 0);
  cr_assert(ps__serves(p) && ps__promoted(p) && !ps__is_copy(p));
  ps__set_state(p, PS_UNREPLICATED, TFX_LOG_WARN, "PS-PROMOTED", "again");
  char *text = logged();
  cr_assert_eq(lines_with(text, "PS-INIT backup of ps instance 0 [waiting-for-plan -> backup]"), 1, "%s", text);
  cr_assert_eq(lines_with(text, "PS-PROMOTED ps 1 now serves ps instance 0 [backup -> unreplicated]"), 1, "%s", text);
  cr_assert_eq(lines_with(text, "PS-PROMOTED again\n"), 1, "an event without a change names none: %s", text);
  cr_assert_eq(lines_with(text, "->"), 2, "%s", text);
  free(text);
  free(p);
}

Test(ps_state, only_a_backup_copy_falls_behind_and_then_is_never_promoted, .init = cr_redirect_stderr) {
  ps_state *p = make(0, 1);
  p->state = PS_SERVING;
  ps__fall_behind(p, TFX_LOG_WARN, "PS-BEHIND", "a refused forward");
  cr_assert_eq(p->state, PS_SERVING, "a serving instance takes no forward: it stays serving");
  p->state = PS_BACKUP;
  ps__fall_behind(p, TFX_LOG_WARN, "PS-BEHIND", "a refused forward");
  cr_assert_eq(p->state, PS_BEHIND);
  cr_assert(ps__is_copy(p) && !ps__serves(p) && !ps__promoted(p));
  free(p);
}

Test(ps_state, status_says_unreplicated_for_an_instance_without_a_backup, .init = cr_redirect_stderr) {
  ps_state *own = make(1, 0);
  own->state = PS_SERVING;
  cr_assert_not(ps__reports_unreplicated(own));
  own->state = PS_UNREPLICATED;
  cr_assert(ps__reports_unreplicated(own));
  own->backup_of = 1; /* restarted: its own instance came back as a copy, served alone by the promoted backup */
  own->state = PS_BACKUP;
  cr_assert(ps__reports_unreplicated(own));
  ps_state *mirror = make(0, 1);
  mirror->state = PS_BACKUP;
  cr_assert_not(ps__reports_unreplicated(mirror), "a mirror of another ps's instance says nothing of it");
  free(own);
  free(mirror);
}
