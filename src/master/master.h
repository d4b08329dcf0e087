/* The master (chief) role: waits for every ps and worker, runs the device setter, initializes or restores the
 * ps, collects metrics, evaluates, checkpoints and stops the cluster at max_steps. One thread owns every
 * socket. Also exports the device setter for `tfx-node plan`. */
#ifndef TFX_MASTER_H
#define TFX_MASTER_H

#include <stdio.h>

#include "config/node.h"

/* Runs the master until the run ends; TFX_OK when max_steps was reached and the final checkpoint written. */
int tfx_master_run(tfx_node *n, tfx_err *err);
/* Prints the placement plan of the experiment's model over n_ps parameter servers. */
int tfx_master_print_plan(const tfx_config *cfg, int n_ps, FILE *f, tfx_err *err);

#endif
