/* Checkpoint shard files and checkpoint directories.
 *
 * A shard file (one per ps per checkpoint) is little-endian binary:
 *   header  "TFXSHRD1" (8 bytes), u32 format version (1), u32 entry count, i64 step
 *   entry   u16 name length, name bytes, u32 rank, i64 dims[rank] (the whole variable), i64 row_begin,
 *           i64 row_end, u64 version, u64 nbytes, u32 crc32 (zlib) of the data, data (float32, nbytes)
 *   trailer "TFXEND\0\0", u32 crc32 of every byte before the trailer
 * Names are variable keys ("dense_1/kernel", "dense_1/kernel/part_1") or optimizer slots ("KEY@m", "KEY@v").
 * Files are written to NAME.tmp, fsync'ed and renamed, so a reader never sees a partial file.
 *
 * A checkpoint directory RUN/checkpoints/ckpt-<step>/ holds the shards and manifest.json, written last and
 * atomically by the master: {"step": S, "shards": [{"file": "ps-0.shard", "crc32": C, "bytes": B}, ...]}.
 * A checkpoint exists if and only if its manifest exists and every shard matches its size and checksum. */
#ifndef TFX_CKPT_H
#define TFX_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct tfx_ckpt_entry {
  char name[160];
  int rank;
  int64_t dims[8];
  int64_t row_begin, row_end;
  uint64_t version;
  size_t count; /* float32 elements */
  float *data;  /* borrowed when writing; owned by the tfx_ckpt when read */
} tfx_ckpt_entry;

typedef struct tfx_ckpt {
  int64_t step;
  int n;
  tfx_ckpt_entry *entries;
} tfx_ckpt;

/* Writes a shard atomically (tmp, fsync, rename); entries are borrowed. *crc gets the file checksum. */
int tfx_ckpt_write(const char *path, int64_t step, const tfx_ckpt_entry *entries, int n, uint32_t *crc, uint64_t *bytes,
                   tfx_err *err);
/* Reads and verifies a shard; caller owns *out; free with tfx_ckpt_destroy. Errors name file and offset. */
int tfx_ckpt_read(const char *path, tfx_ckpt **out, tfx_err *err);
/* Frees a shard read by tfx_ckpt_read; NULL does nothing. */
void tfx_ckpt_destroy(tfx_ckpt *c);
/* Finds an entry by name (borrowed from c), or NULL. */
const tfx_ckpt_entry *tfx_ckpt_find(const tfx_ckpt *c, const char *name);
/* The crc32 and size of a whole file. */
int tfx_file_crc32(const char *path, uint32_t *crc, uint64_t *bytes, tfx_err *err);

/* The directory of the checkpoint at step (into out). */
void tfx_ckpt_dir(const char *run_dir, int64_t step, char *out, size_t n);
/* Writes dir/manifest.json atomically for n_ps shards named ps-K.shard, with their checksums. */
int tfx_ckpt_write_manifest(const char *dir, int64_t step, int n_ps, const uint32_t *crc, const uint64_t *bytes,
                            tfx_err *err);
/* Checks dir/manifest.json and every shard it lists; *n_ps gets the shard count. */
int tfx_ckpt_verify(const char *dir, int64_t *step, int *n_ps, tfx_err *err);
/* The newest complete checkpoint of a run: its step and directory. TFX_ENOTFOUND when there is none. */
int tfx_ckpt_latest(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err);
/* Removes all but the newest keep complete checkpoints, and any older incomplete ones. */
void tfx_ckpt_prune(const char *run_dir, int keep);

/* Creates a directory and its parents (mkdir -p). */
int tfx_mkdirs(const char *path, tfx_err *err);

#endif
