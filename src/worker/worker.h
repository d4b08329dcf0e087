/* The worker role: registers with the master, gets the plan, then loops pull -> forward/backward -> push on its
 * data shard until the global step reaches max_steps. One thread owns every socket. */
#ifndef TFX_WORKER_H
#define TFX_WORKER_H

#include "config/node.h"

/* Runs the worker until training ends, STOP or SIGTERM. */
int tfx_worker_run(tfx_node *n, tfx_err *err);

#endif
