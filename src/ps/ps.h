/* The parameter server role: holds the variables (or axis-0 slices) the plan gives it, answers pulls, applies
 * pushed gradients with the experiment's optimizer (sync, async or bounded-staleness), writes checkpoint shards.
 * One thread owns the ROUTER socket and all state. */
#ifndef TFX_PS_H
#define TFX_PS_H

#include "config/node.h"

/* Runs the ps until STOP or SIGTERM; returns TFX_OK on a clean stop. */
int tfx_ps_run(tfx_node *n, tfx_err *err);

#endif
