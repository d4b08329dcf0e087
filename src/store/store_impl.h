/* Declarations private to src/store (the store__ tier: no other room may call them). */
#ifndef TFX_STORE_IMPL_H
#define TFX_STORE_IMPL_H

#include <stdint.h>

/* The checkpoint steps under run_dir/checkpoints (directories named exactly ckpt-STEP), newest first, into *steps
 * (caller frees; NULL when there are none); returns how many. */
int store__ckpt_steps(const char *run_dir, int64_t **steps);

#endif
