/* A dataset's labels against a model's classes, checked when the set is loaded, before a run writes anything:
 * a label outside [0, classes) is TFX_EINVAL naming the file and its line (CSV, LibSVM) or record (TFRecord, an
 * IDX labels file), found again by the reader's rules only when one is bad (the readers keep no place per
 * example). Loading errors are the readers' (data/source.h). Thread-safety: no shared state. */
#ifndef TFX_LABELS_H
#define TFX_LABELS_H

#include "config/config.h"
#include "data/dataset.h"
#include "nn/model.h"

/* Checks the labels of d, the train (eval = 0) or eval (eval = 1) set of cfg, whose example k is the file's
 * example first + k * stride (a worker's IDX shard; 0 and 1 for a whole set). Borrows everything until return. */
int tfx_labels_check(const tfx_model *m, const tfx_config *cfg, int eval, const tfx_dataset *d, size_t first,
                     size_t stride, tfx_err *err);
/* tfx_dataset_load_config for the model's input size, then tfx_labels_check; caller owns *out (written on
 * success only); free with tfx_dataset_destroy. */
int tfx_labels_load(const tfx_model *m, const tfx_config *cfg, int eval, tfx_dataset **out, tfx_err *err);
/* tfx_train_input_open for the model's input size, then the labels of a set in memory checked (a stream's are
 * checked per batch by the step); on failure nothing is left open. */
int tfx_labels_train_input(const tfx_model *m, const tfx_config *cfg, int index, int count, tfx_dataset **data,
                           tfx_batcher **out, tfx_err *err);
/* Loads and checks the train set (a stream is only opened), the eval set and every validation set, keeping none:
 * what `local` does before it writes anything, so that its processes do not start on input they would refuse. */
int tfx_labels_check_inputs(const tfx_model *m, const tfx_config *cfg, tfx_err *err);

#endif
