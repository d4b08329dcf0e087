/* The experiment's data section to a dataset: IDX (images + labels files), CSV, LibSVM or TFRecord of
 * tf.train.Example, chosen by data.format; features scaled by data.scale; checked against the model's input. */
#ifndef TFX_SOURCE_H
#define TFX_SOURCE_H

#include "config.h"
#include "dataset.h"

/* Loads the train (eval = 0) or eval (eval = 1) set; caller owns *out; free with tfx_dataset_destroy.
 * TFX_ESHAPE when an example's size differs from expect_dim (0: any). */
int tfx_dataset_load_config(const tfx_config *cfg, int eval, size_t expect_dim, tfx_dataset **out, tfx_err *err);

#endif
