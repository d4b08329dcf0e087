/* Declarations private to src/store (the store__ tier: no other room may call them). */
#ifndef TFX_STORE_IMPL_H
#define TFX_STORE_IMPL_H

#include <stdint.h>

#include "common/err.h"

/* The checkpoint steps under run_dir/checkpoints (directories named exactly ckpt-STEP), newest first, into *steps
 * (caller frees; NULL when there are none); returns how many. */
int store__ckpt_steps(const char *run_dir, int64_t **steps);

/* tfx_ckpt_check of dir's own files only (its manifest and the files it lists), not the links it is a delta of. */
int store__ckpt_check_files(const char *dir, int full, int64_t *step, int *n_ps, tfx_err *err);
/* Checks (as store__ckpt_check_files, full or by size) every checkpoint the row files of dir (at step, n_ps
 * shards) are deltas of, link by link down to each full file: a checkpoint with a corrupt or missing link is not
 * one (TFX_ECORRUPT, naming the link). */
int store__ckpt_check_chain(const char *dir, int64_t step, int n_ps, int full, tfx_err *err);

#endif
