/* Hyperparameters declared in the experiment ({"hyperparameters": {NAME: SPEC}}) and referenced from any other
 * field as the string "$NAME". SPEC is {"type": "constant", "value": V}, {"type": "int", "min": A, "max": B},
 * {"type": "float"|"log_float", "min": A, "max": B} or {"type": "categorical", "values": [...]}; an optional
 * "default" is what a plain run uses (else the constant, the lower bound, or the first value).
 * Errors: TFX_ECONFIG naming the hyperparameter. */
#ifndef TFX_HPARAMS_H
#define TFX_HPARAMS_H

#include <stdint.h>

#include "common/err.h"
#include "config/config.h"

/* Trial `trial` of a search: the experiment text with every hyperparameter fixed to a sampled value (random:
 * seeded by seed and trial; grid: the trial-th point, min/max ranges taken at 3 points) and a summary
 * "name=value ..."; caller owns both; free with free(). TFX_ENOTFOUND when the grid has fewer points. */
int tfx_hparams_trial(const char *experiment, tfx_search_method method, uint64_t seed, int trial, char **out,
                      char **summary, tfx_err *err);

#endif
