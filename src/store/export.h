/* Export directories: model.safetensors (the variables), model.json (the run's experiment) and metadata.json
 * (step, config checksum, source, the eval line of that step). Written by `tfx-node export` and, as training goes,
 * by the trainer and the chief (export.every_checkpoint to EXPORT_DIR/STEP, export.on_best to EXPORT_DIR/best).
 * Errors: TFX_ESYS / TFX_ENOTFOUND naming the path, TFX_ENOMEM. */
#ifndef TFX_STORE_EXPORT_H
#define TFX_STORE_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "config/config.h"
#include "store/weights.h"

/* Writes the export of ws into the existing directory dir; config is the experiment's JSON text and run_dir the
 * run whose metrics.jsonl gives the step's eval line (both borrowed). */
int tfx_export_write(const tfx_weights *ws, const char *config, const char *dir, const char *run_dir, tfx_err *err);
/* Where a run's exports go as training goes (export.dir, or RUN/export), into out[n]. */
void tfx_export_root(const tfx_config *cfg, const char *run_dir, char *out, size_t n);
/* Exports run_dir's checkpoint at step to ROOT/NAME (name NULL: the step's number), replacing what was there: it
 * is written beside it first and renamed into place, so a reader sees the old or the new export whole. */
int tfx_export_checkpoint(const tfx_config *cfg, const char *run_dir, int64_t step, const char *name, tfx_err *err);

#endif
