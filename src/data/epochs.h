/* The epoch budget: training.epochs turned into a step count that every role (trainer, master, workers,
 * evaluator) computes alike from the experiment alone, so they all stop at the same global step.
 *
 * N is the number of training examples, counted exactly and cheaply: an IDX pair from its headers (gzip too),
 * CSV and LibSVM files by their lines with the readers' own rules (blank lines, header, comments), never parsed
 * or loaded, TFRecord files by their record framing (one Example per record). A global step consumes batch_size *
 * accumulate examples, times the replicas a sync step aggregates (training.replicas_to_aggregate, 0: every worker); in
 * async and ssp every push is one global step. The budget is ceil(epochs * N / examples per step), and max_steps
 * becomes the smaller of the two.
 *
 * Ownership: nothing is allocated for the caller. Thread-safety: no shared state. Errors: every reader's
 * (TFX_ENOTFOUND, TFX_ESYS, TFX_ECORRUPT naming the file), TFX_ECONFIG (unpaired IDX files, no examples). */
#ifndef TFX_EPOCHS_H
#define TFX_EPOCHS_H

#include <stdint.h>

#include "common/err.h"
#include "config/config.h"

/* Counts the training examples of cfg (data.train, every file of a glob or list when streaming) into *n. */
int tfx_data_count_examples(const tfx_config *cfg, int64_t *n, tfx_err *err);
/* Examples one global step consumes; n_workers 0 is the single-process trainer (one batch a step). Pure. */
int64_t tfx_epochs_examples_per_step(const tfx_config *cfg, int n_workers);
/* ceil(epochs * examples / per_step), INT64_MAX if that overflows; 0 when epochs is 0 (no budget). Pure. */
int64_t tfx_epochs_steps(int64_t epochs, int64_t examples, int64_t per_step);
/* With data.train.follow and no max_steps given, sets max_steps to TFX_STEPS_FOREVER (the run goes on until
 * stopped). With training.epochs > 0, counts the examples, lowers cfg->max_steps to the budget and logs it once
 * (TRAIN-EPOCHS); *budget gets the budget, 0 when training.epochs is 0 (nothing read, cfg unchanged). */
int tfx_epochs_apply(tfx_config *cfg, int n_workers, int64_t *budget, tfx_err *err);

#endif
