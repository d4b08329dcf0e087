/* Whole variables gathered from a checkpoint (its shards reassembled, slices joined along axis 0) or from an
 * export's safetensors file; loaded into a model by name. Used by export, inspect and predict. */
#ifndef TFX_WEIGHTS_H
#define TFX_WEIGHTS_H

#include <stdint.h>

#include "common/err.h"
#include "nn/model.h"

typedef struct tfx_weight {
  char name[160];
  int rank;
  int64_t shape[8];
  size_t count;
  float *data;
  char holders[64]; /* which ps held it: "ps 0" or "ps 0,1" */
} tfx_weight;

typedef struct tfx_weights {
  tfx_weight *w;
  int n;
  int64_t step;
  char source[1100];
} tfx_weights;

/* Gathers the variables of the checkpoint directory dir; caller owns ws; release with tfx_weights_fini. */
int tfx_weights_from_checkpoint(const char *dir, tfx_weights *ws, tfx_err *err);
/* As tfx_weights_from_checkpoint without the row files of lazy tables (read them with a tfx_rowindex, rowindex.h);
 * caller owns ws; release with tfx_weights_fini. */
int tfx_weights_dense_from_checkpoint(const char *dir, tfx_weights *ws, tfx_err *err);
/* As tfx_weights_from_checkpoint, with the optimizer slots too, each whole as "VAR@SLOT" (a resume's state). */
int tfx_weights_with_slots(const char *dir, tfx_weights *ws, tfx_err *err);
/* Gathers the newest usable checkpoint of a run directory (tfx_ckpt_read_point: newer unusable ones are named in
 * CKPT-SKIP warnings, nothing moves); TFX_ECORRUPT with their reasons when none is usable. */
int tfx_weights_from_run(const char *run_dir, tfx_weights *ws, tfx_err *err);
/* Reads an export directory's model.safetensors. */
int tfx_weights_from_export(const char *dir, tfx_weights *ws, tfx_err *err);
/* Gathers from an export directory, a checkpoint directory or a run directory, whichever path is. */
int tfx_weights_from_any(const char *path, tfx_weights *ws, tfx_err *err);
/* Releases the weights. */
void tfx_weights_fini(tfx_weights *ws);
/* Copies every model variable from ws by name; TFX_ESHAPE naming a missing or mis-shaped one. */
int tfx_weights_load_model(const tfx_weights *ws, tfx_model *m, tfx_err *err);
/* As tfx_weights_load_model, leaving the lazy tables ws does not hold to a row source (tfx_rowindex). */
int tfx_weights_load_dense(const tfx_weights *ws, tfx_model *m, tfx_err *err);

#endif
