/* The stop flag and its signal handlers. */
#include "config/node.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

void tfx_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

int tfx_stop_requested(void) {
  return stop_flag != 0;
}

void tfx_request_stop(void) {
  stop_flag = 1;
}
