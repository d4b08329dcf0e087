/* Warm start (TensorFlow's WarmStartSettings, tfutils' load_params): a fresh run takes some variables from
 * another run, checkpoint or export, by name prefix (`warm_start.to_restore`) and with renames
 * (`warm_start.rename`, the load_param_dict), and initializes everything else as usual. */
#ifndef TFX_WARMSTART_H
#define TFX_WARMSTART_H

#include "config/config.h"
#include "nn/model.h"

/* Overwrites the selected variables of m (already initialized) from cfg->warm_from; TFX_ESHAPE naming the
 * variable when shapes differ, TFX_ENOTFOUND when a prefix named in to_restore matches nothing. *taken gets
 * how many variables were restored. */
int tfx_warm_start(const tfx_config *cfg, tfx_model *m, int *taken, tfx_err *err);

#endif
