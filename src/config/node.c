/* The stop flag and its signal handlers. */
#include "config/node.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag, signals_seen;
static pid_t supervisor; /* a ps or worker of `tfx-node local`: its supervisor, which stops the run gracefully */

/* A ps or worker under `local` passes a stop signal from anyone but its supervisor (a terminal, kill) to the
 * supervisor, which has the master checkpoint and stop everyone; it stops by itself when the supervisor sends the
 * signal or is gone. */
static void on_signal(int sig, siginfo_t *info, void *uc) {
  (void)sig, (void)uc;
  signals_seen++;
  int from_supervisor = info && info->si_pid == supervisor;
  if (supervisor > 0 && !from_supervisor && getppid() == supervisor && kill(supervisor, SIGTERM) == 0) {
    return;
  }
  stop_flag = 1;
}

void tfx_signals_install(void) {
  const char *sup = getenv(TFX_SUPERVISOR_ENV);
  supervisor = sup ? (pid_t)atol(sup) : 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL); /* a closed terminal or `kill -HUP` stops as SIGTERM does: with a checkpoint */
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN); /* a file-size limit (ulimit -f) fails the write with EFBIG, named, not the process */
}

int tfx_signals_seen(void) {
  return signals_seen;
}

int tfx_stop_requested(void) {
  return stop_flag != 0;
}
