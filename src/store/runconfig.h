/* The saved experiment of a run (RUN/config.json, RUN/experiment.json): once the run has a checkpoint its model
 * is fixed; a resume may change what is safe (steps, intervals, learning rate), recorded as a new revision. */
#ifndef TFX_STORE_RUNCONFIG_H
#define TFX_STORE_RUNCONFIG_H

#include "common/err.h"

/* Writes json, with the binary's provenance added, as run_dir/name. When resume is set and the run has a checkpoint, the file there is checked first:
 * a different "model" section is refused (TFX_ECONFIG naming the differing keys; nothing is written); other
 * differences keep the old file as name's revision (config.rev-N.json) beside the new one. */
int tfx_run_save_config(const char *run_dir, const char *name, const char *json, int resume, tfx_err *err);

#endif
