/* Declarations private to src/config: the hyperparameter substitution the experiment parser applies. */
#ifndef TFX_HPARAMS_IMPL_H
#define TFX_HPARAMS_IMPL_H

#include <json-c/json.h>

#include "common/err.h"

/* Replaces every "$NAME" reference in root by its hyperparameter's default; leaves the section in place. */
int config__hparams_apply_defaults(json_object *root, tfx_err *err);

#endif
