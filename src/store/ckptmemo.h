/* The checkpoints this process has already verified (ckptmemo.c): pruning reads again only those whose files
 * changed since. */
#ifndef TFX_STORE_CKPTMEMO_H
#define TFX_STORE_CKPTMEMO_H

#include <stdint.h>

/* The fingerprint of a checkpoint directory's files (names, inodes, sizes, mtimes); 0 when it cannot be read. */
uint64_t tfx_ckpt_memo_print(const char *dir);
/* Whether dir, with this fingerprint, was verified by this process: 1 and its step and shard count, else 0. */
int tfx_ckpt_memo_find(const char *dir, uint64_t print, int64_t *step, int *n_ps);
/* Remembers that dir, with this fingerprint, was verified (the oldest of 64 remembered is forgotten). */
void tfx_ckpt_memo_keep(const char *dir, uint64_t print, int64_t step, int n_ps);
/* How many times tfx_ckpt_memo_find answered yes (tests, counters). */
uint64_t tfx_ckpt_verify_hits(void);

#endif
