/* Declarations private to src/store (the store__ tier: no other room may call them). */
#ifndef TFX_STORE_IMPL_H
#define TFX_STORE_IMPL_H

#include <stdint.h>

#include "common/err.h"

/* The checkpoint steps under run_dir/checkpoints (directories named exactly ckpt-STEP), newest first, into *steps
 * (caller frees; NULL when there are none); returns how many. */
int store__ckpt_steps(const char *run_dir, int64_t **steps);

/* Checks the own files of the checkpoint in dir (ckpt.c's manifest check, full or by size, with ctx); TFX_OK or
 * the error naming what is wrong. */
typedef int (*store__ckpt_files_fn)(const char *dir, void *ctx, tfx_err *err);
/* Checks with files(dir, ctx) every checkpoint the row files of dir (at step, n_ps shards) are deltas of, link by
 * link down to each full file: a checkpoint with a corrupt or missing link is not one (TFX_ECORRUPT, naming the
 * link). */
int store__ckpt_check_chain(const char *dir, int64_t step, int n_ps, store__ckpt_files_fn files, void *ctx,
                            tfx_err *err);

#endif
