/* RUN/checkpoints/best.json: which checkpoint is the best by a watched eval metric (checkpoint.keep_best). Written
 * by the single-process trainer and the chief whenever the best changes, read by pruning (the best checkpoint is
 * never removed), `tfx-node export --best` and a resumed run. The one module that names and writes that file.
 * Errors: TFX_ENOTFOUND (no file: no best yet), TFX_ECORRUPT (unreadable or missing fields), TFX_ESYS. */
#ifndef TFX_STORE_BEST_H
#define TFX_STORE_BEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* The best checkpoint: its step, the step its evaluation scored (the same in `train`; in a cluster the chief
 * checkpoints right after the evaluation, at the first step every ps can still write) and the metric's value. */
typedef struct tfx_best {
  char metric[16];
  int maximize;
  double value;
  int64_t step, eval_step;
} tfx_best;

/* The path of run_dir's best.json (into out[n]). */
void tfx_best_path(const char *run_dir, char *out, size_t n);
/* Writes run_dir's best.json atomically (tmp + rename). */
int tfx_best_write(const char *run_dir, const tfx_best *b, tfx_err *err);
/* Reads run_dir's best.json into *b (written only on success); TFX_ENOTFOUND when the run has none. */
int tfx_best_read(const char *run_dir, tfx_best *b, tfx_err *err);
/* The step of run_dir's best checkpoint, or -1 when it records none (or cannot be read). */
int64_t tfx_best_step(const char *run_dir);

#endif
