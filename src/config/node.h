/* What every role needs to start: the cluster, this task, the resolved experiment, the run directory; and the
 * process-wide stop flag set by SIGTERM/SIGINT/SIGHUP. A tfx_node is filled by the command line and owned by main. */
#ifndef TFX_NODE_H
#define TFX_NODE_H

#include "config/cluster.h"
#include "config/config.h"

typedef struct tfx_node {
  tfx_cluster *cluster; /* owned by main */
  tfx_role role;
  int index;
  tfx_config cfg;
  char config_path[512];
  char run_dir[512];
  char bind_host[128];
  int resume;    /* 1: restore the newest checkpoint of run_dir if any (default) */
  int http_port; /* --http-port: serve /metrics and /status (0: off; the chief also reads observe.http_port) */
  struct tfx_plugin_handle *plugin; /* model.plugin, loaded by main when the experiment names one */
  int chief_pid;                    /* worker 0 acting as chief: the pid of the master it forked (0: none) */
} tfx_node;

/* Installs SIGTERM/SIGINT/SIGHUP handlers that set the stop flag; ignores SIGPIPE, and SIGXFSZ (a write past a
 * file-size limit then fails with EFBIG). */
void tfx_signals_install(void);
/* The environment variable `local` sets in its ps and workers: the supervisor's pid, which their stop signals go to. */
#define TFX_SUPERVISOR_ENV "TFX_SUPERVISOR_PID"
/* How many SIGINT/SIGTERM/SIGHUP this process has received (a second one stops the supervisor at once). */
int tfx_signals_seen(void);
/* Nonzero once SIGTERM, SIGINT or SIGHUP arrived. */
int tfx_stop_requested(void);

#endif
