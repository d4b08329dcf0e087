/* The experiment's data section to a dataset: IDX (images + labels files), CSV, LibSVM or TFRecord of
 * tf.train.Example, chosen by data.format; features scaled by data.scale, then normalized by data.mean and
 * data.std ((x * scale - mean) / std); checked against the model's input. */
#ifndef TFX_SOURCE_H
#define TFX_SOURCE_H

#include "config/config.h"
#include "data/dataset.h"

/* Loads the train (eval = 0) or eval (eval = 1) set; caller owns *out; free with tfx_dataset_destroy.
 * TFX_ESHAPE when an example's size differs from expect_dim (0: any). */
int tfx_dataset_load_config(const tfx_config *cfg, int eval, size_t expect_dim, tfx_dataset **out, tfx_err *err);

/* Where example `index` of the set tfx_dataset_load_config loads (eval as there) was read, into buf: "FILE: line
 * N" (CSV, LibSVM: 1-based, found again by the reader's rules) or "FILE: record N" (TFRecord; IDX: its labels file;
 * 0-based, as the readers' messages). TFX_ENOTFOUND when the file has no such example. */
int tfx_dataset_where(const tfx_config *cfg, int eval, size_t index, char *buf, size_t len, tfx_err *err);

/* The training input of shard `index` of `count`: a batcher over the loaded train set (*data, caller owns), or,
 * with data.stream or data.shard_by = file, over a stream of the files (*data NULL). Caller owns *out. */
int tfx_train_input_open(const tfx_config *cfg, int index, int count, size_t dim, tfx_dataset **data, tfx_batcher **out,
                         tfx_err *err);

#endif
