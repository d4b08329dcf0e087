/* The checkpoints this process has already verified (ckptmemo.c): pruning reads again only those whose files
 * changed since. */
#ifndef TFX_STORE_CKPTMEMO_H
#define TFX_STORE_CKPTMEMO_H

#include <stdint.h>

#include "common/err.h"

/* The fingerprint of a checkpoint directory's files (names, inodes, sizes, mtimes); 0 when it cannot be read. */
uint64_t tfx_ckpt_memo_print(const char *dir);
/* Whether dir, with this fingerprint, was verified by this process: 1 and its step and shard count, else 0. */
int tfx_ckpt_memo_find(const char *dir, uint64_t print, int64_t *step, int *n_ps);
/* Remembers that dir, with this fingerprint, was verified (the oldest of 64 remembered is forgotten). */
void tfx_ckpt_memo_keep(const char *dir, uint64_t print, int64_t step, int n_ps);
/* A checkpoint whose manifest this process has just written from its writers' replies (each ps checksummed its
 * files from the bytes it wrote and fsynced them): the manifest and each file's size are checked, not the bytes
 * again, and dir is remembered as verified, so pruning does not read it. Resuming and the reading commands still
 * verify every byte. TFX_ECORRUPT / TFX_ENOTFOUND naming the file, as tfx_ckpt_verify. */
int tfx_ckpt_memo_accept(const char *dir, tfx_err *err);
/* How many times tfx_ckpt_memo_find answered yes (tests, counters). */
uint64_t tfx_ckpt_verify_hits(void);

#endif
